//! The journal's fuzz entry (feature `fuzz` only): decode an entry's canonical bytes, as
//! `docs/journal-format.md` states them, and replay what a stored entry's `detail` puts in
//! force (`pins::Replayed`, the reading `table_mismatches` does of every stored entry).
//!
//! Must never: open a database or a file. The decoder here is the format's inverse, written
//! from the normative text, so that the fuzzer can check that `encode` is: no two different
//! entries encode alike, and a decoded entry re-encodes to exactly its bytes.

#![allow(clippy::panic)]

use std::collections::BTreeMap;

use super::encoding::{Entry, Fields, encode, entry_hash};
use super::pins::Replayed;

const ENTRY_DOMAIN: &[u8] = b"holdcall.journal.v1\n";

enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Null,
}

/// Reads one tagged, length-prefixed field from the front of `bytes`.
fn field(bytes: &mut &[u8]) -> Option<Value> {
    let (&tag, rest) = bytes.split_first()?;
    let len_bytes: [u8; 8] = rest.get(..8)?.try_into().ok()?;
    let len = usize::try_from(u64::from_be_bytes(len_bytes)).ok()?;
    let payload = rest.get(8..8usize.checked_add(len)?)?;
    *bytes = rest.get(8 + len..)?;
    match (tag, payload) {
        (b's', p) => Some(Value::Str(String::from_utf8(p.to_vec()).ok()?)),
        (b'i', p) => Some(Value::Int(i64::from_be_bytes(p.try_into().ok()?))),
        (b'b', [0]) => Some(Value::Bool(false)),
        (b'b', [1]) => Some(Value::Bool(true)),
        (b'n', []) => Some(Value::Null),
        _ => None,
    }
}

fn opt_str(v: Value) -> Option<Option<String>> {
    match v {
        Value::Str(s) => Some(Some(s)),
        Value::Null => Some(None),
        _ => None,
    }
}

fn opt_int(v: Value) -> Option<Option<i64>> {
    match v {
        Value::Int(i) => Some(Some(i)),
        Value::Null => Some(None),
        _ => None,
    }
}

fn opt_bool(v: Value) -> Option<Option<bool>> {
    match v {
        Value::Bool(b) => Some(Some(b)),
        Value::Null => Some(None),
        _ => None,
    }
}

/// The entry whose canonical encoding is `ENTRY_DOMAIN ‖ body`, if `body` is one.
fn decode(mut body: &[u8]) -> Option<Entry> {
    let b = &mut body;
    let chain_seq = opt_int(field(b)?)??;
    let schema_version = opt_int(field(b)?)??;
    let kind = opt_str(field(b)?)??;
    let occurred_at = opt_str(field(b)?)??;
    let fields = Fields {
        session_id: opt_str(field(b)?)?,
        seq: opt_int(field(b)?)?,
        connector: opt_str(field(b)?)?,
        tool: opt_str(field(b)?)?,
        client: opt_str(field(b)?)?,
        agent: opt_str(field(b)?)?,
        args_digest: opt_str(field(b)?)?,
        decision: opt_str(field(b)?)?,
        policy_id: opt_str(field(b)?)?,
        reason: opt_str(field(b)?)?,
        ok: opt_bool(field(b)?)?,
        duration_ms: opt_int(field(b)?)?,
        anomaly: opt_str(field(b)?)?,
        protocol_version: opt_str(field(b)?)?,
        detail: opt_str(field(b)?)?,
    };
    if !b.is_empty() {
        return None;
    }
    Some(Entry {
        chain_seq,
        schema_version,
        kind,
        occurred_at,
        fields,
        prev_hash: String::new(),
        hash: String::new(),
    })
}

/// The `journal` target: `data` is an encoded entry without its domain prefix.
pub(crate) fn journal(data: &[u8]) {
    let Some(entry) = decode(data) else {
        return;
    };
    let mut encoded = ENTRY_DOMAIN.to_vec();
    encoded.extend_from_slice(data);
    if encode(&entry) != encoded {
        panic!("a decoded journal entry does not re-encode to its bytes: {entry:?}");
    }
    // The chain accepts a previous hash in exactly one spelling: 64 lowercase hex characters.
    let prev = entry.kind.as_str();
    let one_spelling = prev.len() == 64
        && prev
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    if entry_hash(prev, &encoded).is_some() != one_spelling {
        panic!("entry_hash accepted or refused the previous hash {prev:?} wrongly");
    }
    let mut out = Vec::new();
    let mut replayed = Replayed::default();
    replayed.add(&entry.kind, &entry.fields, entry.chain_seq, &mut out);
    replayed.mismatches(&[], &BTreeMap::new(), &mut out);
}
