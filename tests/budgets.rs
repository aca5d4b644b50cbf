//! Budgets through the real binary, daemon and relay: `policy budget N`, the over-budget
//! refusal and its journal entry, what counts and what does not (refusals, retries of an
//! input_required call, tasks), scopes, and `context.session` in a hand-written policy.

use crate::common::*;

const OVER_BUDGET: &str = "Holdcall refused this call: this session has used up a budget that \
     caps how many such calls it may make. Do not retry automatically.";

fn text_of(v: &serde_json::Value) -> &str {
    v["result"]["content"][0]["text"].as_str().unwrap_or("")
}

/// Sends calls through one relay session to the demo server; returns each answer.
fn session(env: &Env, calls: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let mut r = env.relay("demo");
    r.handshake();
    let mut out = Vec::new();
    for (i, (tool, args)) in calls.iter().enumerate() {
        r.send(&call(&(i + 1).to_string(), tool, args));
        out.push(r.recv_json());
    }
    r.finish();
    out
}

/// (tool, decision, policy_id, reason) of every call.request, oldest first.
fn decisions(env: &Env) -> Vec<(String, String, String, String)> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (s("tool"), s("decision"), s("policy_id"), s("reason"))
        })
        .collect()
}

const ECHO: (&str, &str) = ("echo", r#"{"text":"hi"}"#);
const ADD: (&str, &str) = ("add", r#"{"a":1,"b":2}"#);
const DELETE: (&str, &str) = ("delete_file", r#"{"path":"/tmp/x"}"#);

#[test]
fn a_budget_of_two_refuses_the_third_allowed_call_refusals_do_not_count_and_a_new_session_is_fresh()
{
    let env = Env::fast();
    env.ok(&["policy", "deny", "delete_file"]);
    let out = env.ok(&["policy", "budget", "2", "--all-tools"]);
    assert!(out.contains("budget budget-1 set"), "{out}");
    let answers = session(&env, &[ECHO, DELETE, DELETE, ADD, ECHO]);
    assert!(!is_refusal(&answers[0]), "{}", answers[0]);
    assert_eq!(text_of(&answers[1]), DENIED);
    assert_eq!(text_of(&answers[2]), DENIED);
    assert!(
        !is_refusal(&answers[3]),
        "two refusals did not count: {}",
        answers[3]
    );
    assert!(is_refusal(&answers[4]));
    assert_eq!(answers[4]["result"]["isError"], true);
    assert_eq!(text_of(&answers[4]), OVER_BUDGET);

    let d = decisions(&env);
    assert_eq!(d.len(), 5);
    assert_eq!(
        d[4],
        (
            "echo".to_string(),
            "over-budget".to_string(),
            "budget-1".to_string(),
            "budget budget-1: 2 of 2 calls of every tool used in this session".to_string()
        )
    );
    assert_eq!(d[1].1, "deny");

    // A new relay session starts fresh.
    let answers = session(&env, &[ECHO, ECHO, ECHO]);
    assert!(!is_refusal(&answers[0]) && !is_refusal(&answers[1]));
    assert_eq!(text_of(&answers[2]), OVER_BUDGET);

    // `log` shows the decision word, and filters by it.
    let log = env.ok(&["log", "--decision", "over-budget"]);
    let lines: Vec<&str> = log.lines().skip(1).collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines.iter().all(|l| l.contains("over-budget")), "{log}");
    assert!(log.contains("budget budget-1: 2 of 2 calls"), "{log}");
    env.ok(&["verify"]);
}

#[test]
fn a_one_tool_budget_counts_only_that_tool_and_names_it() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    let answers = session(&env, &[ECHO, ADD, ADD, ADD, ECHO]);
    assert!(answers[..4].iter().all(|a| !is_refusal(a)));
    assert_eq!(text_of(&answers[4]), OVER_BUDGET);
    assert_eq!(
        decisions(&env)[4].3,
        "budget budget-1: 1 of 1 calls of tool echo used in this session"
    );
}

#[test]
fn with_a_one_tool_and_an_all_tools_budget_the_first_without_room_refuses() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "3", "--all-tools"]);
    env.ok(&["policy", "budget", "1", "--tool", "add"]);
    let answers = session(&env, &[ADD, ADD, ECHO, ECHO, ECHO]);
    assert!(!is_refusal(&answers[0]));
    assert!(is_refusal(&answers[1]));
    assert!(!is_refusal(&answers[2]) && !is_refusal(&answers[3]));
    assert!(is_refusal(&answers[4]));
    let d = decisions(&env);
    assert_eq!(d[1].2, "budget-2");
    assert_eq!(d[4].2, "budget-1");
}

