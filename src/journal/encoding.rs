//! The canonical encoding v1 and the hash chain (normative text: `docs/journal-format.md`):
//! what an entry is ([`Kind`], [`Fields`], [`Entry`]), its exact bytes ([`encode`]), the genesis
//! hash and [`entry_hash`]. Changing a byte here breaks every existing journal.

use sha2::{Digest as _, Sha256};

/// The entry format (canonical encoding) this build writes and knows how to verify.
pub const SCHEMA_VERSION: i64 = 1;

/// Domain-separation prefix of every encoded entry (normative, see docs/journal-format.md).
const ENTRY_DOMAIN: &[u8] = b"holdcall.journal.v1\n";

/// Domain-separation prefix of the genesis hash. Never re-versioned: it names the chain, not the
/// entry format.
const GENESIS_DOMAIN: &[u8] = b"holdcall.journal.v1.genesis\n";

const TAG_STR: u8 = 0x73; // 's'
const TAG_INT: u8 = 0x69; // 'i'
const TAG_BOOL: u8 = 0x62; // 'b'
const TAG_NULL: u8 = 0x6E; // 'n'

/// What an entry records. Stored and hashed as [`Kind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    SessionStart,
    CallRequest,
    CallOutcome,
    SessionEnd,
    Anomaly,
    PolicyChange,
    DaemonStart,
    BudgetChange,
    /// The final word on a held call: approved or rejected, and why (`approval::Cause`).
    CallApproval,
    AgentChange,
    ConnectorChange,
    /// A tool definition pinned: at first sight in a listing, or re-pinned by a person.
    ToolPin,
    /// A pinned tool's listing changed: a new definition, re-appearing, or gone.
    ToolDrift,
    /// A session's listing was forwarded without the tools its policy denies (hide-denied).
    ToolsHidden,
    /// A setting changed (the drift guard, a connector's hide-denied).
    SettingChange,
}

impl Kind {
    /// Every kind, in documentation order. (Only the tests read the list or parse a kind back.)
    #[cfg(test)]
    pub(crate) const ALL: [Kind; 15] = [
        Kind::SessionStart,
        Kind::CallRequest,
        Kind::CallOutcome,
        Kind::SessionEnd,
        Kind::Anomaly,
        Kind::PolicyChange,
        Kind::DaemonStart,
        Kind::BudgetChange,
        Kind::CallApproval,
        Kind::AgentChange,
        Kind::ConnectorChange,
        Kind::ToolPin,
        Kind::ToolDrift,
        Kind::ToolsHidden,
        Kind::SettingChange,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::SessionStart => "session.start",
            Kind::CallRequest => "call.request",
            Kind::CallOutcome => "call.outcome",
            Kind::SessionEnd => "session.end",
            Kind::Anomaly => "anomaly",
            Kind::PolicyChange => "policy.change",
            Kind::DaemonStart => "daemon.start",
            Kind::BudgetChange => "budget.change",
            Kind::CallApproval => "call.approval",
            Kind::AgentChange => "agent.change",
            Kind::ConnectorChange => "connector.change",
            Kind::ToolPin => "tool.pin",
            Kind::ToolDrift => "tool.drift",
            Kind::ToolsHidden => "tools.hidden",
            Kind::SettingChange => "setting.change",
        }
    }

    #[cfg(test)]
    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything an entry may carry besides its chain position and time. Which fields a kind uses is
/// the caller's business; an absent field is NULL, which the encoding keeps apart from "" and 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Fields {
    pub session_id: Option<String>,
    pub seq: Option<i64>,
    pub connector: Option<String>,
    pub tool: Option<String>,
    pub client: Option<String>,
    pub agent: Option<String>,
    pub args_digest: Option<String>,
    pub decision: Option<String>,
    pub policy_id: Option<String>,
    pub reason: Option<String>,
    pub ok: Option<bool>,
    pub duration_ms: Option<i64>,
    pub anomaly: Option<String>,
    pub protocol_version: Option<String>,
    pub detail: Option<String>,
}

