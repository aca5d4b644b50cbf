//! One request line read as JSON-RPC: the frame (size, UTF-8, exactly one JSON value, no key
//! repeated at any depth), the envelope's rules (which fields, which types), the protocol
//! revisions holdmap serves, and how each answer is shaped for the revision it is under.
//!
//! Must never: do I/O, run a method, or resolve an ambiguous line one way (a repeated key is
//! refused, never "last one wins"). Ids are echoed as the bytes the client wrote.

use std::fmt;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::limits::HOLDMAP_FRAME_BYTES_MAX;
use crate::mcp::envelope::{NotOneValue, elements, object_member, one_value};
use crate::mcp::json::scan::{Keys, ScanError, scan_value, skip_ws};
use crate::mcp::version::requires_result_type;
use crate::text::visible;

/// Every revision holdmap answers, oldest first. Revisions are ISO dates, so string order is
/// date order.
pub(crate) const REVISIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The revisions `initialize` negotiates (2026-07-28 has no handshake: its clients call
/// `server/discover` and name the revision on every request).
pub(crate) const HANDSHAKE_REVISIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest handshake revision: what an unknown `initialize` proposal gets, and what a
/// request is served at when neither it nor the session names one.
pub(crate) const NEWEST_HANDSHAKE: &str = "2025-11-25";

/// First revision with `structuredContent`, `outputSchema` and `title`; also the first without
/// JSON-RPC batches.
const STRUCTURED_SINCE: &str = "2025-06-18";
/// First revision with tool annotations.
const ANNOTATIONS_SINCE: &str = "2025-03-26";
/// First revision in which an uncorrelated error has no `id` key at all (before it, `null`).
const NO_NULL_ID_SINCE: &str = "2025-11-25";

/// Results a 2026-07-28 client may cache: they must say for how long and for whom.
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// `revision` is `since` or newer.
pub(crate) fn at_least(revision: &str, since: &str) -> bool {
    revision >= since
}

/// The revision named `name`, if holdmap serves it.
pub(crate) fn known_revision(name: &str) -> Option<&'static str> {
    REVISIONS.into_iter().find(|r| *r == name)
}

/// Whether a session at `revision` accepts a JSON-RPC batch (only revisions before 2025-06-18
/// have them).
pub(crate) fn batches_allowed(revision: &str) -> bool {
    !at_least(revision, STRUCTURED_SINCE)
}

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A JSON-RPC error: the protocol-level refusal of a request (a tool's own failure is a result
/// with `isError`, never one of these).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_REQUEST, message)
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub(crate) fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    /// A line (or batch) larger than the frame limit; nothing of it ran.
    pub(crate) fn oversized() -> RpcError {
        RpcError::invalid_request(
            "MCP frame exceeds 1 MiB; no requests from this frame were executed",
        )
    }

    /// A request naming, in `params._meta`, a revision holdmap does not serve. The data is the
    /// shape a 2026-07-28 client reads to pick another revision and retry.
    pub(crate) fn unsupported_revision(requested: &str) -> RpcError {
        RpcError::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            format!(
                "Unsupported protocol version {}; this server supports {}",
                visible(requested),
                REVISIONS.join(", ")
            ),
        )
        .with_data(json!({"supported": REVISIONS, "requested": requested}))
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.message)
    }
}

/// A request id as the client wrote it (a string or a number), and the key it is matched by
/// (its value re-serialised, so a cancellation naming the same id finds it however it was
/// escaped).
#[derive(Debug, Clone)]
pub(crate) struct Id {
    raw: Box<RawValue>,
    key: String,
}

impl Id {
    /// The id `value` (already checked to be a string or a number), echoed as `raw` when those
    /// are its bytes.
    fn new(value: &Value, raw: Option<&[u8]>) -> Id {
        let key = key_of(value);
        let raw = raw
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|text| RawValue::from_string(text.to_owned()).ok())
            .or_else(|| RawValue::from_string(key.clone()).ok());
        // `key` is serde's own serialisation of a string or number: always valid JSON.
        let raw = raw.unwrap_or_default();
        Id { raw, key }
    }

    /// The key pending work is found by.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }
}

/// The key of an id value (see [`Id`]).
pub(crate) fn key_of(value: &Value) -> String {
    value.to_string()
}

