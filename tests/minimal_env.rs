//! A relay started by an MCP client with the SDKs' minimal environment (only HOME, LOGNAME,
//! PATH, SHELL, TERM and USER) reaches the same home and the same daemon as the user's shell,
//! whatever the shell sets (XDG_RUNTIME_DIR, XDG_DATA_HOME, HOLDCALL_HOME): issue 12, item 1.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shell's data directory (XDG_DATA_HOME) in these tests.
fn data_dir(env: &Env) -> PathBuf {
    let d = env.dir.path().join("data");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A command of the user's shell: HOLDCALL_HOME, XDG_RUNTIME_DIR and XDG_DATA_HOME all set.
fn shell(env: &Env, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    c.env("XDG_DATA_HOME", data_dir(env));
    c
}

fn shell_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The environment the MCP SDKs give a stdio server (`getDefaultEnvironment`), and nothing
/// else: no HOLDCALL_HOME, no XDG_*.
fn sdk_default_env(c: &mut Command, env: &Env) {
    c.env_clear()
        .env("HOME", env.user_home())
        .env("LOGNAME", "tester")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SHELL", "/bin/sh")
        .env("TERM", "dumb")
        .env("USER", "tester");
}

/// `holdcall --home HOME serve …` in front of the demo server, as `init` writes the entry.
fn routed_args(home: &Path, record: &Path) -> Vec<String> {
    let bin = Env::bin();
    vec![
        "--home".into(),
        home.to_str().unwrap().into(),
        "serve".into(),
        "--connector".into(),
        "demo".into(),
        "--client".into(),
        "test".into(),
        "--".into(),
        bin.to_str().unwrap().into(),
        "demo-server".into(),
        "--record".into(),
        record.to_str().unwrap().into(),
    ]
}

/// A relay started with exactly the SDK's default environment.
fn sdk_relay(env: &Env) -> Relay {
    let record = env.new_record("sdk");
    let mut c = Command::new(Env::bin());
    c.args(routed_args(&env.home(), &record));
    sdk_default_env(&mut c, env);
    spawn_relay(c, record)
}

/// A relay started as `env -i HOME=… PATH=… holdcall --home … serve …`.
fn env_i_relay(env: &Env) -> Relay {
    let record = env.new_record("env-i");
    let mut c = Command::new("env");
    c.arg("-i")
        .arg(format!("HOME={}", env.user_home().display()))
        .arg(format!(
            "PATH={}",
            std::env::var("PATH").unwrap_or_default()
        ))
        .arg(Env::bin())
        .args(routed_args(&env.home(), &record));
    spawn_relay(c, record)
}

fn assert_denied_by_policy(a: &serde_json::Value) {
    assert!(is_refusal(a), "{a}");
    let text = a["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("a policy rule denies it"), "{text}");
}

fn assert_forwarded(r: &Relay, needle: &str) {
    assert!(
        r.server_got(needle.as_bytes()),
        "the server never got {needle}"
    );
}

fn assert_not_forwarded(r: &Relay, needle: &str) {
    assert!(!r.server_got(needle.as_bytes()), "the server got {needle}");
}

/// The relay's daemon is the shell's: the shell's `status` sees it running, and a deny added
/// from the shell after the relay's first call applies to its next one.
fn deny_from_the_shell_applies(env: &Env, mut r: Relay) {
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"before"}"#));
    let a = r.recv_json();
    assert!(!is_refusal(&a), "{a}");
    // The daemon the relay started is the one the shell sees.
    let status = shell_ok(shell(env, &["daemon", "status"]));
    assert!(status.contains("running"), "{status}");
    shell_ok(shell(env, &["policy", "deny", "delete_file"]));
    r.send(&call("2", "delete_file", r#"{"path":"/x"}"#));
    assert_denied_by_policy(&r.recv_json());
    r.barrier(1);
    assert_not_forwarded(&r, "delete_file");
    r.finish();
}

#[test]
fn a_relay_started_with_a_clients_minimal_environment_obeys_the_shells_deny() {
    let env = Env::new();
    let r = sdk_relay(&env);
    deny_from_the_shell_applies(&env, r);
}

#[test]
fn a_relay_started_under_env_i_obeys_the_shells_deny() {
    let env = Env::new();
    let r = env_i_relay(&env);
    deny_from_the_shell_applies(&env, r);
}

#[test]
fn a_call_held_by_an_ask_from_the_shell_is_seen_and_released_by_the_shells_approve() {
    let env = Env::new();
    let mut r = sdk_relay(&env);
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"before"}"#));
    assert!(!is_refusal(&r.recv_json()));
    shell_ok(shell(&env, &["policy", "ask", "delete_file"]));
    r.send(&call("2", "delete_file", r#"{"path":"/held"}"#));
    // The shell's `approve` lists the call the relay's daemon holds.
    let mut id = String::new();
    eventually("the held call shows up in the shell's approve", || {
        let held = shell_ok(shell(&env, &["approve", "--json"]));
        let Some(line) = held.lines().next() else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["tool"], "delete_file", "{v}");
        id = v["id"].as_str().unwrap().to_string();
        true
    });
    assert_not_forwarded(&r, "/held");
    shell_ok(shell(&env, &["approve", &id]));
    let a = r.recv_json();
    assert_eq!(a["id"], 2, "{a}");
    assert!(!is_refusal(&a), "{a}");
    assert_forwarded(&r, "/held");
    r.finish();
}

/// Stops the daemon of a home other than the Env's own at the end of a test, passing or not.
struct StopDaemon(PathBuf);

impl Drop for StopDaemon {
    fn drop(&mut self) {
        let _ = Command::new(Env::bin())
            .arg("--home")
            .arg(&self.0)
            .args(["daemon", "stop"])
            .output();
    }
}

#[test]
fn a_shell_relying_on_xdg_data_home_alone_and_the_entry_init_wrote_share_one_home() {
    let env = Env::new();
    let data = data_dir(&env);
    let home = data.join("holdcall");
    let _stop = StopDaemon(home.clone());
    let record = env.new_record("init");
    // A Claude Code user file with one plain stdio server.
    let claude = env.user_home().join(".claude.json");
    let entry = serde_json::json!({"mcpServers": {"demo": {
        "command": Env::bin().to_str().unwrap(),
        "args": ["demo-server", "--record", record.to_str().unwrap()],
    }}});
    std::fs::write(&claude, entry.to_string()).unwrap();
    // The shell: XDG_DATA_HOME, no HOLDCALL_HOME.
    let sh = |args: &[&str]| {
        let mut c = shell(&env, args);
        c.env_remove("HOLDCALL_HOME");
        c
    };
    shell_ok(sh(&["init", "--write"]));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    let demo = &written["mcpServers"]["demo"];
    let args: Vec<String> = demo["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        args[..2],
        ["--home".to_string(), home.display().to_string()]
    );
    // Started exactly as the entry says, with the SDK's default environment.
    let mut c = Command::new(demo["command"].as_str().unwrap());
    c.args(&args);
    sdk_default_env(&mut c, &env);
    let mut r = spawn_relay(c, record);
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"before"}"#));
    assert!(!is_refusal(&r.recv_json()));
    let status = shell_ok(sh(&["status", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["home"], home.display().to_string(), "{v}");
    shell_ok(sh(&["policy", "deny", "delete_file"]));
    r.send(&call("2", "delete_file", r#"{"path":"/x"}"#));
    assert_denied_by_policy(&r.recv_json());
    r.barrier(1);
    assert_not_forwarded(&r, "delete_file");
    r.finish();
    // The journal of the shell's home holds the relay's session.
    let rows = journal_rows(&home.join("holdcall.db"));
    assert!(
        rows.iter().any(|r| r["kind"] == "session.start"),
        "{rows:?}"
    );
    assert!(!env.db().exists(), "a second home was used");
}

#[test]
fn doctor_fails_a_routed_entry_whose_relay_would_reach_another_home_until_init_writes_home() {
    let env = Env::new();
    let claude = env.user_home().join(".claude.json");
    let bin = Env::bin();
    let bin = bin.to_str().unwrap();
    // Routed before init wrote --home: a minimal environment has no HOLDCALL_HOME, so its
    // relay would use ~/.local/share/holdcall, not this shell's home. The second entry sets
    // HOLDCALL_HOME in its own env block, which a client does pass: it lands here.
    let here = env.home().display().to_string();
    let text = serde_json::json!({"mcpServers": {
        "old": {"command": bin, "args": ["serve", "--connector", "old", "--", "x"]},
        "pinned": {"command": bin, "args": ["serve", "--connector", "pinned", "--", "x"],
                   "env": {"HOLDCALL_HOME": here}},
    }});
    std::fs::write(&claude, text.to_string()).unwrap();
    let out = env.run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("[FAIL]") && l.contains("another home"))
        .unwrap_or_else(|| panic!("no FAIL line for the entry:\n{stdout}"));
    assert!(line.contains(&claude.display().to_string()), "{line}");
    assert!(line.contains("old would use"), "{line}");
    assert!(
        line.contains(
            &env.user_home()
                .join(".local/share/holdcall")
                .display()
                .to_string()
        ),
        "{line}"
    );
    assert!(!line.contains("pinned"), "{line}");
    assert!(stdout.contains("holdcall init --write"), "{stdout}");
    env.ok(&["init", "--write"]);
    let out = env.run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("another home"), "{stdout}");
}
