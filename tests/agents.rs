//! Agents through the real binary: enrolment (`holdcall agent add|list|remove`), the agent the
//! daemon derives from a relay's parent process, and rules that name agents.
//!
//! A test plays an MCP client program with a copy of `timeout` (it runs its arguments as a child
//! and waits, passing stdio through): each copy is its own file, so two copies are two programs.

use crate::common::*;
use std::path::{Path, PathBuf};

/// A fresh copy of `timeout` at `<env>/name`: a client program of its own.
fn program(env: &Env, name: &str) -> PathBuf {
    let p = env.dir.path().join(name);
    crate::common::copy_executable("/usr/bin/timeout", &p);
    p
}

fn add(env: &Env, name: &str, path: &Path) -> String {
    env.ok(&["agent", "add", name, path.to_str().unwrap()])
}

/// The decision the relay's client sees for one `echo` call: true when it was allowed.
fn echo_allowed(r: &mut Relay, id: u32) -> bool {
    r.send(&call(&id.to_string(), "echo", r#"{"text":"hi"}"#));
    !is_refusal(&r.recv_json())
}

fn kind<'a>(rows: &'a [serde_json::Value], k: &str) -> Vec<&'a serde_json::Value> {
    rows.iter().filter(|e| e["kind"] == k).collect()
}

fn listed(env: &Env) -> Vec<serde_json::Value> {
    serde_json::from_str(&env.ok(&["agent", "list", "--json"])).unwrap()
}

/// Agent `a` (the program `agent-a`) enrolled, and a policy under which only `a` may call `echo`.
fn only_a_may_echo() -> (Env, PathBuf) {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    env.ok(&["policy", "default", "deny"]);
    env.ok(&["policy", "allow", "echo", "--agent", "a"]);
    (env, a)
}

