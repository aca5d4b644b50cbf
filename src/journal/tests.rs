//! The journal's unit tests: the known-answer vectors of the encoding, the chain, the tables
//! changed with their entries, tampering caught by verify, and the files' modes.

use std::fs::{File, Permissions};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use sha2::{Digest as _, Sha256};

use super::verify::Problem;
use super::*;
use crate::config::Durability;

/// The fixed entry behind the known-answer vector in docs/journal-format.md.
fn vector_entry() -> Entry {
    Entry {
        chain_seq: 7,
        schema_version: 1,
        kind: "call.request".to_owned(),
        occurred_at: "2026-11-29T23:41:09.123456789Z".to_owned(),
        fields: Fields {
            session_id: Some("0123456789abcdef".to_owned()),
            seq: Some(3),
            connector: Some("github".to_owned()),
            tool: Some("create_issue".to_owned()),
            client: Some("claude-code".to_owned()),
            agent: Some("reviewer".to_owned()),
            args_digest: Some(
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".to_owned(),
            ),
            decision: Some("allow".to_owned()),
            policy_id: Some("policy3".to_owned()),
            reason: Some("".to_owned()),
            ok: Some(true),
            duration_ms: Some(-42),
            anomaly: None,
            protocol_version: Some("2025-06-18".to_owned()),
            detail: Some("{\"é\":1}".to_owned()),
        },
        prev_hash: genesis("test-machine"),
        hash: String::new(),
    }
}

const VECTOR_ENCODING_SHA256: &str =
    "721465a3466fda3824b59316f101335a8217dcc8f70357b0dc4029956ce1fa95";
const VECTOR_HASH: &str = "a549d1b7d541e1332abcc6475900325f23d33f6f3dc6608e71864e34d9b2aa04";
const TEST_MACHINE_GENESIS: &str =
    "3a635e667e0159136cb8a14fb4c1188867b3334478c23d0184b97e0785046c32";
const MACHINE: &str = "test-machine";

type TestResult = Result<(), Box<dyn std::error::Error>>;

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

fn fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("holdcall.db");
    Ok(Fixture { _dir: dir, db })
}

fn call(session: &str, seq: i64, tool: &str, decision: &str) -> Fields {
    Fields {
        session_id: Some(session.to_owned()),
        seq: Some(seq),
        tool: Some(tool.to_owned()),
        decision: Some(decision.to_owned()),
        args_digest: Some(genesis(tool)),
        ..Fields::default()
    }
}

fn session(id: &str) -> Fields {
    Fields {
        session_id: Some(id.to_owned()),
        ..Fields::default()
    }
}

/// A journal with `n` call.request entries in session "s1".
fn journal_with(f: &Fixture, n: i64) -> Result<Journal, Box<dyn std::error::Error>> {
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    for seq in 1..=n {
        j.append(Kind::CallRequest, call("s1", seq, "read_file", "allow"))?;
    }
    Ok(j)
}

/// What a hand editor does first: a plain connection with the append-only triggers dropped.
fn tamperer(f: &Fixture) -> Result<Connection, Box<dyn std::error::Error>> {
    let conn = Connection::open(&f.db)?;
    conn.execute_batch("DROP TRIGGER journal_no_update; DROP TRIGGER journal_no_delete;")?;
    Ok(conn)
}

fn verify(f: &Fixture, expect: Option<&str>) -> Result<VerifyReport, Box<dyn std::error::Error>> {
    Ok(Reader::open(&f.db)?.verify(Some(MACHINE), expect)?)
}

fn mode_of(path: &Path) -> Result<u32, Box<dyn std::error::Error>> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
}

fn new_policy(seq: i64, id: &str, effect: &str) -> NewPolicy {
    NewPolicy {
        seq,
        id: id.to_owned(),
        source: "cli".to_owned(),
        text: format!(
            "@id(\"{id}\") {effect_word}(principal, action, resource);",
            effect_word = if effect == "deny" { "forbid" } else { "permit" }
        ),
        effect: effect.to_owned(),
        specificity: 1,
        tool: Some("read_file".to_owned()),
        agent: None,
        connector: None,
    }
}

fn names(problems: &[Problem]) -> Vec<i64> {
    problems.iter().map(|p| p.chain_seq).collect()
}

// --- encoding and hashing -------------------------------------------------------------

#[test]
fn the_canonical_encoding_is_pinned() {
    let e = vector_entry();
    let encoded = encode(&e);
    assert_eq!(encoded.len(), 413);
    assert!(encoded.starts_with(b"holdcall.journal.v1\n"));
    assert_eq!(
        crate::ids::hex(&Sha256::digest(&encoded)),
        VECTOR_ENCODING_SHA256
    );
    assert_eq!(
        entry_hash(&e.prev_hash, &encoded).as_deref(),
        Some(VECTOR_HASH)
    );
}

#[test]
fn the_encoding_ignores_the_stored_hash_and_prev_hash() {
    let a = vector_entry();
    let mut b = vector_entry();
    b.hash = "f".repeat(64);
    b.prev_hash = "0".repeat(64);
    assert_eq!(encode(&a), encode(&b));
}

#[test]
fn the_genesis_depends_on_the_machine_id_and_is_pinned() {
    assert_eq!(genesis("test-machine"), TEST_MACHINE_GENESIS);
    assert_ne!(genesis("test-machine"), genesis("test-machine2"));
    assert_ne!(genesis(""), genesis("test-machine"));
}

