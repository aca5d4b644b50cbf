//! `list_needs`: the "needs you" list. Agents exposed beyond loopback, running as root or with
//! wider access, risky settings (approval prompts disabled), MCP servers that are unpinned or
//! not routed through Holdcall, dev servers left behind, and stored analyzer findings; each
//! with a kind, a severity, its evidence, a one-line action and a stable id, and a stop to
//! preview (or the `holdcall init` line) where that is the usual fix. Read-only. The rules are
//! in `rules` (a pure function of the snapshot, the agents' reports and the findings); this file
//! gathers those inputs, says what was not looked at, and shapes the result.
//!
//! Must never: run a stop or an analyzer, or offer a stop preview for a process the stop tools
//! would refuse.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::holdmap::agents::model::AgentReport;
use crate::holdmap::analyzers::Insight;
use crate::holdmap::model::Snapshot;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits::HOLDMAP_NEEDS_LISTED_MAX;

mod rules;
pub(crate) mod servers;
#[cfg(test)]
mod tests;

pub(crate) use rules::{Kind, Need, Severity, needs};

pub(crate) const TOOLS: &[Tool] = &[Tool { def, run }];

fn def() -> ToolDef {
    ToolDef {
        name: "list_needs",
        title: "What needs you",
        description: "The \"needs you\" list: agents running as root, with approval prompts or \
            the sandbox turned off, or listening beyond loopback; risky settings in their \
            config files; MCP servers they are configured with that are not routed through \
            Holdcall or not pinned to an exact version; dev servers left behind (no agent or \
            terminal above them any more) or reachable from other machines; and open findings \
            of approved analyzers. Each item has a stable id, a kind, a severity, its evidence \
            (observed, inferred, unknown), a one-line action and, where that is the usual fix, \
            `preview`: the exact arguments of a dry-run stop_port call (offered only when \
            stop_port would permit it; it still needs the user's confirmation to execute), or \
            `holdcall_init`: the `holdcall init` line that routes the server, and the \
            `--write` line that applies it. Configured servers are definitions, not proof of \
            use. Read `limits` before treating a short list as complete. Read-only: nothing is \
            stopped, written or run.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "min_severity": {
                    "type": "string",
                    "enum": ["info", "low", "medium", "high"],
                    "default": "info",
                    "description": "Only needs of this severity or higher."
                },
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": kind_labels()},
                    "description": "Only needs of these kinds."
                }
            },
            "additionalProperties": false,
        }),
        output_schema: output_schema(),
        annotations: Annotations::READ_ONLY,
    }
}

fn kind_labels() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.label()).collect()
}

fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

fn output_schema() -> Value {
    let string = json!({"type": "string"});
    let port = json!({"type": "integer", "minimum": 1, "maximum": 65535});
    let subject = json!({
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["agent", "server", "setting", "port", "insight", "collection"]},
            "text": string,
            "agent": nullable(string.clone()),
            "pid": nullable(json!({"type": "integer", "minimum": 0})),
            "port": nullable(port.clone()),
            "protocol": nullable(json!({"type": "string", "enum": ["tcp", "udp"]})),
            "client": nullable(string.clone()),
            "alias": nullable(string.clone()),
            "scope": nullable(string.clone()),
            "source": nullable(string.clone()),
        },
        "required": ["type", "text", "agent", "pid", "port", "protocol", "client", "alias", "scope", "source"],
        "additionalProperties": false,
    });
    let preview = json!({
        "type": "object",
        "description": "The arguments of a tools/call that previews the stop (dry run): it returns a plan and a confirmation_id, and stops nothing.",
        "properties": {
            "name": {"type": "string", "enum": ["stop_port"]},
            "arguments": {
                "type": "object",
                "properties": {
                    "port": port,
                    "dry_run": {"type": "boolean", "enum": [true]},
                },
                "required": ["port", "dry_run"],
                "additionalProperties": false,
            },
        },
        "required": ["name", "arguments"],
        "additionalProperties": false,
    });
    let init = json!({
        "type": "object",
        "properties": {
            "directory": nullable(string.clone()),
            "preview": string,
            "write": string,
        },
        "required": ["directory", "preview", "write"],
        "additionalProperties": false,
    });
    let need = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string", "enum": kind_labels()},
            "severity": {"type": "string", "enum": ["info", "low", "medium", "high"]},
            "evidence": {"type": "string", "enum": ["observed", "inferred", "unknown"]},
            "subject": subject,
            "agents": {"type": "array", "items": string},
            "summary": string,
            "action": string,
            "preview": nullable(preview),
            "holdcall_init": nullable(init),
        },
        "required": ["id", "kind", "severity", "evidence", "subject", "agents", "summary", "action", "preview", "holdcall_init"],
        "additionalProperties": false,
    });
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "properties": {
            "needs": {"type": "array", "items": need},
            "counts": {
                "type": "object",
                "properties": {"high": count, "medium": count, "low": count, "info": count},
                "required": ["high", "medium", "low", "info"],
                "additionalProperties": false,
            },
            "omitted": {
                "type": "integer",
                "minimum": 0,
                "description": "Needs left out by min_severity, kinds or the listing cap (see limits)."
            },
            "limits": {
                "type": "array",
                "items": string,
                "description": "What was not looked at or could not be known."
            },
            "platform": string,
            "taken_at_ms": {"type": "integer", "minimum": 0},
        },
        "required": ["needs", "counts", "omitted", "limits", "platform", "taken_at_ms"],
        "additionalProperties": false,
    })
}

