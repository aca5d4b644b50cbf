//! The journal's errors: each names the file and says what the user should do about it.

use std::path::PathBuf;

use super::schema::DB_SCHEMA;

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

    #[error("the hashes of {path} were not all checked: a verifying thread stopped")]
    #[diagnostic(help(
        "nothing was judged intact; run `holdcall verify` again, and if this persists report it with the daemon's log"
    ))]
    VerifyIncomplete { path: PathBuf },

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

    #[error("no tool {tool:?} is pinned for connector {connector:?}")]
    #[diagnostic(help(
        "`holdcall tools list --connector NAME` shows the pinned tools; a tool is pinned the first time a listing names it"
    ))]
    UnknownPin { connector: String, tool: String },

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