#[test]
fn null_empty_string_and_zero_encode_differently() {
    let base = vector_entry();
    let with = |f: Fields| Entry {
        fields: f,
        ..base.clone()
    };
    let null = encode(&with(Fields::default()));
    let empty = encode(&with(Fields {
        session_id: Some(String::new()),
        ..Fields::default()
    }));
    let zero = encode(&with(Fields {
        seq: Some(0),
        ..Fields::default()
    }));
    let zero_in_first = encode(&with(Fields {
        session_id: Some("0".to_owned()),
        ..Fields::default()
    }));
    let falsy = encode(&with(Fields {
        ok: Some(false),
        ..Fields::default()
    }));
    let all = [&null, &empty, &zero, &zero_in_first, &falsy];
    for (i, a) in all.iter().enumerate() {
        for b in all.iter().skip(i + 1) {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn field_boundaries_are_unambiguous() {
    let base = vector_entry();
    let pair = |tool: &str, client: &str| {
        encode(&Entry {
            fields: Fields {
                tool: Some(tool.to_owned()),
                client: Some(client.to_owned()),
                ..Fields::default()
            },
            ..base.clone()
        })
    };
    assert_ne!(pair("ab", "c"), pair("a", "bc"));
    // Moving a value to the neighbouring field changes the bytes too.
    let moved = encode(&Entry {
        fields: Fields {
            client: Some("ab".to_owned()),
            ..Fields::default()
        },
        ..base.clone()
    });
    let stayed = encode(&Entry {
        fields: Fields {
            tool: Some("ab".to_owned()),
            ..Fields::default()
        },
        ..base.clone()
    });
    assert_ne!(moved, stayed);
}

#[test]
fn entry_hash_refuses_a_prev_hash_that_is_not_64_lowercase_hex() {
    assert!(entry_hash(&"a".repeat(64), b"x").is_some());
    assert!(entry_hash(&"a".repeat(63), b"x").is_none());
    assert!(entry_hash(&"A".repeat(64), b"x").is_none());
    assert!(entry_hash(&format!("+{}", "a".repeat(63)), b"x").is_none());
    assert!(entry_hash(&"é".repeat(32), b"x").is_none());
}

#[test]
fn an_agent_change_commits_with_its_entry_and_one_file_has_one_name() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    let identity = crate::agents::Identity {
        dev: u64::MAX,
        ino: 7,
        size: 1,
        mtime_ns: 2,
        ctime_ns: -3,
    };
    let put = |name: &str| AgentChange::Put {
        name: name.into(),
        path: "/x".into(),
        identity,
        sha256: "00".into(),
    };
    j.change_agent(put("a"), Fields::default())?;
    let stored = j.agents()?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored.first().map(|a| a.identity), Some(identity));
    assert!(matches!(
        j.change_agent(put("b"), Fields::default()),
        Err(JournalError::AgentImageTaken { ref holder }) if holder == "a"
    ));
    // Re-adding the same name replaces it.
    j.change_agent(put("a"), Fields::default())?;
    assert!(matches!(
        j.change_agent(AgentChange::Remove { name: "zz".into() }, Fields::default()),
        Err(JournalError::UnknownAgent { .. })
    ));
    assert_eq!(
        Reader::open(&f.db)?.count()?,
        2,
        "a refused change writes no entry"
    );
    j.change_agent(AgentChange::Remove { name: "a".into() }, Fields::default())?;
    assert!(j.agents()?.is_empty());
    let report = verify(&f, None)?;
    // The chain is intact; these entries carry no enrolment detail, so the tables check
    // (tested on its own) has its say too.
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.entries, 3);
    Ok(())
}

#[test]
fn every_kind_round_trips_through_its_string() {
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
    assert_eq!(Kind::parse("rule.add"), None);
}

// --- the writer ------------------------------------------------------------------------

#[test]
fn appends_form_a_contiguous_chain_that_verifies_intact() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    assert!(j.is_empty());
    let first = j.append(Kind::SessionStart, session("s1"))?;
    assert_eq!(first.chain_seq, 1);
    assert_eq!(first.prev_hash, genesis(MACHINE));
    let second = j.append(Kind::CallRequest, call("s1", 1, "read_file", "allow"))?;
    assert_eq!(second.chain_seq, 2);
    assert_eq!(second.prev_hash, first.hash);
    assert_eq!(j.head(), Some((2, second.hash.clone())));
    assert!(chrono::DateTime::parse_from_rfc3339(&second.occurred_at).is_ok());
    assert!(second.occurred_at.ends_with('Z'));

    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Intact, "{:?}", report.problems);
    assert_eq!(report.entries, 2);
    assert_eq!(report.head.as_deref(), Some(second.hash.as_str()));
    // What was returned is what was stored.
    let stored = Reader::open(&f.db)?.entries(&LogFilter::default())?;
    assert_eq!(stored, vec![first, second]);
    Ok(())
}

#[test]
fn a_reopened_journal_continues_the_same_chain() -> TestResult {
    let f = fixture()?;
    let head = journal_with(&f, 3)?.head();
    let mut j = Journal::open(&f.db, MACHINE, Durability::Power)?;
    assert_eq!(j.head(), head);
    let next = j.append(
        Kind::DaemonStart,
        Fields {
            detail: Some(j.pragmas().to_detail()),
            ..Fields::default()
        },
    )?;
    assert_eq!(next.chain_seq, 4);
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    Ok(())
}

