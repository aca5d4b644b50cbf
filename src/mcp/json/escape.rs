//! The one JSON string-escape decoder ([`decode_string_body`], and the token-level
//! [`decode_wtf8`], [`decode_str`], [`decode_json_string`] over it), and the one encoder
//! of a Rust string as a JSON string ([`push_json_string`]).

use std::borrow::Cow;

pub(crate) use crate::ids::hex4;
use crate::mcp::json::scan::scan_string;

/// Decodes one JSON string token (quotes included). `None` if `raw` is not exactly one valid
/// string, or if it escapes a lone surrogate, which no Rust `String` can hold.
pub(crate) fn decode_json_string(raw: &[u8]) -> Option<String> {
    match decode_wtf8(raw)? {
        Cow::Borrowed(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
        Cow::Owned(bytes) => String::from_utf8(bytes).ok(),
    }
}

/// Decodes one JSON string token (quotes included), borrowing it when it holds no escape.
/// `None` as for [`decode_json_string`].
pub(crate) fn decode_str(raw: &[u8]) -> Option<Cow<'_, str>> {
    match decode_wtf8(raw)? {
        Cow::Borrowed(bytes) => std::str::from_utf8(bytes).ok().map(Cow::Borrowed),
        Cow::Owned(bytes) => String::from_utf8(bytes).ok().map(Cow::Owned),
    }
}

/// Decodes one string token (quotes included) to WTF-8: UTF-8, except that an escaped lone
/// surrogate becomes its generalised 3-byte encoding. Equal code-point sequences give equal
/// bytes, so keys compare by decoded value even when they hold lone surrogates.
pub(crate) fn decode_wtf8(raw: &[u8]) -> Option<Cow<'_, [u8]>> {
    if scan_string(raw, 0).ok()? != raw.len() {
        return None;
    }
    let inner = raw.get(1..raw.len().checked_sub(1)?)?;
    if !inner.contains(&b'\\') {
        return Some(Cow::Borrowed(inner));
    }
    let (decoded, _) = decode_string_body(raw, 1, LoneSurrogates::Wtf8).ok()?;
    Some(Cow::Owned(decoded))
}

/// What a `\u` escape of a lone surrogate (one that is not half of a high-low pair) decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoneSurrogates {
    /// Its generalised 3-byte encoding (WTF-8): never valid UTF-8, so such a string never
    /// becomes a `String`, yet two spellings of the same code points still decode alike.
    Wtf8,
    /// An error ([`EscapeError::LoneSurrogate`]): the caller's text must be Unicode.
    Refuse,
}

/// Why a string's body could not be decoded. Each `at` is the byte offset in the input that the
/// caller's own message points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EscapeError {
    /// The input ends before the closing quote.
    Unterminated,
    /// The input ends just after a backslash.
    UnterminatedEscape,
    /// A backslash before a character JSON gives no escape to; `at` is just past it.
    UnknownEscape { at: usize },
    /// `\u` without four hex digits after it; `at` is where the digits should start.
    BadHex { at: usize },
    /// A lone surrogate, under [`LoneSurrogates::Refuse`]; `at` is just past the escape that
    /// shows it lone (the escape itself, or the `\u` after it that is not its low half).
    LoneSurrogate { at: usize },
    /// A raw control character (U+0000 to U+001F); `at` is its offset.
    ControlCharacter { at: usize },
}

/// The one JSON string-escape decoder. Decodes the body of one string: `bytes` from `start`
/// (just past the opening quote) through the closing quote, and returns the decoded bytes and
/// the offset just past that quote. Bytes that are not escapes are copied as they are and not
/// checked as UTF-8 here: a caller that needs a `String` checks the result, so an error later
/// in the string is the one reported.
pub(crate) fn decode_string_body(
    bytes: &[u8],
    start: usize,
    lone: LoneSurrogates,
) -> Result<(Vec<u8>, usize), EscapeError> {
    let mut out = Vec::new();
    let mut pos = start;
    loop {
        let Some(&byte) = bytes.get(pos) else {
            return Err(EscapeError::Unterminated);
        };
        match byte {
            b'"' => return Ok((out, pos + 1)),
            b'\\' => {
                let escape = *bytes.get(pos + 1).ok_or(EscapeError::UnterminatedEscape)?;
                pos += 2;
                let plain = match escape {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        pos = decode_unicode_escape(bytes, pos, lone, &mut out)?;
                        continue;
                    }
                    _ => return Err(EscapeError::UnknownEscape { at: pos }),
                };
                out.push(plain);
            }
            0x00..=0x1f => return Err(EscapeError::ControlCharacter { at: pos }),
            _ => {
                out.push(byte);
                pos += 1;
            }
        }
    }
}

/// Decodes the `\u` escape whose four hex digits start at `pos` (with the low half that follows
/// a high surrogate, when there is one) onto `out`; returns the offset just past what it read.
fn decode_unicode_escape(
    bytes: &[u8],
    pos: usize,
    lone: LoneSurrogates,
    out: &mut Vec<u8>,
) -> Result<usize, EscapeError> {
    let unit = u32::from(hex4(bytes, pos).ok_or(EscapeError::BadHex { at: pos })?);
    let mut pos = pos + 4;
    let mut code = unit;
    if (0xD800..0xDC00).contains(&unit) {
        if bytes.get(pos..pos + 2) == Some(b"\\u") {
            let low = u32::from(hex4(bytes, pos + 2).ok_or(EscapeError::BadHex { at: pos + 2 })?);
            if (0xDC00..0xE000).contains(&low) {
                code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                pos += 6;
            } else if lone == LoneSurrogates::Refuse {
                return Err(EscapeError::LoneSurrogate { at: pos + 6 });
            }
        } else if lone == LoneSurrogates::Refuse {
            return Err(EscapeError::LoneSurrogate { at: pos });
        }
    }
    if lone == LoneSurrogates::Refuse && char::from_u32(code).is_none() {
        return Err(EscapeError::LoneSurrogate { at: pos });
    }
    push_wtf8(out, code);
    Ok(pos)
}

/// Appends code point `code` (a lone surrogate included) as WTF-8.
fn push_wtf8(out: &mut Vec<u8>, code: u32) {
    match char::from_u32(code) {
        Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        // A lone surrogate (U+D800..U+DFFF): the 3-byte form UTF-8 would give it. Never valid
        // UTF-8, so such a string can never decode to a `String`.
        None => out.extend_from_slice(&[
            0xE0 | ((code >> 12) & 0x0F) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
    }
}

/// Appends `text` as a JSON string: quotes, backslashes and control characters escaped, every
/// other character as its UTF-8.
pub(crate) fn push_json_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for ch in text.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            ch if u32::from(ch) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", u32::from(ch)).as_bytes());
            }
            ch => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests;
