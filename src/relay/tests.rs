//! The relay's unit tests.

use super::client::verdict_of;
use super::held::{HeldWaits, Released, Waiting, release_wait, route_release};
use super::in_flight::{RetryOf, RetryStates};
use super::link::daemon_unresponsive;
use super::*;
use crate::ipc::{Release, Verdict};

fn of(origin: i64, tool: &str) -> RetryOf {
    RetryOf {
        origin,
        tool: tool.into(),
        digest: "d".into(),
    }
}

#[test]
fn a_daemon_that_never_says_which_home_it_serves_is_unresponsive() {
    // Found in review of issue 12, item 9: the liveness check gave up on a daemon that
    // accepted but never answered `daemon.hello` only if its own bound fired before the
    // hello's equal bound; when the hello's fired first the check said "answers", and the
    // relay waited out the session start's store bound in silence.
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().to_path_buf());
    home.prepare().unwrap();
    // This very test binary listens, so the peer check passes; nothing is ever accepted.
    let (_listener, _) = crate::os::peer::listen_passing_credentials(&home.socket_path()).unwrap();
    let rt = ipc::current_thread().unwrap();
    let started = std::time::Instant::now();
    assert!(rt.block_on(daemon_unresponsive(&home)));
    assert!(started.elapsed() < limits::DECISION_TIMEOUT + std::time::Duration::from_secs(1));
}

#[test]
fn a_request_state_is_used_once_and_only_for_the_same_tool_and_arguments() {
    let mut r = RetryStates::default();
    r.remember(b"s".to_vec(), of(3, "confirm"));
    assert_eq!(r.take(b"s", "other", "d"), None);
    assert_eq!(r.take(b"s", "confirm", "other-digest"), None);
    assert_eq!(r.take(b"s", "confirm", "d"), Some(3));
    assert_eq!(r.take(b"s", "confirm", "d"), None, "used up");
    assert_eq!(r.take(b"never", "confirm", "d"), None);
}

#[test]
fn remembered_states_are_bounded_and_the_oldest_is_forgotten_first() {
    let mut r = RetryStates::default();
    for i in 0..=limits::RETRY_STATES_MAX {
        r.remember(i.to_string().into_bytes(), of(1, "t"));
    }
    assert_eq!(r.by_state.len(), limits::RETRY_STATES_MAX);
    assert_eq!(r.take(b"0", "t", "d"), None);
    assert_eq!(r.take(b"1", "t", "d"), Some(1));
    r.remember(vec![b'x'; limits::REQUEST_STATE_BYTES_MAX + 1], of(1, "t"));
    assert!(
        !r.by_state
            .keys()
            .any(|k| k.len() > limits::REQUEST_STATE_BYTES_MAX)
    );
}

fn decision(session: &str, seq: i64, decision: Verdict) -> Result<SessionResponse, WireError> {
    Ok(SessionResponse::Decision {
        session_id: session.into(),
        seq,
        decision,
        policy_id: None,
        reason: String::new(),
        hold: None,
    })
}

#[test]
fn only_an_allow_for_this_session_and_call_allows() {
    assert_eq!(
        verdict_of(decision("s", 3, Verdict::Allow), "s", 3),
        (Verdict::Allow, true)
    );
}

#[test]
fn an_answer_for_another_call_is_no_decision_and_poisons_the_link() {
    assert_eq!(
        verdict_of(decision("s", 2, Verdict::Allow), "s", 3),
        (Verdict::Undecided, false)
    );
}

#[test]
fn an_answer_for_another_session_is_no_decision_and_poisons_the_link() {
    assert_eq!(
        verdict_of(decision("t", 3, Verdict::Allow), "s", 3),
        (Verdict::Undecided, false)
    );
}

#[test]
fn an_answer_of_another_kind_is_no_decision() {
    assert_eq!(
        verdict_of(Ok(SessionResponse::Ok), "s", 3),
        (Verdict::Undecided, false)
    );
    assert_eq!(
        verdict_of(
            Ok(SessionResponse::Error {
                message: "x".into()
            }),
            "s",
            3
        ),
        (Verdict::Undecided, false)
    );
}