#[test]
fn agent_and_connector_budgets_bind_only_their_scope() {
    let env = Env::fast();
    // A budget, like a rule, may name only an enrolled agent.
    let stderr = env.fails(
        &["policy", "budget", "1", "--all-tools", "--agent", "claude"],
        1,
    );
    assert!(stderr.contains("agent claude is not enrolled"), "{stderr}");
    // A copy of `timeout` plays the client program "claude"; `session` runs unenrolled, and the
    // relay's connector is "demo".
    let claude = env.dir.path().join("claude");
    crate::common::copy_executable("/usr/bin/timeout", &claude);
    env.ok(&["agent", "add", "claude", claude.to_str().unwrap()]);
    env.ok(&["policy", "budget", "1", "--all-tools", "--agent", "claude"]);
    let stderr = env.fails(&["agent", "remove", "claude"], 1);
    assert!(stderr.contains("budget-1"), "{stderr}");
    let mut r = env.relay_under(&claude, "demo");
    r.handshake();
    r.send(&call("1", "echo", ECHO.1));
    assert!(!is_refusal(&r.recv_json()));
    r.send(&call("2", "echo", ECHO.1));
    assert!(is_refusal(&r.recv_json()), "claude's session has one call");
    r.finish();
    env.ok(&[
        "policy",
        "budget",
        "1",
        "--all-tools",
        "--connector",
        "github",
    ]);
    env.ok(&[
        "policy",
        "budget",
        "1",
        "--tool",
        "echo",
        "--connector",
        "github",
    ]);
    let answers = session(&env, &[ECHO, ECHO, ECHO]);
    assert!(answers.iter().all(|a| !is_refusal(a)));
    env.ok(&[
        "policy",
        "budget",
        "2",
        "--tool",
        "echo",
        "--connector",
        "demo",
    ]);
    let answers = session(&env, &[ECHO, ADD, ECHO, ECHO]);
    assert!(answers[..3].iter().all(|a| !is_refusal(a)));
    assert!(is_refusal(&answers[3]));
    assert_eq!(decisions(&env).last().unwrap().2, "budget-4");
}

#[test]
fn a_budget_never_turns_a_deny_into_an_allow() {
    let env = Env::fast();
    env.ok(&["policy", "deny", "delete_file"]);
    env.ok(&["policy", "budget", "5", "--tool", "delete_file"]);
    let answers = session(&env, &[DELETE]);
    assert_eq!(text_of(&answers[0]), DENIED);
    let d = decisions(&env);
    assert_eq!((d[0].1.as_str(), d[0].2.as_str()), ("deny", "rule-1"));
}

