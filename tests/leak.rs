//! The injected secret never leaves through a result (issue 17): a credentialed server that
//! sends its own secret back, plain or encoded, has that answer replaced by an error and its
//! notifications dropped; the journal says `secret.leak` and never holds the secret; a call
//! carrying one connector's secret to another connector is refused. Real Secret Service, real
//! server-everything, and the raw fixture's `leak` tool for the encodings.

use crate::common::*;
use crate::connectors::{answer_to, canary, contains, relay, set, setup, text};
use std::path::{Path, PathBuf};

fn everything() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/rig/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run tools/rig/setup first (tools/test does, before cargo test)",
        p.display()
    );
    p
}

fn leaks(env: &Env) -> Vec<serde_json::Value> {
    journal_rows(&env.db())
        .into_iter()
        .filter(|r| r["kind"] == "secret.leak")
        .collect()
}

fn detail(row: &serde_json::Value) -> serde_json::Value {
    serde_json::from_str(row["detail"].as_str().unwrap()).unwrap()
}

/// Every byte of the journal's files (database, write-ahead log) and the daemon's log.
fn home_bytes(env: &Env) -> Vec<(String, Vec<u8>)> {
    ["holdcall.db", "holdcall.db-wal", "daemon.log"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(env.home().join(f)).unwrap_or_default(),
            )
        })
        .collect()
}

/// Registers connector `name` as the raw fixture, recording into `record`, with `secret` in
/// `FX_TOKEN`.
fn register_fixture(env: &Env, name: &str, secret: &str) -> (PathBuf, String) {
    let record = env.new_record(name);
    let program = fixture("fixture_raw");
    let out = set(
        env,
        name,
        "FX_TOKEN",
        &[],
        &[
            program.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ],
        secret,
    );
    assert!(out.status.success(), "{}", text(&out));
    (record, text(&out))
}