#[test]
fn a_failed_exchange_is_no_decision() {
    assert_eq!(
        verdict_of(Err(WireError::Closed), "s", 3),
        (Verdict::Undecided, false)
    );
    assert_eq!(
        verdict_of(Err(WireError::Protocol("bad".into())), "s", 3),
        (Verdict::Undecided, false)
    );
}

#[test]
fn an_undecided_answer_is_a_refusal_but_keeps_the_link() {
    assert_eq!(
        verdict_of(decision("s", 3, Verdict::Undecided), "s", 3),
        (Verdict::Undecided, true)
    );
}

fn waiting(seq: i64, digest: &str) -> (HeldWaits, oneshot::Receiver<Released>) {
    let held: HeldWaits = Arc::new(Mutex::new(HashMap::new()));
    let (tx, rx) = oneshot::channel();
    held.lock().unwrap().insert(
        seq,
        Waiting {
            digest: digest.into(),
            tx,
        },
    );
    (held, rx)
}

#[test]
fn a_word_naming_this_session_the_held_call_and_its_digest_releases_it() {
    let (held, mut rx) = waiting(2, "d");
    assert!(route_release(
        &held,
        "s",
        "s",
        2,
        "d",
        Release::Approved,
        "person",
        None
    ));
    assert_eq!(rx.try_recv().unwrap(), Released::Approved);
}

#[test]
fn a_word_with_another_digest_refuses_the_call_it_names() {
    let (held, mut rx) = waiting(2, "d");
    assert!(route_release(
        &held,
        "s",
        "s",
        2,
        "e",
        Release::Approved,
        "person",
        None
    ));
    assert!(rx.try_recv().is_err(), "no word: the call is refused");
    assert!(held.lock().unwrap().is_empty());
}

#[test]
fn a_word_for_another_session_or_a_call_not_held_poisons_the_link() {
    let (held, _rx) = waiting(2, "d");
    assert!(!route_release(
        &held,
        "s",
        "t",
        2,
        "d",
        Release::Approved,
        "person",
        None
    ));
    assert!(!route_release(
        &held,
        "s",
        "s",
        3,
        "d",
        Release::Approved,
        "person",
        None
    ));
}

#[test]
fn each_cause_gets_its_own_refusal_and_an_approval_not_by_a_person_is_no_decision() {
    let cases = [
        (Release::Rejected, "person", Some("no"), "Their reason: no"),
        (Release::Rejected, "timeout", None, "nobody decided in time"),
        (Release::Rejected, "session-ended", None, "session ended"),
        (
            Release::Rejected,
            "connection-dropped",
            None,
            "session ended",
        ),
        (
            Release::Rejected,
            "arguments-unknown",
            None,
            "too large to show",
        ),
        (
            Release::Undecided,
            "person",
            None,
            "could not get a decision",
        ),
        (
            Release::Approved,
            "timeout",
            None,
            "could not get a decision",
        ),
        (Release::Rejected, "whim", None, "could not get a decision"),
    ];
    for (verdict, cause, reason, text) in cases {
        let (held, mut rx) = waiting(1, "d");
        assert!(route_release(
            &held,
            "s",
            "s",
            1,
            "d",
            verdict,
            cause,
            reason.map(String::from)
        ));
        match rx.try_recv().unwrap() {
            Released::Refused(t) => assert!(t.contains(text), "{cause}: {t}"),
            Released::Approved => panic!("{cause} approved"),
        }
    }
}

#[test]
fn a_held_answer_without_its_hold_is_no_decision() {
    assert_eq!(
        verdict_of(decision("s", 3, Verdict::Held), "s", 3),
        (Verdict::Undecided, false)
    );
}

#[test]
fn the_wait_for_a_word_is_bounded_by_the_longest_timeout_plus_the_margin() {
    assert_eq!(
        release_wait(Some(1000)),
        std::time::Duration::from_secs(1) + limits::APPROVAL_RELAY_MARGIN
    );
    assert_eq!(
        release_wait(Some(u64::MAX)),
        limits::APPROVAL_TIMEOUT_MAX + limits::APPROVAL_RELAY_MARGIN
    );
}

#[test]
fn an_unknown_decision_word_does_not_parse_as_an_answer() {
    let line = r#"{"kind":"decision","session_id":"s","seq":3,"decision":"maybe","policy_id":null,"reason":""}"#;
    assert!(serde_json::from_str::<SessionResponse>(line).is_err());
}