#[test]
fn budgets_show_in_list_and_explain_removing_one_restores_calls_and_every_change_is_journaled() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    env.ok(&[
        "policy",
        "budget",
        "10",
        "--all-tools",
        "--connector",
        "demo",
    ]);

    let list = env.ok(&["policy", "list"]);
    assert!(
        list.contains(
            "budget-1  at most 1 call of tool echo per relay session, for every agent on every connector"
        ),
        "{list}"
    );
    assert!(
        list.contains("budget-2  at most 10 calls of every tool"),
        "{list}"
    );
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&env.ok(&["policy", "list", "--json"])).unwrap();
    let budgets: Vec<&serde_json::Value> = json.iter().filter(|v| v["kind"] == "budget").collect();
    assert_eq!(budgets.len(), 2);
    assert_eq!(budgets[0]["id"], "budget-1");
    assert_eq!(budgets[0]["calls"], 1);
    assert_eq!(budgets[0]["tool"], "echo");
    assert_eq!(budgets[1]["tool"], serde_json::Value::Null);
    assert_eq!(budgets[1]["connector"], "demo");

    let explain = env.ok(&["policy", "explain", "echo", "--connector", "demo"]);
    assert!(
        explain.contains("budget-1  at most 1 call of tool echo"),
        "{explain}"
    );
    assert!(explain.contains("budget-2  at most 10 calls"), "{explain}");
    let explain = env.ok(&["policy", "explain", "add"]);
    assert!(explain.contains("budgets: none applies"), "{explain}");
    let e: serde_json::Value = serde_json::from_str(&env.ok(&[
        "policy",
        "explain",
        "echo",
        "--connector",
        "demo",
        "--json",
    ]))
    .unwrap();
    let ids: Vec<&str> = e["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["budget-1", "budget-2"]);
    assert_eq!(e["decision"]["effect"], "allow");

    // One budget per scope: the same cap again changes nothing, another is refused.
    let same = env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    assert!(same.contains("nothing changed"), "{same}");
    let other = env.fails(&["policy", "budget", "3", "--tool", "echo"], 1);
    assert!(other.contains("remove it first"), "{other}");

    assert!(is_refusal(&session(&env, &[ECHO, ECHO])[1]));
    let out = env.ok(&["policy", "budget", "remove", "--tool", "echo"]);
    assert!(out.contains("budget budget-1 removed"), "{out}");
    assert!(session(&env, &[ECHO, ECHO]).iter().all(|a| !is_refusal(a)));
    let gone = env.fails(&["policy", "budget", "remove", "--tool", "echo"], 1);
    assert!(gone.contains("no budget covers tool echo"), "{gone}");

    let changes: Vec<serde_json::Value> = journal_rows(&env.db())
        .into_iter()
        .filter(|e| e["kind"] == "budget.change")
        .collect();
    assert_eq!(changes.len(), 3, "the no-op and the refusal wrote nothing");
    assert_eq!(changes[0]["policy_id"], "budget-1");
    assert_eq!(changes[0]["tool"], "echo");
    assert_eq!(
        changes[0]["reason"],
        "budget budget-1 set: at most 1 call of tool echo per relay session, for every agent on every connector"
    );
    assert_eq!(
        changes[0]["detail"],
        "+ budget-1: at most 1 call of tool echo per relay session, for every agent on every connector"
    );
    assert_eq!(changes[1]["connector"], "demo");
    assert!(
        changes[2]["reason"]
            .as_str()
            .unwrap()
            .starts_with("budget budget-1 removed"),
        "{}",
        changes[2]
    );
    assert!(
        changes[2]["detail"]
            .as_str()
            .unwrap()
            .starts_with("- budget-1")
    );
    let log = env.ok(&["log"]);
    assert!(log.contains("budget.change"), "{log}");
    let verified = env.ok(&["verify"]);
    assert!(verified.contains("journal OK"), "{verified}");

    // Budgets survive a daemon restart (they are stored), and a removed id is never reused.
    env.ok(&["daemon", "restart"]);
    env.ok(&["policy", "budget", "4", "--tool", "echo"]);
    let list = env.ok(&["policy", "list"]);
    assert!(list.contains("budget-2  at most 10 calls"), "{list}");
    assert!(
        list.contains("budget-3  at most 4 calls of tool echo"),
        "{list}"
    );
}

