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
