//! `holdcall tools list|accept|drift` and `holdcall connector hide-denied`: the pinned tool
//! definitions read from the journal's tables read-only (so `tools list` works with the daemon
//! down), and the changes sent to the daemon, which journals them.

use std::io::Write;

use super::args::{OnOff, ToolsCmd};
use super::log::open_reader;
use super::{CliError, ask_daemon, home_and_config};
use crate::ipc::{ManageRequest, ManageResponse};
use crate::journal::PinRow;
use crate::text::visible;

pub(super) fn tools_cmd(action: ToolsCmd) -> Result<i32, CliError> {
    match action {
        ToolsCmd::List { connector, json } => tools_list(connector, json),
        ToolsCmd::Accept { connector, tool } => tools_accept(connector, tool),
        ToolsCmd::Drift { effect } => setting(crate::daemon::DRIFT_KEY.into(), effect),
    }
}

pub(super) fn hide_denied(name: String, state: OnOff) -> Result<i32, CliError> {
    crate::policy::validate_scope_name("connector", &name)?;
    let value = match state {
        OnOff::On => "on",
        OnOff::Off => "off",
    };
    setting(
        format!("{}{name}", crate::daemon::HIDE_PREFIX),
        value.into(),
    )
}

fn setting(key: String, value: String) -> Result<i32, CliError> {
    match ask_daemon(ManageRequest::SettingSet { key, value })? {
        ManageResponse::SettingChanged { message, .. } => {
            println!("{}", visible(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

/// A pin's state in words: `pinned`, `changed`, and `gone` for a tool the last whole listing
/// no longer held (its pin is kept).
pub(crate) fn state_word(p: &PinRow) -> String {
    match (p.state.as_str(), p.listed) {
        (s, true) => s.to_string(),
        (s, false) => format!("{s}, gone from the listing"),
    }
}

/// The lint flags of one pin's definition (the one last listed).
pub(crate) fn lint_flags(p: &PinRow) -> Vec<String> {
    crate::mcp::tools::lint(&p.seen_definition)
}

fn tools_list(connector: Option<String>, json: bool) -> Result<i32, CliError> {
    if let Some(c) = &connector {
        crate::policy::validate_scope_name("connector", c)?;
    }
    let (home, _) = home_and_config()?;
    let pins = if home.db_path().exists() {
        open_reader(&home)?.tool_pins(connector.as_deref())?
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    if json {
        let items: Vec<serde_json::Value> = pins
            .iter()
            .map(|p| {
                serde_json::json!({
                    "connector": p.connector,
                    "tool": p.tool,
                    "state": p.state,
                    "listed": p.listed,
                    "hash": p.hash,
                    "seen_hash": p.seen_hash,
                    "lint": lint_flags(p),
                    "updated_at": p.updated_at,
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &items).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(0);
    }
    if pins.is_empty() {
        writeln!(
            out,
            "(no tool is pinned yet: a tool is pinned the first time a server lists it through holdcall serve)"
        )?;
        return Ok(0);
    }
    for p in &pins {
        let short: String = p.seen_hash.chars().take(12).collect();
        writeln!(
            out,
            "{}/{}  {}  {short}",
            visible(&p.connector),
            visible(&p.tool),
            state_word(p)
        )?;
        if p.state == crate::journal::CHANGED {
            for line in crate::mcp::tools::diff::describe(&p.definition, &p.seen_definition) {
                writeln!(out, "    changed: {line}")?;
            }
        }
        for flag in lint_flags(p) {
            writeln!(out, "    LINT {flag}")?;
        }
    }
    let changed = pins
        .iter()
        .filter(|p| p.state == crate::journal::CHANGED)
        .count();
    if changed > 0 {
        writeln!(
            out,
            "{changed} tool(s) changed since pinned: calls to them are decided with the drift guard (`holdcall policy list`); `holdcall tools accept CONNECTOR [TOOL]` re-pins after you looked."
        )?;
    }
    Ok(0)
}

fn tools_accept(connector: String, tool: Option<String>) -> Result<i32, CliError> {
    crate::policy::validate_scope_name("connector", &connector)?;
    if let Some(t) = &tool {
        crate::policy::validate_tool_name(t)?;
    }
    let ManageResponse::ToolsAccepted { accepted } = ask_daemon(ManageRequest::ToolsAccept {
        connector: connector.clone(),
        tool,
    })?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if accepted.is_empty() {
        writeln!(
            out,
            "nothing to accept: no pinned tool of {} changed",
            visible(&connector)
        )?;
        return Ok(0);
    }
    for a in &accepted {
        writeln!(
            out,
            "re-pinned {}/{} (journal entry {}):",
            visible(&connector),
            visible(&a.tool),
            a.chain_seq
        )?;
        for line in &a.diff {
            writeln!(out, "    {line}")?;
        }
    }
    Ok(0)
}