#[test]
fn append_many_writes_one_chain_in_one_transaction() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 1)?;
    let batch = j.append_many(vec![
        (Kind::SessionStart, session("s2")),
        (Kind::CallRequest, call("s2", 1, "write_file", "deny")),
        (
            Kind::CallOutcome,
            Fields {
                ok: Some(true),
                duration_ms: Some(5),
                ..session("s2")
            },
        ),
    ])?;
    assert_eq!(
        batch.iter().map(|e| e.chain_seq).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert_eq!(
        batch.get(1).map(|e| &e.prev_hash),
        batch.first().map(|e| &e.hash)
    );
    assert_eq!(j.head().map(|h| h.0), Some(4));
    assert!(j.append_many(Vec::new())?.is_empty());
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);

    // All or nothing: make the second insert of a batch fail.
    let other = Connection::open(&f.db)?;
    other.execute_batch(
        "CREATE TRIGGER no_anomaly BEFORE INSERT ON journal WHEN NEW.kind = 'anomaly'
             BEGIN SELECT RAISE(ABORT, 'simulated failure'); END;",
    )?;
    let failed = j.append_many(vec![
        (Kind::SessionStart, session("s3")),
        (
            Kind::Anomaly,
            Fields {
                anomaly: Some("batch".to_owned()),
                ..session("s3")
            },
        ),
    ]);
    assert!(matches!(failed, Err(JournalError::Write { .. })));
    assert_eq!(Reader::open(&f.db)?.count()?, 4);
    assert_eq!(j.head().map(|h| h.0), Some(4));
    Ok(())
}

#[test]
fn the_database_file_is_created_private() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    j.append(Kind::SessionStart, session("s1"))?;
    assert_eq!(mode_of(&f.db)?, 0o600);
    let mut wal = f.db.as_os_str().to_owned();
    wal.push("-wal");
    assert_eq!(mode_of(Path::new(&wal))?, 0o600);
    Ok(())
}

#[test]
fn an_existing_database_file_with_a_wider_mode_is_tightened() -> TestResult {
    let f = fixture()?;
    File::create(&f.db)?.set_permissions(Permissions::from_mode(0o644))?;
    assert_eq!(mode_of(&f.db)?, 0o644);
    Journal::open(&f.db, MACHINE, Durability::Process)?;
    assert_eq!(mode_of(&f.db)?, 0o600);
    Ok(())
}

#[test]
fn synchronous_reads_back_full_for_power_and_normal_for_process() -> TestResult {
    let f = fixture()?;
    for (durability, level, name) in [
        (Durability::Power, 2, "full"),
        (Durability::Process, 1, "normal"),
    ] {
        let j = Journal::open(&f.db, MACHINE, durability)?;
        let got: i64 = j
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))?;
        assert_eq!(got, level);
        assert_eq!(j.pragmas().synchronous, name);
        assert_eq!(j.pragmas().journal_mode, "wal");
        assert!(j.pragmas().foreign_keys);
        assert_eq!(j.pragmas().busy_timeout_ms, 5000);
        let detail: serde_json::Value = serde_json::from_str(&j.pragmas().to_detail())?;
        assert_eq!(
            detail.get("synchronous").and_then(|v| v.as_str()),
            Some(name)
        );
    }
    Ok(())
}

#[test]
fn the_triggers_refuse_to_update_or_delete_an_entry() -> TestResult {
    let f = fixture()?;
    let j = journal_with(&f, 2)?;
    let update = j
        .conn
        .execute("UPDATE journal SET tool = 'x' WHERE chain_seq = 1", []);
    assert!(update.is_err_and(|e| e.to_string().contains("append-only")));
    let delete = j
        .conn
        .execute("DELETE FROM journal WHERE chain_seq = 2", []);
    assert!(delete.is_err_and(|e| e.to_string().contains("append-only")));
    // Reopening puts back triggers a hand editor dropped.
    drop(tamperer(&f)?);
    let j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    assert!(j.conn.execute("DELETE FROM journal", []).is_err());
    Ok(())
}

#[test]
fn a_newer_database_schema_is_refused() -> TestResult {
    let f = fixture()?;
    drop(journal_with(&f, 1)?);
    Connection::open(&f.db)?.execute("UPDATE meta SET value = '2' WHERE key = 'schema'", [])?;
    assert!(matches!(
        Journal::open(&f.db, MACHINE, Durability::Process),
        Err(JournalError::SchemaTooNew { .. })
    ));
    assert!(matches!(
        Reader::open(&f.db),
        Err(JournalError::SchemaTooNew { .. })
    ));
    Ok(())
}

// --- policies --------------------------------------------------------------------------

