//! The daemon's unit tests: budgets and retries, the fixed clock, session ids.

use super::*;
use crate::daemon::{
    decide::{OVER_BUDGET, Ruling, budget_verdict},
    session::valid_session_id,
};
use crate::ipc::Verdict;
use crate::policy::Effect;

fn echo_budget(calls: i64) -> Vec<Budget> {
    vec![Budget {
        id: "budget-1".into(),
        seq: 1,
        calls,
        tool: Some("echo".into()),
        agent: None,
        connector: None,
    }]
}

fn allow(s: &mut Session, budgets: &[Budget], seq: i64, retry_of: Option<i64>) -> Ruling {
    budget_verdict(
        s,
        budgets,
        seq,
        "echo",
        retry_of,
        Effect::Allow,
        None,
        "r".into(),
    )
}

#[test]
fn a_retry_of_a_charged_call_is_allowed_without_a_second_charge() {
    let mut s = Session::new("c".into(), None);
    let b = echo_budget(1);
    assert!(allow(&mut s, &b, 1, None).charged);
    let v = allow(&mut s, &b, 2, Some(1));
    assert_eq!((v.verdict, v.charged), (Verdict::Allow, false));
    assert_eq!(v.reason, "r; retry of call 1, not charged again");
    assert_eq!(s.counters.snapshot("echo").tool_calls, 1);
    assert_eq!(s.counters.snapshot("echo").calls, 2);
}

#[test]
fn a_retry_naming_a_call_that_was_never_charged_is_charged_as_a_new_call() {
    let mut s = Session::new("c".into(), None);
    let b = echo_budget(1);
    // Refused by a rule: never charged, so it cannot be retried for free.
    let v = budget_verdict(&mut s, &b, 1, "echo", None, Effect::Deny, None, "r".into());
    assert_eq!((v.verdict, v.word.as_str()), (Verdict::Deny, "deny"));
    assert!(allow(&mut s, &b, 2, Some(1)).charged);
    let v = allow(&mut s, &b, 3, Some(7));
    assert_eq!(
        (v.verdict, v.word.as_str()),
        (Verdict::OverBudget, OVER_BUDGET)
    );
    assert_eq!(v.policy_id.as_deref(), Some("budget-1"));
    let c = s.counters.snapshot("echo");
    assert_eq!((c.calls, c.allowed, c.refused), (3, 1, 2));
}

#[test]
fn a_retry_of_a_call_to_another_tool_is_not_a_retry() {
    let mut s = Session::new("c".into(), None);
    let b = echo_budget(1);
    let v = budget_verdict(&mut s, &b, 1, "add", None, Effect::Allow, None, "r".into());
    assert!(v.charged);
    assert!(allow(&mut s, &b, 2, Some(1)).charged);
    assert_eq!(allow(&mut s, &b, 3, Some(1)).verdict, Verdict::OverBudget);
}

#[test]
fn only_a_debug_build_takes_its_clock_from_holdcall_clock() {
    let t = Some("2026-01-03T20:00:00+00:00".to_string());
    assert_eq!(fixed_clock(t.clone(), true).map(|c| c.hour()), Some(20));
    assert_eq!(fixed_clock(t, false), None);
    assert_eq!(fixed_clock(Some("soon".into()), true), None);
    assert_eq!(fixed_clock(None, true), None);
}

#[test]
fn session_ids_are_32_hex_characters() {
    assert!(valid_session_id("0123456789abcdef0123456789abcdef"));
    assert!(!valid_session_id("0123456789abcdef"));
    assert!(!valid_session_id("0123456789abcdef0123456789abcdeg"));
}

/// The journal writer sending answers itself, right after their commit (issue 18).
mod writer_answers {
    use super::*;
    use crate::journal::{Fields, Kind};
    use tokio::io::AsyncBufReadExt as _;

    struct Running {
        writer: Writer,
        db: std::path::PathBuf,
        _dir: tempfile::TempDir,
    }

