//! Learning the negotiated revision from `initialize` and `server/discover`, and the
//! revision-dependent shape of results.

use super::*;
use crate::mcp::envelope::inspect_server_line;

#[test]
fn the_result_type_is_required_from_2026_07_28() {
    assert!(!requires_result_type(""));
    assert!(!requires_result_type("2024-11-05"));
    assert!(!requires_result_type("2025-11-25"));
    assert!(!requires_result_type("2026-07-27"));
    assert!(requires_result_type("2026-07-28"));
    assert!(requires_result_type("2026-12-01"));
}

// --- negotiation --------------------------------------------------------------------------

fn feed_client(negotiation: &mut Negotiation, line: &str) {
    // The envelope of a handshake request reads the same from either side.
    negotiation.on_client(&inspect_server_line(line.as_bytes()));
}

fn feed_server(negotiation: &mut Negotiation, line: &str) {
    negotiation.on_server(&inspect_server_line(line.as_bytes()));
}

fn discover(proposal: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{proposal}"}}}}}}"#
    )
}

#[test]
fn an_initialize_response_sets_the_version() {
    let mut negotiation = Negotiation::default();
    feed_client(
        &mut negotiation,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
    );
    assert_eq!(negotiation.version(), "");
    feed_server(
        &mut negotiation,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01"}}"#,
    );
    assert_eq!(negotiation.version(), "");
    feed_server(
        &mut negotiation,
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}"#,
    );
    assert_eq!(negotiation.version(), "2025-06-18");
}

#[test]
fn a_server_request_with_the_handshake_id_is_not_its_answer() {
    let mut negotiation = Negotiation::default();
    feed_client(
        &mut negotiation,
        r#"{"id":0,"method":"initialize","params":{}}"#,
    );
    feed_server(
        &mut negotiation,
        r#"{"id":0,"method":"x","result":{"protocolVersion":"2026-07-28"}}"#,
    );
    assert_eq!(negotiation.version(), "");
    feed_server(
        &mut negotiation,
        r#"{"id":0,"result":{"protocolVersion":"2025-11-25"}}"#,
    );
    assert_eq!(negotiation.version(), "2025-11-25");
}

#[test]
fn discover_picks_the_proposal_when_listed() {
    let mut negotiation = Negotiation::default();
    feed_client(&mut negotiation, &discover("2026-07-28"));
    feed_server(
        &mut negotiation,
        r#"{"id":"d","result":{"supportedVersions":["2025-11-25","2026-07-28"]}}"#,
    );
    assert_eq!(negotiation.version(), "2026-07-28");
}

#[test]
fn discover_picks_the_largest_listed_version_below_the_proposal() {
    let mut negotiation = Negotiation::default();
    feed_client(&mut negotiation, &discover("2026-07-28"));
    feed_server(
        &mut negotiation,
        r#"{"id":"d","result":{"supportedVersions":["2024-11-05","2025-11-25","2027-01-01","2025-06-18"]}}"#,
    );
    assert_eq!(negotiation.version(), "2025-11-25");
}

#[test]
fn discover_with_nothing_at_or_below_the_proposal_gives_no_version() {
    let mut negotiation = Negotiation::default();
    feed_client(&mut negotiation, &discover("2026-07-28"));
    feed_server(
        &mut negotiation,
        r#"{"id":"d","result":{"supportedVersions":["2027-01-01"]}}"#,
    );
    assert_eq!(negotiation.version(), "");
}

#[test]
fn a_discover_error_or_unusable_list_changes_nothing() {
    for answer in [
        r#"{"id":"d","error":{"code":-32601,"message":"Method not found"}}"#,
        r#"{"id":"d","result":{}}"#,
        r#"{"id":"d","result":{"supportedVersions":"2026-07-28"}}"#,
        r#"{"id":"d","result":{"supportedVersions":["2026-07-28",1]}}"#,
    ] {
        let mut negotiation = Negotiation::default();
        feed_client(
            &mut negotiation,
            r#"{"id":0,"method":"initialize","params":{}}"#,
        );
        feed_server(
            &mut negotiation,
            r#"{"id":0,"result":{"protocolVersion":"2025-06-18"}}"#,
        );
        feed_client(&mut negotiation, &discover("2026-07-28"));
        feed_server(&mut negotiation, answer);
        assert_eq!(negotiation.version(), "2025-06-18", "{answer}");
    }
}

#[test]
fn an_unnamespaced_proposal_is_ignored() {
    let mut negotiation = Negotiation::default();
    feed_client(
        &mut negotiation,
        r#"{"id":"d","method":"server/discover","params":{"_meta":{"protocolVersion":"2025-06-18"}}}"#,
    );
    // No proposal: the newest listed revision.
    feed_server(
        &mut negotiation,
        r#"{"id":"d","result":{"supportedVersions":["2025-06-18","2026-07-28"]}}"#,
    );
    assert_eq!(negotiation.version(), "2026-07-28");
}

#[test]
fn a_re_escaped_string_id_still_matches() {
    let mut negotiation = Negotiation::default();
    feed_client(
        &mut negotiation,
        r#"{"id":"\u0069","method":"initialize","params":{}}"#,
    );
    feed_server(
        &mut negotiation,
        r#"{"id":"i","result":{"protocolVersion":"2025-11-25"}}"#,
    );
    assert_eq!(negotiation.version(), "2025-11-25");
}

#[test]
fn a_request_protocol_version_is_read_from_the_namespaced_meta_key() {
    let params =
        br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}"#;
    assert_eq!(
        request_protocol_version(params).as_deref(),
        Some("2026-07-28")
    );
    assert_eq!(
        request_protocol_version(br#"{"_meta":{"protocolVersion":"2026-07-28"}}"#),
        None
    );
    assert_eq!(
        request_protocol_version(br#"{"_meta":{"io.modelcontextprotocol/protocolVersion":1}}"#),
        None
    );
    assert_eq!(request_protocol_version(b"[]"), None);
}
