//! Output helpers every command shares: a `… list [--json]`, local times, daemon replies made
//! visible.

use std::io::Write;

use super::{CliError, ask_daemon};
use crate::ipc::{ManageRequest, ManageResponse};

/// Every `… list [--json]` of what the daemon keeps: ask it, take the list out of its answer
/// (any other answer is `CliError::Unexpected`), then print the list whole as JSON, or the line
/// that says it is empty, or one `line` per item.
pub(super) fn list<T: serde::Serialize>(
    req: ManageRequest,
    take: impl FnOnce(ManageResponse) -> Option<Vec<T>>,
    json: bool,
    empty: &str,
    mut line: impl FnMut(&mut dyn Write, &T) -> std::io::Result<()>,
) -> Result<i32, CliError> {
    let items = take(ask_daemon(req)?).ok_or(CliError::Unexpected)?;
    let mut out = std::io::stdout().lock();
    if listed_whole(&mut out, &items, json, empty)? {
        return Ok(0);
    }
    for item in &items {
        line(&mut out, item)?;
    }
    Ok(0)
}

/// The start of every `… list [--json]`: the whole list as JSON, or the line that says it is
/// empty. True when that was all there is to print.
fn listed_whole<T: serde::Serialize>(
    out: &mut impl Write,
    items: &[T],
    json: bool,
    empty: &str,
) -> Result<bool, CliError> {
    if json {
        serde_json::to_writer_pretty(&mut *out, items).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(true);
    }
    if items.is_empty() {
        writeln!(out, "{empty}")?;
        return Ok(true);
    }
    Ok(false)
}

pub(super) fn local_time(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// Every person-facing rendering of text another program chose (tool names, reasons, paths,
/// agent names) goes through the one function `holdcall approve` uses.
use crate::text::visible;

/// A daemon's reply of one or more lines (it may quote a path, a name or a reason), each line
/// through [`visible`].
pub(super) fn visible_lines(message: &str) -> String {
    message.lines().map(visible).collect::<Vec<_>>().join("\n")
}
