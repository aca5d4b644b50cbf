//! The single writer [`Journal`]: opening the database as its writer, and every append, each one
//! `BEGIN IMMEDIATE` transaction chained to the head read inside it (with the `data_version`
//! check of [`Journal::append_fresh`]).

use std::path::{Path, PathBuf};

use rusqlite::{
    Connection, OpenFlags, OptionalExtension as _, Transaction, TransactionBehavior, params,
};

use super::JournalError;
use super::encoding::{
    Entry, Fields, Kind, SCHEMA_VERSION, encode, entry_hash, genesis, now_rfc3339,
};
use super::files::prepare_db_file;
use super::row::ENTRY_COLUMNS;
use super::schema::{Pragmas, migrate, set_pragmas};
use crate::config::Durability;

/// The single writer. Owns its connection; every write is one `BEGIN IMMEDIATE` transaction.
pub struct Journal {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) genesis: String,
    pub(super) head: Option<(i64, String)>,
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
pub(super) fn read_data_version(conn: &Connection) -> rusqlite::Result<i64> {
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

/// Inserts the entries after the chain's current head, read inside the transaction: the write lock
/// is held, so the head cannot move, and the in-memory copy is only a cache.
pub(super) fn insert_entries(
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
    /// journal is empty (from [`load_or_create_machine_id`](super::load_or_create_machine_id)).
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

    pub(super) fn read_err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        |source| JournalError::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// The settings SQLite confirmed, for the `daemon.start` entry.
    pub(crate) fn pragmas(&self) -> &Pragmas {
        &self.pragmas
    }

    /// Whether no entry has been written yet. (Only the tests ask; the daemon asks
    /// [`journal_has_entries`](super::journal_has_entries) before opening.)
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Keeps the cached head in step with the database after a write attempt: set from the entries
    /// on success; on failure re-read, since the caller will append again.
    pub(super) fn settle<T>(
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
    pub(super) fn edit_and_append(
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

    /// Leaves no transaction open after a failed write: SQLite rolls some failures back itself
    /// (a full disk, an I/O error) and leaves others open, and a connection stuck inside a
    /// transaction would fail every later `BEGIN`. The next write then starts afresh.
    pub(crate) fn recover(&mut self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::warn!("rolling back a failed journal write: {e}");
        }
    }

    /// Appends `items` in one IMMEDIATE transaction, first reading `PRAGMA data_version` inside
    /// it. If that differs from `seen` (another connection committed since the daemon last
    /// loaded the tables; the writer's own commits never change it), the items marked `fresh`
    /// (decisions, which depend on the policy in force) are left out: the caller reloads and
    /// decides them again. Nobody can commit between the check and the append, since the write
    /// lock is held. Returns the version read and, per item, its entry or `None` if left out.
    pub(crate) fn append_fresh(
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
    pub(crate) fn head(&self) -> Option<(i64, String)> {
        self.head.clone()
    }

    /// Whether a `session.start` with this id exists.
    pub(crate) fn session_started(&self, session_id: &str) -> Result<bool, JournalError> {
        read_session_started(&self.conn, session_id).map_err(self.read_err())
    }

    /// Session ids with a `session.start` but no `session.end`, oldest start first. The daemon
    /// closes them at startup.
    pub(crate) fn open_sessions(&self) -> Result<Vec<String>, JournalError> {
        read_open_sessions(&self.conn).map_err(self.read_err())
    }
}
