//! The one decoder: whole tokens, and the errors each caller maps to its own words.

use super::*;

// --- strings and digests --------------------------------------------------------------

#[test]
fn decode_json_string_reads_exactly_one_valid_string() {
    assert_eq!(
        decode_json_string(br#""a\"\\\/\b\f\n\r\t\u00e9""#).as_deref(),
        Some("a\"\\/\u{8}\u{c}\n\r\té")
    );
    assert_eq!(
        decode_json_string("\"é😀\"".as_bytes()).as_deref(),
        Some("é😀")
    );
    assert_eq!(decode_json_string(br#""""#).as_deref(), Some(""));
    assert_eq!(decode_json_string(br#""\ud800""#), None);
    assert_eq!(decode_json_string(br#""\udc00\ud83d""#), None);
    assert_eq!(decode_json_string(br#""a" "#), None);
    assert_eq!(decode_json_string(br#""a"#), None);
    assert_eq!(decode_json_string(b"1"), None);
    assert_eq!(decode_json_string(b"\"\xff\""), None);
    assert_eq!(decode_json_string(b""), None);
    assert_eq!(decode_json_string(b"\""), None);
}
