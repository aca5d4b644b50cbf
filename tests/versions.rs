//! One test per MCP protocol revision, through the real binary, a real daemon with a deny rule
//! (`delete_file`, rule-1) and an allow rule (`echo`, rule-2), and a fixture server: the rmcp
//! one (`examples/fixture_rmcp.rs`) where the SDK speaks the revision, the raw JSON-lines one
//! (`examples/fixture_raw.rs`) for what it no longer does. Both fixtures log what they read and
//! what they write, so every relayed line is compared as bytes, both ways.
//! `docs/protocol-versions.md` is the table these tests prove.

use crate::common::*;

const BATCH_DENIED: &str = "Holdcall refused this batch: it carries a tools/call, and Holdcall \
     decides calls only one at a time. Send each call on its own.";

/// The exact refusal line for a call with raw id `id`.
fn refusal(id: &str, result_type: bool) -> String {
    let tail = if result_type {
        ",\"resultType\":\"complete\""
    } else {
        ""
    };
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{DENIED}\"}}],\"isError\":true{tail}}}}}\n"
    )
}

fn env_with_rules() -> Env {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    env.ok(&["policy", "allow", "echo"]);
    env
}

/// Asserts the server read exactly `line` (plus the newline the client sent).
fn assert_forwarded(r: &Relay, line: &str) {
    let want = format!("{line}\n").into_bytes();
    let rec = r.recorded();
    assert!(
        rec.contains(&want),
        "the server did not get {line}\nit got {:?}",
        rec.iter()
            .map(|l| String::from_utf8_lossy(l))
            .collect::<Vec<_>>()
    );
}

/// Asserts `answer` is a line the server wrote, byte for byte.
fn assert_from_server(r: &Relay, answer: &[u8]) {
    let wrote = r.server_wrote();
    assert!(
        wrote.iter().any(|l| l == answer),
        "the client got {:?}, which the server never wrote; it wrote {:?}",
        String::from_utf8_lossy(answer),
        wrote
            .iter()
            .map(|l| String::from_utf8_lossy(l))
            .collect::<Vec<_>>()
    );
}

/// Sends a request, waits for the one line that answers it, and checks both directions were
/// relayed byte for byte. The fixtures answer concurrently-sent requests in any order, so the
/// tests send one at a time.
fn round_trip(r: &mut Relay, line: &str) -> serde_json::Value {
    r.send(line.as_bytes());
    let answer = r.recv();
    assert_forwarded(r, line);
    assert_from_server(r, &answer);
    serde_json::from_slice(&answer).unwrap()
}

fn assert_never_reached_the_server(r: &Relay, needle: &str) {
    for l in r.recorded() {
        let s = String::from_utf8_lossy(&l);
        assert!(!s.contains(needle), "the server got {s}");
    }
}

