//! The journal: Holdcall's append-only, hash-chained record of every decision, kept in SQLite.
//!
//! This module owns the database file and everything in it: the schema (`meta`, `journal`,
//! `policies`), opening it safely (mode 0600, WAL, `synchronous` chosen by [`Durability`] and read
//! back), the canonical encoding v1 and the hash chain (normative text: `docs/journal-format.md`),
//! appending entries through the single writer [`Journal`], the stored policy table, the read-only
//! [`Reader`] with its queries, and [`Reader::verify`]. It also owns the machine id file, because
//! that id seeds the chain.
//!
//! It must never update or delete an entry, never report a write as done before its transaction
//! has committed, never swallow a write error, never let a [`Reader`] create or migrate a
//! database, and never hash anything other than the exact strings it stores.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{
    Connection, OpenFlags, OptionalExtension as _, Row, Transaction, TransactionBehavior, params,
};
use sha2::{Digest as _, Sha256};

use crate::config::Durability;
use crate::policy::budget::BudgetRow;

/// The entry format (canonical encoding) this build writes and knows how to verify.
pub const SCHEMA_VERSION: i64 = 1;

/// The database layout version stored in `meta.schema`. Independent of [`SCHEMA_VERSION`]: a new
/// index changes this one, a new hashed field changes the other.
pub const DB_SCHEMA: &str = "1";

/// Domain-separation prefix of every encoded entry (normative, see docs/journal-format.md).
const ENTRY_DOMAIN: &[u8] = b"holdcall.journal.v1\n";

/// Domain-separation prefix of the genesis hash. Never re-versioned: it names the chain, not the
/// entry format.
const GENESIS_DOMAIN: &[u8] = b"holdcall.journal.v1.genesis\n";

const TAG_STR: u8 = 0x73; // 's'
const TAG_INT: u8 = 0x69; // 'i'
const TAG_BOOL: u8 = 0x62; // 'b'
const TAG_NULL: u8 = 0x6E; // 'n'

/// How long the writer or a reader waits for another connection's lock before giving up. Long
/// enough to ride out a checkpoint or a `verify` scan, short enough that a stuck peer surfaces as an
/// error well inside the relay's decision budget on the next call. (Belongs in `limits.rs`; kept
/// here because this change may only touch the journal module.)
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Hashes in messages are shortened to this many hex characters: enough to tell them apart by eye.
const SHORT_HASH_CHARS: usize = 12;

/// The only mode the journal, its WAL files and the machine id may have: the decisions and their
/// arguments' digests are the user's business alone.
const PRIVATE_MODE: u32 = 0o600;

const SCHEMA_SQL: &str = "
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS journal(
    chain_seq INTEGER PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    session_id TEXT,
    seq INTEGER,
    connector TEXT,
    tool TEXT,
    client TEXT,
    agent TEXT,
    args_digest TEXT,
    decision TEXT,
    policy_id TEXT,
    reason TEXT,
    ok INTEGER,
    duration_ms INTEGER,
    anomaly TEXT,
    protocol_version TEXT,
    detail TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS journal_session_seq ON journal(session_id, seq);
CREATE INDEX IF NOT EXISTS journal_kind ON journal(kind);
CREATE TRIGGER IF NOT EXISTS journal_no_update BEFORE UPDATE ON journal
BEGIN
    SELECT RAISE(ABORT, 'the journal is append-only');
END;
CREATE TRIGGER IF NOT EXISTS journal_no_delete BEFORE DELETE ON journal
BEGIN
    SELECT RAISE(ABORT, 'the journal is append-only');
END;
CREATE TABLE IF NOT EXISTS policies(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    effect TEXT NOT NULL CHECK(effect IN ('allow','ask','deny')),
    specificity INTEGER NOT NULL,
    tool TEXT,
    agent TEXT,
    connector TEXT,
    created_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS budgets(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    calls INTEGER NOT NULL CHECK(calls >= 1),
    tool TEXT,
    agent TEXT,
    connector TEXT,
    created_at TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS budgets_one_per_scope
    ON budgets(ifnull(tool, ''), ifnull(agent, ''), ifnull(connector, ''));
CREATE TABLE IF NOT EXISTS agents(
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    enrolled_at TEXT NOT NULL,
    UNIQUE(dev, ino)
) STRICT;
CREATE TABLE IF NOT EXISTS connectors(
    name TEXT PRIMARY KEY,
    env_key TEXT NOT NULL,
    command TEXT NOT NULL,
    pass_env TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    cwd TEXT NOT NULL,
    pinned_env TEXT NOT NULL,
    secret_id TEXT NOT NULL
) STRICT;
";

/// Column list shared by every query that reads entries, in the order [`entry_from_row`] expects.
const ENTRY_COLUMNS: &str = "chain_seq, schema_version, kind, occurred_at, session_id, seq, \
     connector, tool, client, agent, args_digest, decision, policy_id, reason, ok, duration_ms, \
     anomaly, protocol_version, detail, prev_hash, hash";

/// Index of `hash` in [`ENTRY_COLUMNS`].
const HASH_COLUMN: usize = 20;

const POLICY_COLUMNS: &str =
    "seq, id, source, text, effect, specificity, tool, agent, connector, created_at";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Everything that can go wrong in the journal, each with what the user should do about it.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum JournalError {
    #[error("cannot create or open the journal file {path}: {source}")]
    #[diagnostic(help(
        "the daemon creates the data directory before the journal; check that {} exists and is writable by you",
        path.parent().unwrap_or(path).display()
    ))]
    CreateFile {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot restrict {path} to mode 0600: {source}")]
    #[diagnostic(help(
        "the journal must be readable by you alone; check that you own {}, or fix it with `chmod 600`",
        path.display()
    ))]
    Permissions {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot open the journal {path}: {source}")]
    #[diagnostic(help(
        "check that {} is a Holdcall journal (an SQLite file) and that you can read it; if it is damaged, move it aside and Holdcall starts a new journal",
        path.display()
    ))]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("{path} has no journal yet: the daemon creates it the first time it records something")]
    #[diagnostic(help(
        "start the daemon (any relayed MCP call does) and try again, or check the path if you expected one"
    ))]
    NoJournalYet { path: PathBuf },

    #[error("SQLite would not set {pragma} = {wanted} on {path} (it reports {got})")]
    #[diagnostic(help(
        "Holdcall needs WAL mode and the durability you chose; keep {} on a local disk (not a network or synced folder)",
        path.display()
    ))]
    PragmaRefused {
        path: PathBuf,
        pragma: &'static str,
        wanted: String,
        got: String,
    },

    #[error(
        "{path} was written by a newer Holdcall (database schema {found}, this build knows {DB_SCHEMA})"
    )]
    #[diagnostic(help(
        "upgrade Holdcall; this build will not read or change a journal it does not understand"
    ))]
    SchemaTooNew { path: PathBuf, found: String },

    #[error("could not record to the journal {path}: {source}")]
    #[diagnostic(help(
        "nothing from this write was recorded (the transaction rolled back), so do not act on it; check free disk space and that {} is writable, then run `holdcall verify`",
        path.display()
    ))]
    Write {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("could not read the journal {path}: {source}")]
    #[diagnostic(help("if this persists, run `holdcall verify` and read the daemon's log; the database is {}", path.display()))]
    Read {
        path: PathBuf,
        source: rusqlite::Error,
    },

    #[error("entry {chain_seq} of {path} cannot be read: {message}")]
    #[diagnostic(help(
        "the row was edited by hand or damaged; run `holdcall verify` to see every problem"
    ))]
    Malformed {
        path: PathBuf,
        chain_seq: i64,
        message: String,
    },

    #[error(
        "the last entry of {path} stores a hash that is not 64 lowercase hex characters, so nothing can be chained after it"
    )]
    #[diagnostic(help("the journal was edited by hand; run `holdcall verify` and keep a copy of {} before doing anything else", path.display()))]
    HeadMalformed { path: PathBuf },

    #[error("the machine id file {path} is missing, but the journal already has entries")]
    #[diagnostic(help(
        "the machine id seeds the chain, so a new one would make the whole journal fail verification; restore {} from a backup, or move the journal aside to start a new chain",
        path.display()
    ))]
    MachineIdMissing { path: PathBuf },

    #[error("the machine id file {path} is empty")]
    #[diagnostic(help(
        "the machine id seeds the journal's chain; restore {} from a backup, or move the journal aside so a new id and a new chain can start",
        path.display()
    ))]
    MachineIdEmpty { path: PathBuf },

    #[error("cannot read or write the machine id file {path}: {source}")]
    #[diagnostic(help("check that {} and its directory are yours and writable", path.display()))]
    MachineIdIo {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot read random bytes from /dev/urandom: {source}")]
    #[diagnostic(help(
        "the machine id needs the operating system's random source; check that /dev/urandom is readable"
    ))]
    Random { source: std::io::Error },

    #[error("there is no policy with id {id:?} to remove")]
    #[diagnostic(help("list the policies with `holdcall policy list`; nothing was changed"))]
    UnknownPolicy { id: String },

    #[error("there is no agent named {name:?}")]
    #[diagnostic(help("`holdcall agent list` shows the enrolled agents; nothing was changed"))]
    UnknownAgent { name: String },

    #[error("this executable is already enrolled as agent {holder:?}")]
    #[diagnostic(help(
        "one executable has one name: use {holder:?}, or `holdcall agent remove {holder}` first; nothing was changed"
    ))]
    AgentImageTaken { holder: String },

    #[error("no connector named {name:?} is registered")]
    #[diagnostic(help(
        "`holdcall connector list` shows the registered connectors; nothing was changed"
    ))]
    UnknownConnector { name: String },

    #[error("a policy with id {id:?} already exists")]
    #[diagnostic(help("remove it in the same change, or pick another id; nothing was changed"))]
    PolicyIdTaken { id: String },

    #[error("policy {id:?} asks for seq {seq}, but seqs below {next} are used or retired")]
    #[diagnostic(help(
        "take the seq from `next_policy_seq()` (and count up from it for several); a removed policy's seq is never reused"
    ))]
    PolicySeqReused { id: String, seq: i64, next: i64 },

    #[error("policy {id:?} has effect {effect:?}; it must be allow, ask or deny")]
    #[diagnostic(help("this is a bug in the caller; nothing was changed"))]
    PolicyEffect { id: String, effect: String },

    #[error("{given:?} is not a journal head")]
    #[diagnostic(help(
        "pass the full 64-character hash that `holdcall verify` printed as the head"
    ))]
    BadExpectHead { given: String },

    #[error("the journal {path} has reached the largest chain_seq SQLite can store")]
    #[diagnostic(help("move the journal aside to start a new chain"))]
    ChainFull { path: PathBuf },
}

// ---------------------------------------------------------------------------------------------
// Entries and the canonical encoding
// ---------------------------------------------------------------------------------------------

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
}

impl Kind {
    /// Every kind, in documentation order.
    pub const ALL: [Kind; 11] = [
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
    ];

    pub fn as_str(self) -> &'static str {
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
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
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

fn is_hash(s: &str) -> bool {
    decode_hash(s).is_some()
}

fn short(hash: &str) -> &str {
    hash.get(..SHORT_HASH_CHARS).unwrap_or(hash)
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
fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

// ---------------------------------------------------------------------------------------------
// Reading rows
// ---------------------------------------------------------------------------------------------

fn value_kind(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real number",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}

/// Reads a column strictly. A hand editor can rebuild the table without STRICT and store anything,
/// so a wrong type is described (and becomes a verify problem) instead of being coerced.
fn col_text(row: &Row<'_>, idx: usize, name: &str) -> Result<Option<String>, String> {
    match row.get_ref(idx) {
        Ok(ValueRef::Null) => Ok(None),
        Ok(ValueRef::Text(b)) => String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| format!("its {name} is not valid UTF-8")),
        Ok(other) => Err(format!(
            "its {name} holds {} where text belongs",
            value_kind(other)
        )),
        Err(e) => Err(format!("its {name} cannot be read ({e})")),
    }
}

fn col_int(row: &Row<'_>, idx: usize, name: &str) -> Result<Option<i64>, String> {
    match row.get_ref(idx) {
        Ok(ValueRef::Null) => Ok(None),
        Ok(ValueRef::Integer(i)) => Ok(Some(i)),
        Ok(other) => Err(format!(
            "its {name} holds {} where an integer belongs",
            value_kind(other)
        )),
        Err(e) => Err(format!("its {name} cannot be read ({e})")),
    }
}

fn col_bool(row: &Row<'_>, idx: usize, name: &str) -> Result<Option<bool>, String> {
    match col_int(row, idx, name)? {
        None => Ok(None),
        Some(0) => Ok(Some(false)),
        Some(1) => Ok(Some(true)),
        Some(other) => Err(format!("its {name} holds {other} where 0 or 1 belongs")),
    }
}

fn required<T>(value: Option<T>, name: &str) -> Result<T, String> {
    value.ok_or_else(|| format!("its {name} is NULL"))
}

/// Decodes a row selected with [`ENTRY_COLUMNS`]; `Err` describes what is wrong with it.
fn entry_from_row(row: &Row<'_>) -> Result<Entry, String> {
    Ok(Entry {
        chain_seq: required(col_int(row, 0, "chain_seq")?, "chain_seq")?,
        schema_version: required(col_int(row, 1, "schema_version")?, "schema_version")?,
        kind: required(col_text(row, 2, "kind")?, "kind")?,
        occurred_at: required(col_text(row, 3, "occurred_at")?, "occurred_at")?,
        fields: Fields {
            session_id: col_text(row, 4, "session_id")?,
            seq: col_int(row, 5, "seq")?,
            connector: col_text(row, 6, "connector")?,
            tool: col_text(row, 7, "tool")?,
            client: col_text(row, 8, "client")?,
            agent: col_text(row, 9, "agent")?,
            args_digest: col_text(row, 10, "args_digest")?,
            decision: col_text(row, 11, "decision")?,
            policy_id: col_text(row, 12, "policy_id")?,
            reason: col_text(row, 13, "reason")?,
            ok: col_bool(row, 14, "ok")?,
            duration_ms: col_int(row, 15, "duration_ms")?,
            anomaly: col_text(row, 16, "anomaly")?,
            protocol_version: col_text(row, 17, "protocol_version")?,
            detail: col_text(row, 18, "detail")?,
        },
        prev_hash: required(col_text(row, 19, "prev_hash")?, "prev_hash")?,
        hash: required(col_text(row, HASH_COLUMN, "hash")?, "hash")?,
    })
}

fn policy_from_row(row: &Row<'_>) -> rusqlite::Result<PolicyRow> {
    Ok(PolicyRow {
        seq: row.get(0)?,
        id: row.get(1)?,
        source: row.get(2)?,
        text: row.get(3)?,
        effect: row.get(4)?,
        specificity: row.get(5)?,
        tool: row.get(6)?,
        agent: row.get(7)?,
        connector: row.get(8)?,
        created_at: row.get(9)?,
    })
}

const BUDGET_COLUMNS: &str = "seq, id, calls, tool, agent, connector, created_at";

fn read_budgets(conn: &Connection) -> rusqlite::Result<Vec<BudgetRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {BUDGET_COLUMNS} FROM budgets ORDER BY seq"
    ))?;
    let rows = stmt.query_map([], |row| {
        Ok(BudgetRow {
            budget: crate::policy::budget::Budget {
                seq: row.get(0)?,
                id: row.get(1)?,
                calls: row.get(2)?,
                tool: row.get(3)?,
                agent: row.get(4)?,
                connector: row.get(5)?,
            },
            created_at: row.get(6)?,
        })
    })?;
    rows.collect()
}

