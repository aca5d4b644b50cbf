//! Classification of client lines: calls, forwards, repeated and disguised keys and methods,
//! framing, nesting, batches, and random input against serde_json.

use std::borrow::Cow;

use super::*;
use crate::ids::sha256_hex;
use crate::limits::JSON_DEPTH_MAX;
use crate::mcp::envelope::{inspect_server_line, request_state_key};
use crate::relay::refusal::{
    DENIED_BY_POLICY, DENIED_DISGUISED_METHOD, disguised_method_refusal, refusal,
};

#[test]
fn a_call_says_its_request_state_input_responses_and_task_without_copying_them() {
    let line = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"confirm","arguments":{},"inputResponses":{"sure":{"action":"accept"}},"requestState":"s\u0031","task":{"ttl":1}}}"#;
    let frame = classify_client_line(line);
    let c = call(&frame);
    assert_eq!(c.request_state, Some(br#""s\u0031""#.as_slice()));
    assert!(c.input_responses && c.creates_task);
    assert_eq!(
        request_state_key(c.request_state.unwrap_or_default()),
        Some(b"s1".to_vec()),
        "a string state is matched by its decoded text"
    );
    let plain = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
    let frame = classify_client_line(plain);
    let c = call(&frame);
    assert_eq!(
        (c.request_state, c.input_responses, c.creates_task),
        (None, false, false)
    );
}

fn call<'f, 'a>(frame: &'f ClientFrame<'a>) -> &'f ToolCall<'a> {
    match frame {
        ClientFrame::ToolCall(call) => call,
        other => panic!("expected a tool call, got {other:?}"),
    }
}

fn forwarded<'a>(frame: ClientFrame<'a>) -> Message<'a> {
    match frame {
        ClientFrame::Forward(message) => message,
        other => panic!("expected a forward, got {other:?}"),
    }
}

fn unreadable_call(line: &[u8]) -> (Option<&[u8]>, Anomaly) {
    match classify_client_line(line) {
        ClientFrame::UnreadableCall { id, anomaly } => (id, anomaly),
        other => panic!("expected an unreadable call, got {other:?}"),
    }
}

// --- tool calls -----------------------------------------------------------------------

#[test]
fn an_allowed_shape_call_classifies_with_exact_id_bytes_and_raw_arguments() {
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{ \"text\" : \"hi\\u0021\" }}}\n";
    let frame = classify_client_line(line);
    let call = call(&frame);
    assert_eq!(call.id, Some(b"7".as_slice()));
    assert_eq!(call.name, "echo");
    assert_eq!(
        call.arguments,
        Some(br#"{ "text" : "hi\u0021" }"#.as_slice())
    );
}

#[test]
fn an_id_beyond_two_to_the_53_keeps_its_digits() {
    let line = br#"{"id":12345678901234567890123,"method":"tools/call","params":{"name":"x"}}"#;
    let frame = classify_client_line(line);
    assert_eq!(call(&frame).id, Some(b"12345678901234567890123".as_slice()));
    let refused = refusal(b"12345678901234567890123", DENIED_BY_POLICY, "");
    assert!(refused.starts_with(br#"{"jsonrpc":"2.0","id":12345678901234567890123,"#));
}

#[test]
fn string_and_null_ids_are_kept_as_raw_bytes() {
    let line = br#"{"id":"a\u0062c","method":"tools/call","params":{"name":"x"}}"#;
    assert_eq!(
        call(&classify_client_line(line)).id,
        Some(br#""a\u0062c""#.as_slice())
    );
    let line = br#"{"id" : null ,"method":"tools/call","params":{"name":"x"}}"#;
    assert_eq!(
        call(&classify_client_line(line)).id,
        Some(b"null".as_slice())
    );
    let line = br#"{"method":"tools/call","params":{"name":"x"}}"#;
    assert_eq!(call(&classify_client_line(line)).id, None);
}

#[test]
fn arguments_are_optional_and_kept_whatever_their_type() {
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x"}}"#;
    assert_eq!(call(&classify_client_line(line)).arguments, None);
    let line = br#"{"id":1,"method":"tools/call","params":{"arguments":[1, 2],"name":"x"}}"#;
    assert_eq!(
        call(&classify_client_line(line)).arguments,
        Some(b"[1, 2]".as_slice())
    );
}

#[test]
fn an_escaped_tool_name_decodes_to_its_plain_spelling() {
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"\u0065cho"}}"#;
    assert_eq!(call(&classify_client_line(line)).name, "echo");
}

#[test]
fn a_surrogate_pair_in_the_name_decodes_to_one_character() {
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"a\ud83d\ude00"}}"#;
    assert_eq!(call(&classify_client_line(line)).name, "a\u{1F600}");
}

#[test]
fn an_escaped_method_is_still_a_tool_call() {
    let line = br#"{"id":1,"method":"tools\/c\u0061ll","params":{"name":"rm"}}"#;
    assert_eq!(call(&classify_client_line(line)).name, "rm");
}

#[test]
fn a_tool_call_without_an_id_is_still_a_tool_call() {
    let line = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"rm"}}"#;
    let frame = classify_client_line(line);
    assert_eq!(call(&frame).id, None);
}

