//! Tests of the tables of what is in force: each change commits with its entry or not at all.

use super::*;

#[test]
fn an_agent_change_commits_with_its_entry_and_one_file_has_one_name() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    let identity = crate::os::process::FileIdentity {
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