/// The filters of one call.
#[derive(Debug, Default)]
struct Filter {
    min: Option<Severity>,
    kinds: Option<Vec<Kind>>,
}

impl Filter {
    fn from_args(args: &Map<String, Value>) -> Filter {
        Filter {
            min: args
                .get("min_severity")
                .and_then(Value::as_str)
                .and_then(Severity::parse),
            kinds: args.get("kinds").and_then(Value::as_array).map(|ks| {
                ks.iter()
                    .filter_map(Value::as_str)
                    .filter_map(Kind::parse)
                    .collect()
            }),
        }
    }

    fn keeps(&self, n: &Need) -> bool {
        self.min.is_none_or(|m| n.severity >= m)
            && self.kinds.as_ref().is_none_or(|ks| ks.contains(&n.kind))
    }
}

fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let filter = Filter::from_args(args);
    let snap = match cx.world.observe() {
        Ok(s) => s,
        Err(e) => {
            return Reply::Now(Outcome::Failed(format!(
                "holdmap could not read this machine: {e}. Nothing is listed; try again."
            )));
        }
    };
    let reports = crate::holdmap::agents::list::reports(&snap, true);
    let insights = crate::holdmap::analyzers::stored_insights();
    Reply::Now(list(&snap, &reports, insights, &filter))
}

/// The needs and what was not looked at, from the inputs `run` gathered.
pub(crate) struct Listing {
    pub(crate) needs: Vec<Need>,
    pub(crate) limits: Vec<String>,
}

/// [`needs`] plus the `incomplete` needs and the limits: what the collection did not see.
pub(crate) fn listing(
    snap: &Snapshot,
    reports: &[AgentReport],
    insights: Result<Vec<Insight>, String>,
) -> Listing {
    let (mut all, insights_error) = match insights {
        Ok(found) => (needs(snap, reports, &found), None),
        Err(e) => (needs(snap, reports, &[]), Some(e)),
    };
    let mut limits = vec![
        "Other accounts' agents and config files are not read: their settings and MCP servers \
         are not listed, and their dev servers are never offered a stop."
            .to_owned(),
        "Only the MCP servers and settings of agents running now are listed; a client that is \
         not running is not looked at (the built-in analyzer checks every configured server)."
            .to_owned(),
        "Configured MCP servers are definitions: they do not prove the agent loaded or used \
         them."
            .to_owned(),
    ];
    // The collection usually words its own warning about hidden sockets: one need either way.
    let worded = snap.warnings.iter().any(|w| w.contains("hidden_sockets"));
    if snap.hidden_sockets > 0 && !worded {
        let line = format!(
            "{} socket(s) are held by processes holdmap cannot see: a dev server among them is \
             not listed",
            snap.hidden_sockets
        );
        limits.push(line.clone());
        all.push(rules::incomplete(
            "hidden_sockets",
            line,
            "Run holdmap as the account that owns them to see them; holdmap never stops them"
                .to_owned(),
        ));
    }
    if !snap.warnings.is_empty() {
        let line = format!(
            "The scan was partial: {}",
            snap.warnings
                .iter()
                .map(|w| crate::text::visible(w))
                .collect::<Vec<_>>()
                .join("; ")
        );
        limits.push(line.clone());
        all.push(rules::incomplete(
            "scan_warnings",
            line,
            "Check these warnings before treating the list as complete".to_owned(),
        ));
    }
    if let Some(e) = insights_error {
        let line = format!("Stored analyzer findings could not be read: {e}");
        limits.push(line.clone());
        all.push(rules::incomplete(
            "insights",
            line,
            "Check holdmap's data directory; list_analyzers shows the analyzers' state".to_owned(),
        ));
    }
    let unread: Vec<&AgentReport> = reports
        .iter()
        .filter(|r| r.capabilities.is_none())
        .collect();
    if !unread.is_empty() {
        let line = format!(
            "Settings and MCP servers were not read for {} (another account's, or a client \
             holdmap reads no files of)",
            unread
                .iter()
                .map(|r| format!("{} ({})", r.name, r.id))
                .collect::<Vec<_>>()
                .join(", ")
        );
        limits.push(line.clone());
        all.push(rules::incomplete(
            "capabilities",
            line,
            "Look at those agents' settings yourself".to_owned(),
        ));
    }
    for r in reports {
        for l in r.capabilities.iter().flat_map(|c| c.limits.iter()) {
            limits.push(crate::text::visible(&format!("{} ({}): {l}", r.name, r.id)));
        }
    }
    limits.dedup();
    rules::sort(&mut all);
    Listing { needs: all, limits }
}

