//! Server lines read best effort, results, and `requestState` keys.

use super::*;
use crate::limits::JSON_DEPTH_MAX;

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

fn nested(depth: usize) -> Vec<u8> {
    let mut v = b"{\"a\":".to_vec();
    v.extend(std::iter::repeat_n(b'[', depth - 1));
    v.extend(std::iter::repeat_n(b']', depth - 1));
    v.push(b'}');
    v
}

/// The lines the one-scan readers are held to: every shape of object, junk, repeated keys, and
/// nesting on both sides of `JSON_DEPTH_MAX`.
fn object_lines() -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = [
        &br#"{}"#[..],
        br#"  { "a" : 1 , "b" : [true, null, {"c": "d\"e\u00e9"}] }  "#,
        br#"{"a":1}{"b":2}"#,
        br#"{"a":1} x"#,
        br#"{"a":1,}"#,
        br#"{"a" 1}"#,
        br#"{"a":1,"A":2}"#,
        br#"{"a":{"b":1,"b":2}}"#,
        br#"{"a":{"b":1,"b":2},"x":}"#,
        br#"{"a":1,"a":2,"x":}"#,
        br#"{"k":"\ud800"}"#,
        br#"{"a":"unterminated}"#,
        br#"{"a":01}"#,
        b"{\"a\":\"\x01\"}",
    ]
    .iter()
    .map(|l| l.to_vec())
    .collect();
    for depth in [JSON_DEPTH_MAX - 1, JSON_DEPTH_MAX, JSON_DEPTH_MAX + 1] {
        lines.push(nested(depth));
    }
    lines
}

#[test]
fn one_object_reads_a_line_as_one_value_then_members_read_it() {
    for line in object_lines() {
        let two_scans = match one_value(&line) {
            Ok(Some(value)) => members(value).ok_or(NotOneValue::Malformed),
            Ok(None) => unreachable!("every line here holds a value"),
            Err(e) => Err(e),
        };
        let one_scan = one_object(&line).map(|o| o.members);
        let keys = |r: &Result<Vec<Member<'_>>, NotOneValue>| {
            r.as_ref()
                .map(|ms| {
                    ms.iter()
                        .map(|m| (m.key.to_vec(), m.folded.clone(), m.value.to_vec()))
                        .collect::<Vec<_>>()
                })
                .map_err(|e| *e)
        };
        assert_eq!(
            keys(&one_scan),
            keys(&two_scans),
            "{}",
            String::from_utf8_lossy(&line)
        );
    }
}

#[test]
fn members_that_check_keys_find_what_a_checking_scan_of_the_whole_object_finds() {
    for line in object_lines() {
        let line = line.trim_ascii();
        let whole = scan_value(line, 0, Keys::Check).map(|end| end == line.len());
        let members = members_at(line, 0, Keys::Check).map(|(_, end)| end == line.len());
        assert_eq!(members, whole, "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn the_params_a_line_scan_reads_are_what_a_checking_scan_of_params_alone_reads() {
    let mut lines: Vec<Vec<u8>> = [
        &br#"{"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}"#[..],
        br#"{"params":{"name":"x","name":"y"},"method":"tools/call"}"#,
        br#"{"PARAMS":{"arguments":{"a":{"b":1,"B":2}}}}"#,
        br#"{"params":{"a":"\u00e9\"","b":[{"c":1},{"c":1}]}}"#,
        br#"{"params":[1,2],"x":{"params":{"a":1,"a":2}}}"#,
        br#"{"params":{"a":1,"a":2},"params":{"b":1}}"#,
        br#"{"params":{}}"#,
    ]
    .iter()
    .map(|l| l.to_vec())
    .collect();
    // `params` holding nesting on both sides of the depth limit.
    for depth in [JSON_DEPTH_MAX - 2, JSON_DEPTH_MAX - 1, JSON_DEPTH_MAX] {
        let mut l = b"{\"params\":".to_vec();
        l.extend(nested(depth));
        l.push(b'}');
        lines.push(l);
    }
    for line in lines {
        let text = String::from_utf8_lossy(&line).into_owned();
        let Ok(object) = one_object(&line) else {
            assert!(one_value(&line).is_err(), "{text}");
            continue;
        };
        let raw = member(&object.members, "params").filter(|p| p.first() == Some(&b'{'));
        let alone = raw.map(|p| {
            members_at(p, 0, Keys::Check).map(|(ms, end)| {
                assert_eq!(end, p.len());
                ms.iter().map(|m| m.value.to_vec()).collect::<Vec<_>>()
            })
        });
        let read = object
            .params
            .map(|r| r.map(|ms| ms.iter().map(|m| m.value.to_vec()).collect::<Vec<_>>()));
        assert_eq!(read, alone, "{text}");
    }
}
