//! The link to the daemon: one connection, the tasks that ask on it and read from it, and what a
//! lost or silent daemon means for the session (every held and later call refused).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::held::{HeldWaits, Released, Waiting, route_release};
use crate::config::Home;
use crate::ipc::{self, SessionRequest, SessionResponse, WireError};
use crate::limits;

/// Most daemon messages the relay queues before it refuses calls and drops events.
const LINK_QUEUE: usize = 256;

type Reply = oneshot::Sender<Result<SessionResponse, WireError>>;

/// The relay's side of the daemon connection. One task writes requests, one at a time, and waits
/// for each answer; another reads every line the daemon sends, passing answers to the first and
/// routing pushed words (`call.released`) to the held call they name. Call decisions have their
/// own queue and go first, so reports (outcomes, anomalies) queued by a chatty session never
/// delay a decision toward its timeout. Once an exchange fails the link is dead for the rest of
/// the session: every held call is refused, and every later call is refused at once instead of
/// waiting again.
#[derive(Clone)]
pub(super) struct Link {
    decisions: mpsc::Sender<(SessionRequest, Reply)>,
    /// Reports, and the session's start and end, in the order they happened.
    in_order: mpsc::Sender<(SessionRequest, Option<Reply>)>,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) lost: Arc<AtomicU64>,
    pub(super) held: HeldWaits,
    /// Why the session has no daemon from its start (none could be reached, or the one on the
    /// socket is another home's): every refusal says it.
    pub(super) no_daemon: Option<Arc<str>>,
}

/// Most decisions that can wait for the daemon at once (the relay asks one at a time).
const DECISION_QUEUE: usize = 16;

/// Answers read but not yet taken: one is expected at a time; a second is a broken daemon.
const ANSWER_QUEUE: usize = 4;