/// `(tool, decision, policy_id)` of every `call.request` in the journal, in order.
fn decisions(env: &Env) -> Vec<(String, String, String)> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .map(|e| {
            (
                e["tool"].as_str().unwrap().to_string(),
                e["decision"].as_str().unwrap().to_string(),
                e["policy_id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The protocol version each ended session recorded.
fn session_versions(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "session.end")
        .map(|e| e["protocol_version"].as_str().unwrap_or("").to_string())
        .collect()
}

fn d(tool: &str, decision: &str, policy: &str) -> (String, String, String) {
    (tool.into(), decision.into(), policy.into())
}

/// 2024-11-05 and 2025-06-18 look the same to the relay: `initialize`, then calls whose results
/// carry no `resultType`.
fn initialize_session(version: &str) {
    let env = env_with_rules();
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    );
    let a = round_trip(&mut r, &init);
    assert_eq!(a["result"]["protocolVersion"], version, "{a}");
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let a = round_trip(&mut r, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert!(a["result"].get("resultType").is_none(), "{a}");

    // Odd spacing, an escaped name and non-ASCII text: the server gets these exact bytes.
    let echo = "{ \"jsonrpc\":\"2.0\",\"id\":2, \"method\":\"tools/call\",\"params\":{\"name\":\"\\u0065cho\",\"arguments\":{\"text\":\"caf\u{e9} \\u00e9 1.50\"}}}";
    let a = round_trip(&mut r, echo);
    assert_eq!(a["result"]["content"][0]["text"], "Echo: café é 1.50");
    assert!(a["result"].get("resultType").is_none(), "{a}");

    r.send(&call("3", "delete_file", r#"{"path":"/etc/passwd"}"#));
    assert_eq!(r.recv_str(), refusal("3", false));
    r.barrier(1);
    assert_never_reached_the_server(&r, "delete_file\"");
    r.finish();
    assert_eq!(
        decisions(&env),
        vec![
            d("echo", "allow", "rule-2"),
            d("delete_file", "deny", "rule-1")
        ]
    );
    assert_eq!(session_versions(&env), vec![version.to_string()]);
}

#[test]
fn on_2024_11_05_an_allowed_call_is_relayed_byte_for_byte_and_a_denied_one_is_refused_without_result_type()
 {
    initialize_session("2024-11-05");
}

#[test]
fn on_2025_06_18_an_allowed_call_is_relayed_byte_for_byte_and_a_denied_one_is_refused_without_result_type()
 {
    initialize_session("2025-06-18");
}

#[test]
fn on_2025_03_26_a_batch_without_a_call_is_relayed_and_answered_and_one_with_a_call_is_refused_whole()
 {
    let env = env_with_rules();
    let mut r = env.relay_fixture("raw", "fixture_raw");
    let a = round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(a["result"]["protocolVersion"], "2025-03-26");

    // A batch of requests and a notification, none of them a call: the server gets it as sent
    // and its batch answer comes back as it wrote it.
    let a = round_trip(
        &mut r,
        r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}, {"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"two","method":"tools/list"}]"#,
    );
    let answers = a.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 2, "{a}");
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[1]["id"], "two");

    // A batch carrying a call, even an allowed one, is refused whole: an error for each
    // element with an id, nothing for the notification, and the server sees none of it.
    r.send(br#"[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":"4","method":"ping"}]"#);
    let message = serde_json::to_string(BATCH_DENIED).unwrap();
    assert_eq!(
        r.recv_str(),
        format!(
            "[{{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{{\"code\":-32000,\"message\":{message}}}}},{{\"jsonrpc\":\"2.0\",\"id\":\"4\",\"error\":{{\"code\":-32000,\"message\":{message}}}}}]\n"
        )
    );

    // Calls on their own are decided as usual.
    let echo = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alone"}}}"#;
    let a = round_trip(&mut r, echo);
    assert_eq!(a["result"]["content"][0]["text"], "Echo: alone");
    r.send(&call("6", "delete_file", "{}"));
    assert_eq!(r.recv_str(), refusal("6", false));
    r.barrier(1);
    assert_never_reached_the_server(
        &r,
        "tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"",
    );
    assert_never_reached_the_server(&r, "delete_file");
    r.finish();
    assert_eq!(
        decisions(&env),
        vec![
            d("echo", "allow", "rule-2"),
            d("delete_file", "deny", "rule-1")
        ],
        "a refused batch is not a decision: it never reached the daemon"
    );
    let anomalies: Vec<String> = journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly")
        .map(|e| e["anomaly"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(anomalies, vec!["batch".to_string()]);
    assert_eq!(session_versions(&env), vec!["2025-03-26".to_string()]);
}

#[test]
fn on_2025_11_25_task_calls_are_decided_like_any_call_and_tasks_and_elicitation_pass_through() {
    let env = env_with_rules();

    // Tasks (experimental in 2025-11-25), from the raw fixture: rmcp 3.11 speaks only the later
    // tasks extension.
    let mut r = env.relay_fixture("raw", "fixture_raw");
    let a = round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(a["result"]["protocolVersion"], "2025-11-25");
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    // A task-augmented call to a denied tool is refused like any other.
    r.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/"},"task":{"ttl":60000}}}"#);
    assert_eq!(r.recv_str(), refusal("1", false));
    // An allowed one is forwarded as sent, and the CreateTaskResult comes back as written.
    let a = round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"later"},"task":{"ttl":60000}}}"#,
    );
    assert_eq!(a["result"]["task"]["taskId"], "task-1", "{a}");
    // tasks/get and tasks/result are not calls: relayed untouched both ways.
    let a = round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"task-1"}}"#,
    );
    assert_eq!(a["result"]["status"], "completed");
    let a = round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"task-1"}}"#,
    );
    assert_eq!(a["result"]["content"][0]["text"], "Echo: later");
    assert_never_reached_the_server(&r, "delete_file");
    r.finish();

    // Elicitation, from the rmcp fixture: the server's request and the client's answer are
    // relayed byte for byte, in the server's own id space (its id 0 is not the client's id 0).
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    round_trip(
        &mut r,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let confirm = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{}}}"#;
    r.send(confirm.as_bytes());
    let ask = r.recv();
    assert_from_server(&r, &ask);
    assert_forwarded(&r, confirm);
    let ask: serde_json::Value = serde_json::from_slice(&ask).unwrap();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"action":"accept","content":{{"sure":true}}}}}}"#,
        ask["id"]
    );
    let done = round_trip(&mut r, &answer);
    assert_eq!(done["id"], 1);
    assert_eq!(done["result"]["content"][0]["text"], "Confirmed: Accept");
    r.finish();

    assert_eq!(
        decisions(&env),
        vec![
            d("delete_file", "deny", "rule-1"),
            d("echo", "allow", "rule-2"),
            d("confirm", "allow", ""),
        ]
    );
    assert_eq!(
        session_versions(&env),
        vec!["2025-11-25".to_string(), "2025-11-25".to_string()]
    );
}

