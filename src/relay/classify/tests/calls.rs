//! Tool calls: ids, names, arguments, what a call carries, its digest and anomaly names.

use super::*;

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