impl Link {
    pub(super) fn start(
        conn: Option<ipc::SessionConn>,
        session_id: String,
        no_daemon: Option<String>,
    ) -> Link {
        let (decisions, mut decision_rx) = mpsc::channel::<(SessionRequest, Reply)>(DECISION_QUEUE);
        let (in_order, mut order_rx) = mpsc::channel::<(SessionRequest, Option<Reply>)>(LINK_QUEUE);
        let dead = Arc::new(AtomicBool::new(conn.is_none()));
        let lost = Arc::new(AtomicU64::new(0));
        let held: HeldWaits = Arc::new(Mutex::new(HashMap::new()));
        let (answer_tx, mut answer_rx) = mpsc::channel::<SessionResponse>(ANSWER_QUEUE);
        let (mut writer, reader_task) = match conn {
            Some(c) => {
                let (reader, writer) = c.into_split();
                let task = tokio::spawn(read_daemon(
                    reader,
                    answer_tx,
                    Arc::clone(&held),
                    Arc::clone(&dead),
                    Arc::clone(&lost),
                    session_id,
                ));
                (Some(writer), Some(task))
            }
            None => (None, None),
        };
        let (d, l, h) = (Arc::clone(&dead), Arc::clone(&lost), Arc::clone(&held));
        tokio::spawn(async move {
            // Reports sent since the last answer: a report has no answer, and any answer read
            // after it says it was committed (or pushed back as not recorded), because the
            // daemon journals and answers a connection's lines in order. Lost if the link dies.
            let mut unconfirmed: u64 = 0;
            loop {
                let (req, reply) = tokio::select! {
                    biased;
                    Some((req, reply)) = decision_rx.recv() => (req, Some(reply)),
                    Some((req, reply)) = order_rx.recv() => (req, reply),
                    else => break,
                };
                let result = match writer.as_mut() {
                    Some(w) if !d.load(Ordering::SeqCst) => {
                        if reply.is_some() {
                            let answered = exchange(w, &mut answer_rx, &req).await;
                            if answered.is_ok() {
                                unconfirmed = 0;
                            }
                            answered
                        } else {
                            unconfirmed += 1;
                            send_report(w, &req).await
                        }
                    }
                    _ => Err(WireError::Closed),
                };
                if let Err(e) = &result {
                    if !d.swap(true, Ordering::SeqCst) {
                        eprintln!(
                            "holdcall: lost the daemon ({e}); every later tool call in this session will be refused"
                        );
                    }
                    writer = None;
                    if let Some(t) = &reader_task {
                        t.abort();
                    }
                    refuse_all_held(&h);
                    // The reports sent since the last answer (this one too, if it is one): whether
                    // they were recorded cannot be known now.
                    l.fetch_add(std::mem::take(&mut unconfirmed), Ordering::SeqCst);
                }
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
        });
        Link {
            decisions,
            in_order,
            dead,
            lost,
            held,
            no_daemon: no_daemon.map(Arc::from),
        }
    }

    /// Sends a one-way report; a full queue or a dead link loses it (counted, said at exit).
    pub(super) fn report(&self, req: SessionRequest) {
        if self.dead.load(Ordering::SeqCst) || self.in_order.try_send((req, None)).is_err() {
            self.lost.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Asks for a call's decision and waits at most `limits::DECISION_TIMEOUT`, queueing
    /// included.
    pub(super) async fn decide(&self, req: SessionRequest) -> Result<SessionResponse, WireError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(WireError::Closed);
        }
        let (tx, rx) = oneshot::channel();
        if self.decisions.try_send((req, tx)).is_err() {
            self.dead.store(true, Ordering::SeqCst);
            return Err(WireError::Closed);
        }
        self.wait(rx).await
    }

    /// Asks after every report queued before it (the session's start and end).
    pub(super) async fn ask_in_order(
        &self,
        req: SessionRequest,
    ) -> Result<SessionResponse, WireError> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(WireError::Closed);
        }
        let timeout = within(&req);
        let (tx, rx) = oneshot::channel();
        if self.in_order.send((req, Some(tx))).await.is_err() {
            return Err(WireError::Closed);
        }
        self.wait_for(rx, timeout).await
    }

    async fn wait(
        &self,
        rx: oneshot::Receiver<Result<SessionResponse, WireError>>,
    ) -> Result<SessionResponse, WireError> {
        self.wait_for(rx, limits::DECISION_TIMEOUT).await
    }

    async fn wait_for(
        &self,
        rx: oneshot::Receiver<Result<SessionResponse, WireError>>,
        timeout: std::time::Duration,
    ) -> Result<SessionResponse, WireError> {
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(WireError::Closed),
            Err(_) => {
                if !self.dead.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "holdcall: the daemon did not answer within {timeout:?}; every later tool call in this session will be refused"
                    );
                }
                refuse_all_held(&self.held);
                Err(WireError::Timeout(timeout))
            }
        }
    }

    /// Makes ready for a word on call `seq` before asking about it, so a word pushed right after
    /// the `held` answer always finds its call.
    pub(super) fn expect_release(&self, seq: i64, digest: &str) -> oneshot::Receiver<Released> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut h) = self.held.lock() {
            h.insert(
                seq,
                Waiting {
                    digest: digest.to_string(),
                    tx,
                },
            );
        }
        rx
    }

    /// The call was not held after all.
    pub(super) fn forget_release(&self, seq: i64) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(&seq);
        }
    }
}

/// Refuses every held call: their senders are dropped, which their waiters read as no word.
pub(super) fn refuse_all_held(held: &HeldWaits) {
    if let Ok(mut h) = held.lock() {
        h.clear();
    }
}

/// Writes one report, within `limits::DECISION_TIMEOUT`. A report has no answer (issue 18):
/// the daemon journals it with the next commit and pushes `report.unrecorded` only if it cannot.
async fn send_report(
    w: &mut ipc::ConnWriter,
    req: &SessionRequest,
) -> Result<SessionResponse, WireError> {
    let bound = within(req);
    tokio::time::timeout(bound, w.send(req))
        .await
        .map_err(|_| WireError::Timeout(bound))??;
    Ok(SessionResponse::Ok)
}

