//! Calls the relay cannot read: their anomaly, and the id they keep.

use super::*;

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