#[test]
fn a_policy_change_and_its_entry_are_one_change() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 1)?;
    let seq = j.next_policy_seq()?;
    let entry = j.change_policies(
        vec![new_policy(seq, "policy1", "allow")],
        Vec::new(),
        Fields {
            policy_id: Some("policy1".to_owned()),
            decision: Some("allow".to_owned()),
            ..Fields::default()
        },
    )?;
    assert_eq!(entry.kind, "policy.change");
    assert_eq!(entry.chain_seq, 2);
    let before = j.policies()?;
    assert_eq!(before.len(), 1);
    let head_before = j.head();

    // The entry insert fails (as a full disk would), after the policy edits have run.
    let other = Connection::open(&f.db)?;
    other.execute_batch(
        "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
    )?;
    let next = j.next_policy_seq()?;
    let failed = j.change_policies(
        vec![new_policy(next, "policy2", "deny")],
        vec!["policy1".to_owned()],
        Fields::default(),
    );
    match failed {
        Err(JournalError::Write { source, .. }) => {
            assert!(source.to_string().contains("simulated write failure"));
        }
        other => return Err(format!("expected a write error, got {other:?}").into()),
    }
    assert_eq!(j.policies()?, before);
    assert_eq!(Reader::open(&f.db)?.policies()?, before);
    assert_eq!(j.head(), head_before);

    // The next successful write chains on correctly.
    other.execute_batch("DROP TRIGGER refuse_entry;")?;
    let after = j.append(Kind::SessionStart, session("s2"))?;
    assert_eq!(after.chain_seq, 3);
    assert_eq!(Some(after.prev_hash.clone()), head_before.map(|h| h.1));
    // The chain is intact (the policy.change entry here carries no diff, so the tables
    // check, tested on its own, disagrees with the table).
    assert!(verify(&f, None)?.problems.is_empty());
    Ok(())
}

#[test]
fn a_connector_change_and_its_entry_are_one_change() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 1)?;
    let set = ConnectorChange::Set {
        name: "gh".into(),
        env_key: "GITHUB_TOKEN".into(),
        command: vec!["/usr/bin/node".into(), "server.js".into()],
        pass_env: vec!["GITHUB_ORG".into()],
        cwd: "/srv".into(),
        pinned_env: vec![("PATH".into(), "/usr/bin".into())],
        secret_id: "0123abcd".into(),
    };
    let entry = j.change_connector(
        set,
        Fields {
            connector: Some("gh".into()),
            ..Fields::default()
        },
    )?;
    assert_eq!(entry.kind, "connector.change");
    let rows = j.connectors()?;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].command, ["/usr/bin/node", "server.js"]);
    assert_eq!(
        j.connector("gh")?.map(|r| r.env_key),
        Some("GITHUB_TOKEN".into())
    );
    assert_eq!(j.connector("other")?, None);
    let head_before = j.head();

    let other = Connection::open(&f.db)?;
    other.execute_batch(
        "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
    )?;
    let failed = j.change_connector(
        ConnectorChange::Remove { name: "gh".into() },
        Fields::default(),
    );
    assert!(
        matches!(failed, Err(JournalError::Write { .. })),
        "{failed:?}"
    );
    assert_eq!(
        j.connectors()?,
        rows,
        "a change that was not recorded is not made"
    );
    assert_eq!(j.head(), head_before);
    other.execute_batch("DROP TRIGGER refuse_entry;")?;

    let unknown = j.change_connector(
        ConnectorChange::Remove {
            name: "nope".into(),
        },
        Fields::default(),
    );
    assert!(matches!(
        unknown,
        Err(JournalError::UnknownConnector { .. })
    ));
    j.change_connector(
        ConnectorChange::Remove { name: "gh".into() },
        Fields::default(),
    )?;
    assert!(j.connectors()?.is_empty());
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    Ok(())
}

#[test]
fn a_failed_write_re_reads_the_head() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 2)?;
    // Another writer appends behind our back; our cached head is now stale.
    let mut other = Journal::open(&f.db, MACHINE, Durability::Process)?;
    other.append(Kind::SessionStart, session("x"))?;
    let raw = Connection::open(&f.db)?;
    raw.execute_batch(
        "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
    )?;
    assert!(j.append(Kind::SessionStart, session("y")).is_err());
    assert_eq!(j.head(), other.head());
    raw.execute_batch("DROP TRIGGER refuse_entry;")?;
    assert_eq!(j.append(Kind::SessionStart, session("y"))?.chain_seq, 4);
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    Ok(())
}

#[test]
fn next_policy_seq_never_reuses_a_removed_seq() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 0)?;
    assert_eq!(j.next_policy_seq()?, 1);
    j.change_policies(
        vec![new_policy(1, "a", "allow"), new_policy(2, "b", "ask")],
        Vec::new(),
        Fields::default(),
    )?;
    assert_eq!(j.next_policy_seq()?, 3);
    j.change_policies(Vec::new(), vec!["b".to_owned()], Fields::default())?;
    assert_eq!(j.next_policy_seq()?, 3);
    let reused = j.change_policies(
        vec![new_policy(2, "c", "deny")],
        Vec::new(),
        Fields::default(),
    );
    assert!(matches!(
        reused,
        Err(JournalError::PolicySeqReused {
            seq: 2,
            next: 3,
            ..
        })
    ));
    // Replacing a policy in one change: remove then add, under a fresh seq.
    j.change_policies(
        vec![new_policy(3, "a", "deny")],
        vec!["a".to_owned()],
        Fields::default(),
    )?;
    let rows = j.policies()?;
    assert_eq!(
        rows.iter()
            .map(|p| (p.seq, p.id.as_str(), p.effect.as_str()))
            .collect::<Vec<_>>(),
        vec![(3, "a", "deny")]
    );
    assert_eq!(j.next_policy_seq()?, 4);
    Ok(())
}