/// The `_meta` a 2026-07-28 client puts in every request.
#[test]
fn on_2026_07_28_discover_meta_and_result_types_pass_through_refusals_say_complete_and_an_input_required_retry_is_decided_again()
 {
    let env = env_with_rules();
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    // No initialize: the client probes with server/discover.
    let a = round_trip(
        &mut r,
        &format!(r#"{{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{{{META}}}}}"#),
    );
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    assert!(
        a["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&"2026-07-28".into())
    );

    let a = round_trip(
        &mut r,
        &format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},{META}}}}}"#
        ),
    );
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    assert_eq!(a["result"]["content"][0]["text"], "Echo: hi");

    r.send(
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"delete_file","arguments":{{"path":"/"}},{META}}}}}"#
        )
        .as_bytes(),
    );
    assert_eq!(r.recv_str(), refusal("2", true));

    // Multi round-trip: the server asks for input in its result; the client retries the same
    // call with the answers, and that retry is a call like any other, decided again.
    let a = round_trip(
        &mut r,
        &format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"confirm","arguments":{{}},{META}}}}}"#
        ),
    );
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    let state = a["result"]["requestState"].clone();
    let a = round_trip(
        &mut r,
        &format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"confirm","arguments":{{}},"inputResponses":{{"sure":{{"action":"accept","content":{{"sure":true}}}}}},"requestState":{state},{META}}}}}"#
        ),
    );
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    assert_eq!(a["result"]["content"][0]["text"], "Confirmed: accept");
    assert_never_reached_the_server(&r, "delete_file");
    r.finish();

    // A client that skips server/discover still says its version in every request's _meta:
    // the refusal follows the request.
    let mut r = env.relay_fixture("rmcp", "fixture_rmcp");
    r.send(
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"delete_file","arguments":{{}},{META}}}}}"#
        )
        .as_bytes(),
    );
    assert_eq!(r.recv_str(), refusal("5", true));
    r.finish();

    assert_eq!(
        decisions(&env),
        vec![
            d("echo", "allow", "rule-2"),
            d("delete_file", "deny", "rule-1"),
            d("confirm", "allow", ""),
            d("confirm", "allow", ""),
            d("delete_file", "deny", "rule-1"),
        ]
    );
    assert_eq!(
        session_versions(&env)[0],
        "2026-07-28",
        "the relay learned the version from server/discover"
    );
}
