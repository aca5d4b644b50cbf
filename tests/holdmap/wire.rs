//! The wire rules of `holdmap mcp` through the real binary, with raw lines: framing (the 1 MiB
//! cap, a last line without a newline), parse errors, the envelope, revisions and their shapes,
//! legacy batches, the tools/call error split, notifications, and a clean exit when stdin
//! closes. Tool-specific results are in the tools' own files.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::Holdmap;

/// The frame limit (bytes of JSON, the newline not counted).
const FRAME_MAX: usize = 1024 * 1024;

/// A `ping` line of exactly `len` bytes of JSON (a padding string inside `params`).
fn ping_of(id: i64, len: usize) -> Vec<u8> {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":""#);
    let mut out = head.into_bytes();
    out.resize(len - 3, b'x');
    out.extend_from_slice(br#""}}"#);
    assert_eq!(out.len(), len);
    out
}

/// Sends `line` (a newline is added) and returns the one answer.
fn answer_to(h: &mut Holdmap, line: &str) -> Value {
    h.send_raw(format!("{line}\n").as_bytes());
    h.recv()
}

/// The next answer must be this `ping`'s: nothing else was owed.
fn nothing_else_is_owed(h: &mut Holdmap) {
    h.request(4242, "ping", json!({}));
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn a_frame_over_one_mebibyte_is_refused_whole_and_the_next_request_is_answered() {
    let mut h = Holdmap::start();
    let mut line = ping_of(1, FRAME_MAX + 1);
    line.push(b'\n');
    h.send_raw(&line);
    let refused = h.recv();
    assert_eq!(error_code(&refused), -32600);
    assert_eq!(
        refused["error"]["message"],
        json!("MCP frame exceeds 1 MiB; no requests from this frame were executed")
    );
    assert!(refused.get("id").is_none(), "{refused}");
    let next = h.request(2, "ping", json!({}));
    assert_eq!(next["result"], json!({}));
    // A line far past the cap is read through, never kept whole.
    let mut huge = ping_of(3, 3 * FRAME_MAX);
    huge.push(b'\n');
    h.send_raw(&huge);
    assert_eq!(error_code(&h.recv()), -32600);
    nothing_else_is_owed(&mut h);
}

#[test]
fn a_frame_of_exactly_one_mebibyte_is_not_refused_for_its_size() {
    let mut h = Holdmap::start();
    let mut line = ping_of(1, FRAME_MAX);
    line.extend_from_slice(b"\r\n");
    h.send_raw(&line);
    let answer = h.recv();
    assert_eq!(answer["id"], json!(1));
    assert_eq!(answer["result"], json!({}));
}

#[test]
fn a_last_frame_without_a_newline_is_still_answered_and_the_server_exits_0() {
    let mut h = Holdmap::start();
    h.send_raw(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    h.close_stdin();
    let answer = h.recv();
    assert_eq!(answer["id"], json!(1));
    assert!(h.finish().success());
}

#[test]
fn bytes_that_are_not_utf8_are_a_parse_error_and_reading_goes_on() {
    let mut h = Holdmap::start();
    h.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}\n");
    let answer = h.recv();
    assert_eq!(error_code(&answer), -32700);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("parse error: ")
    );
    assert!(answer.get("id").is_none());
    let broken = answer_to(&mut h, r#"{"jsonrpc":"2.0","id":2,"method":"#);
    assert_eq!(error_code(&broken), -32700);
    nothing_else_is_owed(&mut h);
}

#[test]
fn a_request_that_repeats_a_key_at_any_depth_is_refused() {
    let mut h = Holdmap::start();
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_topology","arguments":{"all":true,"all":false}}}"#,
    ] {
        let answer = answer_to(&mut h, line);
        assert_eq!(error_code(&answer), -32600, "{line}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("repeats a key"),
            "{answer}"
        );
    }
}

#[test]
fn every_envelope_rule_is_an_invalid_request_that_echoes_only_a_valid_id() {
    let mut h = Holdmap::start();
    let cases = [
        (r#"3"#, None),
        (r#""ping""#, None),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, None),
        (r#"{"id":1,"method":"ping"}"#, Some(json!(1))),
        (
            r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#,
            Some(json!(2)),
        ),
        (r#"{"jsonrpc":"2.0","id":"s","method":7}"#, Some(json!("s"))),
        (r#"{"jsonrpc":"2.0","id":4}"#, Some(json!(4))),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":[1]}"#,
            Some(json!(5)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":"x"}"#,
            Some(json!(6)),
        ),
    ];
    for (line, id) in cases {
        let answer = answer_to(&mut h, line);
        assert_eq!(error_code(&answer), -32600, "{line}: {answer}");
        assert_eq!(answer.get("id"), id.as_ref(), "{line}: {answer}");
    }
}

#[test]
fn a_top_level_dry_run_is_an_unknown_request_field_with_its_id_echoed() {
    let mut h = Holdmap::start();
    let answer = answer_to(
        &mut h,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"stop_port","arguments":{"port":3000}},"dry_run":false}"#,
    );
    assert_eq!(error_code(&answer), -32600);
    assert_eq!(answer["id"], json!(9));
    assert_eq!(
        answer["error"]["message"],
        json!("Unknown request field `dry_run`; tool inputs belong inside params.arguments")
    );
}

#[test]
fn an_unknown_method_is_method_not_found() {
    let mut h = Holdmap::start();
    let answer = h.request(1, "tools/run", json!({}));
    assert_eq!(error_code(&answer), -32601);
    assert_eq!(
        answer["error"]["message"],
        json!("method not found: tools/run")
    );
}

#[test]
fn initialize_echoes_a_known_revision_and_answers_2025_11_25_to_any_other() {
    for revision in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut h = Holdmap::start();
        let result = h.initialize(revision);
        assert_eq!(result["protocolVersion"], json!(revision));
        assert_eq!(result["serverInfo"]["name"], json!("holdmap"));
        assert_eq!(
            result["serverInfo"].get("title").is_some(),
            revision >= "2025-06-18",
            "{revision}: {result}"
        );
        assert_eq!(result["capabilities"]["tools"]["listChanged"], json!(false));
        assert!(
            result["instructions"]
                .as_str()
                .unwrap()
                .contains("list_ports")
        );
    }
    let mut h = Holdmap::start();
    assert_eq!(
        h.initialize("1999-01-01")["protocolVersion"],
        json!("2025-11-25")
    );
    let missing = h.request(1, "initialize", json!({"capabilities": {}}));
    assert_eq!(error_code(&missing), -32602);
}

#[test]
fn requests_before_initialize_are_served_at_2025_11_25() {
    let mut h = Holdmap::start();
    let list = h.request(1, "tools/list", json!({}));
    let tool = &list["result"]["tools"][0];
    assert!(tool.get("outputSchema").is_some(), "{list}");
    assert!(tool.get("annotations").is_some(), "{list}");
    assert!(list["result"].get("resultType").is_none());
}

#[test]
fn a_2026_07_28_client_discovers_the_server_and_gets_result_types_without_initialize() {
    let mut h = Holdmap::start();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let discover = h.request(1, "server/discover", json!({"_meta": meta}));
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!([
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28"
        ])
    );
    assert_eq!(discover["result"]["resultType"], json!("complete"));
    let list = h.request(2, "tools/list", json!({"_meta": meta}));
    assert_eq!(list["result"]["resultType"], json!("complete"));
    assert_eq!(list["result"]["cacheScope"], json!("private"));
    let unknown = h.request(
        3,
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2031-01-01"}}),
    );
    assert_eq!(error_code(&unknown), -32022);
    assert_eq!(unknown["error"]["data"]["requested"], json!("2031-01-01"));
}

#[test]
fn results_lose_what_older_revisions_lack() {
    let mut h = Holdmap::start();
    h.initialize("2024-11-05");
    let list = h.request(1, "tools/list", json!({}));
    for tool in list["result"]["tools"].as_array().unwrap() {
        for key in ["title", "outputSchema", "annotations"] {
            assert!(tool.get(key).is_none(), "{key} in {tool}");
        }
        assert!(tool.get("inputSchema").is_some());
    }
    let mut h = Holdmap::start();
    h.initialize("2025-03-26");
    let list = h.request(1, "tools/list", json!({}));
    let tool = &list["result"]["tools"][0];
    assert!(tool.get("annotations").is_some() && tool.get("outputSchema").is_none());
}

#[test]
fn batches_are_accepted_below_2025_06_18_and_refused_from_it() {
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}]"#;
    let mut h = Holdmap::start();
    h.initialize("2025-03-26");
    let answers = answer_to(&mut h, batch);
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["result"], json!({}));
    assert_eq!(error_code(&answers[1]), -32601);
    let none = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    h.send_raw(format!("{none}\n").as_bytes());
    nothing_else_is_owed(&mut h);

    let mut h = Holdmap::start();
    h.initialize("2025-06-18");
    let refused = answer_to(&mut h, batch);
    assert_eq!(error_code(&refused), -32600);
    assert_eq!(refused.get("id"), Some(&Value::Null), "{refused}");

    for revision in ["2024-11-05", "2025-11-25"] {
        let mut h = Holdmap::start();
        h.initialize(revision);
        assert_eq!(error_code(&answer_to(&mut h, "[]")), -32600, "{revision}");
    }
}

