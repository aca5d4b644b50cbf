//! Calls held for a person: the daemon's in-memory registry of held calls, what binds a
//! person's word to one call, and how a call's real arguments are shown to that person.
//!
//! Owns: the held calls (bound to session, seq and the SHA-256 of the exact argument bytes),
//! resolving each exactly once (the first of person, timeout, session end or connection drop
//! wins), and [`visible`], the one rendering of argument text a person decides on. Must never:
//! journal or push anything itself (the daemon does, after taking a hold out of the registry),
//! summarise or truncate what a person is shown, or let one hold's word reach another call.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::ipc::{HeldCall, Outgoing};
use crate::limits;
use crate::text::{decode_non_ascii_escapes, invisible, non_ascii_note, visible};

/// Why a held call was resolved; journaled as the `reason` of its `call.approval` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A person approved or rejected it on the command line.
    Person,
    /// Nobody decided within the approval timeout.
    Timeout,
    /// The relay ended the session (or the daemon stopped) while it was held.
    SessionEnded,
    /// The relay's connection to the daemon closed while it was held.
    ConnectionDropped,
    /// Its arguments were too large to send to the daemon, so no person could check them.
    ArgumentsUnknown,
    /// A person approved it, but a budget of its session had no room left by then.
    OverBudget,
    /// A person approved it, but the rules in force by then refuse it (a deny added while it
    /// was held, or a `context.session` limit reached meanwhile).
    Policy,
    /// It could not be held: `limits::HELD_CALLS_MAX` calls were held already.
    Capacity,
}

impl Cause {
    pub(crate) const ALL: [Cause; 8] = [
        Cause::Person,
        Cause::Timeout,
        Cause::SessionEnded,
        Cause::ConnectionDropped,
        Cause::ArgumentsUnknown,
        Cause::OverBudget,
        Cause::Policy,
        Cause::Capacity,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::Person => "person",
            Cause::Timeout => "timeout",
            Cause::SessionEnded => "session-ended",
            Cause::ConnectionDropped => "connection-dropped",
            Cause::ArgumentsUnknown => "arguments-unknown",
            Cause::OverBudget => "over-budget",
            Cause::Policy => "policy",
            Cause::Capacity => "capacity",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// In words, for `holdcall log` and the CLI.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Cause::Person => "by a person",
            Cause::Timeout => "nobody decided in time",
            Cause::SessionEnded => "the session ended while it was held",
            Cause::ConnectionDropped => "the relay's connection dropped while it was held",
            Cause::ArgumentsUnknown => "its arguments were too large to show to a person",
            Cause::OverBudget => "a person approved it, but its session's budget had no room left",
            Cause::Policy => "a person approved it, but the rules in force by then refuse it",
            Cause::Capacity => "too many calls were held already to hold it",
        }
    }
}

/// One call held for a person, and everything its final word needs.
#[derive(Debug)]
pub(crate) struct Hold {
    pub id: String,
    /// The daemon connection that asked; only it hears the word.
    pub conn: u64,
    pub session_id: String,
    pub seq: i64,
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    pub args_digest: String,
    pub arguments: Option<String>,
    pub policy_id: Option<String>,
    pub reason: String,
    pub held_at: Instant,
    pub deadline: Instant,
    /// The asking connection's outgoing lines, for the pushed word.
    pub push: Outgoing,
    /// The timeout task, stopped when another cause wins.
    pub timer: Option<AbortHandle>,
}

impl Hold {
    pub(crate) fn listed(&self, now: Instant) -> HeldCall {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        HeldCall {
            id: self.id.clone(),
            session_id: self.session_id.clone(),
            seq: self.seq,
            agent: self.agent.clone(),
            connector: self.connector.clone(),
            tool: self.tool.clone(),
            args_digest: self.args_digest.clone(),
            arguments: self.arguments.clone(),
            policy_id: self.policy_id.clone(),
            reason: self.reason.clone(),
            age_ms: ms(now.saturating_duration_since(self.held_at)),
            left_ms: ms(self.deadline.saturating_duration_since(now)),
        }
    }
}

