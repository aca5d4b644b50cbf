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

#[test]
fn the_one_decoder_keeps_or_refuses_lone_surrogates_and_says_where_it_stopped() {
    let body = |s: &[u8], lone| decode_string_body(s, 1, lone);
    assert_eq!(
        body(br#""a\u00e9\ud83d\ude00" x"#, LoneSurrogates::Refuse),
        Ok(("aé😀".as_bytes().to_vec(), 21))
    );
    assert_eq!(
        body(br#""\ud800x""#, LoneSurrogates::Wtf8),
        Ok((b"\xed\xa0\x80x".to_vec(), 9))
    );
    assert_eq!(
        body(br#""\ud800x""#, LoneSurrogates::Refuse),
        Err(EscapeError::LoneSurrogate { at: 7 })
    );
    assert_eq!(
        body(br#""\ud800\u0041""#, LoneSurrogates::Refuse),
        Err(EscapeError::LoneSurrogate { at: 13 })
    );
    assert_eq!(
        body(br#""\ud800\u0041""#, LoneSurrogates::Wtf8),
        Ok((b"\xed\xa0\x80A".to_vec(), 14))
    );
    assert_eq!(
        body(br#""\udc00""#, LoneSurrogates::Refuse),
        Err(EscapeError::LoneSurrogate { at: 7 })
    );
    assert_eq!(
        body(br#""\ud800\u00g""#, LoneSurrogates::Wtf8),
        Err(EscapeError::BadHex { at: 9 })
    );
    assert_eq!(
        body(br#""\x""#, LoneSurrogates::Wtf8),
        Err(EscapeError::UnknownEscape { at: 3 })
    );
    assert_eq!(
        body(b"\"a\x01\"", LoneSurrogates::Wtf8),
        Err(EscapeError::ControlCharacter { at: 2 })
    );
    assert_eq!(
        body(b"\"ab", LoneSurrogates::Wtf8),
        Err(EscapeError::Unterminated)
    );
    assert_eq!(
        body(b"\"ab\\", LoneSurrogates::Wtf8),
        Err(EscapeError::UnterminatedEscape)
    );
    // Raw bytes pass as they are: a caller that needs a `String` checks them.
    assert_eq!(
        body(b"\"\xff\"", LoneSurrogates::Refuse),
        Ok((b"\xff".to_vec(), 3))
    );
}
