//! Tool pins and settings: the `tool_pins` table (per connector and tool, the definition a person
//! accepted, the one last listed, its state) and the `settings` table (the drift guard, each
//! connector's hide-denied), each change written in one transaction with its journal entries
//! (`tool.pin`, `tool.drift`, `setting.change`), and what `table_mismatches` replays of them.
//!
//! Every tool entry's `detail` is a JSON object stating the row as it is after the entry
//! (`hash`, `seen`, `state`, `listed`), the definition listed (`definition`, when one was) and
//! what changed (`diff`): the table is only a cache of the last such entry per tool.

use std::collections::BTreeMap;

use rusqlite::{Connection, Transaction, params};

use super::JournalError;
use super::encoding::{Entry, Fields, Kind, now_rfc3339};
use super::writer::{Journal, insert_entries};
use crate::mcp::tools::{ToolDefinition, diff};

/// A pin's state: the definition last listed is the one accepted, or it is not.
pub(crate) const PINNED: &str = "pinned";
pub(crate) const CHANGED: &str = "changed";

/// One tool's pin, as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PinRow {
    pub connector: String,
    pub tool: String,
    /// The accepted definition's hash (first sight, or `tools accept`).
    pub hash: String,
    pub definition: String,
    /// The definition the last listing held.
    pub seen_hash: String,
    pub seen_definition: String,
    /// [`PINNED`] or [`CHANGED`].
    pub state: String,
    /// Whether the last whole listing held the tool (a tool that is gone keeps its pin).
    pub listed: bool,
    pub updated_at: String,
}

/// What recording one listing did.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListingRecorded {
    /// Tools seen for the first time on this connector.
    pub first_seen: Vec<String>,
    /// The connector's pins after the listing.
    pub pins: Vec<PinRow>,
}

/// One pin a person accepted: the tool and what changed since the definition it replaces.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Accepted {
    pub tool: String,
    pub diff: Vec<String>,
    pub chain_seq: i64,
}

const PIN_COLUMNS: &str =
    "connector, tool, hash, definition, seen_hash, seen_definition, state, listed, updated_at";

pub(super) fn read_pins(
    conn: &Connection,
    connector: Option<&str>,
) -> rusqlite::Result<Vec<PinRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PIN_COLUMNS} FROM tool_pins WHERE ?1 IS NULL OR connector = ?1 \
         ORDER BY connector, tool"
    ))?;
    let rows = stmt.query_map([connector], |r| {
        Ok(PinRow {
            connector: r.get(0)?,
            tool: r.get(1)?,
            hash: r.get(2)?,
            definition: r.get(3)?,
            seen_hash: r.get(4)?,
            seen_definition: r.get(5)?,
            state: r.get(6)?,
            listed: r.get(7)?,
            updated_at: r.get(8)?,
        })
    })?;
    rows.collect()
}

pub(super) fn read_settings(conn: &Connection) -> rusqlite::Result<BTreeMap<String, String>> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM settings ORDER BY key")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

fn write_pin(tx: &Transaction<'_>, p: &PinRow) -> rusqlite::Result<()> {
    tx.execute(
        &format!(
            "INSERT INTO tool_pins ({PIN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
             ON CONFLICT(connector, tool) DO UPDATE SET hash = excluded.hash, \
             definition = excluded.definition, seen_hash = excluded.seen_hash, \
             seen_definition = excluded.seen_definition, state = excluded.state, \
             listed = excluded.listed, updated_at = excluded.updated_at"
        ),
        params![
            p.connector,
            p.tool,
            p.hash,
            p.definition,
            p.seen_hash,
            p.seen_definition,
            p.state,
            p.listed,
            p.updated_at
        ],
    )?;
    Ok(())
}

/// The `detail` of a tool entry: the row after it, the definition listed, what changed.
fn pin_detail(p: &PinRow, with_definition: bool, changes: &[String]) -> String {
    let mut v = serde_json::json!({
        "hash": p.hash,
        "seen": p.seen_hash,
        "state": p.state,
        "listed": p.listed,
    });
    if let Some(o) = v.as_object_mut() {
        if with_definition {
            o.insert("definition".into(), p.seen_definition.clone().into());
        }
        if !changes.is_empty() {
            o.insert("diff".into(), changes.to_vec().into());
        }
    }
    v.to_string()
}

