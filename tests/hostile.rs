//! Hostile input, one test per row of `docs/hostile-input.md` that `tests/relay.rs` does not
//! already prove: what a client or a server can put on the wire to hide a call, crash the
//! relay or hang it. Through the real binary, a real daemon that denies `delete_file`, and the
//! recording demo server (or the raw fixture, for a server that misbehaves).

// Test code fails loudly: an unwrap or an index here is an assertion.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;
use common::*;
use std::io::Write;

const UNREADABLE: &str = "Holdcall refused this call: its tool name could not be read \
     unambiguously. Do not retry automatically.";
const DENIED: &str =
    "Holdcall refused this call: a policy rule denies it. Do not retry automatically.";

fn refusal(id: &str, text: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"isError\":true}}}}\n"
    )
}

fn denying_env() -> Env {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    env
}

/// Sends every line, then a barrier; asserts nothing came back before the barrier's answer.
fn send_all_unanswered(r: &mut Relay, lines: &[&[u8]]) {
    for l in lines {
        r.send(l);
    }
    let before = r.barrier(1);
    assert!(before.is_empty(), "these lines were answered: {before:?}");
}

/// Asserts the server never received a line containing `needle`.
fn never_reached_the_server(r: &Relay, needle: &[u8]) {
    for l in r.recorded() {
        assert!(
            !l.windows(needle.len()).any(|w| w == needle),
            "the server got {}",
            String::from_utf8_lossy(&l)
        );
    }
}

fn anomalies(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly")
        .map(|e| e["anomaly"].as_str().unwrap().to_string())
        .collect()
}

fn decided_tools(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .map(|e| e["tool"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_call_that_repeats_a_top_level_key_is_dropped_unanswered_and_never_reaches_the_server() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    send_all_unanswered(
        &mut r,
        &[
            // Which id would the refusal carry, which would the server answer?
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"delete_file"}}"#,
            // Two params: one to decide on, one to run.
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"},"params":{"name":"delete_file"}}"#,
            // The same key, spelled with an escape.
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"},"p\u0061rams":{"name":"delete_file"}}"#,
        ],
    );
    never_reached_the_server(&r, b"tools/call");
    r.finish();
    assert_eq!(anomalies(&env), vec!["duplicate_key"; 3]);
    assert!(decided_tools(&env).is_empty(), "nothing was decided");
}

#[test]
fn a_call_that_repeats_a_key_in_its_params_is_refused_as_unreadable() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    let lines: [&[u8]; 3] = [
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"arguments":{"path":"/"}}}"#,
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1,"progressToken":2}}}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","n\u0061me":"delete_file"}}"#,
    ];
    for (n, l) in lines.iter().enumerate() {
        r.send(l);
        assert_eq!(r.recv_str(), refusal(&(n + 1).to_string(), UNREADABLE));
    }
    r.barrier(1);
    never_reached_the_server(&r, b"tools/call");
    r.finish();
    assert_eq!(anomalies(&env), vec!["duplicate_key"; 3]);
    assert!(decided_tools(&env).is_empty());
}

#[test]
fn a_call_that_repeats_a_key_anywhere_in_its_arguments_is_refused() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    let lines: [&[u8]; 3] = [
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"opts":{"force":false,"force":true}}}}"#,
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"items":[{"a":1},{"a":1,"a":2}]}}}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"/tmp/x","t\u0065xt":"/etc/passwd"}}}"#,
    ];
    for (n, l) in lines.iter().enumerate() {
        r.send(l);
        assert_eq!(r.recv_str(), refusal(&(n + 1).to_string(), UNREADABLE));
    }
    r.barrier(1);
    never_reached_the_server(&r, b"tools/call");
    r.finish();
    assert_eq!(anomalies(&env), vec!["duplicate_key"; 3]);
}