#[test]
fn bad_budget_input_is_refused_with_a_clear_error_and_changes_nothing() {
    let env = Env::fast();
    for (args, want, code) in [
        (
            vec!["policy", "budget", "0", "--tool", "echo"],
            "a budget is 1 to 1000000 calls per session; 0 is not",
            1,
        ),
        (
            vec!["policy", "budget", "1000001", "--all-tools"],
            "a budget is 1 to 1000000 calls per session; 1000001 is not",
            1,
        ),
        (
            vec!["policy", "budget", "-3", "--all-tools"],
            "-3 is not",
            1,
        ),
        (
            vec!["policy", "budget", "ten", "--all-tools"],
            "\"ten\" is not",
            1,
        ),
        (
            vec!["policy", "budget", "2", "--tool", "echo", "--all-tools"],
            "cannot be used with",
            2,
        ),
        (
            vec!["policy", "budget", "2"],
            "the following required arguments were not provided",
            2,
        ),
        (
            vec!["policy", "budget", "--tool", "echo"],
            "the following required arguments were not provided",
            2,
        ),
        (
            vec!["policy", "budget", "remove"],
            "the following required arguments were not provided",
            2,
        ),
        (
            vec!["policy", "budget", "2", "--tool", "bad\nname"],
            "tool",
            1,
        ),
    ] {
        let err = env.fails(&args, code);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let err = env.fails(&["policy", "budget", "0", "--tool", "echo"], 1);
    assert!(
        err.contains("help: give a whole number of calls from 1 to 1000000"),
        "{err}"
    );
    env.ok(&["daemon", "start"]);
    let list = env.ok(&["policy", "list"]);
    assert!(!list.contains("budget-"), "{list}");
    assert!(
        !journal_rows(&env.db())
            .iter()
            .any(|e| e["kind"] == "budget.change")
    );
}

/// The `_meta` a 2026-07-28 client puts in every request.
#[test]
fn a_2026_07_28_retry_with_input_responses_is_the_same_call_and_is_not_charged_twice() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "1", "--tool", "confirm"]);
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    r.send(
        format!(r#"{{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{{{META}}}}}"#)
            .as_bytes(),
    );
    r.recv_json();
    let first = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"confirm","arguments":{{}},{META}}}}}"#
    );
    r.send(first.as_bytes());
    let a = r.recv_json();
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    let state = a["result"]["requestState"].clone();
    let retry = |id: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"confirm","arguments":{{}},"inputResponses":{{"sure":{{"action":"accept","content":{{"sure":true}}}}}},"requestState":{state},{META}}}}}"#
        )
    };
    r.send(retry(2).as_bytes());
    let a = r.recv_json();
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    assert_eq!(a["result"]["content"][0]["text"], "Confirmed: accept");
    // The state is used up: sending the same retry again is a new call, and the budget is spent.
    r.send(retry(3).as_bytes());
    let a = r.recv_json();
    assert_eq!(text_of(&a), OVER_BUDGET, "{a}");
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    r.finish();

    let d = decisions(&env);
    assert_eq!(d.len(), 3);
    assert_eq!(d[0].1, "allow");
    assert_eq!(d[1].1, "allow");
    assert!(
        d[1].3.ends_with("retry of call 1, not charged again"),
        "{:?}",
        d[1]
    );
    assert_eq!(d[2].1, "over-budget");
    assert_eq!(
        d[2].3,
        "budget budget-1: 1 of 1 calls of tool confirm used in this session"
    );
}

#[test]
fn a_retry_with_other_arguments_is_charged_as_a_new_call() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "1", "--tool", "confirm"]);
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    r.send(
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"confirm","arguments":{{}},{META}}}}}"#
        )
        .as_bytes(),
    );
    let a = r.recv_json();
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    let state = a["result"]["requestState"].clone();
    r.send(
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"confirm","arguments":{{"x":1}},"inputResponses":{{"sure":{{"action":"accept","content":{{"sure":true}}}}}},"requestState":{state},{META}}}}}"#
        )
        .as_bytes(),
    );
    let a = r.recv_json();
    assert_eq!(text_of(&a), OVER_BUDGET, "{a}");
    r.finish();
    assert_eq!(decisions(&env)[1].1, "over-budget");
}

