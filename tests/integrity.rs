//! The policies, budgets and agents tables are only a cache of what the journal recorded: a
//! change made behind the daemon's back (another SQLite connection, `sqlite3` by hand) is
//! noticed before the next decision, `holdcall verify` names every difference from the
//! journal, and a daemon whose tables do not match refuses every call. Issue 12, items 1
//! (freshness) and 6 (`verify` trusted the policies table).

use crate::common::*;
use rusqlite::{Connection, params};

/// Another connection to the database, as a person with `sqlite3` would open it while the
/// daemon runs.
fn editor(env: &Env) -> Connection {
    let c = Connection::open(env.db()).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    c
}

/// The newest `call.request` entry.
fn last_call(env: &Env) -> serde_json::Value {
    journal_rows(&env.db())
        .into_iter()
        .rev()
        .find(|e| e["kind"] == "call.request")
        .unwrap()
}

/// Sends one call and checks that it was refused without a decision, that the server never got
/// it, and that the journal says to run `holdcall verify`.
fn assert_refused_for_the_mismatch(env: &Env, r: &mut Relay, id: &str, tool: &str) {
    let before = r.forwarded_calls();
    r.send(&call(id, tool, "{}"));
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    assert_eq!(
        r.forwarded_calls(),
        before,
        "the refused call reached the server"
    );
    let e = last_call(env);
    assert_eq!(e["tool"], tool, "{e}");
    assert_eq!(e["decision"], "undecided", "{e}");
    assert!(
        e["reason"].as_str().unwrap().contains("holdcall verify"),
        "{e}"
    );
}

#[test]
fn deleting_the_rule_that_denied_rm_behind_the_daemons_back_refuses_the_next_rm_call() {
    let env = Env::new();
    env.ok(&["policy", "deny", "rm"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "rm", "{}"));
    assert!(is_refusal(&r.recv_json()));
    assert_eq!(last_call(&env)["decision"], "deny");

    // The original finding: the triggers dropped, the rule deleted with the daemon running.
    let c = editor(&env);
    c.execute_batch(
        "DROP TRIGGER IF EXISTS journal_no_update; DROP TRIGGER IF EXISTS journal_no_delete;",
    )
    .unwrap();
    assert_eq!(
        c.execute("DELETE FROM policies WHERE id = 'rule-1'", [])
            .unwrap(),
        1
    );
    drop(c);

    assert_refused_for_the_mismatch(&env, &mut r, "2", "rm");
    // Every call, not only the one the rule named.
    assert_refused_for_the_mismatch(&env, &mut r, "3", "echo");

    let err = env.fails(&["verify"], 1);
    assert!(err.contains("rule rule-1 is missing"), "{err}");
    let status = env.run(&["status"]);
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(out.contains("CANNOT DECIDE"), "{out}");
    let doctor = String::from_utf8(env.run(&["doctor"]).stdout).unwrap();
    assert!(
        doctor.contains("do not match the journal") && doctor.contains("rule rule-1"),
        "{doctor}"
    );
    // A change on top of tables the journal does not describe is refused too.
    let err = env.fails(&["policy", "deny", "other"], 1);
    assert!(err.contains("holdcall verify"), "{err}");

    // A restarted daemon checks at start, and refuses the same way.
    env.ok(&["daemon", "restart"]);
    let mut r2 = env.relay("demo");
    r2.handshake();
    assert_refused_for_the_mismatch(&env, &mut r2, "1", "rm");
}