// --- repeated and case-variant keys ---------------------------------------------------

#[test]
fn a_repeated_top_level_key_makes_the_frame_unreadable() {
    let line = br#"{"id":1,"method":"ping","id":2}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::DuplicateKey)
    );
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::DuplicateKey)
    );
}

#[test]
fn a_repeated_key_inside_params_makes_the_call_unreadable_with_its_id() {
    let line = br#"{"id":9,"method":"tools/call","params":{"name":"safe","name":"rm"}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"9".as_slice()), Anomaly::DuplicateKey)
    );
}

#[test]
fn a_repeated_key_inside_arguments_makes_the_call_unreadable_with_its_id() {
    let line =
        br#"{"id":"q","method":"tools/call","params":{"name":"x","arguments":{"p":1,"p":2}}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(br#""q""#.as_slice()), Anomaly::DuplicateKey)
    );
    let deep = br#"{"id":3,"method":"tools/call","params":{"name":"x","arguments":{"a":[{"b":{"c":1,"\u0063":2}}]}}}"#;
    assert_eq!(
        unreadable_call(deep),
        (Some(b"3".as_slice()), Anomaly::DuplicateKey)
    );
}

#[test]
fn the_same_key_in_sibling_objects_is_not_a_repeat() {
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}}}"#;
    assert_eq!(call(&classify_client_line(line)).name, "x");
}

#[test]
fn a_repeated_key_below_the_top_of_another_method_is_forwarded() {
    let line = br#"{"id":1,"method":"resources/read","params":{"uri":"a","uri":"b"}}"#;
    let message = forwarded(classify_client_line(line));
    assert_eq!(message.method.as_deref(), Some("resources/read"));
}

#[test]
fn a_case_variant_key_repeats_its_plain_spelling() {
    // Go's encoding/json and .NET's Web defaults read both as `method`; the last one wins.
    for line in [
        &br#"{"id":1,"method":"ping","Method":"tools/call","params":{"name":"x"}}"#[..],
        br#"{"id":1,"METHOD":"ping","method":"tools/call","params":{"name":"x"}}"#,
        br#"{"id":1,"ID":2,"method":"ping"}"#,
    ] {
        assert_eq!(
            classify_client_line(line),
            ClientFrame::Unreadable(Anomaly::DuplicateKey)
        );
    }
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"1".as_slice()), Anomaly::DuplicateKey)
    );
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":{"Key":1,"kEY":2}}}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"1".as_slice()), Anomaly::DuplicateKey)
    );
}

