//! The read-only [`Reader`] for the CLI and console, and its queries ([`LogFilter`] for `log`,
//! the console's cursor). It never creates or migrates anything.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, params};

use super::JournalError;
use super::encoding::Entry;
use super::row::{ENTRY_COLUMNS, entry_from_row};
use super::schema::stored_schema_is_ours;
use super::tables::{
    ConnectorRow, PolicyRow, read_agents, read_budgets, read_connectors, read_policies,
};
use crate::limits::DB_BUSY_TIMEOUT;
use crate::policy::budget::BudgetRow;

/// A read-only view of the journal for the CLI and console. Never creates or migrates anything.
pub struct Reader {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
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
        conn.busy_timeout(DB_BUSY_TIMEOUT).map_err(open_err)?;
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
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn read_err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
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
    pub(crate) fn count(&self) -> Result<i64, JournalError> {
        self.conn
            .query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
            .map_err(self.read_err())
    }

    /// The stored policies, ordered by seq.
    pub(crate) fn policies(&self) -> Result<Vec<PolicyRow>, JournalError> {
        read_policies(&self.conn).map_err(self.read_err())
    }

    /// The stored budgets, ordered by seq.
    pub(crate) fn budgets(&self) -> Result<Vec<BudgetRow>, JournalError> {
        read_budgets(&self.conn).map_err(self.read_err())
    }

    /// The enrolled agents, ordered by name.
    pub(crate) fn agents(&self) -> Result<Vec<crate::agents::Enrolment>, JournalError> {
        read_agents(&self.conn).map_err(self.read_err())
    }

    /// Entries after `after` in chain order, at most `limit` of them (the console's cursor).
    pub(crate) fn entries_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Entry>, JournalError> {
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
    pub(crate) fn connectors(&self) -> Result<Vec<ConnectorRow>, JournalError> {
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
}