#[test]
fn a_batch_of_65_messages_is_refused_before_an_initialize_inside_it_runs() {
    let mut h = Holdmap::start();
    h.initialize("2025-03-26");
    let mut batch = vec![
        json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25"}}),
    ];
    batch.extend((0..64).map(|id| json!({"jsonrpc":"2.0","id":id,"method":"ping"})));
    h.send(&Value::Array(batch));
    let refused = h.recv();
    assert_eq!(error_code(&refused), -32600, "{refused}");
    // Still 2025-03-26: a batch is still accepted, and an uncorrelated error keeps `id: null`.
    let answers = answer_to(&mut h, r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
    assert_eq!(answers[0]["id"], json!(1));
    assert_eq!(refused.get("id"), Some(&Value::Null));
}

#[test]
fn an_uncorrelated_error_has_id_null_before_2025_11_25_and_no_id_from_it_on() {
    for (revision, null_id) in [
        ("2024-11-05", true),
        ("2025-03-26", true),
        ("2025-06-18", true),
        ("2025-11-25", false),
    ] {
        let mut h = Holdmap::start();
        h.initialize(revision);
        let answer = answer_to(&mut h, "{oops");
        assert_eq!(error_code(&answer), -32700);
        assert_eq!(
            answer.get("id") == Some(&Value::Null),
            null_id,
            "{revision}: {answer}"
        );
        assert_eq!(answer.get("id").is_none(), !null_id, "{revision}: {answer}");
    }
}

#[test]
fn notifications_get_no_answer_whatever_their_method() {
    let mut h = Holdmap::start();
    for line in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}"#,
        r#"{"jsonrpc":"2.0","method":"no/such/method","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"stop_port","arguments":{"port":1,"dry_run":false}}}"#,
    ] {
        h.send_raw(format!("{line}\n").as_bytes());
    }
    h.send_raw(b"\n   \n");
    nothing_else_is_owed(&mut h);
}