#[test]
fn case_variant_keys_are_read_the_way_a_case_insensitive_server_would() {
    // Go's encoding/json (the Go SDK before CVE-2026-27896, and servers built on it) and .NET
    // with Web defaults match keys case-insensitively, Go folding `ſ` to s and the Kelvin sign
    // to k too, and keep the last of two matches. So a case variant is the same key here.
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    // Next to `method`, `Method` is a repeated key: dropped, unanswered.
    send_all_unanswered(
        &mut r,
        &[
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"delete_file"}}"#,
        ],
    );
    // Alone, `METHOD` is the method: decided, here denied.
    r.send(br#"{"jsonrpc":"2.0","id":2,"METHOD":"tools/call","params":{"name":"delete_file"}}"#);
    assert_eq!(r.recv_str(), refusal("2", DENIED));
    // `Name` next to `name`, `paramſ`'s `NAME`, a case variant in the arguments: refused.
    let unreadable: [&[u8]; 4] = [
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","Name":"delete_file"}}"#,
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","TEXT":"b"}}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"ke\u{017f}\":1,\"\u{212a}es\":2,\"kes\":3}}}".as_bytes(),
        "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"pa\u{17f}\u{17f}\":1,\"PASS\":2}}}".as_bytes(),
    ];
    for (n, l) in unreadable.iter().enumerate() {
        r.send(l);
        assert_eq!(r.recv_str(), refusal(&(n + 3).to_string(), UNREADABLE));
    }
    r.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"param\u{017f}\":{\"NAME\":\"delete_file\"}}".as_bytes());
    assert_eq!(r.recv_str(), refusal("7", DENIED));
    // In a batch, `Method` is the method too: the batch carries a call and is refused whole.
    r.send(br#"[{"jsonrpc":"2.0","id":8,"Method":"tools/call","params":{"name":"delete_file"}}]"#);
    let a = r.recv_json();
    assert_eq!(a[0]["id"], 8);
    assert_eq!(a[0]["error"]["code"], -32000);
    // A single key in another case is no ambiguity: an ordinary call, allowed and relayed.
    let ok = br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"Text":"ok"}}}"#;
    r.send(ok);
    let a = r.recv_json();
    assert_eq!(a["id"], 9);
    assert_eq!(a["result"]["isError"], false, "{a}");
    r.barrier(1);
    never_reached_the_server(&r, b"delete_file");
    assert!(r.recorded().contains(&[ok.as_slice(), b"\n"].concat()));
    r.finish();
    assert_eq!(
        decided_tools(&env),
        vec!["delete_file", "delete_file", "echo"]
    );
}

#[test]
fn a_batch_that_nests_or_garbles_an_element_is_never_relayed() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    send_all_unanswered(
        &mut r,
        &[
            br#"[[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file"}}]]"#,
            br#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/call","params":{"name":"delete_file"}}]"#,
            br#"[{"jsonrpc":"2.0","id":4,"method":"ping"},"tools/call"]"#,
        ],
    );
    for id in 1..=4 {
        never_reached_the_server(&r, format!("\"id\":{id},").as_bytes());
    }
    r.finish();
    assert_eq!(anomalies(&env), vec!["batch"; 3]);
}

#[test]
fn non_utf8_bytes_make_the_line_unreadable_and_a_call_in_it_never_runs() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    send_all_unanswered(
        &mut r,
        &[
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\xff\"}}",
            // An overlong '/' and a UTF-8-encoded surrogate: invalid UTF-8 that lax decoders
            // turn into something else.
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"path\":\"\xc0\xaf\"}}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\xed\xa0\x80\"}}",
            // Latin-1 in a harmless request: still not UTF-8, still not relayed.
            b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"x\":\"caf\xe9\"}}",
        ],
    );
    for id in 1..=4 {
        never_reached_the_server(&r, format!("\"id\":{id},").as_bytes());
    }
    let stderr = r.finish();
    assert!(
        stderr.contains("not exactly one valid JSON value"),
        "{stderr}"
    );
    assert_eq!(anomalies(&env), vec!["malformed_json"; 4]);
    assert!(decided_tools(&env).is_empty());
}

