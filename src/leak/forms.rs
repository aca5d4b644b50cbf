//! The encoded forms of a secret the scanner looks for, and the decoded views of a line it looks
//! in. Pure functions over bytes; every form is handed out in a buffer that is zeroed when
//! dropped.

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::limits;

/// One way a secret can be spelled inside a line. Base64 has three alignments: the secret may
/// start at any byte of a 3-byte group of whatever was encoded with it, and each alignment
/// spells it with other characters; a form is then only the characters the secret alone
/// decides (the first and last may mix in the bytes around it), so it is found with or without
/// padding and with anything before or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Encoding {
    #[serde(rename = "plain")]
    Plain,
    #[serde(rename = "base64-0")]
    Base64At0,
    #[serde(rename = "base64-1")]
    Base64At1,
    #[serde(rename = "base64-2")]
    Base64At2,
    #[serde(rename = "base64url-0")]
    Base64UrlAt0,
    #[serde(rename = "base64url-1")]
    Base64UrlAt1,
    #[serde(rename = "base64url-2")]
    Base64UrlAt2,
    #[serde(rename = "hex-lower")]
    HexLower,
    #[serde(rename = "hex-upper")]
    HexUpper,
}

impl Encoding {
    pub(crate) const ALL: [Encoding; 9] = [
        Encoding::Plain,
        Encoding::Base64At0,
        Encoding::Base64At1,
        Encoding::Base64At2,
        Encoding::Base64UrlAt0,
        Encoding::Base64UrlAt1,
        Encoding::Base64UrlAt2,
        Encoding::HexLower,
        Encoding::HexUpper,
    ];

    /// The name the journal and the wire use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Encoding::Plain => "plain",
            Encoding::Base64At0 => "base64-0",
            Encoding::Base64At1 => "base64-1",
            Encoding::Base64At2 => "base64-2",
            Encoding::Base64UrlAt0 => "base64url-0",
            Encoding::Base64UrlAt1 => "base64url-1",
            Encoding::Base64UrlAt2 => "base64url-2",
            Encoding::HexLower => "hex-lower",
            Encoding::HexUpper => "hex-upper",
        }
    }

    /// In words, for a person.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Encoding::Plain => "as it is",
            Encoding::Base64At0 => "in base64",
            Encoding::Base64At1 => "in base64 (second alignment)",
            Encoding::Base64At2 => "in base64 (third alignment)",
            Encoding::Base64UrlAt0 => "in URL-safe base64",
            Encoding::Base64UrlAt1 => "in URL-safe base64 (second alignment)",
            Encoding::Base64UrlAt2 => "in URL-safe base64 (third alignment)",
            Encoding::HexLower => "in hex",
            Encoding::HexUpper => "in upper-case hex",
        }
    }

    /// `secret` spelled this way (for base64, the characters the secret alone decides).
    pub(super) fn encode(self, secret: &[u8]) -> Zeroizing<Vec<u8>> {
        match self {
            Encoding::Plain => Zeroizing::new(secret.to_vec()),
            Encoding::Base64At0 => base64_core(secret, STANDARD, 0),
            Encoding::Base64At1 => base64_core(secret, STANDARD, 1),
            Encoding::Base64At2 => base64_core(secret, STANDARD, 2),
            Encoding::Base64UrlAt0 => base64_core(secret, URL_SAFE, 0),
            Encoding::Base64UrlAt1 => base64_core(secret, URL_SAFE, 1),
            Encoding::Base64UrlAt2 => base64_core(secret, URL_SAFE, 2),
            Encoding::HexLower => hex(secret, b"0123456789abcdef"),
            Encoding::HexUpper => hex(secret, b"0123456789ABCDEF"),
        }
    }
}

/// Where in the line a form was found: as the server wrote it, after decoding JSON string
/// escapes (`\u0041`, `\/`, and escapes inside escapes), or after decoding percent escapes too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum View {
    #[serde(rename = "as-sent")]
    AsSent,
    #[serde(rename = "json-unescaped")]
    JsonUnescaped,
    #[serde(rename = "percent-decoded")]
    PercentDecoded,
}

