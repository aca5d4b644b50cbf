//! The client's end of the relay: its stdin and stdout. A pipe or a socket, which is what MCP
//! clients give a server (Rust and Python clients make pipes, Node's make socket pairs), is read
//! and written as a non-blocking descriptor on the relay's own runtime thread, so no thread
//! stands between the client and the relay. `tokio::io::stdin` and `stdout` do every read and
//! write on tokio's blocking pool and hand each result back to the runtime: about 4.7 of the
//! relay's 9 thread hand-offs per call (issue 18, docs/benchmarks.md). Anything else (a
//! terminal, a file) goes through `tokio::io` as before: making a terminal non-blocking would
//! leave the shell's terminal so after the relay exits.
//!
//! It works on duplicates of fd 0 and 1, so both stay open until the relay exits; it never
//! writes anything itself (only the relay's stdout writer writes to the client).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt as _;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// What the relay reads the client's lines from.
pub(super) type ClientInput = Pin<Box<dyn AsyncRead + Send>>;
/// What the relay writes the client's lines to.
pub(super) type ClientOutput = Pin<Box<dyn AsyncWrite + Send>>;

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind_of(fd: &OwnedFd) -> Kind {
    let Ok(file) = fd.try_clone().map(std::fs::File::from) else {
        return Kind::Other;
    };
    match file.metadata().map(|m| m.file_type()) {
        Ok(t) if t.is_fifo() => Kind::Pipe,
        Ok(t) if t.is_socket() => Kind::Socket,
        _ => Kind::Other,
    }
}

/// A non-blocking socket stream over `fd`, registered with this runtime.
fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(s).ok()
}

/// A duplicate of `fd` made non-blocking on this runtime: a pipe by `pipe`, a socket as a
/// stream; None for anything else.
enum Own<P> {
    Pipe(P),
    Socket(tokio::net::UnixStream),
}

fn own<P>(
    fd: std::os::fd::BorrowedFd<'_>,
    pipe: impl FnOnce(OwnedFd) -> std::io::Result<P>,
) -> Option<Own<P>> {
    let fd = fd.try_clone_to_owned().ok()?;
    match kind_of(&fd) {
        Kind::Pipe => pipe(fd).ok().map(Own::Pipe),
        Kind::Socket => socket(fd).map(Own::Socket),
        Kind::Other => None,
    }
}

/// The client's stdin. Must be called inside the relay's runtime.
pub(super) fn client_input() -> ClientInput {
    match own(
        std::io::stdin().as_fd(),
        tokio::net::unix::pipe::Receiver::from_owned_fd,
    ) {
        Some(Own::Pipe(r)) => Box::pin(r),
        Some(Own::Socket(s)) => Box::pin(s),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// The client's stdout. Must be called inside the relay's runtime.
pub(super) fn client_output() -> ClientOutput {
    match own(
        std::io::stdout().as_fd(),
        tokio::net::unix::pipe::Sender::from_owned_fd,
    ) {
        Some(Own::Pipe(w)) => Box::pin(w),
        Some(Own::Socket(s)) => Box::pin(s),
        None => Box::pin(tokio::io::stdout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_and_sockets_are_told_apart_from_files() {
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(kind_of(&OwnedFd::from(r)), Kind::Pipe);
        assert_eq!(kind_of(&OwnedFd::from(w)), Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(kind_of(&OwnedFd::from(a)), Kind::Socket);
        let f = tempfile::tempfile().unwrap();
        assert_eq!(kind_of(&OwnedFd::from(f)), Kind::Other);
    }
}