/// What one line holds.
#[derive(Debug)]
pub(crate) enum Frame<'a> {
    /// Nothing but whitespace: skipped, unanswered.
    Blank,
    /// One message: its bytes and its value.
    One(&'a [u8], Value),
    /// A JSON array: each element's bytes and value.
    Batch(Vec<(&'a [u8], Value)>),
}

/// Reads one line (its newline and a trailing `\r` are not part of the frame). An error is the
/// uncorrelated answer the line gets.
pub(crate) fn read_frame(line: &[u8]) -> Result<Frame<'_>, RpcError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > HOLDMAP_FRAME_BYTES_MAX {
        return Err(RpcError::oversized());
    }
    if let Err(e) = std::str::from_utf8(line) {
        return Err(RpcError::new(
            PARSE_ERROR,
            format!(
                "parse error: the line is not valid UTF-8 (at byte {}); send JSON text",
                e.valid_up_to()
            ),
        ));
    }
    let value = match one_value(line) {
        Ok(None) => return Ok(Frame::Blank),
        Ok(Some(value)) => value,
        Err(NotOneValue::SeveralValues) => {
            return Err(RpcError::new(
                PARSE_ERROR,
                "parse error: the line holds more than one JSON value; send one request per line",
            ));
        }
        Err(NotOneValue::Malformed) => return Err(malformed(line)),
    };
    match scan_value(value, skip_ws(value, 0), Keys::Check) {
        Ok(_) => {}
        Err(ScanError::DuplicateKey) => {
            return Err(RpcError::invalid_request(
                "Invalid JSON-RPC request: the request repeats a key in one object (keys are \
                 compared case-insensitively, at any depth); send each key once",
            ));
        }
        Err(ScanError::Malformed) => return Err(malformed(line)),
    }
    let parsed: Value = serde_json::from_slice(value).map_err(|e| parse_error(&e))?;
    if !parsed.is_array() {
        return Ok(Frame::One(value, parsed));
    }
    let raws = elements(value).ok_or_else(|| malformed(line))?;
    let Value::Array(values) = parsed else {
        return Err(malformed(line));
    };
    if raws.len() != values.len() {
        return Err(malformed(line));
    }
    Ok(Frame::Batch(raws.into_iter().zip(values).collect()))
}

fn parse_error(e: &serde_json::Error) -> RpcError {
    RpcError::new(PARSE_ERROR, format!("parse error: {e}"))
}

/// The parse error of a line the strict scanner refused, in serde's words (which say where)
/// when serde refuses it too.
fn malformed(line: &[u8]) -> RpcError {
    match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        Err(e) => parse_error(&e),
        Ok(_) => RpcError::new(
            PARSE_ERROR,
            "parse error: the line is not JSON this server reads (nested too deeply?)",
        ),
    }
}

/// One request (or notification) whose envelope passed.
#[derive(Debug)]
pub(crate) struct Request {
    /// `None` for a notification.
    pub(crate) id: Option<Id>,
    pub(crate) method: String,
    /// `params`, or an empty object when absent.
    pub(crate) params: Map<String, Value>,
}

/// An envelope that failed: the error and the id to echo (only a valid one).
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) id: Option<Id>,
    pub(crate) error: RpcError,
}

/// The top-level fields of a request; anything else is refused, so a tool input put beside
/// `params` (a top-level `dry_run`) is never silently ignored.
const ENVELOPE_FIELDS: [&str; 4] = ["jsonrpc", "id", "method", "params"];

/// Checks one message's envelope (`raw` is its bytes, `value` its value), in this order: an
/// object, a valid `id` if any, `jsonrpc` "2.0", a string `method`, an object `params` if any,
/// then no other field.
pub(crate) fn envelope(raw: &[u8], value: Value) -> Result<Request, Box<Rejection>> {
    let Value::Object(mut fields) = value else {
        return Err(Box::new(Rejection {
            id: None,
            error: RpcError::invalid_request(
                "Invalid JSON-RPC request: a message must be a JSON object",
            ),
        }));
    };
    let id = match fields.get("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => {
            Some(Id::new(v, object_member(raw, "id")))
        }
        Some(_) => {
            return Err(Box::new(Rejection {
                id: None,
                error: RpcError::invalid_request(
                    "Invalid JSON-RPC request: `id` must be a string or a number",
                ),
            }));
        }
    };
    let refuse = |id: Option<Id>, message: String| {
        Box::new(Rejection {
            id,
            error: RpcError::invalid_request(message),
        })
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refuse(
            id,
            "Invalid JSON-RPC request: `jsonrpc` must be \"2.0\"".to_owned(),
        ));
    }
    let method = match fields.remove("method") {
        Some(Value::String(method)) => method,
        _ => {
            return Err(refuse(
                id,
                "Invalid JSON-RPC request: `method` must be a string".to_owned(),
            ));
        }
    };
    let params = match fields.remove("params") {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err(refuse(
                id,
                "Invalid JSON-RPC request: `params` must be an object when present".to_owned(),
            ));
        }
    };
    if let Some(extra) = fields
        .keys()
        .find(|k| !ENVELOPE_FIELDS.contains(&k.as_str()))
    {
        let message = format!(
            "Unknown request field `{}`; tool inputs belong inside params.arguments",
            visible(extra)
        );
        return Err(refuse(id, message));
    }
    Ok(Request { id, method, params })
}

