//! Tests of what is in force: the `data_version` check of fresh appends, and the tables checked
//! against what the journal recorded.

use super::*;

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
