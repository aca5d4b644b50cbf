//! The tools `list_analyzers` (the built-in analyzer and the catalog's, with their last runs) and
//! `list_insights` (stored findings, filtered). Both only read the data directory.
//!
//! Must never: run, install, add or approve an analyzer; write anything; answer an unreadable
//! catalog or store with an empty list that does not say so.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::holdmap::analyzers::store::{self, Run};
use crate::holdmap::analyzers::{Insight, builtin, catalog};
use crate::holdmap::home;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits;

pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        def: list_analyzers_def,
        run: list_analyzers_run,
    },
    Tool {
        def: list_insights_def,
        run: list_insights_run,
    },
];

const NEVER_RUNS: &str = "list_analyzers and list_insights never run an analyzer: a person runs one with `holdmap analyze NAME` in a terminal, which stores its findings for list_insights.";

use super::store::{PINS, ROUTINGS, SEVERITIES, STATES};

/// `words` or null, as an enum.
fn words_or_null(words: &[&str]) -> Value {
    let mut all: Vec<Value> = words.iter().map(|w| json!(w)).collect();
    all.push(Value::Null);
    json!({"type": ["string", "null"], "enum": all})
}

fn nullable_string(description: &str) -> Value {
    json!({"type": ["string", "null"], "description": description})
}

fn run_schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "description": "An analyzer's last run, as `holdmap analyze` recorded it.",
        "properties": {
            "analyzer": {"type": "string"},
            "started_at_ms": count, "finished_at_ms": count,
            "findings": count, "findings_left_out": count,
            "servers_checked": count, "files_read": count,
            "holdmap_version": {"type": "string"},
            "catalog_version": nullable_string("The catalog's version when it ran; null: no catalog.")
        },
        "required": ["analyzer", "started_at_ms", "finished_at_ms", "findings", "findings_left_out",
            "servers_checked", "files_read", "holdmap_version", "catalog_version"],
        "additionalProperties": false
    })
}

fn run_json(r: &Run) -> Value {
    json!({
        "analyzer": r.analyzer, "started_at_ms": r.started_at_ms, "finished_at_ms": r.finished_at_ms,
        "findings": r.findings, "findings_left_out": r.findings_left_out,
        "servers_checked": r.servers_checked, "files_read": r.files_read,
        "holdmap_version": r.holdmap_version, "catalog_version": r.catalog_version,
    })
}

fn list_analyzers_def() -> ToolDef {
    ToolDef {
        name: "list_analyzers",
        title: "List analyzers",
        description: "Lists holdmap's opt-in analyzers: the built-in `mcp-pins` (every configured MCP \
            server, pinned to a version or not, routed through Holdcall or not; no network) and those \
            in the local catalog file, each with its state (approved, pending, disabled), source, \
            sandbox, declared network hosts and last run, plus the catalog's version, path and any \
            error reading it. Never runs, installs, adds or approves an analyzer: a person runs one \
            with `holdmap analyze NAME`. Read-only.",
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: json!({
            "type": "object",
            "properties": {
                "analyzers": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "title": {"type": "string"},
                        "purpose": {"type": "string"},
                        "built_in": {"type": "boolean"},
                        "state": {"type": "string", "enum": ["approved", "pending", "disabled"]},
                        "runnable": {"type": "boolean", "description": "Whether `holdmap analyze NAME` runs it in this version (only the built-in one does)."},
                        "source": {"type": "string", "description": "Where it comes from."},
                        "sandbox": {"type": "string", "description": "What confines it when it runs."},
                        "network": {"type": "array", "items": {"type": "string"}, "description": "Hosts it declares it talks to; empty: none."},
                        "program": nullable_string("The program its catalog entry would run (its file name only)."),
                        "last_run": {"anyOf": [run_schema(), {"type": "null"}]}
                    },
                    "required": ["name", "title", "purpose", "built_in", "state", "runnable", "source",
                        "sandbox", "network", "program", "last_run"],
                    "additionalProperties": false
                }},
                "catalog": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "exists": {"type": "boolean", "description": "false: no file, the empty catalog."},
                        "format": {"type": "integer"},
                        "catalog_version": nullable_string("null when there is no catalog or it could not be read."),
                        "error": nullable_string("Why the catalog could not be read (file, line, what to do); its analyzers are then not listed.")
                    },
                    "required": ["path", "exists", "format", "catalog_version", "error"],
                    "additionalProperties": false
                },
                "data_dir": {"type": "string"},
                "store_errors": {"type": "array", "items": {"type": "string"}, "description": "Store files that could not be read: their last runs are missing."},
                "note": {"type": "string"}
            },
            "required": ["analyzers", "catalog", "data_dir", "store_errors", "note"],
            "additionalProperties": false
        }),
        annotations: Annotations::READ_ONLY,
    }
}