#[test]
fn control_characters_raw_in_a_string_are_malformed_and_escaped_in_a_tool_name_are_refused() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    // Raw control characters inside a string are not JSON: dropped, unanswered (a raw CR is
    // caught first, as a framing anomaly: some servers' readers end a line there).
    send_all_unanswered(
        &mut r,
        &[
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"delete\x00_file\"}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\tb\"}}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\rb\"}}}",
        ],
    );
    // Escaped, they are valid JSON, but a name with a control character cannot be decided:
    // no rule can name it and a display would hide it. Refused as unreadable.
    for (id, name) in [
        ("4", r"delete\u0000_file"),
        ("5", r"delete_file\u001b[2K"),
        ("6", r"delete_file\u007f"),
        ("7", r"delete_file\u0085"),
    ] {
        r.send(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}"}}}}"#
            )
            .as_bytes(),
        );
        assert_eq!(r.recv_str(), refusal(id, UNREADABLE));
    }
    // In arguments an escaped control character is the tool's business: decided and relayed.
    let ok = br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\u0000b"}}}"#;
    r.send(ok);
    assert_eq!(r.recv_json()["id"], 8);
    r.barrier(1);
    never_reached_the_server(&r, b"delete");
    assert!(r.recorded().contains(&[ok.as_slice(), b"\n"].concat()));
    r.finish();
    let mut a = anomalies(&env);
    a.sort();
    assert_eq!(
        a,
        [
            vec!["framing"],
            vec!["malformed_json"; 2],
            vec!["unreadable_call"; 4]
        ]
        .concat()
    );
    assert_eq!(decided_tools(&env), vec!["echo"]);
}

#[test]
fn allowed_calls_keep_big_string_and_null_ids_as_written_and_their_outcomes_are_recorded() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    let ids = [
        "123456789012345678901234567890",
        r#""a\"b""#,
        r#""\u0041""#,
        "null",
        "-0.5e3",
        "1.0",
    ];
    for id in ids {
        let line = call(id, "echo", r#"{"text":"x"}"#);
        r.send(&line);
        let answer = r.recv_str();
        assert!(
            answer.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":")),
            "{answer}"
        );
        assert!(r.recorded().contains(&[line.as_slice(), b"\n"].concat()));
    }
    r.finish();
    let rows = journal_rows(&env.db());
    let outcomes = rows.iter().filter(|e| e["kind"] == "call.outcome").count();
    assert_eq!(outcomes, ids.len(), "each answer was matched to its call");
}

#[test]
fn two_messages_on_one_line_are_dropped_even_when_the_second_is_a_call() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    send_all_unanswered(
        &mut r,
        &[
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"ping"} {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete_file"}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\"}}",
            br#"{"jsonrpc":"2.0","id":7,"method":"ping"}[{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"delete_file"}}]"#,
        ],
    );
    never_reached_the_server(&r, b"delete_file");
    r.finish();
    assert_eq!(anomalies(&env), vec!["framing"; 4]);
    assert!(decided_tools(&env).is_empty());
}

