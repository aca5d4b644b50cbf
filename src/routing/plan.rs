//! The rewrite `holdcall init` plans for one file: span edits that route each unrouted stdio
//! entry through `holdcall serve`, point entries routed through another holdcall at this one,
//! and give `--home` to routed entries whose relay would land elsewhere.
//!
//! Owns: the edits and their layout (one element per line, inline tables, dotted keys). Must
//! never: change a byte outside the command and args values it rewrites, or return a plan that
//! `verify::check_edit` did not re-read as intended.

use std::ops::Range;
use std::path::Path;

use super::RoutingError;
use super::verify::check_edit;
use super::{RoutedEntry, Routing, serve_prefix};
use crate::clients::{FileSpec, Format, Loaded, Spans};
use crate::ids::sha256_hex;
use crate::limits;

/// What `init` would do to one file.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) before: String,
    pub(crate) after: String,
    /// The entries rewritten (group, name).
    pub(crate) routed: Vec<(Vec<String>, String)>,
    /// The connector each rewritten entry runs under (group, name, connector).
    pub(crate) connectors: Vec<(Vec<String>, String, String)>,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The home routed entries must reach, and the user's HOME their client passes on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The absolute home `init` runs with (its `--home`, `HOLDCALL_HOME` or data directory).
    pub(crate) home: &'a str,
    pub(crate) user_home: &'a Path,
}

/// Elements inserted at the front of an existing args array (`open` just past its `[`, `first`
/// where its first element starts): on lines of their own when the array has one element per
/// line.
fn front_insertion(
    text: &str,
    open: usize,
    first: Option<usize>,
    items: &[String],
) -> (Range<usize>, String) {
    let ws = first.and_then(|f| text.get(open..f)).unwrap_or("");
    match first {
        Some(_) if ws.contains('\n') => (open..open, insert_multiline(items, ws)),
        Some(f) => (f..f, format!("{}, ", items.join(", "))),
        None => (open..open, items.join(", ")),
    }
}

/// Plans the rewrite of every unrouted stdio entry with a valid name, of every entry routed
/// through another holdcall (its command becomes `holdcall`, its arguments stay), and of every
/// routed entry without `--home` whose relay would land on another home (it gets `--home`).
/// `None`: nothing to change.
pub(crate) fn plan(
    spec: &FileSpec,
    loaded: &Loaded<RoutedEntry>,
    holdcall: &str,
    target: Target,
) -> Result<Option<Plan>, RoutingError> {
    let text = &loaded.text;
    let quote = |s: &str| quoted(spec.format, s);
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut routed = Vec::new();
    let connectors = connectors_for(loaded);
    let mut planned: Vec<(Vec<String>, String, String)> = Vec::new();
    let home_items = [quote("--home"), quote(target.home)];
    for e in &loaded.entries {
        let rehome = e.needs_home(&target);
        if matches!(e.state, Routing::OtherHoldcall(_)) || rehome {
            // Routed through another holdcall: point the command at this binary and keep the
            // arguments (`serve … -- <server>`), so the server is wrapped once, not twice. A
            // relay that would land on another home gets `--home` in front of them.
            let Some(site) = &e.spans else { continue };
            if text.get(site.command.clone()).unwrap_or("").contains('\n') {
                continue;
            }
            if rehome {
                let Some((open, first)) = site.args else {
                    continue;
                };
                edits.push(front_insertion(text, open, first, &home_items));
            }
            edits.push((site.command.clone(), quote(holdcall)));
            routed.push((e.group.clone(), e.name.clone()));
            planned.push((e.group.clone(), e.name.clone(), e.connector.clone()));
            continue;
        }
        if e.state != Routing::NotRouted {
            continue;
        }
        let connector = connectors
            .iter()
            .find(|(g, n, _)| g == &e.group && n == &e.name)
            .map(|(_, _, c)| c.clone())
            .unwrap_or_else(|| e.connector.clone());
        let Some(site) = &e.spans else { continue };
        let Some(args_edit) = route_args_edit(spec, text, site, &connector, target) else {
            continue;
        };
        edits.push((site.command.clone(), quote(holdcall)));
        edits.push(args_edit);
        routed.push((e.group.clone(), e.name.clone()));
        planned.push((e.group.clone(), e.name.clone(), connector));
    }
    if routed.is_empty() {
        return Ok(None);
    }
    let after = apply_edits(text, edits);
    check_edit(spec, loaded, &after, holdcall, target, &planned)?;
    Ok(Some(Plan {
        before: text.clone(),
        after,
        routed,
        connectors: planned,
    }))
}

/// A value written the way the file's format writes a string.
fn quoted(format: Format, s: &str) -> String {
    match format {
        Format::Json(_) => json_string(s),
        Format::Toml => toml_string(s),
    }
}