/// One journal row, exactly as stored and hashed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    pub chain_seq: i64,
    pub schema_version: i64,
    pub kind: String,
    pub occurred_at: String,
    #[serde(flatten)]
    pub fields: Fields,
    pub prev_hash: String,
    pub hash: String,
}

fn put_field(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    // usize → u64 is lossless on every platform Rust supports.
    out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    out.extend_from_slice(payload);
}

fn put_str(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        Some(s) => put_field(out, TAG_STR, s.as_bytes()),
        None => put_field(out, TAG_NULL, &[]),
    }
}

fn put_int(out: &mut Vec<u8>, value: Option<i64>) {
    match value {
        Some(i) => put_field(out, TAG_INT, &i.to_be_bytes()),
        None => put_field(out, TAG_NULL, &[]),
    }
}

fn put_bool(out: &mut Vec<u8>, value: Option<bool>) {
    match value {
        Some(b) => put_field(out, TAG_BOOL, &[u8::from(b)]),
        None => put_field(out, TAG_NULL, &[]),
    }
}

/// The canonical bytes of an entry (encoding v1, normative in docs/journal-format.md). Every field
/// is tagged and length-prefixed, so no two different entries encode alike. `prev_hash` enters the
/// hash separately and `hash` not at all.
pub fn encode(e: &Entry) -> Vec<u8> {
    let f = &e.fields;
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(ENTRY_DOMAIN);
    put_int(&mut out, Some(e.chain_seq)); // 1
    put_int(&mut out, Some(e.schema_version)); // 2
    put_str(&mut out, Some(&e.kind)); // 3
    put_str(&mut out, Some(&e.occurred_at)); // 4
    put_str(&mut out, f.session_id.as_deref()); // 5
    put_int(&mut out, f.seq); // 6
    put_str(&mut out, f.connector.as_deref()); // 7
    put_str(&mut out, f.tool.as_deref()); // 8
    put_str(&mut out, f.client.as_deref()); // 9
    put_str(&mut out, f.agent.as_deref()); // 10
    put_str(&mut out, f.args_digest.as_deref()); // 11
    put_str(&mut out, f.decision.as_deref()); // 12
    put_str(&mut out, f.policy_id.as_deref()); // 13
    put_str(&mut out, f.reason.as_deref()); // 14
    put_bool(&mut out, f.ok); // 15
    put_int(&mut out, f.duration_ms); // 16
    put_str(&mut out, f.anomaly.as_deref()); // 17
    put_str(&mut out, f.protocol_version.as_deref()); // 18
    put_str(&mut out, f.detail.as_deref()); // 19
    out
}

fn hex_nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Decodes a stored hash. Only the form Holdcall writes (64 lowercase hex characters) is accepted,
/// so a stored hash has exactly one spelling and a case change cannot hide in it.
fn decode_hash(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (hex_nibble(*hi)?, hex_nibble(*lo)?),
            _ => return None,
        };
        *slot = (hi << 4) | lo;
    }
    Some(out)
}

pub(super) fn is_hash(s: &str) -> bool {
    decode_hash(s).is_some()
}

/// The `prev_hash` of entry 1: SHA-256 of the genesis domain and the machine id, lowercase hex.
pub fn genesis(machine_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(GENESIS_DOMAIN);
    h.update(machine_id.as_bytes());
    crate::ids::hex(&h.finalize())
}

/// `SHA-256(raw32(prev_hash) ‖ encoded)` as lowercase hex; `None` if `prev_hash_hex` is not 64
/// lowercase hex characters.
pub fn entry_hash(prev_hash_hex: &str, encoded: &[u8]) -> Option<String> {
    let prev = decode_hash(prev_hash_hex)?;
    let mut h = Sha256::new();
    h.update(prev);
    h.update(encoded);
    Some(crate::ids::hex(&h.finalize()))
}

/// RFC 3339 UTC with nanoseconds: fixed width, so the strings sort as the instants do.
pub(super) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}