#[test]
fn two_enrolled_agents_calling_the_same_connector_get_different_decisions() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    let b = program(&env, "agent-b");
    add(&env, "a", &a);
    add(&env, "b", &b);
    env.ok(&["policy", "deny", "echo", "--agent", "a"]);

    let mut ra = env.relay_under(&a, "demo");
    ra.handshake();
    assert!(!echo_allowed(&mut ra, 1), "agent a is denied echo");
    let mut rb = env.relay_under(&b, "demo");
    rb.handshake();
    assert!(echo_allowed(&mut rb, 1), "agent b is not");
    ra.finish();
    rb.finish();

    let rows = journal_rows(&env.db());
    let mut starts: Vec<&str> = kind(&rows, "session.start")
        .iter()
        .map(|e| e["agent"].as_str().unwrap())
        .collect();
    starts.sort();
    assert_eq!(starts, ["a", "b"]);
    let calls: Vec<(String, String)> = kind(&rows, "call.request")
        .iter()
        .map(|e| {
            (
                e["agent"].as_str().unwrap().to_string(),
                e["decision"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(calls.contains(&("a".into(), "deny".into())), "{calls:?}");
    assert!(calls.contains(&("b".into(), "allow".into())), "{calls:?}");
    let log = env.ok(&["log"]);
    assert!(log.contains("agent a"), "{log}");
}

#[test]
fn the_allow_list_pattern_admits_the_enrolled_agent_and_refuses_an_unenrolled_session() {
    let (env, a) = only_a_may_echo();

    let mut ra = env.relay_under(&a, "demo");
    ra.handshake();
    assert!(echo_allowed(&mut ra, 1));
    ra.send(&call("2", "add", r#"{"a":1,"b":2}"#));
    assert!(is_refusal(&ra.recv_json()), "only echo is on a's list");
    ra.finish();

    // The test binary is the parent of this relay: enrolled as nothing.
    let mut ru = env.relay("demo");
    ru.handshake();
    assert!(!echo_allowed(&mut ru, 1));
    ru.finish();

    let rows = journal_rows(&env.db());
    let starts = kind(&rows, "session.start");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["agent"], "a");
    assert!(starts[1]["agent"].is_null(), "{}", starts[1]);
}

#[test]
fn an_unenrolled_session_is_bound_only_by_rules_naming_no_agent() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    let stranger = program(&env, "not-enrolled");
    add(&env, "a", &a);
    env.ok(&["policy", "deny", "echo", "--agent", "a"]);
    env.ok(&["policy", "deny", "add"]);
    for mut r in [env.relay("demo"), env.relay_under(&stranger, "demo")] {
        r.handshake();
        assert!(echo_allowed(&mut r, 1), "the agent-a rule is not for them");
        r.send(&call("2", "add", r#"{"a":1,"b":2}"#));
        assert!(
            is_refusal(&r.recv_json()),
            "the rule for every agent binds them"
        );
        r.finish();
    }
    let rows = journal_rows(&env.db());
    assert!(
        kind(&rows, "session.start")
            .iter()
            .all(|e| e["agent"].is_null())
    );
}

#[test]
fn a_file_changed_after_enrolment_is_stale_and_no_longer_matches() {
    let (env, a) = only_a_may_echo();
    assert_eq!(listed(&env)[0]["state"], "current");
    assert!(env.ok(&["agent", "list"]).contains("a  current"));

    // The same bytes, written again in place: same inode, new mtime and ctime.
    let bytes = std::fs::read(&a).unwrap();
    std::fs::write(&a, &bytes).unwrap();
    let l = listed(&env);
    assert_eq!(l[0]["state"], "stale", "{l:?}");
    let text = env.ok(&["agent", "list"]);
    assert!(text.contains("a  STALE"), "{text}");
    assert!(text.contains("changed"), "{text}");

    let mut r = env.relay_under(&a, "demo");
    r.handshake();
    assert!(
        !echo_allowed(&mut r, 1),
        "a stale enrolment matches nothing"
    );
    r.finish();

    // Enrolling it again makes it current and matched.
    let out = add(&env, "a", &a);
    assert!(out.contains("replaced the enrolment of agent a"), "{out}");
    assert_eq!(listed(&env)[0]["state"], "current");
    let mut r = env.relay_under(&a, "demo");
    r.handshake();
    assert!(echo_allowed(&mut r, 1));
    r.finish();

    // Touched (only its mtime set, as `touch -d` does): stale again.
    std::fs::File::options()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1))
        .unwrap();
    assert_eq!(listed(&env)[0]["state"], "stale");

    let rows = journal_rows(&env.db());
    let agents: Vec<&serde_json::Value> = kind(&rows, "session.start")
        .iter()
        .map(|e| &e["agent"])
        .collect();
    assert_eq!(agents, [&serde_json::Value::Null, &serde_json::json!("a")]);
}

#[test]
fn a_new_file_put_at_the_enrolled_path_is_stale_and_not_matched() {
    let (env, a) = only_a_may_echo();
    let before = listed(&env)[0]["ino"].as_u64().unwrap();
    // A new file moved over the enrolled path: another inode at the same path.
    let replacement = program(&env, "replacement");
    std::fs::rename(&replacement, &a).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(std::fs::metadata(&a).unwrap().ino(), before);
    let l = listed(&env);
    assert_eq!(l[0]["state"], "stale");
    assert!(
        l[0]["stale_because"]
            .as_str()
            .unwrap()
            .contains("another file"),
        "{l:?}"
    );
    let mut r = env.relay_under(&a, "demo");
    r.handshake();
    assert!(!echo_allowed(&mut r, 1));
    r.finish();
    // A deleted enrolled file is stale too.
    std::fs::remove_file(&a).unwrap();
    let l = listed(&env);
    assert_eq!(l[0]["state"], "stale");
    assert!(
        l[0]["stale_because"]
            .as_str()
            .unwrap()
            .contains("cannot be read")
    );
}

#[test]
fn one_executable_has_one_name() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    let err = env.fails(&["agent", "add", "b", a.to_str().unwrap()], 1);
    assert!(err.contains("already enrolled as agent a"), "{err}");
    // A symlink is followed: the same file by another path is the same executable.
    let link = env.dir.path().join("link-to-a");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let err = env.fails(&["agent", "add", "b", link.to_str().unwrap()], 1);
    assert!(err.contains("already enrolled as agent a"), "{err}");
    // The same name for the same file again replaces (refreshes) it.
    add(&env, "a", &link);
    let l = listed(&env);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0]["path"], a.canonicalize().unwrap().to_str().unwrap());
    // Re-adding a name for another file replaces its enrolment.
    let other = program(&env, "other");
    let out = add(&env, "a", &other);
    assert!(out.contains("replaced the enrolment of agent a"), "{out}");
    let l = listed(&env);
    assert_eq!(l.len(), 1);
    assert!(l[0]["path"].as_str().unwrap().ends_with("/other"));
}

