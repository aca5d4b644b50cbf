//! `wait_for_port`: waits until a port accepts TCP connections on loopback, or (`until_free`)
//! until nothing accepts and nothing listens on it, within a bounded timeout; a timeout is a
//! tool error.
//!
//! Must never: block the request loop (the wait is a `Reply::Later` driven by tokio's clock, and
//! each snapshot is taken on a blocking thread), connect anywhere but 127.0.0.1 and ::1, send
//! bytes on the connections it opens, or wait past `HOLDMAP_WAIT_MAX`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::holdmap::listeners;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, ToolDef};
use crate::holdmap::world::World;
use crate::limits::{HOLDMAP_WAIT_DEFAULT, HOLDMAP_WAIT_MAX, HOLDMAP_WAIT_POLL};
use crate::os::sockets::{Protocol, SocketState};

/// The shortest wait (seconds), as the schema publishes it.
const WAIT_MIN_S: f64 = 0.1;

pub(super) fn def() -> ToolDef {
    ToolDef {
        name: "wait_for_port",
        title: "Wait for a port",
        description: "Waits until a port accepts TCP connections on 127.0.0.1 or ::1 (for example \
            after starting a dev server), or with `until_free: true` until nothing accepts or \
            listens on it (after stopping one). Gives up after `timeout_s` seconds (default 30, at \
            most 600) with an error. TCP readiness is not application health: a server can accept \
            connections and still fail its requests. Other requests are answered while it waits. \
            Read-only: the connections it opens are closed at once, with nothing sent.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The port to wait for."},
                "timeout_s": {
                    "type": "number",
                    "minimum": WAIT_MIN_S,
                    "maximum": HOLDMAP_WAIT_MAX.as_secs(),
                    "default": HOLDMAP_WAIT_DEFAULT.as_secs(),
                    "description": "How long to wait, in seconds."
                },
                "until_free": {
                    "type": "boolean",
                    "default": false,
                    "description": "Wait until the port is free instead of until it accepts."
                }
            },
            "required": ["port"],
            "additionalProperties": false,
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "ready": {"type": "boolean", "const": true, "description": "Always true: a timeout is an error instead."},
                "until_free": {"type": "boolean"},
                "elapsed_ms": {"type": "integer", "minimum": 0}
            },
            "required": ["port", "ready", "until_free", "elapsed_ms"],
            "additionalProperties": false,
        }),
        annotations: Annotations::READ_ONLY,
    }
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let Some(port) = crate::holdmap::schema::port_argument(args, "port") else {
        return Reply::Now(Outcome::Failed(
            "`port` must be an integer from 1 to 65535".to_owned(),
        ));
    };
    let timeout_s = args
        .get("timeout_s")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite())
        .map_or(HOLDMAP_WAIT_DEFAULT, |t| {
            Duration::from_secs_f64(t.clamp(WAIT_MIN_S, HOLDMAP_WAIT_MAX.as_secs_f64()))
        });
    let until_free = super::bool_arg(args, "until_free");
    Reply::Later(Box::pin(wait(
        Arc::clone(cx.world),
        port,
        timeout_s,
        until_free,
    )))
}

/// Polls every `HOLDMAP_WAIT_POLL` until the port is ready or `timeout` has passed.
pub(super) async fn wait(
    world: Arc<dyn World>,
    port: u16,
    timeout: Duration,
    until_free: bool,
) -> Outcome {
    let start = Instant::now();
    let deadline = start + timeout;
    loop {
        let accepting = accepts(port).await;
        let held_by = if until_free && !accepting {
            match held_by(&world, port).await {
                None => return ready(port, until_free, start),
                some => some,
            }
        } else {
            None
        };
        if !until_free && accepting {
            return ready(port, until_free, start);
        }
        let now = Instant::now();
        if now >= deadline {
            return Outcome::Failed(timed_out(port, timeout, until_free, held_by));
        }
        tokio::time::sleep_until(deadline.min(now + HOLDMAP_WAIT_POLL)).await;
    }
}

fn ready(port: u16, until_free: bool, start: Instant) -> Outcome {
    let elapsed_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let summary = if until_free {
        format!("Port {port} is free (after {elapsed_ms} ms): nothing accepts or listens on it.")
    } else {
        format!(
            "Port {port} accepts TCP connections (after {elapsed_ms} ms). TCP readiness is not \
             application health: check the server's own output or a health endpoint."
        )
    };
    Outcome::Done {
        summary,
        structured: json!({
            "port": port,
            "ready": true,
            "until_free": until_free,
            "elapsed_ms": elapsed_ms,
        }),
    }
}

pub(super) fn timed_out(
    port: u16,
    timeout: Duration,
    until_free: bool,
    held_by: Option<String>,
) -> String {
    let secs = secs_words(timeout);
    if until_free {
        let owner = held_by.map_or_else(String::new, |o| format!(" ({o})"));
        format!(
            "port {port} was still in use after {secs}{owner}; explain_port {port} says what holds it"
        )
    } else {
        format!(
            "port {port} did not accept connections within {secs} on 127.0.0.1 or ::1; check the \
             server's own output, or wait longer with a larger timeout_s"
        )
    }
}

/// "5 s", "0.5 s".
fn secs_words(d: Duration) -> String {
    let ms = u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
    format!("{} s", f64::from(ms) / 1000.0)
}

/// Whether a TCP connection to the port succeeds on 127.0.0.1 or ::1 (closed at once).
async fn accepts(port: u16) -> bool {
    for addr in [
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
    ] {
        let attempt = tokio::time::timeout(HOLDMAP_WAIT_POLL, tokio::net::TcpStream::connect(addr));
        if matches!(attempt.await, Ok(Ok(_))) {
            return true;
        }
    }
    false
}

/// `None` when nothing listens on the port now; otherwise who does, in words. The snapshot is
/// taken on a blocking thread; when the machine cannot be read, a test bind on 127.0.0.1 decides.
async fn held_by(world: &Arc<dyn World>, port: u16) -> Option<String> {
    let world = Arc::clone(world);
    let snap = tokio::task::spawn_blocking(move || world.observe()).await;
    match snap {
        Ok(Ok(snap)) => {
            let listening = snap.sockets.iter().any(|s| {
                s.row.protocol == Protocol::Tcp
                    && s.row.state == SocketState::Listen
                    && s.row.local.port() == port
            });
            listening.then(|| {
                listeners::listeners(&snap)
                    .iter()
                    .find(|l| l.port == port && l.protocol == Protocol::Tcp)
                    .map_or_else(
                        || "a listener whose owner cannot be seen".to_owned(),
                        |l| format!("held by {}", super::inspection::describe(l)),
                    )
            })
        }
        _ => {
            let free = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok();
            (!free).then(|| "it cannot be bound on 127.0.0.1".to_owned())
        }
    }
}
