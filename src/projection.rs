//! One reading of the journal that `holdcall log` and the console share: journal entries turned
//! into calls with their state (allowed, denied, over budget, held, approved, rejected and why,
//! with the server's outcome), session timelines, and the gaps a reader can detect.
//!
//! Owns: what an entry means in words ([`why`]) and what became of a call ([`State`]). Must
//! never: do I/O (callers read the entries), or decide anything: it reports what the daemon
//! journaled, so the command line and the console can never disagree on a call.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::approval::Cause;
use crate::journal::Entry;

/// What became of one call, as far as the journal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum State {
    /// The rules allowed it and it was forwarded.
    Allowed,
    /// A rule refused it.
    Denied,
    /// The rules allowed it but a budget had no room.
    OverBudget,
    /// The daemon could not decide; the relay refused it.
    Undecided,
    /// An `ask` rule held it and no word is journaled yet.
    Held,
    /// A person approved it; it was forwarded.
    Approved,
    /// Rejected: by a person, a timeout, the session's end, a dropped connection, …
    Rejected,
}

impl State {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Allowed => "allowed",
            State::Denied => "denied",
            State::OverBudget => "over-budget",
            State::Undecided => "undecided",
            State::Held => "held",
            State::Approved => "approved",
            State::Rejected => "rejected",
        }
    }

    /// Whether the server was sent the call (so an outcome should follow).
    pub(crate) fn forwarded(self) -> bool {
        matches!(self, State::Allowed | State::Approved)
    }
}

/// The server's answer to a forwarded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Outcome {
    pub chain_seq: i64,
    pub ok: bool,
    pub duration_ms: Option<i64>,
}

/// One call: its `call.request` entry and what followed it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Call {
    /// The chain_seq of its `call.request` entry.
    pub chain_seq: i64,
    pub occurred_at: String,
    pub session_id: String,
    pub seq: i64,
    pub connector: Option<String>,
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub args_digest: Option<String>,
    /// The decision as journaled (`allow`, `deny`, `ask`, `over-budget`, `undecided`).
    pub decision: String,
    pub policy_id: Option<String>,
    pub reason: Option<String>,
    pub state: State,
    /// The hold id, for a call an `ask` rule held.
    pub hold: Option<String>,
    /// Why a held call ended as it did (`approval::Cause`), once it did.
    pub cause: Option<String>,
    /// The chain_seq of its `call.approval` entry.
    pub approval_seq: Option<i64>,
    pub outcome: Option<Outcome>,
    /// The state in words, as `holdcall log` prints it after the call's own reason.
    pub state_why: String,
}

/// One relay session: its start, its calls and its end.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Session {
    pub id: String,
    /// The chain_seq of its `session.start`, or of its first entry when the start is missing.
    pub chain_seq: i64,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// `ended`, or `unfinished` (no `session.end`: still running, or cut off).
    pub state: &'static str,
    pub end_reason: Option<String>,
    pub connector: Option<String>,
    pub client: Option<String>,
    pub agent: Option<String>,
    pub protocol_version: Option<String>,
    pub calls: usize,
    pub refused: usize,
    pub anomalies: usize,
    /// Every entry of the session, in chain order.
    pub entries: Vec<i64>,
    /// Whether its `session.start` is in the journal.
    pub started: bool,
}

/// What a reader can tell is missing or wrong without the daemon.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Gaps {
    /// Sessions without a `session.end` (still running, or the relay was cut off).
    pub unfinished_sessions: Vec<String>,
    /// Forwarded calls in an ended session with no `call.outcome`: (session, seq, chain_seq).
    pub calls_without_outcome: Vec<(String, i64, i64)>,
    /// `call.outcome` or `call.approval` entries with no `call.request` before them.
    pub entries_without_call: Vec<i64>,
    /// Entries naming a session whose `session.start` is not in the journal.
    pub entries_without_session: Vec<i64>,
    /// Anomalies by name.
    pub anomalies: BTreeMap<String, usize>,
}

