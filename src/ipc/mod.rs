//! The daemon socket: its two protocols (NDJSON, one request line, one response line), bounded
//! line reading, and dialing the daemon — verified, and started on demand.
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

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

mod conn;
mod hello;
mod incoming;
mod lock;
mod manage;
mod session;
#[cfg(test)]
mod tests;

pub(crate) use conn::{
    Conn, ConnReader, ConnWriter, Probe, WireError, connect, connect_or_start, current_thread,
    probe,
};
pub(crate) use hello::{HelloRequest, HelloResponse, Serves};
pub(crate) use incoming::Incoming;
pub(crate) use lock::{
    DaemonLock, daemon_lock_free, lock_file_identity, lock_holder, take_daemon_lock,
};
pub use manage::{HeldCall, ListedAgent, ListedPolicy, ManageRequest, ManageResponse};
pub(crate) use session::{
    HoldTicket, Release, SessionEnded, SessionRequest, SessionResponse, Verdict,
};

/// What one bounded read produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A line, with its newline when it had one (the last line of a stream may not).
    Line(Vec<u8>),
    /// A line longer than the cap, read and discarded through its newline; its length.
    TooLong(usize),
    /// End of stream.
    Eof,
}

/// Reads one line of at most `max` bytes (newline included) without ever buffering more than
/// `max` bytes of it: the rest of an overlong line is consumed and dropped.
pub(crate) async fn read_line_capped<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<LineRead> {
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut overflow = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if overflow {
                LineRead::TooLong(total)
            } else if line.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line(line)
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (buf.get(..=i).unwrap_or(buf), true),
            None => (buf, false),
        };
        let n = chunk.len();
        total = total.saturating_add(n);
        if !overflow {
            if total > max {
                overflow = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        r.consume(n);
        if done {
            return Ok(if overflow {
                LineRead::TooLong(total)
            } else {
                LineRead::Line(line)
            });
        }
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;
    use tokio::io::BufReader;

    async fn read(input: &[u8], max: usize) -> Vec<LineRead> {
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let l = read_line_capped(&mut r, max).await.unwrap();
            let end = l == LineRead::Eof;
            out.push(l);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_returned_with_their_newline_and_a_last_line_without_one() {
        let got = read(b"ab\ncd", 10).await;
        assert_eq!(
            got,
            vec![
                LineRead::Line(b"ab\n".to_vec()),
                LineRead::Line(b"cd".to_vec()),
                LineRead::Eof
            ]
        );
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_read_and_one_byte_over_is_dropped_whole() {
        let got = read(b"12345\n123456\nok\n", 6).await;
        assert_eq!(
            got,
            vec![
                LineRead::Line(b"12345\n".to_vec()),
                LineRead::TooLong(7),
                LineRead::Line(b"ok\n".to_vec()),
                LineRead::Eof
            ]
        );
    }
}
