//! One daemon connection's outgoing lines: written straight to the socket by whichever thread
//! has the line (the connection's task, or the journal writer right after the commit that lets
//! an answer go out), whole and in the order given. A line the socket cannot take at once waits
//! in a queue that the connection's own drain task writes as the socket takes more; while
//! anything waits, later lines queue behind it. A line that goes out at once crosses no thread:
//! before this, every line went through a channel to a writer task, one more hand-off per answer
//! (issue 18).
//!
//! Also counts the connection's reports still in the journal writer's queue (they are not
//! answered, so nothing else bounds them).
//!
//! Must never: block a thread on the socket, split or reorder lines, or write after `close`.

use std::collections::VecDeque;
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::Notify;

/// The peer can no longer be written to (it went away, or the connection was closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed;

/// A connection's outgoing lines; clones share them.
#[derive(Clone)]
pub(crate) struct Outgoing(Arc<Inner>);

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("reports_in_flight", &self.reports_in_flight())
            .finish_non_exhaustive()
    }
}

struct Inner {
    w: OwnedWriteHalf,
    state: Mutex<State>,
    /// Wakes the drain task: a line is queued, or the connection closed.
    more: Notify,
    /// Fires when the queue has been written out (`drained`).
    emptied: Notify,
    /// What an empty line (a mark, never a real line: each ends in a newline) does once every
    /// line before it is written.
    at_mark: Box<dyn Fn() + Send + Sync>,
    reports: AtomicUsize,
}

#[derive(Default)]
struct State {
    queued: VecDeque<Vec<u8>>,
    done: bool,
}

/// What writing as much of a line as the socket takes now came to.
enum Wrote {
    All,
    /// This many bytes went out; the socket takes no more for now.
    Part(usize),
    Broken,
}

impl Inner {
    fn write_now(&self, line: &[u8]) -> Wrote {
        let mut off = 0;
        while let Some(rest) = line.get(off..).filter(|r| !r.is_empty()) {
            match self.w.try_write(rest) {
                Ok(0) => return Wrote::Broken,
                Ok(n) => off += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Wrote::Part(off),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Wrote::Broken,
            }
        }
        Wrote::All
    }

    /// Writes queued lines while the socket takes them. True when some are still waiting for
    /// the socket; false when the queue is empty or the connection is done.
    fn drain(&self) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        while !s.done {
            let Some(front) = s.queued.front_mut() else {
                self.emptied.notify_waiters();
                return false;
            };
            if front.is_empty() {
                s.queued.pop_front();
                (self.at_mark)();
                continue;
            }
            match self.write_now(front) {
                Wrote::All => {
                    s.queued.pop_front();
                }
                Wrote::Part(n) => {
                    front.drain(..n);
                    return true;
                }
                Wrote::Broken => {
                    s.done = true;
                    s.queued.clear();
                }
            }
        }
        self.emptied.notify_waiters();
        false
    }
}

impl Outgoing {
    /// The outgoing side of `w`, with its drain task on this runtime; `at_mark` runs when an
    /// empty line's turn comes.
    pub(crate) fn new(w: OwnedWriteHalf, at_mark: impl Fn() + Send + Sync + 'static) -> Outgoing {
        let inner = Arc::new(Inner {
            w,
            state: Mutex::new(State::default()),
            more: Notify::new(),
            emptied: Notify::new(),
            at_mark: Box::new(at_mark),
            reports: AtomicUsize::new(0),
        });
        let drainer = Arc::clone(&inner);
        tokio::spawn(async move {
            loop {
                drainer.more.notified().await;
                while drainer.drain() {
                    if drainer.w.writable().await.is_err() {
                        if let Ok(mut s) = drainer.state.lock() {
                            s.done = true;
                            s.queued.clear();
                        }
                        drainer.emptied.notify_waiters();
                        return;
                    }
                }
                if drainer.state.lock().map_or(true, |s| s.done) {
                    return;
                }
            }
        });
        Outgoing(inner)
    }

