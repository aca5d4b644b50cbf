//! `holdcall serve -- CMD…` without `--connector` runs, under a connector name derived from the
//! command, and says so in the session's journal entry and in `inventory` (issue 12, item 9);
//! `--connector` still wins.

use crate::common::*;
use std::path::PathBuf;

/// The demo server under a name of its own: a symlink `server-notes` to the holdcall binary,
/// which runs `demo-server` whatever it is called.
fn named_server(env: &Env) -> PathBuf {
    let dir = env.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("server-notes");
    std::os::unix::fs::symlink(Env::bin(), &link).unwrap();
    link
}

fn relay_without_connector(env: &Env, extra: &[&str]) -> Relay {
    let server = named_server(env);
    let record = env.new_record("derived");
    let mut args = vec!["serve"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--",
        server.to_str().unwrap(),
        "demo-server",
        "--record",
        record.to_str().unwrap(),
    ]);
    spawn_relay(env.cmd(&args), record)
}

fn session_start(env: &Env) -> serde_json::Value {
    journal_rows(&env.db())
        .into_iter()
        .find(|r| r["kind"] == "session.start")
        .expect("a session.start entry")
}

#[test]
fn serve_without_connector_runs_under_a_name_derived_from_the_command_and_journals_it() {
    let env = Env::new();
    env.ok(&[
        "policy",
        "deny",
        "delete_file",
        "--connector",
        "server-notes",
    ]);
    let mut r = relay_without_connector(&env, &[]);
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"hi"}"#));
    let a = r.recv_json();
    assert!(!is_refusal(&a), "{a}");
    // A rule for the derived name applies.
    r.send(&call("2", "delete_file", r#"{"path":"/x"}"#));
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    let stderr = r.finish();
    assert!(
        stderr.contains("using connector server-notes, derived from the command server-notes"),
        "{stderr}"
    );
    let start = session_start(&env);
    assert_eq!(start["connector"], "server-notes", "{start}");
    let reason = start["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("no --connector was given")
            && reason.contains("derived from the command server-notes"),
        "{start}"
    );
}

#[test]
fn connector_still_wins_over_the_derived_name() {
    let env = Env::new();
    let mut r = relay_without_connector(&env, &["--connector", "mine"]);
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"hi"}"#));
    assert!(!is_refusal(&r.recv_json()));
    r.finish();
    let start = session_start(&env);
    assert_eq!(start["connector"], "mine", "{start}");
    assert!(start["reason"].is_null(), "{start}");
}

#[test]
fn serve_without_connector_or_command_is_refused_with_help() {
    let env = Env::new();
    let err = env.fails(&["serve"], 1);
    assert!(err.contains("no server command"), "{err}");
}

#[test]
fn inventory_shows_the_connector_a_routed_entry_without_connector_derives_and_from_what() {
    let env = Env::new();
    let bin = Env::bin();
    let text = serde_json::json!({"mcpServers": {"foo": {
        "command": bin.to_str().unwrap(),
        "args": ["serve", "--", "npx", "-y", "@scope/server-foo@1.2"],
    }}});
    std::fs::write(env.user_home().join(".claude.json"), text.to_string()).unwrap();
    let inv: serde_json::Value = serde_json::from_str(&env.ok(&["inventory", "--json"])).unwrap();
    let row = &inv["servers"][0];
    assert_eq!(row["routed"], true, "{row}");
    assert_eq!(row["connector"], "server-foo", "{row}");
    assert_eq!(
        row["connector_derived_from"], "the npm package @scope/server-foo@1.2",
        "{row}"
    );
    let table = env.ok(&["inventory"]);
    assert!(
        table.contains(
            "connector server-foo (no --connector: derived from the npm package @scope/server-foo@1.2)"
        ),
        "{table}"
    );
}