#[test]
fn enrolment_refuses_what_it_cannot_identify() {
    let env = Env::fast();
    let err = env.fails(&["agent", "add", "a", "/nonexistent/program"], 1);
    assert!(err.contains("cannot resolve"), "{err}");
    let err = env.fails(&["agent", "add", "a", env.dir.path().to_str().unwrap()], 1);
    assert!(err.contains("not a regular executable"), "{err}");
    let data = env.dir.path().join("data");
    std::fs::write(&data, b"not a program").unwrap();
    let err = env.fails(&["agent", "add", "a", data.to_str().unwrap()], 1);
    assert!(err.contains("not a regular executable"), "{err}");
    // A script never runs as itself: its interpreter would be the relay's parent, so the
    // enrolment could never match. Refused, naming the interpreter.
    let script = env.dir.path().join("claude");
    std::fs::write(&script, b"#!/usr/bin/env node\nrequire('./cli.js')\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let err = env.fails(&["agent", "add", "claude", script.to_str().unwrap()], 1);
    assert!(
        err.contains("is a script run by /usr/bin/env node"),
        "{err}"
    );
    let a = program(&env, "agent-a");
    let err = env.fails(&["agent", "add", "-bad", a.to_str().unwrap()], 2);
    assert!(err.contains("-bad") || err.contains("unexpected"), "{err}");
    let err = env.fails(&["agent", "add", "bad name", a.to_str().unwrap()], 1);
    assert!(err.contains("agent"), "{err}");
    assert!(listed(&env).is_empty());
    assert!(kind(&journal_rows(&env.db()), "agent.change").is_empty());
}

#[test]
fn a_rule_may_name_only_an_enrolled_agent() {
    let env = Env::fast();
    let err = env.fails(&["policy", "deny", "echo", "--agent", "ghost"], 1);
    assert!(
        err.contains("agent ghost is not enrolled; run `holdcall agent add ghost PATH` first"),
        "{err}"
    );
    let err = env.fails(&["policy", "default", "allow", "--agent", "ghost"], 1);
    assert!(err.contains("not enrolled"), "{err}");

    let in_scope = env.dir.path().join("scope.cedar");
    std::fs::write(
        &in_scope,
        "@id(\"fine\")\nforbid (principal, action, resource in ToolName::\"add\");\n\n\
         @id(\"for-ghost\")\npermit (principal == Agent::\"ghost\", action, resource);\n",
    )
    .unwrap();
    for verb in ["import", "diff"] {
        let err = env.fails(&["policy", verb, in_scope.to_str().unwrap()], 1);
        assert!(err.contains("scope.cedar:4:1: policy for-ghost"), "{err}");
        assert!(err.contains("agent ghost is not enrolled"), "{err}");
    }
    let in_condition = env.dir.path().join("cond.cedar");
    std::fs::write(
        &in_condition,
        "@id(\"sneaky\")\nforbid (principal, action, resource)\n\
         when { principal == Agent::\"ghost\" };\n",
    )
    .unwrap();
    let err = env.fails(&["policy", "import", in_condition.to_str().unwrap()], 1);
    assert!(err.contains("policy sneaky"), "{err}");
    assert!(err.contains("agent ghost is not enrolled"), "{err}");
    assert!(kind(&journal_rows(&env.db()), "policy.change").is_empty());

    // Once enrolled, the same file imports.
    let ghost = program(&env, "ghost");
    add(&env, "ghost", &ghost);
    env.ok(&["policy", "import", in_scope.to_str().unwrap()]);
    env.ok(&["policy", "deny", "echo", "--agent", "ghost"]);
}

#[test]
fn the_unenrolled_principal_may_be_named_in_a_condition_to_refuse_unenrolled_sessions() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    let file = env.dir.path().join("unenrolled.cedar");
    std::fs::write(
        &file,
        "@id(\"no-strangers\")\nforbid (principal, action, resource)\n\
         when { principal == Agent::\"\" };\n",
    )
    .unwrap();
    env.ok(&["policy", "import", file.to_str().unwrap()]);
    let mut ru = env.relay("demo");
    ru.handshake();
    assert!(!echo_allowed(&mut ru, 1));
    ru.finish();
    let mut ra = env.relay_under(&a, "demo");
    ra.handshake();
    assert!(echo_allowed(&mut ra, 1));
    ra.finish();
}

#[test]
fn an_agent_that_rules_name_cannot_be_removed_and_an_unknown_name_is_an_error() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    env.ok(&["policy", "deny", "echo", "--agent", "a"]);
    let file = env.dir.path().join("a.cedar");
    std::fs::write(
        &file,
        "@id(\"a-no-add\")\nforbid (principal, action, resource in ToolName::\"add\")\n\
         when { principal == Agent::\"a\" };\n",
    )
    .unwrap();
    env.ok(&["policy", "import", file.to_str().unwrap()]);
    let err = env.fails(&["agent", "remove", "a"], 1);
    assert!(
        err.contains("agent a is named by rule-1, a-no-add"),
        "{err}"
    );
    assert!(err.contains("remove them first"), "{err}");
    assert_eq!(listed(&env).len(), 1);

    env.ok(&["policy", "remove", "echo", "--agent", "a"]);
    std::fs::write(&file, "").unwrap();
    env.ok(&["policy", "import", file.to_str().unwrap()]);
    env.ok(&["agent", "remove", "a"]);
    assert!(listed(&env).is_empty());

    let before = journal_rows(&env.db()).len();
    let err = env.fails(&["agent", "remove", "zz"], 1);
    assert!(err.contains("there is no agent named zz"), "{err}");
    assert_eq!(journal_rows(&env.db()).len(), before, "no entry");
}

