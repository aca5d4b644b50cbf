//! The console's connections: every one accepted at once, each request head read against a
//! fixed deadline, and, when the table is full, the connection that has waited longest for a
//! request head closed to make room for the new one.
//!
//! Owns: the accept loop, the table of open connections, hyper's HTTP/1 settings, the stop.
//! Must never: let the accept loop wait for a free slot (a full table sheds, it never queues, so
//! idle sockets cannot delay a real request), close a connection whose request is being answered
//! while another one waits for a head, or let bytes arriving extend a head's deadline.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use crate::limits;

/// How many connections this console holds at once: `limits::CONSOLE_CONNECTIONS_MAX`, or fewer
/// when the open-files limit leaves less than that beside `limits::CONSOLE_FILES_RESERVED`. The
/// soft limit is first raised toward the hard one, only as far as the console needs.
pub(super) fn connections_cap() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let want = limits::CONSOLE_CONNECTIONS_MAX + limits::CONSOLE_FILES_RESERVED;
    let want64 = u64::try_from(want).unwrap_or(u64::MAX);
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return limits::CONSOLE_CONNECTIONS_MAX;
    };
    let soft = if soft < want64 {
        let raised = want64.min(hard);
        match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
            Ok(()) => raised,
            Err(_) => soft,
        }
    } else {
        soft
    };
    usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(limits::CONSOLE_FILES_RESERVED)
        .clamp(1, limits::CONSOLE_CONNECTIONS_MAX)
}

/// Listens on `addr` with a queue of `limits::CONSOLE_LISTEN_BACKLOG` connections the kernel
/// completes before the console accepts them.
pub(super) fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(limits::CONSOLE_LISTEN_BACKLOG)
}

/// Serves `app` on `listener` until `stop` resolves, then lets the answers in flight finish (up
/// to `limits::CONSOLE_REQUEST_TIMEOUT`) and returns.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    cap: usize,
    stop: impl std::future::Future<Output = ()>,
) {
    let table = Arc::new(Table::new(cap));
    let (stopping, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        // Reap the connections that ended, so the set holds only open ones.
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let io = match accepted {
            Ok((io, _)) => io,
            Err(e) if gone(&e) => continue,
            Err(e) => {
                // Most likely out of file descriptors (EMFILE, ENFILE): free one and try again
                // shortly; the connection waits in the kernel's queue meanwhile.
                tracing::debug!("the console could not accept a connection: {e}");
                table.shed_one();
                tokio::time::sleep(limits::CONSOLE_ACCEPT_RETRY).await;
                continue;
            }
        };
        let (id, shed, crowded) = table.admit();
        tasks.spawn(connection(
            io,
            id,
            shed,
            stop_rx.clone(),
            app.clone(),
            table.clone(),
        ));
        if crowded {
            // Let the shed connections' tasks run and close their sockets before the next
            // accept, so the descriptors held never run past the cap by more than half the
            // reserve. Not after every shed: each yield waits a turn of every busy connection.
            tokio::task::yield_now().await;
        }
    }
    drop(listener);
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(limits::CONSOLE_REQUEST_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
}

/// Whether an accept error is only about that one connection (its client already gone).
fn gone(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}

/// The HTTP/1 rules of every connection: the whole head within `limits::CONSOLE_HEAD_TIMEOUT`
/// (a fixed deadline from the moment hyper starts reading it), at most
/// `limits::CONSOLE_HEAD_BYTES_MAX` of it (431 beyond), read into a buffer no larger.
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(limits::CONSOLE_HEAD_TIMEOUT)
        .max_header_size(limits::CONSOLE_HEAD_BYTES_MAX)
        .max_buf_size(limits::CONSOLE_HEAD_BYTES_MAX);
    b
}