#[test]
fn a_budget_and_its_entry_are_one_transaction_and_a_scope_holds_one_budget() -> TestResult {
    use crate::policy::budget::BudgetScope;
    let f = fixture()?;
    let mut j = journal_with(&f, 0)?;
    let echo = BudgetScope {
        tool: Some("echo".into()),
        ..BudgetScope::default()
    };
    let (entry, rows) = j.change_budget(BudgetChange::Set {
        calls: 2,
        scope: echo.clone(),
    })?;
    assert_eq!(entry.kind, "budget.change");
    assert_eq!(entry.fields.policy_id.as_deref(), Some("budget-1"));
    assert_eq!(rows.len(), 1);
    let before = (j.budgets()?, j.head());
    let again = j.change_budget(BudgetChange::Set {
        calls: 3,
        scope: echo,
    });
    assert!(
        matches!(again, Err(JournalError::Write { .. })),
        "{again:?}"
    );
    let unknown = j.change_budget(BudgetChange::Remove {
        id: "budget-9".into(),
    });
    assert!(matches!(unknown, Err(JournalError::UnknownPolicy { .. })));
    assert_eq!(
        (j.budgets()?, j.head()),
        before,
        "a refused change wrote nothing"
    );
    let (removed, rows) = j.change_budget(BudgetChange::Remove {
        id: "budget-1".into(),
    })?;
    assert!(rows.is_empty());
    assert_eq!(
        removed
            .fields
            .detail
            .as_deref()
            .map(|d| d.starts_with("- budget-1")),
        Some(true)
    );
    let (_, rows) = j.change_budget(BudgetChange::Set {
        calls: 1,
        scope: BudgetScope::default(),
    })?;
    assert_eq!(
        rows[0].budget.id, "budget-2",
        "a removed budget's id is never reused"
    );
    Ok(())
}

#[test]
fn a_bad_policy_change_changes_nothing() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 0)?;
    j.change_policies(
        vec![new_policy(1, "a", "allow")],
        Vec::new(),
        Fields::default(),
    )?;
    let before = (j.policies()?, j.head());
    let unknown = j.change_policies(
        vec![new_policy(2, "b", "allow")],
        vec!["nope".to_owned()],
        Fields::default(),
    );
    assert!(matches!(unknown, Err(JournalError::UnknownPolicy { .. })));
    let taken = j.change_policies(
        vec![new_policy(2, "a", "allow")],
        Vec::new(),
        Fields::default(),
    );
    assert!(matches!(taken, Err(JournalError::PolicyIdTaken { .. })));
    let effect = j.change_policies(
        vec![new_policy(2, "b", "maybe")],
        Vec::new(),
        Fields::default(),
    );
    assert!(matches!(effect, Err(JournalError::PolicyEffect { .. })));
    assert_eq!((j.policies()?, j.head()), before);
    assert_eq!(j.next_policy_seq()?, 2);
    Ok(())
}

// --- verify ----------------------------------------------------------------------------

#[test]
fn editing_a_field_breaks_verification_at_that_entry() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 5)?;
    tamperer(&f)?.execute(
        "UPDATE journal SET decision = 'deny' WHERE chain_seq = 3",
        [],
    )?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert_eq!(names(&report.problems), vec![3]);
    let message = report
        .problems
        .first()
        .map(|p| p.message.as_str())
        .unwrap_or_default();
    assert!(
        message.starts_with("entry 3 has been altered: its contents hash to "),
        "{message}"
    );
    Ok(())
}

#[test]
fn editing_and_rehashing_an_entry_breaks_the_next_link() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 4)?;
    let raw = tamperer(&f)?;
    let mut e = Reader::open(&f.db)?
        .entries(&LogFilter::default())?
        .into_iter()
        .nth(1)
        .ok_or("no entry 2")?;
    e.fields.decision = Some("deny".to_owned());
    let rehashed = entry_hash(&e.prev_hash, &encode(&e)).ok_or("bad prev")?;
    raw.execute(
        "UPDATE journal SET decision = 'deny', hash = ?1 WHERE chain_seq = 2",
        [rehashed],
    )?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert_eq!(names(&report.problems), vec![3]);
    assert!(
        report
            .problems
            .iter()
            .all(|p| p.message.contains("does not link"))
    );
    Ok(())
}

#[test]
fn deleting_a_middle_entry_is_reported_as_a_gap() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 5)?;
    tamperer(&f)?.execute("DELETE FROM journal WHERE chain_seq = 3", [])?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert_eq!(names(&report.problems), vec![3]);
    let message = report
        .problems
        .first()
        .map(|p| p.message.as_str())
        .unwrap_or_default();
    assert_eq!(
        message,
        "entry 3 is missing: the entry after 2 is 4 — entries were removed"
    );
    Ok(())
}

#[test]
fn every_problem_is_reported_not_just_the_first() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 8)?;
    let raw = tamperer(&f)?;
    raw.execute("DELETE FROM journal WHERE chain_seq IN (1, 4, 5)", [])?;
    raw.execute("UPDATE journal SET tool = 'rm' WHERE chain_seq = 7", [])?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert_eq!(names(&report.problems), vec![1, 4, 7]);
    let messages: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        messages.first(),
        Some(&"entry 1 is missing: the journal starts at entry 2 — entries were removed")
    );
    assert_eq!(
        messages.get(1),
        Some(&"entries 4 to 5 are missing: the entry after 3 is 6 — entries were removed")
    );
    Ok(())
}

