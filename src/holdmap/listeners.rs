//! A snapshot read as listening ports: each (protocol, port, owner) with its addresses, exposure,
//! process, redacted command, project, framework, whether it is a dev server, whether it is the
//! current account's, and whether it is protected; its JSON form and that form's schema; and
//! the `list_ports` filter (`matches`).
//!
//! Owns: grouping sockets into listeners and judging each one from the snapshot. Must never:
//! read `/proc` (only the snapshot), drop a listening socket because its owner cannot be seen (a
//! busy port must never look free), or show a command line that did not pass `redact`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::holdmap::framework::{self, Category, Framework};
use crate::holdmap::model::Snapshot;
use crate::holdmap::project::{self, Project};
use crate::holdmap::protect::{self, Protection};
use crate::holdmap::redact;
use crate::os::sockets::Protocol;
use crate::text;

/// Who can reach a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exposure {
    /// Only this machine (127.0.0.0/8, ::1, v4-mapped loopback).
    Loopback,
    /// Every interface (0.0.0.0, ::).
    AllInterfaces,
    /// One or more specific non-loopback addresses.
    Specific,
}

impl Exposure {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Exposure::Loopback => "loopback",
            Exposure::AllInterfaces => "all_interfaces",
            Exposure::Specific => "specific",
        }
    }

    /// The exposure of a listener bound to `addresses`: any unspecified address reaches every
    /// interface; only loopback ones (v4-mapped `::ffff:127.x` too) reach this machine only.
    pub(crate) fn of(addresses: &[IpAddr]) -> Exposure {
        if addresses.iter().any(|a| unmapped(*a).is_unspecified()) {
            Exposure::AllInterfaces
        } else if !addresses.is_empty() && addresses.iter().all(|a| unmapped(*a).is_loopback()) {
            Exposure::Loopback
        } else {
            Exposure::Specific
        }
    }
}

/// `a` with a v4-mapped IPv6 address (`::ffff:127.0.0.1`) read as the IPv4 address it maps.
fn unmapped(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// One listening port and what owns it.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub(crate) port: u16,
    pub(crate) protocol: Protocol,
    pub(crate) addresses: Vec<IpAddr>,
    pub(crate) exposure: Exposure,
    /// The owning process (the topmost of the processes that hold the socket); `None` when the
    /// owner could not be seen (another account's process).
    pub(crate) pid: Option<i32>,
    /// Every process that holds the socket.
    pub(crate) pids: Vec<i32>,
    /// The socket's uid.
    pub(crate) uid: u32,
    /// The owner runs as holdmap's own account.
    pub(crate) is_mine: bool,
    pub(crate) process: Option<String>,
    /// The owner's command line, redacted (`redact`).
    pub(crate) command: Option<String>,
    pub(crate) framework: Option<Framework>,
    pub(crate) project: Option<Project>,
    pub(crate) is_dev: bool,
    pub(crate) protected: Option<Protection>,
}

/// The holder that owns the socket: the topmost one, none of whose ancestors holds it too (a
/// server's workers inherit its socket); the lowest such pid if several unrelated processes
/// hold it; `None` when no visible process holds it.
fn primary(snap: &Snapshot, holders: &[i32]) -> Option<i32> {
    holders
        .iter()
        .copied()
        .filter(|pid| !snap.ancestors(*pid).iter().any(|a| holders.contains(a)))
        .min()
        .or_else(|| holders.iter().copied().min())
}

/// A listener's identity, in output order: (port, protocol, primary owner).
type GroupKey = (u16, Protocol, Option<i32>);
/// A listener's sockets merged: (addresses, holders, the first socket's uid).
type Group = (Vec<IpAddr>, Vec<i32>, u32);