fn tool_fields(p: &PinRow, session_id: Option<&str>, reason: String, detail: String) -> Fields {
    Fields {
        session_id: session_id.map(str::to_string),
        connector: Some(p.connector.clone()),
        tool: Some(p.tool.clone()),
        reason: Some(reason),
        detail: Some(detail),
        ..Fields::default()
    }
}

/// The entries (and rows to write) one listing makes of the pins it finds.
fn listing_changes(
    connector: &str,
    session_id: &str,
    old: &[PinRow],
    tools: &[ToolDefinition],
    complete: bool,
    now: &str,
) -> (Vec<PinRow>, Vec<(Kind, Fields)>, Vec<String>) {
    let mut rows = Vec::new();
    let mut items = Vec::new();
    let mut first_seen = Vec::new();
    let session = Some(session_id);
    for t in tools {
        let Some(was) = old.iter().find(|p| p.tool == t.name) else {
            let p = PinRow {
                connector: connector.to_string(),
                tool: t.name.clone(),
                hash: t.hash.clone(),
                definition: t.canonical.clone(),
                seen_hash: t.hash.clone(),
                seen_definition: t.canonical.clone(),
                state: PINNED.into(),
                listed: true,
                updated_at: now.to_string(),
            };
            let reason = format!("pinned {} at first sight", t.name);
            items.push((
                Kind::ToolPin,
                tool_fields(&p, session, reason, pin_detail(&p, true, &[])),
            ));
            first_seen.push(t.name.clone());
            rows.push(p);
            continue;
        };
        if t.hash == was.seen_hash && was.listed {
            continue;
        }
        let mut p = was.clone();
        p.seen_hash = t.hash.clone();
        p.seen_definition = t.canonical.clone();
        p.state = if t.hash == was.hash { PINNED } else { CHANGED }.into();
        p.listed = true;
        p.updated_at = now.to_string();
        let changes = diff::describe(&was.definition, &t.canonical);
        let reason = match (t.hash == was.seen_hash, t.hash == was.hash, was.listed) {
            (true, true, _) => format!("{} is listed again, as pinned", t.name),
            (true, false, _) => format!(
                "{} is listed again, still changed from its pinned definition",
                t.name
            ),
            (false, true, _) => format!("{} is listed again as its pinned definition", t.name),
            (false, false, true) => {
                format!("the definition of {} changed since it was pinned", t.name)
            }
            (false, false, false) => format!(
                "{} is listed again, rewritten while it was gone from the listing",
                t.name
            ),
        };
        items.push((
            Kind::ToolDrift,
            tool_fields(&p, session, reason, pin_detail(&p, true, &changes)),
        ));
        rows.push(p);
    }
    if complete {
        for was in old
            .iter()
            .filter(|p| p.listed && !tools.iter().any(|t| t.name == p.tool))
        {
            let mut p = was.clone();
            p.listed = false;
            p.updated_at = now.to_string();
            let reason = format!("{} is gone from the listing; its pin is kept", p.tool);
            items.push((
                Kind::ToolDrift,
                tool_fields(&p, session, reason, pin_detail(&p, false, &[])),
            ));
            rows.push(p);
        }
    }
    (rows, items, first_seen)
}

impl Journal {
    /// Every pin (of one connector, or all), by connector then tool.
    pub(crate) fn pins(&self, connector: Option<&str>) -> Result<Vec<PinRow>, JournalError> {
        read_pins(&self.conn, connector).map_err(self.read_err())
    }

    /// Records what one `tools/list` answer of `connector` held, in ONE transaction: a new tool
    /// is pinned (`tool.pin`), a changed, re-appearing or (for a whole listing) vanished one is a
    /// `tool.drift` entry with what changed; an unchanged listing writes nothing.
    pub(crate) fn record_listing(
        &mut self,
        connector: &str,
        session_id: &str,
        tools: &[ToolDefinition],
        complete: bool,
    ) -> Result<ListingRecorded, JournalError> {
        let old = read_pins(&self.conn, Some(connector)).map_err(self.read_err())?;
        let (rows, items, first_seen) =
            listing_changes(connector, session_id, &old, tools, complete, &now_rfc3339());
        if items.is_empty() {
            return Ok(ListingRecorded {
                first_seen,
                pins: old,
            });
        }
        let result = self.write_pins_with(&rows, items);
        self.settle(result, |_| ())?;
        Ok(ListingRecorded {
            first_seen,
            pins: self.pins(Some(connector))?,
        })
    }

