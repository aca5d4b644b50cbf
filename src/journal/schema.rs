//! The database layout and a connection's setup: the tables, the layout version in `meta`, the
//! one migration (create, or check that a layout is ours), and the pragmas set and read back.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior};

use super::JournalError;
use crate::config::Durability;
use crate::limits;

/// The database layout version stored in `meta.schema`. Independent of
/// [`SCHEMA_VERSION`](super::SCHEMA_VERSION): a new index changes this one, a new hashed field
/// changes the other.
pub(super) const DB_SCHEMA: &str = "1";

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
CREATE TABLE IF NOT EXISTS tool_pins(
    connector TEXT NOT NULL,
    tool TEXT NOT NULL,
    hash TEXT NOT NULL,
    definition TEXT NOT NULL,
    seen_hash TEXT NOT NULL,
    seen_definition TEXT NOT NULL,
    state TEXT NOT NULL CHECK(state IN ('pinned','changed')),
    listed INTEGER NOT NULL CHECK(listed IN (0, 1)),
    updated_at TEXT NOT NULL,
    PRIMARY KEY(connector, tool)
) STRICT;
CREATE TABLE IF NOT EXISTS settings(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;
";

/// The connection settings actually in force, read back from SQLite. The daemon records them in
/// the `daemon.start` entry's `detail`, since defaults differ between SQLite builds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Pragmas {
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
    pub(crate) fn to_detail(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

pub(super) fn set_pragmas(
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
    conn.busy_timeout(limits::DB_BUSY_TIMEOUT)
        .map_err(open_err)?;
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
pub(super) fn stored_schema_is_ours(
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
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), JournalError> {
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
