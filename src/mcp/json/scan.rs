//! The strict RFC 8259 scanner (decision 0003): byte-exact spans, iterative (bounded stack),
//! and, on request, a repeated key at any depth — keys compared decoded and case folded.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::limits::JSON_DEPTH_MAX;
use crate::mcp::json::escape::{decode_wtf8, hex4};

/// A decoded key as a reader that matches keys case-insensitively sees it. Go's encoding/json
/// (Unicode simple folding, so `ſ` is s and the Kelvin sign is k) and .NET's Web defaults
/// (upper-casing, so `ı` is I) do, and keep the last of two matches: for them `"Method"` next to
/// `"method"` is the same key twice, and `"NAME"` alone is the name. Keys are compared after
/// folding: upper case, then lower case, without the combining dot that lower-casing `İ`
/// leaves. Folding too much only makes more lines ambiguous, never fewer; bytes that are not
/// UTF-8 (an escaped lone surrogate) are kept as they are.
pub(crate) fn fold_key(key: &[u8]) -> Cow<'_, [u8]> {
    if key.is_ascii() {
        return if key.iter().any(u8::is_ascii_uppercase) {
            Cow::Owned(key.to_ascii_lowercase())
        } else {
            Cow::Borrowed(key)
        };
    }
    let mut out = Vec::with_capacity(key.len());
    for chunk in key.utf8_chunks() {
        for ch in chunk
            .valid()
            .chars()
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .filter(|&ch| ch != '\u{307}')
        {
            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
        }
        out.extend_from_slice(chunk.invalid());
    }
    Cow::Owned(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanError {
    Malformed,
    DuplicateKey,
}

/// Whether the scanner checks every object at every depth for repeated keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    Ignore,
    Check,
}

/// An open container on the scanner's explicit stack (the input's nesting never becomes ours).
enum Open {
    Array,
    Object(Option<HashSet<Vec<u8>>>),
}

fn is_ws(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

pub(crate) fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos).is_some_and(|&b| is_ws(b)) {
        pos += 1;
    }
    pos
}

/// Scans one JSON value starting at `start` (leading whitespace allowed) and returns the offset
/// just past it. Iterative; nesting deeper than `JSON_DEPTH_MAX` is malformed.
pub(crate) fn scan_value(bytes: &[u8], start: usize, keys: Keys) -> Result<usize, ScanError> {
    scan_value_within(bytes, start, keys, 0)
}

/// `scan_value` of a value already `depth` containers deep (a member of an object counts 1),
/// so that scanning a container's members one by one allows the depth scanning it whole does.
pub(crate) fn scan_value_within(
    bytes: &[u8],
    start: usize,
    keys: Keys,
    depth: usize,
) -> Result<usize, ScanError> {
    let mut stack: Vec<Open> = Vec::new();
    let mut pos = start;
    'value: loop {
        pos = skip_ws(bytes, pos);
        match bytes.get(pos).copied() {
            Some(b'{') => {
                if stack.len() + depth >= JSON_DEPTH_MAX {
                    return Err(ScanError::Malformed);
                }
                pos = skip_ws(bytes, pos + 1);
                if bytes.get(pos) == Some(&b'}') {
                    pos += 1;
                } else {
                    let mut seen = (keys == Keys::Check).then(HashSet::new);
                    pos = scan_key(bytes, pos, seen.as_mut())?;
                    stack.push(Open::Object(seen));
                    continue 'value;
                }
            }
            Some(b'[') => {
                if stack.len() + depth >= JSON_DEPTH_MAX {
                    return Err(ScanError::Malformed);
                }
                pos = skip_ws(bytes, pos + 1);
                if bytes.get(pos) == Some(&b']') {
                    pos += 1;
                } else {
                    stack.push(Open::Array);
                    continue 'value;
                }
            }
            Some(b'"') => pos = scan_string(bytes, pos)?,
            Some(b't') => pos = scan_literal(bytes, pos, b"true")?,
            Some(b'f') => pos = scan_literal(bytes, pos, b"false")?,
            Some(b'n') => pos = scan_literal(bytes, pos, b"null")?,
            Some(b'-' | b'0'..=b'9') => pos = scan_number(bytes, pos)?,
            _ => return Err(ScanError::Malformed),
        }
        // A value ends at `pos`: close finished containers until one expects another value.
        loop {
            let Some(open) = stack.last_mut() else {
                return Ok(pos);
            };
            pos = skip_ws(bytes, pos);
            match (open, bytes.get(pos).copied()) {
                (Open::Array, Some(b',')) => {
                    pos += 1;
                    continue 'value;
                }
                (Open::Object(seen), Some(b',')) => {
                    let key_start = skip_ws(bytes, pos + 1);
                    pos = scan_key(bytes, key_start, seen.as_mut())?;
                    continue 'value;
                }
                (Open::Array, Some(b']')) | (Open::Object(_), Some(b'}')) => {
                    stack.pop();
                    pos += 1;
                }
                _ => return Err(ScanError::Malformed),
            }
        }
    }
}

