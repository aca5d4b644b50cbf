//! Rules made on the command line, through the real binary and daemon: the precedence table
//! from its data file, what the journal records of each change, and refusals of bad input.

use crate::common::*;
use holdcall::policy::{Effect, Scope, parse_precedence_case};

fn scope_args(s: &Scope) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(a) = &s.agent {
        v.push("--agent".to_string());
        v.push(a.clone());
    }
    if let Some(c) = &s.connector {
        v.push("--connector".to_string());
        v.push(c.clone());
    }
    v
}

fn set_args(effect: Effect, s: &Scope) -> Vec<String> {
    let mut v = vec!["policy".to_string()];
    match &s.tool {
        Some(t) => {
            v.push(effect.as_str().to_string());
            v.push(t.clone());
        }
        None => {
            v.push("default".to_string());
            v.push(effect.as_str().to_string());
        }
    }
    v.extend(scope_args(s));
    v
}

fn remove_args(s: &Scope) -> Vec<String> {
    let mut v = vec!["policy".to_string(), "remove".to_string()];
    match &s.tool {
        Some(t) => v.push(t.clone()),
        None => v.push("--default".to_string()),
    }
    v.extend(scope_args(s));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn the_precedence_table_holds_through_the_real_daemon() {
    let env = Env::fast();
    let table = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/policy/precedence.txt"
    ))
    .unwrap();
    let mut checked = 0;
    // A rule may name only an enrolled agent: the table's agents are A (the caller) and B.
    for name in ["A", "B"] {
        let program = env.dir.path().join(name);
        crate::common::copy_executable("/usr/bin/true", &program);
        env.ok(&["agent", "add", name, program.to_str().unwrap()]);
    }
    for (n, line) in table.lines().enumerate() {
        let Some(case) = parse_precedence_case(line) else {
            continue;
        };
        let case = case.unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let distinct: std::collections::HashSet<_> =
            case.rules.iter().map(|r| r.1.describe()).collect();
        if distinct.len() != case.rules.len() {
            continue; // one scope, two rules: only imported policies can do that
        }
        for (effect, scope) in &case.rules {
            env.ok(&strs(&set_args(*effect, scope)));
        }
        let listed: Vec<serde_json::Value> =
            serde_json::from_str(&env.ok(&["policy", "list", "--json"])).unwrap();
        let ids: Vec<&str> = listed.iter().map(|p| p["id"].as_str().unwrap()).collect();
        let e: serde_json::Value = serde_json::from_str(&env.ok(&[
            "policy",
            "explain",
            "T",
            "--agent",
            "A",
            "--connector",
            "C",
            "--json",
        ]))
        .unwrap();
        let winner = e["winner"]["id"]
            .as_str()
            .map(|w| ids.iter().position(|i| *i == w).unwrap() + 1)
            .unwrap_or(0);
        assert_eq!(
            (e["decision"]["effect"].as_str().unwrap(), winner),
            (case.expected.as_str(), case.winner),
            "line {}: {line}\n{e:#}",
            n + 1
        );
        for (_, scope) in &case.rules {
            env.ok(&strs(&remove_args(scope)));
        }
        checked += 1;
    }
    assert!(checked >= 252, "only {checked} cases ran");
}

#[test]
fn a_policy_change_is_journaled_with_the_diff_of_the_policy_text() {
    let env = Env::new();
    let out = env.ok(&["policy", "deny", "delete_file", "--connector", "github"]);
    assert!(out.contains("recorded in the journal"), "{out}");
    env.ok(&["policy", "remove", "delete_file", "--connector", "github"]);
    let rows = journal_rows(&env.db());
    let changes: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|e| e["kind"] == "policy.change")
        .collect();
    assert_eq!(changes.len(), 2);
    let added = changes[0]["detail"].as_str().unwrap();
    assert!(added.contains("+@id(\"rule-1\")"), "{added}");
    assert!(
        added.contains("+  resource == Tool::\"github/delete_file\""),
        "{added}"
    );
    let removed = changes[1]["detail"].as_str().unwrap();
    assert!(removed.contains("-forbid ("), "{removed}");
    env.ok(&["verify"]);
}

#[test]
fn a_scope_holds_one_rule_and_repeating_a_rule_changes_nothing() {
    let env = Env::new();
    env.ok(&["policy", "deny", "x"]);
    let again = env.ok(&["policy", "deny", "x"]);
    assert!(again.contains("nothing changed"), "{again}");
    let err = env.fails(&["policy", "allow", "x"], 1);
    assert!(err.contains("remove it first"), "{err}");
    let n = journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "policy.change")
        .count();
    assert_eq!(n, 1);
}

#[test]
fn bad_names_are_refused_with_what_to_do() {
    let env = Env::new();
    let long = "t".repeat(257);
    for bad in ["", "*", "a\u{7}b", long.as_str()] {
        let err = env.fails(&["policy", "deny", bad], 1);
        assert!(!err.is_empty());
    }
    let err = env.fails(&["policy", "deny", "x", "--connector", "has space"], 1);
    assert!(err.contains("connector"), "{err}");
    let err = env.fails(&["policy", "deny", "x", "--bogus"], 2);
    assert!(err.contains("--bogus"), "{err}");
    assert!(
        journal_rows(&env.db())
            .iter()
            .all(|e| e["kind"] != "policy.change")
    );
}

#[test]
fn removing_a_rule_that_does_not_exist_says_so() {
    let env = Env::new();
    let err = env.fails(&["policy", "remove", "nothing"], 1);
    assert!(err.contains("no rule"), "{err}");
}

#[test]
fn policy_list_shows_the_cedar_text_of_each_rule() {
    let env = Env::new();
    env.ok(&["policy", "default", "deny"]);
    env.ok(&["agent", "add", "claude", "/usr/bin/true"]);
    env.ok(&["policy", "allow", "read_file", "--agent", "claude"]);
    let out = env.ok(&["policy", "list"]);
    assert!(out.contains("rule-1  deny"), "{out}");
    assert!(out.contains("principal == Agent::\"claude\""), "{out}");
    let e = env.ok(&["policy", "explain", "read_file"]);
    assert!(
        e.contains("DENY"),
        "an unenrolled agent meets only the default: {e}"
    );
    let e = env.ok(&["policy", "explain", "read_file", "--agent", "claude"]);
    assert!(e.contains("ALLOW"), "{e}");
}