/// Writes one request and waits for the one answer the reader passes on, within
/// `limits::DECISION_TIMEOUT`. An answer already waiting before the request was sent answers
/// nothing we asked: the link cannot be trusted.
async fn exchange(
    w: &mut ipc::ConnWriter,
    answers: &mut mpsc::Receiver<SessionResponse>,
    req: &SessionRequest,
) -> Result<SessionResponse, WireError> {
    if answers.try_recv().is_ok() {
        return Err(WireError::Protocol(
            "the daemon answered a question it was not asked".into(),
        ));
    }
    let asked = async {
        w.send(req).await?;
        answers.recv().await.ok_or(WireError::Closed)
    };
    let bound = within(req);
    tokio::time::timeout(bound, asked)
        .await
        .map_err(|_| WireError::Timeout(bound))?
}

/// Reads every line from the daemon: answers go to the asking task, words on held calls to the
/// call they name. When the connection ends, every held call is refused.
async fn read_daemon(
    mut reader: ipc::ConnReader,
    answers: mpsc::Sender<SessionResponse>,
    held: HeldWaits,
    dead: Arc<AtomicBool>,
    lost: Arc<AtomicU64>,
    session_id: String,
) {
    let why = loop {
        let line = reader.recv().await;
        match line {
            Ok(SessionResponse::Released {
                session_id: s,
                seq,
                args_digest,
                verdict,
                cause,
                reason,
            }) => {
                if !route_release(
                    &held,
                    &session_id,
                    &s,
                    seq,
                    &args_digest,
                    verdict,
                    &cause,
                    reason,
                ) {
                    break "the daemon sent a word about a call this session did not hold"
                        .to_string();
                }
            }
            // A report the daemon could not journal (reports have no answer otherwise): counted,
            // said now and at exit.
            Ok(SessionResponse::ReportUnrecorded { message }) => {
                eprintln!("holdcall: a report about this session was {message}");
                lost.fetch_add(1, Ordering::SeqCst);
            }
            Ok(answer) => {
                if answers.send(answer).await.is_err() {
                    break "the relay stopped listening".to_string();
                }
            }
            Err(e) => break e.to_string(),
        }
    };
    refuse_all_held(&held);
    // Said once, by whichever side notices first; the asking side then finds the link dead.
    if !dead.swap(true, Ordering::SeqCst) {
        eprintln!(
            "holdcall: lost the daemon ({why}); every held and every later tool call in this session will be refused"
        );
    }
}

/// How long the relay waits for the answer to `req`: a session start may read the credential
/// store first; everything else is a decision or a report.
fn within(req: &SessionRequest) -> std::time::Duration {
    match req {
        SessionRequest::SessionStart { .. } => limits::STORE_REQUEST_TIMEOUT,
        _ => limits::DECISION_TIMEOUT,
    }
}

/// True when the daemon of `home` answers nothing within `limits::DECISION_TIMEOUT` on a
/// connection of its own (a `daemon.status`, which reads no credential store). False when it
/// answers, or when no second connection can be had (then the session's own answer decides).
pub(super) async fn daemon_unresponsive(home: &Home) -> bool {
    // Connecting is bounded too: a connection that is accepted late is no answer either, and
    // neither is one whose `daemon.hello` went unanswered (`connect` then says Timeout, its
    // bound being the same as this one's, so either may fire first).
    let asked = tokio::time::timeout(limits::DECISION_TIMEOUT, async {
        let mut conn = match ipc::connect(home).await {
            Ok(conn) => conn.manage(),
            Err(WireError::Timeout(t)) => return Some(Err(WireError::Timeout(t))),
            Err(_) => return None,
        };
        Some(
            conn.call(&ipc::ManageRequest::Status, limits::DECISION_TIMEOUT)
                .await,
        )
    })
    .await;
    matches!(asked, Err(_) | Ok(Some(Err(WireError::Timeout(_)))))
}
