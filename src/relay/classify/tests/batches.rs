//! Batches: with a call (refused whole, every id listed) or without (forwarded).

use super::*;

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
