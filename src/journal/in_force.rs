//! What is in force, and whether the tables still say what the journal recorded: the tables
//! rebuilt from the journal's own `policy.change`, `budget.change` and `agent.change` entries and
//! compared ([`table_mismatches`]), for the daemon's loads and for `verify`.

use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior};

use super::JournalError;
use super::pins::{PinRow, Replayed, read_pins, read_settings};
use super::reader::Reader;
use super::row::{ENTRY_COLUMNS, entry_from_row};
use super::tables::{PolicyRow, read_agents, read_budgets, read_policies};
use super::writer::{Journal, read_data_version};
use crate::policy::budget::BudgetRow;

/// What [`Journal::load_in_force`] read, all in one snapshot.
#[derive(Debug, Clone)]
pub(crate) struct InForce {
    pub data_version: i64,
    pub policies: Vec<PolicyRow>,
    pub budgets: Vec<BudgetRow>,
    pub agents: Vec<crate::agents::Enrolment>,
    pub pins: Vec<PinRow>,
    pub settings: std::collections::BTreeMap<String, String>,
    /// How the tables differ from the journal; empty when they agree.
    pub mismatches: Vec<String>,
    /// The validation key of the last policy set the daemon validated (see
    /// `Journal::set_validated_policies`), if one was kept.
    pub validated: Option<String>,
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
/// The tables `table_mismatches` checks, as read in one snapshot.
struct Tables<'a> {
    policies: &'a [PolicyRow],
    budgets: &'a [BudgetRow],
    agents: &'a [crate::agents::Enrolment],
    pins: &'a [PinRow],
    settings: &'a std::collections::BTreeMap<String, String>,
}

fn table_mismatches(conn: &Connection, t: &Tables<'_>) -> rusqlite::Result<Vec<String>> {
    let (policies, budgets, agents) = (t.policies, t.budgets, t.agents);
    let mut out = Vec::new();
    let mut stmt = conn.prepare(&format!(
        "SELECT {ENTRY_COLUMNS} FROM journal \
         WHERE kind IN ('policy.change', 'budget.change', 'agent.change', 'tool.pin', \
         'tool.drift', 'setting.change') ORDER BY chain_seq"
    ))?;
    let mut replayed = Replayed::default();
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
            "tool.pin" | "tool.drift" | "setting.change" => {
                replayed.add(e.kind.as_str(), f, chain_seq, &mut out);
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
    replayed.mismatches(t.pins, t.settings, &mut out);
    Ok(out)
}

fn policy_mismatches(recorded: &str, policies: &[PolicyRow], out: &mut Vec<String>) {
    let before = out.len();
    let table = crate::policy::set_text(policies.iter().map(|p| p.text.as_str()));
    // The common case, without parsing 10,000 texts for their ids: the table's texts are the
    // journal's, in its order, and each row's text opens with that row's id.
    let same = table == recorded
        && policies
            .iter()
            .all(|p| crate::policy::opens_with_id(&p.text, &p.id));
    if same {
        out.extend(policies.iter().filter_map(cli_row_mismatch));
        return;
    }
    let pieces: Vec<&str> = crate::policy::file::split(recorded)
        .into_iter()
        .filter_map(|(s, e)| recorded.get(s..e))
        .map(str::trim)
        .collect();
    let journal: Vec<(String, &str)> = crate::policy::ids_of(&pieces)
        .into_iter()
        .zip(&pieces)
        .map(|(id, piece)| (id.unwrap_or_else(|| "(without @id)".into()), *piece))
        .collect();
    let in_table: std::collections::HashMap<&str, &PolicyRow> =
        policies.iter().map(|p| (p.id.as_str(), p)).collect();
    let in_journal: std::collections::HashSet<&str> =
        journal.iter().map(|(id, _)| id.as_str()).collect();
    for (id, text) in &journal {
        match in_table.get(id.as_str()) {
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
        if !in_journal.contains(p.id.as_str()) {
            out.push(format!(
                "rule {} is in the policies table, but no policy.change entry put it there (inserted behind Holdcall's back)",
                p.id
            ));
        }
        out.extend(cli_row_mismatch(p));
    }
    if out.len() == before && table != recorded {
        out.push(
            "the policies table orders the rules differently from the journal (their seq was changed behind Holdcall's back)"
                .to_string(),
        );
    }
}

/// A rule made on the command line keeps its effect and scope in columns too: they must say
/// what its text says.
fn cli_row_mismatch(p: &PolicyRow) -> Option<String> {
    if p.source != "cli" {
        return None;
    }
    let scope = crate::policy::Scope {
        tool: p.tool.clone(),
        agent: p.agent.clone(),
        connector: p.connector.clone(),
    };
    let matches = crate::policy::Effect::parse(&p.effect).is_some_and(|effect| {
        crate::policy::cli_rule_text(&p.id, effect, &scope).trim() == p.text.trim()
    });
    (!matches).then(|| {
        format!(
            "rule {}: its effect or scope columns in the policies table do not say what its text says (edited behind Holdcall's back)",
            p.id
        )
    })
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

impl Journal {
    /// What is in force now, read in one `BEGIN IMMEDIATE` transaction (nobody can commit while
    /// it is read): the three tables, the `PRAGMA data_version` they were read at, and how they
    /// differ from what the journal recorded ([`table_mismatches`]). Writes nothing.
    pub(crate) fn load_in_force(&mut self) -> Result<InForce, JournalError> {
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
            let pins = read_pins(&tx, None).map_err(read_err)?;
            let settings = read_settings(&tx).map_err(read_err)?;
            let tables = Tables {
                policies: &policies,
                budgets: &budgets,
                agents: &agents,
                pins: &pins,
                settings: &settings,
            };
            let mismatches = table_mismatches(&tx, &tables).map_err(read_err)?;
            let validated = tx
                .query_row(
                    "SELECT value FROM meta WHERE key = 'validated_policies'",
                    [],
                    |r| r.get::<_, String>(0),
                )
                .optional()
                .map_err(read_err)?;
            // Dropping `tx` rolls back: nothing was written.
            Ok(InForce {
                data_version,
                policies,
                budgets,
                agents,
                pins,
                settings,
                mismatches,
                validated,
            })
        })();
        if result.is_err() {
            self.recover();
        }
        result
    }
}

impl Reader {
    /// The pins (of one connector, or all), for `tools list` and `doctor`; none in a database
    /// an older build wrote.
    pub(crate) fn tool_pins(&self, connector: Option<&str>) -> Result<Vec<PinRow>, JournalError> {
        if !table_exists(&self.conn, "tool_pins").map_err(self.read_err())? {
            return Ok(Vec::new());
        }
        read_pins(&self.conn, connector).map_err(self.read_err())
    }

    /// How the policies, budgets and agents tables differ from what the journal recorded
    /// ([`table_mismatches`]), read in one snapshot. A table this database does not have yet
    /// (written by an older build) counts as empty.
    pub(crate) fn table_mismatches(&self) -> Result<Vec<String>, JournalError> {
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
        let (pins, settings) = if table_exists(&tx, "tool_pins").map_err(self.read_err())? {
            (
                read_pins(&tx, None).map_err(self.read_err())?,
                read_settings(&tx).map_err(self.read_err())?,
            )
        } else {
            Default::default()
        };
        let tables = Tables {
            policies: &policies,
            budgets: &budgets,
            agents: &agents,
            pins: &pins,
            settings: &settings,
        };
        table_mismatches(&tx, &tables).map_err(self.read_err())
    }
}
