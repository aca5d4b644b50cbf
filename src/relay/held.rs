//! Held calls: the daemon's final word on each as the relay routes it, the calls waiting for it,
//! and the background task that forwards or refuses a held call once its word arrives.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::oneshot;

use super::client::{ClientPump, refuse_to};
use super::in_flight::{Forwarded, RetryOf};
use super::refusal;
use super::server::write_server;
use crate::approval::Cause;
use crate::ipc::Release;
use crate::limits;

/// The daemon's final word on a held call, as the relay routes it: approved, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Released {
    Approved,
    /// Refused, with the text the client reads.
    Refused(String),
}

/// A held call waiting for its word: the digest the word must name, and where to send it.
pub(super) struct Waiting {
    pub(super) digest: String,
    pub(super) tx: oneshot::Sender<Released>,
}

/// Held calls by seq. Dropping an entry (its sender) refuses the call: that is how a lost
/// daemon, or a word that does not match, refuses every call it concerns.
pub(super) type HeldWaits = Arc<Mutex<HashMap<i64, Waiting>>>;

/// Hands a pushed word to the held call it names. Only a word naming this session, a held call
/// and that call's argument digest counts; a word with another digest refuses the call it
/// names, and a word for another session or a call that is not held means the link cannot be
/// trusted (false).
#[allow(clippy::too_many_arguments)]
pub(super) fn route_release(
    held: &HeldWaits,
    session: &str,
    word_session: &str,
    seq: i64,
    digest: &str,
    verdict: Release,
    cause: &str,
    reason: Option<String>,
) -> bool {
    if word_session != session {
        return false;
    }
    let Some(waiting) = held.lock().ok().and_then(|mut h| h.remove(&seq)) else {
        return false;
    };
    if waiting.digest != digest {
        // Dropped: refused as no decision.
        return true;
    }
    let word = match (verdict, Cause::parse(cause)) {
        (Release::Approved, Some(Cause::Person)) => Released::Approved,
        (Release::Rejected, Some(Cause::Person)) => {
            Released::Refused(refusal::person_rejected(reason.as_deref()))
        }
        (Release::Rejected, Some(Cause::Timeout)) => {
            Released::Refused(refusal::DENIED_APPROVAL_TIMEOUT.into())
        }
        (Release::Rejected, Some(Cause::SessionEnded | Cause::ConnectionDropped)) => {
            Released::Refused(refusal::DENIED_APPROVAL_ENDED.into())
        }
        (Release::Rejected, Some(Cause::ArgumentsUnknown)) => {
            Released::Refused(refusal::DENIED_ARGUMENTS_UNKNOWN.into())
        }
        (Release::Rejected, Some(Cause::OverBudget)) => {
            Released::Refused(refusal::DENIED_OVER_BUDGET.into())
        }
        (Release::Rejected, Some(Cause::Policy)) => {
            Released::Refused(refusal::DENIED_BY_POLICY.into())
        }
        _ => Released::Refused(refusal::DENIED_NO_DECISION.into()),
    };
    let _ = waiting.tx.send(word);
    true
}

/// The raw ids of held calls: another call with one of them is a duplicate.
pub(super) type HeldIds = Arc<Mutex<HashSet<Vec<u8>>>>;

/// How long the relay waits for the word on a call the daemon holds for `timeout_ms`: that
/// long (never more than the longest timeout config allows) plus a margin.
pub(super) fn release_wait(answer_hold_ms: Option<u64>) -> std::time::Duration {
    let t = std::time::Duration::from_millis(answer_hold_ms.unwrap_or(0))
        .min(limits::APPROVAL_TIMEOUT_MAX);
    t + limits::APPROVAL_RELAY_MARGIN
}

impl ClientPump {
    /// Sends a held call to the background: its line waits, with its digest, for the daemon's
    /// word while the pump goes back to the client at once. Approved, the original bytes go to
    /// the server; anything else, or no word within the approval timeout and a margin, refuses
    /// it.
    #[allow(clippy::too_many_arguments)] // one held call's whole description, used once
    pub(super) fn hold(
        &mut self,
        line: &[u8],
        id: Option<Vec<u8>>,
        word: oneshot::Receiver<Released>,
        timeout_ms: Option<u64>,
        requested: Option<String>,
        seq: i64,
        remembered: RetryOf,
    ) {
        if let (Some(id), Ok(mut ids)) = (&id, self.held_ids.lock()) {
            ids.insert(id.clone());
        }
        let line = line.to_vec();
        let (out_tx, dialect, in_flight, held_ids, child_in) = (
            self.out_tx.clone(),
            Arc::clone(&self.dialect),
            Arc::clone(&self.in_flight),
            Arc::clone(&self.held_ids),
            Arc::clone(&self.child_in),
        );
        let wait = release_wait(timeout_ms);
        self.held_tasks.retain(|t| !t.is_finished());
        self.held_tasks.push(tokio::spawn(async move {
            let word = match tokio::time::timeout(wait, word).await {
                Ok(Ok(w)) => w,
                _ => Released::Refused(refusal::DENIED_NO_DECISION.into()),
            };
            if let (Some(id), Ok(mut ids)) = (&id, held_ids.lock()) {
                ids.remove(id);
            }
            let refusal = match word {
                Released::Approved => {
                    if let (Some(id), Ok(mut m)) = (&id, in_flight.lock()) {
                        m.insert(
                            id.clone(),
                            Forwarded {
                                seq,
                                started: Instant::now(),
                                call: remembered,
                            },
                        );
                    }
                    if write_server(&child_in, &line).await {
                        return;
                    }
                    if let (Some(id), Ok(mut m)) = (&id, in_flight.lock()) {
                        m.remove(id);
                    }
                    refusal::DENIED_APPROVAL_ENDED.to_string()
                }
                Released::Refused(text) => text,
            };
            if let Some(id) = id {
                refuse_to(&out_tx, &dialect, &id, &refusal, requested.as_deref()).await;
            }
        }));
    }
}
