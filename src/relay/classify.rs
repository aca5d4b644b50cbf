//! What one client→server line is to the firewall: blank, a message to forward, a `tools/call`
//! to decide, a batch, a disguised request, or something unreadable — and why (the anomaly).
//! Reads through `crate::mcp`'s strict scanner and envelope; never re-serialises a line.

use crate::mcp::envelope::{
    Member, Message, NotOneValue, ObjectLine, elements, envelope, keys_are_unique, member,
    one_object, one_value, unique_members,
};
use crate::mcp::json::escape::{decode_json_string, decode_wtf8};
use crate::mcp::json::scan::{ScanError, fold_key, skip_ws};
use crate::mcp::version::protocol_version_in;

/// The only method Holdcall decides on; compared with the decoded method value, case-sensitively
/// (keys fold, values do not: see [`fold_key`]). A value that is not exactly it but would read
/// as it to a looser reader is refused (see [`disguised_method`]).
const TOOLS_CALL: &str = "tools/call";

/// Every method whose exact spelling the relay acts on: `tools/call` is decided, `initialize`
/// and `server/discover` teach the relay the protocol revision. A method that is not one of
/// these byte for byte but reads as one after [`method_skeleton`] is a disguise.
const METHODS_READ: [&str; 3] = [TOOLS_CALL, "initialize", "server/discover"];

/// The top-level keys the relay reads to decide: a key that is not one of these (case folded)
/// but whose [`method_skeleton`] is one would be read as it by a server that trims or drops
/// invisible characters in keys, while the relay reads past it. Not `id`: a call the relay
/// reads as a notification (its `"id "` unseen) is refused anyway.
const ENVELOPE_KEYS_READ: [&str; 2] = ["method", "params"];

/// The keys of a call's `params` the decision rests on, guarded the same way.
const CALL_KEYS_READ: [&str; 2] = ["name", "arguments"];

/// Why a line, or the call in it, could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Anomaly {
    MalformedJson,
    Framing,
    DuplicateKey,
    UnreadableCall,
    Batch,
    Oversized,
    DuplicateId,
    /// A key or method with a control character in it, which a C-string reader would cut short
    /// (`"tools/call\u0000"`).
    Ambiguous,
    /// A method that is not exactly one the relay acts on but reads as one to a reader that
    /// folds case, trims or drops invisible characters (`"Tools/Call"`, `"tools/call "`).
    DisguisedMethod,
    /// A key that is not exactly one the relay reads to decide (`method`, `params`, and a
    /// call's `name` and `arguments`) but reads as one to a reader that trims keys or drops
    /// invisible characters in them (`"method "`, `"argu\u200bments"`).
    DisguisedKey,
}

impl Anomaly {
    /// Stable name for journals and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Anomaly::MalformedJson => "malformed_json",
            Anomaly::Framing => "framing",
            Anomaly::DuplicateKey => "duplicate_key",
            Anomaly::UnreadableCall => "unreadable_call",
            Anomaly::Batch => "batch",
            Anomaly::Oversized => "oversized",
            Anomaly::DuplicateId => "duplicate_id",
            Anomaly::Ambiguous => "ambiguous",
            Anomaly::DisguisedMethod => "disguised_method",
            Anomaly::DisguisedKey => "disguised_key",
        }
    }

    /// One phrase for stderr naming what was seen.
    pub fn describe(self) -> &'static str {
        match self {
            Anomaly::MalformedJson => "a line that is not exactly one valid JSON value",
            Anomaly::Framing => "a line that carries more than one JSON value",
            Anomaly::DuplicateKey => "a message with a repeated key, so its meaning is ambiguous",
            Anomaly::UnreadableCall => {
                "a tools/call whose tool name could not be read unambiguously"
            }
            Anomaly::Batch => "a batch with an element that is not an object with unique keys",
            Anomaly::Oversized => "a line longer than the frame limit",
            Anomaly::DuplicateId => "a request whose id is already in flight",
            Anomaly::Ambiguous => {
                "a message whose method or keys hold a control character, which a C-string parser would cut short"
            }
            Anomaly::DisguisedMethod => {
                "a message whose method is not exactly tools/call, initialize or server/discover but reads as one if case, spaces or invisible characters are ignored"
            }
            Anomaly::DisguisedKey => {
                "a message with a key that is not exactly method or params (or a call's name or arguments) but reads as one if spaces or invisible characters are ignored"
            }
        }
    }
}