/// The journal read as calls and sessions.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Projection {
    /// In chain order.
    pub calls: Vec<Call>,
    /// In order of their first entry.
    pub sessions: Vec<Session>,
    pub gaps: Gaps,
    /// Where each call is in `calls`, by (session, seq).
    #[serde(skip)]
    call_at: HashMap<(String, i64), usize>,
    /// Where each session is in `sessions`, by id.
    #[serde(skip)]
    session_at: HashMap<String, usize>,
    /// How many entries were read into it.
    #[serde(skip)]
    read: usize,
}

impl Projection {
    /// Reads `entries` (in chain order; a window of the journal gives a window's answer).
    pub(crate) fn build(entries: &[Entry]) -> Projection {
        let mut p = Projection::default();
        for e in entries {
            p.add(e);
        }
        p.settle();
        p
    }

    /// Reads one more entry, newer than every entry read so far. The console keeps one
    /// projection and adds only the entries appended since, so no entry is read twice; call
    /// [`Projection::settle`] before reading the gaps.
    pub(crate) fn add(&mut self, e: &Entry) {
        self.read += 1;
        if let Some(id) = &e.fields.session_id {
            self.add_to_session(e, id);
        }
        match e.kind.as_str() {
            "call.request" => self.add_call(e),
            "call.approval" | "call.outcome" => self.add_word(e),
            "anomaly" => {
                let name = e.fields.anomaly.clone().unwrap_or_else(|| "unnamed".into());
                *self.gaps.anomalies.entry(name).or_insert(0) += 1;
            }
            _ => {}
        }
    }

    /// The session an entry names, made on its first entry: its entries, start, end, anomalies.
    fn add_to_session(&mut self, e: &Entry, id: &String) {
        let p = self;
        let f = &e.fields;
        let i = match p.session_at.get(id) {
            Some(&i) => i,
            None => {
                p.sessions.push(Session {
                    id: id.clone(),
                    chain_seq: e.chain_seq,
                    started_at: None,
                    ended_at: None,
                    state: "unfinished",
                    end_reason: None,
                    connector: None,
                    client: None,
                    agent: None,
                    protocol_version: None,
                    calls: 0,
                    refused: 0,
                    anomalies: 0,
                    entries: Vec::new(),
                    started: false,
                });
                let i = p.sessions.len() - 1;
                p.session_at.insert(id.clone(), i);
                i
            }
        };
        if let Some(s) = p.sessions.get_mut(i) {
            s.entries.push(e.chain_seq);
            if e.kind != "session.start" && !s.started {
                p.gaps.entries_without_session.push(e.chain_seq);
            }
            match e.kind.as_str() {
                "session.start" => {
                    s.started = true;
                    s.chain_seq = e.chain_seq;
                    s.started_at = Some(e.occurred_at.clone());
                    s.connector = f.connector.clone();
                    s.client = f.client.clone();
                    s.agent = f.agent.clone();
                }
                "session.end" => {
                    s.state = "ended";
                    s.ended_at = Some(e.occurred_at.clone());
                    s.end_reason = f.reason.clone();
                    s.protocol_version = f.protocol_version.clone();
                }
                "anomaly" => s.anomalies += 1,
                _ => {}
            }
        }
    }