    /// Sends one line (or, empty, a mark): written now if nothing waits before it and the
    /// socket takes it, else queued behind what waits.
    pub(crate) fn send(&self, line: Vec<u8>) -> Result<(), Closed> {
        let inner = &self.0;
        let Ok(mut s) = inner.state.lock() else {
            return Err(Closed);
        };
        if s.done {
            return Err(Closed);
        }
        if !s.queued.is_empty() {
            s.queued.push_back(line);
            return Ok(());
        }
        if line.is_empty() {
            (inner.at_mark)();
            return Ok(());
        }
        match inner.write_now(&line) {
            Wrote::All => Ok(()),
            Wrote::Part(n) => {
                s.queued
                    .push_back(line.get(n..).unwrap_or_default().to_vec());
                inner.more.notify_one();
                Ok(())
            }
            Wrote::Broken => {
                s.done = true;
                Err(Closed)
            }
        }
    }

    /// One more of the connection's reports is in the journal writer's queue.
    pub(crate) fn report_queued(&self) {
        self.0.reports.fetch_add(1, Ordering::AcqRel);
    }

    /// One of them was committed (or its relay told it was not).
    pub(crate) fn report_done(&self) {
        let _ = self
            .0
            .reports
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// How many of the connection's reports are in the journal writer's queue.
    pub(crate) fn reports_in_flight(&self) -> usize {
        self.0.reports.load(Ordering::Acquire)
    }

    /// Waits until nothing is queued (or the connection is done).
    pub(crate) async fn drained(&self) {
        loop {
            let emptied = self.0.emptied.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self
                .0
                .state
                .lock()
                .map_or(true, |s| s.done || s.queued.is_empty())
            {
                return;
            }
            emptied.await;
        }
    }

    /// Nothing more is written, and the peer reads the end: the socket is shut down for
    /// writing now, whoever else still holds a clone.
    pub(crate) fn close(&self) {
        if let Ok(mut s) = self.0.state.lock() {
            s.done = true;
            s.queued.clear();
        }
        let fd = self.0.w.as_ref().as_raw_fd();
        // `shutdown(2)` on our own open socket: the peer reads the end now, and the descriptor
        // stays open (nothing else can take its number) until the last clone drops.
        let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Write);
        self.0.more.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    fn pair() -> (Outgoing, tokio::net::UnixStream, Arc<AtomicUsize>) {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (_r, w) = a.into_split();
        let marks = Arc::new(AtomicUsize::new(0));
        let m = Arc::clone(&marks);
        let out = Outgoing::new(w, move || {
            m.fetch_add(1, Ordering::SeqCst);
        });
        (out, b, marks)
    }

    #[tokio::test]
    async fn lines_larger_than_the_socket_takes_arrive_whole_and_in_order() {
        let (out, mut peer, marks) = pair();
        // Far more than a socket buffer: most of it waits for the drain task.
        let big: Vec<u8> = std::iter::repeat_n(b'x', 4 << 20).chain([b'\n']).collect();
        out.send(big.clone()).unwrap();
        out.send(b"second\n".to_vec()).unwrap();
        out.send(Vec::new()).unwrap();
        assert_eq!(marks.load(Ordering::SeqCst), 0, "the mark waits its turn");
        let mut got = vec![0u8; big.len() + 7];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..big.len()], &big[..]);
        assert_eq!(&got[big.len()..], b"second\n");
        out.drained().await;
        assert_eq!(marks.load(Ordering::SeqCst), 1);
        out.close();
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn a_closed_connection_refuses_lines_and_its_peer_reads_the_end() {
        let (out, mut peer, _) = pair();
        let keep = out.clone();
        out.close();
        assert_eq!(keep.send(b"late\n".to_vec()), Err(Closed));
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "nothing after close: {rest:?}");
    }

    #[tokio::test]
    async fn a_peer_that_went_away_is_reported_closed() {
        let (out, peer, _) = pair();
        drop(peer);
        // The first write may land in the kernel before the reset is seen; a later one fails.
        let mut refused = false;
        for _ in 0..4 {
            if out.send(b"x\n".to_vec()).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }

    #[test]
    fn reports_in_flight_are_counted_and_never_go_below_zero() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (out, _peer, _) = pair();
            assert_eq!(out.reports_in_flight(), 0);
            out.report_queued();
            assert_eq!(out.reports_in_flight(), 1);
            out.report_done();
            out.report_done();
            assert_eq!(out.reports_in_flight(), 0);
        });
    }
}