#[test]
fn a_case_variant_key_alone_is_read_as_its_plain_spelling() {
    let line = br#"{"ID":7,"Method":"tools/call","PARAMS":{"Name":"rm","Arguments":{"a":1}}}"#;
    let frame = classify_client_line(line);
    let call = call(&frame);
    assert_eq!(call.id, Some(b"7".as_slice()));
    assert_eq!(call.name, "rm");
    assert_eq!(call.arguments, Some(br#"{"a":1}"#.as_slice()));
}

#[test]
fn keys_fold_the_non_ascii_letters_that_readers_fold_to_ascii() {
    // Long s and the Kelvin sign (Go's folding), dotless i (.NET's upper-casing), dotted
    // capital I (Java's lower-casing).
    for (plain, key) in [
        ("params", r"param\u017f"),
        ("k", r"\u212a"),
        ("id", r"\u0131d"),
        ("id", r"\u0130d"),
        ("id", "\u{130}d"),
    ] {
        let line = format!(r#"{{"{plain}":1,"{key}":2}}"#);
        assert_eq!(
            classify_client_line(line.as_bytes()),
            ClientFrame::Unreadable(Anomaly::DuplicateKey),
            "{line}"
        );
    }
    let line = "{\"id\":1,\"method\":\"tools/call\",\"param\u{17f}\":{\"name\":\"rm\"}}";
    assert_eq!(call(&classify_client_line(line.as_bytes())).name, "rm");
}

/// The methods that only look like one the relay reads, from the list tests/hostile.rs
/// sends through a real relay: one JSON string token a line.
fn disguised_methods() -> impl Iterator<Item = &'static str> {
    include_str!("../../../tests/data/disguised_methods.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

#[test]
fn a_method_that_only_looks_like_one_the_relay_reads_is_a_disguise() {
    // Regression (issue 12, item 2): `Tools/Call` and `tools/call ` were forwarded undecided.
    for method in disguised_methods() {
        let line = format!(r#"{{"id":1,"method":{method},"params":{{"name":"x"}}}}"#);
        assert_eq!(
            classify_client_line(line.as_bytes()),
            ClientFrame::DisguisedMethod {
                id: Some(b"1".as_slice())
            },
            "{method}"
        );
        let batch = format!(r#"[{{"id":2,"method":{method}}}]"#);
        assert_eq!(
            classify_client_line(batch.as_bytes()),
            ClientFrame::BatchWithCall {
                ids: vec![b"2".as_slice()]
            },
            "{method} in a batch"
        );
    }
    let notification = br#"{"method":"Tools/Call","params":{"name":"x"}}"#;
    assert_eq!(
        classify_client_line(notification),
        ClientFrame::DisguisedMethod { id: None }
    );
    // The exact spellings, escaped or not, are themselves; other methods are forwarded.
    for method in [r#""tools\/call""#, r#""tools/\u0063all""#] {
        let line = format!(r#"{{"id":1,"method":{method},"params":{{"name":"x"}}}}"#);
        assert_eq!(call(&classify_client_line(line.as_bytes())).name, "x");
    }
    for method in [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/calls",
        "Ping",
    ] {
        let line = format!(r#"{{"id":1,"method":"{method}"}}"#);
        assert_eq!(
            forwarded(classify_client_line(line.as_bytes()))
                .method
                .as_deref(),
            Some(method)
        );
    }
}

#[test]
fn a_key_that_trims_to_method_params_name_or_arguments_is_a_disguise() {
    // A server that trims keys reads `"method "` as the method the relay read past.
    for key in [
        r#""method ""#,
        r#"" method""#,
        r#""me\u200bthod""#,
        r#""METHOD\u00a0""#,
        r#""_method""#,
    ] {
        let line = format!(r#"{{"id":1,{key}:"tools/call","params":{{"name":"x"}}}}"#);
        assert_eq!(
            classify_client_line(line.as_bytes()),
            ClientFrame::DisguisedKey {
                id: Some(b"1".as_slice())
            },
            "{key}"
        );
        let batch = format!(r#"[{{"id":2,{key}:"tools/call"}}]"#);
        assert_eq!(
            classify_client_line(batch.as_bytes()),
            ClientFrame::BatchWithCall {
                ids: vec![b"2".as_slice()]
            },
            "{key} in a batch"
        );
    }
    // Beside the real params, a trimming reader that keeps the last sees the other one.
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"echo"},"params ":{"name":"x"}}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::DisguisedKey {
            id: Some(b"1".as_slice())
        }
    );
    for params in [
        r#"{"name":"echo","name ":"delete_file"}"#,
        r#"{"name":"read","arguments":{"p":"/tmp"},"arguments ":{"p":"/etc"}}"#,
        r#"{"name":"read","argu\u200bments":{"p":"/etc"}}"#,
    ] {
        let line = format!(r#"{{"id":1,"method":"tools/call","params":{params}}}"#);
        assert_eq!(
            classify_client_line(line.as_bytes()),
            ClientFrame::UnreadableCall {
                id: Some(b"1".as_slice()),
                anomaly: Anomaly::DisguisedKey
            },
            "{params}"
        );
    }
    // Keys with other letters, and `id` spelled loosely (the call is then a notification,
    // refused anyway), are not disguises.
    let line = br#"{"id":1,"method":"tools/list","method_hint":"x","paramsx":1}"#;
    assert_eq!(
        forwarded(classify_client_line(line)).method.as_deref(),
        Some("tools/list")
    );
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x","name_hint":"y","arguments":{"name ":1}}}"#;
    assert_eq!(call(&classify_client_line(line)).name, "x");
}

#[test]
fn the_refusal_of_a_disguised_method_is_a_json_rpc_error_with_the_id_as_written() {
    let line = disguised_method_refusal(br#""a\u0062""#);
    let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(v["id"], "ab");
    assert_eq!(v["error"]["code"], -32600);
    assert_eq!(v["error"]["message"], DENIED_DISGUISED_METHOD);
    assert!(line.starts_with(br#"{"jsonrpc":"2.0","id":"a\u0062","#));
    assert!(line.ends_with(b"}\n"));
}

#[test]
fn a_call_carries_the_protocol_version_its_meta_names() {
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    assert_eq!(
        call(&classify_client_line(line))
            .protocol_version
            .as_deref(),
        Some("2026-07-28")
    );
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x"}}"#;
    assert_eq!(call(&classify_client_line(line)).protocol_version, None);
}

#[test]
fn an_escaped_key_duplicates_its_plain_spelling() {
    let line = br#"{"id":1,"method":"ping","met\u0068od":"tools/call"}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::DuplicateKey)
    );
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"1".as_slice()), Anomaly::DuplicateKey)
    );
}

#[test]
fn keys_with_the_same_lone_surrogate_are_repeats_and_different_ones_are_not() {
    let line = br#"{"id":1,"\ud800":1,"\ud800":2}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::DuplicateKey)
    );
    let line = br#"{"id":1,"method":"x","\ud800":1,"\udc00":2,"\ud800\udc00":3}"#;
    assert_eq!(
        forwarded(classify_client_line(line)).method.as_deref(),
        Some("x")
    );
}

// --- unreadable calls -----------------------------------------------------------------

#[test]
fn a_name_that_is_not_a_string_makes_the_call_unreadable() {
    for name in [
        &b"1"[..],
        b"null",
        b"[\"echo\"]",
        b"{\"n\":\"echo\"}",
        b"true",
    ] {
        let mut line = br#"{"id":4,"method":"tools/call","params":{"name":"#.to_vec();
        line.extend_from_slice(name);
        line.extend_from_slice(b"}}");
        assert_eq!(
            unreadable_call(&line),
            (Some(b"4".as_slice()), Anomaly::UnreadableCall)
        );
    }
}

#[test]
fn a_control_character_in_the_method_or_a_key_is_ambiguous() {
    // A C-string reader stops at the NUL and sees tools/call.
    // A method that is otherwise tools/call is a disguise, refused with an answer.
    let line = br#"{"id":1,"method":"tools/call\u0000","params":{"name":"x"}}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::DisguisedMethod {
            id: Some(b"1".as_slice())
        }
    );
    let line = br#"{"id":1,"method":"ping\u0000","params":{"name":"x"}}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::Ambiguous)
    );
    let line = br#"{"id":1,"method\u0000x":"tools/call","params":{"name":"x"}}"#;
    assert!(matches!(
        classify_client_line(line),
        ClientFrame::Unreadable(_)
    ));
    let line = br#"{"id":1,"method":"tools/call","params":{"name":"x","arguments\u0001":{}}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"1".as_slice()), Anomaly::Ambiguous)
    );
}

#[test]
fn a_carriage_return_inside_a_line_is_a_framing_anomaly() {
    // Python's universal newlines and Node's readline would read three lines here, the
    // middle one a tools/call.
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":\r{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}\r}\n";
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::Framing)
    );
    let ok = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\r\n";
    assert!(matches!(classify_client_line(ok), ClientFrame::Forward(_)));
}