    /// A `call.request`: a new call, in the state its decision gives it.
    fn add_call(&mut self, e: &Entry) {
        let p = self;
        let f = &e.fields;
        let (Some(id), Some(seq)) = (f.session_id.clone(), f.seq) else {
            return;
        };
        let decision = f.decision.clone().unwrap_or_default();
        let state = match decision.as_str() {
            "allow" => State::Allowed,
            "deny" => State::Denied,
            "over-budget" => State::OverBudget,
            "ask" => State::Held,
            _ => State::Undecided,
        };
        if let Some(s) = p.session_at.get(&id).and_then(|&i| p.sessions.get_mut(i)) {
            s.calls += 1;
            if !state.forwarded() && state != State::Held {
                s.refused += 1;
            }
        }
        p.call_at.insert((id.clone(), seq), p.calls.len());
        let mut call = Call {
            chain_seq: e.chain_seq,
            occurred_at: e.occurred_at.clone(),
            session_id: id,
            seq,
            connector: f.connector.clone(),
            tool: f.tool.clone(),
            agent: f.agent.clone(),
            args_digest: f.args_digest.clone(),
            decision,
            policy_id: f.policy_id.clone(),
            reason: f.reason.clone(),
            state,
            hold: (state == State::Held)
                .then(|| f.policy_id.clone())
                .flatten(),
            cause: None,
            approval_seq: None,
            outcome: None,
            state_why: String::new(),
        };
        call.state_why = state_why(&call);
        p.calls.push(call);
    }

    /// A `call.approval` or `call.outcome`: the later word on a call already read.
    fn add_word(&mut self, e: &Entry) {
        let p = self;
        let f = &e.fields;
        let call = f
            .session_id
            .clone()
            .zip(f.seq)
            .and_then(|k| p.call_at.get(&k))
            .and_then(|&i| p.calls.get_mut(i));
        let Some(call) = call else {
            p.gaps.entries_without_call.push(e.chain_seq);
            return;
        };
        if e.kind == "call.outcome" {
            call.outcome = Some(Outcome {
                chain_seq: e.chain_seq,
                ok: f.ok == Some(true),
                duration_ms: f.duration_ms,
            });
        } else {
            call.state = if f.decision.as_deref() == Some("approved") {
                State::Approved
            } else {
                State::Rejected
            };
            call.hold = f.policy_id.clone().or(call.hold.take());
            call.cause = f.reason.clone();
            call.approval_seq = Some(e.chain_seq);
            if call.state == State::Rejected
                && let Some(s) = p
                    .session_at
                    .get(&call.session_id)
                    .and_then(|&i| p.sessions.get_mut(i))
            {
                s.refused += 1;
            }
        }
        call.state_why = state_why(call);
    }

    /// Works out the gaps that depend on later entries (unfinished sessions, forwarded calls of
    /// an ended session without an outcome) from what has been read so far.
    pub(crate) fn settle(&mut self) {
        let p = self;
        let ended: HashMap<&str, bool> = p
            .sessions
            .iter()
            .map(|s| (s.id.as_str(), s.state == "ended"))
            .collect();
        p.gaps.calls_without_outcome = p
            .calls
            .iter()
            .filter(|c| {
                c.state.forwarded()
                    && c.outcome.is_none()
                    && ended.get(c.session_id.as_str()) == Some(&true)
            })
            .map(|c| (c.session_id.clone(), c.seq, c.chain_seq))
            .collect();
        p.gaps.unfinished_sessions = p
            .sessions
            .iter()
            .filter(|s| s.state == "unfinished")
            .map(|s| s.id.clone())
            .collect();
    }

    /// How many entries this projection has read, since it was made.
    pub(crate) fn entries_read(&self) -> usize {
        self.read
    }

    /// The call whose `call.request` is entry `chain_seq`.
    pub(crate) fn call_at(&self, chain_seq: i64) -> Option<&Call> {
        self.calls
            .binary_search_by_key(&chain_seq, |c| c.chain_seq)
            .ok()
            .and_then(|i| self.calls.get(i))
    }

    /// How many calls are in each state.
    pub(crate) fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for c in &self.calls {
            *out.entry(c.state.as_str()).or_insert(0) += 1;
        }
        out
    }
}