#[test]
fn tools_call_arguments_that_are_an_array_null_or_a_scalar_are_invalid_params() {
    let mut h = Holdmap::start();
    h.initialize("2025-11-25");
    for (id, arguments) in [
        (1, json!([])),
        (2, json!(null)),
        (3, json!(3)),
        (4, json!("all")),
    ] {
        let answer = h.call(id, "get_topology", arguments);
        assert_eq!(error_code(&answer), -32602, "{answer}");
    }
    // A well-formed object that fails the schema is a tool error the model can correct.
    let answer = h.call(5, "get_topology", json!({"all": "true"}));
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    assert!(answer["result"].get("structuredContent").is_none());
}

#[test]
fn tools_call_params_are_checked_in_order_before_the_tool_is_looked_up() {
    let mut h = Holdmap::start();
    let cases = [
        (
            json!({"name":"no_such_tool","task":{"ttl":1000}}),
            "Task-augmented execution is not supported by this server",
        ),
        (
            json!({"name":"no_such_tool","dry_run":true}),
            "Unknown tools/call parameter `dry_run`; tool inputs belong inside arguments",
        ),
        (
            json!({"name":"no_such_tool","_meta":"x"}),
            "`_meta` must be an object",
        ),
        (
            json!({"name":"no_such_tool","_meta":{"progressToken":{}}}),
            "`_meta.progressToken` must be a string or a number",
        ),
        (
            json!({"arguments":{}}),
            "tools/call requires a nonempty string name",
        ),
        (
            json!({"name":""}),
            "tools/call requires a nonempty string name",
        ),
        (json!({"name":"no_such_tool"}), "unknown tool: no_such_tool"),
    ];
    for (id, (params, words)) in (1..).zip(cases) {
        let answer = h.request(id, "tools/call", params.clone());
        assert_eq!(error_code(&answer), -32602, "{params}");
        assert_eq!(answer["error"]["message"], json!(words), "{params}");
    }
}

#[test]
fn resources_read_names_only_the_guide_exactly() {
    let mut h = Holdmap::start();
    let read = h.request(1, "resources/read", json!({"uri": "holdmap://guide"}));
    assert!(
        read["result"]["contents"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{read}"
    );
    for (id, uri) in (2..).zip([
        "holdmap://guide/../x",
        "file:///etc/passwd",
        "holdmap://guide?x",
    ]) {
        let answer = h.request(id, "resources/read", json!({ "uri": uri }));
        assert_eq!(error_code(&answer), -32002, "{uri}");
    }
    let answer = h.request(9, "resources/read", json!({ "uri": 5 }));
    assert_eq!(error_code(&answer), -32602);
    let templates = h.request(10, "resources/templates/list", json!({}));
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    let prompt = h.request(11, "prompts/get", json!({"name": "no_such_prompt"}));
    assert_eq!(error_code(&prompt), -32602);
}

#[test]
fn stdout_carries_only_protocol_lines_with_every_log_turned_on() {
    let mut h = Holdmap::start_with(&[("HOLDMAP_LOG", "trace")]);
    h.initialize("2025-03-26");
    h.request(1, "tools/list", json!({}));
    answer_to(&mut h, "{bad json");
    answer_to(&mut h, r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#);
    h.call(3, "get_topology", json!({}));
    h.close_stdin();
    // Every line so far was parsed as JSON by `recv`; there must be no other.
    assert_eq!(h.recv_line(Duration::from_secs(5)), None);
    crate::common::eventually("the logs reach stderr", || h.stderr().contains("DEBUG"));
    assert!(h.finish().success());
}