#[test]
fn an_absent_name_makes_the_call_unreadable() {
    let line = br#"{"id":4,"method":"tools/call","params":{"title":"echo","arguments":{}}}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"4".as_slice()), Anomaly::UnreadableCall)
    );
}

#[test]
fn absent_params_or_params_that_are_not_an_object_make_the_call_unreadable() {
    let line = br#"{"id":4,"method":"tools/call"}"#;
    assert_eq!(
        unreadable_call(line),
        (Some(b"4".as_slice()), Anomaly::UnreadableCall)
    );
    for params in ["null", "[\"echo\"]", "\"echo\"", "3"] {
        let line = format!(r#"{{"id":4,"method":"tools/call","params":{params}}}"#);
        assert_eq!(
            unreadable_call(line.as_bytes()),
            (Some(b"4".as_slice()), Anomaly::UnreadableCall)
        );
    }
}

#[test]
fn a_lone_surrogate_in_the_name_makes_the_call_unreadable() {
    for name in [
        r#""\ud800""#,
        r#""echo\udc00""#,
        r#""\ud800\u0041""#,
        r#""\udc00\ud800""#,
    ] {
        let line = format!(r#"{{"id":5,"method":"tools/call","params":{{"name":{name}}}}}"#);
        assert_eq!(
            unreadable_call(line.as_bytes()),
            (Some(b"5".as_slice()), Anomaly::UnreadableCall)
        );
    }
}

#[test]
fn a_method_with_a_lone_surrogate_is_not_a_method() {
    let line = br#"{"id":1,"method":"ping\ud800","params":{"name":"x"}}"#;
    assert_eq!(forwarded(classify_client_line(line)).method, None);
    // A reader that drops or replaces the surrogate sees tools/call: a disguise.
    let line = br#"{"id":1,"method":"tools/call\ud800","params":{"name":"x"}}"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::DisguisedMethod {
            id: Some(b"1".as_slice())
        }
    );
}