impl View {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            View::AsSent => "as-sent",
            View::JsonUnescaped => "json-unescaped",
            View::PercentDecoded => "percent-decoded",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            View::AsSent => "",
            View::JsonUnescaped => ", written with JSON escapes",
            View::PercentDecoded => ", percent-encoded",
        }
    }
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters of `secret` placed `offset` bytes into a 3-byte group that only the
/// secret's bits decide: character `k` covers bits `6k..6k+6` of the encoded stream, and the
/// secret holds bits `8·offset..8·(offset+len)`.
fn base64_core(secret: &[u8], alphabet: &[u8; 64], offset: usize) -> Zeroizing<Vec<u8>> {
    let first = (8 * offset).div_ceil(6);
    let end = 8 * (offset + secret.len()) / 6;
    let mut out = Zeroizing::new(Vec::with_capacity(end.saturating_sub(first)));
    let bit = |i: usize| -> u8 {
        // Bit `i` of the stream (most significant first); the leading `offset` bytes are zero
        // and never read for a character in the core.
        let Some(byte_index) = (i / 8).checked_sub(offset) else {
            return 0;
        };
        secret
            .get(byte_index)
            .map_or(0, |b| (b >> (7 - (i % 8))) & 1)
    };
    for k in first..end {
        let value = (0..6).fold(0u8, |acc, j| (acc << 1) | bit(6 * k + j));
        out.push(alphabet.get(usize::from(value)).copied().unwrap_or(b'A'));
    }
    out
}

fn hex(secret: &[u8], digits: &[u8; 16]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(secret.len() * 2));
    for b in secret {
        for nibble in [b >> 4, b & 0x0f] {
            out.push(digits.get(usize::from(nibble)).copied().unwrap_or(b'0'));
        }
    }
    out
}

/// `line` with its JSON string escapes decoded once: `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`,
/// and `\uXXXX` (a surrogate pair as its character, a lone surrogate as its generalized UTF-8
/// bytes). Anything else, an invalid escape included, is kept as it is. The structure of the
/// JSON is not read: outside a string a backslash is not valid JSON anyway.
pub(super) fn json_unescape(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let simple = match line.get(i + 1) {
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            i += 2;
            continue;
        }
        if line.get(i + 1) == Some(&b'u')
            && let Some(unit) = crate::ids::hex4(line, i + 2)
        {
            let mut code = u32::from(unit);
            let mut used = 6;
            if (0xD800..0xDC00).contains(&unit)
                && line.get(i + 6) == Some(&b'\\')
                && line.get(i + 7) == Some(&b'u')
                && let Some(low) = crate::ids::hex4(line, i + 8)
                && (0xDC00..0xE000).contains(&low)
            {
                code = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                used = 12;
            }
            push_generalized_utf8(&mut out, code);
            i += used;
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// A code point as UTF-8, surrogates included (as WTF-8 spells them).
fn push_generalized_utf8(out: &mut Vec<u8>, code: u32) {
    // Each shifted value is masked to fit a byte, so the casts never truncate meaningfully.
    #[allow(clippy::cast_possible_truncation)]
    match code {
        0..=0x7f => out.push(code as u8),
        0x80..=0x7ff => {
            out.extend_from_slice(&[0xc0 | (code >> 6) as u8, 0x80 | (code & 0x3f) as u8])
        }
        0x800..=0xffff => out.extend_from_slice(&[
            0xe0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3f) as u8,
            0x80 | (code & 0x3f) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xf0 | ((code >> 18) & 0x07) as u8,
            0x80 | ((code >> 12) & 0x3f) as u8,
            0x80 | ((code >> 6) & 0x3f) as u8,
            0x80 | (code & 0x3f) as u8,
        ]),
    }
}

/// `line` with its `%XX` escapes (either case) decoded; anything else kept. `+` stays `+`: it
/// is a base64 character far more often than a space here.
pub(super) fn percent_decode(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        if b == b'%'
            && let (Some(hi), Some(lo)) = (
                line.get(i + 1).and_then(|c| char::from(*c).to_digit(16)),
                line.get(i + 2).and_then(|c| char::from(*c).to_digit(16)),
            )
            && let Ok(byte) = u8::try_from(hi * 16 + lo)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// The decoded views of `line` after the one as sent, each with what it is, in the order the
/// scanner looks at them: JSON escapes decoded (again while escapes remain, at most
/// `limits::LEAK_UNESCAPE_PASSES_MAX` times), then percent escapes. A view is made only when the
/// line holds what it decodes, so a line without `\` or `%` is scanned once.
pub(super) fn decoded_views(line: &[u8], mut visit: impl FnMut(View, &[u8]) -> bool) -> bool {
    let mut current: Option<Vec<u8>> = None;
    for _ in 0..limits::LEAK_UNESCAPE_PASSES_MAX {
        let source = current.as_deref().unwrap_or(line);
        if !source.contains(&b'\\') {
            break;
        }
        let next = json_unescape(source);
        if next == source {
            break;
        }
        if visit(View::JsonUnescaped, &next) {
            return true;
        }
        current = Some(next);
    }
    let source = current.as_deref().unwrap_or(line);
    if source.contains(&b'%') {
        let decoded = percent_decode(source);
        if decoded != source && visit(View::PercentDecoded, &decoded) {
            return true;
        }
    }
    false
}
