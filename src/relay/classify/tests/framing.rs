//! Lines that are not exactly one JSON value: malformed, framing, blank, nesting.

use super::*;

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
