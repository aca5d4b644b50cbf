//! The hidden `holdcall bench-decisions` load generator that `tools/bench` drives: it must ask
//! the daemon exactly as a relay does, so what it times is the real decision path, including the
//! journal commit before each answer. No timing is asserted here (benchmarks are not tests).

use crate::common::{Env, journal_rows};

fn bench(env: &Env, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench-decisions", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(env.ok(&all).trim()).unwrap()
}

#[test]
fn bench_decisions_are_decided_and_journaled_like_a_relays_calls() {
    let env = Env::fast();
    env.ok(&["policy", "deny", "delete_file", "--connector", "bench"]);

    let r = bench(&env, &["--relays", "3", "--calls", "4", "--warmup", "1"]);
    assert_eq!(r["relays"], 3);
    assert_eq!(r["decisions"], 12);
    assert_eq!(r["allow"], 12);
    assert_eq!(r["undecided"], 0);

    let r = bench(
        &env,
        &["--calls", "5", "--warmup", "0", "--tool", "delete_file"],
    );
    assert_eq!(r["decisions"], 5);
    assert_eq!(r["deny"], 5);

    // Every call, warmup included, is in the journal, and every session it opened was ended.
    let rows = journal_rows(&env.db());
    let calls: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .collect();
    assert_eq!(calls.len(), 3 * (4 + 1) + 5);
    assert_eq!(calls.iter().filter(|e| e["decision"] == "deny").count(), 5);
    let starts = rows.iter().filter(|e| e["kind"] == "session.start").count();
    let ends = rows.iter().filter(|e| e["kind"] == "session.end").count();
    assert_eq!((starts, ends), (4, 4));
}

#[test]
fn bench_decisions_refuses_zero_relays_or_calls() {
    let env = Env::fast();
    let err = env.fails(&["bench-decisions", "--relays", "0"], 1);
    assert!(
        err.contains("--relays and --calls must be at least 1"),
        "{err}"
    );
}