#[test]
fn deleting_the_last_entry_is_caught_only_with_expect_head() -> TestResult {
    let f = fixture()?;
    let j = journal_with(&f, 4)?;
    let (_, recorded) = j.head().ok_or("no head")?;
    drop(j);
    tamperer(&f)?.execute("DELETE FROM journal WHERE chain_seq = 4", [])?;
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    let report = verify(&f, Some(&recorded))?;
    assert_eq!(report.state, ChainState::Broken);
    let verdict = report.expect_head.unwrap_or_default();
    assert!(
        verdict
            .contains("is nowhere in the chain: entries were removed or the chain was recomputed"),
        "{verdict}"
    );
    assert_eq!(names(&report.problems), vec![3]);
    Ok(())
}

#[test]
fn swapping_two_entries_is_caught() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 5)?;
    let raw = tamperer(&f)?;
    raw.execute_batch(
        "UPDATE journal SET chain_seq = -1 WHERE chain_seq = 2;
             UPDATE journal SET chain_seq = 2 WHERE chain_seq = 3;
             UPDATE journal SET chain_seq = 3 WHERE chain_seq = -1;",
    )?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    let named = names(&report.problems);
    assert!(
        named.contains(&2) && named.contains(&3),
        "{:?}",
        report.problems
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.starts_with("entry 2 has been altered"))
    );
    Ok(())
}

#[test]
fn truncating_and_recomputing_is_caught_by_expect_head() -> TestResult {
    let f = fixture()?;
    let j = journal_with(&f, 5)?;
    let (_, recorded) = j.head().ok_or("no head")?;
    drop(j);
    // The attacker empties the table and writes a shorter, perfectly valid chain.
    tamperer(&f)?.execute("DELETE FROM journal", [])?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    for seq in 1..=3 {
        j.append(Kind::CallRequest, call("s1", seq, "read_file", "allow"))?;
    }
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    let report = verify(&f, Some(&recorded))?;
    assert_eq!(report.state, ChainState::Broken);
    assert!(
        report
            .expect_head
            .unwrap_or_default()
            .contains("nowhere in the chain")
    );
    Ok(())
}

#[test]
fn expect_head_on_a_grown_journal_is_not_an_accusation() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 3)?;
    let (_, recorded) = j.head().ok_or("no head")?;
    let at_tip = verify(&f, Some(&recorded))?;
    assert_eq!(at_tip.state, ChainState::Intact);
    assert_eq!(
        at_tip.expect_head.as_deref(),
        Some("the journal still ends at the head you recorded")
    );
    j.append(Kind::SessionStart, session("s2"))?;
    j.append(Kind::SessionEnd, session("s2"))?;
    // Pasted in upper case with a stray newline, as from a terminal.
    let report = verify(&f, Some(&format!("{}\n", recorded.to_uppercase())))?;
    assert_eq!(report.state, ChainState::Intact, "{:?}", report.problems);
    let verdict = report.expect_head.unwrap_or_default();
    assert!(
        verdict.starts_with("the head you recorded is entry 3; the journal has grown by 2 entries"),
        "{verdict}"
    );
    Ok(())
}

#[test]
fn expect_head_against_an_empty_journal_fails() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 0)?;
    assert_eq!(verify(&f, None)?.state, ChainState::Empty);
    let report = verify(&f, Some(&"ab".repeat(32)))?;
    assert_eq!(report.state, ChainState::Broken);
    assert!(
        report
            .expect_head
            .unwrap_or_default()
            .starts_with("the journal is empty, so it cannot end at abababababab")
    );
    Ok(())
}

#[test]
fn a_malformed_expected_head_is_an_error_not_a_verdict() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 1)?;
    let reader = Reader::open(&f.db)?;
    assert!(matches!(
        reader.verify(None, Some("abc123")),
        Err(JournalError::BadExpectHead { .. })
    ));
    Ok(())
}

#[test]
fn without_a_machine_id_the_chain_is_partial_and_a_wrong_one_breaks_entry_1() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 2)?;
    let reader = Reader::open(&f.db)?;
    assert_eq!(reader.verify(None, None)?.state, ChainState::Partial);
    let wrong = reader.verify(Some("another-machine"), None)?;
    assert_eq!(wrong.state, ChainState::Broken);
    assert_eq!(names(&wrong.problems), vec![1]);
    assert!(
        wrong
            .problems
            .iter()
            .all(|p| p.message.contains("does not link"))
    );
    Ok(())
}

#[test]
fn an_unreadable_or_unknown_entry_is_a_problem_not_a_crash() -> TestResult {
    let f = fixture()?;
    let _j = journal_with(&f, 4)?;
    let raw = tamperer(&f)?;
    raw.execute("UPDATE journal SET ok = 7 WHERE chain_seq = 2", [])?;
    raw.execute(
        "UPDATE journal SET schema_version = 9 WHERE chain_seq = 3",
        [],
    )?;
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert_eq!(names(&report.problems), vec![2, 3]);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.contains("holds 7 where 0 or 1 belongs"))
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.message.contains("schema_version 9"))
    );
    // The log refuses the row instead of showing something else.
    let log = Reader::open(&f.db)?.entries(&LogFilter::default());
    assert!(matches!(
        log,
        Err(JournalError::Malformed { chain_seq: 2, .. })
    ));
    Ok(())
}