fn list(
    snap: &Snapshot,
    reports: &[AgentReport],
    insights: Result<Vec<Insight>, String>,
    filter: &Filter,
) -> Outcome {
    let Listing {
        needs: all,
        mut limits,
    } = listing(snap, reports, insights);
    let total = all.len();
    let mut kept: Vec<Need> = all.into_iter().filter(|n| filter.keeps(n)).collect();
    // Counted before the cap: the counts say how many match, the list how many are shown.
    let counts = rules::counts(&kept);
    if kept.len() > HOLDMAP_NEEDS_LISTED_MAX {
        limits.push(format!(
            "Only the {HOLDMAP_NEEDS_LISTED_MAX} most severe of {} needs are listed; narrow \
             the list with min_severity or kinds",
            kept.len()
        ));
        kept.truncate(HOLDMAP_NEEDS_LISTED_MAX);
    }
    let omitted = total.saturating_sub(kept.len());
    let structured = json!({
        "needs": kept.iter().map(to_json).collect::<Vec<_>>(),
        "counts": counts,
        "omitted": omitted,
        "limits": limits,
        "platform": snap.platform,
        "taken_at_ms": snap.taken_at_ms,
    });
    Outcome::Done {
        summary: summary(&kept, &counts, omitted, &limits),
        structured,
    }
}

/// The arguments of the dry-run `stop_port` call a need offers.
pub(crate) fn preview_json(port: u16) -> Value {
    json!({"name": "stop_port", "arguments": {"port": port, "dry_run": true}})
}

pub(crate) fn to_json(n: &Need) -> Value {
    let s = &n.subject;
    json!({
        "id": n.id,
        "kind": n.kind.label(),
        "severity": n.severity.label(),
        "evidence": n.evidence.label(),
        "subject": {
            "type": s.what,
            "text": crate::text::visible(&s.text),
            "agent": s.agent,
            "pid": s.pid,
            "port": s.port,
            "protocol": s.protocol,
            "client": s.client,
            "alias": s.alias.as_deref().map(crate::text::visible),
            "scope": s.scope.as_deref().map(crate::text::visible),
            "source": s.source.as_ref().map(|p| crate::text::visible(&p.display().to_string())),
        },
        "agents": n.agents,
        "summary": n.summary,
        "action": n.action,
        "preview": n.preview_port.map(preview_json),
        "holdcall_init": n.holdcall_init.as_ref().map(|i| json!({
            "directory": i.directory.as_ref().map(|d| crate::text::visible(&d.display().to_string())),
            "preview": i.preview,
            "write": i.write,
        })),
    })
}

fn summary(
    kept: &[Need],
    counts: &std::collections::BTreeMap<&'static str, usize>,
    omitted: usize,
    limits: &[String],
) -> String {
    let mut out = if kept.is_empty() {
        "Nothing needs you in what holdmap could see.".to_owned()
    } else {
        format!(
            "{} item(s) need you ({}):",
            kept.len(),
            Severity::ALL
                .iter()
                .filter_map(|s| {
                    let n = counts.get(s.label()).copied().unwrap_or(0);
                    (n > 0).then(|| format!("{n} {}", s.label()))
                })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    for n in kept {
        let _ = write!(
            out,
            "\n[{}] {} ({}, {}): {}\n    Do: {}",
            n.severity.label(),
            n.summary,
            n.kind.label(),
            n.evidence.label(),
            n.id,
            n.action
        );
        if let Some(port) = n.preview_port {
            let _ = write!(
                out,
                "\n    Preview the stop: tools/call {}",
                preview_json(port)
            );
        }
        if let Some(i) = &n.holdcall_init {
            let _ = write!(out, "\n    Route it: {}  then: {}", i.preview, i.write);
        }
    }
    if omitted > 0 {
        let _ = write!(out, "\n{omitted} more left out by the filters or the cap.");
    }
    for l in limits {
        let _ = write!(out, "\nLimit: {l}");
    }
    out.push_str("\nNothing was stopped, written or run.");
    out
}