/// A rule inserted by another connection the way the daemon itself would (the row and its
/// `policy.change` entry, chained, in one transaction) is consistent with the journal: the very
/// next call is decided with it, never with the set the daemon had loaded.
#[test]
fn a_rule_added_by_another_connection_decides_the_very_next_call() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert_eq!(r.recv_json()["result"]["isError"], false);
    assert_eq!(last_call(&env)["decision"], "allow");

    let scope = holdcall::policy::Scope {
        tool: Some("echo".into()),
        agent: None,
        connector: None,
    };
    let text = holdcall::policy::cli_rule_text("rule-1", holdcall::policy::Effect::Deny, &scope);
    let diff = holdcall::policy::unified_diff(
        "",
        &holdcall::policy::set_text([text.as_str()]),
        "policy before",
        "policy after",
    );
    let mut c = editor(&env);
    let tx = c
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.execute(
        "INSERT INTO policies (seq, id, source, text, effect, specificity, tool, agent, connector, created_at) \
         VALUES (1, 'rule-1', 'cli', ?1, 'deny', ?2, 'echo', NULL, NULL, '2026-01-01T00:00:00Z')",
        params![text, holdcall::policy::specificity_of_scope(&scope)],
    )
    .unwrap();
    append_chained(
        &tx,
        "2026-01-01T00:00:00Z",
        holdcall::journal::Fields {
            tool: Some("echo".into()),
            policy_id: Some("rule-1".into()),
            reason: Some("denied tool echo (by another connection)".into()),
            detail: Some(diff),
            ..Default::default()
        },
    );
    tx.commit().unwrap();
    drop(c);

    r.send(&call("2", "echo", r#"{"text":"b"}"#));
    assert!(is_refusal(&r.recv_json()));
    let last = last_call(&env);
    assert_eq!(last["decision"], "deny", "{last}");
    assert_eq!(last["policy_id"], "rule-1", "{last}");
    assert_eq!(r.forwarded_calls(), 1);
    env.ok(&["verify"]);

    // And deleting it again the same way (row and entry) lets the next call through.
    let removal = holdcall::policy::unified_diff(
        &holdcall::policy::set_text([text.as_str()]),
        "",
        "policy before",
        "policy after",
    );
    let mut c = editor(&env);
    let tx = c
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.execute("DELETE FROM policies WHERE id = 'rule-1'", [])
        .unwrap();
    append_chained(
        &tx,
        "2026-01-01T00:00:01Z",
        holdcall::journal::Fields {
            policy_id: Some("rule-1".into()),
            reason: Some("removed (by another connection)".into()),
            detail: Some(removal),
            ..Default::default()
        },
    );
    tx.commit().unwrap();
    drop(c);
    r.send(&call("3", "echo", r#"{"text":"c"}"#));
    assert_eq!(r.recv_json()["result"]["isError"], false);
    assert_eq!(last_call(&env)["decision"], "allow");
    assert_eq!(r.forwarded_calls(), 2);
}

/// Appends a `policy.change` entry chained to the journal's head inside `tx`, as the daemon's
/// writer would: what another connection that plays by the rules writes with its row.
fn append_chained(tx: &rusqlite::Transaction<'_>, at: &str, fields: holdcall::journal::Fields) {
    let (head_seq, head_hash): (i64, String) = tx
        .query_row(
            "SELECT chain_seq, hash FROM journal ORDER BY chain_seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut e = holdcall::journal::Entry {
        chain_seq: head_seq + 1,
        schema_version: holdcall::journal::SCHEMA_VERSION,
        kind: "policy.change".into(),
        occurred_at: at.into(),
        fields,
        prev_hash: head_hash,
        hash: String::new(),
    };
    e.hash = holdcall::journal::entry_hash(&e.prev_hash, &holdcall::journal::encode(&e)).unwrap();
    tx.execute(
        "INSERT INTO journal (chain_seq, schema_version, kind, occurred_at, tool, policy_id, reason, detail, prev_hash, hash) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            e.chain_seq,
            e.schema_version,
            e.kind,
            e.occurred_at,
            e.fields.tool,
            e.fields.policy_id,
            e.fields.reason,
            e.fields.detail,
            e.prev_hash,
            e.hash
        ],
    )
    .unwrap();
}

/// One tampering: what it does to the tables, and what `verify` must name.
struct Tamper {
    what: &'static str,
    sql: &'static str,
    named: &'static str,
}

const TAMPERS: &[Tamper] = &[
    Tamper {
        what: "a deleted rule",
        sql: "DELETE FROM policies WHERE id = 'rule-1'",
        named: "rule rule-1 is missing",
    },
    Tamper {
        what: "an edited rule",
        sql: "UPDATE policies SET text = replace(text, 'delete_file', 'delete_fil') WHERE id = 'rule-1'",
        named: "rule rule-1: its text",
    },
    Tamper {
        // Its text still the journal's: only the id column says otherwise (the check that
        // reads no text's id when the texts agree must still see it; issue 18).
        what: "a renamed rule",
        sql: "UPDATE policies SET id = 'rule-7' WHERE id = 'rule-1'",
        named: "rule rule-1 is missing",
    },
    Tamper {
        what: "an inserted rule",
        sql: "INSERT INTO policies (seq, id, source, text, effect, specificity, created_at) \
              VALUES (99, 'rule-99', 'file:x.cedar', '@id(\"rule-99\")\npermit (principal, action, resource);', 'allow', 0, 'now')",
        named: "rule rule-99 is in the policies table",
    },
    Tamper {
        what: "a deleted budget",
        sql: "DELETE FROM budgets WHERE id = 'budget-1'",
        named: "budget budget-1 is missing",
    },
    Tamper {
        what: "an edited budget",
        sql: "UPDATE budgets SET calls = 1000 WHERE id = 'budget-1'",
        named: "budget budget-1: the budgets table says at most 1000 calls",
    },
    Tamper {
        what: "an inserted budget",
        sql: "INSERT INTO budgets (seq, id, calls, tool, created_at) VALUES (50, 'budget-50', 3, 'rm', 'now')",
        named: "budget budget-50 is in the budgets table",
    },
    Tamper {
        what: "a deleted enrolment",
        sql: "DELETE FROM agents WHERE name = 'tester'",
        named: "agent tester is missing",
    },
    Tamper {
        what: "an edited enrolment",
        sql: "UPDATE agents SET ino = ino + 1 WHERE name = 'tester'",
        named: "agent tester: its ino",
    },
    Tamper {
        what: "an inserted enrolment",
        sql: "INSERT INTO agents (name, path, dev, ino, size, mtime_ns, ctime_ns, sha256, enrolled_at) \
              VALUES ('intruder', '/bin/sh', 1, 2, 3, 4, 5, 'ab', 'now')",
        named: "agent intruder is enrolled in the agents table",
    },
];

#[test]
fn a_deleted_edited_or_inserted_rule_budget_or_enrolment_is_named_by_verify_and_refuses_every_call()
{
    for t in TAMPERS {
        let env = Env::fast();
        env.ok(&["policy", "deny", "delete_file"]);
        env.ok(&["policy", "budget", "5", "--tool", "echo"]);
        env.ok(&["agent", "add", "tester", "/usr/bin/env"]);
        env.ok(&["verify"]);
        let mut r = env.relay("demo");
        r.handshake();
        r.send(&call("1", "echo", r#"{"text":"a"}"#));
        assert_eq!(r.recv_json()["result"]["isError"], false, "{}", t.what);

        editor(&env).execute_batch(t.sql).unwrap();

        let before = r.forwarded_calls();
        r.send(&call("2", "echo", r#"{"text":"b"}"#));
        let a = r.recv_json();
        assert!(is_refusal(&a), "{}: {a}", t.what);
        assert_eq!(r.forwarded_calls(), before, "{}", t.what);
        let e = last_call(&env);
        assert_eq!(e["decision"], "undecided", "{}: {e}", t.what);
        assert!(
            e["reason"].as_str().unwrap().contains("holdcall verify"),
            "{}: {e}",
            t.what
        );

        let err = env.fails(&["verify"], 1);
        assert!(err.contains(t.named), "{}: {err}", t.what);
        let json: serde_json::Value = serde_json::from_str(
            &String::from_utf8(env.run(&["verify", "--json"]).stdout).unwrap(),
        )
        .unwrap();
        assert_eq!(json["state"], "broken", "{}", t.what);
        assert!(
            json["tables"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m.as_str().unwrap().contains(t.named)),
            "{}: {json}",
            t.what
        );
    }
}

/// How many daemon starts `daemon.log` says validated their policy set, and how many did not
/// validate it again.
fn validations(env: &Env) -> (usize, usize) {
    let log = std::fs::read_to_string(env.home().join("daemon.log")).unwrap_or_default();
    let again = log.matches("not validated again").count();
    (log.matches(" policies, validated\n").count(), again)
}

#[test]
fn a_restarted_daemon_does_not_validate_again_the_set_it_validated_and_a_wrong_kept_key_only_costs_a_validation()
 {
    // Issue 18: strict validation was most of a start with 10,000 rules. The set a change
    // validated is kept as its validation key (meta `validated_policies`), so a start with
    // the very same set skips it.
    let env = Env::new();
    env.ok(&["policy", "deny", "rm"]);
    env.ok(&["daemon", "restart"]);
    assert_eq!(
        validations(&env),
        (1, 1),
        "the first start validated, the restart did not"
    );

    // A key that is not the set's (edited, stale, from another build) is worth nothing.
    editor(&env)
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'validated_policies'",
            params!["0".repeat(64)],
        )
        .unwrap();
    env.ok(&["daemon", "restart"]);
    assert_eq!(validations(&env), (2, 1), "a wrong key: validated again");
    env.ok(&["daemon", "restart"]);
    assert_eq!(validations(&env), (2, 2), "and noted again");

    // The rule still decides.
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "rm", "{}"));
    assert!(is_refusal(&r.recv_json()));
    assert_eq!(last_call(&env)["decision"], "deny");
}