#[test]
fn a_method_that_is_not_a_string_is_forwarded_without_a_method() {
    let line = br#"{"id":1,"method":["tools/call"],"params":{"name":"x"}}"#;
    let message = forwarded(classify_client_line(line));
    assert_eq!(message.method, None);
    assert_eq!(message.id, Some(b"1".as_slice()));
}

// --- malformed, framing, blank ---------------------------------------------------------

#[test]
fn lines_that_are_not_exactly_one_valid_json_value_are_malformed() {
    let cases: &[&[u8]] = &[
        b"{\"a\":NaN}",
        b"{\"a\":Infinity}",
        b"{\"a\":-Infinity}",
        b"NaN",
        b"{\"a\":1} junk",
        b"{\"a\":1}x",
        b"{\"a\":1,}",
        b"[1,2,]",
        b"[,1]",
        b"{\"a\":01}",
        b"0123",
        b"-",
        b"1.",
        b".5",
        b"1e",
        b"1e+",
        b"+1",
        b"1.5.2",
        b"truex",
        b"nul",
        b"{\"a\" 1}",
        b"{a:1}",
        b"{'a':1}",
        b"{\"a\":1 // comment\n}",
        b"/* c */ {}",
        b"{\"a\":\"\x01\"}",
        b"{\"a\":\"tab\there\"}",
        b"{\"a\":\"\\x41\"}",
        b"{\"a\":\"\\u12\"}",
        b"{\"a\":\"\\u12G4\"}",
        b"{\"a\":\"unterminated}",
        b"{\"a\":\"\xff\"}",
        b"{\"a\":\"\xc0\xaf\"}",
        b"{\"a\":\"\xed\xa0\x80\"}",
        b"{\"a\":\"\xf4\x90\x80\x80\"}",
        b"{\"a\":\"\xe2\x82\"}",
        b"\xef\xbb\xbf{}",
        b"\xff",
        b"{\"a\":1",
        b"{\"a\":1}}",
        b"]",
        b"{\"a\":1}\x0b",
        b"{}\n{",
    ];
    for case in cases {
        assert_eq!(
            classify_client_line(case),
            ClientFrame::Unreadable(Anomaly::MalformedJson),
            "{}",
            String::from_utf8_lossy(case)
        );
    }
}

