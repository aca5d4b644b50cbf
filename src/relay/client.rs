//! The client pump: every line the client sends is classified; a `tools/call` is asked of the
//! daemon and forwarded only on an allow; everything refused is answered through the one
//! stdout writer.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;

use super::classify::{self, Anomaly, ClientFrame};
use super::held::HeldIds;
use super::in_flight::{Forwarded, InFlight, Retries, RetryOf};
use super::link::Link;
use super::refusal;
use super::server::{ServerInput, write_server};
use crate::ipc::{SessionRequest, SessionResponse, Verdict, WireError};
use crate::limits;
use crate::mcp::envelope;
use crate::mcp::version::Negotiation;

/// The length of `s` once written as a JSON string.
fn escaped_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if c.is_control() => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
        + 2
}

/// The arguments as the daemon is sent them, and whether they were left out. The limit applies
/// to the arguments as they travel, escaped inside a JSON string (quotes and backslashes
/// double), so a large call never overflows the socket line.
fn arguments_as_sent(arguments: Option<Vec<u8>>) -> (Option<String>, bool) {
    let text = arguments.map(|a| String::from_utf8_lossy(&a).into_owned());
    match text {
        Some(t) if escaped_len(&t) <= limits::ARGUMENTS_BYTES_MAX => (Some(t), false),
        Some(_) => (None, true),
        None => (None, false),
    }
}

/// The text a call refused on the daemon's word (or for want of one) is answered with; without
/// a daemon, it says why there was none.
fn refusal_text(refused: Verdict, no_daemon: Option<&str>) -> String {
    match (refused, no_daemon) {
        (Verdict::Deny, _) => refusal::DENIED_BY_POLICY.to_string(),
        (Verdict::OverBudget, _) => refusal::DENIED_OVER_BUDGET.to_string(),
        (_, Some(no_daemon)) => format!("{} ({no_daemon})", refusal::DENIED_NO_DECISION),
        _ => refusal::DENIED_NO_DECISION.to_string(),
    }
}

/// What the daemon's answer to call `seq` of `session` means, and whether the link can still be
/// trusted to pair questions with answers. Only a decision naming this session and this call
/// counts (and a `held` one only with its hold); anything else is no decision, and an answer
/// for another call poisons the link.
pub(super) fn verdict_of(
    answer: Result<SessionResponse, WireError>,
    session: &str,
    seq: i64,
) -> (Verdict, bool) {
    match answer {
        Ok(SessionResponse::Decision {
            session_id,
            seq: s,
            decision,
            hold,
            ..
        }) if session_id == session && s == seq => match (decision, hold) {
            (Verdict::Held, None) => (Verdict::Undecided, false),
            (d, _) => (d, true),
        },
        Ok(_) => (Verdict::Undecided, false),
        Err(_) => (Verdict::Undecided, false),
    }
}

/// Writes the refusal of call `id` to the client through the one stdout writer.
pub(super) async fn refuse_to(
    out_tx: &mpsc::Sender<Vec<u8>>,
    dialect: &Mutex<Negotiation>,
    id: &[u8],
    text: &str,
    requested: Option<&str>,
) {
    let version = match requested {
        Some(v) => v.to_string(),
        None => dialect
            .lock()
            .map(|d| d.version().to_string())
            .unwrap_or_default(),
    };
    let _ = out_tx.send(refusal::refusal(id, text, &version)).await;
}

/// The client→server direction: classify, ask, forward or refuse.
pub(super) struct ClientPump {
    pub(super) child_in: ServerInput,
    pub(super) out_tx: mpsc::Sender<Vec<u8>>,
    pub(super) dialect: Arc<Mutex<Negotiation>>,
    pub(super) in_flight: InFlight,
    pub(super) retries: Retries,
    pub(super) held_ids: HeldIds,
    /// One task per held call, waiting for its word.
    pub(super) held_tasks: Vec<tokio::task::JoinHandle<()>>,
    pub(super) link: Link,
    pub(super) session_id: String,
    pub(super) seq: i64,
    pub(super) said: HashSet<&'static str>,
    /// `tools/list` requests forwarded, awaiting their answer (`listing`).
    pub(super) listings: super::listing::Listings,
}