#[test]
fn every_agent_change_is_journaled_with_the_file_identity_and_the_journal_verifies() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    let other = program(&env, "other");
    add(&env, "a", &a);
    add(&env, "a", &other);
    env.ok(&["agent", "remove", "a"]);
    let _ = env.fails(&["agent", "add", "b", "/nonexistent"], 1);

    let rows = journal_rows(&env.db());
    let changes = kind(&rows, "agent.change");
    assert_eq!(changes.len(), 3, "{changes:?}");
    let reasons: Vec<&str> = changes
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert!(reasons[0].starts_with("enrolled agent a:"), "{reasons:?}");
    assert!(reasons[1].starts_with("replaced the enrolment of agent a:"));
    assert!(reasons[2].starts_with("removed agent a:"));
    assert!(changes.iter().all(|e| e["agent"] == "a"));

    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    let detail: serde_json::Value =
        serde_json::from_str(changes[0]["detail"].as_str().unwrap()).unwrap();
    let m = std::fs::metadata(&a).unwrap();
    let sha = sha2::Sha256::digest(std::fs::read(&a).unwrap());
    let sha: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(detail["sha256"], sha);
    assert_eq!(detail["ino"], m.ino());
    assert_eq!(detail["dev"], m.dev());
    assert_eq!(detail["size"], m.size());
    assert_eq!(detail["path"], a.canonicalize().unwrap().to_str().unwrap());
    assert!(detail["ctime_ns"].is_i64() && detail["mtime_ns"].is_i64());
    let replaced: serde_json::Value =
        serde_json::from_str(changes[1]["detail"].as_str().unwrap()).unwrap();
    assert_eq!(replaced["replaced"]["sha256"], sha);

    let out = env.ok(&["verify"]);
    assert!(out.contains("journal OK"), "{out}");
}

#[test]
fn agent_list_json_shows_the_identity_and_the_enrolment_hash() {
    let env = Env::fast();
    assert!(env.ok(&["agent", "list"]).contains("no agents enrolled"));
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    let l = listed(&env);
    assert_eq!(l.len(), 1);
    let e = &l[0];
    for key in [
        "name",
        "path",
        "state",
        "dev",
        "ino",
        "size",
        "mtime_ns",
        "ctime_ns",
        "sha256",
        "enrolled_at",
    ] {
        assert!(!e[key].is_null(), "{key} missing: {e}");
    }
    assert_eq!(e["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn an_agent_named_by_the_relay_or_the_client_has_no_effect() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    env.ok(&["policy", "deny", "echo", "--agent", "a"]);
    // The client's own name, `_meta` claims and an argument all say "a"; the relay's parent
    // (this test) is not enrolled, so the session has no agent.
    let mut r = env.relay("demo");
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"},"_meta":{"agent":"a"}}}"#;
    r.send(init.as_bytes());
    assert_eq!(r.recv_json()["id"], 0);
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    r.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","agent":"a"},"_meta":{"agent":"a","principal":"Agent::\"a\""}}}"#);
    assert!(!is_refusal(&r.recv_json()));
    r.finish();
    let rows = journal_rows(&env.db());
    let start = kind(&rows, "session.start")[0];
    assert!(start["agent"].is_null(), "{start}");
}

#[test]
fn a_started_session_keeps_its_agent_when_enrolment_changes() {
    let (env, a) = only_a_may_echo();
    let mut r = env.relay_under(&a, "demo");
    r.handshake();
    assert!(echo_allowed(&mut r, 1));
    // The name now belongs to another file: the running session was bound at its start.
    let other = program(&env, "other");
    add(&env, "a", &other);
    assert!(echo_allowed(&mut r, 2));
    r.finish();
    let rows = journal_rows(&env.db());
    let calls = kind(&rows, "call.request");
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|e| e["agent"] == "a" && e["decision"] == "allow")
    );
}

#[test]
fn doctor_shows_each_enrolment_current_and_warns_once_the_file_changed() {
    let env = Env::fast();
    let a = program(&env, "agent-a");
    add(&env, "a", &a);
    let out = env.ok(&["doctor"]);
    assert!(out.contains("[OK  ] agent a: current"), "{out}");
    std::fs::write(&a, b"#!/bin/sh\nexit 0\n").unwrap();
    let out = env.run(&["doctor", "--json"]);
    // A stale enrolment is a warning, not a failure.
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warn = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "agent a")
        .unwrap();
    assert_eq!(warn["status"], "WARN", "{warn}");
    assert!(
        warn["message"].as_str().unwrap().contains("STALE"),
        "{warn}"
    );
    assert!(
        warn["remedy"].as_str().unwrap().contains("agent add"),
        "{warn}"
    );
    env.ok(&["daemon", "stop"]);
}