/// Every listening TCP socket and bound UDP socket of the snapshot, grouped by (protocol,
/// port, owner), in (port, protocol) order. A socket no visible process holds is kept, with
/// `pid: None`.
pub(crate) fn listeners(snap: &Snapshot) -> Vec<Listener> {
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    for s in snap.sockets.iter().filter(|s| s.row.is_listening()) {
        let owner = primary(snap, &s.pids);
        let group = groups
            .entry((s.row.local.port(), s.row.protocol, owner))
            .or_insert_with(|| (Vec::new(), Vec::new(), s.row.uid));
        group.0.push(s.row.local.ip());
        group.1.extend_from_slice(&s.pids);
    }
    let guard = protect::Guard::new(snap);
    let mut projects: HashMap<PathBuf, Option<Project>> = HashMap::new();
    groups
        .into_iter()
        .map(|((port, protocol, pid), (mut addresses, mut pids, uid))| {
            addresses.sort();
            addresses.dedup();
            pids.sort_unstable();
            pids.dedup();
            judge(
                snap,
                &guard,
                &mut projects,
                port,
                protocol,
                pid,
                addresses,
                pids,
                uid,
            )
        })
        .collect()
}

/// One listener, judged.
#[allow(clippy::too_many_arguments)] // one call site, each argument a part of the group key
fn judge(
    snap: &Snapshot,
    guard: &protect::Guard<'_>,
    projects: &mut HashMap<PathBuf, Option<Project>>,
    port: u16,
    protocol: Protocol,
    pid: Option<i32>,
    addresses: Vec<IpAddr>,
    pids: Vec<i32>,
    uid: u32,
) -> Listener {
    let exposure = Exposure::of(&addresses);
    let owner = pid.and_then(|p| snap.proc(p));
    let is_mine = match owner.and_then(|p| p.uid) {
        Some(owner_uid) => owner_uid == snap.me.uid,
        None => uid == snap.me.uid,
    };
    let framework = owner.and_then(framework::framework_of);
    let project = owner.and_then(|p| p.cwd.as_ref()).and_then(|cwd| {
        projects
            .entry(cwd.clone())
            .or_insert_with(|| project::project_of(cwd))
            .clone()
    });
    let is_dev = match framework.map(|f| f.category) {
        Some(Category::Dev) => true,
        Some(Category::App | Category::System) => false,
        None => project.is_some(),
    };
    let protected = match pid {
        Some(p) => guard.protection(p),
        None => Some(protect::not_visible()),
    };
    Listener {
        port,
        protocol,
        addresses,
        exposure,
        pid,
        pids,
        uid,
        is_mine,
        process: owner.map(|p| text::visible(&framework::shown_name(p))),
        command: owner
            .filter(|p| !p.argv.is_empty())
            .map(|p| redact::redact_argv(&p.argv)),
        framework,
        project,
        is_dev,
        protected,
    }
}

/// The listener as `list_ports` and the other tools show it (matches `listener_schema`).
pub(crate) fn to_json(l: &Listener) -> Value {
    json!({
        "port": l.port,
        "protocol": l.protocol.as_str(),
        "addresses": l.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "exposure": l.exposure.as_str(),
        "pid": l.pid,
        "process": l.process,
        "command": l.command,
        "is_mine": l.is_mine,
        "framework": l.framework.map(|f| f.name),
        "category": l.framework.map(|f| f.category.as_str()),
        "project": l.project.as_ref().map(project::to_json),
        "is_dev": l.is_dev,
        "protected": l.protected.is_some(),
        "protection": l.protected.as_ref().map(|p| p.reason.clone()),
    })
}

fn nullable(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// A closed object schema of exactly what `to_json` gives, for the tools' output schemas.
pub(crate) fn listener_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "port": { "type": "integer", "minimum": 0, "maximum": 65535 },
            "protocol": { "type": "string", "enum": ["tcp", "udp"] },
            "addresses": { "type": "array", "items": { "type": "string" } },
            "exposure": { "type": "string", "enum": ["loopback", "all_interfaces", "specific"] },
            "pid": nullable(json!({ "type": "integer", "minimum": 0 })),
            "process": nullable(json!({ "type": "string" })),
            "command": nullable(json!({ "type": "string" })),
            "is_mine": { "type": "boolean" },
            "framework": nullable(json!({ "type": "string" })),
            "category": nullable(json!({ "type": "string", "enum": ["dev", "app", "system"] })),
            "project": nullable(project::schema()),
            "is_dev": { "type": "boolean" },
            "protected": { "type": "boolean" },
            "protection": nullable(json!({ "type": "string" })),
        },
        "required": [
            "port", "protocol", "addresses", "exposure", "pid", "process", "command", "is_mine",
            "framework", "category", "project", "is_dev", "protected", "protection"
        ],
        "additionalProperties": false,
    })
}

