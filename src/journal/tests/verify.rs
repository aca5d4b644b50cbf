//! Tests of verify: every kind of tampering found and named, and `--expect-head`.

use super::*;

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