// --- machine id ------------------------------------------------------------------------

#[test]
fn the_machine_id_is_created_private_and_reused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    let id = load_or_create_machine_id(&path, true)?;
    assert_eq!(id.len(), 32);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(mode_of(&path)?, 0o600);
    assert_eq!(load_or_create_machine_id(&path, false)?, id);
    assert_eq!(load_or_create_machine_id(&path, true)?, id);
    // Surrounding whitespace from a hand edit is ignored.
    std::fs::write(&path, format!("  {id}\n\n"))?;
    assert_eq!(load_or_create_machine_id(&path, false)?, id);
    let other = tempfile::tempdir()?;
    assert_ne!(
        load_or_create_machine_id(&other.path().join("machine-id"), true)?,
        id
    );
    Ok(())
}

#[test]
fn a_missing_machine_id_next_to_entries_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    assert!(matches!(
        load_or_create_machine_id(&path, false),
        Err(JournalError::MachineIdMissing { .. })
    ));
    assert!(!path.exists());
    std::fs::write(&path, "\n")?;
    assert!(matches!(
        load_or_create_machine_id(&path, false),
        Err(JournalError::MachineIdEmpty { .. })
    ));
    // Empty next to an empty journal: an interrupted creation, finished now.
    assert_eq!(load_or_create_machine_id(&path, true)?.len(), 32);
    Ok(())
}

#[test]
fn journal_has_entries_is_false_until_something_is_recorded() -> TestResult {
    let f = fixture()?;
    assert!(!journal_has_entries(&f.db)?);
    let mut j = journal_with(&f, 0)?;
    assert!(!journal_has_entries(&f.db)?);
    j.append(Kind::SessionStart, session("s1"))?;
    assert!(journal_has_entries(&f.db)?);
    Ok(())
}

#[test]
fn errors_name_the_file_and_say_what_to_do() -> TestResult {
    use miette::Diagnostic as _;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    let err = load_or_create_machine_id(&path, false)
        .err()
        .ok_or("expected an error")?;
    let shown = path.display().to_string();
    assert!(err.to_string().contains(&shown));
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(help.contains(&shown) && help.contains("restore"), "{help}");
    let missing_dir = dir.path().join("nope").join("holdcall.db");
    let err = Journal::open(&missing_dir, MACHINE, Durability::Power)
        .err()
        .ok_or("expected an error")?;
    assert!(matches!(err, JournalError::CreateFile { .. }));
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(
        help.contains(&dir.path().join("nope").display().to_string()),
        "{help}"
    );
    Ok(())
}

// --- readers ---------------------------------------------------------------------------

#[test]
fn a_reader_on_a_missing_file_says_there_is_no_journal_yet() -> TestResult {
    let f = fixture()?;
    let err = Reader::open(&f.db).err().ok_or("expected an error")?;
    assert!(matches!(err, JournalError::NoJournalYet { .. }));
    assert!(err.to_string().ends_with(
        "has no journal yet: the daemon creates it the first time it records something"
    ));
    assert!(!f.db.exists(), "a reader must not create the file");
    // An SQLite file without our tables is no journal either, and stays untouched.
    Connection::open(&f.db)?.execute_batch("CREATE TABLE other(x INTEGER);")?;
    assert!(matches!(
        Reader::open(&f.db),
        Err(JournalError::NoJournalYet { .. })
    ));
    Ok(())
}

#[test]
fn a_reader_works_after_the_writer_has_closed() -> TestResult {
    let f = fixture()?;
    drop(journal_with(&f, 2)?);
    let reader = Reader::open(&f.db)?;
    assert_eq!(reader.count()?, 2);
    assert_eq!(
        reader.verify(Some(MACHINE), None)?.state,
        ChainState::Intact
    );
    Ok(())
}

#[test]
fn entries_filter_and_keep_the_newest_last() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    j.append(Kind::SessionStart, session("aaaa1111"))?;
    j.append(Kind::CallRequest, call("aaaa1111", 1, "read_file", "allow"))?;
    j.append(Kind::SessionStart, session("bbbb2222"))?;
    j.append(Kind::CallRequest, call("bbbb2222", 1, "write_file", "deny"))?;
    j.append(Kind::CallRequest, call("aaaa1111", 2, "write_file", "deny"))?;
    let r = Reader::open(&f.db)?;
    let seqs = |filter: LogFilter| -> Result<Vec<i64>, JournalError> {
        Ok(r.entries(&filter)?.iter().map(|e| e.chain_seq).collect())
    };
    assert_eq!(seqs(LogFilter::default())?, vec![1, 2, 3, 4, 5]);
    assert_eq!(
        seqs(LogFilter {
            limit: Some(2),
            ..LogFilter::default()
        })?,
        vec![4, 5]
    );
    assert_eq!(
        seqs(LogFilter {
            limit: Some(0),
            ..LogFilter::default()
        })?,
        Vec::<i64>::new()
    );
    assert_eq!(
        seqs(LogFilter {
            session: Some("aaaa".to_owned()),
            ..LogFilter::default()
        })?,
        vec![1, 2, 5]
    );
    assert_eq!(
        seqs(LogFilter {
            session: Some("AAAA".to_owned()),
            ..LogFilter::default()
        })?,
        Vec::<i64>::new()
    );
    assert_eq!(
        seqs(LogFilter {
            tool: Some("write_file".to_owned()),
            ..LogFilter::default()
        })?,
        vec![4, 5]
    );
    assert_eq!(
        seqs(LogFilter {
            decision: Some("deny".to_owned()),
            session: Some("a".to_owned()),
            ..LogFilter::default()
        })?,
        vec![5]
    );
    assert_eq!(
        seqs(LogFilter {
            kind: Some("session.start".to_owned()),
            limit: Some(1),
            ..LogFilter::default()
        })?,
        vec![3]
    );
    assert_eq!(r.count()?, 5);
    Ok(())
}

