//! `find_free_port`: a TCP port that nothing listens on now — the first at or after `near`
//! (a bounded search, never past 65535), or one the OS hands out (`bind :0`). A candidate, not a
//! reservation: the test bind is released at once.
//!
//! Must never: bind anything but 127.0.0.1 and ::1, keep a test bind open, or try more than
//! `HOLDMAP_FREE_PORT_PROBES_MAX` ports.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};

use serde_json::{Map, Value, json};

use crate::holdmap::model::Snapshot;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, ToolDef};
use crate::limits::{HOLDMAP_EPHEMERAL_TRIES, HOLDMAP_FREE_PORT_PROBES_MAX};
use crate::os::sockets::{Protocol, SocketState};

/// What every answer says about the port it gives.
pub(super) const NOTE: &str = "a candidate, not a reservation: nothing listened on it and it \
    could be bound a moment ago, but another process can take it before yours does; bind it \
    soon, and ask again if the bind fails";

pub(super) fn def() -> ToolDef {
    ToolDef {
        name: "find_free_port",
        title: "Find a free port",
        description: "Finds a TCP port nothing listens on now. With `near`, the first port at or \
            after it (at most 500 tried, never past 65535) that no process holds on any address and \
            that binds on 127.0.0.1 and ::1; without it, a port the operating system hands out. The \
            port is a candidate, not a reservation: another process can take it before yours binds \
            it. Read-only: the test bind is released at once.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "near": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 65535,
                    "description": "Start the search here (for example your project's usual port)."
                }
            },
            "additionalProperties": false,
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "candidate": {"type": "boolean", "const": true, "description": "Always true: not a reservation."},
                "note": {"type": "string"}
            },
            "required": ["port", "candidate", "note"],
            "additionalProperties": false,
        }),
        annotations: Annotations::READ_ONLY,
    }
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let near = crate::holdmap::schema::port_argument(args, "near");
    let snap = match super::observe(cx) {
        Ok(s) => s,
        Err(e) => return Reply::Now(Outcome::Failed(e)),
    };
    let held = held_ports(&snap);
    let v6 = ipv6_available();
    let binds = |port: u16| binds_loopback(port, v6);
    Reply::Now(match near {
        Some(near) => match find_near(&held, near, binds) {
            Ok((port, skipped)) => found(port, Some((near, skipped))),
            Err(e) => Outcome::Failed(e),
        },
        None => match find_ephemeral(&held, binds) {
            Some(port) => found(port, None),
            None => Outcome::Failed(format!(
                "the operating system handed out {HOLDMAP_EPHEMERAL_TRIES} ports and each was \
                 held or could not be bound on loopback; try again, or pass `near` to search a range"
            )),
        },
    })
}

fn found(port: u16, near: Option<(u16, usize)>) -> Outcome {
    let summary = match near {
        Some((near, 0)) => format!("Port {port} is free now (searched from {near}): {NOTE}."),
        Some((near, skipped)) => format!(
            "Port {port} is free now (searched from {near}; {skipped} port(s) before it are in \
             use): {NOTE}."
        ),
        None => format!("Port {port} is free now (handed out by the operating system): {NOTE}."),
    };
    Outcome::Done {
        summary,
        structured: json!({"port": port, "candidate": true, "note": NOTE}),
    }
}

/// Every TCP port something listens on, on any address (hidden owners included: their sockets
/// are in the table even when their processes are not).
pub(super) fn held_ports(snap: &Snapshot) -> BTreeSet<u16> {
    snap.sockets
        .iter()
        .filter(|s| s.row.protocol == Protocol::Tcp && s.row.state == SocketState::Listen)
        .map(|s| s.row.local.port())
        .collect()
}

/// The first port from `near` up that is not `held` and `binds`; with how many were skipped.
pub(super) fn find_near(
    held: &BTreeSet<u16>,
    near: u16,
    binds: impl Fn(u16) -> bool,
) -> Result<(u16, usize), String> {
    let last = near.saturating_add(HOLDMAP_FREE_PORT_PROBES_MAX - 1);
    for (skipped, port) in (near..=last).enumerate() {
        if !held.contains(&port) && binds(port) {
            return Ok((port, skipped));
        }
    }
    Err(format!(
        "no free TCP port in {near}-{last} ({} tried): each is in use or could not be bound on \
         loopback; try another `near`, or omit it to let the operating system choose",
        usize::from(last - near) + 1
    ))
}

/// A port the OS hands out for `127.0.0.1:0`, checked like any other.
fn find_ephemeral(held: &BTreeSet<u16>, binds: impl Fn(u16) -> bool) -> Option<u16> {
    (0..HOLDMAP_EPHEMERAL_TRIES).find_map(|_| {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        (!held.contains(&port) && binds(port)).then_some(port)
    })
}

/// Whether this machine has IPv6 loopback at all (a kernel or container without it).
fn ipv6_available() -> bool {
    TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok()
}

/// Whether `port` binds on 127.0.0.1, and on ::1 when `v6`; released at once.
fn binds_loopback(port: u16, v6: bool) -> bool {
    let v4 = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_ok();
    v4 && (!v6 || TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))).is_ok())
}

#[cfg(test)]
pub(super) fn binds_loopback_for_tests(port: u16) -> bool {
    binds_loopback(port, ipv6_available())
}
