//! An entry row read back strictly: the column list every entry query selects, and its decoding
//! (a wrong type is described, never coerced, so a hand edit becomes a verify problem).

use rusqlite::Row;
use rusqlite::types::ValueRef;

use super::encoding::{Entry, Fields};

/// Column list shared by every query that reads entries, in the order [`entry_from_row`] expects.
pub(super) const ENTRY_COLUMNS: &str = "chain_seq, schema_version, kind, occurred_at, session_id, seq, \
     connector, tool, client, agent, args_digest, decision, policy_id, reason, ok, duration_ms, \
     anomaly, protocol_version, detail, prev_hash, hash";

/// Index of `hash` in [`ENTRY_COLUMNS`].
pub(super) const HASH_COLUMN: usize = 20;

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
pub(super) fn col_text(row: &Row<'_>, idx: usize, name: &str) -> Result<Option<String>, String> {
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
pub(super) fn entry_from_row(row: &Row<'_>) -> Result<Entry, String> {
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