/// How an answer's `id` is written.
#[derive(Debug, Clone)]
enum AnswerId {
    Echo(Box<RawValue>),
    /// An uncorrelated error before 2025-11-25.
    Null,
    /// An uncorrelated error from 2025-11-25 on: no `id` key.
    Omit,
}

/// One answer, already shaped for the revision it is under.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    id: AnswerId,
    body: Result<Value, RpcError>,
}

impl Answer {
    /// The result of `method`, shaped for `revision`.
    pub(crate) fn result(id: &Id, mut result: Value, revision: &str, method: &str) -> Answer {
        shape_result(&mut result, revision, method);
        Answer {
            id: AnswerId::Echo(id.raw.clone()),
            body: Ok(result),
        }
    }

    /// An error; `id` is `None` when the request had no valid id (uncorrelated), written as
    /// `revision` wants.
    pub(crate) fn error(id: Option<&Id>, error: RpcError, revision: &str) -> Answer {
        let id = match id {
            Some(id) => AnswerId::Echo(id.raw.clone()),
            None if at_least(revision, NO_NULL_ID_SINCE) => AnswerId::Omit,
            None => AnswerId::Null,
        };
        Answer {
            id,
            body: Err(error),
        }
    }

    fn serialize_into(&self, out: &mut Vec<u8>) {
        #[derive(Serialize)]
        struct ErrorOut<'a> {
            code: i64,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            data: Option<&'a Value>,
        }
        #[derive(Serialize)]
        struct Out<'a> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<Option<&'a RawValue>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            result: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<ErrorOut<'a>>,
        }
        let id = match &self.id {
            AnswerId::Echo(raw) => Some(Some(raw.as_ref())),
            AnswerId::Null => Some(None),
            AnswerId::Omit => None,
        };
        let (result, error) = match &self.body {
            Ok(result) => (Some(result), None),
            Err(e) => (
                None,
                Some(ErrorOut {
                    code: e.code,
                    message: &e.message,
                    data: e.data.as_ref(),
                }),
            ),
        };
        let out_value = Out {
            jsonrpc: "2.0",
            id,
            result,
            error,
        };
        // Serialising maps with string keys and plain values into a Vec cannot fail; should it
        // ever, the answer is an internal error rather than a broken line.
        if serde_json::to_writer(&mut *out, &out_value).is_err() {
            out.extend_from_slice(
                br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"internal error: the answer could not be written"}}"#,
            );
        }
    }
}

/// One answer as a line (newline included).
pub(crate) fn line(answer: &Answer) -> Vec<u8> {
    let mut out = Vec::new();
    answer.serialize_into(&mut out);
    out.push(b'\n');
    out
}

/// A batch's answers as one array line (newline included).
pub(crate) fn batch_line(answers: &[Answer]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        answer.serialize_into(&mut out);
    }
    out.extend_from_slice(b"]\n");
    out
}

/// The one shaping step every result goes through (digest §3.3): what `revision` does not
/// have is removed, and what it requires is added.
fn shape_result(result: &mut Value, revision: &str, method: &str) {
    let Value::Object(result) = result else {
        return;
    };
    if !at_least(revision, STRUCTURED_SINCE) {
        result.remove("structuredContent");
        if let Some(Value::Object(info)) = result.get_mut("serverInfo") {
            info.remove("title");
        }
        for list in ["tools", "resources", "resourceTemplates", "prompts"] {
            let Some(Value::Array(items)) = result.get_mut(list) else {
                continue;
            };
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                item.remove("title");
                item.remove("outputSchema");
                if list == "tools" && !at_least(revision, ANNOTATIONS_SINCE) {
                    item.remove("annotations");
                }
            }
        }
    }
    if requires_result_type(revision) {
        result
            .entry("resultType")
            .or_insert_with(|| Value::from("complete"));
        if CACHEABLE.contains(&method) {
            // Nothing holdmap lists is worth caching: the machine changes under it.
            result.entry("ttlMs").or_insert_with(|| Value::from(0));
            result
                .entry("cacheScope")
                .or_insert_with(|| Value::from("private"));
        }
    }
}

#[cfg(test)]
mod tests;
