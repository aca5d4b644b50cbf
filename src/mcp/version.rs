//! Protocol revisions: which one a connection negotiated (learned from the handshake as it
//! passes), which one a single request names, and what a revision changes in a result's shape.

use crate::mcp::envelope::{
    Member, Message, elements, member, object_member, same_id, unique_members,
};
use crate::mcp::json::escape::decode_json_string;

/// Where a `server/discover` request carries the version it proposes (inside `params._meta`).
/// Only the namespaced key counts: an unnamespaced `protocolVersion` there is not the proposal.
const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// First protocol revision whose results must say `"resultType"`. Revisions are ISO dates, so
/// string order is date order.
const RESULT_TYPE_SINCE: &str = "2026-07-28";

/// Whether results in this protocol revision must carry `"resultType"`. `""` (no handshake seen)
/// is older than every revision.
pub(crate) fn requires_result_type(protocol_version: &str) -> bool {
    protocol_version >= RESULT_TYPE_SINCE
}

/// The version a request proposes in `params._meta["io.modelcontextprotocol/protocolVersion"]`,
/// if that is a string. From 2026-07-28 every request carries it, so the relay may prefer it to
/// the connection's [`Negotiation`] when shaping one refusal.
pub(crate) fn request_protocol_version(params: &[u8]) -> Option<String> {
    protocol_version_in(&unique_members(params)?)
}

/// [`request_protocol_version`] of params already read into members whose keys are unique,
/// so large params are not scanned again.
pub(crate) fn protocol_version_in(params: &[Member<'_>]) -> Option<String> {
    let meta = member(params, "_meta")?;
    decode_json_string(object_member(meta, PROTOCOL_VERSION_META_KEY)?)
}

/// The protocol revision the connection negotiated, learned from the handshake as it passes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Negotiation {
    version: String,
    initialize_id: Option<Vec<u8>>,
    discover: Option<PendingDiscover>,
}

#[derive(Debug, Clone)]
struct PendingDiscover {
    id: Vec<u8>,
    proposal: Option<String>,
}

impl Negotiation {
    /// Notes a client request that starts a handshake.
    pub(crate) fn on_client(&mut self, m: &Message<'_>) {
        // A notification gets no response, so there is nothing to wait for.
        let Some(id) = m.id else { return };
        match m.method.as_deref() {
            Some("initialize") => self.initialize_id = Some(id.to_vec()),
            Some("server/discover") => {
                self.discover = Some(PendingDiscover {
                    id: id.to_vec(),
                    proposal: m.params.and_then(request_protocol_version),
                });
            }
            _ => {}
        }
    }

    /// Learns the version from the server's response to a pending handshake request.
    pub(crate) fn on_server(&mut self, m: &Message<'_>) {
        // A server→client request lives in the server's own id space; only responses count.
        if m.method.is_some() {
            return;
        }
        let Some(id) = m.id else { return };
        if self
            .initialize_id
            .as_deref()
            .is_some_and(|pending| same_id(pending, id))
        {
            self.initialize_id = None;
            let version = m
                .result
                .and_then(|result| object_member(result, "protocolVersion"))
                .and_then(decode_json_string);
            if let Some(version) = version {
                self.version = version;
            }
        }
        if self
            .discover
            .as_ref()
            .is_some_and(|pending| same_id(&pending.id, id))
        {
            let Some(pending) = self.discover.take() else {
                return;
            };
            // On an error, or without a usable list, the client falls back to `initialize`.
            if m.error.is_some() {
                return;
            }
            let listed = m
                .result
                .and_then(|result| object_member(result, "supportedVersions"))
                .and_then(string_array);
            if let Some(listed) = listed {
                self.version = choose_version(&listed, pending.proposal.as_deref());
            }
        }
    }

    /// The negotiated revision; `""` before any handshake was answered.
    pub(crate) fn version(&self) -> &str {
        &self.version
    }
}

/// The proposal if the server lists it, else the newest listed revision older than it, else `""`.
/// Without a proposal, the newest listed: an extra `resultType` is harmless to an older client,
/// while a missing one can break a newer client.
fn choose_version(listed: &[String], proposal: Option<&str>) -> String {
    let best = match proposal {
        Some(proposal) if listed.iter().any(|v| v == proposal) => Some(proposal),
        Some(proposal) => listed
            .iter()
            .map(String::as_str)
            .filter(|v| *v < proposal)
            .max(),
        None => listed.iter().map(String::as_str).max(),
    };
    best.unwrap_or_default().to_owned()
}

fn string_array(raw: &[u8]) -> Option<Vec<String>> {
    elements(raw)?.into_iter().map(decode_json_string).collect()
}

#[cfg(test)]
mod tests;