#[test]
fn a_tools_call_that_creates_a_task_is_charged_once() {
    let env = Env::fast();
    env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    let mut r = env.relay_fixture("raw", "fixture_raw");
    r.send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}},"clientInfo":{"name":"t","version":"1"}}}"#);
    r.recv_json();
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    r.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"later"},"task":{"ttl":60000}}}"#);
    let a = r.recv_json();
    assert_eq!(a["result"]["task"]["taskId"], "task-1", "{a}");
    // Polling and fetching the task's result are not calls, and cost nothing.
    for (id, method) in [(2, "tasks/get"), (3, "tasks/get"), (4, "tasks/result")] {
        r.send(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"taskId":"task-1"}}}}"#
            )
            .as_bytes(),
        );
        let a = r.recv_json();
        assert!(a.get("result").is_some(), "{a}");
    }
    // A second call of echo (task or not) is over the budget of one.
    r.send(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"},"task":{"ttl":60000}}}"#);
    let a = r.recv_json();
    assert_eq!(text_of(&a), OVER_BUDGET, "{a}");
    r.finish();
    let d = decisions(&env);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].1, "allow");
    assert_eq!(d[1].1, "over-budget");
}

#[test]
fn context_session_is_usable_from_a_hand_written_imported_policy() {
    let env = Env::fast();
    let path = env.dir.path().join("twice.cedar");
    std::fs::write(
        &path,
        r#"@id("echo-twice-per-session")
forbid (principal, action, resource in ToolName::"echo")
when { context.session.tool_calls >= 2 };

@id("after-three-refusals")
forbid (principal, action, resource in ToolName::"add")
when { context.session.refused >= 3 && context.session.calls > context.session.allowed };
"#,
    )
    .unwrap();
    let out = env.ok(&["policy", "import", path.to_str().unwrap()]);
    assert!(out.contains("imported"), "{out}");
    let answers = session(&env, &[ECHO, ADD, ECHO, ECHO, ECHO, ADD]);
    assert!(answers[..3].iter().all(|a| !is_refusal(a)));
    assert_eq!(text_of(&answers[3]), DENIED);
    assert_eq!(
        text_of(&answers[4]),
        DENIED,
        "refusals do not raise tool_calls"
    );
    assert!(
        !is_refusal(&answers[5]),
        "two refusals are fewer than three"
    );
    let d = decisions(&env);
    assert_eq!(d[3].2, "echo-twice-per-session");
    // A new session starts at 0.
    assert!(!is_refusal(&session(&env, &[ECHO])[0]));
    // explain decides with a session of zeros.
    let explain = env.ok(&["policy", "explain", "echo"]);
    assert!(explain.contains("ALLOW"), "{explain}");
}

#[test]
fn a_budget_set_while_a_session_runs_counts_what_it_already_allowed_and_failed_calls_count() {
    let env = Env::fast();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert!(!is_refusal(&r.recv_json()));
    // The demo server answers an unknown tool with an error: the call was allowed all the same.
    r.send(&call("2", "nosuch", "{}"));
    let a = r.recv_json();
    assert!(
        a.get("error").is_some() || a["result"]["isError"] == true,
        "{a}"
    );
    assert!(!is_refusal(&a), "{a}");
    env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    env.ok(&["policy", "budget", "1", "--tool", "nosuch"]);
    r.send(&call("3", "echo", r#"{"text":"b"}"#));
    assert_eq!(text_of(&r.recv_json()), OVER_BUDGET);
    r.send(&call("4", "nosuch", "{}"));
    assert_eq!(text_of(&r.recv_json()), OVER_BUDGET);
    r.finish();
}