/// The registry is full (`limits::HELD_CALLS_MAX`).
#[derive(Debug)]
pub(crate) struct Full;

/// Every call held right now, and the management connections watching for new ones.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    holds: Mutex<HashMap<String, Hold>>,
    watchers: Mutex<Vec<Outgoing>>,
}

impl Registry {
    /// Adds a hold and tells every watcher; a full registry refuses it.
    pub(crate) fn insert(&self, hold: Hold) -> Result<(), Full> {
        let line = {
            let Ok(mut holds) = self.holds.lock() else {
                return Err(Full);
            };
            if holds.len() >= limits::HELD_CALLS_MAX
                || holds.contains_key(&hold.id)
                || holds
                    .values()
                    .filter(|h| h.session_id == hold.session_id)
                    .count()
                    >= limits::HELD_CALLS_PER_SESSION_MAX
            {
                return Err(Full);
            }
            let line = crate::ipc::answer_line(&crate::ipc::ManageResponse::HeldNew {
                call: hold.listed(Instant::now()),
            });
            holds.insert(hold.id.clone(), hold);
            line
        };
        if let (Some(line), Ok(mut w)) = (line, self.watchers.lock()) {
            w.retain(|tx| tx.send(line.clone()).is_ok());
        }
        Ok(())
    }

    /// True when no more calls of `session_id` can be held: `limits::HELD_CALLS_MAX` in all,
    /// or `limits::HELD_CALLS_PER_SESSION_MAX` of that session (so one session cannot starve the
    /// others' `ask` rules).
    pub(crate) fn is_full(&self, session_id: &str) -> bool {
        self.holds
            .lock()
            .map(|h| {
                h.len() >= limits::HELD_CALLS_MAX
                    || h.values().filter(|x| x.session_id == session_id).count()
                        >= limits::HELD_CALLS_PER_SESSION_MAX
            })
            .unwrap_or(true)
    }

    /// Sets the timer of a hold still held.
    pub(crate) fn set_timer(&self, id: &str, timer: AbortHandle) {
        match self.holds.lock() {
            Ok(mut h) => match h.get_mut(id) {
                Some(hold) => hold.timer = Some(timer),
                None => timer.abort(),
            },
            Err(_) => timer.abort(),
        }
    }

    /// Takes the hold out: whoever takes it resolves it, and nobody else can.
    pub(crate) fn take(&self, id: &str) -> Option<Hold> {
        let hold = self.holds.lock().ok()?.remove(id)?;
        if let Some(t) = &hold.timer {
            t.abort();
        }
        Some(hold)
    }

    /// Takes the hold out for its own timer, which must not stop itself: it goes on to journal
    /// and push the timeout.
    pub(crate) fn take_expired(&self, id: &str) -> Option<Hold> {
        self.holds.lock().ok()?.remove(id)
    }

    /// Takes every hold `pred` selects (a session's, a connection's, all of them).
    pub(crate) fn take_where(&self, pred: impl Fn(&Hold) -> bool) -> Vec<Hold> {
        let Ok(mut holds) = self.holds.lock() else {
            return Vec::new();
        };
        let ids: Vec<String> = holds
            .values()
            .filter(|h| pred(h))
            .map(|h| h.id.clone())
            .collect();
        let mut out: Vec<Hold> = ids.iter().filter_map(|id| holds.remove(id)).collect();
        for h in &out {
            if let Some(t) = &h.timer {
                t.abort();
            }
        }
        out.sort_by_key(|h| (h.held_at, h.seq));
        out
    }

    /// The held calls, oldest first.
    pub(crate) fn list(&self) -> Vec<HeldCall> {
        let now = Instant::now();
        let mut calls: Vec<(Instant, HeldCall)> = self
            .holds
            .lock()
            .map(|h| h.values().map(|x| (x.held_at, x.listed(now))).collect())
            .unwrap_or_default();
        calls.sort_by_key(|(t, c)| (*t, c.seq));
        calls.into_iter().map(|(_, c)| c).collect()
    }

