//! The frame, the envelope and the shaping step, one rule at a time.

use serde_json::{Value, json};

use super::*;

fn one(line: &[u8]) -> Value {
    match read_frame(line).unwrap() {
        Frame::One(_, value) => value,
        other => panic!("not one message: {other:?}"),
    }
}

fn refusal(line: &[u8]) -> RpcError {
    read_frame(line).unwrap_err()
}

/// A JSON object of exactly `len` bytes.
fn object_of(len: usize) -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","id":1,"method":"ping","pad":""#;
    let mut out = head.to_vec();
    out.resize(len - 2, b'a');
    out.extend_from_slice(b"\"}");
    assert_eq!(out.len(), len);
    out
}

#[test]
fn a_frame_of_exactly_the_limit_is_read_and_one_byte_more_is_refused_for_size() {
    let mut exact = object_of(HOLDMAP_FRAME_BYTES_MAX);
    exact.extend_from_slice(b"\r\n");
    assert!(matches!(read_frame(&exact), Ok(Frame::One(..))));
    let mut over = object_of(HOLDMAP_FRAME_BYTES_MAX + 1);
    over.push(b'\n');
    let e = refusal(&over);
    assert_eq!(e.code, -32600);
    assert_eq!(
        e.message,
        "MCP frame exceeds 1 MiB; no requests from this frame were executed"
    );
}

#[test]
fn blank_lines_are_blank_and_a_line_without_a_newline_is_a_message() {
    assert!(matches!(read_frame(b" \t\r\n"), Ok(Frame::Blank)));
    assert!(matches!(read_frame(b""), Ok(Frame::Blank)));
    assert_eq!(one(br#"{"a":1}"#), json!({"a":1}));
}

#[test]
fn bytes_that_are_not_utf8_or_not_json_are_parse_errors() {
    for line in [
        &b"{\"a\":\"\xff\"}\n"[..],
        b"{\"a\":}\n",
        b"{} {}\n",
        b"\"\\ud800\"\n",
        b"nul\n",
    ] {
        let e = refusal(line);
        assert_eq!(e.code, -32700, "{line:?}");
        assert!(e.message.starts_with("parse error: "), "{}", e.message);
    }
}

#[test]
fn a_key_repeated_at_any_depth_is_an_invalid_request() {
    for line in [
        &br#"{"id":1,"id":2}"#[..],
        br#"{"params":{"arguments":{"port":1,"port":2}}}"#,
        br#"[{"a":[{"b":1,"b":1}]}]"#,
        br#"{"method":"a","Method":"b"}"#,
    ] {
        let e = refusal(line);
        assert_eq!(e.code, -32600);
        assert!(e.message.contains("repeats a key"), "{}", e.message);
    }
}

#[test]
fn an_array_is_a_batch_of_its_elements_with_their_own_bytes() {
    let Frame::Batch(items) = read_frame(br#"[ {"id":1} , 2 ]"#).unwrap() else {
        panic!("not a batch")
    };
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].0, br#"{"id":1}"#);
    assert_eq!(items[1].1, json!(2));
}

fn check(line: &str) -> Result<Request, Box<Rejection>> {
    let value: Value = serde_json::from_str(line).unwrap();
    envelope(line.as_bytes(), value)
}

fn echoed(r: &Rejection) -> Option<String> {
    r.id.as_ref().map(|id| id.raw.get().to_owned())
}

#[test]
fn every_envelope_rule_is_an_invalid_request_echoing_only_a_valid_id() {
    let cases = [
        ("3", None, "a message must be a JSON object"),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            None,
            "`id` must be",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            None,
            "`id` must be",
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            None,
            "`id` must be",
        ),
        (
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            None,
            "`id` must be",
        ),
        (
            r#"{"id":1,"method":"ping"}"#,
            Some("1"),
            "`jsonrpc` must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            Some("1"),
            "`jsonrpc`",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
            Some("\"a\""),
            "`method` must be",
        ),
        (r#"{"jsonrpc":"2.0","id":2}"#, Some("2"), "`method` must be"),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":[]}"#,
            Some("2"),
            "`params` must be an object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{},"dry_run":false}"#,
            Some("2"),
            "Unknown request field `dry_run`; tool inputs belong inside params.arguments",
        ),
    ];
    for (line, id, words) in cases {
        let r = check(line).unwrap_err();
        assert_eq!(r.error.code, -32600, "{line}");
        assert!(
            r.error.message.contains(words),
            "{line}: {}",
            r.error.message
        );
        assert_eq!(echoed(&r).as_deref(), id, "{line}");
    }
}

