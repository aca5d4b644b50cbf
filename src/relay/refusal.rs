//! The exact bytes of Holdcall's refusals: the texts a refused call, batch or disguised request
//! is answered with, and the JSON-RPC lines that carry them back to the client.

use crate::mcp::json::escape::push_json_string;
use crate::mcp::version::requires_result_type;

/// Refusal text for a call a policy rule denies.
pub(crate) const DENIED_BY_POLICY: &str =
    "Holdcall refused this call: a policy rule denies it. Do not retry automatically.";

/// Refusal text for a call the daemon did not decide in time (or could not be asked about).
pub(crate) const DENIED_NO_DECISION: &str = "Holdcall refused this call: it could not get a decision \
     from its daemon, and a call without a decision never runs. Do not retry automatically.";

/// Refusal text for a `tools/call` whose tool name cannot be read unambiguously.
pub(crate) const DENIED_UNREADABLE: &str = "Holdcall refused this call: its tool name could not be read \
     unambiguously. Do not retry automatically.";

/// Refusal text for a held call a person rejected. The person's own reason, if any, follows
/// it (see [`person_rejected`]).
pub(crate) const DENIED_BY_PERSON: &str = "Holdcall refused this call: a person looked at it and rejected it. Do not retry automatically.";

/// Refusal text for a held call nobody approved or rejected within the approval timeout.
pub(crate) const DENIED_APPROVAL_TIMEOUT: &str = "Holdcall refused this call: it needed a person's \
     approval, and nobody decided in time. Do not retry automatically.";

/// Refusal text for a held call whose session or daemon connection ended before a person
/// decided.
pub(crate) const DENIED_APPROVAL_ENDED: &str = "Holdcall refused this call: it was waiting for a \
     person's approval when its session ended. Do not retry automatically.";

/// Refusal text for a held call whose arguments were too large to show to a person.
pub(crate) const DENIED_ARGUMENTS_UNKNOWN: &str = "Holdcall refused this call: it needs a person's \
     approval, and its arguments are too large to show to one, so nobody could check them. \
     Do not retry automatically.";

/// The refusal text for a call a person rejected, with their reason when they gave one. The
/// reason is written for the model on purpose (decision 0007): it is the only way a person can
/// say what to do instead.
pub(crate) fn person_rejected(reason: Option<&str>) -> String {
    match reason.filter(|r| !r.is_empty()) {
        Some(r) => format!("{DENIED_BY_PERSON} Their reason: {r}"),
        None => DENIED_BY_PERSON.to_string(),
    }
}

/// Refusal text for a call the rules allow but a budget has no room left for.
pub(crate) const DENIED_OVER_BUDGET: &str = "Holdcall refused this call: this session has used up a \
     budget that caps how many such calls it may make. Do not retry automatically.";

/// A call whose id is already used by a call in flight.
pub(crate) const DENIED_DUPLICATE_ID: &str = "Holdcall refused this call: another call with the same id \
     is still running, and their answers could not be told apart. Do not retry automatically.";

/// Error message for every request in a batch that carries a `tools/call`.
pub(crate) const DENIED_BATCH: &str = "Holdcall refused this batch: it carries a tools/call, and \
     Holdcall decides calls only one at a time. Send each call on its own.";

/// Refusal text (a JSON-RPC error) for a request whose method is a disguised spelling of one
/// the relay acts on.
pub(crate) const DENIED_DISGUISED_METHOD: &str = "Holdcall refused this request: its method is not \
     spelled exactly as the protocol spells it, but a server that ignores case, spaces or \
     invisible characters would read it as one Holdcall must see. Send the method exactly.";

/// Refusal text (a JSON-RPC error) for a request with a key that is a disguised spelling of one
/// of the envelope keys the relay reads (`"method "`, `"me\u200bthod"`).
pub(crate) const DENIED_DISGUISED_KEY: &str = "Holdcall refused this request: one of its keys is not \
     spelled exactly as the protocol spells it, but a server that ignores case, spaces or \
     invisible characters would read it as method or params. Send the keys exactly.";

/// JSON-RPC error code of the refusal of a disguised method: Invalid Request.
const DISGUISED_METHOD_CODE: &str = "-32600";

/// JSON-RPC error code of a batch refusal: the implementation-defined server error range.
const BATCH_REFUSAL_CODE: &str = "-32000";

/// The refusal result for one call, as one compact line ending in `\n`.
///
/// `id` is copied verbatim, never decoded, so a numeric id beyond 2^53 keeps its digits.
pub(crate) fn refusal(id: &[u8], text: &str, protocol_version: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + text.len() + 128);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    push_json_string(&mut out, text);
    out.extend_from_slice(br#"}],"isError":true"#);
    if requires_result_type(protocol_version) {
        out.extend_from_slice(br#","resultType":"complete""#);
    }
    out.extend_from_slice(b"}}\n");
    out
}

/// The refusal of a batch: one JSON-RPC error per id, as one compact line ending in `\n`.
/// `None` when no element expects an answer (a batch of notifications gets no response).
pub(crate) fn batch_refusal(ids: &[&[u8]], text: &str) -> Option<Vec<u8>> {
    if ids.is_empty() {
        return None;
    }
    let mut message = Vec::with_capacity(text.len() + 2);
    push_json_string(&mut message, text);
    let mut out = Vec::new();
    out.push(b'[');
    for (index, id) in ids.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        push_id(&mut out, id);
        out.extend_from_slice(br#","error":{"code":"#);
        out.extend_from_slice(BATCH_REFUSAL_CODE.as_bytes());
        out.extend_from_slice(br#","message":"#);
        out.extend_from_slice(&message);
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"]\n");
    Some(out)
}

/// A JSON-RPC error answering request `id` (a disguised method), as one compact line ending in
/// `\n`. `id` is copied verbatim.
pub(crate) fn disguised_method_refusal(id: &[u8]) -> Vec<u8> {
    invalid_request_refusal(id, DENIED_DISGUISED_METHOD)
}

/// A JSON-RPC error answering request `id` (a disguised key), as one compact line.
pub(crate) fn disguised_key_refusal(id: &[u8]) -> Vec<u8> {
    invalid_request_refusal(id, DENIED_DISGUISED_KEY)
}

fn invalid_request_refusal(id: &[u8], text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + text.len() + 64);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(DISGUISED_METHOD_CODE.as_bytes());
    out.extend_from_slice(br#","message":"#);
    push_json_string(&mut out, text);
    out.extend_from_slice(b"}}\n");
    out
}

/// Appends a raw id verbatim. No line this module reads yields an empty id; should a caller pass
/// one anyway, `null` keeps the refusal valid JSON instead of breaking the client's stream.
fn push_id(out: &mut Vec<u8>, id: &[u8]) {
    out.extend_from_slice(if id.is_empty() { b"null" } else { id });
}

#[cfg(test)]
mod tests;
