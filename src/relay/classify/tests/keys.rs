//! Repeated, case-variant, escaped and disguised keys and methods.

use super::*;

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
    include_str!("../../../../tests/data/disguised_methods.txt")
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