impl ClientPump {
    /// Handles one client line; false when the server can no longer be written to.
    pub(super) async fn client_line(&mut self, line: Vec<u8>) -> bool {
        match classify::classify_client_line(&line) {
            ClientFrame::Blank => self.forward(&line).await,
            ClientFrame::Forward(msg) => {
                if let Ok(mut d) = self.dialect.lock() {
                    d.on_client(&msg);
                }
                super::listing::note_request(&self.listings, &msg);
                self.forward(&line).await
            }
            ClientFrame::ToolCall(call) => {
                let id = call.id.map(<[u8]>::to_vec);
                let name = call.name.clone();
                let arguments = call.arguments.map(<[u8]>::to_vec);
                // Only a call that answers the server's questions can be a retry.
                let retry_state = call
                    .request_state
                    .filter(|_| call.input_responses)
                    .and_then(envelope::request_state_key);
                self.tool_call(
                    &line,
                    id,
                    name,
                    arguments,
                    call.protocol_version,
                    retry_state,
                )
                .await
            }
            ClientFrame::UnreadableCall { id, anomaly } => {
                let id = id.map(<[u8]>::to_vec);
                self.anomaly(anomaly);
                if let Some(id) = id {
                    self.refuse(&id, refusal::DENIED_UNREADABLE, None).await;
                }
                true
            }
            ClientFrame::DisguisedMethod { id } => {
                // Never forwarded: a server that folds case or trims would run it undecided.
                let reply = id.map(refusal::disguised_method_refusal);
                self.anomaly(Anomaly::DisguisedMethod);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::DisguisedKey { id } => {
                // Never forwarded: a server that trims keys would read a method or params the
                // relay did not see.
                let reply = id.map(refusal::disguised_key_refusal);
                self.anomaly(Anomaly::DisguisedKey);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::BatchWithCall { ids } => {
                let reply = refusal::batch_refusal(&ids, refusal::DENIED_BATCH);
                self.anomaly(Anomaly::Batch);
                if let Some(reply) = reply {
                    let _ = self.out_tx.send(reply).await;
                }
                true
            }
            ClientFrame::BatchForward => self.forward(&line).await,
            ClientFrame::Unreadable(anomaly) => {
                self.anomaly(anomaly);
                true
            }
        }
    }

    async fn forward(&mut self, line: &[u8]) -> bool {
        write_server(&self.child_in, line).await
    }

    fn anomaly(&mut self, anomaly: Anomaly) {
        if self.said.insert(anomaly.as_str()) {
            eprintln!(
                "holdcall: not relaying {} (recorded as anomaly {}; later ones are recorded without this note)",
                anomaly.describe(),
                anomaly.as_str()
            );
        }
        self.link.report(SessionRequest::Anomaly {
            session_id: self.session_id.clone(),
            anomaly: anomaly.as_str().to_string(),
        });
    }

    pub(super) fn oversized(&mut self, n: usize) {
        eprintln!(
            "holdcall: not relaying a line of {n} bytes from the client: it is over the {} byte limit",
            limits::FRAME_BYTES_MAX
        );
        self.anomaly(Anomaly::Oversized);
    }

    /// Writes the refusal of call `id`, shaped for the revision the request names in its
    /// `_meta`, else for the one the session negotiated.
    async fn refuse(&mut self, id: &[u8], text: &str, requested: Option<&str>) {
        refuse_to(&self.out_tx, &self.dialect, id, text, requested).await;
    }

    async fn tool_call(
        &mut self,
        line: &[u8],
        id: Option<Vec<u8>>,
        name: String,
        arguments: Option<Vec<u8>>,
        requested_version: Option<String>,
        retry_state: Option<Vec<u8>>,
    ) -> bool {
        if self
            .refused_before_asking(id.as_deref(), &name, requested_version.as_deref())
            .await
        {
            return true;
        }
        self.seq += 1;
        let seq = self.seq;
        let digest = classify::args_digest(arguments.as_deref());
        let retry_of = retry_state.and_then(|state| {
            self.retries
                .lock()
                .ok()
                .and_then(|mut r| r.take(&state, &name, &digest))
        });
        let remembered = RetryOf {
            origin: retry_of.unwrap_or(seq),
            tool: name.clone(),
            digest: digest.clone(),
        };
        let (arguments, arguments_omitted) = arguments_as_sent(arguments);
        let word = self.link.expect_release(seq, &digest);
        let answer = self
            .link
            .decide(SessionRequest::CallRequest {
                session_id: self.session_id.clone(),
                seq,
                tool: name,
                args_digest: digest,
                arguments,
                arguments_omitted,
                retry_of,
            })
            .await;
        let timeout_ms = match &answer {
            Ok(SessionResponse::Decision { hold: Some(h), .. }) => Some(h.timeout_ms),
            _ => None,
        };
        let (verdict, trusted) = verdict_of(answer, &self.session_id, seq);
        if !trusted {
            self.link.dead.store(true, Ordering::SeqCst);
        }
        if verdict == Verdict::Held {
            self.hold(
                line,
                id,
                word,
                timeout_ms,
                requested_version,
                seq,
                remembered,
            );
            return true;
        }
        self.link.forget_release(seq);
        match verdict {
            Verdict::Allow => {
                if let Some(id) = id
                    && let Ok(mut m) = self.in_flight.lock()
                {
                    m.insert(
                        id,
                        Forwarded {
                            seq,
                            started: Instant::now(),
                            call: remembered,
                        },
                    );
                }
                self.forward(line).await
            }
            refused => {
                if let Some(id) = id {
                    let text = refusal_text(refused, self.link.no_daemon.as_deref());
                    self.refuse(&id, &text, requested_version.as_deref()).await;
                }
                true
            }
        }
    }

    /// Refuses a call before the daemon is asked: a tool name that cannot be read, or an id
    /// another call still held or in flight has. True when it was refused.
    async fn refused_before_asking(
        &mut self,
        id: Option<&[u8]>,
        name: &str,
        requested_version: Option<&str>,
    ) -> bool {
        if name.is_empty()
            || name.len() > limits::TOOL_NAME_BYTES_MAX
            || name.chars().any(char::is_control)
        {
            self.anomaly(Anomaly::UnreadableCall);
            if let Some(id) = id {
                self.refuse(id, refusal::DENIED_UNREADABLE, requested_version)
                    .await;
            }
            return true;
        }
        if let Some(id) = id {
            let held = self.held_ids.lock().map(|h| h.contains(id)).unwrap_or(true);
            let duplicate = held
                || self
                    .in_flight
                    .lock()
                    .map(|m| m.contains_key(id))
                    .unwrap_or(true);
            if duplicate {
                // Two calls with one id cannot be told apart in the answers, nor in the journal.
                self.anomaly(Anomaly::DuplicateId);
                self.refuse(id, refusal::DENIED_DUPLICATE_ID, requested_version)
                    .await;
                return true;
            }
        }
        false
    }
}