    /// Writes `rows` to `tool_pins` and appends `items` to the journal in ONE transaction.
    fn write_pins_with(
        &mut self,
        rows: &[PinRow],
        items: Vec<(Kind, Fields)>,
    ) -> Result<Vec<Entry>, JournalError> {
        let path = self.path.clone();
        let write_err = |source| JournalError::Write {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(write_err)?;
        for p in rows {
            write_pin(&tx, p).map_err(write_err)?;
        }
        let entries = insert_entries(&tx, &self.path, &self.genesis, items)?;
        tx.commit().map_err(write_err)?;
        Ok(entries)
    }

    /// Re-pins the changed tools of `connector` (only `tool`, if named) to the definition last
    /// listed, one `tool.pin` entry each with the diff a person accepted, in ONE transaction.
    pub(crate) fn accept_pins(
        &mut self,
        connector: &str,
        tool: Option<&str>,
    ) -> Result<(Vec<Accepted>, Vec<PinRow>), JournalError> {
        let old = read_pins(&self.conn, Some(connector)).map_err(self.read_err())?;
        if let Some(t) = tool
            && !old.iter().any(|p| p.tool == t)
        {
            return Err(JournalError::UnknownPin {
                connector: connector.to_string(),
                tool: t.to_string(),
            });
        }
        let now = now_rfc3339();
        let mut rows = Vec::new();
        let mut items = Vec::new();
        let mut accepted = Vec::new();
        for was in old
            .iter()
            .filter(|p| p.hash != p.seen_hash && tool.is_none_or(|t| t == p.tool))
        {
            let changes = diff::describe(&was.definition, &was.seen_definition);
            let mut p = was.clone();
            p.hash = was.seen_hash.clone();
            p.definition = was.seen_definition.clone();
            p.state = PINNED.into();
            p.updated_at = now.clone();
            let reason = format!("{} re-pinned by a person (holdcall tools accept)", p.tool);
            items.push((
                Kind::ToolPin,
                tool_fields(&p, None, reason, pin_detail(&p, true, &changes)),
            ));
            accepted.push(Accepted {
                tool: p.tool.clone(),
                diff: changes,
                chain_seq: 0,
            });
            rows.push(p);
        }
        if items.is_empty() {
            return Ok((accepted, old));
        }
        let result = self.write_pins_with(&rows, items);
        let entries = self.settle(result, |e| e)?;
        for (a, e) in accepted.iter_mut().zip(entries) {
            a.chain_seq = e.chain_seq;
        }
        Ok((accepted, self.pins(Some(connector))?))
    }

    /// The settings, by key.
    pub(crate) fn settings(&self) -> Result<BTreeMap<String, String>, JournalError> {
        read_settings(&self.conn).map_err(self.read_err())
    }

    /// Sets `key` to `value` with its `setting.change` entry (`reason` in words), in ONE
    /// transaction. Returns the entry and every setting now stored.
    pub(crate) fn change_setting(
        &mut self,
        key: &str,
        value: &str,
        reason: String,
    ) -> Result<(super::Entry, BTreeMap<String, String>), JournalError> {
        let path = self.path.clone();
        let (k, v) = (key.to_string(), value.to_string());
        let edit = move |tx: &Transaction<'_>| -> Result<(), JournalError> {
            tx.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value, \
                 updated_at = excluded.updated_at",
                params![k, v, now_rfc3339()],
            )
            .map_err(|source| JournalError::Write {
                path: path.clone(),
                source,
            })?;
            Ok(())
        };
        let fields = Fields {
            reason: Some(reason),
            detail: Some(serde_json::json!({"key": key, "value": value}).to_string()),
            ..Fields::default()
        };
        let entry = self.edit_and_append(edit, Kind::SettingChange, fields)?;
        let all = self.settings()?;
        Ok((entry, all))
    }
}

