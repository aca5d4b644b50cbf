//! Tests of the writer: the chain its appends form, one transaction per write, the pragmas,
//! the triggers and the layout version.

use super::*;

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
