//! Listening on the socket and accepting connections: each peer is judged (this build, this
//! user) and its parent image read before a byte of it is read; then its requests are served.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::net::{UnixListener, UnixStream};

use crate::agents;
use crate::approval::Cause;
use crate::config::Home;
use crate::daemon::{
    DaemonError, Shared,
    dispatch::{self, ConnCtx, Next},
    hold::settle,
};
use crate::ipc::{self, HelloResponse, Incoming, ManageResponse, Release, SessionResponse};
use crate::journal::{Fields, Kind};
use crate::limits;
use crate::os::peer;

/// Listens on `socket` with credential passing on before anyone can connect, put in place by
/// an atomic rename (see `peer::listen_passing_credentials`); the file it is at, to watch.
pub(crate) fn listen(
    socket: &std::path::Path,
) -> Result<(UnixListener, peer::SocketFile), DaemonError> {
    let err = |source| DaemonError::Listen {
        path: socket.display().to_string(),
        source,
    };
    let (std_listener, file) = peer::listen_passing_credentials(socket).map_err(err)?;
    std_listener.set_nonblocking(true).map_err(err)?;
    let listener = UnixListener::from_std(std_listener).map_err(err)?;
    Ok((listener, file))
}

/// Accepts connections, each served on its own task, until SIGTERM, SIGINT or `daemon stop`, or
/// until another daemon holds this home's lock; meanwhile watches the lock file and the socket.
/// Returns the socket file it listens on last.
pub(crate) async fn accept_until_stopped(
    state: &Arc<Shared>,
    home: &Home,
    mut term: tokio::signal::unix::Signal,
    mut listener: UnixListener,
    mut bound: peer::SocketFile,
    mut lock_identity: Option<(u64, u64)>,
) -> peer::SocketFile {
    let socket = home.socket_path();
    let mut next_conn: u64 = 0;
    let mut watch = tokio::time::interval(limits::SOCKET_CHECK_INTERVAL);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let check = tokio::select! {
            accepted = listener.accept() => {
                match accepted {
                    Ok((stream, _)) => {
                        next_conn += 1;
                        let st = Arc::clone(state);
                        tokio::spawn(serve_conn(st, stream, next_conn));
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                }
                false
            }
            _ = watch.tick() => true,
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = state.shutdown.notified() => break,
        };
        // (Only with our own file's identity known: opening our own lock file and closing it
        // again would release the lock.)
        if check
            && lock_identity.is_some()
            && ipc::lock_file_identity(home) != lock_identity
            && !lock_again(home, &mut lock_identity)
        {
            break;
        }
        if check {
            watch_socket(state, &socket, &mut listener, &mut bound).await;
        }
    }
    bound
}

/// Our lock is on a file no longer at the lock's path: takes the lock on what is there now
/// (true), or, if another daemon already holds it, leaves this home to that one (false).
fn lock_again(home: &Home, lock_identity: &mut Option<(u64, u64)>) -> bool {
    let lock_path = home.lock_path();
    match ipc::take_daemon_lock(home) {
        Ok(Ok(again)) => {
            *lock_identity = again.identity();
            // Held until the process ends, like the first (never closed: see
            // `ipc::DaemonLock`).
            std::mem::forget(again);
            tracing::warn!(
                "the daemon's lock {} was removed or replaced; it holds the lock there again",
                lock_path.display()
            );
        }
        Ok(Err(holder)) => {
            tracing::error!(
                "the daemon's lock {} was removed or replaced, and {} holds it now: this daemon stops, so only one serves this home",
                lock_path.display(),
                holder
                    .map(|p| format!("pid {p}"))
                    .unwrap_or_else(|| "another process".into())
            );
            return false;
        }
        Err(e) => tracing::warn!(
            "the daemon's lock {} was removed or replaced, and cannot be taken again (tried again in {:?}): {e}",
            lock_path.display(),
            limits::SOCKET_CHECK_INTERVAL
        ),
    }
    true
}