/// One connection, from accept to close: served by hyper until it ends, is shed (its `shed`
/// sender dropped), or goes `limits::CONSOLE_IDLE_TIMEOUT` without the console writing to it.
/// On stop, an answer in flight is finished and the connection then closed; one waiting for a
/// head is closed at once.
async fn connection(
    io: TcpStream,
    id: u64,
    mut shed: oneshot::Receiver<()>,
    mut stop: watch::Receiver<bool>,
    app: Router,
    table: Arc<Table>,
) {
    let _open = Open {
        table: table.clone(),
        id,
    };
    let opened = tokio::time::Instant::now();
    let wrote = Arc::new(AtomicU64::new(0));
    let io = Counted {
        io,
        opened,
        wrote: wrote.clone(),
    };
    let app = TowerToHyperService::new(app);
    let marks = table.clone();
    let service = hyper::service::service_fn(move |req| {
        let answering = Answering::start(marks.clone(), id);
        let answer = hyper::service::Service::call(&app, req);
        async move {
            // One answer per turn: a connection with many requests queued (pipelined) lets
            // every other connection, and the accept loop, have theirs first.
            tokio::task::yield_now().await;
            let res = answer.await?;
            Ok::<_, Infallible>(res.map(|body| Tracked {
                body,
                _answering: answering,
            }))
        }
    });
    let conn = http1().serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let stall = tokio::time::sleep(limits::CONSOLE_IDLE_TIMEOUT);
    tokio::pin!(stall);
    let mut stopping = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!("console connection {id} ended: {e}");
                }
                return;
            }
            _ = &mut shed => {
                tracing::debug!("console connection {id} shed to make room for a new one");
                return;
            }
            () = &mut stall => {
                let last = opened + std::time::Duration::from_millis(wrote.load(Ordering::Relaxed));
                let next = last + limits::CONSOLE_IDLE_TIMEOUT;
                if next <= tokio::time::Instant::now() {
                    tracing::debug!("console connection {id} closed: nothing written to it for {:?}", limits::CONSOLE_IDLE_TIMEOUT);
                    return;
                }
                stall.as_mut().reset(next);
            }
            _ = stop.changed(), if !stopping => {
                // A connection waiting for a head is closed at once; an answer in flight is
                // finished first.
                if !table.is_answering(id) {
                    return;
                }
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The open connections, each with when it began what it is doing now.
struct Table {
    inner: Mutex<Inner>,
}

struct Inner {
    cap: usize,
    open: BTreeMap<u64, Slot>,
    next_id: u64,
    /// Connections whose task still holds a socket: those in `open`, and those shed but not yet
    /// closed.
    live: usize,
    /// Counts every change of state; orders the connections by when they began their current one.
    tick: u64,
}

struct Slot {
    /// Requests of this connection being answered (head read, answer not yet all written).
    answering: u32,
    /// The tick at which it began its current state: waiting for a head, or answering.
    since: u64,
    /// Dropped to shed the connection: its task then drops it, closing the socket.
    _shed: oneshot::Sender<()>,
}

impl Table {
    fn new(cap: usize) -> Table {
        Table {
            inner: Mutex::new(Inner {
                cap: cap.max(1),
                open: BTreeMap::new(),
                next_id: 0,
                live: 0,
                tick: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Each change is a few assignments that cannot panic midway; a poisoned table is whole.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Enters a new connection, waiting for its first head; when the table is full, sheds one
    /// first. Returns its id, the receiver that resolves when it is shed, and whether sockets
    /// shed but not yet closed hold more than half of `limits::CONSOLE_FILES_RESERVED`.
    fn admit(&self) -> (u64, oneshot::Receiver<()>, bool) {
        let mut t = self.lock();
        if t.open.len() >= t.cap {
            t.shed_one();
        }
        t.live = t.live.saturating_add(1);
        let crowded = t.live > t.cap.saturating_add(limits::CONSOLE_FILES_RESERVED / 2);
        let (tx, rx) = oneshot::channel();
        let id = t.next_id;
        t.next_id = t.next_id.wrapping_add(1);
        let since = t.tick();
        t.open.insert(
            id,
            Slot {
                answering: 0,
                since,
                _shed: tx,
            },
        );
        (id, rx, crowded)
    }

    /// Sheds one connection (see [`Inner::shed_one`]).
    fn shed_one(&self) -> bool {
        self.lock().shed_one()
    }

    fn answering(&self, id: u64) {
        let mut t = self.lock();
        let tick = t.tick();
        if let Some(s) = t.open.get_mut(&id) {
            s.answering = s.answering.saturating_add(1);
            if s.answering == 1 {
                s.since = tick;
            }
        }
    }

    fn answered(&self, id: u64) {
        let mut t = self.lock();
        let tick = t.tick();
        if let Some(s) = t.open.get_mut(&id) {
            s.answering = s.answering.saturating_sub(1);
            if s.answering == 0 {
                s.since = tick;
            }
        }
    }

    fn is_answering(&self, id: u64) -> bool {
        self.lock().open.get(&id).is_some_and(|s| s.answering > 0)
    }

    fn closed(&self, id: u64) {
        let mut t = self.lock();
        t.open.remove(&id);
        t.live = t.live.saturating_sub(1);
    }
}

impl Inner {
    fn tick(&mut self) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.tick
    }

    /// Sheds the connection that has waited longest for a request head; when none waits, the
    /// one whose answer began longest ago (a client that does not read its answer: a real
    /// answer is written in milliseconds). Returns whether there was one to shed.
    fn shed_one(&mut self) -> bool {
        let victim = self
            .open
            .iter()
            .min_by_key(|(_, s)| (s.answering > 0, s.since))
            .map(|(id, _)| *id);
        match victim {
            Some(id) => self.open.remove(&id).is_some(),
            None => false,
        }
    }
}

/// Removes its connection from the table when the connection's task ends, however it ends.
struct Open {
    table: Arc<Table>,
    id: u64,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.table.closed(self.id);
    }
}

/// Marks its connection as answering a request from its creation (hyper has read the whole
/// head) until it is dropped with the answer's body (all of it written, or the connection gone).
struct Answering {
    table: Arc<Table>,
    id: u64,
}

impl Answering {
    fn start(table: Arc<Table>, id: u64) -> Answering {
        table.answering(id);
        Answering { table, id }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.table.answered(self.id);
    }
}

/// An answer's body, carrying the mark that its connection is answering until hyper has
/// written all of it and drops it.
struct Tracked {
    body: Body,
    _answering: Answering,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket, noting when the console last wrote to it (milliseconds after
/// `opened`).
struct Counted {
    io: TcpStream,
    opened: tokio::time::Instant,
    wrote: Arc<AtomicU64>,
}

impl Counted {
    fn note_write<T>(&self, wrote: &Poll<std::io::Result<T>>) {
        if matches!(wrote, Poll::Ready(Ok(_))) {
            let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.wrote.store(ms, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let wrote = Pin::new(&mut self.io).poll_write(cx, buf);
        self.note_write(&wrote);
        wrote
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let wrote = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.note_write(&wrote);
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the connection behind `rx` was shed (its sender dropped).
    fn was_shed(rx: &mut oneshot::Receiver<()>) -> bool {
        matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Closed))
    }

    #[test]
    fn a_full_table_sheds_the_longest_waiting_connection_and_never_one_being_answered_while_one_waits()
     {
        let t = Table::new(3);
        let (a, mut a_shed, _) = t.admit();
        let (_, mut b_shed, _) = t.admit();
        let (_, mut c_shed, _) = t.admit();
        // a is answering; b has waited longest, then c.
        t.answering(a);
        t.admit();
        assert!(was_shed(&mut b_shed));
        assert!(!was_shed(&mut a_shed));
        assert!(!was_shed(&mut c_shed));
        // A connection whose answer is written waits anew, newer than c.
        t.answered(a);
        t.admit();
        assert!(was_shed(&mut c_shed));
        assert!(!was_shed(&mut a_shed));
    }

    #[test]
    fn when_every_connection_is_answering_the_oldest_answer_is_shed() {
        let t = Table::new(2);
        let (a, mut a_shed, _) = t.admit();
        let (b, mut b_shed, _) = t.admit();
        t.answering(b);
        t.answering(a);
        t.admit();
        assert!(was_shed(&mut b_shed));
        assert!(!was_shed(&mut a_shed));
        // A closed connection frees its slot without shedding anyone.
        t.closed(a);
        let (_, mut d_shed, _) = t.admit();
        assert!(!was_shed(&mut d_shed));
        assert_eq!(t.lock().open.len(), 2);
    }

    #[test]
    fn the_accept_loop_is_told_to_yield_only_once_shed_sockets_pile_up() {
        let t = Table::new(1);
        let room = limits::CONSOLE_FILES_RESERVED / 2;
        // The first holds the one slot; each later one sheds the one before, whose task has
        // not run to close its socket: `room` of those are let pile up.
        for n in 0..=room {
            let (_, _, crowded) = t.admit();
            assert!(!crowded, "after {n}");
        }
        let (last, _, crowded) = t.admit();
        assert!(crowded);
        // As the shed ones' tasks end, the count falls back.
        for id in 0..last {
            t.closed(id);
        }
        let (_, _, crowded) = t.admit();
        assert!(!crowded);
    }
}