/// What became of a call, in words: the state and, when it ended, its cause and outcome.
fn state_why(c: &Call) -> String {
    let outcome = match &c.outcome {
        Some(o) => format!(
            ", answered {} in {} ms",
            if o.ok { "ok" } else { "with an error" },
            o.duration_ms.unwrap_or(0)
        ),
        None => String::new(),
    };
    match c.state {
        State::Held => "held for a person".into(),
        State::Approved => format!("approved by a person and forwarded{outcome}"),
        State::Rejected => match c.cause.as_deref().and_then(Cause::parse) {
            Some(Cause::Person) => "rejected by a person".into(),
            Some(cause) => format!("rejected: {}", cause.describe()),
            None => format!("rejected ({})", c.cause.as_deref().unwrap_or("no cause")),
        },
        State::Allowed if c.outcome.is_some() => format!("forwarded{outcome}"),
        State::Allowed => "forwarded, no answer recorded".into(),
        other => other.as_str().into(),
    }
}

/// What one entry says, in words, as `holdcall log` prints it in its DETAIL column and the
/// console beside each entry. `call` is what became of the call a `call.request` opened, when
/// the reader knows it: its state is added after the entry's own reason.
pub(crate) fn why(e: &Entry, call: Option<&Call>) -> String {
    let f = &e.fields;
    match e.kind.as_str() {
        "call.request" => {
            let mut s = format!(
                "seq {} {}",
                f.seq.unwrap_or(0),
                f.reason.as_deref().unwrap_or("")
            );
            if let Some(c) = call.filter(|c| c.state != State::Denied) {
                s.push_str(" → ");
                s.push_str(&c.state_why);
            }
            s
        }
        "call.outcome" => format!(
            "seq {} {} in {} ms",
            f.seq.unwrap_or(0),
            if f.ok == Some(true) { "ok" } else { "failed" },
            f.duration_ms.unwrap_or(0)
        ),
        "session.start" => format!(
            "client {} agent {}",
            f.client.as_deref().unwrap_or("-"),
            f.agent.as_deref().unwrap_or("(unenrolled)")
        ),
        "session.end" => match (&f.protocol_version, &f.reason) {
            (_, Some(r)) => r.clone(),
            (Some(v), None) => format!("protocol {v}"),
            (None, None) => String::new(),
        },
        "call.approval" => approval_why(e),
        "anomaly" => f.anomaly.clone().unwrap_or_default(),
        "policy.change" | "budget.change" | "agent.change" | "daemon.start" => {
            f.reason.clone().unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// Why a held call ended as it did, in words: a person (with their reason), a timeout, the
/// session ending, the connection dropping, or arguments nobody could be shown.
fn approval_why(e: &Entry) -> String {
    let f = &e.fields;
    let cause = f.reason.as_deref().and_then(Cause::parse);
    let why = match (f.decision.as_deref(), cause) {
        (Some("approved"), Some(Cause::Person)) => "approved by a person".into(),
        (_, Some(Cause::Person)) => match &f.detail {
            Some(r) => format!("rejected by a person: {r}"),
            None => "rejected by a person".into(),
        },
        (_, Some(c)) => format!("rejected: {}", c.describe()),
        (_, None) => format!("cause {}", f.reason.as_deref().unwrap_or("-")),
    };
    format!(
        "seq {} {why} (hold {})",
        f.seq.unwrap_or(0),
        f.policy_id.as_deref().unwrap_or("-")
    )
}

/// Text of several lines (policy text, a diff) as a person must see it: each line through
/// [`crate::text::visible`] (the one rendering the CLI and the console share), the line breaks kept
/// as line breaks.
pub(crate) fn visible_lines(s: &str) -> String {
    s.split('\n')
        .map(crate::text::visible)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Fields;

    fn entry(chain_seq: i64, kind: &str, fields: Fields) -> Entry {
        Entry {
            chain_seq,
            schema_version: 1,
            kind: kind.into(),
            occurred_at: format!("2026-11-30T00:00:{chain_seq:02}.000000000Z"),
            fields,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn sess(id: &str) -> Fields {
        Fields {
            session_id: Some(id.into()),
            connector: Some("demo".into()),
            ..Fields::default()
        }
    }

    fn req(id: &str, seq: i64, decision: &str, policy: Option<&str>) -> Fields {
        Fields {
            session_id: Some(id.into()),
            seq: Some(seq),
            tool: Some("echo".into()),
            decision: Some(decision.into()),
            policy_id: policy.map(Into::into),
            reason: Some(format!("rule says {decision}")),
            ..Fields::default()
        }
    }

    fn journal() -> Vec<Entry> {
        vec![
            entry(1, "session.start", sess("s1")),
            entry(2, "call.request", req("s1", 1, "allow", None)),
            entry(
                3,
                "call.outcome",
                Fields {
                    ok: Some(true),
                    duration_ms: Some(4),
                    ..req("s1", 1, "", None)
                },
            ),
            entry(4, "call.request", req("s1", 2, "deny", Some("p1"))),
            entry(5, "call.request", req("s1", 3, "ask", Some("abcdefabcdef"))),
            entry(
                6,
                "call.approval",
                Fields {
                    decision: Some("rejected".into()),
                    reason: Some("timeout".into()),
                    policy_id: Some("abcdefabcdef".into()),
                    ..req("s1", 3, "", None)
                },
            ),
            entry(7, "call.request", req("s1", 4, "allow", None)),
            entry(8, "session.end", sess("s1")),
            entry(9, "call.request", req("s2", 1, "ask", Some("000000000000"))),
            entry(
                10,
                "anomaly",
                Fields {
                    anomaly: Some("oversized".into()),
                    ..sess("s2")
                },
            ),
        ]
    }

    #[test]
    fn each_call_gets_the_state_its_entries_say() {
        let p = Projection::build(&journal());
        let states: Vec<_> = p.calls.iter().map(|c| c.state).collect();
        assert_eq!(
            states,
            [
                State::Allowed,
                State::Denied,
                State::Rejected,
                State::Allowed,
                State::Held
            ]
        );
        assert!(p.calls[0].outcome.as_ref().unwrap().ok);
        assert_eq!(p.calls[2].cause.as_deref(), Some("timeout"));
        assert_eq!(p.calls[2].state_why, "rejected: nobody decided in time");
        assert_eq!(p.call_at(5).unwrap().seq, 3);
    }

    #[test]
    fn the_gaps_are_unfinished_sessions_missing_outcomes_missing_starts_and_anomalies() {
        let p = Projection::build(&journal());
        assert_eq!(p.gaps.unfinished_sessions, ["s2"]);
        assert_eq!(p.gaps.calls_without_outcome, [("s1".to_string(), 4, 7)]);
        assert_eq!(p.gaps.entries_without_session, [9, 10]);
        assert_eq!(p.gaps.anomalies.get("oversized"), Some(&1));
        let s1 = &p.sessions[0];
        assert_eq!((s1.state, s1.calls, s1.refused), ("ended", 4, 2));
    }

    #[test]
    fn visible_lines_keeps_line_breaks_and_shows_every_other_hidden_character() {
        assert_eq!(visible_lines("a\u{202e}b\nc\r\n"), "a\\u{202e}b\nc\\u{d}\n");
    }

    #[test]
    fn an_outcome_without_its_request_is_a_gap_not_a_call() {
        let p = Projection::build(&[entry(
            1,
            "call.outcome",
            Fields {
                ok: Some(true),
                ..req("s", 1, "", None)
            },
        )]);
        assert!(p.calls.is_empty());
        assert_eq!(p.gaps.entries_without_call, [1]);
    }

    #[test]
    fn a_call_requests_words_carry_its_later_state_but_a_denial_says_it_once() {
        let j = journal();
        let p = Projection::build(&j);
        assert_eq!(
            why(&j[1], p.call_at(2)),
            "seq 1 rule says allow → forwarded, answered ok in 4 ms"
        );
        assert_eq!(why(&j[3], p.call_at(4)), "seq 2 rule says deny");
        assert_eq!(
            why(&j[5], None),
            "seq 3 rejected: nobody decided in time (hold abcdefabcdef)"
        );
    }
}