fn leak_call(id: u32, how: &str, prefix: &str) -> Vec<u8> {
    call(
        &id.to_string(),
        "leak",
        &format!(r#"{{"env":"FX_TOKEN","as":"{how}","prefix":"{prefix}"}}"#),
    )
}

/// The acceptance test: server-everything's `get-env` returns the whole environment, canary
/// included; the client gets an error for that id and never the canary, and the journal says
/// `secret.leak` without it.
#[test]
fn server_everythings_get_env_canary_never_reaches_the_client_and_is_journaled_without_it() {
    let everything = everything();
    let (env, _ss) = setup();
    let secret = canary();
    let out = set(
        &env,
        "everything",
        "HC_CANARY",
        &[],
        &["node", everything.to_str().unwrap(), "stdio"],
        &secret,
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut r = relay(&env, "everything", &[], &[], env.dir.path().join("unused"));
    r.handshake();
    let mut to_client = Vec::new();
    r.send(&call("7", "get-env", "{}"));
    let v = answer_to(&mut r, "7", &mut to_client);
    assert_eq!(v["id"], 7, "{v}");
    assert_eq!(v["error"]["code"], -32003, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("withheld") && message.contains("everything"),
        "{message}"
    );
    // The same server still answers what does not carry it.
    r.send(&call("8", "echo", r#"{"message":"still here"}"#));
    let echo = answer_to(&mut r, "8", &mut to_client);
    assert!(echo.to_string().contains("still here"), "{echo}");
    to_client.extend(r.barrier(1));
    to_client.push(v.to_string());
    for line in &to_client {
        assert!(
            !line.contains(&secret),
            "a line to the client carries the canary"
        );
    }
    let stderr = r.finish();
    assert!(!stderr.contains(&secret));
    assert!(stderr.contains("withheld"), "{stderr}");

    let rows = leaks(&env);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["connector"], "everything");
    assert_eq!(rows[0]["seq"], 1);
    let d = detail(&rows[0]);
    assert_eq!(d["direction"], "result");
    assert_eq!(d["withheld"], "answer");
    assert_eq!(d["encoding"], "plain");
    // The call's outcome is recorded as failed: the client got an error.
    let outcome = journal_rows(&env.db())
        .into_iter()
        .find(|r| r["kind"] == "call.outcome" && r["seq"] == 1)
        .unwrap();
    assert_eq!(outcome["ok"], false);
    for (what, bytes) in home_bytes(&env) {
        assert!(!contains(&bytes, &secret), "the canary is in {what}");
    }
    env.ok(&["verify"]);
}

/// The fixture sends its secret back in base64 (both alphabets, with and without padding, at
/// two alignments) and hex (both cases): each answer is withheld, each journaled with its
/// encoding, and the secret is in no byte the client or the journal got.
#[test]
fn the_secret_sent_back_in_base64_or_hex_never_reaches_the_client() {
    let (env, _ss) = setup();
    let secret = canary();
    let (record, _) = register_fixture(&env, "fx", &secret);
    let mut r = relay(&env, "fx", &[], &[], record);
    r.handshake();
    let cases = [
        ("base64", "", "base64-0"),
        ("base64", "FX_TOKEN=", "base64-0"),
        ("base64url", "K=", "base64-2"),
        ("base64", "a", "base64-1"),
        ("hex", "", "hex-lower"),
        ("HEX", "token: ", "hex-upper"),
        ("plain", "", "plain"),
    ];
    let mut to_client = Vec::new();
    for (i, (how, prefix, _)) in cases.iter().enumerate() {
        let id = 10 + i as u32;
        r.send(&leak_call(id, how, prefix));
        let v = answer_to(&mut r, &id.to_string(), &mut to_client);
        assert_eq!(v["error"]["code"], -32003, "{how} {prefix:?}: {v}");
        to_client.push(v.to_string());
    }
    // What the fixture really wrote carried it (so the test tests something).
    let wrote: Vec<u8> = r.server_wrote().concat();
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(contains(&wrote, &hex));
    to_client.extend(r.barrier(1));
    for line in &to_client {
        assert!(!line.contains(&secret) && !line.contains(&hex), "{line}");
    }
    r.finish();
    let rows = leaks(&env);
    assert_eq!(rows.len(), cases.len(), "{rows:?}");
    for (row, (how, prefix, encoding)) in rows.iter().zip(cases) {
        let d = detail(row);
        // The canary is ASCII without `+` or `/`, so both base64 alphabets spell it alike and
        // the standard one is named; the alignment is where it starts in its 3-byte group.
        assert_eq!(d["encoding"], encoding, "{how} {prefix:?}: {d}");
        assert_eq!(d["withheld"], "answer");
    }
    for (what, bytes) in home_bytes(&env) {
        assert!(!contains(&bytes, &secret), "the canary is in {what}");
        assert!(!contains(&bytes, &hex), "the canary's hex is in {what}");
    }
}

/// A notification carrying the secret is dropped (and journaled); the answer after it, and any
/// line without the secret, passes byte for byte.
#[test]
fn a_notification_carrying_the_secret_is_dropped_and_clean_lines_pass_byte_for_byte() {
    let (env, _ss) = setup();
    let secret = canary();
    let (record, _) = register_fixture(&env, "fx", &secret);
    let mut r = relay(&env, "fx", &[], &[], record);
    r.handshake();
    r.send(&leak_call(5, "notify", ""));
    let first = r.recv_str();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["id"], 5, "the notification never arrives: {first}");
    assert!(first.contains("clean"));
    r.send(&call(
        "6",
        "echo",
        r#"{"text":"nothing secret here \u00e9 \/ \\"}"#,
    ));
    let echoed = r.recv();
    let wrote = r.server_wrote();
    let from_server = wrote.iter().find(|l| {
        l.starts_with(br#"{"id":6"#) || {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            v["id"] == 6
        }
    });
    assert_eq!(
        Some(&echoed),
        from_server,
        "a clean line passes byte for byte"
    );
    r.finish();
    let rows = leaks(&env);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(detail(&rows[0])["withheld"], "notification");
    assert!(rows[0]["seq"].is_null());
}

/// What the check does not claim: a secret split across two JSON strings is two strings, and
/// neither is the secret, so the answer passes (docs/security.md lists it among what is not
/// caught). Pinned so that a change in the scanner is a decision, not an accident.
#[test]
fn a_secret_split_across_two_json_strings_is_not_claimed_as_a_leak() {
    let (env, _ss) = setup();
    let secret = canary();
    let (record, _) = register_fixture(&env, "fx", &secret);
    let mut r = relay(&env, "fx", &[], &[], record);
    r.handshake();
    r.send(&leak_call(4, "split", ""));
    let v = r.recv_json();
    assert_eq!(v["id"], 4);
    assert!(v["error"].is_null(), "{v}");
    let joined = format!(
        "{}{}",
        v["result"]["content"][0]["text"].as_str().unwrap(),
        v["result"]["content"][1]["text"].as_str().unwrap()
    );
    assert_eq!(joined, secret);
    r.finish();
    assert!(leaks(&env).is_empty());
}

/// The model pasting one server's token into another's tool: a call to connector `other`
/// whose arguments carry connector `fx`'s secret (plain or hex) is refused, never reaches
/// `other`'s server, and is journaled as `secret.leak` and a denied call whose reason names
/// whose secret it was.
#[test]
fn a_call_carrying_another_connectors_secret_is_refused_before_its_server_sees_it() {
    let (env, _ss) = setup();
    let secret = canary();
    register_fixture(&env, "fx", &secret);
    let mut r = env.relay_fixture("other", "fixture_raw");
    r.handshake();
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    r.send(&call(
        "1",
        "echo",
        &format!(r#"{{"text":"use {secret} please"}}"#),
    ));
    let v = r.recv_json();
    assert!(is_refusal(&v), "{v}");
    // The client reads the relay's fixed refusal for a denied call (it never repeats the
    // daemon's reasons); the reason naming whose secret it was is journaled.
    let words = v["result"]["content"][0]["text"].as_str().unwrap();
    assert!(!words.contains(&secret), "{words}");
    r.send(&call("2", "echo", &format!(r#"{{"text":"{hex}"}}"#)));
    assert!(is_refusal(&r.recv_json()));
    r.send(&call("3", "echo", r#"{"text":"an ordinary call"}"#));
    let ok = r.recv_json();
    assert!(!is_refusal(&ok), "{ok}");
    assert!(!r.server_got(secret.as_bytes()) && !r.server_got(hex.as_bytes()));
    assert_eq!(r.forwarded_calls(), 1);
    r.finish();
    let rows = leaks(&env);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (row, encoding) in rows.iter().zip(["plain", "hex-lower"]) {
        assert_eq!(row["connector"], "other");
        assert_eq!(row["tool"], "echo");
        let d = detail(row);
        assert_eq!(d["direction"], "arguments");
        assert_eq!(d["secret_of"], "fx");
        assert_eq!(d["encoding"], encoding);
    }
    let denied: Vec<_> = journal_rows(&env.db())
        .into_iter()
        .filter(|r| r["kind"] == "call.request" && r["decision"] == "deny")
        .collect();
    assert_eq!(denied.len(), 2);
    for row in &denied {
        let reason = row["reason"].as_str().unwrap();
        assert!(reason.contains("connector fx's secret"), "{reason}");
    }
    for (what, bytes) in home_bytes(&env) {
        assert!(!contains(&bytes, &secret), "the canary is in {what}");
    }
}

/// A secret under `limits::LEAK_SECRET_BYTES_MIN` is injected but not checked: `connector set`
/// and the relay say so, and an answer carrying it passes (the documented choice: a string
/// this short turns up by chance, and its fingerprint would be cheap to guess).
#[test]
fn a_secret_under_the_minimum_is_not_checked_and_both_the_cli_and_the_relay_say_so() {
    let (env, _ss) = setup();
    let short = "a".repeat(holdcall::limits::LEAK_SECRET_BYTES_MIN - 1);
    let (record, said) = register_fixture(&env, "fx", &short);
    assert!(said.contains("not checked"), "{said}");
    let mut r = relay(&env, "fx", &[], &[], record);
    r.handshake();
    r.send(&leak_call(3, "plain", ""));
    let v = r.recv_json();
    assert_eq!(v["result"]["content"][0]["text"], short.as_str(), "{v}");
    let stderr = r.finish();
    assert!(stderr.contains("not checked"), "{stderr}");
    assert!(leaks(&env).is_empty());
}

/// Fail closed: arguments too large to be sent to the daemon cannot be checked for another
/// connector's secret, so while one is known such a call is refused and journaled (no
/// `secret_of`: nothing was found, nothing could be looked at).
#[test]
fn arguments_too_large_to_check_are_refused_while_another_connectors_secret_is_known() {
    let (env, _ss) = setup();
    register_fixture(&env, "fx", &canary());
    let mut r = env.relay_fixture("other", "fixture_raw");
    r.handshake();
    let big = "a".repeat(1024 * 1024 + 1);
    r.send(&call("1", "echo", &format!(r#"{{"text":"{big}"}}"#)));
    let v = r.recv_json();
    assert!(is_refusal(&v), "{}", &v.to_string()[..200]);
    assert_eq!(r.forwarded_calls(), 0);
    r.finish();
    let rows = leaks(&env);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let d = detail(&rows[0]);
    assert_eq!(d["direction"], "arguments");
    assert!(d["secret_of"].is_null(), "{d}");
    let reason = rows[0]["reason"].as_str().unwrap();
    assert!(reason.contains("too large to check"), "{reason}");
}
