//! `holdcall log` and `holdcall verify`: the journal read read-only, as lines or JSON, and its
//! hash chain checked.

use std::io::Write;

use super::render::local_time;
use super::{CliError, home_and_config};
use crate::config::Home;
use crate::journal::{ChainState, Entry, LogFilter, Reader};
use crate::text::visible;

use super::args::LogArgs;

pub(super) fn open_reader(home: &Home) -> Result<Reader, CliError> {
    Ok(Reader::open(&home.db_path())?)
}

pub(super) fn machine_id(home: &Home) -> Option<String> {
    std::fs::read_to_string(home.machine_id_path())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub(super) fn log_cmd(args: LogArgs) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let reader = open_reader(&home)?;
    let filter = LogFilter {
        limit: Some(args.limit),
        session: args.session,
        tool: args.tool,
        decision: args.decision,
        kind: None,
    };
    let entries = reader.entries(&filter)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        for e in &entries {
            serde_json::to_writer(&mut out, e).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        return Ok(0);
    }
    if entries.is_empty() {
        writeln!(out, "(no matching entries)")?;
        return Ok(0);
    }
    writeln!(
        out,
        "{:>5}  {:<19}  {:<14}  {:<8}  {:<12}  {:<16}  {:<11}  DETAIL",
        "#", "WHEN", "KIND", "SESSION", "CONNECTOR", "TOOL", "DECISION"
    )?;
    let calls = calls_of(&reader, &entries)?;
    for e in &entries {
        writeln!(out, "{}", log_line(e, &calls))?;
    }
    Ok(0)
}

fn log_line(e: &Entry, calls: &crate::projection::Projection) -> String {
    let f = &e.fields;
    let sess = f
        .session_id
        .as_deref()
        .map(|s| s.chars().take(8).collect::<String>())
        .unwrap_or_default();
    let detail = crate::projection::why(e, calls.call_at(e.chain_seq));
    format!(
        "{:>5}  {:<19}  {:<14}  {:<8}  {:<12}  {:<16}  {:<11}  {}",
        e.chain_seq,
        local_time(&e.occurred_at),
        e.kind,
        sess,
        visible(f.connector.as_deref().unwrap_or("")),
        visible(f.tool.as_deref().unwrap_or("")),
        f.decision.as_deref().unwrap_or(""),
        visible(&detail)
    )
}

/// The projection of every session with a call among `shown`, so each call's line can say what
/// became of it even when later entries fall outside the filter or the limit.
fn calls_of(reader: &Reader, shown: &[Entry]) -> Result<crate::projection::Projection, CliError> {
    let mut ids: Vec<&str> = shown
        .iter()
        .filter(|e| e.kind == "call.request")
        .filter_map(|e| e.fields.session_id.as_deref())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut entries = Vec::new();
    for id in ids {
        entries.extend(
            reader
                .entries(&LogFilter {
                    session: Some(id.to_string()),
                    ..LogFilter::default()
                })?
                .into_iter()
                .filter(|e| e.fields.session_id.as_deref() == Some(id)),
        );
    }
    entries.sort_by_key(|e| e.chain_seq);
    Ok(crate::projection::Projection::build(&entries))
}

pub(super) fn verify_cmd(expect_head: Option<String>, json: bool) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let reader = open_reader(&home)?;
    let report = reader.verify(machine_id(&home).as_deref(), expect_head.as_deref())?;
    let broken = report.state == ChainState::Broken;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?
        );
    } else if broken {
        eprintln!("journal FAILED verification");
        for p in &report.problems {
            eprintln!("  entry {}: {}", p.chain_seq, p.message);
        }
        if let Some(x) = &report.expect_head {
            eprintln!("  {x}");
        }
        if !report.tables.is_empty() {
            eprintln!(
                "  the policies, budgets and agents tables do not match what the journal recorded:"
            );
            for t in &report.tables {
                eprintln!("  table: {}", visible(t));
            }
            eprintln!(
                "  the daemon refuses every call until they match; restore holdcall.db from a backup"
            );
        }
    } else {
        match report.state {
            ChainState::Empty => println!("journal OK: empty (nothing recorded yet)"),
            ChainState::Partial => println!(
                "journal OK as far as it goes: {} entries link up, but the machine id is missing, so the first link cannot be checked",
                report.entries
            ),
            _ => println!(
                "journal OK: {} entries, every link and hash checks",
                report.entries
            ),
        }
        if let Some(h) = &report.head {
            println!("head {h}");
            println!(
                "  record it elsewhere; later `holdcall verify --expect-head {h}` proves nothing before it was rewritten"
            );
        }
        if let Some(x) = &report.expect_head {
            println!("{x}");
        }
    }
    Ok(if broken { 1 } else { 0 })
}