/// A readable `tools/call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall<'a> {
    pub id: Option<&'a [u8]>,
    /// The decoded `params.name`.
    pub name: String,
    /// `params.arguments` exactly as written, whatever its JSON type.
    pub arguments: Option<&'a [u8]>,
    /// The revision the request names in `params._meta` (every 2026-07-28 request does): its
    /// refusal takes that shape even when no handshake was seen.
    pub protocol_version: Option<String>,
    /// `params.requestState` exactly as written: a 2026-07-28 retry of a call the server answered
    /// `input_required` carries the state that answer gave.
    pub request_state: Option<&'a [u8]>,
    /// Whether `params.inputResponses` is present (the retry's answers to the server).
    pub input_responses: bool,
    /// Whether `params.task` is present: the call creates a task (its result comes later through
    /// `tasks/result`, which is not a call).
    pub creates_task: bool,
}

/// What one client→server line is, and so what the relay does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientFrame<'a> {
    /// Only whitespace.
    Blank,
    /// Anything that is not a `tools/call`, including top-level scalars.
    Forward(Message<'a>),
    ToolCall(ToolCall<'a>),
    /// A `tools/call` whose tool name cannot be read unambiguously.
    UnreadableCall {
        id: Option<&'a [u8]>,
        anomaly: Anomaly,
    },
    /// A message whose method is a disguised spelling of one the relay acts on (see
    /// [`Anomaly::DisguisedMethod`]): refused, never forwarded.
    DisguisedMethod {
        id: Option<&'a [u8]>,
    },
    /// A message with a key that is a disguised spelling of one the relay reads (see
    /// [`Anomaly::DisguisedKey`]): refused, never forwarded.
    DisguisedKey {
        id: Option<&'a [u8]>,
    },
    /// A batch carrying at least one `tools/call` (or a disguised spelling of a method the
    /// relay acts on): the raw id of every element with an `id` key.
    BatchWithCall {
        ids: Vec<&'a [u8]>,
    },
    /// A batch without a `tools/call` (the empty batch included).
    BatchForward,
    /// The line cannot be trusted at all.
    Unreadable(Anomaly),
}

/// Classifies one client→server line (the bytes as read, trailing newline or not).
///
/// A batch element that is not an object, or that repeats a key, makes the whole batch
/// `Unreadable(Anomaly::Batch)`: the relay cannot tell which of its requests it would forward.
pub fn classify_client_line(line: &[u8]) -> ClientFrame<'_> {
    if has_inner_carriage_return(line) {
        // JSON calls a bare CR whitespace, but Python's universal newlines and Node's readline
        // end a line there: a server could read this one line as several messages.
        return ClientFrame::Unreadable(Anomaly::Framing);
    }
    let not_one = |e| match e {
        NotOneValue::Malformed => ClientFrame::Unreadable(Anomaly::MalformedJson),
        NotOneValue::SeveralValues => ClientFrame::Unreadable(Anomaly::Framing),
    };
    if line.get(skip_ws(line, 0)) == Some(&b'{') {
        // The common case, read in one scan: the members are the line's reading.
        return match one_object(line) {
            Ok(object) => classify_object(object),
            Err(e) => not_one(e),
        };
    }
    let value = match one_value(line) {
        Ok(Some(value)) => value,
        Ok(None) => return ClientFrame::Blank,
        Err(e) => return not_one(e),
    };
    match value.first() {
        Some(b'[') => classify_batch(value),
        // A scalar is not a JSON-RPC message; the server rejects it, and it cannot run a tool.
        _ => ClientFrame::Forward(Message::default()),
    }
}

