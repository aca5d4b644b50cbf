//! Server lines read best effort, results, and `requestState` keys.

use super::*;

#[test]
fn only_an_input_required_result_gives_a_request_state() {
    assert_eq!(
        input_required_state(br#"{"resultType":"input_required","requestState":"abc"}"#),
        Some(b"abc".to_vec())
    );
    assert_eq!(
        input_required_state(br#"{"resultType":"input_required","requestState":{"n":1}}"#),
        Some(br#"{"n":1}"#.to_vec())
    );
    assert_eq!(
        input_required_state(br#"{"resultType":"complete","requestState":"abc"}"#),
        None
    );
    assert_eq!(
        input_required_state(br#"{"resultType":"input_required"}"#),
        None
    );
    assert_eq!(
        input_required_state(
            br#"{"resultType":"input_required","requestState":"a","requestState":"b"}"#
        ),
        None,
        "a repeated key is ambiguous"
    );
}

// --- server lines ---------------------------------------------------------------------

#[test]
fn a_server_response_is_inspected_best_effort() {
    let line = br#"{"jsonrpc":"2.0","id":12345678901234567890123,"result":{"isError":true}}"#;
    let message = inspect_server_line(line);
    assert_eq!(message.id, Some(b"12345678901234567890123".as_slice()));
    assert_eq!(message.result, Some(br#"{"isError":true}"#.as_slice()));
    assert!(result_is_error(message.result.unwrap()));
    let request = inspect_server_line(br#"{"id":1,"method":"sampling/createMessage"}"#);
    assert_eq!(request.method.as_deref(), Some("sampling/createMessage"));
    let error = inspect_server_line(br#"{"id":"a","error":{"code":-1}}"#);
    assert_eq!(error.error, Some(br#"{"code":-1}"#.as_slice()));
}

#[test]
fn an_unreadable_server_line_gives_an_empty_message() {
    for line in [
        &br#"{"id":1,"id":2,"result":{}}"#[..],
        b"[{\"id\":1}]",
        b"{\"id\":1}{\"id\":2}",
        b"not json",
        b"\xff",
        b"",
        b"7",
    ] {
        assert_eq!(inspect_server_line(line), Message::default());
    }
}

#[test]
fn result_is_error_only_for_an_object_whose_is_error_is_true() {
    assert!(result_is_error(br#"{"content":[],"isError":true}"#));
    assert!(result_is_error(br#"{ "isError" : true }"#));
    assert!(!result_is_error(br#"{"isError":false}"#));
    assert!(!result_is_error(br#"{"isError":"true"}"#));
    // Keys fold as a case-insensitive client reads them.
    assert!(result_is_error(br#"{"IsError":true}"#));
    assert!(!result_is_error(br#"{"isError":true,"ISERROR":false}"#));
    assert!(!result_is_error(br#"{}"#));
    assert!(!result_is_error(b"true"));
    assert!(!result_is_error(br#"{"isError":true,"isError":false}"#));
    assert!(!result_is_error(b"{\"isError\":true"));
}