    fn running() -> Running {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("holdcall.db");
        let mut j = Journal::open(&db, "test-machine", Durability::Process).unwrap();
        let seen = j.load_in_force().unwrap().data_version;
        let (tx, rx) = std_mpsc::channel();
        let core = WriterCore {
            j,
            generation: 1,
            seen,
            fault: Arc::default(),
        };
        std::thread::spawn(move || writer_thread(core, rx));
        Running {
            writer: Writer(tx),
            db,
            _dir: dir,
        }
    }

    type Peer = tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>;

    fn connection() -> (ipc::Outgoing, Peer, tokio::net::unix::OwnedWriteHalf) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (_r, w) = ours.into_split();
        let (r, keep) = theirs.into_split();
        (
            ipc::Outgoing::new(w, || {}),
            tokio::io::BufReader::new(r),
            keep,
        )
    }

    async fn next_line(peer: &mut Peer) -> String {
        let mut line = String::new();
        peer.read_line(&mut line).await.unwrap();
        line
    }

    fn anomaly() -> Fields {
        Fields {
            session_id: Some("0123456789abcdef0123456789abcdef".into()),
            anomaly: Some("test".into()),
            ..Fields::default()
        }
    }

    fn kinds_in(db: &std::path::Path, kind: &str) -> i64 {
        let c = rusqlite::Connection::open(db).unwrap();
        c.query_row(
            "SELECT count(*) FROM journal WHERE kind = ?1",
            [kind],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// A decision made under `generation`, whose answer `line` the writer is to send `out`.
    async fn decided(
        w: &Running,
        out: &ipc::Outgoing,
        generation: u64,
        line: &str,
    ) -> Result<Entry, writer::AppendError> {
        let answer = Some((out.clone(), line.as_bytes().to_vec()));
        w.writer
            .append_decided(Kind::CallRequest, anomaly(), generation, answer)
            .await
    }

    #[tokio::test]
    async fn a_report_is_not_answered_and_the_decision_behind_it_is_answered_once_both_are_committed()
     {
        let w = running();
        let (out, mut peer, _keep) = connection();
        assert!(w.writer.report(Kind::Anomaly, anomaly(), &out, false).await);
        let recorded = decided(&w, &out, 1, "{\"d\":1}\n").await;
        assert!(recorded.is_ok());
        assert_eq!(next_line(&mut peer).await, "{\"d\":1}\n");
        assert_eq!(out.reports_in_flight(), 0);
        assert_eq!(kinds_in(&w.db, "anomaly"), 1);
        assert_eq!(kinds_in(&w.db, "call.request"), 1);
    }

    #[tokio::test]
    async fn a_report_the_journal_cannot_take_is_pushed_back_as_unrecorded_with_why() {
        let w = running();
        let (out, mut peer, _keep) = connection();
        let raw = rusqlite::Connection::open(&w.db).unwrap();
        raw.execute_batch(
            "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
                 BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
        )
        .unwrap();
        assert!(w.writer.report(Kind::Anomaly, anomaly(), &out, true).await);
        let word: serde_json::Value = serde_json::from_str(&next_line(&mut peer).await).unwrap();
        assert_eq!(word["kind"], "report.unrecorded");
        let message = word["message"].as_str().unwrap();
        assert!(message.starts_with("not recorded: "), "{message}");
        assert!(message.contains("simulated write failure"), "{message}");
        assert_eq!(out.reports_in_flight(), 0);
    }

    #[tokio::test]
    async fn a_decisions_answer_is_sent_by_the_writer_only_when_the_decision_was_recorded() {
        let w = running();
        let (out, mut peer, _keep) = connection();
        // Made with a set no longer in force: not recorded, so its answer is not sent.
        let stale = decided(&w, &out, 7, "{\"stale\":1}\n").await;
        assert!(matches!(stale, Err(writer::AppendError::Stale)));
        let recorded = decided(&w, &out, 1, "{\"fresh\":1}\n").await;
        assert!(recorded.is_ok());
        assert_eq!(next_line(&mut peer).await, "{\"fresh\":1}\n");
        assert_eq!(kinds_in(&w.db, "call.request"), 1);
    }
}