/// A socket removed or replaced behind our back would leave this daemon unreachable (and a
/// relay would start nothing while we hold the lock): puts ours back the same way it was first
/// placed. Connections already accepted are untouched.
async fn watch_socket(
    state: &Shared,
    socket: &std::path::Path,
    listener: &mut UnixListener,
    bound: &mut peer::SocketFile,
) {
    let now = peer::SocketFile::at(socket);
    if now == Some(*bound) {
        return;
    }
    let what = match now {
        None => "was removed",
        Some(_) => "was replaced by another file",
    };
    match listen(socket) {
        Ok((l, b)) => {
            *listener = l;
            *bound = b;
            tracing::warn!(
                "the daemon's socket {} {what}; listening on a new one there",
                socket.display()
            );
            let _ = state
                .writer
                .append(
                    Kind::Anomaly,
                    Fields {
                        anomaly: Some("socket-replaced".into()),
                        reason: Some(format!(
                            "the daemon's socket {} {what} while it ran; it listens on a new one",
                            socket.display()
                        )),
                        ..Fields::default()
                    },
                )
                .await;
        }
        Err(e) => tracing::warn!(
            "the daemon's socket {} {what}, and a new one could not be made (tried again in {:?}): {e}",
            socket.display(),
            limits::SOCKET_CHECK_INTERVAL
        ),
    }
}

/// Serves one accepted connection: its peer judged, then its lines read and answered until it
/// closes or breaks the protocol, then what it leaves behind (held calls, open sessions) ended.
pub(crate) async fn serve_conn(state: Arc<Shared>, stream: UnixStream, conn: u64) {
    let Some((pid, image)) = judge(&stream).await else {
        return;
    };
    let (r, w) = stream.into_split();
    let mut r = peer::CheckedReader::new(r, pid);
    let st = Arc::clone(&state);
    // An empty line is the shutdown mark (see `ManageRequest::Shutdown`): everything queued
    // before it, the answer to `daemon stop` included, is written; now the daemon may stop.
    let out = ipc::Outgoing::new(w, move || st.shutdown.notify_one());
    let ctx = ConnCtx { id: conn, out };
    let mut owned: HashSet<String> = HashSet::new();
    serve_lines(&state, &ctx, &mut r, pid, image.as_ref(), &mut owned).await;
    // Calls this connection's relay was waiting on can no longer be forwarded: each is
    // rejected and journaled with the reason.
    for hold in state.approvals.take_where(|h| h.conn == conn) {
        let _ = settle(
            &state,
            hold,
            Release::Rejected,
            Cause::ConnectionDropped,
            None,
        )
        .await;
    }
    // What is still queued gets a grace to go out; then the socket is shut down for writing
    // (the peer sees the end), even while a watcher list still holds a clone of it.
    let _ = tokio::time::timeout(limits::SERVER_STOP_GRACE, ctx.out.drained()).await;
    ctx.out.close();
    drop(ctx);
    end_sessions(
        &state,
        owned,
        "the relay's connection closed before it ended the session",
    )
    .await;
}

/// The peer of `stream`, by the kernel's word: its pid and its parent's image (None:
/// unenrolled) when it is this build running as us; None (the connection refused) otherwise.
async fn judge(stream: &UnixStream) -> Option<(i32, Option<crate::os::process::FileIdentity>)> {
    // Judging the peer and finding its parent stat files under /proc, which reach the file
    // system of the peer's executable; one that never answers (a hung FUSE mount) must stall
    // only this connection, never the daemon's few async threads. So both run on the blocking
    // pool under a bound; past it the connection is refused.
    let Ok(fd) = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned() else {
        tracing::warn!("refused a connection: its socket could not be duplicated");
        return None;
    };
    let checked = tokio::time::timeout(
        limits::PEER_CHECK_TIMEOUT,
        tokio::task::spawn_blocking(move || {
            let verdict = crate::agents::check_peer(&fd);
            // Who is calling is the kernel's word: the executable of the relay's parent, read
            // now and matched against the enrolments in force when its session starts. Nothing
            // a relay or client sends can name it; a failure is unenrolled.
            let image = match verdict {
                crate::agents::PeerCheck::Same { pid } => match agents::parent_image(&fd, pid) {
                    Ok(image) => Some(image),
                    Err(why) => {
                        tracing::info!("relay pid {pid}: no agent derived ({why}); unenrolled");
                        None
                    }
                },
                _ => None,
            };
            (verdict, image)
        }),
    )
    .await;
    let (verdict, image) = match checked {
        Ok(Ok(v)) => v,
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                "refused a connection: its peer could not be judged within {:?}",
                limits::PEER_CHECK_TIMEOUT
            );
            return None;
        }
    };
    let crate::agents::PeerCheck::Same { pid } = verdict else {
        // Nothing is read from, or written to, a peer that is not this build running as us.
        tracing::warn!("refused a connection: {}", verdict.describe("the peer"));
        return None;
    };
    Some((pid, image))
}

