//! Tests of the read-only reader: a missing journal, filters, and the entries as the CLI sees them.

use super::*;

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