/// What the journal's `tool.pin`, `tool.drift` and `setting.change` entries put in force, replayed
/// in chain order (by `table_mismatches`).
#[derive(Debug, Default)]
pub(super) struct Replayed {
    /// (connector, tool) -> (detail of the last entry, its chain_seq)
    pins: BTreeMap<(String, String), (serde_json::Value, i64)>,
    settings: BTreeMap<String, (String, i64)>,
}

impl Replayed {
    /// Takes one entry of kind `tool.pin`, `tool.drift` or `setting.change` into account.
    pub(super) fn add(&mut self, kind: &str, f: &Fields, chain_seq: i64, out: &mut Vec<String>) {
        let detail = serde_json::from_str::<serde_json::Value>(f.detail.as_deref().unwrap_or(""));
        match (kind, detail) {
            ("setting.change", Ok(v)) => match (
                v.get("key").and_then(serde_json::Value::as_str),
                v.get("value").and_then(serde_json::Value::as_str),
            ) {
                (Some(k), Some(val)) => {
                    self.settings
                        .insert(k.to_string(), (val.to_string(), chain_seq));
                }
                _ => out.push(format!(
                    "setting.change entry {chain_seq} does not say which setting it set"
                )),
            },
            (_, Ok(v)) if f.connector.is_some() && f.tool.is_some() => {
                let key = (
                    f.connector.clone().unwrap_or_default(),
                    f.tool.clone().unwrap_or_default(),
                );
                self.pins.insert(key, (v, chain_seq));
            }
            _ => out.push(format!(
                "{kind} entry {chain_seq} does not say what it recorded"
            )),
        }
    }

    /// Names every way `pins` and `settings` differ from what the entries recorded.
    pub(super) fn mismatches(
        &self,
        pins: &[PinRow],
        settings: &BTreeMap<String, String>,
        out: &mut Vec<String>,
    ) {
        for ((connector, tool), (v, at)) in &self.pins {
            let Some(p) = pins
                .iter()
                .find(|p| &p.connector == connector && &p.tool == tool)
            else {
                out.push(format!(
                    "the pin of {connector}/{tool} is missing from the tool_pins table, but entry {at} recorded it (deleted behind Holdcall's back)"
                ));
                continue;
            };
            let mut differ = Vec::new();
            if v.get("hash").and_then(serde_json::Value::as_str) != Some(p.hash.as_str())
                || crate::ids::sha256_hex(p.definition.as_bytes()) != p.hash
            {
                differ.push("pinned definition");
            }
            if v.get("seen").and_then(serde_json::Value::as_str) != Some(p.seen_hash.as_str())
                || crate::ids::sha256_hex(p.seen_definition.as_bytes()) != p.seen_hash
            {
                differ.push("listed definition");
            }
            if v.get("state").and_then(serde_json::Value::as_str) != Some(p.state.as_str()) {
                differ.push("state");
            }
            if v.get("listed").and_then(serde_json::Value::as_bool) != Some(p.listed) {
                differ.push("listed");
            }
            if !differ.is_empty() {
                out.push(format!(
                    "the pin of {connector}/{tool}: its {} in the tool_pins table differ from what entry {at} recorded (edited behind Holdcall's back)",
                    differ.join(", ")
                ));
            }
        }
        for p in pins {
            if !self
                .pins
                .contains_key(&(p.connector.clone(), p.tool.clone()))
            {
                out.push(format!(
                    "the pin of {}/{} is in the tool_pins table, but no entry recorded it (inserted behind Holdcall's back)",
                    p.connector, p.tool
                ));
            }
        }
        for (key, (value, at)) in &self.settings {
            match settings.get(key) {
                Some(v) if v == value => {}
                Some(v) => out.push(format!(
                    "setting {key} is {v} in the settings table, but setting.change entry {at} set {value} (edited behind Holdcall's back)"
                )),
                None => out.push(format!(
                    "setting {key} is missing from the settings table, but setting.change entry {at} set it (deleted behind Holdcall's back)"
                )),
            }
        }
        for key in settings.keys() {
            if !self.settings.contains_key(key) {
                out.push(format!(
                    "setting {key} is in the settings table, but no setting.change entry set it (inserted behind Holdcall's back)"
                ));
            }
        }
    }
}