/// Which protocol a connection speaks: fixed by its first request after the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Session,
    Manage,
}

/// Reads and answers the lines of one connection, each through [`Incoming`], until the peer
/// closes, breaks the protocol or cannot be written to. Here is where a connection keeps to one
/// protocol: the first request of either fixes it, and a request of the other is refused and
/// the connection closed.
async fn serve_lines(
    state: &Arc<Shared>,
    ctx: &ConnCtx,
    r: &mut peer::CheckedReader,
    pid: i32,
    image: Option<&crate::os::process::FileIdentity>,
    owned: &mut HashSet<String>,
) {
    let conn = ctx.id;
    let mut role: Option<Role> = None;
    loop {
        let line = match r.read_line(limits::SOCKET_LINE_BYTES_MAX).await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("closing connection {conn} (pid {pid}): {e}");
                break;
            }
        };
        let next = match Incoming::read(&line) {
            Err(e) => refused(role, format!("unreadable request: {e}")),
            // Which home this daemon serves: asked first on every connection, and giving it no
            // role.
            Ok(Incoming::Hello(_)) => Next::Reply(ipc::answer_line(&HelloResponse::Hello(
                state.serves.clone(),
            ))),
            Ok(Incoming::Session(req)) if admit(&mut role, Role::Session) => {
                dispatch::session(state, ctx, owned, image, req)
                    .await
                    .map(|a| ipc::answer_line(&a))
            }
            Ok(Incoming::Manage(req)) if admit(&mut role, Role::Manage) => {
                dispatch::manage(state, ctx, req)
                    .await
                    .map(|a| ipc::answer_line(&a))
            }
            Ok(Incoming::Session(_) | Incoming::Manage(_)) => refused(role, NEVER_BOTH.into()),
        };
        let (line, close) = match next {
            Next::Reply(l) => (l, false),
            Next::ReplyAndClose(l) => (l, true),
            Next::Sent => continue,
        };
        let Some(line) = line else {
            break;
        };
        if ctx.out.send(line).is_err() || close {
            break;
        }
    }
}

/// Whether a request of protocol `asked` may be served on a connection whose protocol is `role`:
/// the first request fixes it, and a request of the other protocol never is.
fn admit(role: &mut Option<Role>, asked: Role) -> bool {
    *role.get_or_insert(asked) == asked
}

/// Why a request of the other protocol is refused on a connection.
const NEVER_BOTH: &str =
    "a connection either carries one relay's sessions or management requests, never both";

/// An error answer, then close, said in the protocol of the connection (the hello's, before a
/// request fixed one): its line, or None when it cannot be written.
fn refused(role: Option<Role>, message: String) -> Next<Option<Vec<u8>>> {
    Next::ReplyAndClose(match role {
        Some(Role::Session) => ipc::answer_line(&SessionResponse::Error { message }),
        Some(Role::Manage) => ipc::answer_line(&ManageResponse::Error { message }),
        None => ipc::answer_line(&HelloResponse::Error { message }),
    })
}

pub(crate) async fn end_sessions(state: &Shared, ids: HashSet<String>, reason: &str) {
    for id in ids {
        let was_open = state
            .sessions
            .lock()
            .map(|mut s| s.remove(&id).is_some())
            .unwrap_or(false);
        if was_open {
            let _ = state
                .writer
                .append(
                    Kind::SessionEnd,
                    Fields {
                        session_id: Some(id),
                        reason: Some(reason.to_string()),
                        ..Fields::default()
                    },
                )
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_keeps_the_protocol_of_its_first_request_and_never_takes_the_other() {
        for (first, other) in [(Role::Session, Role::Manage), (Role::Manage, Role::Session)] {
            let mut role = None;
            assert!(
                admit(&mut role, first),
                "the first request fixes the protocol"
            );
            assert!(admit(&mut role, first), "and more of it are served");
            assert!(
                !admit(&mut role, other),
                "a request of the other is refused"
            );
            assert_eq!(
                role,
                Some(first),
                "and does not change the connection's protocol"
            );
        }
    }

    #[test]
    fn a_refusal_of_the_other_protocol_closes_the_connection() {
        assert!(matches!(
            refused(Some(Role::Session), NEVER_BOTH.into()),
            Next::ReplyAndClose(Some(_))
        ));
        assert!(matches!(
            refused(Some(Role::Manage), NEVER_BOTH.into()),
            Next::ReplyAndClose(Some(_))
        ));
    }
}
