//! The worked examples in `policies/`: every one passes `holdcall policy test` with its cases
//! file, and every one is imported into a real daemon and exercised through the relay in front
//! of the demo server (whose tools are echo, add, big and delete_file; other tool names reach it
//! too, and the journal records the daemon's decision for each call).

use crate::common::*;

const EXAMPLES: [&str; 7] = [
    "project-writes",
    "git-push",
    "no-secrets",
    "read-only-hours",
    "one-agent",
    "session-limits",
    "holdmap-stops",
];

fn example(name: &str) -> String {
    format!("{}/policies/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The newest `call.request` entry in the journal.
fn last_call(env: &Env) -> serde_json::Value {
    journal_rows(&env.db())
        .into_iter()
        .rev()
        .find(|e| e["kind"] == "call.request")
        .unwrap()
}

/// Sends one call through a fresh relay; returns the daemon's decision from the journal.
fn decided(env: &Env, tool: &str, args: &str) -> String {
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("7", tool, args));
    let v = answer_rejecting_held(env, &mut r);
    r.finish();
    let last = last_call(env);
    assert_eq!(last["tool"], tool);
    let decision = last["decision"].as_str().unwrap().to_string();
    assert_eq!(is_refusal(&v), decision != "allow", "{tool} {args}: {v}");
    decision
}

fn import(env: &Env, name: &str) {
    let out = env.ok(&["policy", "import", &format!("{}.cedar", example(name))]);
    assert!(out.contains("imported"), "{out}");
}

/// `holdcall policy test` against the set in force (exported by the daemon) passes too.
fn cases_pass_in_force(env: &Env, name: &str) {
    let out = env.ok(&["policy", "test", &format!("{}.cases.toml", example(name))]);
    assert!(
        out.contains("cases passed against the policy in force"),
        "{out}"
    );
}

#[test]
fn every_example_passes_its_own_cases() {
    let env = Env::new();
    for name in EXAMPLES {
        let cases = format!("{}.cases.toml", example(name));
        let policy = format!("{}.cedar", example(name));
        let out = env.ok(&["policy", "test", &cases, "--policy", &policy]);
        assert!(!out.contains("FAIL"), "{name}: {out}");
        let last = out.lines().last().unwrap();
        let (passed, total) = last.split_once(" of ").unwrap();
        assert!(
            total.starts_with(passed) && passed.parse::<usize>().unwrap() >= 4,
            "{name}: {out}"
        );
    }
}

#[test]
fn a_failing_case_is_named_with_the_decision_and_the_test_exits_1() {
    let env = Env::new();
    let cases = env.home().join("wrong.toml");
    std::fs::write(
        &cases,
        "[[case]]\nname = \"keys are fine\"\ntool = \"read_file\"\narguments = { path = \"/home/u/.ssh/id_rsa\" }\nexpect = \"allow\"\n\n[[case]]\nname = \"echo\"\ntool = \"echo\"\nexpect = \"allow\"\n",
    )
    .unwrap();
    let out = env
        .cmd(&[
            "policy",
            "test",
            cases.to_str().unwrap(),
            "--policy",
            &format!("{}.cedar", example("no-secrets")),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("FAIL  keys are fine (")
            && stdout.contains("wrong.toml:1:1): expected allow, got deny by no-secrets-path"),
        "{stdout}"
    );
    assert!(stdout.contains("pass  echo"), "{stdout}");
    assert!(stdout.contains("1 of 2 cases passed"), "{stdout}");
}

#[test]
fn a_mistake_in_a_cases_file_is_reported_at_its_line_and_column() {
    let env = Env::new();
    let cases = env.home().join("bad.toml");
    std::fs::write(
        &cases,
        "[[case]]\nname = \"a\"\ntool = \"echo\"\ntime = \"tomorrow\"\nexpect = \"allow\"\n",
    )
    .unwrap();
    let err = env.fails(
        &[
            "policy",
            "test",
            cases.to_str().unwrap(),
            "--policy",
            &format!("{}.cedar", example("one-agent")),
        ],
        1,
    );
    assert!(err.contains("bad.toml:4:8"), "{err}");
    assert!(err.contains("help"), "{err}");
}

#[test]
fn project_writes_refuses_a_delete_outside_the_project_through_the_relay() {
    let env = Env::fast();
    import(&env, "project-writes");
    assert_eq!(
        decided(
            &env,
            "delete_file",
            r#"{"path":"/home/me/project/old.txt"}"#
        ),
        "allow"
    );
    assert_eq!(
        decided(&env, "delete_file", r#"{"path":"/home/me/notes.txt"}"#),
        "deny"
    );
    assert_eq!(
        decided(
            &env,
            "delete_file",
            r#"{"path":"/home/me/project/../notes.txt"}"#
        ),
        "deny"
    );
    assert_eq!(decided(&env, "delete_file", "{}"), "deny");
    assert_eq!(decided(&env, "echo", r#"{"text":"hi"}"#), "allow");
    cases_pass_in_force(&env, "project-writes");
}

#[test]
fn git_push_holds_a_push_to_main_and_a_force_push_through_the_relay() {
    let env = Env::fast();
    import(&env, "git-push");
    assert_eq!(
        decided(&env, "git_push", r#"{"remote":"origin","branch":"main"}"#),
        "ask"
    );
    assert_eq!(
        decided(&env, "git_push", r#"{"branch":"feature/x","force":true}"#),
        "ask"
    );
    assert_eq!(
        decided(
            &env,
            "git_push",
            r#"{"remote":"origin","branch":"feature/x"}"#
        ),
        "allow"
    );
    assert_eq!(decided(&env, "echo", r#"{"branch":"main"}"#), "allow");
    cases_pass_in_force(&env, "git-push");
}

#[test]
fn no_secrets_refuses_any_tool_that_names_a_path_under_ssh_or_aws_through_the_relay() {
    let env = Env::fast();
    import(&env, "no-secrets");
    assert_eq!(
        decided(&env, "delete_file", r#"{"path":"/home/me/.ssh/id_rsa"}"#),
        "deny"
    );
    assert_eq!(
        decided(&env, "echo", r#"{"path":"~/.aws/credentials"}"#),
        "deny"
    );
    // A path that is not text makes the forbid error; an erroring forbid refuses.
    assert_eq!(decided(&env, "delete_file", r#"{"path":7}"#), "deny");
    assert_eq!(
        decided(&env, "delete_file", r#"{"path":"/tmp/scratch"}"#),
        "allow"
    );
    assert_eq!(decided(&env, "echo", r#"{"text":"~/.ssh"}"#), "allow");
    cases_pass_in_force(&env, "no-secrets");
}

#[test]
fn read_only_hours_refuse_writes_on_a_saturday_evening_by_the_daemons_clock() {
    let env = Env::fast();
    // The first command starts the daemon; a debug build honours HOLDCALL_CLOCK.
    let out = env
        .cmd(&[
            "policy",
            "import",
            &format!("{}.cedar", example("read-only-hours")),
        ])
        .env("HOLDCALL_CLOCK", "2026-01-10T20:00:00+01:00")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(decided(&env, "delete_file", r#"{"path":"/tmp/x"}"#), "deny");
    assert_eq!(
        decided(&env, "echo", r#"{"text":"reading is fine"}"#),
        "allow"
    );
    let log = std::fs::read_to_string(env.home().join("daemon.log")).unwrap_or_default();
    assert!(log.contains("HOLDCALL_CLOCK"), "{log}");
}

#[test]
fn read_only_hours_allow_writes_on_a_monday_morning_by_the_daemons_clock() {
    let env = Env::fast();
    let out = env
        .cmd(&[
            "policy",
            "import",
            &format!("{}.cedar", example("read-only-hours")),
        ])
        .env("HOLDCALL_CLOCK", "2026-01-05T10:00:00+01:00")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        decided(&env, "delete_file", r#"{"path":"/tmp/x"}"#),
        "allow"
    );
    cases_pass_in_force(&env, "read-only-hours");
}

#[test]
fn one_agent_admits_only_the_enrolled_claude_and_refuses_every_other_session() {
    let env = Env::fast();
    let file = format!("{}.cedar", example("one-agent"));
    // The file names Agent::"claude": it imports only once claude is enrolled.
    let err = env.fails(&["policy", "import", &file], 1);
    assert!(err.contains("agent claude is not enrolled"), "{err}");
    let claude = env.dir.path().join("claude");
    crate::common::copy_executable("/usr/bin/timeout", &claude);
    env.ok(&["agent", "add", "claude", claude.to_str().unwrap()]);
    import(&env, "one-agent");
    // A relay whose parent is this test has no agent, and is refused.
    assert_eq!(decided(&env, "echo", r#"{"text":"hi"}"#), "deny");
    // A relay launched by the enrolled program is claude, and allowed.
    let mut r = env.relay_under(&claude, "demo");
    r.handshake();
    r.send(&call("7", "echo", r#"{"text":"hi"}"#));
    assert!(!is_refusal(&r.recv_json()));
    r.finish();
    let explain = env.ok(&["policy", "explain", "echo", "--agent", "claude"]);
    assert!(explain.contains("allow-claude"), "{explain}");
    assert!(explain.to_lowercase().contains("allow"), "{explain}");
    let explain = env.ok(&["policy", "explain", "echo", "--agent", "cursor"]);
    assert!(explain.contains("default-deny"), "{explain}");
    cases_pass_in_force(&env, "one-agent");
}

#[test]
fn session_limits_refuse_the_21st_delete_file_of_one_session_through_the_relay() {
    let env = Env::fast();
    import(&env, "session-limits");
    cases_pass_in_force(&env, "session-limits");
    let mut r = env.relay("demo");
    r.handshake();
    for i in 1..=21 {
        r.send(&call(&i.to_string(), "delete_file", r#"{"path":"/tmp/x"}"#));
        let v = r.recv_json();
        assert_eq!(is_refusal(&v), i == 21, "call {i}: {v}");
    }
    r.finish();
    let last = last_call(&env);
    assert_eq!(last["decision"], "deny");
    assert_eq!(last["policy_id"], "delete-file-20-per-session");
    // A new relay session starts at 0 again.
    assert_eq!(
        decided(&env, "delete_file", r#"{"path":"/tmp/x"}"#),
        "allow"
    );
}

#[test]
fn holdmap_stops_lets_a_stop_preview_through_holds_a_real_stop_and_refuses_a_dry_run_as_text() {
    let env = Env::fast();
    import(&env, "holdmap-stops");
    assert_eq!(decided(&env, "stop_port", r#"{"port":3000}"#), "allow");
    assert_eq!(
        decided(&env, "stop_port", r#"{"port":3000,"dry_run":true}"#),
        "allow"
    );
    assert_eq!(
        decided(
            &env,
            "stop_port",
            r#"{"port":3000,"dry_run":false,"confirmation_id":"a-1"}"#
        ),
        "ask"
    );
    assert_eq!(
        decided(
            &env,
            "stop_agent_ports",
            r#"{"agent":"claude","dry_run":false,"confirmation_id":"a-2"}"#
        ),
        "ask"
    );
    assert_eq!(
        decided(&env, "stop_port", r#"{"port":3000,"dry_run":"false"}"#),
        "deny"
    );
    assert_eq!(decided(&env, "list_ports", r#"{"dry_run":false}"#), "allow");
    cases_pass_in_force(&env, "holdmap-stops");
}