/// The edit that puts the serve prefix and the original command in front of an unrouted
/// entry's args (or adds an args list holding them). None: a layout not worth guessing about
/// (a multi-line command, a Codex layout not understood), left alone, and the dry run says so.
fn route_args_edit(
    spec: &FileSpec,
    text: &str,
    site: &Spans,
    connector: &str,
    target: Target,
) -> Option<(Range<usize>, String)> {
    let raw_command = text.get(site.command.clone()).unwrap_or("");
    if raw_command.contains('\n') {
        // A multi-line string as a command: not a layout worth guessing about.
        return None;
    }
    let mut new_items: Vec<String> = serve_prefix(spec.client, connector, target.home)
        .iter()
        .map(|a| quoted(spec.format, a))
        .collect();
    new_items.push(raw_command.to_string());
    match site.args {
        // One element per line: the new ones get lines of their own, with the first
        // original element's indentation, right after '['.
        Some((open, first)) => Some(front_insertion(text, open, first, &new_items)),
        None => {
            let items = new_items.join(", ");
            let line_start = text
                .get(..site.command_key)
                .and_then(|b| b.rfind('\n'))
                .map(|i| i + 1)
                .unwrap_or(0);
            let indent = text.get(line_start..site.command_key).unwrap_or("");
            let own_line = indent.chars().all(|c| c == ' ' || c == '\t');
            match spec.format {
                Format::Json(_) => {
                    let ins = if own_line {
                        format!(",\n{indent}\"args\": [{items}]")
                    } else {
                        format!(", \"args\": [{items}]")
                    };
                    Some((site.command.end..site.command.end, ins))
                }
                // A layout not understood: left alone, and the dry run says so.
                Format::Toml => toml_args_insertion(text, site, &items),
            }
        }
    }
}

/// The connector each unrouted entry of a file gets: its `connector_name`, made unique within
/// the file (a sanitised name that meets another entry's gets `-<4 hex>` of its own name).
pub(crate) fn connectors_for(loaded: &Loaded<RoutedEntry>) -> Vec<(Vec<String>, String, String)> {
    let mut taken: Vec<String> = loaded
        .entries
        .iter()
        .filter(|e| {
            matches!(e.state, Routing::Routed | Routing::OtherHoldcall(_)) || e.connector == e.name
        })
        .map(|e| e.connector.clone())
        .collect();
    let mut out = Vec::new();
    for e in &loaded.entries {
        if e.state != Routing::NotRouted {
            continue;
        }
        let mut c = e.connector.clone();
        if c != e.name {
            if taken.contains(&c) {
                let digest = sha256_hex(e.name.as_bytes());
                let base: String = c.chars().take(limits::SCOPE_NAME_CHARS_MAX - 5).collect();
                c = format!("{base}-{}", digest.get(..4).unwrap_or(&digest));
            }
            taken.push(c.clone());
        }
        out.push((e.group.clone(), e.name.clone(), c));
    }
    out
}

/// Elements inserted after `[` in an array laid out one element per line: each new element on
/// its own line with the first original element's indentation.
fn insert_multiline(items: &[String], ws: &str) -> String {
    let indent = ws.rsplit('\n').next().unwrap_or("");
    let mut s = String::new();
    for item in items {
        s.push('\n');
        s.push_str(indent);
        s.push_str(item);
        s.push(',');
    }
    s
}

/// Where and what to insert for a Codex entry that has no `args`: a new `args = […]` line after
/// the command's line in a `[mcp_servers.x]` table (with the same dotted prefix, if any), or
/// `, args = […]` after the command in an inline table. `None` for a layout not understood.
fn toml_args_insertion(text: &str, site: &Spans, items: &str) -> Option<(Range<usize>, String)> {
    let line_start = text
        .get(..site.command.start)
        .and_then(|b| b.rfind('\n'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let before_value = text.get(line_start..site.command.start)?;
    let trimmed = before_value.trim_start();
    let indent = before_value.get(..before_value.len() - trimmed.len())?;
    if trimmed.contains('{') || trimmed.contains(',') {
        return Some((
            site.command.end..site.command.end,
            format!(", args = [{items}]"),
        ));
    }
    // `command = ` or `x.command = ` (a dotted key under [mcp_servers]).
    let key = trimmed.trim_end().strip_suffix('=')?.trim_end();
    let prefix = key.strip_suffix("command")?;
    if !(prefix.is_empty() || prefix.ends_with('.')) {
        return None;
    }
    let line_end = text
        .get(site.command.end..)
        .and_then(|r| r.find('\n'))
        .map(|i| site.command.end + i)
        .unwrap_or(text.len());
    Some((
        line_end..line_end,
        format!("\n{indent}{prefix}args = [{items}]"),
    ))
}

fn apply_edits(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (r, new) in edits {
        out.push_str(text.get(at..r.start).unwrap_or(""));
        out.push_str(&new);
        at = r.end;
    }
    out.push_str(text.get(at..).unwrap_or(""));
    out
}
