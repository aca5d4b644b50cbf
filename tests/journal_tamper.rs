//! Tampering with the journal by hand, as someone with `sqlite3` and write access would, is
//! caught by `holdcall verify`, which names the entry.

use crate::common::*;
use rusqlite::Connection;

/// A home with a real session in its journal: rules, a start, calls, outcomes, an end.
fn journal_with_history() -> Env {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    r.recv();
    r.send(&call("2", "delete_file", "{}"));
    r.recv();
    r.finish();
    env.ok(&["daemon", "stop"]);
    env.ok(&["verify"]);
    env
}

/// Opens the database as an editor would, without the append-only triggers.
fn editor(env: &Env) -> Connection {
    let c = Connection::open(env.db()).unwrap();
    let triggers: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in triggers {
        c.execute_batch(&format!("DROP TRIGGER \"{t}\"")).unwrap();
    }
    c
}

fn count(env: &Env) -> i64 {
    Connection::open(env.db())
        .unwrap()
        .query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn editing_a_row_breaks_verify_and_names_the_entry() {
    let env = journal_with_history();
    editor(&env)
        .execute(
            "UPDATE journal SET decision = 'allow' WHERE kind = 'call.request' AND decision = 'deny'",
            [],
        )
        .unwrap();
    let seq: i64 = Connection::open(env.db())
        .unwrap()
        .query_row(
            "SELECT chain_seq FROM journal WHERE kind = 'call.request' AND tool = 'delete_file'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let err = env.fails(&["verify"], 1);
    assert!(err.contains("FAILED"), "{err}");
    assert!(err.contains(&format!("entry {seq}")), "{err}");
    assert!(err.contains("altered"), "{err}");
}

#[test]
fn deleting_a_middle_row_breaks_verify_and_names_the_gap() {
    let env = journal_with_history();
    editor(&env)
        .execute("DELETE FROM journal WHERE chain_seq = 3", [])
        .unwrap();
    let err = env.fails(&["verify"], 1);
    assert!(err.contains("entry 3"), "{err}");
}

#[test]
fn reordering_two_rows_breaks_verify() {
    let env = journal_with_history();
    let c = editor(&env);
    c.execute_batch(
        "UPDATE journal SET chain_seq = -1 WHERE chain_seq = 4;
         UPDATE journal SET chain_seq = 4 WHERE chain_seq = 5;
         UPDATE journal SET chain_seq = 5 WHERE chain_seq = -1;",
    )
    .unwrap();
    let err = env.fails(&["verify"], 1);
    assert!(err.contains("entry 4") || err.contains("entry 5"), "{err}");
}

#[test]
fn truncating_the_tail_is_caught_only_against_a_recorded_head() {
    let env = journal_with_history();
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["verify", "--json"])).unwrap();
    let head = v["head"].as_str().unwrap().to_string();
    let n = count(&env);
    editor(&env)
        .execute("DELETE FROM journal WHERE chain_seq >= ?1", [n - 1])
        .unwrap();
    env.ok(&["verify"]); // a shorter chain is still a chain
    let err = env.fails(&["verify", "--expect-head", &head], 1);
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn truncate_and_recompute_is_caught_by_expect_head() {
    let env = journal_with_history();
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["verify", "--json"])).unwrap();
    let head = v["head"].as_str().unwrap().to_string();
    // Rewrite history: change a decision, then recompute every hash after it so the chain is
    // self-consistent again, with the library's own encoding.
    let c = editor(&env);
    let entries: Vec<holdcall::journal::Entry> = {
        let reader = holdcall::journal::Reader::open(&env.db()).unwrap();
        reader
            .entries(&holdcall::journal::LogFilter {
                limit: Some(100_000),
                ..Default::default()
            })
            .unwrap()
    };
    let machine = std::fs::read_to_string(env.home().join("machine-id")).unwrap();
    let mut prev = holdcall::journal::genesis(machine.trim());
    for mut e in entries {
        if e.fields.decision.as_deref() == Some("deny") {
            e.fields.decision = Some("allow".into());
        }
        e.prev_hash = prev.clone();
        let h = holdcall::journal::entry_hash(&prev, &holdcall::journal::encode(&e)).unwrap();
        c.execute(
            "UPDATE journal SET decision = ?1, prev_hash = ?2, hash = ?3 WHERE chain_seq = ?4",
            rusqlite::params![e.fields.decision, e.prev_hash, h, e.chain_seq],
        )
        .unwrap();
        prev = h;
    }
    env.ok(&["verify"]); // self-consistent: without a recorded head nothing can tell
    let err = env.fails(&["verify", "--expect-head", &head], 1);
    assert!(err.contains("FAILED"), "{err}");
    let grown = env.ok(&["verify", "--expect-head", &prev]);
    assert!(grown.contains("OK"), "{grown}");
}