/// One term of a `list_ports` filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Term {
    /// Ports `lo..=hi` (one port: `lo == hi`).
    Ports(u16, u16),
    Protocol(Protocol),
    Pid(i32),
    /// A case-insensitive substring of the framework, process or project name (lowercased).
    Name(String),
}

/// A parsed `list_ports` filter: every term must match.
///
/// The grammar (terms separated by spaces; a listener must match every term; an empty query
/// matches every listener):
/// - `:3000` or `3000` or `port:3000` — exactly port 3000;
/// - `3000-3999` (or `:3000-3999`, `port:3000-3999`) — a port in that range, both ends included;
/// - `tcp`, `udp`, `proto:tcp`, `proto:udp` — that protocol;
/// - `pid:1234` — owned by process 1234 (the primary owner, or any process holding the socket);
/// - any other word, e.g. `vite` — a case-insensitive substring of the framework name, the
///   process name or the project name.
///
/// A malformed term (`pid:x`, `:70000`, `4000-3000`, `proto:sctp`) is an error, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Query(pub(crate) Vec<Term>);

fn port_number(text: &str, whole: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .map_err(|_| format!("`{whole}` is not a port: a port is a whole number from 0 to 65535"))
}

fn ports_term(text: &str, whole: &str) -> Result<Term, String> {
    match text.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (port_number(lo, whole)?, port_number(hi, whole)?);
            if lo > hi {
                return Err(format!(
                    "`{whole}` is an empty range: write the lower port first ({hi}-{lo})"
                ));
            }
            Ok(Term::Ports(lo, hi))
        }
        None => port_number(text, whole).map(|p| Term::Ports(p, p)),
    }
}

fn looks_numeric(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '-')
}

impl Query {
    pub(crate) fn parse(query: &str) -> Result<Query, String> {
        let mut terms = Vec::new();
        for word in query.split_whitespace() {
            let lower = word.to_ascii_lowercase();
            let term = if let Some(ports) = lower.strip_prefix(':') {
                ports_term(ports, word)?
            } else if let Some(ports) = lower.strip_prefix("port:") {
                ports_term(ports, word)?
            } else if looks_numeric(&lower) {
                ports_term(&lower, word)?
            } else if let Some(pid) = lower.strip_prefix("pid:") {
                Term::Pid(pid.parse::<i32>().ok().filter(|p| *p > 0).ok_or_else(|| {
                    format!("`{word}` is not a process id: write pid: and a positive number")
                })?)
            } else if let Some(proto) = lower.strip_prefix("proto:") {
                match proto {
                    "tcp" => Term::Protocol(Protocol::Tcp),
                    "udp" => Term::Protocol(Protocol::Udp),
                    _ => {
                        return Err(format!(
                            "`{word}` is not a protocol: use proto:tcp or proto:udp"
                        ));
                    }
                }
            } else if lower == "tcp" {
                Term::Protocol(Protocol::Tcp)
            } else if lower == "udp" {
                Term::Protocol(Protocol::Udp)
            } else {
                Term::Name(word.to_lowercase())
            };
            terms.push(term);
        }
        Ok(Query(terms))
    }

    pub(crate) fn matches(&self, l: &Listener) -> bool {
        self.0.iter().all(|term| match term {
            Term::Ports(lo, hi) => (*lo..=*hi).contains(&l.port),
            Term::Protocol(p) => l.protocol == *p,
            Term::Pid(pid) => l.pid == Some(*pid) || l.pids.contains(pid),
            Term::Name(word) => [
                l.framework.map(|f| f.name),
                l.process.as_deref(),
                l.project.as_ref().map(|p| p.name.as_str()),
            ]
            .into_iter()
            .flatten()
            .any(|name| name.to_lowercase().contains(word.as_str())),
        })
    }
}

/// Whether `l` matches the `list_ports` filter `query` (grammar: [`Query`]). A malformed query
/// matches nothing; call `Query::parse` first to tell the caller why.
pub(crate) fn matches(l: &Listener, query: &str) -> bool {
    Query::parse(query).is_ok_and(|q| q.matches(l))
}

#[cfg(test)]
mod tests;
