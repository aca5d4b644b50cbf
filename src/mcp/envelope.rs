//! The JSON-RPC envelope of one line: the single value on it, an object's members (keys
//! decoded and folded), the `id`/`method`/`params`/`result`/`error` slices, and how ids and
//! results are compared. Every slice is a sub-slice of the line as read.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::limits::JSON_DEPTH_MAX;
use crate::mcp::json::escape::{decode_json_string, decode_str, decode_wtf8};
use crate::mcp::json::scan::{
    Keys, ScanError, fold_key, scan_key, scan_string, scan_value, scan_value_within, skip_ws,
};

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
    nothing_after(line, end)?;
    Ok(line.get(start..end))
}

/// The members of the single JSON object on a line that holds one (its first byte after
/// whitespace is `{`): what `one_value` then `members` give, in one scan of the line. With it,
/// when `params` is an object, its members as `members_at` with `Keys::Check` reads them (what
/// a `tools/call` needs), read in the same scan.
pub(crate) fn one_object(line: &[u8]) -> Result<ObjectLine<'_>, NotOneValue> {
    let start = skip_ws(line, 0);
    let mut params = None;
    let (members, end) = members_within(line, start, Keys::Ignore, 0, Some(&mut params))
        .map_err(|_| NotOneValue::Malformed)?;
    nothing_after(line, end)?;
    Ok(ObjectLine { members, params })
}

/// A line that is one JSON object, read by [`one_object`].
pub(crate) struct ObjectLine<'a> {
    pub(crate) members: Vec<Member<'a>>,
    /// The members of the first `params` member that is an object, every key at every depth
    /// checked for repeats; `None` when no `params` is an object.
    pub(crate) params: Option<Result<Vec<Member<'a>>, ScanError>>,
}

/// Only whitespace after `end`, or which kind of junk follows.
fn nothing_after(line: &[u8], end: usize) -> Result<(), NotOneValue> {
    let rest = skip_ws(line, end);
    if rest < line.len() {
        // Two readers could split such a line differently; say which kind of junk it is.
        return Err(match scan_value(line, rest, Keys::Ignore) {
            Ok(_) => NotOneValue::SeveralValues,
            Err(_) => NotOneValue::Malformed,
        });
    }
    Ok(())
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
    match members_at(object, 0, Keys::Ignore) {
        Ok((members, end)) if end == object.len() => Some(members),
        _ => None,
    }
}

/// The members of the object whose `{` is at `start`, and the offset just past its `}`; each
/// value is scanned (strictly, as `scan_value` would scan the whole object) once. With
/// `Keys::Check` a key repeated in this object or in any object inside it is
/// `ScanError::DuplicateKey`, met in text order as `scan_value` meets it.
pub(crate) fn members_at(
    bytes: &[u8],
    start: usize,
    keys: Keys,
) -> Result<(Vec<Member<'_>>, usize), ScanError> {
    members_within(bytes, start, keys, 0, None)
}

/// `members_at` of an object `depth` containers deep. With `params`, the first member keyed
/// `params` (as a case-insensitive reader folds it) whose value is an object is read by
/// `members_within` with `Keys::Check` into it; if that finds a repeated key, the value is
/// scanned again with `keys` to find its end (the line may still be well-formed).
fn members_within<'a>(
    bytes: &'a [u8],
    start: usize,
    keys: Keys,
    depth: usize,
    mut params: Option<&mut Option<Result<Vec<Member<'a>>, ScanError>>>,
) -> Result<(Vec<Member<'a>>, usize), ScanError> {
    if bytes.get(start) != Some(&b'{') || depth >= JSON_DEPTH_MAX {
        return Err(ScanError::Malformed);
    }
    let mut out = Vec::new();
    let mut seen = (keys == Keys::Check).then(HashSet::new);
    let mut pos = skip_ws(bytes, start + 1);
    if bytes.get(pos) == Some(&b'}') {
        return Ok((out, pos + 1));
    }
    loop {
        let colon_end = scan_key(bytes, pos, seen.as_mut())?;
        let key_end = scan_string(bytes, pos)?;
        let key = decode_wtf8(bytes.get(pos..key_end).ok_or(ScanError::Malformed)?)
            .ok_or(ScanError::Malformed)?;
        let folded = fold_key(&key).into_owned();
        let value_start = skip_ws(bytes, colon_end);
        let value_end = match params.as_deref_mut() {
            Some(slot @ None) if folded == b"params" && bytes.get(value_start) == Some(&b'{') => {
                match members_within(bytes, value_start, Keys::Check, depth + 1, None) {
                    Ok((members, end)) => {
                        *slot = Some(Ok(members));
                        end
                    }
                    Err(e) => {
                        *slot = Some(Err(e));
                        scan_value_within(bytes, value_start, keys, depth + 1)?
                    }
                }
            }
            _ => scan_value_within(bytes, value_start, keys, depth + 1)?,
        };
        out.push(Member {
            folded,
            key,
            value: bytes
                .get(value_start..value_end)
                .ok_or(ScanError::Malformed)?,
        });
        pos = skip_ws(bytes, value_end);
        match bytes.get(pos) {
            Some(b',') => pos = skip_ws(bytes, pos + 1),
            Some(b'}') => return Ok((out, pos + 1)),
            _ => return Err(ScanError::Malformed),
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
