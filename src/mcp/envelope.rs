//! The JSON-RPC envelope of one line: the single value on it, an object's members (keys
//! decoded and folded), the `id`/`method`/`params`/`result`/`error` slices, and how ids and
//! results are compared. Every slice is a sub-slice of the line as read.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::mcp::json::escape::{decode_json_string, decode_str, decode_wtf8};
use crate::mcp::json::scan::{Keys, fold_key, scan_string, scan_value, skip_ws};

/// The JSON-RPC envelope of one object: raw sub-slices of the line, plus the decoded method.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message<'a> {
    /// The `id` value exactly as written (`null` included), or `None` if there is no `id` key.
    pub id: Option<&'a [u8]>,
    /// The decoded `method`, only when it is a JSON string holding valid Unicode.
    pub method: Option<Cow<'a, str>>,
    pub params: Option<&'a [u8]>,
    pub result: Option<&'a [u8]>,
    pub error: Option<&'a [u8]>,
}

/// Reads the envelope of one server→client line, best effort: anything other than a single JSON
/// object with unique top-level keys gives `Message::default()`. The relay forwards server lines
/// verbatim regardless; this only serves to match responses to requests.
pub(crate) fn inspect_server_line(line: &[u8]) -> Message<'_> {
    let Ok(Some(value)) = one_value(line) else {
        return Message::default();
    };
    match unique_members(value) {
        Some(members) => envelope(&members),
        None => Message::default(),
    }
}

/// Whether `result` is an object whose `isError` is `true`. An object that repeats a key is
/// ambiguous and reads as not an error.
pub(crate) fn result_is_error(result: &[u8]) -> bool {
    object_member(result, "isError") == Some(b"true".as_slice())
}

/// The `requestState` of a result that asks the client for input (`"resultType":
/// "input_required"`, 2026-07-28), as the key the relay remembers it by: a JSON string's decoded
/// bytes (so an escape written differently by the client still matches), any other value's bytes
/// as written. `None` for any other result, or one that repeats a key.
pub(crate) fn input_required_state(result: &[u8]) -> Option<Vec<u8>> {
    let members = unique_members(result)?;
    let kind = member(&members, "resultType").and_then(decode_json_string)?;
    if kind != "input_required" {
        return None;
    }
    request_state_key(member(&members, "requestState")?)
}

/// The key a `requestState` value is remembered and matched by (see [`input_required_state`]).
pub(crate) fn request_state_key(raw: &[u8]) -> Option<Vec<u8>> {
    if raw.first() == Some(&b'"') {
        decode_json_string(raw).map(String::into_bytes)
    } else {
        Some(raw.to_vec())
    }
}

/// Two raw ids name the same request: identical bytes, or strings with the same decoded value
/// (a server that parses and re-serialises may re-escape a string id).
pub(crate) fn same_id(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (decode_wtf8(a), decode_wtf8(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Why a line is not exactly one JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotOneValue {
    /// Not valid JSON.
    Malformed,
    /// A valid value followed by a second one: two readers could split the line differently.
    SeveralValues,
}

/// The single JSON value on a line, without surrounding whitespace; `Ok(None)` if the line is
/// blank.
pub(crate) fn one_value(line: &[u8]) -> Result<Option<&[u8]>, NotOneValue> {
    let start = skip_ws(line, 0);
    if start >= line.len() {
        return Ok(None);
    }
    let end = scan_value(line, start, Keys::Ignore).map_err(|_| NotOneValue::Malformed)?;
    let rest = skip_ws(line, end);
    if rest < line.len() {
        // Two readers could split such a line differently; say which kind of junk it is.
        return Err(match scan_value(line, rest, Keys::Ignore) {
            Ok(_) => NotOneValue::SeveralValues,
            Err(_) => NotOneValue::Malformed,
        });
    }
    Ok(line.get(start..end))
}

/// One member of an object: its decoded key (WTF-8, so lone surrogates still compare exactly),
/// that key folded once as a case-insensitive reader sees it (see [`fold_key`]), and its raw
/// value.
pub(crate) struct Member<'a> {
    pub(crate) key: Cow<'a, [u8]>,
    pub(crate) folded: Vec<u8>,
    pub(crate) value: &'a [u8],
}

pub(crate) fn envelope<'a>(members: &[Member<'a>]) -> Message<'a> {
    Message {
        id: member(members, "id"),
        method: member(members, "method").and_then(decode_str),
        params: member(members, "params"),
        result: member(members, "result"),
        error: member(members, "error"),
    }
}

/// The value of `key`, matched as a case-insensitive reader would (see [`fold_key`]). Callers
/// pass members whose folded keys are unique, so at most one matches.
pub(crate) fn member<'a>(members: &[Member<'a>], key: &str) -> Option<&'a [u8]> {
    let key = fold_key(key.as_bytes());
    members.iter().find(|m| m.folded == *key).map(|m| m.value)
}

/// The raw value of `key` in the object `raw`; `None` if `raw` is not an object, lacks the key,
/// or repeats any key (ambiguous).
pub(crate) fn object_member<'a>(raw: &'a [u8], key: &str) -> Option<&'a [u8]> {
    member(&unique_members(raw)?, key)
}

pub(crate) fn unique_members(raw: &[u8]) -> Option<Vec<Member<'_>>> {
    members(raw).filter(|members| keys_are_unique(members))
}

/// No two keys are the same, even to a case-insensitive reader.
pub(crate) fn keys_are_unique(members: &[Member<'_>]) -> bool {
    let mut seen = HashSet::with_capacity(members.len());
    members.iter().all(|m| seen.insert(m.folded.as_slice()))
}

/// The top-level members of `object`, which must be exactly one JSON object.
pub(crate) fn members(object: &[u8]) -> Option<Vec<Member<'_>>> {
    if object.first() != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = skip_ws(object, 1);
    if object.get(pos) == Some(&b'}') {
        return (pos + 1 == object.len()).then_some(out);
    }
    loop {
        let key_end = scan_string(object, pos).ok()?;
        let key = decode_wtf8(object.get(pos..key_end)?)?;
        pos = skip_ws(object, key_end);
        if object.get(pos) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(object, pos + 1);
        let value_end = scan_value(object, value_start, Keys::Ignore).ok()?;
        out.push(Member {
            folded: fold_key(&key).into_owned(),
            key,
            value: object.get(value_start..value_end)?,
        });
        pos = skip_ws(object, value_end);
        match object.get(pos) {
            Some(b',') => pos = skip_ws(object, pos + 1),
            Some(b'}') => return (pos + 1 == object.len()).then_some(out),
            _ => return None,
        }
    }
}

/// The raw elements of `array`, which must be exactly one JSON array.
pub(crate) fn elements(array: &[u8]) -> Option<Vec<&[u8]>> {
    if array.first() != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut pos = skip_ws(array, 1);
    if array.get(pos) == Some(&b']') {
        return (pos + 1 == array.len()).then_some(out);
    }
    loop {
        let end = scan_value(array, pos, Keys::Ignore).ok()?;
        out.push(array.get(pos..end)?);
        pos = skip_ws(array, end);
        match array.get(pos) {
            Some(b',') => pos = skip_ws(array, pos + 1),
            Some(b']') => return (pos + 1 == array.len()).then_some(out),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests;