/// Digest of a call's raw `arguments` bytes exactly as they appeared; absent arguments digest as
/// empty input, so "no arguments" and `null` stay distinguishable.
pub fn args_digest(arguments: Option<&[u8]>) -> String {
    crate::ids::sha256_hex(arguments.unwrap_or(&[]))
}

/// A CR anywhere but in the line's own `\r\n` ending.
fn has_inner_carriage_return(line: &[u8]) -> bool {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    body.contains(&b'\r')
}

/// A key a C-string reader would cut short (a NUL, or any control character): it could read
/// `"method\u0000x"` as `method`.
fn ambiguous_key(key: &[u8]) -> bool {
    key.iter().any(|b| b.is_ascii_control())
}

fn any_ambiguous(members: &[Member<'_>]) -> bool {
    members.iter().any(|m| ambiguous_key(&m.key))
}

fn classify_object(object: ObjectLine<'_>) -> ClientFrame<'_> {
    let ObjectLine { members, params } = object;
    if !keys_are_unique(&members) {
        // Which id or method the server would act on depends on its parser: trust neither.
        return ClientFrame::Unreadable(Anomaly::DuplicateKey);
    }
    if any_ambiguous(&members) {
        return ClientFrame::Unreadable(Anomaly::Ambiguous);
    }
    let message = envelope(&members);
    if disguised_key(&members, &ENVELOPE_KEYS_READ) {
        return ClientFrame::DisguisedKey { id: message.id };
    }
    if disguised_method(member(&members, "method")) {
        return ClientFrame::DisguisedMethod { id: message.id };
    }
    if message
        .method
        .as_deref()
        .is_some_and(|m| m.chars().any(char::is_control))
    {
        return ClientFrame::Unreadable(Anomaly::Ambiguous);
    }
    if message.method.as_deref() != Some(TOOLS_CALL) {
        return ClientFrame::Forward(message);
    }
    read_call(message.id, params)
}

/// A `tools/call` whose `params` the line's scan read as `params` (see `one_object`; `None`:
/// missing or not an object). The line's keys are unique, so these are the message's params.
fn read_call<'a>(
    id: Option<&'a [u8]>,
    params: Option<Result<Vec<Member<'a>>, ScanError>>,
) -> ClientFrame<'a> {
    let unreadable = |anomaly| ClientFrame::UnreadableCall { id, anomaly };
    let Some(checked) = params else {
        return unreadable(Anomaly::UnreadableCall);
    };
    // A repeated key anywhere in params could make the server run a different name or different
    // arguments from the ones decided on.
    let members = match checked {
        Ok(members) => members,
        Err(ScanError::DuplicateKey) => return unreadable(Anomaly::DuplicateKey),
        Err(ScanError::Malformed) => return unreadable(Anomaly::UnreadableCall),
    };
    if any_ambiguous(&members) {
        return unreadable(Anomaly::Ambiguous);
    }
    if disguised_key(&members, &CALL_KEYS_READ) {
        return unreadable(Anomaly::DisguisedKey);
    }
    let Some(name) = member(&members, "name").and_then(decode_json_string) else {
        return unreadable(Anomaly::UnreadableCall);
    };
    ClientFrame::ToolCall(ToolCall {
        id,
        name,
        arguments: member(&members, "arguments"),
        protocol_version: protocol_version_in(&members),
        request_state: member(&members, "requestState"),
        input_responses: member(&members, "inputResponses").is_some(),
        creates_task: member(&members, "task").is_some(),
    })
}

fn classify_batch(array: &[u8]) -> ClientFrame<'_> {
    let Some(elements) = elements(array) else {
        return ClientFrame::Unreadable(Anomaly::MalformedJson);
    };
    let mut ids = Vec::new();
    let mut carries_call = false;
    for element in elements {
        let Some(members) = unique_members(element) else {
            return ClientFrame::Unreadable(Anomaly::Batch);
        };
        if any_ambiguous(&members) {
            return ClientFrame::Unreadable(Anomaly::Batch);
        }
        if let Some(id) = member(&members, "id") {
            ids.push(id);
        }
        let raw = member(&members, "method");
        let method = raw.and_then(decode_json_string);
        carries_call |= method.as_deref() == Some(TOOLS_CALL)
            || disguised_method(raw)
            || disguised_key(&members, &ENVELOPE_KEYS_READ);
    }
    if carries_call {
        ClientFrame::BatchWithCall { ids }
    } else {
        ClientFrame::BatchForward
    }
}