#[test]
fn two_values_on_one_line_are_a_framing_anomaly() {
    let cases: &[&[u8]] = &[
        b"{\"a\":1}{\"b\":2}",
        b"{} {}\n",
        b"[] {}",
        b"1 2",
        b"\"a\"\"b\"",
        b"{}\n{}\n",
        b"{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}} null",
    ];
    for case in cases {
        assert_eq!(
            classify_client_line(case),
            ClientFrame::Unreadable(Anomaly::Framing),
            "{}",
            String::from_utf8_lossy(case)
        );
    }
}

#[test]
fn a_whitespace_only_line_is_blank() {
    for case in [&b""[..], b"\n", b"\r\n", b" \t \r\n", b"   "] {
        assert_eq!(classify_client_line(case), ClientFrame::Blank);
    }
}

#[test]
fn surrounding_whitespace_and_a_missing_newline_are_fine() {
    let with = br#" {"id":1,"method":"ping"} \r\n"#.replace_crlf();
    let message = forwarded(classify_client_line(&with));
    assert_eq!(message.id, Some(b"1".as_slice()));
    let without = br#"{"id":1,"method":"ping"}"#;
    assert_eq!(
        forwarded(classify_client_line(without)).method.as_deref(),
        Some("ping")
    );
}

/// `br"..."` cannot hold a real CR LF; this turns a literal `\r\n` into one.
trait ReplaceCrlf {
    fn replace_crlf(&self) -> Vec<u8>;
}
impl ReplaceCrlf for [u8] {
    fn replace_crlf(&self) -> Vec<u8> {
        String::from_utf8(self.to_vec())
            .unwrap()
            .replace("\\r\\n", "\r\n")
            .into_bytes()
    }
}

#[test]
fn a_top_level_scalar_is_forwarded_as_no_message() {
    for case in [
        &b"null\n"[..],
        b"42",
        b"-1.5e3",
        b"\"tools/call\"",
        b"true",
        b"false",
        b"-0",
        b"0.5e-3",
        b"1E+2",
        br#""\u00e9\n\/""#,
    ] {
        assert_eq!(
            classify_client_line(case),
            ClientFrame::Forward(Message::default())
        );
    }
}