fn read_policies(conn: &Connection) -> rusqlite::Result<Vec<PolicyRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {POLICY_COLUMNS} FROM policies ORDER BY seq"
    ))?;
    let rows = stmt.query_map([], policy_from_row)?;
    rows.collect()
}

const AGENT_COLUMNS: &str = "name, path, dev, ino, size, mtime_ns, ctime_ns, sha256, enrolled_at";

/// SQLite integers are signed: a u64 is stored as the i64 with the same bits, and read back the
/// same way, so every value round-trips exactly (and UNIQUE(dev, ino) compares the same bits).
fn u64_to_sql(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

fn u64_from_sql(v: i64) -> u64 {
    u64::from_ne_bytes(v.to_ne_bytes())
}

fn agent_from_row(row: &Row<'_>) -> rusqlite::Result<crate::agents::Enrolment> {
    Ok(crate::agents::Enrolment {
        name: row.get(0)?,
        path: row.get(1)?,
        identity: crate::os::process::FileIdentity {
            dev: u64_from_sql(row.get(2)?),
            ino: u64_from_sql(row.get(3)?),
            size: u64_from_sql(row.get(4)?),
            mtime_ns: row.get(5)?,
            ctime_ns: row.get(6)?,
        },
        sha256: row.get(7)?,
        enrolled_at: row.get(8)?,
    })
}

fn read_agents(conn: &Connection) -> rusqlite::Result<Vec<crate::agents::Enrolment>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {AGENT_COLUMNS} FROM agents ORDER BY name"))?;
    let rows = stmt.query_map([], agent_from_row)?;
    rows.collect()
}

/// A change to the enrolled agents: enrol (or replace) a name, or remove one.
#[derive(Debug, Clone)]
pub enum AgentChange {
    /// Enrol `name` for this file; an existing enrolment of the same name is replaced.
    Put {
        name: String,
        path: String,
        identity: crate::os::process::FileIdentity,
        sha256: String,
    },
    Remove {
        name: String,
    },
}

/// A registered connector as stored: its command and pass-through names are JSON arrays of
/// strings. Never a secret.
pub type ConnectorRow = crate::connector::ListedConnector;

/// A change to the connectors table.
#[derive(Debug, Clone)]
pub enum ConnectorChange {
    Set {
        name: String,
        env_key: String,
        command: Vec<String>,
        pass_env: Vec<String>,
        cwd: String,
        pinned_env: Vec<(String, String)>,
        /// Names the store entry holding this registration's secret (`NAME#SECRET_ID`).
        secret_id: String,
    },
    Remove {
        name: String,
    },
}

fn read_connectors(conn: &Connection, name: Option<&str>) -> rusqlite::Result<Vec<ConnectorRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT name, env_key, command, pass_env, updated_at, cwd, pinned_env, secret_id \
         FROM connectors WHERE ?1 IS NULL OR name = ?1 ORDER BY name",
    )?;
    fn json<T: serde::de::DeserializeOwned>(r: &Row<'_>, i: usize) -> rusqlite::Result<T> {
        let text: String = r.get(i)?;
        serde_json::from_str(&text).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
        })
    }
    let rows = stmt.query_map([name], |r| {
        Ok(ConnectorRow {
            name: r.get(0)?,
            env_key: r.get(1)?,
            command: json(r, 2)?,
            pass_env: json(r, 3)?,
            updated_at: r.get(4)?,
            cwd: r.get(5)?,
            pinned_env: json(r, 6)?,
            secret_id: r.get(7)?,
        })
    })?;
    rows.collect()
}

/// The seq AUTOINCREMENT hands out next: one past the largest seq ever used, removed ones included.
fn read_next_policy_seq(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT max(
             coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'policies'), 0),
             coalesce((SELECT max(seq) FROM policies), 0)
         ) + 1",
        [],
        |r| r.get(0),
    )
}

fn read_head(conn: &Connection) -> rusqlite::Result<Option<(i64, String)>> {
    conn.query_row(
        "SELECT chain_seq, hash FROM journal ORDER BY chain_seq DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

fn read_session_started(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM journal WHERE session_id = ?1 AND kind = 'session.start')",
        [session_id],
        |r| r.get(0),
    )
}

fn read_open_sessions(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.session_id FROM journal AS s
         WHERE s.kind = 'session.start' AND s.session_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM journal AS e
                           WHERE e.session_id = s.session_id AND e.kind = 'session.end')
         GROUP BY s.session_id
         ORDER BY min(s.chain_seq)",
    )?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// SQLite's count of commits by other connections, as this connection sees it: it changes
/// exactly when someone else committed (never for this connection's own commits).
fn read_data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

/// The body of [`Journal::append_fresh`]: (version read, which items were kept, their entries).
fn append_fresh_tx(
    conn: &mut Connection,
    path: &Path,
    genesis: &str,
    items: Vec<(Kind, Fields, bool)>,
    seen: i64,
) -> Result<(i64, Vec<bool>, Vec<Entry>), JournalError> {
    let write_err = |source| JournalError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(write_err)?;
    let version = read_data_version(&tx).map_err(write_err)?;
    let changed = version != seen;
    let mut slots = Vec::with_capacity(items.len());
    let mut keep = Vec::with_capacity(items.len());
    for (kind, fields, fresh) in items {
        let kept = !(changed && fresh);
        slots.push(kept);
        if kept {
            keep.push((kind, fields));
        }
    }
    if keep.is_empty() {
        return Ok((version, slots, Vec::new()));
    }
    let entries = insert_entries(&tx, path, genesis, keep)?;
    tx.commit().map_err(write_err)?;
    Ok((version, slots, entries))
}

/// What [`Journal::load_in_force`] read, all in one snapshot.
#[derive(Debug, Clone)]
pub struct InForce {
    pub data_version: i64,
    pub policies: Vec<PolicyRow>,
    pub budgets: Vec<BudgetRow>,
    pub agents: Vec<crate::agents::Enrolment>,
    /// How the tables differ from the journal; empty when they agree.
    pub mismatches: Vec<String>,
}

fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Rebuilds the policy set, the budgets and the agent enrolments from the journal's own
/// `policy.change` (their diffs, replayed as `policy show --at` does), `budget.change` and
/// `agent.change` entries, and names every way the given table contents differ: a rule, budget
/// or enrolment missing, added or edited behind Holdcall's back. Empty when they agree. The
/// tables are only a cache of what the journal says; someone who drops the triggers can edit
/// them, but not without this noticing (short of rewriting the journal too, which only
/// `verify --expect-head` catches).
pub fn table_mismatches(
    conn: &Connection,
    policies: &[PolicyRow],
    budgets: &[BudgetRow],
    agents: &[crate::agents::Enrolment],
) -> rusqlite::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stmt = conn.prepare(&format!(
        "SELECT {ENTRY_COLUMNS} FROM journal \
         WHERE kind IN ('policy.change', 'budget.change', 'agent.change') ORDER BY chain_seq"
    ))?;
    let mut rows = stmt.query([])?;
    let mut text = String::new();
    let mut text_ok = true;
    // id -> (scope, description, entry that set it)
    let mut recorded_budgets: std::collections::BTreeMap<
        String,
        (crate::policy::budget::BudgetScope, String, i64),
    > = std::collections::BTreeMap::new();
    // name -> (detail JSON, entry that enrolled it)
    let mut recorded_agents: std::collections::BTreeMap<String, (serde_json::Value, i64)> =
        std::collections::BTreeMap::new();
    while let Some(row) = rows.next()? {
        let chain_seq: i64 = row.get(0)?;
        let e = match entry_from_row(row) {
            Ok(e) => e,
            Err(what) => {
                out.push(format!(
                    "entry {chain_seq} cannot be read ({what}), so what is in force cannot be rebuilt from the journal"
                ));
                continue;
            }
        };
        let f = &e.fields;
        match e.kind.as_str() {
            "policy.change" => {
                if !text_ok {
                    continue;
                }
                match crate::policy::apply_unified_diff(&text, f.detail.as_deref().unwrap_or("")) {
                    Ok(t) => text = t,
                    Err(why) => {
                        out.push(format!(
                            "the diff of policy.change entry {chain_seq} does not apply ({why}), so the policy set cannot be rebuilt from the journal"
                        ));
                        text_ok = false;
                    }
                }
            }
            "budget.change" => {
                let id = f.policy_id.clone().unwrap_or_default();
                let detail = f.detail.as_deref().unwrap_or("");
                if let Some(described) = detail.strip_prefix(&format!("+ {id}: ")) {
                    let scope = crate::policy::budget::BudgetScope {
                        tool: f.tool.clone(),
                        agent: f.agent.clone(),
                        connector: f.connector.clone(),
                    };
                    recorded_budgets.insert(id, (scope, described.to_string(), chain_seq));
                } else if detail.starts_with(&format!("- {id}: ")) {
                    recorded_budgets.remove(&id);
                } else {
                    out.push(format!(
                        "budget.change entry {chain_seq} says neither which budget was set nor which was removed"
                    ));
                }
            }
            _ => {
                let name = f.agent.clone().unwrap_or_default();
                if f.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("removed agent "))
                {
                    recorded_agents.remove(&name);
                } else {
                    match serde_json::from_str::<serde_json::Value>(
                        f.detail.as_deref().unwrap_or(""),
                    ) {
                        Ok(v) => {
                            recorded_agents.insert(name, (v, chain_seq));
                        }
                        Err(_) => out.push(format!(
                            "agent.change entry {chain_seq} does not say which file was enrolled"
                        )),
                    }
                }
            }
        }
    }
    if text_ok {
        policy_mismatches(&text, policies, &mut out);
    }
    budget_mismatches(&recorded_budgets, budgets, &mut out);
    agent_mismatches(&recorded_agents, agents, &mut out);
    Ok(out)
}

fn policy_mismatches(recorded: &str, policies: &[PolicyRow], out: &mut Vec<String>) {
    let before = out.len();
    let journal: Vec<(String, &str)> = crate::policy::file::split(recorded)
        .into_iter()
        .filter_map(|(s, e)| recorded.get(s..e))
        .map(|piece| {
            let piece = piece.trim();
            let id = crate::policy::id_of(piece).unwrap_or_else(|| "(without @id)".into());
            (id, piece)
        })
        .collect();
    for (id, text) in &journal {
        match policies.iter().find(|p| &p.id == id) {
            None => out.push(format!(
                "rule {id} is missing from the policies table, but the journal's policy.change entries put it in force (deleted behind Holdcall's back)"
            )),
            Some(p) if p.text.trim() != *text => out.push(format!(
                "rule {id}: its text in the policies table differs from the text the journal recorded (edited behind Holdcall's back)"
            )),
            Some(_) => {}
        }
    }
    for p in policies {
        if !journal.iter().any(|(id, _)| id == &p.id) {
            out.push(format!(
                "rule {} is in the policies table, but no policy.change entry put it there (inserted behind Holdcall's back)",
                p.id
            ));
        }
        if p.source == "cli" {
            let scope = crate::policy::Scope {
                tool: p.tool.clone(),
                agent: p.agent.clone(),
                connector: p.connector.clone(),
            };
            let matches = crate::policy::Effect::parse(&p.effect).is_some_and(|effect| {
                crate::policy::cli_rule_text(&p.id, effect, &scope).trim() == p.text.trim()
            });
            if !matches {
                out.push(format!(
                    "rule {}: its effect or scope columns in the policies table do not say what its text says (edited behind Holdcall's back)",
                    p.id
                ));
            }
        }
    }
    let table = crate::policy::set_text(policies.iter().map(|p| p.text.as_str()));
    if out.len() == before && table != recorded {
        out.push(
            "the policies table orders the rules differently from the journal (their seq was changed behind Holdcall's back)"
                .to_string(),
        );
    }
}

fn budget_mismatches(
    recorded: &std::collections::BTreeMap<
        String,
        (crate::policy::budget::BudgetScope, String, i64),
    >,
    budgets: &[BudgetRow],
    out: &mut Vec<String>,
) {
    for (id, (scope, described, at)) in recorded {
        match budgets.iter().find(|b| &b.budget.id == id) {
            None => out.push(format!(
                "budget {id} is missing from the budgets table, but budget.change entry {at} set it (deleted behind Holdcall's back)"
            )),
            Some(b) if &b.budget.scope() != scope || &b.budget.describe() != described => out
                .push(format!(
                    "budget {id}: the budgets table says {}, but budget.change entry {at} set {described} (edited behind Holdcall's back)",
                    b.budget.describe()
                )),
            Some(_) => {}
        }
    }
    for b in budgets {
        if !recorded.contains_key(&b.budget.id) {
            out.push(format!(
                "budget {} is in the budgets table, but no budget.change entry set it (inserted behind Holdcall's back)",
                b.budget.id
            ));
        }
    }
}