    /// Subscribes a management connection to new holds.
    pub(crate) fn watch(&self, tx: Outgoing) {
        if let Ok(mut w) = self.watchers.lock() {
            w.push(tx);
        }
    }
}

/// A fresh hold id: 12 lowercase hex characters from the kernel's random source.
pub(crate) fn new_hold_id() -> std::io::Result<String> {
    crate::ids::random_hex(6)
}

/// Checks a person's rejection reason: at most `limits::APPROVAL_REASON_BYTES_MAX` bytes, and
/// no [`invisible`] character (the reason reaches the journal and the model). Right-to-left
/// letters are allowed: they are escaped wherever the reason is shown.
pub(crate) fn check_reason(reason: &str) -> Result<(), String> {
    if reason.len() > limits::APPROVAL_REASON_BYTES_MAX {
        return Err(format!(
            "the reason is {} bytes; at most {} are kept",
            reason.len(),
            limits::APPROVAL_REASON_BYTES_MAX
        ));
    }
    if let Some(c) = reason.chars().find(|c| invisible(*c)) {
        return Err(format!(
            "the reason contains the invisible or control character U+{:04X}; write it on one line of visible text",
            c as u32
        ));
    }
    Ok(())
}

/// A hold id as `holdcall approve ID` takes it: 12 lowercase hex characters.
pub(crate) fn valid_hold_id(id: &str) -> bool {
    id.len() == 12
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One held call as a person reads it before deciding: who, what, how long is left, and the
/// arguments in full through [`visible`], with the [`non_ascii_note`] under them.
pub(crate) fn render(c: &HeldCall) -> String {
    let mut out = String::new();
    let agent = match &c.agent {
        Some(a) => visible(a),
        None => "(unenrolled)".to_string(),
    };
    let _ = writeln!(out, "held call {}", visible(&c.id));
    let _ = writeln!(out, "  agent      {agent}");
    let _ = writeln!(out, "  connector  {}", visible(&c.connector));
    let _ = writeln!(out, "  tool       {}", visible(&c.tool));
    if let Some(note) = non_ascii_note(&c.tool) {
        let _ = writeln!(out, "             ({note})");
    }
    let _ = writeln!(
        out,
        "  held       {} ago, {} left",
        short_duration(c.age_ms),
        short_duration(c.left_ms)
    );
    let _ = writeln!(
        out,
        "  rule       {} {}",
        visible(c.policy_id.as_deref().unwrap_or("-")),
        visible(&c.reason)
    );
    let _ = writeln!(
        out,
        "  call       {} of session {}",
        c.seq,
        visible(&c.session_id)
    );
    let _ = writeln!(out, "  sha256     {}", visible(&c.args_digest));
    match &c.arguments {
        Some(a) => {
            let _ = writeln!(out, "  arguments  {}", visible(a));
            if let Some(note) = non_ascii_note(a) {
                let _ = writeln!(out, "             ({note})");
            }
            if let Some(decoded) = decode_non_ascii_escapes(a) {
                let _ = writeln!(out, "  decoded    {}", visible(&decoded));
                if let Some(note) = non_ascii_note(&decoded) {
                    let _ = writeln!(out, "             ({note})");
                }
            }
        }
        None => {
            let _ = writeln!(out, "  arguments  (none)");
        }
    }
    out
}

/// A duration for people: `1m57s`, `4s`.
pub(crate) fn short_duration(ms: u64) -> String {
    let s = ms / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::non_ascii_note;

    #[test]
    fn right_to_left_letters_are_escapes_so_the_terminal_cannot_reorder_their_neighbours() {
        assert_eq!(visible("a\u{5d0}b"), "a\\u{5d0}b");
        assert_eq!(
            visible("\u{627}\u{fb1d}\u{fe70}"),
            "\\u{627}\\u{fb1d}\\u{fe70}"
        );
        assert_eq!(visible("\u{10800}\u{1e900}"), "\\u{10800}\\u{1e900}");
        assert_eq!(non_ascii_note("\u{5d0}"), None);
        // A person may still reject in Hebrew: the reason is escaped wherever it is shown.
        assert!(check_reason("\u{5dc}\u{5d0}").is_ok());
        assert!(check_reason("no\u{200b}").is_err());
    }

    #[test]
    fn a_held_call_with_a_json_escaped_lookalike_shows_it_decoded_and_flagged() {
        let call = HeldCall {
            id: "0123456789ab".into(),
            session_id: "s".into(),
            seq: 1,
            agent: None,
            connector: "pay".into(),
            tool: "s\u{435}nd".into(),
            policy_id: None,
            reason: "r".into(),
            args_digest: "d".into(),
            arguments: Some(r#"{"to":"p\u0430ypal"}"#.into()),
            age_ms: 0,
            left_ms: 0,
        };
        let shown = render(&call);
        assert!(shown.contains("  tool       s\u{435}nd\n             (non-ASCII characters shown as themselves: U+0435 \u{435})"), "{shown}");
        assert!(
            shown.contains(r#"  arguments  {"to":"p\u0430ypal"}"#),
            "{shown}"
        );
        assert!(shown.contains("  decoded    {\"to\":\"p\u{430}ypal\"}\n             (non-ASCII characters shown as themselves: U+0430 \u{430})"), "{shown}");
    }

    #[test]
    fn a_reason_with_a_control_or_invisible_character_or_too_long_is_refused() {
        assert!(check_reason("not this file, use /tmp").is_ok());
        assert!(check_reason("a\nb").is_err());
        assert!(check_reason("a\u{202e}b").is_err());
        assert!(check_reason(&"x".repeat(limits::APPROVAL_REASON_BYTES_MAX + 1)).is_err());
        assert!(check_reason(&"x".repeat(limits::APPROVAL_REASON_BYTES_MAX)).is_ok());
    }

    #[test]
    fn every_cause_round_trips_through_its_string() {
        for c in Cause::ALL {
            assert_eq!(Cause::parse(c.as_str()), Some(c));
        }
        assert_eq!(Cause::parse("rule"), None);
    }

    #[test]
    fn hold_ids_are_twelve_lowercase_hex_characters() {
        let id = new_hold_id().unwrap();
        assert!(valid_hold_id(&id), "{id}");
        assert!(!valid_hold_id("ABCDEF012345"));
        assert!(!valid_hold_id("abc"));
    }

    #[test]
    fn durations_read_as_minutes_and_seconds() {
        assert_eq!(short_duration(4_200), "4s");
        assert_eq!(short_duration(117_000), "1m57s");
        assert_eq!(short_duration(3_723_000), "1h02m03s");
    }

    fn hold(id: &str, session: &str, seq: i64) -> Hold {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let tx = Outgoing::new(a.into_split().1, || {});
        Hold {
            id: id.into(),
            conn: 1,
            session_id: session.into(),
            seq,
            agent: None,
            connector: "c".into(),
            tool: "t".into(),
            args_digest: "d".into(),
            arguments: None,
            policy_id: None,
            reason: String::new(),
            held_at: Instant::now(),
            deadline: Instant::now() + Duration::from_secs(1),
            push: tx,
            timer: None,
        }
    }

    #[tokio::test]
    async fn a_hold_is_taken_once() {
        let r = Registry::default();
        r.insert(hold("aaaaaaaaaaaa", "s", 1)).unwrap();
        assert!(r.take("aaaaaaaaaaaa").is_some());
        assert!(r.take("aaaaaaaaaaaa").is_none());
    }

    #[tokio::test]
    async fn taking_a_sessions_holds_leaves_the_others() {
        let r = Registry::default();
        r.insert(hold("aaaaaaaaaaaa", "s", 1)).unwrap();
        r.insert(hold("bbbbbbbbbbbb", "t", 1)).unwrap();
        let taken = r.take_where(|h| h.session_id == "s");
        assert_eq!(taken.len(), 1);
        assert_eq!(r.list().len(), 1);
    }
}