#[test]
fn a_forwarded_message_points_at_the_exact_envelope_bytes() {
    let line = br#"{"jsonrpc":"2.0", "id" : [1] , "method":"x","params": {"a" : 1},"result":{},"error":null}"#;
    let message = forwarded(classify_client_line(line));
    assert_eq!(message.id, Some(b"[1]".as_slice()));
    assert_eq!(message.method, Some(Cow::Borrowed("x")));
    assert_eq!(message.params, Some(br#"{"a" : 1}"#.as_slice()));
    assert_eq!(message.result, Some(b"{}".as_slice()));
    assert_eq!(message.error, Some(b"null".as_slice()));
}

#[test]
fn a_response_from_the_client_is_forwarded() {
    let line = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
    let message = forwarded(classify_client_line(line));
    assert_eq!(message.method, None);
    assert_eq!(message.result, Some(br#"{"content":[]}"#.as_slice()));
}

#[test]
fn nesting_up_to_the_limit_is_read_and_deeper_is_malformed() {
    let objects = |depth: usize| {
        let mut line = "{\"a\":".repeat(depth);
        line.push('1');
        line.push_str(&"}".repeat(depth));
        line
    };
    let at_limit = objects(JSON_DEPTH_MAX);
    assert_eq!(
        classify_client_line(at_limit.as_bytes()),
        ClientFrame::Forward(Message::default())
    );
    assert_eq!(
        classify_client_line(objects(JSON_DEPTH_MAX + 1).as_bytes()),
        ClientFrame::Unreadable(Anomaly::MalformedJson)
    );
    let arrays = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(
        classify_client_line(arrays(JSON_DEPTH_MAX).as_bytes()),
        ClientFrame::Unreadable(Anomaly::Batch)
    );
    assert_eq!(
        classify_client_line(arrays(JSON_DEPTH_MAX + 1).as_bytes()),
        ClientFrame::Unreadable(Anomaly::MalformedJson)
    );
}

#[test]
fn very_deep_nesting_is_malformed_without_overflowing_the_stack() {
    let depth = 1_000_000;
    let mut line = "[".repeat(depth);
    line.push_str(&"]".repeat(depth));
    assert_eq!(
        classify_client_line(line.as_bytes()),
        ClientFrame::Unreadable(Anomaly::MalformedJson)
    );
    let open_only = "{\"a\":[".repeat(depth);
    assert_eq!(
        classify_client_line(open_only.as_bytes()),
        ClientFrame::Unreadable(Anomaly::MalformedJson)
    );
    assert_eq!(inspect_server_line(line.as_bytes()), Message::default());
}

#[test]
fn a_call_whose_arguments_nest_too_deep_is_malformed() {
    let depth = JSON_DEPTH_MAX;
    let line = format!(
        r#"{{"id":1,"method":"tools/call","params":{{"name":"x","arguments":{}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert_eq!(
        classify_client_line(line.as_bytes()),
        ClientFrame::Unreadable(Anomaly::MalformedJson)
    );
}

// --- batches --------------------------------------------------------------------------

#[test]
fn a_batch_with_a_call_lists_every_id_including_null_and_skips_notifications() {
    let line = br#"[{"id":1,"method":"ping"},{"method":"notifications/x"},{"id":null,"method":"tools/call","params":{"name":"x"}},{"id":"s","method":"tools/list"}]"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::BatchWithCall {
            ids: vec![b"1".as_slice(), b"null".as_slice(), br#""s""#.as_slice()]
        }
    );
}

#[test]
fn a_batch_whose_call_is_itself_unreadable_is_still_a_batch_with_a_call() {
    let line = br#"[{"id":1,"method":"tools/call","params":{"name":1}}]"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::BatchWithCall {
            ids: vec![b"1".as_slice()]
        }
    );
}

#[test]
fn a_batch_of_notifications_with_a_call_has_no_ids() {
    let line = br#"[{"method":"tools/call","params":{"name":"x"}}]"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::BatchWithCall { ids: vec![] }
    );
}

#[test]
fn a_batch_without_a_call_is_forwarded() {
    let line = br#"[{"id":1,"method":"ping"},{"method":"tools/list"},{"id":2,"result":{}}]"#;
    assert_eq!(classify_client_line(line), ClientFrame::BatchForward);
    assert_eq!(classify_client_line(b"[]\n"), ClientFrame::BatchForward);
    assert_eq!(classify_client_line(b"[ ]"), ClientFrame::BatchForward);
}

#[test]
fn a_batch_with_an_element_that_is_not_an_object_is_unreadable() {
    for line in [
        &br#"[{"id":1,"method":"ping"},1]"#[..],
        br#"[null]"#,
        br#"[[{"id":1,"method":"tools/call","params":{"name":"x"}}]]"#,
        br#"["tools/call"]"#,
    ] {
        assert_eq!(
            classify_client_line(line),
            ClientFrame::Unreadable(Anomaly::Batch)
        );
    }
}

#[test]
fn a_batch_with_an_element_that_repeats_a_key_is_unreadable() {
    let line = br#"[{"id":1,"method":"ping","method":"tools/call","params":{"name":"x"}}]"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::Unreadable(Anomaly::Batch)
    );
}

#[test]
fn an_escaped_method_in_a_batch_is_still_a_call() {
    let line = br#"[{"id":1,"method":"tools\/call","params":{"name":"x"}}]"#;
    assert_eq!(
        classify_client_line(line),
        ClientFrame::BatchWithCall {
            ids: vec![b"1".as_slice()]
        }
    );
}