#[test]
fn open_sessions_lists_sessions_started_but_not_ended() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    assert!(j.open_sessions()?.is_empty());
    j.append(Kind::SessionStart, session("s1"))?;
    j.append(Kind::SessionStart, session("s2"))?;
    j.append(Kind::SessionStart, session("s3"))?;
    j.append(Kind::SessionEnd, session("s2"))?;
    // An end without a start, and an anomaly, open nothing.
    j.append(Kind::SessionEnd, session("s9"))?;
    j.append(
        Kind::Anomaly,
        Fields {
            anomaly: Some("framing".to_owned()),
            ..session("s4")
        },
    )?;
    assert_eq!(j.open_sessions()?, vec!["s1".to_owned(), "s3".to_owned()]);
    assert!(j.session_started("s2")?);
    assert!(!j.session_started("s4")?);
    assert!(!j.session_started("s")?);
    Ok(())
}

#[test]
fn entries_serialize_flat_for_the_cli() -> TestResult {
    let json = serde_json::to_value(vector_entry())?;
    assert_eq!(
        json.get("tool").and_then(|v| v.as_str()),
        Some("create_issue")
    );
    assert_eq!(json.get("anomaly"), Some(&serde_json::Value::Null));
    assert!(json.get("fields").is_none());
    assert_eq!(serde_json::to_string(&Durability::Power)?, "\"power\"");
    assert_eq!(serde_json::to_string(&ChainState::Intact)?, "\"intact\"");
    Ok(())
}

#[test]
fn a_commit_by_another_connection_makes_fresh_appends_stale_until_reloaded() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 1)?;
    let seen = j.load_in_force()?.data_version;
    // The writer's own commits do not move data_version.
    let (v, out) = j.append_fresh(
        vec![(Kind::CallRequest, call("s1", 1, "echo", "allow"), true)],
        seen,
    )?;
    assert_eq!(v, seen);
    assert!(out.iter().all(Option::is_some));
    // Another connection's commit does: decisions are left out, other entries go in.
    tamperer(&f)?.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')", [])?;
    let (v, out) = j.append_fresh(
        vec![
            (Kind::CallRequest, call("s1", 2, "echo", "allow"), true),
            (Kind::SessionEnd, session("s1"), false),
        ],
        seen,
    )?;
    assert_ne!(v, seen);
    assert!(
        out.first().is_some_and(Option::is_none),
        "the decision was recorded"
    );
    assert!(out.get(1).is_some_and(Option::is_some));
    // After a reload at the new version, decisions are recorded again.
    let reloaded = j.load_in_force()?.data_version;
    assert_eq!(reloaded, v);
    let (_, out) = j.append_fresh(
        vec![(Kind::CallRequest, call("s1", 3, "echo", "allow"), true)],
        reloaded,
    )?;
    assert!(out.iter().all(Option::is_some));
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    Ok(())
}

#[test]
fn tables_are_checked_against_the_recorded_policy_diffs_budgets_and_enrolments() -> TestResult {
    let f = fixture()?;
    let mut j = journal_with(&f, 1)?;
    let mut p = new_policy(j.next_policy_seq()?, "policy1", "deny");
    // As an imported file's policy: its columns carry no scope of their own.
    p.source = "file:t.cedar".into();
    p.tool = None;
    let diff = crate::policy::unified_diff(
        "",
        &crate::policy::set_text([p.text.as_str()]),
        "policy before",
        "policy after",
    );
    j.change_policies(
        vec![p],
        vec![],
        Fields {
            detail: Some(diff),
            ..Fields::default()
        },
    )?;
    j.change_budget(BudgetChange::Set {
        calls: 2,
        scope: crate::policy::budget::BudgetScope {
            tool: Some("echo".into()),
            ..Default::default()
        },
    })?;
    assert_eq!(j.load_in_force()?.mismatches, Vec::<String>::new());
    assert_eq!(verify(&f, None)?.state, ChainState::Intact);
    let t = tamperer(&f)?;
    t.execute("UPDATE budgets SET calls = 9", [])?;
    t.execute("DELETE FROM policies", [])?;
    let m = j.load_in_force()?.mismatches;
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(
        m.iter().any(|x| x.contains("rule policy1 is missing")),
        "{m:?}"
    );
    assert!(m.iter().any(|x| x.contains("budget budget-1:")), "{m:?}");
    let report = verify(&f, None)?;
    assert_eq!(report.state, ChainState::Broken);
    assert!(report.problems.is_empty());
    assert_eq!(report.tables, m);
    Ok(())
}