#[test]
fn a_last_line_without_a_newline_is_decided_and_forwarded_as_is_then_the_relay_ends() {
    let env = denying_env();
    // Allowed: the server gets the exact bytes, no newline added, and still answers.
    let mut r = env.relay("demo");
    r.handshake();
    let line = call("1", "echo", r#"{"text":"last"}"#);
    let mut w = r.stdin.take().unwrap();
    w.write_all(&line).unwrap();
    drop(w);
    let a = r.recv_json();
    assert_eq!(a["id"], 1);
    assert_eq!(a["result"]["content"][0]["text"], "Echo: last");
    assert_eq!(r.recorded().last().unwrap(), &line);
    r.finish();
    // Denied: refused, and the server never sees it.
    let mut r = env.relay("demo");
    r.handshake();
    let mut w = r.stdin.take().unwrap();
    w.write_all(&call("2", "delete_file", "{}")).unwrap();
    drop(w);
    assert_eq!(r.recv_str(), refusal("2", DENIED));
    never_reached_the_server(&r, b"delete_file");
    r.finish();
    assert_eq!(decided_tools(&env), vec!["echo", "delete_file"]);
}

#[test]
fn a_server_that_writes_garbage_has_it_relayed_verbatim_and_the_session_goes_on() {
    let env = denying_env();
    let mut r = env.relay_fixture("raw", "fixture_raw");
    r.handshake();
    r.send(&call("1", "garbage", "{}"));
    let garbage = r.recv();
    assert_eq!(garbage, b"this is not JSON {\"jsonrpc\":\n");
    let a = r.recv_json();
    assert_eq!(a["id"], 1);
    assert_eq!(a["result"]["content"][0]["text"], "after the garbage");
    assert!(r.barrier(1).is_empty());
    r.send(&call("2", "delete_file", "{}"));
    assert_eq!(r.recv_str(), refusal("2", DENIED));
    r.finish();
}

#[test]
fn a_method_that_folds_or_trims_to_one_the_relay_reads_is_refused_and_never_reaches_the_server() {
    // Regression (issue 12, item 2): `Tools/Call` and `tools/call ` reached the server with no
    // decision and no journal entry; a server that folds case or trims would have run them.
    let disguises: Vec<&str> = include_str!("data/disguised_methods.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    for (n, method) in disguises.iter().enumerate() {
        let id = 100 + n;
        r.send(
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{{"name":"delete_file","arguments":{{}}}}}}"#)
                .as_bytes(),
        );
        let a = r.recv_json();
        assert_eq!(a["id"], id, "{method}: {a}");
        assert_eq!(a["error"]["code"], -32600, "{method}: {a}");
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Holdcall refused this request"),
            "{method}: {a}"
        );
        // As a notification: nothing to answer, still never relayed.
        r.send(
            format!(r#"{{"jsonrpc":"2.0","method":{method},"params":{{"name":"delete_file"}}}}"#)
                .as_bytes(),
        );
    }
    assert!(r.barrier(1).is_empty());
    // The exact spelling, escaped, is still decided: denied.
    r.send(
        br#"{"jsonrpc":"2.0","id":7,"method":"tools\/\u0063all","params":{"name":"delete_file"}}"#,
    );
    assert_eq!(r.recv_str(), refusal("7", DENIED));
    never_reached_the_server(&r, b"delete_file");
    r.finish();
    assert_eq!(
        anomalies(&env),
        vec!["disguised_method"; 2 * disguises.len()]
    );
    assert_eq!(decided_tools(&env), vec!["delete_file"]);
}

#[test]
fn a_key_that_trims_to_method_or_params_is_refused_and_never_reaches_the_server() {
    // Found in review of issue 12, item 2: `"method "` (or `"me\u200bthod"`) was read past by
    // the relay and forwarded undecided; a server that trims keys, or drops invisible
    // characters in them, would have run the denied call. The same inside a call's params hid
    // a second `name` or `arguments` from the decision.
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    let lines = [
        r#"{"jsonrpc":"2.0","id":100,"method ":"tools/call","params":{"name":"delete_file"}}"#,
        r#"{"jsonrpc":"2.0","id":101," method":"tools/call","params":{"name":"delete_file"}}"#,
        r#"{"jsonrpc":"2.0","id":102,"me\u200bthod":"tools/call","params":{"name":"delete_file"}}"#,
        r#"{"jsonrpc":"2.0","id":103,"method":"tools/call","params":{"name":"echo"},"params ":{"name":"delete_file"}}"#,
    ];
    for (n, line) in lines.iter().enumerate() {
        r.send(line.as_bytes());
        let a = r.recv_json();
        assert_eq!(a["id"], 100 + n, "{line}: {a}");
        assert_eq!(a["error"]["code"], -32600, "{line}: {a}");
    }
    r.send(br#"{"jsonrpc":"2.0","method ":"tools/call","params":{"name":"delete_file"}}"#);
    r.send(br#"{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"echo","name ":"delete_file"}}"#);
    assert_eq!(r.recv_str(), refusal("104", UNREADABLE));
    assert!(r.barrier(1).is_empty());
    never_reached_the_server(&r, b"delete_file");
    r.finish();
    assert_eq!(anomalies(&env), vec!["disguised_key"; 6]);
}
