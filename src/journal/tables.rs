//! The tables that hold what is in force (policies, budgets, agents, connectors): their rows,
//! their reads, and each change made together with its journal entry in one transaction.

use rusqlite::{Connection, OptionalExtension as _, Row, Transaction, TransactionBehavior, params};

use super::JournalError;
use super::encoding::{Entry, Fields, Kind, now_rfc3339};
use super::writer::{Journal, insert_entries};
use crate::policy::budget::BudgetRow;

const POLICY_COLUMNS: &str =
    "seq, id, source, text, effect, specificity, tool, agent, connector, created_at";

/// A policy row as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PolicyRow {
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
pub(crate) enum BudgetChange {
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

/// A change to the enrolled agents: enrol (or replace) a name, or remove one.
#[derive(Debug, Clone)]
pub(crate) enum AgentChange {
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
pub(crate) type ConnectorRow = crate::connector::ListedConnector;

/// A change to the connectors table.
#[derive(Debug, Clone)]
pub(crate) enum ConnectorChange {
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

pub(super) fn read_budgets(conn: &Connection) -> rusqlite::Result<Vec<BudgetRow>> {
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

pub(super) fn read_policies(conn: &Connection) -> rusqlite::Result<Vec<PolicyRow>> {
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

pub(super) fn read_agents(conn: &Connection) -> rusqlite::Result<Vec<crate::agents::Enrolment>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {AGENT_COLUMNS} FROM agents ORDER BY name"))?;
    let rows = stmt.query_map([], agent_from_row)?;
    rows.collect()
}

pub(super) fn read_connectors(
    conn: &Connection,
    name: Option<&str>,
) -> rusqlite::Result<Vec<ConnectorRow>> {
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

impl Journal {
    /// The stored policies, ordered by seq.
    pub(crate) fn policies(&self) -> Result<Vec<PolicyRow>, JournalError> {
        read_policies(&self.conn).map_err(self.read_err())
    }

    /// Keeps the validation key of a policy set this daemon validated strictly
    /// (`policy::validation_key`), so a start with the same set need not validate it again. A
    /// cache in `meta`, outside the journal and its tables check: a wrong or missing key only
    /// costs a validation.
    pub(crate) fn set_validated_policies(&mut self, key: &str) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES ('validated_policies', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [key],
            )
            .map(|_| ())
            .map_err(|source| JournalError::Write {
                path: self.path.clone(),
                source,
            })
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
    pub(crate) fn agents(&self) -> Result<Vec<crate::agents::Enrolment>, JournalError> {
        read_agents(&self.conn).map_err(self.read_err())
    }

    /// Enrols, replaces or removes an agent and appends the `agent.change` entry in ONE
    /// transaction: if any part fails, nothing changes. An executable already enrolled under
    /// another name is refused naming that name; removing an unknown name is refused.
    pub(crate) fn change_agent(
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
    pub(crate) fn connectors(&self) -> Result<Vec<ConnectorRow>, JournalError> {
        read_connectors(&self.conn, None).map_err(self.read_err())
    }

    /// One registered connector, if any.
    pub(crate) fn connector(&self, name: &str) -> Result<Option<ConnectorRow>, JournalError> {
        read_connectors(&self.conn, Some(name))
            .map(|rows| rows.into_iter().next())
            .map_err(self.read_err())
    }

    /// Registers (or replaces) a connector, or removes one, and appends the `connector.change`
    /// entry, in ONE transaction: if any part fails, nothing changes. Removing a connector that
    /// is not registered is an error.
    pub(crate) fn change_connector(
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

    /// The stored budgets, ordered by seq. (Only the tests ask the writer; the daemon reads
    /// them with [`Journal::load_in_force`].)
    #[cfg(test)]
    pub(crate) fn budgets(&self) -> Result<Vec<BudgetRow>, JournalError> {
        read_budgets(&self.conn).map_err(self.read_err())
    }

    /// Sets or removes one budget and appends its `budget.change` entry in ONE transaction; the
    /// entry names the budget (`policy_id`), its scope (`tool`, `agent`, `connector`), says what
    /// changed in `reason`, and holds the budget's line with `+` or `-` in `detail`. Returns the
    /// entry and the budgets now stored.
    pub(crate) fn change_budget(
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
}