fn agent_mismatches(
    recorded: &std::collections::BTreeMap<String, (serde_json::Value, i64)>,
    agents: &[crate::agents::Enrolment],
    out: &mut Vec<String>,
) {
    for (name, (v, at)) in recorded {
        let Some(e) = agents.iter().find(|e| &e.name == name) else {
            out.push(format!(
                "agent {name} is missing from the agents table, but agent.change entry {at} enrolled it (deleted behind Holdcall's back)"
            ));
            continue;
        };
        let id = &e.identity;
        let mut differ = Vec::new();
        if v["path"].as_str() != Some(e.path.as_str()) {
            differ.push("path");
        }
        for (field, value) in [("dev", id.dev), ("ino", id.ino), ("size", id.size)] {
            if v[field].as_u64() != Some(value) {
                differ.push(field);
            }
        }
        for (field, value) in [("mtime_ns", id.mtime_ns), ("ctime_ns", id.ctime_ns)] {
            if v[field].as_i64() != Some(value) {
                differ.push(field);
            }
        }
        if v["sha256"].as_str() != Some(e.sha256.as_str()) {
            differ.push("sha256");
        }
        if !differ.is_empty() {
            out.push(format!(
                "agent {name}: its {} in the agents table differ from what agent.change entry {at} enrolled (edited behind Holdcall's back)",
                differ.join(", ")
            ));
        }
    }
    for e in agents {
        if !recorded.contains_key(&e.name) {
            out.push(format!(
                "agent {} is enrolled in the agents table, but no agent.change entry enrolled it (inserted behind Holdcall's back)",
                e.name
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Files and permissions
// ---------------------------------------------------------------------------------------------

/// Tightens an existing file to 0600 if any bit beyond owner read/write is set.
fn tighten(file: &File, path: &Path) -> Result<(), JournalError> {
    let perm_err = |source| JournalError::Permissions {
        path: path.to_path_buf(),
        source,
    };
    let mode = file.metadata().map_err(perm_err)?.permissions().mode();
    if mode & 0o7777 & !PRIVATE_MODE != 0 {
        // fchmod on the open file, not chmod on the path: the path could be swapped in between.
        file.set_permissions(Permissions::from_mode(PRIVATE_MODE))
            .map_err(perm_err)?;
    }
    Ok(())
}

/// Creates the journal file 0600 before SQLite sees it (SQLite would use the umask), or tightens an
/// existing one, together with any WAL files left from an earlier run.
fn prepare_db_file(path: &Path) -> Result<(), JournalError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(PRIVATE_MODE)
        .open(path)
        .map_err(|source| JournalError::CreateFile {
            path: path.to_path_buf(),
            source,
        })?;
    tighten(&file, path)?;
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        // SQLite gives new WAL files the database's mode; one left over may predate the fix above.
        match OpenOptions::new().read(true).open(&side) {
            Ok(f) => tighten(&f, &side)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(JournalError::Permissions { path: side, source }),
        }
    }
    Ok(())
}

/// Whether the journal at `db_path` holds at least one entry. A missing file or table counts as
/// empty. The daemon asks this before [`load_or_create_machine_id`], since the machine id must
/// exist before [`Journal::open`] and may only be created for an empty journal.
pub fn journal_has_entries(db_path: &Path) -> Result<bool, JournalError> {
    match Reader::open(db_path) {
        Ok(reader) => Ok(reader.count()? > 0),
        Err(JournalError::NoJournalYet { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads the machine id (trimmed), or creates a random 32-hex-character one, mode 0600, when
/// `journal_is_empty`. A missing or empty file next to a journal with entries is an error: the id
/// seeds the chain, and a new one would make every existing entry fail verification.
pub fn load_or_create_machine_id(
    path: &Path,
    journal_is_empty: bool,
) -> Result<String, JournalError> {
    let io_err = |source| JournalError::MachineIdIo {
        path: path.to_path_buf(),
        source,
    };
    match File::open(path) {
        Ok(mut file) => {
            tighten(&file, path)?;
            let mut text = String::new();
            file.read_to_string(&mut text).map_err(io_err)?;
            let id = text.trim();
            if !id.is_empty() {
                return Ok(id.to_owned());
            }
            if !journal_is_empty {
                return Err(JournalError::MachineIdEmpty {
                    path: path.to_path_buf(),
                });
            }
            // An empty file next to an empty journal is a creation interrupted by a crash:
            // nothing depends on it yet, so finish the job.
            write_machine_id(path, false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !journal_is_empty {
                return Err(JournalError::MachineIdMissing {
                    path: path.to_path_buf(),
                });
            }
            write_machine_id(path, true)
        }
        Err(source) => Err(io_err(source)),
    }
}

fn write_machine_id(path: &Path, create_new: bool) -> Result<String, JournalError> {
    let io_err = |source| JournalError::MachineIdIo {
        path: path.to_path_buf(),
        source,
    };
    let id = crate::ids::random_hex(16).map_err(|source| JournalError::Random { source })?;
    let mut options = OpenOptions::new();
    options.write(true).mode(PRIVATE_MODE);
    if create_new {
        // create_new: if another process won the race, read its id instead of overwriting it.
        options.create_new(true);
    } else {
        options.truncate(true);
    }
    let mut file = match options.open(path) {
        Ok(f) => f,
        Err(e) if create_new && e.kind() == std::io::ErrorKind::AlreadyExists => {
            return load_or_create_machine_id(path, true);
        }
        Err(source) => return Err(io_err(source)),
    };
    tighten(&file, path)?;
    file.write_all(format!("{id}\n").as_bytes())
        .map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    // The directory entry must be durable too: losing the file after entries were chained on its
    // id would leave a journal that can never verify.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(io_err)?;
    }
    Ok(id)
}

// ---------------------------------------------------------------------------------------------
// The writer
// ---------------------------------------------------------------------------------------------

/// A policy row as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PolicyRow {
    pub seq: i64,
    pub id: String,
    pub source: String,
    pub text: String,
    pub effect: String,
    pub specificity: i64,
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub connector: Option<String>,
    pub created_at: String,
}

/// One change to the budgets: set a new one (its id is assigned when it is stored), or remove
/// one by id.
#[derive(Debug, Clone)]
pub enum BudgetChange {
    Set {
        calls: i64,
        scope: crate::policy::budget::BudgetScope,
    },
    Remove {
        id: String,
    },
}

/// A policy to insert. `seq` must be at least [`Journal::next_policy_seq`] (count up from it for
/// several); `created_at` is assigned when the change commits.
#[derive(Debug, Clone)]
pub struct NewPolicy {
    pub seq: i64,
    pub id: String,
    pub source: String,
    pub text: String,
    pub effect: String,
    pub specificity: i64,
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub connector: Option<String>,
}

/// The connection settings actually in force, read back from SQLite. The daemon records them in
/// the `daemon.start` entry's `detail`, since defaults differ between SQLite builds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pragmas {
    pub durability: Durability,
    pub journal_mode: String,
    pub synchronous: String,
    pub fullfsync: bool,
    pub foreign_keys: bool,
    pub busy_timeout_ms: i64,
    pub sqlite_version: String,
}

impl Pragmas {
    /// JSON for a `daemon.start` entry's `detail`.
    pub fn to_detail(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The single writer. Owns its connection; every write is one `BEGIN IMMEDIATE` transaction.
pub struct Journal {
    conn: Connection,
    path: PathBuf,
    genesis: String,
    head: Option<(i64, String)>,
    pragmas: Pragmas,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

fn set_pragmas(
    conn: &Connection,
    path: &Path,
    durability: Durability,
) -> Result<Pragmas, JournalError> {
    let open_err = |source| JournalError::Open {
        path: path.to_path_buf(),
        source,
    };
    let refused = |pragma: &'static str, wanted: &str, got: String| JournalError::PragmaRefused {
        path: path.to_path_buf(),
        pragma,
        wanted: wanted.to_owned(),
        got,
    };

    // First, so that switching to WAL waits out another connection instead of failing.
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    let busy_timeout_ms: i64 = conn
        .pragma_query_value(None, "busy_timeout", |r| r.get(0))
        .map_err(open_err)?;

    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(open_err)?;
    let journal_mode = mode.to_ascii_lowercase();
    if journal_mode != "wal" {
        return Err(refused("journal_mode", "wal", journal_mode));
    }

    // `synchronous` is per connection and its default differs between builds: set it, read it back.
    let (level, name) = durability.synchronous();
    conn.pragma_update(None, "synchronous", level)
        .map_err(open_err)?;
    let got: i64 = conn
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .map_err(open_err)?;
    if got != level {
        return Err(refused("synchronous", name, got.to_string()));
    }

    // macOS fsync() does not flush the drive's cache; only F_FULLFSYNC does, and SQLite uses it
    // only when asked. Elsewhere the pragma is a no-op, so it is left off there.
    let fullfsync = cfg!(target_os = "macos") && durability == Durability::Power;
    if fullfsync {
        conn.pragma_update(None, "fullfsync", true)
            .map_err(open_err)?;
        conn.pragma_update(None, "checkpoint_fullfsync", true)
            .map_err(open_err)?;
    }
    let fullfsync_on: bool = conn
        .pragma_query_value(None, "fullfsync", |r| r.get(0))
        .map_err(open_err)?;
    if fullfsync_on != fullfsync {
        return Err(refused(
            "fullfsync",
            if fullfsync { "on" } else { "off" },
            fullfsync_on.to_string(),
        ));
    }

    conn.pragma_update(None, "foreign_keys", true)
        .map_err(open_err)?;
    let foreign_keys: bool = conn
        .pragma_query_value(None, "foreign_keys", |r| r.get(0))
        .map_err(open_err)?;
    if !foreign_keys {
        return Err(refused("foreign_keys", "on", "off".to_owned()));
    }

    Ok(Pragmas {
        durability,
        journal_mode,
        synchronous: name.to_owned(),
        fullfsync,
        foreign_keys,
        busy_timeout_ms,
        sqlite_version: rusqlite::version().to_owned(),
    })
}

/// Whether `meta` records this build's layout: `Ok(true)` if so, `Ok(false)` if it records none
/// yet, and an error naming the file if it records a layout this build does not know.
fn stored_schema_is_ours(
    conn: &Connection,
    path: &Path,
) -> rusqlite::Result<Result<bool, JournalError>> {
    let found: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(match found {
        Some(v) if v == DB_SCHEMA => Ok(true),
        Some(v) => Err(JournalError::SchemaTooNew {
            path: path.to_path_buf(),
            found: v,
        }),
        None => Ok(false),
    })
}

/// Creates the schema or checks that an existing one is ours, in one transaction.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), JournalError> {
    let write_err = |source| JournalError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(write_err)?;
    // meta first and alone, so a newer layout is refused before anything of ours touches it.
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;",
    )
    .map_err(write_err)?;
    if !stored_schema_is_ours(&tx, path).map_err(write_err)?? {
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('schema', ?1)",
            [DB_SCHEMA],
        )
        .map_err(write_err)?;
    }
    // IF NOT EXISTS throughout: this also puts back the append-only triggers if someone dropped them.
    tx.execute_batch(SCHEMA_SQL).map_err(write_err)?;
    tx.commit().map_err(write_err)
}

/// Inserts the entries after the chain's current head, read inside the transaction: the write lock
/// is held, so the head cannot move, and the in-memory copy is only a cache.
fn insert_entries(
    tx: &Transaction<'_>,
    path: &Path,
    genesis: &str,
    items: Vec<(Kind, Fields)>,
) -> Result<Vec<Entry>, JournalError> {
    let write_err = |source| JournalError::Write {
        path: path.to_path_buf(),
        source,
    };
    let (mut chain_seq, mut prev) = match read_head(tx).map_err(write_err)? {
        Some(head) => head,
        None => (0, genesis.to_owned()),
    };
    let mut stmt = tx
        .prepare_cached(&format!(
            "INSERT INTO journal ({ENTRY_COLUMNS}) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
        ))
        .map_err(write_err)?;
    let mut out = Vec::with_capacity(items.len());
    for (kind, fields) in items {
        chain_seq = chain_seq
            .checked_add(1)
            .ok_or_else(|| JournalError::ChainFull {
                path: path.to_path_buf(),
            })?;
        let mut e = Entry {
            chain_seq,
            schema_version: SCHEMA_VERSION,
            kind: kind.as_str().to_owned(),
            occurred_at: now_rfc3339(),
            fields,
            prev_hash: prev,
            hash: String::new(),
        };
        e.hash =
            entry_hash(&e.prev_hash, &encode(&e)).ok_or_else(|| JournalError::HeadMalformed {
                path: path.to_path_buf(),
            })?;
        let f = &e.fields;
        stmt.execute(params![
            e.chain_seq,
            e.schema_version,
            e.kind,
            e.occurred_at,
            f.session_id,
            f.seq,
            f.connector,
            f.tool,
            f.client,
            f.agent,
            f.args_digest,
            f.decision,
            f.policy_id,
            f.reason,
            f.ok,
            f.duration_ms,
            f.anomaly,
            f.protocol_version,
            f.detail,
            e.prev_hash,
            e.hash,
        ])
        .map_err(write_err)?;
        prev = e.hash.clone();
        out.push(e);
    }
    Ok(out)
}

/// Runs `before` (policy edits, or nothing) and appends `items`, all in one IMMEDIATE transaction
/// with one commit. Any error rolls the whole transaction back (dropping `tx` does that).
fn write_transaction(
    conn: &mut Connection,
    path: &Path,
    genesis: &str,
    before: impl FnOnce(&Transaction<'_>) -> Result<(), JournalError>,
    items: Vec<(Kind, Fields)>,
) -> Result<Vec<Entry>, JournalError> {
    let write_err = |source| JournalError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(write_err)?;
    before(&tx)?;
    let entries = insert_entries(&tx, path, genesis, items)?;
    tx.commit().map_err(write_err)?;
    Ok(entries)
}

impl Journal {
    /// Opens the journal as its single writer: creates the file (0600) and schema if needed, sets
    /// and checks the pragmas, and reads the current head. `machine_id` seeds the chain when the
    /// journal is empty (from [`load_or_create_machine_id`]).
    pub fn open(
        db_path: &Path,
        machine_id: &str,
        durability: Durability,
    ) -> Result<Journal, JournalError> {
        prepare_db_file(db_path)?;
        let open_err = |source| JournalError::Open {
            path: db_path.to_path_buf(),
            source,
        };
        // No SQLITE_OPEN_CREATE: the file was just made with the right mode. No URI: a path is a path.
        let mut conn = Connection::open_with_flags(
            db_path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        let pragmas = set_pragmas(&conn, db_path, durability)?;
        migrate(&mut conn, db_path)?;
        let head = read_head(&conn).map_err(|source| JournalError::Read {
            path: db_path.to_path_buf(),
            source,
        })?;
        Ok(Journal {
            conn,
            path: db_path.to_path_buf(),
            genesis: genesis(machine_id),
            head,
            pragmas,
        })
    }

    /// The file this journal writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        |source| JournalError::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// The settings SQLite confirmed, for the `daemon.start` entry.
    pub fn pragmas(&self) -> &Pragmas {
        &self.pragmas
    }

    /// Whether no entry has been written yet.
    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Keeps the cached head in step with the database after a write attempt: set from the entries
    /// on success; on failure re-read, since the caller will append again.
    fn settle<T>(
        &mut self,
        result: Result<Vec<Entry>, JournalError>,
        pick: impl FnOnce(Vec<Entry>) -> T,
    ) -> Result<T, JournalError> {
        match result {
            Ok(entries) => {
                if let Some(last) = entries.last() {
                    self.head = Some((last.chain_seq, last.hash.clone()));
                }
                Ok(pick(entries))
            }
            Err(e) => {
                self.recover();
                // If even this read fails, the old head is still what was last committed by us
                // (the failed transaction rolled back), and the next write reads the head afresh.
                if let Ok(head) = read_head(&self.conn) {
                    self.head = head;
                }
                Err(e)
            }
        }
    }

    /// Appends one entry in its own IMMEDIATE transaction. Returns only after the commit.
    pub fn append(&mut self, kind: Kind, fields: Fields) -> Result<Entry, JournalError> {
        self.edit_and_append(|_| Ok(()), kind, fields)
    }

    /// Runs `edit` (table changes, or nothing) and appends one `kind` entry in ONE transaction,
    /// returning that entry once committed.
    fn edit_and_append(
        &mut self,
        edit: impl FnOnce(&Transaction<'_>) -> Result<(), JournalError>,
        kind: Kind,
        fields: Fields,
    ) -> Result<Entry, JournalError> {
        let result = write_transaction(
            &mut self.conn,
            &self.path,
            &self.genesis,
            edit,
            vec![(kind, fields)],
        );
        self.settle(result, |entries| entries.into_iter().next())?
            .ok_or(JournalError::Write {
                path: self.path.clone(),
                source: rusqlite::Error::QueryReturnedNoRows,
            })
    }

    /// Appends several entries in one transaction and one commit (group commit): all or nothing.
    pub fn append_many(&mut self, items: Vec<(Kind, Fields)>) -> Result<Vec<Entry>, JournalError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let result =
            write_transaction(&mut self.conn, &self.path, &self.genesis, |_| Ok(()), items);
        self.settle(result, |entries| entries)
    }

    /// The stored policies, ordered by seq.
    pub fn policies(&self) -> Result<Vec<PolicyRow>, JournalError> {
        read_policies(&self.conn).map_err(self.read_err())
    }

    /// The seq the next inserted policy will get: AUTOINCREMENT never reuses a removed seq.
    pub fn next_policy_seq(&self) -> Result<i64, JournalError> {
        read_next_policy_seq(&self.conn).map_err(self.read_err())
    }

    /// Adds and removes policies and appends the policy.change entry in ONE transaction: if any
    /// part fails, nothing changes. Removals happen first, so one change can replace an id.
    pub fn change_policies(
        &mut self,
        add: Vec<NewPolicy>,
        remove_ids: Vec<String>,
        fields: Fields,
    ) -> Result<Entry, JournalError> {
        // Checked before the transaction so a caller bug never takes the write lock.
        if let Some(bad) = add
            .iter()
            .find(|p| !matches!(p.effect.as_str(), "allow" | "ask" | "deny"))
        {
            return Err(JournalError::PolicyEffect {
                id: bad.id.clone(),
                effect: bad.effect.clone(),
            });
        }
        let path = self.path.clone();
        let edit = |tx: &Transaction<'_>| -> Result<(), JournalError> {
            let write_err = |source| JournalError::Write {
                path: path.clone(),
                source,
            };
            for id in &remove_ids {
                let removed = tx
                    .execute("DELETE FROM policies WHERE id = ?1", [id])
                    .map_err(write_err)?;
                if removed == 0 {
                    return Err(JournalError::UnknownPolicy { id: id.clone() });
                }
            }
            let created_at = now_rfc3339();
            for p in &add {
                let taken: bool = tx
                    .query_row(
                        "SELECT EXISTS(SELECT 1 FROM policies WHERE id = ?1)",
                        [&p.id],
                        |r| r.get(0),
                    )
                    .map_err(write_err)?;
                if taken {
                    return Err(JournalError::PolicyIdTaken { id: p.id.clone() });
                }
                let next = read_next_policy_seq(tx).map_err(write_err)?;
                if p.seq < next {
                    return Err(JournalError::PolicySeqReused {
                        id: p.id.clone(),
                        seq: p.seq,
                        next,
                    });
                }
                tx.execute(
                    &format!("INSERT INTO policies ({POLICY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                    params![p.seq, p.id, p.source, p.text, p.effect, p.specificity, p.tool, p.agent, p.connector, created_at],
                )
                .map_err(write_err)?;
            }
            Ok(())
        };
        self.edit_and_append(edit, Kind::PolicyChange, fields)
    }

    /// The enrolled agents, ordered by name.
    pub fn agents(&self) -> Result<Vec<crate::agents::Enrolment>, JournalError> {
        read_agents(&self.conn).map_err(self.read_err())
    }

    /// Enrols, replaces or removes an agent and appends the `agent.change` entry in ONE
    /// transaction: if any part fails, nothing changes. An executable already enrolled under
    /// another name is refused naming that name; removing an unknown name is refused.
    pub fn change_agent(
        &mut self,
        change: AgentChange,
        fields: Fields,
    ) -> Result<Entry, JournalError> {
        let path = self.path.clone();
        let edit = |tx: &Transaction<'_>| -> Result<(), JournalError> {
            let write_err = |source| JournalError::Write {
                path: path.clone(),
                source,
            };
            match &change {
                AgentChange::Remove { name } => {
                    let removed = tx
                        .execute("DELETE FROM agents WHERE name = ?1", [name])
                        .map_err(write_err)?;
                    if removed == 0 {
                        return Err(JournalError::UnknownAgent { name: name.clone() });
                    }
                }
                AgentChange::Put {
                    name,
                    path: file,
                    identity,
                    sha256,
                } => {
                    let holder: Option<String> = tx
                        .query_row(
                            "SELECT name FROM agents WHERE dev = ?1 AND ino = ?2 AND name != ?3",
                            params![u64_to_sql(identity.dev), u64_to_sql(identity.ino), name],
                            |r| r.get(0),
                        )
                        .optional()
                        .map_err(write_err)?;
                    if let Some(holder) = holder {
                        return Err(JournalError::AgentImageTaken { holder });
                    }
                    tx.execute("DELETE FROM agents WHERE name = ?1", [name])
                        .map_err(write_err)?;
                    tx.execute(
                        &format!(
                            "INSERT INTO agents ({AGENT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                        ),
                        params![
                            name,
                            file,
                            u64_to_sql(identity.dev),
                            u64_to_sql(identity.ino),
                            u64_to_sql(identity.size),
                            identity.mtime_ns,
                            identity.ctime_ns,
                            sha256,
                            now_rfc3339()
                        ],
                    )
                    .map_err(write_err)?;
                }
            }
            Ok(())
        };
        self.edit_and_append(edit, Kind::AgentChange, fields)
    }

    /// The registered connectors (never a secret: those live in the OS store), by name.
    pub fn connectors(&self) -> Result<Vec<ConnectorRow>, JournalError> {
        read_connectors(&self.conn, None).map_err(self.read_err())
    }

    /// One registered connector, if any.
    pub fn connector(&self, name: &str) -> Result<Option<ConnectorRow>, JournalError> {
        read_connectors(&self.conn, Some(name))
            .map(|rows| rows.into_iter().next())
            .map_err(self.read_err())
    }

    /// Registers (or replaces) a connector, or removes one, and appends the `connector.change`
    /// entry, in ONE transaction: if any part fails, nothing changes. Removing a connector that
    /// is not registered is an error.
    pub fn change_connector(
        &mut self,
        change: ConnectorChange,
        fields: Fields,
    ) -> Result<Entry, JournalError> {
        let path = self.path.clone();
        let edit = |tx: &Transaction<'_>| -> Result<(), JournalError> {
            let write_err = |source| JournalError::Write {
                path: path.clone(),
                source,
            };
            match &change {
                ConnectorChange::Set {
                    name,
                    env_key,
                    command,
                    pass_env,
                    cwd,
                    pinned_env,
                    secret_id,
                } => {
                    let json = |v: serde_json::Result<String>| {
                        v.map_err(|e| {
                            write_err(rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
                        })
                    };
                    tx.execute(
                        "INSERT INTO connectors (name, env_key, command, pass_env, updated_at, \
                         cwd, pinned_env, secret_id) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(name) DO UPDATE SET \
                         env_key = excluded.env_key, command = excluded.command, \
                         pass_env = excluded.pass_env, updated_at = excluded.updated_at, \
                         cwd = excluded.cwd, pinned_env = excluded.pinned_env, \
                         secret_id = excluded.secret_id",
                        params![
                            name,
                            env_key,
                            json(serde_json::to_string(command))?,
                            json(serde_json::to_string(pass_env))?,
                            now_rfc3339(),
                            cwd,
                            json(serde_json::to_string(pinned_env))?,
                            secret_id,
                        ],
                    )
                    .map_err(write_err)?;
                }
                ConnectorChange::Remove { name } => {
                    let removed = tx
                        .execute("DELETE FROM connectors WHERE name = ?1", [name])
                        .map_err(write_err)?;
                    if removed == 0 {
                        return Err(JournalError::UnknownConnector { name: name.clone() });
                    }
                }
            }
            Ok(())
        };
        self.edit_and_append(edit, Kind::ConnectorChange, fields)
    }

    /// The stored budgets, ordered by seq.
    pub fn budgets(&self) -> Result<Vec<BudgetRow>, JournalError> {
        read_budgets(&self.conn).map_err(self.read_err())
    }

    /// Sets or removes one budget and appends its `budget.change` entry in ONE transaction; the
    /// entry names the budget (`policy_id`), its scope (`tool`, `agent`, `connector`), says what
    /// changed in `reason`, and holds the budget's line with `+` or `-` in `detail`. Returns the
    /// entry and the budgets now stored.
    pub fn change_budget(
        &mut self,
        change: BudgetChange,
    ) -> Result<(Entry, Vec<BudgetRow>), JournalError> {
        let path = self.path.clone();
        let write_err = |source| JournalError::Write {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(write_err)?;
        let (budget, sign, verb) = match change {
            BudgetChange::Set { calls, scope } => {
                let seq: i64 = tx
                    .query_row(
                        "SELECT max(
                             coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'budgets'), 0),
                             coalesce((SELECT max(seq) FROM budgets), 0)
                         ) + 1",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(write_err)?;
                let budget = crate::policy::budget::Budget {
                    id: format!("budget-{seq}"),
                    seq,
                    calls,
                    tool: scope.tool,
                    agent: scope.agent,
                    connector: scope.connector,
                };
                tx.execute(
                    &format!(
                        "INSERT INTO budgets ({BUDGET_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                    ),
                    params![
                        budget.seq,
                        budget.id,
                        budget.calls,
                        budget.tool,
                        budget.agent,
                        budget.connector,
                        now_rfc3339()
                    ],
                )
                .map_err(write_err)?;
                (budget, '+', "set")
            }
            BudgetChange::Remove { id } => {
                let old = read_budgets(&tx)
                    .map_err(write_err)?
                    .into_iter()
                    .find(|b| b.budget.id == id)
                    .ok_or_else(|| JournalError::UnknownPolicy { id: id.clone() })?;
                tx.execute("DELETE FROM budgets WHERE id = ?1", [&id])
                    .map_err(write_err)?;
                (old.budget, '-', "removed")
            }
        };
        let described = budget.describe();
        let fields = Fields {
            tool: budget.tool.clone(),
            agent: budget.agent.clone(),
            connector: budget.connector.clone(),
            policy_id: Some(budget.id.clone()),
            reason: Some(format!("budget {} {verb}: {described}", budget.id)),
            detail: Some(format!("{sign} {}: {described}", budget.id)),
            ..Fields::default()
        };
        let result = insert_entries(
            &tx,
            &self.path,
            &self.genesis,
            vec![(Kind::BudgetChange, fields)],
        )
        .and_then(|entries| {
            let rows = read_budgets(&tx).map_err(write_err)?;
            tx.commit().map_err(write_err)?;
            Ok((entries, rows))
        });
        let (entries, rows) = match result {
            Ok(x) => (Ok(x.0), Some(x.1)),
            Err(e) => (Err(e), None),
        };
        let entry = self.settle(entries, |e| e.into_iter().next())?;
        match (entry, rows) {
            (Some(e), Some(rows)) => Ok((e, rows)),
            _ => Err(JournalError::Write {
                path: self.path.clone(),
                source: rusqlite::Error::QueryReturnedNoRows,
            }),
        }
    }

    /// Leaves no transaction open after a failed write: SQLite rolls some failures back itself
    /// (a full disk, an I/O error) and leaves others open, and a connection stuck inside a
    /// transaction would fail every later `BEGIN`. The next write then starts afresh.
    pub fn recover(&mut self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::warn!("rolling back a failed journal write: {e}");
        }
    }

    /// What is in force now, read in one `BEGIN IMMEDIATE` transaction (nobody can commit while
    /// it is read): the three tables, the `PRAGMA data_version` they were read at, and how they
    /// differ from what the journal recorded ([`table_mismatches`]). Writes nothing.
    pub fn load_in_force(&mut self) -> Result<InForce, JournalError> {
        let path = self.path.clone();
        let read_err = |source| JournalError::Read {
            path: path.clone(),
            source,
        };
        let result = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(read_err)?;
            let data_version = read_data_version(&tx).map_err(read_err)?;
            let policies = read_policies(&tx).map_err(read_err)?;
            let budgets = read_budgets(&tx).map_err(read_err)?;
            let agents = read_agents(&tx).map_err(read_err)?;
            let mismatches =
                table_mismatches(&tx, &policies, &budgets, &agents).map_err(read_err)?;
            // Dropping `tx` rolls back: nothing was written.
            Ok(InForce {
                data_version,
                policies,
                budgets,
                agents,
                mismatches,
            })
        })();
        if result.is_err() {
            self.recover();
        }
        result
    }

    /// Appends `items` in one IMMEDIATE transaction, first reading `PRAGMA data_version` inside
    /// it. If that differs from `seen` (another connection committed since the daemon last
    /// loaded the tables; the writer's own commits never change it), the items marked `fresh`
    /// (decisions, which depend on the policy in force) are left out: the caller reloads and
    /// decides them again. Nobody can commit between the check and the append, since the write
    /// lock is held. Returns the version read and, per item, its entry or `None` if left out.
    pub fn append_fresh(
        &mut self,
        items: Vec<(Kind, Fields, bool)>,
        seen: i64,
    ) -> Result<(i64, Vec<Option<Entry>>), JournalError> {
        let result = append_fresh_tx(&mut self.conn, &self.path, &self.genesis, items, seen);
        match result {
            Ok((version, slots, entries)) => {
                if let Some(last) = entries.last() {
                    self.head = Some((last.chain_seq, last.hash.clone()));
                }
                let mut entries = entries.into_iter();
                let out = slots
                    .into_iter()
                    .map(|kept| if kept { entries.next() } else { None })
                    .collect();
                Ok((version, out))
            }
            Err(e) => {
                self.recover();
                if let Ok(head) = read_head(&self.conn) {
                    self.head = head;
                }
                Err(e)
            }
        }
    }

    /// (chain_seq, hash) of the last entry, as of the last write or open.
    pub fn head(&self) -> Option<(i64, String)> {
        self.head.clone()
    }

    /// Whether a `session.start` with this id exists.
    pub fn session_started(&self, session_id: &str) -> Result<bool, JournalError> {
        read_session_started(&self.conn, session_id).map_err(self.read_err())
    }

    /// Session ids with a `session.start` but no `session.end`, oldest start first. The daemon
    /// closes them at startup.
    pub fn open_sessions(&self) -> Result<Vec<String>, JournalError> {
        read_open_sessions(&self.conn).map_err(self.read_err())
    }
}

// ---------------------------------------------------------------------------------------------
// Readers and verify
// ---------------------------------------------------------------------------------------------

/// A read-only view of the journal for the CLI and console. Never creates or migrates anything.
pub struct Reader {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Which entries `holdcall log` shows. Every given condition must hold.
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// Keep only the newest N matching entries.
    pub limit: Option<usize>,
    /// A prefix of the session id (users paste short ids).
    pub session: Option<String>,
    pub tool: Option<String>,
    pub decision: Option<String>,
    pub kind: Option<String>,
}

/// The overall verdict of [`Reader::verify`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainState {
    /// No entries, no problems.
    Empty,
    /// Every entry checked, starting from the genesis of the given machine id.
    Intact,
    /// No machine id: entry 1's prev_hash taken as given; everything after it checked.
    Partial,
    /// At least one problem.
    Broken,
}

/// One thing wrong with the journal. `chain_seq` is 0 when no entry can be named.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    pub chain_seq: i64,
    pub message: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct VerifyReport {
    pub state: ChainState,
    pub entries: i64,
    /// The stored hash of the last entry.
    pub head: Option<String>,
    pub problems: Vec<Problem>,
    /// One sentence about `--expect-head`, when it was given.
    pub expect_head: Option<String>,
    /// Every way the policies, budgets and agents tables differ from what the journal's
    /// `policy.change`, `budget.change` and `agent.change` entries put in force (see
    /// [`table_mismatches`]); any makes the state [`ChainState::Broken`].
    pub tables: Vec<String>,
}

fn plural(n: i64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn gap_problem(expected: i64, found: i64) -> Problem {
    let message = if found < expected {
        // Only possible for the first row: chain_seq is unique and rows come in order.
        format!("entry {found} is out of place: the chain starts at entry 1")
    } else if expected == 1 {
        let missing = if found == 2 {
            "entry 1 is missing".to_owned()
        } else {
            format!("entries 1 to {} are missing", found - 1)
        };
        format!("{missing}: the journal starts at entry {found} — entries were removed")
    } else {
        let missing = if found - expected == 1 {
            format!("entry {expected} is missing")
        } else {
            format!("entries {expected} to {} are missing", found - 1)
        };
        format!(
            "{missing}: the entry after {} is {found} — entries were removed",
            expected - 1
        )
    };
    Problem {
        chain_seq: expected.min(found),
        message,
    }
}

impl Reader {
    /// Opens the journal read-only. A missing file, or one without the journal table, is
    /// [`JournalError::NoJournalYet`].
    pub fn open(db_path: &Path) -> Result<Reader, JournalError> {
        match std::fs::metadata(db_path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(JournalError::NoJournalYet {
                    path: db_path.to_path_buf(),
                });
            }
            Err(source) => {
                return Err(JournalError::CreateFile {
                    path: db_path.to_path_buf(),
                    source,
                });
            }
        }
        let open_err = |source| JournalError::Open {
            path: db_path.to_path_buf(),
            source,
        };
        let conn = Connection::open_with_flags(
            db_path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'journal', 'policies')",
                [],
                |r| r.get(0),
            )
            .map_err(open_err)?;
        if tables < 3 {
            // The daemon creates all three in one transaction, so fewer means none yet.
            return Err(JournalError::NoJournalYet {
                path: db_path.to_path_buf(),
            });
        }
        if !stored_schema_is_ours(&conn, db_path).map_err(open_err)?? {
            return Err(JournalError::NoJournalYet {
                path: db_path.to_path_buf(),
            });
        }
        Ok(Reader {
            conn,
            path: db_path.to_path_buf(),
        })
    }

    /// The file this reader reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        |source| JournalError::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// Decodes journal rows in the order given; a row that does not decode is named by chain_seq.
    fn collect_entries(&self, mut rows: rusqlite::Rows<'_>) -> Result<Vec<Entry>, JournalError> {
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(self.read_err())? {
            let chain_seq: i64 = row.get(0).map_err(self.read_err())?;
            let entry = entry_from_row(row).map_err(|message| JournalError::Malformed {
                path: self.path.clone(),
                chain_seq,
                message,
            })?;
            out.push(entry);
        }
        Ok(out)
    }

    /// Matching entries in chain order, newest LAST; `limit` keeps the newest N.
    pub fn entries(&self, filter: &LogFilter) -> Result<Vec<Entry>, JournalError> {
        // SQLite reads a negative LIMIT as "no limit".
        let limit = filter
            .limit
            .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {ENTRY_COLUMNS} FROM journal
                 WHERE (?1 IS NULL OR substr(session_id, 1, length(?1)) = ?1)
                   AND (?2 IS NULL OR tool = ?2)
                   AND (?3 IS NULL OR decision = ?3)
                   AND (?4 IS NULL OR kind = ?4)
                 ORDER BY chain_seq DESC
                 LIMIT ?5"
            ))
            .map_err(self.read_err())?;
        let rows = stmt
            .query(params![
                filter.session,
                filter.tool,
                filter.decision,
                filter.kind,
                limit
            ])
            .map_err(self.read_err())?;
        let mut out = self.collect_entries(rows)?;
        out.reverse();
        Ok(out)
    }

    /// How many entries the journal holds.
    pub fn count(&self) -> Result<i64, JournalError> {
        self.conn
            .query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
            .map_err(self.read_err())
    }

    /// The stored policies, ordered by seq.
    pub fn policies(&self) -> Result<Vec<PolicyRow>, JournalError> {
        read_policies(&self.conn).map_err(self.read_err())
    }

    /// The stored budgets, ordered by seq.
    pub fn budgets(&self) -> Result<Vec<BudgetRow>, JournalError> {
        read_budgets(&self.conn).map_err(self.read_err())
    }

    /// The enrolled agents, ordered by name.
    pub fn agents(&self) -> Result<Vec<crate::agents::Enrolment>, JournalError> {
        read_agents(&self.conn).map_err(self.read_err())
    }

    /// Entries after `after` in chain order, at most `limit` of them (the console's cursor).
    pub fn entries_after(&self, after: i64, limit: usize) -> Result<Vec<Entry>, JournalError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {ENTRY_COLUMNS} FROM journal WHERE chain_seq > ?1 ORDER BY chain_seq LIMIT ?2"
            ))
            .map_err(self.read_err())?;
        let rows = stmt.query(params![after, limit]).map_err(self.read_err())?;
        self.collect_entries(rows)
    }

    /// The registered connectors (never a secret), by name; none when this database was last
    /// opened by a daemon from before connectors existed (it has no such table yet).
    pub fn connectors(&self) -> Result<Vec<ConnectorRow>, JournalError> {
        let exists: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'connectors'",
                [],
                |r| r.get(0),
            )
            .map_err(self.read_err())?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        read_connectors(&self.conn, None).map_err(self.read_err())
    }

    /// How the policies, budgets and agents tables differ from what the journal recorded
    /// ([`table_mismatches`]), read in one snapshot. A table this database does not have yet
    /// (written by an older build) counts as empty.
    pub fn table_mismatches(&self) -> Result<Vec<String>, JournalError> {
        let tx = self.conn.unchecked_transaction().map_err(self.read_err())?;
        let policies = read_policies(&tx).map_err(self.read_err())?;
        let budgets = if table_exists(&tx, "budgets").map_err(self.read_err())? {
            read_budgets(&tx).map_err(self.read_err())?
        } else {
            Vec::new()
        };
        let agents = if table_exists(&tx, "agents").map_err(self.read_err())? {
            read_agents(&tx).map_err(self.read_err())?
        } else {
            Vec::new()
        };
        table_mismatches(&tx, &policies, &budgets, &agents).map_err(self.read_err())
    }

    /// Walks the whole chain in chain_seq order and names every problem it finds (see
    /// docs/journal-format.md, "Verification"). Without `machine_id`, entry 1's prev_hash is taken
    /// as given ([`ChainState::Partial`]). `expect_head` is a head recorded earlier: the chain must
    /// still contain it.
    pub fn verify(
        &self,
        machine_id: Option<&str>,
        expect_head: Option<&str>,
    ) -> Result<VerifyReport, JournalError> {
        let expect = match expect_head.map(str::trim) {
            None => None,
            Some(h) if is_hash(&h.to_ascii_lowercase()) => Some(h.to_ascii_lowercase()),
            Some(h) => {
                return Err(JournalError::BadExpectHead {
                    given: h.to_owned(),
                });
            }
        };

        let mut problems = Vec::new();
        // What the next entry's prev_hash must be; None = unknown (no machine id, or after a gap
        // or an unreadable row), so the next link is taken as given.
        let mut prev: Option<String> = machine_id.map(genesis);
        let mut expected_seq: i64 = 1;
        let mut entries: i64 = 0;
        let mut last_seq: i64 = 0;
        let mut head: Option<String> = None;
        // (chain_seq, position among rows) of the entry whose hash is the expected head.
        let mut expect_at: Option<(i64, i64)> = None;

        // One statement, so the walk sees one snapshot even while the daemon appends.
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {ENTRY_COLUMNS} FROM journal ORDER BY chain_seq"
            ))
            .map_err(self.read_err())?;
        let mut rows = stmt.query([]).map_err(self.read_err())?;
        while let Some(row) = rows.next().map_err(self.read_err())? {
            let chain_seq: i64 = row.get(0).map_err(self.read_err())?;
            entries += 1;
            if chain_seq != expected_seq {
                problems.push(gap_problem(expected_seq, chain_seq));
                // The entry before this one is gone, so what it should link to is unknown; the gap
                // is the finding, a link complaint would only repeat it.
                prev = None;
            }
            expected_seq = chain_seq.saturating_add(1);
            let stored_hash = col_text(row, HASH_COLUMN, "hash").ok().flatten();

            match entry_from_row(row) {
                Err(what) => problems.push(Problem {
                    chain_seq,
                    message: format!("entry {chain_seq} cannot be checked: {what}"),
                }),
                Ok(e) => {
                    let known_schema = e.schema_version == SCHEMA_VERSION;
                    if !known_schema {
                        problems.push(Problem {
                            chain_seq,
                            message: format!(
                                "entry {chain_seq} was written under schema_version {}, which this build does not know how to verify",
                                e.schema_version
                            ),
                        });
                    }
                    // The link is format-independent, so it is checked whatever the schema.
                    if let Some(p) = &prev
                        && &e.prev_hash != p
                    {
                        let message = if chain_seq == 1 {
                            format!(
                                "entry 1 does not link to the genesis of this machine id: its prev_hash is {} but the genesis is {} (wrong machine id, or entry 1 was replaced)",
                                short(&e.prev_hash),
                                short(p)
                            )
                        } else {
                            format!(
                                "entry {chain_seq} does not link to the entry before it: its prev_hash is {} but entry {} stores {}",
                                short(&e.prev_hash),
                                chain_seq - 1,
                                short(p)
                            )
                        };
                        problems.push(Problem { chain_seq, message });
                    }
                    if known_schema {
                        match entry_hash(&e.prev_hash, &encode(&e)) {
                            None => problems.push(Problem {
                                chain_seq,
                                message: format!(
                                    "entry {chain_seq} has been altered: its prev_hash is not 64 lowercase hex characters"
                                ),
                            }),
                            Some(h) if h != e.hash => problems.push(Problem {
                                chain_seq,
                                message: format!(
                                    "entry {chain_seq} has been altered: its contents hash to {} but it stores {}",
                                    short(&h),
                                    short(&e.hash)
                                ),
                            }),
                            Some(_) => {}
                        }
                    }
                }
            }

            if let (Some(x), Some(h)) = (&expect, &stored_hash)
                && x == h
            {
                expect_at = Some((chain_seq, entries));
            }
            // Judge the next entry against what is stored here, so one bad entry is reported once
            // and the ones after it are judged on their own.
            prev.clone_from(&stored_hash);
            head = stored_hash;
            last_seq = chain_seq;
        }

        let expect_verdict = expect.map(|x| {
            match expect_at {
                _ if entries == 0 => {
                    let s = format!("the journal is empty, so it cannot end at {}, the head you recorded", short(&x));
                    problems.push(Problem { chain_seq: 0, message: s.clone() });
                    s
                }
                Some((_, pos)) if pos == entries => "the journal still ends at the head you recorded".to_owned(),
                Some((seq, pos)) => format!(
                    "the head you recorded is entry {seq}; the journal has grown by {} since, so record the new head to cover them too",
                    plural(entries - pos, "entry", "entries")
                ),
                None => {
                    let s = format!(
                        "the head you recorded ({}) is nowhere in the chain: entries were removed or the chain was recomputed",
                        short(&x)
                    );
                    problems.push(Problem { chain_seq: last_seq, message: s.clone() });
                    s
                }
            }
        });

        let tables = self.table_mismatches()?;
        let state = if !problems.is_empty() || !tables.is_empty() {
            ChainState::Broken
        } else if entries == 0 {
            ChainState::Empty
        } else if machine_id.is_none() {
            ChainState::Partial
        } else {
            ChainState::Intact
        };
        Ok(VerifyReport {
            state,
            entries,
            head,
            problems,
            expect_head: expect_verdict,
            tables,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed entry behind the known-answer vector in docs/journal-format.md.
    fn vector_entry() -> Entry {
        Entry {
            chain_seq: 7,
            schema_version: 1,
            kind: "call.request".to_owned(),
            occurred_at: "2026-11-29T23:41:09.123456789Z".to_owned(),
            fields: Fields {
                session_id: Some("0123456789abcdef".to_owned()),
                seq: Some(3),
                connector: Some("github".to_owned()),
                tool: Some("create_issue".to_owned()),
                client: Some("claude-code".to_owned()),
                agent: Some("reviewer".to_owned()),
                args_digest: Some(
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".to_owned(),
                ),
                decision: Some("allow".to_owned()),
                policy_id: Some("policy3".to_owned()),
                reason: Some("".to_owned()),
                ok: Some(true),
                duration_ms: Some(-42),
                anomaly: None,
                protocol_version: Some("2025-06-18".to_owned()),
                detail: Some("{\"é\":1}".to_owned()),
            },
            prev_hash: genesis("test-machine"),
            hash: String::new(),
        }
    }

    const VECTOR_ENCODING_SHA256: &str =
        "721465a3466fda3824b59316f101335a8217dcc8f70357b0dc4029956ce1fa95";
    const VECTOR_HASH: &str = "a549d1b7d541e1332abcc6475900325f23d33f6f3dc6608e71864e34d9b2aa04";
    const TEST_MACHINE_GENESIS: &str =
        "3a635e667e0159136cb8a14fb4c1188867b3334478c23d0184b97e0785046c32";
    const MACHINE: &str = "test-machine";

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    struct Fixture {
        _dir: tempfile::TempDir,
        db: PathBuf,
    }

    fn fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("holdcall.db");
        Ok(Fixture { _dir: dir, db })
    }

    fn call(session: &str, seq: i64, tool: &str, decision: &str) -> Fields {
        Fields {
            session_id: Some(session.to_owned()),
            seq: Some(seq),
            tool: Some(tool.to_owned()),
            decision: Some(decision.to_owned()),
            args_digest: Some(genesis(tool)),
            ..Fields::default()
        }
    }

    fn session(id: &str) -> Fields {
        Fields {
            session_id: Some(id.to_owned()),
            ..Fields::default()
        }
    }

    /// A journal with `n` call.request entries in session "s1".
    fn journal_with(f: &Fixture, n: i64) -> Result<Journal, Box<dyn std::error::Error>> {
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        for seq in 1..=n {
            j.append(Kind::CallRequest, call("s1", seq, "read_file", "allow"))?;
        }
        Ok(j)
    }

    /// What a hand editor does first: a plain connection with the append-only triggers dropped.
    fn tamperer(f: &Fixture) -> Result<Connection, Box<dyn std::error::Error>> {
        let conn = Connection::open(&f.db)?;
        conn.execute_batch("DROP TRIGGER journal_no_update; DROP TRIGGER journal_no_delete;")?;
        Ok(conn)
    }

    fn verify(
        f: &Fixture,
        expect: Option<&str>,
    ) -> Result<VerifyReport, Box<dyn std::error::Error>> {
        Ok(Reader::open(&f.db)?.verify(Some(MACHINE), expect)?)
    }

    fn mode_of(path: &Path) -> Result<u32, Box<dyn std::error::Error>> {
        Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
    }

    fn new_policy(seq: i64, id: &str, effect: &str) -> NewPolicy {
        NewPolicy {
            seq,
            id: id.to_owned(),
            source: "cli".to_owned(),
            text: format!(
                "@id(\"{id}\") {effect_word}(principal, action, resource);",
                effect_word = if effect == "deny" { "forbid" } else { "permit" }
            ),
            effect: effect.to_owned(),
            specificity: 1,
            tool: Some("read_file".to_owned()),
            agent: None,
            connector: None,
        }
    }

    fn names(problems: &[Problem]) -> Vec<i64> {
        problems.iter().map(|p| p.chain_seq).collect()
    }

    // --- encoding and hashing -------------------------------------------------------------

    #[test]
    fn the_canonical_encoding_is_pinned() {
        let e = vector_entry();
        let encoded = encode(&e);
        assert_eq!(encoded.len(), 413);
        assert!(encoded.starts_with(b"holdcall.journal.v1\n"));
        assert_eq!(
            crate::ids::hex(&Sha256::digest(&encoded)),
            VECTOR_ENCODING_SHA256
        );
        assert_eq!(
            entry_hash(&e.prev_hash, &encoded).as_deref(),
            Some(VECTOR_HASH)
        );
    }

    #[test]
    fn the_encoding_ignores_the_stored_hash_and_prev_hash() {
        let a = vector_entry();
        let mut b = vector_entry();
        b.hash = "f".repeat(64);
        b.prev_hash = "0".repeat(64);
        assert_eq!(encode(&a), encode(&b));
    }

    #[test]
    fn the_genesis_depends_on_the_machine_id_and_is_pinned() {
        assert_eq!(genesis("test-machine"), TEST_MACHINE_GENESIS);
        assert_ne!(genesis("test-machine"), genesis("test-machine2"));
        assert_ne!(genesis(""), genesis("test-machine"));
    }

    #[test]
    fn null_empty_string_and_zero_encode_differently() {
        let base = vector_entry();
        let with = |f: Fields| Entry {
            fields: f,
            ..base.clone()
        };
        let null = encode(&with(Fields::default()));
        let empty = encode(&with(Fields {
            session_id: Some(String::new()),
            ..Fields::default()
        }));
        let zero = encode(&with(Fields {
            seq: Some(0),
            ..Fields::default()
        }));
        let zero_in_first = encode(&with(Fields {
            session_id: Some("0".to_owned()),
            ..Fields::default()
        }));
        let falsy = encode(&with(Fields {
            ok: Some(false),
            ..Fields::default()
        }));
        let all = [&null, &empty, &zero, &zero_in_first, &falsy];
        for (i, a) in all.iter().enumerate() {
            for b in all.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn field_boundaries_are_unambiguous() {
        let base = vector_entry();
        let pair = |tool: &str, client: &str| {
            encode(&Entry {
                fields: Fields {
                    tool: Some(tool.to_owned()),
                    client: Some(client.to_owned()),
                    ..Fields::default()
                },
                ..base.clone()
            })
        };
        assert_ne!(pair("ab", "c"), pair("a", "bc"));
        // Moving a value to the neighbouring field changes the bytes too.
        let moved = encode(&Entry {
            fields: Fields {
                client: Some("ab".to_owned()),
                ..Fields::default()
            },
            ..base.clone()
        });
        let stayed = encode(&Entry {
            fields: Fields {
                tool: Some("ab".to_owned()),
                ..Fields::default()
            },
            ..base.clone()
        });
        assert_ne!(moved, stayed);
    }

    #[test]
    fn entry_hash_refuses_a_prev_hash_that_is_not_64_lowercase_hex() {
        assert!(entry_hash(&"a".repeat(64), b"x").is_some());
        assert!(entry_hash(&"a".repeat(63), b"x").is_none());
        assert!(entry_hash(&"A".repeat(64), b"x").is_none());
        assert!(entry_hash(&format!("+{}", "a".repeat(63)), b"x").is_none());
        assert!(entry_hash(&"é".repeat(32), b"x").is_none());
    }

    #[test]
    fn an_agent_change_commits_with_its_entry_and_one_file_has_one_name() -> TestResult {
        let f = fixture()?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        let identity = crate::os::process::FileIdentity {
            dev: u64::MAX,
            ino: 7,
            size: 1,
            mtime_ns: 2,
            ctime_ns: -3,
        };
        let put = |name: &str| AgentChange::Put {
            name: name.into(),
            path: "/x".into(),
            identity,
            sha256: "00".into(),
        };
        j.change_agent(put("a"), Fields::default())?;
        let stored = j.agents()?;
        assert_eq!(stored.len(), 1);
        assert_eq!(stored.first().map(|a| a.identity), Some(identity));
        assert!(matches!(
            j.change_agent(put("b"), Fields::default()),
            Err(JournalError::AgentImageTaken { ref holder }) if holder == "a"
        ));
        // Re-adding the same name replaces it.
        j.change_agent(put("a"), Fields::default())?;
        assert!(matches!(
            j.change_agent(AgentChange::Remove { name: "zz".into() }, Fields::default()),
            Err(JournalError::UnknownAgent { .. })
        ));
        assert_eq!(
            Reader::open(&f.db)?.count()?,
            2,
            "a refused change writes no entry"
        );
        j.change_agent(AgentChange::Remove { name: "a".into() }, Fields::default())?;
        assert!(j.agents()?.is_empty());
        let report = verify(&f, None)?;
        // The chain is intact; these entries carry no enrolment detail, so the tables check
        // (tested on its own) has its say too.
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.entries, 3);
        Ok(())
    }

    #[test]
    fn every_kind_round_trips_through_its_string() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
        assert_eq!(Kind::parse("rule.add"), None);
    }

    // --- the writer ------------------------------------------------------------------------

    #[test]
    fn appends_form_a_contiguous_chain_that_verifies_intact() -> TestResult {
        let f = fixture()?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        assert!(j.is_empty());
        let first = j.append(Kind::SessionStart, session("s1"))?;
        assert_eq!(first.chain_seq, 1);
        assert_eq!(first.prev_hash, genesis(MACHINE));
        let second = j.append(Kind::CallRequest, call("s1", 1, "read_file", "allow"))?;
        assert_eq!(second.chain_seq, 2);
        assert_eq!(second.prev_hash, first.hash);
        assert_eq!(j.head(), Some((2, second.hash.clone())));
        assert!(chrono::DateTime::parse_from_rfc3339(&second.occurred_at).is_ok());
        assert!(second.occurred_at.ends_with('Z'));

        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Intact, "{:?}", report.problems);
        assert_eq!(report.entries, 2);
        assert_eq!(report.head.as_deref(), Some(second.hash.as_str()));
        // What was returned is what was stored.
        let stored = Reader::open(&f.db)?.entries(&LogFilter::default())?;
        assert_eq!(stored, vec![first, second]);
        Ok(())
    }

    #[test]
    fn a_reopened_journal_continues_the_same_chain() -> TestResult {
        let f = fixture()?;
        let head = journal_with(&f, 3)?.head();
        let mut j = Journal::open(&f.db, MACHINE, Durability::Power)?;
        assert_eq!(j.head(), head);
        let next = j.append(
            Kind::DaemonStart,
            Fields {
                detail: Some(j.pragmas().to_detail()),
                ..Fields::default()
            },
        )?;
        assert_eq!(next.chain_seq, 4);
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        Ok(())
    }

    #[test]
    fn append_many_writes_one_chain_in_one_transaction() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 1)?;
        let batch = j.append_many(vec![
            (Kind::SessionStart, session("s2")),
            (Kind::CallRequest, call("s2", 1, "write_file", "deny")),
            (
                Kind::CallOutcome,
                Fields {
                    ok: Some(true),
                    duration_ms: Some(5),
                    ..session("s2")
                },
            ),
        ])?;
        assert_eq!(
            batch.iter().map(|e| e.chain_seq).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        assert_eq!(
            batch.get(1).map(|e| &e.prev_hash),
            batch.first().map(|e| &e.hash)
        );
        assert_eq!(j.head().map(|h| h.0), Some(4));
        assert!(j.append_many(Vec::new())?.is_empty());
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);

        // All or nothing: make the second insert of a batch fail.
        let other = Connection::open(&f.db)?;
        other.execute_batch(
            "CREATE TRIGGER no_anomaly BEFORE INSERT ON journal WHEN NEW.kind = 'anomaly'
             BEGIN SELECT RAISE(ABORT, 'simulated failure'); END;",
        )?;
        let failed = j.append_many(vec![
            (Kind::SessionStart, session("s3")),
            (
                Kind::Anomaly,
                Fields {
                    anomaly: Some("batch".to_owned()),
                    ..session("s3")
                },
            ),
        ]);
        assert!(matches!(failed, Err(JournalError::Write { .. })));
        assert_eq!(Reader::open(&f.db)?.count()?, 4);
        assert_eq!(j.head().map(|h| h.0), Some(4));
        Ok(())
    }

    #[test]
    fn the_database_file_is_created_private() -> TestResult {
        let f = fixture()?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        j.append(Kind::SessionStart, session("s1"))?;
        assert_eq!(mode_of(&f.db)?, 0o600);
        let mut wal = f.db.as_os_str().to_owned();
        wal.push("-wal");
        assert_eq!(mode_of(Path::new(&wal))?, 0o600);
        Ok(())
    }

    #[test]
    fn an_existing_database_file_with_a_wider_mode_is_tightened() -> TestResult {
        let f = fixture()?;
        File::create(&f.db)?.set_permissions(Permissions::from_mode(0o644))?;
        assert_eq!(mode_of(&f.db)?, 0o644);
        Journal::open(&f.db, MACHINE, Durability::Process)?;
        assert_eq!(mode_of(&f.db)?, 0o600);
        Ok(())
    }

    #[test]
    fn synchronous_reads_back_full_for_power_and_normal_for_process() -> TestResult {
        let f = fixture()?;
        for (durability, level, name) in [
            (Durability::Power, 2, "full"),
            (Durability::Process, 1, "normal"),
        ] {
            let j = Journal::open(&f.db, MACHINE, durability)?;
            let got: i64 = j
                .conn
                .pragma_query_value(None, "synchronous", |r| r.get(0))?;
            assert_eq!(got, level);
            assert_eq!(j.pragmas().synchronous, name);
            assert_eq!(j.pragmas().journal_mode, "wal");
            assert!(j.pragmas().foreign_keys);
            assert_eq!(j.pragmas().busy_timeout_ms, 5000);
            let detail: serde_json::Value = serde_json::from_str(&j.pragmas().to_detail())?;
            assert_eq!(
                detail.get("synchronous").and_then(|v| v.as_str()),
                Some(name)
            );
        }
        Ok(())
    }

    #[test]
    fn the_triggers_refuse_to_update_or_delete_an_entry() -> TestResult {
        let f = fixture()?;
        let j = journal_with(&f, 2)?;
        let update = j
            .conn
            .execute("UPDATE journal SET tool = 'x' WHERE chain_seq = 1", []);
        assert!(update.is_err_and(|e| e.to_string().contains("append-only")));
        let delete = j
            .conn
            .execute("DELETE FROM journal WHERE chain_seq = 2", []);
        assert!(delete.is_err_and(|e| e.to_string().contains("append-only")));
        // Reopening puts back triggers a hand editor dropped.
        drop(tamperer(&f)?);
        let j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        assert!(j.conn.execute("DELETE FROM journal", []).is_err());
        Ok(())
    }

    #[test]
    fn a_newer_database_schema_is_refused() -> TestResult {
        let f = fixture()?;
        drop(journal_with(&f, 1)?);
        Connection::open(&f.db)?.execute("UPDATE meta SET value = '2' WHERE key = 'schema'", [])?;
        assert!(matches!(
            Journal::open(&f.db, MACHINE, Durability::Process),
            Err(JournalError::SchemaTooNew { .. })
        ));
        assert!(matches!(
            Reader::open(&f.db),
            Err(JournalError::SchemaTooNew { .. })
        ));
        Ok(())
    }

    // --- policies --------------------------------------------------------------------------

    #[test]
    fn a_policy_change_and_its_entry_are_one_change() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 1)?;
        let seq = j.next_policy_seq()?;
        let entry = j.change_policies(
            vec![new_policy(seq, "policy1", "allow")],
            Vec::new(),
            Fields {
                policy_id: Some("policy1".to_owned()),
                decision: Some("allow".to_owned()),
                ..Fields::default()
            },
        )?;
        assert_eq!(entry.kind, "policy.change");
        assert_eq!(entry.chain_seq, 2);
        let before = j.policies()?;
        assert_eq!(before.len(), 1);
        let head_before = j.head();

        // The entry insert fails (as a full disk would), after the policy edits have run.
        let other = Connection::open(&f.db)?;
        other.execute_batch(
            "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
        )?;
        let next = j.next_policy_seq()?;
        let failed = j.change_policies(
            vec![new_policy(next, "policy2", "deny")],
            vec!["policy1".to_owned()],
            Fields::default(),
        );
        match failed {
            Err(JournalError::Write { source, .. }) => {
                assert!(source.to_string().contains("simulated write failure"));
            }
            other => return Err(format!("expected a write error, got {other:?}").into()),
        }
        assert_eq!(j.policies()?, before);
        assert_eq!(Reader::open(&f.db)?.policies()?, before);
        assert_eq!(j.head(), head_before);

        // The next successful write chains on correctly.
        other.execute_batch("DROP TRIGGER refuse_entry;")?;
        let after = j.append(Kind::SessionStart, session("s2"))?;
        assert_eq!(after.chain_seq, 3);
        assert_eq!(Some(after.prev_hash.clone()), head_before.map(|h| h.1));
        // The chain is intact (the policy.change entry here carries no diff, so the tables
        // check, tested on its own, disagrees with the table).
        assert!(verify(&f, None)?.problems.is_empty());
        Ok(())
    }

    #[test]
    fn a_connector_change_and_its_entry_are_one_change() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 1)?;
        let set = ConnectorChange::Set {
            name: "gh".into(),
            env_key: "GITHUB_TOKEN".into(),
            command: vec!["/usr/bin/node".into(), "server.js".into()],
            pass_env: vec!["GITHUB_ORG".into()],
            cwd: "/srv".into(),
            pinned_env: vec![("PATH".into(), "/usr/bin".into())],
            secret_id: "0123abcd".into(),
        };
        let entry = j.change_connector(
            set,
            Fields {
                connector: Some("gh".into()),
                ..Fields::default()
            },
        )?;
        assert_eq!(entry.kind, "connector.change");
        let rows = j.connectors()?;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].command, ["/usr/bin/node", "server.js"]);
        assert_eq!(
            j.connector("gh")?.map(|r| r.env_key),
            Some("GITHUB_TOKEN".into())
        );
        assert_eq!(j.connector("other")?, None);
        let head_before = j.head();

        let other = Connection::open(&f.db)?;
        other.execute_batch(
            "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
        )?;
        let failed = j.change_connector(
            ConnectorChange::Remove { name: "gh".into() },
            Fields::default(),
        );
        assert!(
            matches!(failed, Err(JournalError::Write { .. })),
            "{failed:?}"
        );
        assert_eq!(
            j.connectors()?,
            rows,
            "a change that was not recorded is not made"
        );
        assert_eq!(j.head(), head_before);
        other.execute_batch("DROP TRIGGER refuse_entry;")?;

        let unknown = j.change_connector(
            ConnectorChange::Remove {
                name: "nope".into(),
            },
            Fields::default(),
        );
        assert!(matches!(
            unknown,
            Err(JournalError::UnknownConnector { .. })
        ));
        j.change_connector(
            ConnectorChange::Remove { name: "gh".into() },
            Fields::default(),
        )?;
        assert!(j.connectors()?.is_empty());
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        Ok(())
    }

    #[test]
    fn a_failed_write_re_reads_the_head() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 2)?;
        // Another writer appends behind our back; our cached head is now stale.
        let mut other = Journal::open(&f.db, MACHINE, Durability::Process)?;
        other.append(Kind::SessionStart, session("x"))?;
        let raw = Connection::open(&f.db)?;
        raw.execute_batch(
            "CREATE TRIGGER refuse_entry BEFORE INSERT ON journal
             BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END;",
        )?;
        assert!(j.append(Kind::SessionStart, session("y")).is_err());
        assert_eq!(j.head(), other.head());
        raw.execute_batch("DROP TRIGGER refuse_entry;")?;
        assert_eq!(j.append(Kind::SessionStart, session("y"))?.chain_seq, 4);
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        Ok(())
    }

    #[test]
    fn next_policy_seq_never_reuses_a_removed_seq() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 0)?;
        assert_eq!(j.next_policy_seq()?, 1);
        j.change_policies(
            vec![new_policy(1, "a", "allow"), new_policy(2, "b", "ask")],
            Vec::new(),
            Fields::default(),
        )?;
        assert_eq!(j.next_policy_seq()?, 3);
        j.change_policies(Vec::new(), vec!["b".to_owned()], Fields::default())?;
        assert_eq!(j.next_policy_seq()?, 3);
        let reused = j.change_policies(
            vec![new_policy(2, "c", "deny")],
            Vec::new(),
            Fields::default(),
        );
        assert!(matches!(
            reused,
            Err(JournalError::PolicySeqReused {
                seq: 2,
                next: 3,
                ..
            })
        ));
        // Replacing a policy in one change: remove then add, under a fresh seq.
        j.change_policies(
            vec![new_policy(3, "a", "deny")],
            vec!["a".to_owned()],
            Fields::default(),
        )?;
        let rows = j.policies()?;
        assert_eq!(
            rows.iter()
                .map(|p| (p.seq, p.id.as_str(), p.effect.as_str()))
                .collect::<Vec<_>>(),
            vec![(3, "a", "deny")]
        );
        assert_eq!(j.next_policy_seq()?, 4);
        Ok(())
    }

    #[test]
    fn a_budget_and_its_entry_are_one_transaction_and_a_scope_holds_one_budget() -> TestResult {
        use crate::policy::budget::BudgetScope;
        let f = fixture()?;
        let mut j = journal_with(&f, 0)?;
        let echo = BudgetScope {
            tool: Some("echo".into()),
            ..BudgetScope::default()
        };
        let (entry, rows) = j.change_budget(BudgetChange::Set {
            calls: 2,
            scope: echo.clone(),
        })?;
        assert_eq!(entry.kind, "budget.change");
        assert_eq!(entry.fields.policy_id.as_deref(), Some("budget-1"));
        assert_eq!(rows.len(), 1);
        let before = (j.budgets()?, j.head());
        let again = j.change_budget(BudgetChange::Set {
            calls: 3,
            scope: echo,
        });
        assert!(
            matches!(again, Err(JournalError::Write { .. })),
            "{again:?}"
        );
        let unknown = j.change_budget(BudgetChange::Remove {
            id: "budget-9".into(),
        });
        assert!(matches!(unknown, Err(JournalError::UnknownPolicy { .. })));
        assert_eq!(
            (j.budgets()?, j.head()),
            before,
            "a refused change wrote nothing"
        );
        let (removed, rows) = j.change_budget(BudgetChange::Remove {
            id: "budget-1".into(),
        })?;
        assert!(rows.is_empty());
        assert_eq!(
            removed
                .fields
                .detail
                .as_deref()
                .map(|d| d.starts_with("- budget-1")),
            Some(true)
        );
        let (_, rows) = j.change_budget(BudgetChange::Set {
            calls: 1,
            scope: BudgetScope::default(),
        })?;
        assert_eq!(
            rows[0].budget.id, "budget-2",
            "a removed budget's id is never reused"
        );
        Ok(())
    }

    #[test]
    fn a_bad_policy_change_changes_nothing() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 0)?;
        j.change_policies(
            vec![new_policy(1, "a", "allow")],
            Vec::new(),
            Fields::default(),
        )?;
        let before = (j.policies()?, j.head());
        let unknown = j.change_policies(
            vec![new_policy(2, "b", "allow")],
            vec!["nope".to_owned()],
            Fields::default(),
        );
        assert!(matches!(unknown, Err(JournalError::UnknownPolicy { .. })));
        let taken = j.change_policies(
            vec![new_policy(2, "a", "allow")],
            Vec::new(),
            Fields::default(),
        );
        assert!(matches!(taken, Err(JournalError::PolicyIdTaken { .. })));
        let effect = j.change_policies(
            vec![new_policy(2, "b", "maybe")],
            Vec::new(),
            Fields::default(),
        );
        assert!(matches!(effect, Err(JournalError::PolicyEffect { .. })));
        assert_eq!((j.policies()?, j.head()), before);
        assert_eq!(j.next_policy_seq()?, 2);
        Ok(())
    }

    // --- verify ----------------------------------------------------------------------------

    #[test]
    fn editing_a_field_breaks_verification_at_that_entry() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 5)?;
        tamperer(&f)?.execute(
            "UPDATE journal SET decision = 'deny' WHERE chain_seq = 3",
            [],
        )?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert_eq!(names(&report.problems), vec![3]);
        let message = report
            .problems
            .first()
            .map(|p| p.message.as_str())
            .unwrap_or_default();
        assert!(
            message.starts_with("entry 3 has been altered: its contents hash to "),
            "{message}"
        );
        Ok(())
    }

    #[test]
    fn editing_and_rehashing_an_entry_breaks_the_next_link() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 4)?;
        let raw = tamperer(&f)?;
        let mut e = Reader::open(&f.db)?
            .entries(&LogFilter::default())?
            .into_iter()
            .nth(1)
            .ok_or("no entry 2")?;
        e.fields.decision = Some("deny".to_owned());
        let rehashed = entry_hash(&e.prev_hash, &encode(&e)).ok_or("bad prev")?;
        raw.execute(
            "UPDATE journal SET decision = 'deny', hash = ?1 WHERE chain_seq = 2",
            [rehashed],
        )?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert_eq!(names(&report.problems), vec![3]);
        assert!(
            report
                .problems
                .iter()
                .all(|p| p.message.contains("does not link"))
        );
        Ok(())
    }

    #[test]
    fn deleting_a_middle_entry_is_reported_as_a_gap() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 5)?;
        tamperer(&f)?.execute("DELETE FROM journal WHERE chain_seq = 3", [])?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert_eq!(names(&report.problems), vec![3]);
        let message = report
            .problems
            .first()
            .map(|p| p.message.as_str())
            .unwrap_or_default();
        assert_eq!(
            message,
            "entry 3 is missing: the entry after 2 is 4 — entries were removed"
        );
        Ok(())
    }

    #[test]
    fn every_problem_is_reported_not_just_the_first() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 8)?;
        let raw = tamperer(&f)?;
        raw.execute("DELETE FROM journal WHERE chain_seq IN (1, 4, 5)", [])?;
        raw.execute("UPDATE journal SET tool = 'rm' WHERE chain_seq = 7", [])?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert_eq!(names(&report.problems), vec![1, 4, 7]);
        let messages: Vec<&str> = report.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages.first(),
            Some(&"entry 1 is missing: the journal starts at entry 2 — entries were removed")
        );
        assert_eq!(
            messages.get(1),
            Some(&"entries 4 to 5 are missing: the entry after 3 is 6 — entries were removed")
        );
        Ok(())
    }

    #[test]
    fn deleting_the_last_entry_is_caught_only_with_expect_head() -> TestResult {
        let f = fixture()?;
        let j = journal_with(&f, 4)?;
        let (_, recorded) = j.head().ok_or("no head")?;
        drop(j);
        tamperer(&f)?.execute("DELETE FROM journal WHERE chain_seq = 4", [])?;
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        let report = verify(&f, Some(&recorded))?;
        assert_eq!(report.state, ChainState::Broken);
        let verdict = report.expect_head.unwrap_or_default();
        assert!(
            verdict.contains(
                "is nowhere in the chain: entries were removed or the chain was recomputed"
            ),
            "{verdict}"
        );
        assert_eq!(names(&report.problems), vec![3]);
        Ok(())
    }

    #[test]
    fn swapping_two_entries_is_caught() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 5)?;
        let raw = tamperer(&f)?;
        raw.execute_batch(
            "UPDATE journal SET chain_seq = -1 WHERE chain_seq = 2;
             UPDATE journal SET chain_seq = 2 WHERE chain_seq = 3;
             UPDATE journal SET chain_seq = 3 WHERE chain_seq = -1;",
        )?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        let named = names(&report.problems);
        assert!(
            named.contains(&2) && named.contains(&3),
            "{:?}",
            report.problems
        );
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.message.starts_with("entry 2 has been altered"))
        );
        Ok(())
    }

    #[test]
    fn truncating_and_recomputing_is_caught_by_expect_head() -> TestResult {
        let f = fixture()?;
        let j = journal_with(&f, 5)?;
        let (_, recorded) = j.head().ok_or("no head")?;
        drop(j);
        // The attacker empties the table and writes a shorter, perfectly valid chain.
        tamperer(&f)?.execute("DELETE FROM journal", [])?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        for seq in 1..=3 {
            j.append(Kind::CallRequest, call("s1", seq, "read_file", "allow"))?;
        }
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        let report = verify(&f, Some(&recorded))?;
        assert_eq!(report.state, ChainState::Broken);
        assert!(
            report
                .expect_head
                .unwrap_or_default()
                .contains("nowhere in the chain")
        );
        Ok(())
    }

    #[test]
    fn expect_head_on_a_grown_journal_is_not_an_accusation() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 3)?;
        let (_, recorded) = j.head().ok_or("no head")?;
        let at_tip = verify(&f, Some(&recorded))?;
        assert_eq!(at_tip.state, ChainState::Intact);
        assert_eq!(
            at_tip.expect_head.as_deref(),
            Some("the journal still ends at the head you recorded")
        );
        j.append(Kind::SessionStart, session("s2"))?;
        j.append(Kind::SessionEnd, session("s2"))?;
        // Pasted in upper case with a stray newline, as from a terminal.
        let report = verify(&f, Some(&format!("{}\n", recorded.to_uppercase())))?;
        assert_eq!(report.state, ChainState::Intact, "{:?}", report.problems);
        let verdict = report.expect_head.unwrap_or_default();
        assert!(
            verdict.starts_with(
                "the head you recorded is entry 3; the journal has grown by 2 entries"
            ),
            "{verdict}"
        );
        Ok(())
    }

    #[test]
    fn expect_head_against_an_empty_journal_fails() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 0)?;
        assert_eq!(verify(&f, None)?.state, ChainState::Empty);
        let report = verify(&f, Some(&"ab".repeat(32)))?;
        assert_eq!(report.state, ChainState::Broken);
        assert!(
            report
                .expect_head
                .unwrap_or_default()
                .starts_with("the journal is empty, so it cannot end at abababababab")
        );
        Ok(())
    }

    #[test]
    fn a_malformed_expected_head_is_an_error_not_a_verdict() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 1)?;
        let reader = Reader::open(&f.db)?;
        assert!(matches!(
            reader.verify(None, Some("abc123")),
            Err(JournalError::BadExpectHead { .. })
        ));
        Ok(())
    }

    #[test]
    fn without_a_machine_id_the_chain_is_partial_and_a_wrong_one_breaks_entry_1() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 2)?;
        let reader = Reader::open(&f.db)?;
        assert_eq!(reader.verify(None, None)?.state, ChainState::Partial);
        let wrong = reader.verify(Some("another-machine"), None)?;
        assert_eq!(wrong.state, ChainState::Broken);
        assert_eq!(names(&wrong.problems), vec![1]);
        assert!(
            wrong
                .problems
                .iter()
                .all(|p| p.message.contains("does not link"))
        );
        Ok(())
    }

    #[test]
    fn an_unreadable_or_unknown_entry_is_a_problem_not_a_crash() -> TestResult {
        let f = fixture()?;
        let _j = journal_with(&f, 4)?;
        let raw = tamperer(&f)?;
        raw.execute("UPDATE journal SET ok = 7 WHERE chain_seq = 2", [])?;
        raw.execute(
            "UPDATE journal SET schema_version = 9 WHERE chain_seq = 3",
            [],
        )?;
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert_eq!(names(&report.problems), vec![2, 3]);
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.message.contains("holds 7 where 0 or 1 belongs"))
        );
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.message.contains("schema_version 9"))
        );
        // The log refuses the row instead of showing something else.
        let log = Reader::open(&f.db)?.entries(&LogFilter::default());
        assert!(matches!(
            log,
            Err(JournalError::Malformed { chain_seq: 2, .. })
        ));
        Ok(())
    }

    // --- machine id ------------------------------------------------------------------------

    #[test]
    fn the_machine_id_is_created_private_and_reused() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("machine-id");
        let id = load_or_create_machine_id(&path, true)?;
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(mode_of(&path)?, 0o600);
        assert_eq!(load_or_create_machine_id(&path, false)?, id);
        assert_eq!(load_or_create_machine_id(&path, true)?, id);
        // Surrounding whitespace from a hand edit is ignored.
        std::fs::write(&path, format!("  {id}\n\n"))?;
        assert_eq!(load_or_create_machine_id(&path, false)?, id);
        let other = tempfile::tempdir()?;
        assert_ne!(
            load_or_create_machine_id(&other.path().join("machine-id"), true)?,
            id
        );
        Ok(())
    }

    #[test]
    fn a_missing_machine_id_next_to_entries_is_refused() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("machine-id");
        assert!(matches!(
            load_or_create_machine_id(&path, false),
            Err(JournalError::MachineIdMissing { .. })
        ));
        assert!(!path.exists());
        std::fs::write(&path, "\n")?;
        assert!(matches!(
            load_or_create_machine_id(&path, false),
            Err(JournalError::MachineIdEmpty { .. })
        ));
        // Empty next to an empty journal: an interrupted creation, finished now.
        assert_eq!(load_or_create_machine_id(&path, true)?.len(), 32);
        Ok(())
    }

    #[test]
    fn journal_has_entries_is_false_until_something_is_recorded() -> TestResult {
        let f = fixture()?;
        assert!(!journal_has_entries(&f.db)?);
        let mut j = journal_with(&f, 0)?;
        assert!(!journal_has_entries(&f.db)?);
        j.append(Kind::SessionStart, session("s1"))?;
        assert!(journal_has_entries(&f.db)?);
        Ok(())
    }

    #[test]
    fn errors_name_the_file_and_say_what_to_do() -> TestResult {
        use miette::Diagnostic as _;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("machine-id");
        let err = load_or_create_machine_id(&path, false)
            .err()
            .ok_or("expected an error")?;
        let shown = path.display().to_string();
        assert!(err.to_string().contains(&shown));
        let help = err.help().map(|h| h.to_string()).unwrap_or_default();
        assert!(help.contains(&shown) && help.contains("restore"), "{help}");
        let missing_dir = dir.path().join("nope").join("holdcall.db");
        let err = Journal::open(&missing_dir, MACHINE, Durability::Power)
            .err()
            .ok_or("expected an error")?;
        assert!(matches!(err, JournalError::CreateFile { .. }));
        let help = err.help().map(|h| h.to_string()).unwrap_or_default();
        assert!(
            help.contains(&dir.path().join("nope").display().to_string()),
            "{help}"
        );
        Ok(())
    }

    // --- readers ---------------------------------------------------------------------------

    #[test]
    fn a_reader_on_a_missing_file_says_there_is_no_journal_yet() -> TestResult {
        let f = fixture()?;
        let err = Reader::open(&f.db).err().ok_or("expected an error")?;
        assert!(matches!(err, JournalError::NoJournalYet { .. }));
        assert!(err.to_string().ends_with(
            "has no journal yet: the daemon creates it the first time it records something"
        ));
        assert!(!f.db.exists(), "a reader must not create the file");
        // An SQLite file without our tables is no journal either, and stays untouched.
        Connection::open(&f.db)?.execute_batch("CREATE TABLE other(x INTEGER);")?;
        assert!(matches!(
            Reader::open(&f.db),
            Err(JournalError::NoJournalYet { .. })
        ));
        Ok(())
    }

    #[test]
    fn a_reader_works_after_the_writer_has_closed() -> TestResult {
        let f = fixture()?;
        drop(journal_with(&f, 2)?);
        let reader = Reader::open(&f.db)?;
        assert_eq!(reader.count()?, 2);
        assert_eq!(
            reader.verify(Some(MACHINE), None)?.state,
            ChainState::Intact
        );
        Ok(())
    }

    #[test]
    fn entries_filter_and_keep_the_newest_last() -> TestResult {
        let f = fixture()?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        j.append(Kind::SessionStart, session("aaaa1111"))?;
        j.append(Kind::CallRequest, call("aaaa1111", 1, "read_file", "allow"))?;
        j.append(Kind::SessionStart, session("bbbb2222"))?;
        j.append(Kind::CallRequest, call("bbbb2222", 1, "write_file", "deny"))?;
        j.append(Kind::CallRequest, call("aaaa1111", 2, "write_file", "deny"))?;
        let r = Reader::open(&f.db)?;
        let seqs = |filter: LogFilter| -> Result<Vec<i64>, JournalError> {
            Ok(r.entries(&filter)?.iter().map(|e| e.chain_seq).collect())
        };
        assert_eq!(seqs(LogFilter::default())?, vec![1, 2, 3, 4, 5]);
        assert_eq!(
            seqs(LogFilter {
                limit: Some(2),
                ..LogFilter::default()
            })?,
            vec![4, 5]
        );
        assert_eq!(
            seqs(LogFilter {
                limit: Some(0),
                ..LogFilter::default()
            })?,
            Vec::<i64>::new()
        );
        assert_eq!(
            seqs(LogFilter {
                session: Some("aaaa".to_owned()),
                ..LogFilter::default()
            })?,
            vec![1, 2, 5]
        );
        assert_eq!(
            seqs(LogFilter {
                session: Some("AAAA".to_owned()),
                ..LogFilter::default()
            })?,
            Vec::<i64>::new()
        );
        assert_eq!(
            seqs(LogFilter {
                tool: Some("write_file".to_owned()),
                ..LogFilter::default()
            })?,
            vec![4, 5]
        );
        assert_eq!(
            seqs(LogFilter {
                decision: Some("deny".to_owned()),
                session: Some("a".to_owned()),
                ..LogFilter::default()
            })?,
            vec![5]
        );
        assert_eq!(
            seqs(LogFilter {
                kind: Some("session.start".to_owned()),
                limit: Some(1),
                ..LogFilter::default()
            })?,
            vec![3]
        );
        assert_eq!(r.count()?, 5);
        Ok(())
    }

    #[test]
    fn open_sessions_lists_sessions_started_but_not_ended() -> TestResult {
        let f = fixture()?;
        let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
        assert!(j.open_sessions()?.is_empty());
        j.append(Kind::SessionStart, session("s1"))?;
        j.append(Kind::SessionStart, session("s2"))?;
        j.append(Kind::SessionStart, session("s3"))?;
        j.append(Kind::SessionEnd, session("s2"))?;
        // An end without a start, and an anomaly, open nothing.
        j.append(Kind::SessionEnd, session("s9"))?;
        j.append(
            Kind::Anomaly,
            Fields {
                anomaly: Some("framing".to_owned()),
                ..session("s4")
            },
        )?;
        assert_eq!(j.open_sessions()?, vec!["s1".to_owned(), "s3".to_owned()]);
        assert!(j.session_started("s2")?);
        assert!(!j.session_started("s4")?);
        assert!(!j.session_started("s")?);
        Ok(())
    }

    #[test]
    fn entries_serialize_flat_for_the_cli() -> TestResult {
        let json = serde_json::to_value(vector_entry())?;
        assert_eq!(
            json.get("tool").and_then(|v| v.as_str()),
            Some("create_issue")
        );
        assert_eq!(json.get("anomaly"), Some(&serde_json::Value::Null));
        assert!(json.get("fields").is_none());
        assert_eq!(serde_json::to_string(&Durability::Power)?, "\"power\"");
        assert_eq!(serde_json::to_string(&ChainState::Intact)?, "\"intact\"");
        Ok(())
    }

    #[test]
    fn a_commit_by_another_connection_makes_fresh_appends_stale_until_reloaded() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 1)?;
        let seen = j.load_in_force()?.data_version;
        // The writer's own commits do not move data_version.
        let (v, out) = j.append_fresh(
            vec![(Kind::CallRequest, call("s1", 1, "echo", "allow"), true)],
            seen,
        )?;
        assert_eq!(v, seen);
        assert!(out.iter().all(Option::is_some));
        // Another connection's commit does: decisions are left out, other entries go in.
        tamperer(&f)?.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')", [])?;
        let (v, out) = j.append_fresh(
            vec![
                (Kind::CallRequest, call("s1", 2, "echo", "allow"), true),
                (Kind::SessionEnd, session("s1"), false),
            ],
            seen,
        )?;
        assert_ne!(v, seen);
        assert!(
            out.first().is_some_and(Option::is_none),
            "the decision was recorded"
        );
        assert!(out.get(1).is_some_and(Option::is_some));
        // After a reload at the new version, decisions are recorded again.
        let reloaded = j.load_in_force()?.data_version;
        assert_eq!(reloaded, v);
        let (_, out) = j.append_fresh(
            vec![(Kind::CallRequest, call("s1", 3, "echo", "allow"), true)],
            reloaded,
        )?;
        assert!(out.iter().all(Option::is_some));
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        Ok(())
    }

    #[test]
    fn tables_are_checked_against_the_recorded_policy_diffs_budgets_and_enrolments() -> TestResult {
        let f = fixture()?;
        let mut j = journal_with(&f, 1)?;
        let mut p = new_policy(j.next_policy_seq()?, "policy1", "deny");
        // As an imported file's policy: its columns carry no scope of their own.
        p.source = "file:t.cedar".into();
        p.tool = None;
        let diff = crate::policy::unified_diff(
            "",
            &crate::policy::set_text([p.text.as_str()]),
            "policy before",
            "policy after",
        );
        j.change_policies(
            vec![p],
            vec![],
            Fields {
                detail: Some(diff),
                ..Fields::default()
            },
        )?;
        j.change_budget(BudgetChange::Set {
            calls: 2,
            scope: crate::policy::budget::BudgetScope {
                tool: Some("echo".into()),
                ..Default::default()
            },
        })?;
        assert_eq!(j.load_in_force()?.mismatches, Vec::<String>::new());
        assert_eq!(verify(&f, None)?.state, ChainState::Intact);
        let t = tamperer(&f)?;
        t.execute("UPDATE budgets SET calls = 9", [])?;
        t.execute("DELETE FROM policies", [])?;
        let m = j.load_in_force()?.mismatches;
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(
            m.iter().any(|x| x.contains("rule policy1 is missing")),
            "{m:?}"
        );
        assert!(m.iter().any(|x| x.contains("budget budget-1:")), "{m:?}");
        let report = verify(&f, None)?;
        assert_eq!(report.state, ChainState::Broken);
        assert!(report.problems.is_empty());
        assert_eq!(report.tables, m);
        Ok(())
    }
}