fn list_analyzers_run(_args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(list_analyzers_at(home::data_dir()))
}

/// `list_analyzers` against a data directory.
pub(super) fn list_analyzers_at(data_dir: Result<PathBuf, String>) -> Outcome {
    let dir = match data_dir {
        Ok(d) => d,
        Err(why) => return Outcome::Failed(why),
    };
    let cat = catalog::read_in(&dir);
    let stored = store::read(&dir);
    let last = |name: &str| {
        stored
            .runs
            .iter()
            .find(|r| r.analyzer == name)
            .map_or(Value::Null, run_json)
    };
    let mut analyzers = vec![json!({
        "name": catalog::BUILTIN,
        "title": "MCP servers: pinned and routed",
        "purpose": format!("Checks every MCP server each supported client is configured with (user files, and the project files of the directory `holdmap analyze` runs in) for a pinned version and for routing through Holdcall. Rules: {}.",
            builtin::RULES.iter().map(|(r, w)| format!("{r} ({w})")).collect::<Vec<_>>().join("; ")),
        "built_in": true,
        "state": "approved",
        "runnable": true,
        "source": format!("built into holdmap {}", env!("CARGO_PKG_VERSION")),
        "sandbox": "runs inside holdmap: reads client config files, no network, no processes",
        "network": [],
        "program": null,
        "last_run": last(catalog::BUILTIN),
    })];
    for e in cat.entries() {
        let program = e.command.as_ref().and_then(|c| c.first()).map(|p| {
            Path::new(p)
                .file_name()
                .map_or_else(|| p.clone(), |n| n.to_string_lossy().into_owned())
        });
        analyzers.push(json!({
            "name": e.name, "title": e.title, "purpose": e.purpose,
            "built_in": false, "state": e.state.label(), "runnable": false,
            "source": e.source, "sandbox": e.sandbox, "network": e.network,
            "program": program, "last_run": last(&e.name),
        }));
    }
    let error = cat.read.as_ref().err().map(ToString::to_string);
    let mut summary = format!(
        "{} analyzer(s): {}.",
        analyzers.len(),
        analyzers
            .iter()
            .map(|a| format!(
                "{} ({}{})",
                a["name"].as_str().unwrap_or(""),
                a["state"].as_str().unwrap_or(""),
                if a["last_run"].is_null() {
                    ", never run"
                } else {
                    ""
                }
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    match &error {
        Some(e) => summary.push_str(&format!(" The catalog could not be read: {e}.")),
        None if !cat.exists() => summary.push_str(&format!(
            " No catalog file at {} (the empty catalog).",
            cat.path.display()
        )),
        None => {}
    }
    for e in &stored.errors {
        summary.push_str(&format!(" {e}."));
    }
    Outcome::Done {
        summary,
        structured: json!({
            "analyzers": analyzers,
            "catalog": {
                "path": cat.path.display().to_string(),
                "exists": cat.exists(),
                "format": catalog::FORMAT,
                "catalog_version": cat.version(),
                "error": error,
            },
            "data_dir": dir.display().to_string(),
            "store_errors": stored.errors,
            "note": NEVER_RUNS,
        }),
    }
}

fn insight_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "Stable across runs for the same subject and rule."},
            "analyzer": {"type": "string"},
            "rule": {"type": "string"},
            "agent": {"type": "string", "description": "The client or agent it concerns (`claude-code`, …)."},
            "severity": {"type": "string", "enum": SEVERITIES},
            "state": {"type": "string", "enum": STATES},
            "subject": {"type": "string"},
            "title": {"type": "string"},
            "detail": {"type": "string"},
            "action": nullable_string("What to do about it."),
            "found_at_ms": {"type": "integer", "minimum": 0},
            "source": nullable_string("The config file it is about."),
            "alias": nullable_string("The MCP server's name in that file."),
            "package": nullable_string("The package or image it runs, without a version."),
            "pin": words_or_null(PINS),
            "routing": words_or_null(ROUTINGS)
        },
        "required": ["id", "analyzer", "rule", "agent", "severity", "state", "subject", "title",
            "detail", "action", "found_at_ms", "source", "alias", "package", "pin", "routing"],
        "additionalProperties": false
    })
}

