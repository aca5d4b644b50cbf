//! The MCP wire as bytes, shared by every binary that speaks it (`holdcall serve` and the coming
//! `holdmap`): a strict JSON scanner and the one string-escape decoder (`json`), the JSON-RPC
//! envelope of one line (`envelope`), protocol revisions (`version`), and the capped line reader
//! (`line`).
//!
//! Owns: reading one newline-delimited JSON-RPC line strictly and pointing at the exact bytes of
//! its envelope fields; learning the negotiated revision from the handshake as it passes.
//!
//! Must never: re-serialise a line (every slice it hands out is a sub-slice of the bytes as
//! read); guess (a line two JSON readers could read differently — a repeated key, a second value
//! on the line — is reported, never resolved one way); panic or recurse on the input's nesting
//! (a hostile line costs linear time and bounded stack); hold Holdcall policy, refusal wording
//! or firewall-only types (those are `relay::classify` and `relay::refusal`); do I/O other than
//! the line reader. It imports only std, crates, and `crate::limits`, `crate::ids`,
//! `crate::text`.

pub(crate) mod envelope;
pub(crate) mod json;
pub(crate) mod line;
pub(crate) mod tools;
pub(crate) mod version;