#[test]
fn an_id_is_echoed_as_the_bytes_the_client_wrote() {
    let request = check(r#"{"jsonrpc":"2.0","id":1.50,"method":"ping"}"#).unwrap();
    let id = request.id.unwrap();
    let out = line(&Answer::result(&id, json!({}), "2025-11-25", "ping"));
    assert_eq!(out, b"{\"jsonrpc\":\"2.0\",\"id\":1.50,\"result\":{}}\n");
    let request = check(r#"{"jsonrpc":"2.0","id":"\u0041","method":"ping"}"#).unwrap();
    let id = request.id.unwrap();
    assert_eq!(id.key(), "\"A\"");
    assert!(
        line(&Answer::error(
            Some(&id),
            RpcError::invalid_params("x"),
            "2024-11-05"
        ))
        .starts_with(br#"{"jsonrpc":"2.0","id":"\u0041","error":{"code":-32602"#)
    );
}

#[test]
fn a_notification_has_no_id_and_absent_params_are_an_empty_object() {
    let r = check(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
    assert!(r.id.is_none());
    assert!(r.params.is_empty());
    assert_eq!(r.method, "notifications/initialized");
}

#[test]
fn an_uncorrelated_error_id_is_null_before_2025_11_25_and_absent_from_it_on() {
    for revision in REVISIONS {
        let out: Value =
            serde_json::from_slice(&line(&Answer::error(None, RpcError::oversized(), revision)))
                .unwrap();
        let id = out.get("id");
        if revision < "2025-11-25" {
            assert_eq!(id, Some(&Value::Null), "{revision}");
        } else {
            assert_eq!(id, None, "{revision}");
        }
    }
}

fn shaped(result: Value, revision: &str, method: &str) -> Value {
    let id = check(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#)
        .unwrap()
        .id
        .unwrap();
    let out: Value =
        serde_json::from_slice(&line(&Answer::result(&id, result, revision, method))).unwrap();
    out["result"].clone()
}

#[test]
fn the_shaping_step_removes_what_a_revision_lacks_and_adds_what_it_requires() {
    let list = json!({
        "tools": [{"name":"t","title":"T","outputSchema":{},"annotations":{"readOnlyHint":true}}],
        "prompts": [{"name":"p","title":"P"}],
        "resources": [{"uri":"u","name":"g","title":"G"}],
    });
    let old = shaped(list.clone(), "2024-11-05", "tools/list");
    assert_eq!(old["tools"][0], json!({"name":"t"}));
    assert_eq!(old["prompts"][0], json!({"name":"p"}));
    assert_eq!(old["resources"][0], json!({"uri":"u","name":"g"}));
    let mid = shaped(list.clone(), "2025-03-26", "tools/list");
    assert_eq!(
        mid["tools"][0],
        json!({"name":"t","annotations":{"readOnlyHint":true}})
    );
    let full = shaped(list.clone(), "2025-11-25", "tools/list");
    assert_eq!(full, list);
    let modern = shaped(list.clone(), "2026-07-28", "tools/list");
    assert_eq!(modern["resultType"], json!("complete"));
    assert_eq!(modern["ttlMs"], json!(0));
    assert_eq!(modern["cacheScope"], json!("private"));
    let call = shaped(
        json!({"content":[],"structuredContent":{}}),
        "2026-07-28",
        "tools/call",
    );
    assert_eq!(
        call,
        json!({"content":[],"structuredContent":{},"resultType":"complete"})
    );
    let legacy_call = shaped(
        json!({"content":[],"structuredContent":{}}),
        "2025-03-26",
        "tools/call",
    );
    assert_eq!(legacy_call, json!({"content":[]}));
}

#[test]
fn an_unsupported_revision_error_carries_the_data_a_2026_client_reads() {
    let e = RpcError::unsupported_revision("2030-01-01");
    assert_eq!(e.code, -32022);
    assert_eq!(
        e.data,
        Some(json!({"supported": REVISIONS, "requested": "2030-01-01"}))
    );
}

#[test]
fn revisions_are_known_by_name_and_batches_end_at_2025_06_18() {
    assert_eq!(known_revision("2026-07-28"), Some("2026-07-28"));
    assert_eq!(known_revision("2025-01-01"), None);
    assert!(batches_allowed("2024-11-05") && batches_allowed("2025-03-26"));
    assert!(!batches_allowed("2025-06-18") && !batches_allowed("2026-07-28"));
}
