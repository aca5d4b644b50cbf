//! The refusal lines, byte for byte, and every refusal text's wording rules.

use super::*;
use crate::mcp::version::Negotiation;

// --- refusals -------------------------------------------------------------------------

#[test]
fn a_refusal_in_the_older_shape_is_exact() {
    assert_eq!(
        String::from_utf8(refusal(b"7", "No.", "2025-11-25")).unwrap(),
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"No.\"}],\"isError\":true}}\n"
    );
}

#[test]
fn a_refusal_in_the_newer_shape_says_its_result_type() {
    assert_eq!(
        String::from_utf8(refusal(br#""a""#, "No.", "2026-07-28")).unwrap(),
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"No.\"}],\"isError\":true,\"resultType\":\"complete\"}}\n"
    );
    assert!(
        String::from_utf8(refusal(b"1", "No.", "2027-01-01"))
            .unwrap()
            .contains("resultType")
    );
}

#[test]
fn a_refusal_before_any_handshake_uses_the_older_shape() {
    let negotiation = Negotiation::default();
    assert_eq!(negotiation.version(), "");
    let line = refusal(b"null", DENIED_UNREADABLE, negotiation.version());
    assert!(!String::from_utf8(line).unwrap().contains("resultType"));
}

#[test]
fn refusal_text_is_escaped_as_a_json_string() {
    let line = refusal(b"1", "a\"b\\c\nd\u{1}é", "");
    let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(value["result"]["content"][0]["text"], "a\"b\\c\nd\u{1}é");
    assert!(line.ends_with(b"}}\n"));
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
}

#[test]
fn every_refusal_text_says_why_and_call_refusals_say_not_to_retry() {
    for text in [
        DENIED_BY_POLICY,
        DENIED_NO_DECISION,
        DENIED_UNREADABLE,
        DENIED_BY_PERSON,
        DENIED_APPROVAL_TIMEOUT,
        DENIED_APPROVAL_ENDED,
        DENIED_ARGUMENTS_UNKNOWN,
    ] {
        assert!(text.starts_with("Holdcall refused this call: "), "{text}");
        assert!(text.ends_with("Do not retry automatically."), "{text}");
        assert!(!text.contains("  "), "{text}");
        let line = refusal(b"1", text, "2026-07-28");
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["result"]["content"][0]["text"], text);
        assert_eq!(value["result"]["isError"], true);
    }
    assert!(DENIED_BATCH.starts_with("Holdcall refused this batch: "));
    assert!(!DENIED_BATCH.contains("  "));
}

#[test]
fn a_batch_refusal_is_exact() {
    let ids: [&[u8]; 3] = [b"1", b"null", br#""x""#];
    assert_eq!(
        String::from_utf8(batch_refusal(&ids, "No.").unwrap()).unwrap(),
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"No.\"}},\
         {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\"No.\"}},\
         {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":-32000,\"message\":\"No.\"}}]\n"
    );
    let line = batch_refusal(&ids, DENIED_BATCH).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(value[2]["error"]["message"], DENIED_BATCH);
}

#[test]
fn an_empty_id_is_refused_as_null_so_the_line_stays_json() {
    let line = refusal(b"", "No.", "");
    assert!(line.starts_with(br#"{"jsonrpc":"2.0","id":null,"#));
    let ids: [&[u8]; 1] = [b""];
    let line = batch_refusal(&ids, "No.").unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&line).is_ok());
}

#[test]
fn a_batch_refusal_without_ids_is_none() {
    assert_eq!(batch_refusal(&[], DENIED_BATCH), None);
}