/// Whether the raw `method` value is a JSON string that is not exactly a method the relay acts
/// on ([`METHODS_READ`]) but whose [`method_skeleton`] is one. The exact spellings, escaped or
/// not, are read as themselves; a lone surrogate is read as nothing, so `"tools/call\ud800"` is
/// a disguise too.
fn disguised_method(raw: Option<&[u8]>) -> bool {
    let Some(decoded) = raw
        .filter(|r| r.first() == Some(&b'"'))
        .and_then(decode_wtf8)
    else {
        return false;
    };
    if METHODS_READ.iter().any(|m| m.as_bytes() == &*decoded) {
        return false;
    }
    let skeleton = method_skeleton(&String::from_utf8_lossy(&decoded));
    METHODS_READ.contains(&skeleton.as_str())
}

/// Whether any key of `members` is not one of `read` (as a case-insensitive reader matches keys)
/// but has one of them as its [`method_skeleton`]: `"method "`, `" params"`, `"argu\u200bments"`.
/// A reader that trims keys would take it as that key, the relay would not. Keys such as
/// `method_name` keep their other letters and are not disguises.
fn disguised_key(members: &[Member<'_>], read: &[&str]) -> bool {
    members.iter().any(|m| {
        !read.iter().any(|k| *fold_key(k.as_bytes()) == *m.folded)
            && read.contains(&method_skeleton(&String::from_utf8_lossy(&m.key)).as_str())
    })
}

/// A method as the loosest reader we know of might see it: compatibility forms mapped to ASCII
/// (fullwidth letters and solidus, mathematical and circled letters, the other slashes), then
/// case folded like keys ([`fold_key`]), then everything dropped that is not an ASCII letter,
/// digit or `/` (spaces of every kind, NUL and other controls, zero-width and other invisible
/// characters, `U+FFFD` where a lone surrogate was). Dropping too much only refuses more.
fn method_skeleton(method: &str) -> String {
    let mapped: String = method.chars().map(compatibility_ascii).collect();
    let folded = fold_key(mapped.as_bytes());
    String::from_utf8_lossy(&folded)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '/')
        .collect()
}

/// The ASCII character NFKC (or a reader that confuses look-alike slashes) turns `c` into, for
/// the letters, digits and slashes a method is made of; `c` itself otherwise. A small table, not
/// Unicode's: enough to see `ｔｏｏｌｓ／ｃａｌｌ` or `𝐭𝐨𝐨𝐥𝐬/𝐜𝐚𝐥𝐥` as `tools/call`.
fn compatibility_ascii(c: char) -> char {
    let code = u32::from(c);
    let ascii = match code {
        // Fullwidth ASCII, `！` to `～`.
        0xFF01..=0xFF5E => char::from_u32(code - 0xFEE0),
        // Fraction slash, division slash, big solidus, mathematical rising diagonal.
        0x2044 | 0x2215 | 0x29F8 | 0x27CB => Some('/'),
        // Mathematical alphanumeric letters: 13 styles of A-Z then a-z, from bold on.
        0x1D400..=0x1D6A3 => {
            let index = (code - 0x1D400) % 52;
            let base = if index < 26 { b'A' } else { b'a' };
            char::from_u32(u32::from(base) + index % 26)
        }
        // Mathematical digits: five styles of 0-9.
        0x1D7CE..=0x1D7FF => char::from_u32(u32::from(b'0') + (code - 0x1D7CE) % 10),
        // Circled letters.
        0x24B6..=0x24CF => char::from_u32(code - 0x24B6 + u32::from(b'A')),
        0x24D0..=0x24E9 => char::from_u32(code - 0x24D0 + u32::from(b'a')),
        _ => None,
    };
    ascii.unwrap_or(c)
}

#[cfg(test)]
mod tests;
