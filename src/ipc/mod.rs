//! The daemon socket: its two protocols (NDJSON, one request line, one response line, each read
//! through `mcp::line`'s capped reader), and dialing the daemon — verified, and started on demand.
//!
//! A connection opens with `daemon.hello` ([`HelloRequest`]), then speaks one protocol for the
//! rest of its life: the relay-session protocol ([`SessionRequest`] / [`SessionResponse`],
//! module `session`) or the management protocol ([`ManageRequest`] / [`ManageResponse`],
//! module `manage`), never both. The daemon reads each line once, through [`Incoming`], which
//! says which protocol it belongs to; that is the one place the two meet.
//!
//! Owns: what relays and CLI commands may say to the daemon and what it answers, the daemon's
//! lock (module `lock`), and dialing (module `conn`). Must never: send a byte to a daemon whose
//! identity it has not verified, or buffer more than a named limit of a peer's line.

mod conn;
mod hello;
mod incoming;
mod lock;
mod manage;
mod out;
mod session;
#[cfg(test)]
mod tests;

pub(crate) use conn::{
    Conn, ConnReader, ConnWriter, Probe, SessionConn, WireError, connect, connect_or_start,
    current_thread, probe,
};
pub(crate) use hello::{HelloRequest, HelloResponse, Serves};
pub(crate) use incoming::Incoming;
pub(crate) use lock::{
    DaemonLock, daemon_lock_free, lock_file_identity, lock_holder, take_daemon_lock,
};
pub(crate) use manage::{HeldCall, ListedAgent, ListedPolicy, ManageRequest, ManageResponse};
pub(crate) use out::Outgoing;
pub(crate) use session::{
    HoldTicket, LeakWithheld, Release, SessionEnded, SessionRequest, SessionResponse, Verdict,
};

/// One of the daemon's answers (to a request, or pushed unasked) as one socket line; None if it
/// cannot be serialised, which the caller treats as a line it cannot send.
pub(crate) fn answer_line(answer: &impl serde::Serialize) -> Option<Vec<u8>> {
    let mut line = serde_json::to_vec(answer).ok()?;
    line.push(b'\n');
    Some(line)
}