#[test]
fn args_digest_hashes_the_raw_bytes_and_absent_as_empty() {
    assert_eq!(
        args_digest(None),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        args_digest(Some(b"null")),
        "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
    );
    assert_eq!(args_digest(Some(b"null")), sha256_hex(b"null"));
    assert_ne!(
        args_digest(Some(b"{\"a\":1}")),
        args_digest(Some(b"{ \"a\":1}"))
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn every_anomaly_has_a_stable_name_and_a_description() {
    let all = [
        (Anomaly::MalformedJson, "malformed_json"),
        (Anomaly::Framing, "framing"),
        (Anomaly::DuplicateKey, "duplicate_key"),
        (Anomaly::UnreadableCall, "unreadable_call"),
        (Anomaly::Batch, "batch"),
        (Anomaly::Oversized, "oversized"),
        (Anomaly::DuplicateId, "duplicate_id"),
    ];
    for (anomaly, name) in all {
        assert_eq!(anomaly.as_str(), name);
        assert!(!anomaly.describe().is_empty());
    }
}

// --- robustness -----------------------------------------------------------------------

/// Deterministic linear congruential generator (Knuth's MMIX constants).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ALPHABET: &[u8] = b"{}[]:,\"\\ \n\t0123456789-+.eEtrufalsnidmhopc/xu\x01\xff\xc3\xa9";

fn random_line(rng: &mut Lcg) -> Vec<u8> {
    let len = rng.below(40);
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect()
}

fn mutated_call(rng: &mut Lcg) -> Vec<u8> {
    let mut line =
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,"\u00e9"]}}}"#
            .to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(line.len());
        match rng.below(3) {
            0 => line[at] = ALPHABET[rng.below(ALPHABET.len())],
            1 => {
                line.remove(at);
            }
            _ => line.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
        }
    }
    line
}

#[test]
fn random_bytes_never_panic_and_agree_with_serde_json_on_validity() {
    let mut rng = Lcg(0x5eed);
    for round in 0..20_000 {
        let line = if round % 2 == 0 {
            random_line(&mut rng)
        } else {
            mutated_call(&mut rng)
        };
        let frame = classify_client_line(&line);
        let _ = inspect_server_line(&line);
        // serde_json differs from RFC 8259 only on lone surrogates (it rejects them), which
        // need a backslash, so compare only lines without one.
        if line.contains(&b'\\') {
            continue;
        }
        let ours = !matches!(
            frame,
            ClientFrame::Blank | ClientFrame::Unreadable(Anomaly::MalformedJson | Anomaly::Framing)
        );
        let theirs = serde_json::from_slice::<serde_json::Value>(&line).is_ok();
        assert_eq!(
            ours,
            theirs,
            "{:?} -> {frame:?}",
            String::from_utf8_lossy(&line)
        );
    }
}

#[test]
fn every_slice_handed_out_lies_inside_the_line() {
    let line = br#" {"id": 5 ,"method":"tools/call","params":{"name":"n","arguments": [1] }} "#;
    let frame = classify_client_line(line);
    let call = call(&frame);
    let range = line.as_ptr_range();
    for slice in [call.id.unwrap(), call.arguments.unwrap()] {
        assert!(range.contains(&slice.as_ptr()));
    }
    assert_eq!(call.arguments, Some(b"[1]".as_slice()));
}

#[test]
fn a_long_plain_argument_still_classifies_with_its_exact_bytes() {
    let text = "x".repeat(100_003);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"w\",\"arguments\":{{\"t\":\"{text}\\u00e9\\n\"}}}}}}"
    );
    let frame = classify_client_line(line.as_bytes());
    let args = call(&frame).arguments.unwrap();
    assert_eq!(args.len(), text.len() + 16);
    assert!(args.ends_with(b"\\u00e9\\n\"}"));
    // A control character deep in a long run is still refused.
    let bad = line.replacen("xxxxxxxx", "xxx\u{1}xxxx", 1);
    assert!(matches!(
        classify_client_line(bad.as_bytes()),
        ClientFrame::UnreadableCall { .. } | ClientFrame::Unreadable(_)
    ));
}
