//! Policy files through the real binary and daemon: import, export, validate, diff, history,
//! show --at, and argument conditions decided on calls relayed to the demo server.

use crate::common::*;

fn write(env: &Env, name: &str, text: &str) -> String {
    let path = env.home().join(name);
    std::fs::create_dir_all(env.home()).unwrap();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const PUSH: &str = r#"// Ask before anything pushes to main.
@id("ask-push-main")
@holdcall_effect("ask")
forbid (principal, action, resource in ToolName::"echo")
when { context has arguments.branch && context.arguments.branch == "main" };

@id("no-deletes")
forbid (principal, action, resource in ToolName::"delete_file");
"#;

/// Sends one call through a fresh relay and says whether it was refused.
fn refused(env: &Env, tool: &str, args: &str) -> bool {
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("7", tool, args));
    let v = answer_rejecting_held(env, &mut r);
    r.finish();
    is_refusal(&v)
}

#[test]
fn an_imported_file_decides_calls_by_their_arguments() {
    let env = Env::fast();
    let f = write(&env, "push.cedar", PUSH);
    let out = env.ok(&["policy", "import", &f]);
    assert!(out.contains("added ask-push-main, no-deletes"), "{out}");
    assert!(refused(&env, "echo", r#"{"branch":"main"}"#));
    assert!(!refused(&env, "echo", r#"{"branch":"dev"}"#));
    assert!(!refused(&env, "echo", r#"{"text":"hi"}"#));
    assert!(refused(&env, "delete_file", r#"{"path":"/tmp/x"}"#));
    let rows = journal_rows(&env.db());
    let change = rows.iter().find(|r| r["kind"] == "policy.change").unwrap();
    let reason = change["reason"].as_str().unwrap();
    assert!(reason.contains("push.cedar (sha256 "), "{reason}");
    assert!(
        change["detail"]
            .as_str()
            .unwrap()
            .contains("+@id(\"ask-push-main\")")
    );
}

#[test]
fn a_broken_file_is_refused_at_its_line_and_column_and_changes_nothing() {
    let env = Env::fast();
    env.ok(&["policy", "deny", "delete_file"]);
    let before = env.ok(&["policy", "export"]);
    let entries = journal_rows(&env.db()).len();
    let cases = [
        (
            "syntax.cedar",
            "@id(\"a\")\nforbid (principal, action, resource)\nwhen { context.hour >= };\n",
            "syntax.cedar:3:",
        ),
        (
            "types.cedar",
            "@id(\"a\")\nforbid (principal, action, resource)\nwhen { context.hour == \"x\" };\n",
            "types.cedar:3:",
        ),
        (
            "unguarded.cedar",
            "@id(\"ok\")\npermit (principal, action, resource);\n\n@id(\"a\")\nforbid (principal, action, resource)\nwhen { context.arguments.path like \"*/.ssh/*\" };\n",
            "unguarded.cedar:4:1",
        ),
        (
            "dup.cedar",
            "@id(\"a\")\npermit (principal, action, resource);\n@id(\"a\")\npermit (principal, action, resource);\n",
            "dup.cedar:3:1",
        ),
        (
            "template.cedar",
            "@id(\"a\")\npermit (principal == ?principal, action, resource);\n",
            "template.cedar:",
        ),
    ];
    for (name, text, at) in cases {
        let f = write(&env, name, text);
        for cmd in ["import", "validate", "diff"] {
            let err = env.fails(&["policy", cmd, &f], 1);
            assert!(err.contains(at), "{cmd} {name}: {err}");
            assert!(err.contains("help"), "{cmd} {name}: {err}");
        }
    }
    assert_eq!(env.ok(&["policy", "export"]), before);
    assert_eq!(journal_rows(&env.db()).len(), entries);
}

#[test]
fn export_then_import_changes_nothing_and_show_at_rebuilds_every_past_set() {
    let env = Env::fast();
    let mut in_force: Vec<(i64, String)> = Vec::new();
    let mut record = |env: &Env| {
        let head = journal_rows(&env.db())
            .iter()
            .filter(|r| r["kind"] == "policy.change")
            .map(|r| r["chain_seq"].as_i64().unwrap())
            .max()
            .unwrap();
        in_force.push((head, env.ok(&["policy", "export"])));
    };
    env.ok(&["policy", "deny", "delete_file"]);
    record(&env);
    let f = write(&env, "push.cedar", PUSH);
    env.ok(&["policy", "import", &f]);
    record(&env);
    env.ok(&["policy", "ask", "add", "--connector", "demo"]);
    record(&env);
    // Re-importing a changed file replaces what it contributed last time.
    let g = write(&env, "push.cedar", &PUSH.replace("\"main\"", "\"release\"").replace("@id(\"no-deletes\")\nforbid (principal, action, resource in ToolName::\"delete_file\");\n", ""));
    let out = env.ok(&["policy", "import", &g]);
    assert!(
        out.contains("changed ask-push-main; removed no-deletes"),
        "{out}"
    );
    record(&env);

    let exported = write(&env, "all.cedar", &env.ok(&["policy", "export"]));
    let entries = journal_rows(&env.db()).len();
    let out = env.ok(&["policy", "import", &exported]);
    assert!(out.contains("nothing to change"), "{out}");
    assert_eq!(journal_rows(&env.db()).len(), entries);
    assert_eq!(
        env.ok(&["policy", "export"]),
        std::fs::read_to_string(&exported).unwrap()
    );

    for (at, text) in &in_force {
        assert_eq!(
            &env.ok(&["policy", "show", "--at", &at.to_string()]),
            text,
            "entry {at}"
        );
    }
    let history = env.ok(&["policy", "history"]);
    assert!(history.contains("imported push.cedar"), "{history}");
}

#[test]
fn a_forbid_whose_condition_errors_on_a_crafted_call_refuses_it() {
    let env = Env::fast();
    // Guarded, so it imports; but `like` on a number errors when a call sends one.
    let f = write(
        &env,
        "ssh.cedar",
        "@id(\"no-ssh\")\nforbid (principal, action, resource)\nwhen { context has arguments.path && context.arguments.path like \"*/.ssh/*\" };\n",
    );
    env.ok(&["policy", "import", &f]);
    assert!(!refused(&env, "echo", r#"{"path":"/tmp/a"}"#));
    assert!(refused(&env, "echo", r#"{"path":"/home/u/.ssh/id"}"#));
    assert!(refused(&env, "echo", r#"{"path":42}"#));
    let rows = journal_rows(&env.db());
    let last = rows
        .iter()
        .rev()
        .find(|r| r["kind"] == "call.request")
        .unwrap();
    assert_eq!(last["decision"], "deny");
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .contains("could not be evaluated"),
        "{last}"
    );
    let explain = env.ok(&[
        "policy",
        "explain",
        "echo",
        "--connector",
        "demo",
        "--arguments",
        r#"{"path":42}"#,
    ]);
    assert!(
        explain.contains("no-ssh  deny  specificity 0: errored"),
        "{explain}"
    );
}

#[test]
fn entity_and_extension_escapes_in_arguments_are_plain_data() {
    let env = Env::fast();
    // If `__entity` were honoured, `arguments.who` would be the entity Agent::"admin".
    let f = write(
        &env,
        "esc.cedar",
        "@id(\"plain\")\nforbid (principal, action, resource)\nwhen { context has arguments.who.__entity.id && context.arguments.who.__entity.id == \"admin\" };\n",
    );
    env.ok(&["policy", "import", &f]);
    assert!(refused(
        &env,
        "echo",
        r#"{"who":{"__entity":{"type":"Agent","id":"admin"}}}"#
    ));
    assert!(!refused(
        &env,
        "echo",
        r#"{"who":{"__extn":{"fn":"ip","arg":"10.0.0.1"}}}"#
    ));
    let explain = env.ok(&[
        "policy",
        "explain",
        "echo",
        "--arguments",
        r#"{"who":{"__extn":{"fn":"ip","arg":"10.0.0.1"}}}"#,
    ]);
    assert!(
        explain.contains("plain  deny  specificity 0: not matched"),
        "{explain}"
    );
}

#[test]
fn arguments_beyond_the_caps_are_refused_when_a_rule_reads_them() {
    let env = Env::fast();
    let deep = format!("{}1{}", "{\"a\":".repeat(40), "}".repeat(40));
    assert!(!refused(&env, "echo", &deep));
    let f = write(&env, "push.cedar", PUSH);
    env.ok(&["policy", "import", &f]);
    assert!(refused(&env, "echo", &deep));
    // A tool no argument rule could apply to is decided normally.
    assert!(!refused(&env, "add", &deep));
}

#[test]
fn hostile_arguments_are_read_whole_or_refused_never_half_blind() {
    let env = Env::fast();
    let f = write(
        &env,
        "hostile.cedar",
        "@id(\"big-n\")\nforbid (principal, action, resource in ToolName::\"echo\")\nwhen { context has arguments.n && context.arguments.n like \"*999*\" };\n",
    );
    env.ok(&["policy", "import", &f]);
    // Numbers Cedar cannot hold arrive as their exact JSON text, never rounded or dropped.
    assert!(refused(&env, "echo", r#"{"n":1e999999}"#));
    let huge = format!("{{\"n\":{}}}", "9".repeat(400));
    assert!(refused(&env, "echo", &huge));
    assert!(refused(&env, "echo", r#"{"n":0.99999}"#));
    // A repeated key (a server may take either value) is refused, at the top level and deep
    // inside: the relay's frame reader refuses it before the daemon's arguments reader sees it,
    // and the arguments reader refuses it too (`context` unit test `caps_refuse_the_whole_tree`).
    assert!(refused(&env, "echo", r#"{"m":"dev","m":"main"}"#));
    assert!(refused(&env, "echo", r#"{"a":{"b":[{"c":1,"c":2}]}}"#));
    // Nesting one level past the cap is refused whole; at the cap it is read.
    let nest = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    assert!(refused(&env, "echo", &nest(33)));
    assert!(!refused(&env, "echo", &nest(32)));
    // A tool no argument rule could apply to is decided normally.
    assert!(!refused(&env, "add", &nest(33)));
    let rows = journal_rows(&env.db());
    let reasons: Vec<&str> = rows
        .iter()
        .filter(|r| r["kind"] == "call.request" && r["decision"] == "deny")
        .filter_map(|r| r["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("nest deeper than 32 levels")),
        "{reasons:?}"
    );
}