/// Scans `"key"` and the `:` after it, returning the offset just past the colon. With `seen`,
/// a key whose decoded, folded value was already seen in this object is an error.
pub(crate) fn scan_key(
    bytes: &[u8],
    start: usize,
    seen: Option<&mut HashSet<Vec<u8>>>,
) -> Result<usize, ScanError> {
    let end = scan_string(bytes, start)?;
    if let Some(seen) = seen {
        let raw = bytes.get(start..end).ok_or(ScanError::Malformed)?;
        let key = decode_wtf8(raw).ok_or(ScanError::Malformed)?;
        if !seen.insert(fold_key(&key).into_owned()) {
            return Err(ScanError::DuplicateKey);
        }
    }
    let colon = skip_ws(bytes, end);
    if bytes.get(colon) != Some(&b':') {
        return Err(ScanError::Malformed);
    }
    Ok(colon + 1)
}

/// Scans one string token starting at its opening quote; returns the offset past the closing
/// quote. Raw bytes must be valid UTF-8 and not control characters; escapes must be RFC 8259's.
/// A `\u` escape of a lone surrogate is grammatical JSON and passes here; decoding decides.
pub(crate) fn scan_string(bytes: &[u8], start: usize) -> Result<usize, ScanError> {
    if bytes.get(start) != Some(&b'"') {
        return Err(ScanError::Malformed);
    }
    let mut pos = start + 1;
    loop {
        pos = skip_plain_ascii(bytes, pos);
        match bytes.get(pos).copied() {
            None => return Err(ScanError::Malformed),
            Some(b'"') => return Ok(pos + 1),
            Some(b'\\') => match bytes.get(pos + 1).copied() {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 2,
                Some(b'u') => {
                    hex4(bytes, pos + 2).ok_or(ScanError::Malformed)?;
                    pos += 6;
                }
                _ => return Err(ScanError::Malformed),
            },
            Some(0x00..=0x1f) => return Err(ScanError::Malformed),
            Some(0x20..=0x7f) => pos += 1,
            Some(_) => pos += utf8_width(bytes, pos).ok_or(ScanError::Malformed)?,
        }
    }
}

/// Skips, eight bytes at a time, the bytes a string may hold as they are and that need no
/// further look: printable ASCII other than `"` and `\`. Stops on the first other byte (a
/// quote, a backslash, a control character or the start of a multi-byte character), which
/// `scan_string` then reads itself; it only ever skips what the byte-at-a-time loop would have
/// accepted. This keeps large arguments at gigabytes per second.
fn skip_plain_ascii(bytes: &[u8], mut pos: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Exact presence tests (no false positives or negatives for "is any byte …"): a byte of
    // `v` is zero; a byte of `x` is below 0x20 (given no byte has its high bit set).
    let any_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    while let Some(word) = pos
        .checked_add(8)
        .and_then(|end| bytes.get(pos..end))
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        let x = u64::from_le_bytes(word);
        let special = (x & HIGH)
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH)
            | any_zero(x ^ (ONES * u64::from(b'"')))
            | any_zero(x ^ (ONES * u64::from(b'\\')));
        if special != 0 {
            // The lowest flagged byte is exact (a borrow only ever spreads upwards): stop on it.
            return pos + (special.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    pos
}

/// Width of the valid multi-byte UTF-8 character at `pos` (rejects overlongs, surrogates and
/// code points past U+10FFFF, as `str::from_utf8` does).
fn utf8_width(bytes: &[u8], pos: usize) -> Option<usize> {
    let width = match bytes.get(pos)? {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    std::str::from_utf8(bytes.get(pos..pos + width)?).ok()?;
    Some(width)
}

fn scan_literal(bytes: &[u8], start: usize, literal: &[u8]) -> Result<usize, ScanError> {
    let end = start + literal.len();
    if bytes.get(start..end) != Some(literal) {
        return Err(ScanError::Malformed);
    }
    token_end(bytes, end)
}

/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
fn scan_number(bytes: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut pos = start;
    if bytes.get(pos) == Some(&b'-') {
        pos += 1;
    }
    match bytes.get(pos) {
        Some(b'0') => pos += 1,
        Some(b'1'..=b'9') => pos = skip_digits(bytes, pos),
        _ => return Err(ScanError::Malformed),
    }
    if bytes.get(pos) == Some(&b'.') {
        let after = skip_digits(bytes, pos + 1);
        if after == pos + 1 {
            return Err(ScanError::Malformed);
        }
        pos = after;
    }
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        pos += 1;
        if matches!(bytes.get(pos), Some(b'+' | b'-')) {
            pos += 1;
        }
        let after = skip_digits(bytes, pos);
        if after == pos {
            return Err(ScanError::Malformed);
        }
        pos = after;
    }
    token_end(bytes, pos)
}

fn skip_digits(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    pos
}

/// A number or literal must end where a token can end, so `0123`, `1.5.2` or `truex` are one
/// malformed token rather than two values (which would read as a framing anomaly).
fn token_end(bytes: &[u8], end: usize) -> Result<usize, ScanError> {
    match bytes.get(end) {
        Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-') => {
            Err(ScanError::Malformed)
        }
        _ => Ok(end),
    }
}

#[cfg(test)]
mod tests;