fn insight_json(i: &Insight) -> Value {
    json!({
        "id": i.id, "analyzer": i.analyzer, "rule": i.rule, "agent": i.agent,
        "severity": i.severity, "state": i.state, "subject": i.subject, "title": i.title,
        "detail": i.detail, "action": i.action, "found_at_ms": i.found_at_ms,
        "source": i.source, "alias": i.alias, "package": i.package, "pin": i.pin,
        "routing": i.routing,
    })
}

fn list_insights_def() -> ToolDef {
    ToolDef {
        name: "list_insights",
        title: "List stored analyzer findings",
        description: "Lists the findings approved analyzers stored about agents' MCP packages and \
            skills (the built-in `mcp-pins`: unpinned or not-routed MCP servers), newest run first, \
            filtered by analyzer, agent (client id such as `claude-code`), severity or state, with \
            each analyzer's last run. Never runs an analyzer: findings are as fresh as the last \
            `holdmap analyze NAME` a person ran. Read-only.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "analyzer": {"type": "string", "maxLength": 64, "description": "Only this analyzer's findings (`mcp-pins`)."},
                "agent": {"type": "string", "maxLength": 64, "description": "Only findings about this client or agent (`claude-code`, `cursor`, …)."},
                "severity": {"type": "string", "enum": SEVERITIES, "description": "Only findings of this severity."},
                "state": {"type": "string", "enum": STATES, "description": "Only findings in this state."},
                "limit": {"type": "integer", "minimum": 1, "maximum": limits::HOLDMAP_INSIGHTS_LIST_MAX,
                    "default": limits::HOLDMAP_INSIGHTS_LIST_DEFAULT, "description": "Most findings to return; the rest are counted in `more`."}
            },
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "insights": {"type": "array", "items": insight_schema()},
                "matched": {"type": "integer", "minimum": 0, "description": "Findings that match the filters."},
                "more": {"type": "integer", "minimum": 0, "description": "Matching findings not returned (raise `limit`)."},
                "runs": {"type": "array", "items": run_schema(), "description": "Each analyzer's last run, newest first."},
                "errors": {"type": "array", "items": {"type": "string"}, "description": "Store files that could not be read: their findings are missing from `insights`."},
                "data_dir": {"type": "string"},
                "note": {"type": "string"}
            },
            "required": ["insights", "matched", "more", "runs", "errors", "data_dir", "note"],
            "additionalProperties": false
        }),
        annotations: Annotations::READ_ONLY,
    }
}

fn list_insights_run(args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(list_insights_at(home::data_dir(), args))
}

/// `list_insights` against a data directory.
pub(super) fn list_insights_at(
    data_dir: Result<PathBuf, String>,
    args: &Map<String, Value>,
) -> Outcome {
    let dir = match data_dir {
        Ok(d) => d,
        Err(why) => return Outcome::Failed(why),
    };
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(limits::HOLDMAP_INSIGHTS_LIST_DEFAULT)
        .min(limits::HOLDMAP_INSIGHTS_LIST_MAX);
    let stored = store::read(&dir);
    let matching: Vec<&Insight> = stored
        .insights
        .iter()
        .filter(|i| text("analyzer").is_none_or(|a| i.analyzer == a))
        .filter(|i| text("agent").is_none_or(|a| i.agent == a))
        .filter(|i| text("severity").is_none_or(|s| i.severity == s))
        .filter(|i| text("state").is_none_or(|s| i.state == s))
        .collect();
    let shown: Vec<Value> = matching
        .iter()
        .take(limit)
        .map(|i| insight_json(i))
        .collect();
    let more = matching.len().saturating_sub(shown.len());
    let mut summary = format!("{} finding(s) match", matching.len());
    if more > 0 {
        summary.push_str(&format!(
            ", {} shown ({more} more: raise `limit`)",
            shown.len()
        ));
    }
    summary.push('.');
    for i in matching.iter().take(limit) {
        summary.push_str(&format!("\n- [{}] {}: {}", i.severity, i.agent, i.title));
    }
    if stored.runs.is_empty() && stored.errors.is_empty() {
        summary.push_str(&format!(
            "\nNo analyzer has run yet: a person runs `holdmap analyze {}` in a terminal.",
            catalog::BUILTIN
        ));
    }
    for e in &stored.errors {
        summary.push_str(&format!("\nNot read: {e}."));
    }
    Outcome::Done {
        summary,
        structured: json!({
            "insights": shown,
            "matched": matching.len(),
            "more": more,
            "runs": stored.runs.iter().map(run_json).collect::<Vec<_>>(),
            "errors": stored.errors,
            "data_dir": dir.display().to_string(),
            "note": NEVER_RUNS,
        }),
    }
}
