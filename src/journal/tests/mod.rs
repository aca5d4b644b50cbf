//! The journal's unit tests, one file per file of the journal (the known-answer vectors are in
//! `encoding`), and the fixtures they share: a journal in a temporary directory, entries to
//! append, and the hand editor's connection.

use std::fs::{File, Permissions};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use sha2::{Digest as _, Sha256};

use super::verify::Problem;
use super::*;
use crate::config::Durability;

mod encoding;
mod files;
mod in_force;
mod props;
mod reader;
mod tables;
mod verify;
mod writer;

const MACHINE: &str = "test-machine";

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

fn verify(f: &Fixture, expect: Option<&str>) -> Result<VerifyReport, Box<dyn std::error::Error>> {
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
