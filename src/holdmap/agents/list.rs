//! `list_agents`: the running agents (`detect`), each with its child tools and likely MCP
//! servers (inferred), folders, ports, TCP connections, CPU, memory and access facts, every fact
//! tagged observed, inferred or unknown; with `include_capabilities`, what its client's config
//! files define (`capabilities`), for agents of holdmap's own account only. Read-only.
//!
//! Must never: read another account's agent's files; leave out what it cannot know (`limits`
//! says it in every answer); show a command line that has not been through `redact`.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::holdmap::agents::model::{AgentReport, ChildTool, Evidence};
use crate::holdmap::agents::report::{self, Unseen};
use crate::holdmap::agents::{capabilities, catalog, tools};
use crate::holdmap::model::Snapshot;
use crate::holdmap::probe::clean;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits::{
    HOLDMAP_AGENT_FOLDERS_MAX, HOLDMAP_AGENT_LINKS_MAX, HOLDMAP_AGENT_PORTS_MAX,
    HOLDMAP_AGENT_PROCESSES_MAX, HOLDMAP_AGENT_TOOLS_MAX, HOLDMAP_AGENTS_MAX,
};

pub(crate) const TOOL: Tool = Tool { def, run };

/// Said in every answer: what holdmap cannot know about agents.
pub(crate) const ALWAYS_LIMITS: &[&str] = &[
    "Agents are recognised by executable and process tree; an agent holdmap has no entry for, \
     or one running under another account whose executable cannot be read, may be missed.",
    "MCP servers among child tools are inferred from process names and package specs; tool \
     calls are not observed.",
    "Installed or configured definitions do not prove that an agent loaded or used a server.",
    "Chats, transcripts and credentials are never read; settings are read only with \
     include_capabilities, and then only documented ones.",
    "Links are IP addresses and ports only: no DNS lookup is made.",
];

fn def() -> ToolDef {
    ToolDef {
        name: "list_agents",
        title: "List AI coding agents",
        description: "Lists the AI coding agents running on this machine (Claude Code, Codex, \
            Cursor, VS Code with Copilot, Gemini CLI, Windsurf, Aider, Goose, opencode and \
            others), recognised by executable and process tree. For each: its child tools \
            (likely MCP servers are marked inferred; dev servers, shells and commands are \
            observed), working folders and projects, listening ports, established TCP \
            connections, CPU and memory, and access facts (account, root or not, sandbox and \
            approval flags seen on its command line, network exposure), each with its evidence \
            (observed, inferred, unknown). Filter with `agent` (a product such as `claude-code` \
            or `codex`), `pid` (any pid the agent owns), `folder` or `tool`. With \
            `include_capabilities: true` it also reads the MCP configuration files of agents \
            running as holdmap's own account: metadata only, never secret values; definitions \
            do not prove use. Read `limits` for what holdmap cannot know. Read-only.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string", "minLength": 1, "maxLength": 256,
                    "description": "A product id, name or program (`claude-code`, `Claude Code`, `claude`, `codex`, `cursor`), case-insensitive, or `pid:N` for the agent owning pid N."
                },
                "pid": {
                    "type": "integer", "minimum": 1, "maximum": 2147483647,
                    "description": "Only the agent that owns this process (the agent itself or anything it started)."
                },
                "folder": {
                    "type": "string", "minLength": 1, "maxLength": 4096,
                    "description": "Only agents with a working folder (or its project root) at or under this absolute path."
                },
                "tool": {
                    "type": "string", "minLength": 1, "maxLength": 256,
                    "description": "Only agents running a child tool with this name or package (`npx`, `@playwright/mcp`, `server-filesystem`), case-insensitive."
                },
                "include_capabilities": {
                    "type": "boolean", "default": false,
                    "description": "Also read what each agent's MCP configuration files define (agents of holdmap's own account only): metadata only."
                }
            },
            "additionalProperties": false,
        }),
        output_schema: output_schema(),
        annotations: Annotations::READ_ONLY,
    }
}

fn evidence_schema() -> Value {
    json!({"type": "string", "enum": ["observed", "inferred", "unknown"]})
}

fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn object(properties: Value) -> Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn agent_schema() -> Value {
    let s = || json!({"type": "string"});
    let int = || json!({"type": "integer"});
    object(json!({
        "id": s(), "pid": int(), "start_ticks": count(),
        "product": s(), "name": s(), "vendor": s(),
        "kind": {"type": "string", "enum": ["cli", "ide", "desktop", "extension", "host"]},
        "client": nullable(s()),
        "recognised_by": s(), "evidence": evidence_schema(),
        "command": s(), "parent": nullable(s()), "uid": nullable(count()),
        "process_ids": {"type": "array", "items": int()}, "more_processes": count(),
        "tools": {"type": "array", "items": object(json!({
            "pid": int(), "ppid": int(), "name": s(),
            "kind": {"type": "string", "enum": ["mcp_server", "dev_server", "shell", "command"]},
            "evidence": evidence_schema(), "package": nullable(s()), "command": s(),
            "via_holdcall": {"type": "boolean"}
        }))},
        "more_tools": count(),
        "folders": {"type": "array", "items": object(json!({
            "path": s(), "project": nullable(s()), "evidence": evidence_schema()
        }))},
        "more_folders": count(),
        "ports": {"type": "array", "items": object(json!({
            "port": int(), "protocol": {"type": "string", "enum": ["tcp", "udp"]},
            "address": s(), "pid": int(),
            "role": {"type": "string", "enum": ["agent", "dev_server", "service"]},
            "exposed": {"type": "boolean"}, "evidence": evidence_schema()
        }))},
        "more_ports": count(),
        "links": {"type": "array", "items": object(json!({
            "pid": int(), "local": s(), "remote": s(), "peer_pid": nullable(int()),
            "hint": nullable(s()), "evidence": evidence_schema()
        }))},
        "more_links": count(),
        "cpu_seconds": {"type": "number", "minimum": 0},
        "memory_bytes": count(),
        "access": {"type": "array", "items": object(json!({
            "kind": {"type": "string", "enum": ["user", "sandbox", "approvals", "network"]},
            "level": {"type": "string", "enum": ["normal", "elevated", "unknown"]},
            "evidence": evidence_schema(), "detail": s()
        }))},
        "capabilities": nullable(capabilities::output_schema())
    }))
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "agents": {"type": "array", "items": agent_schema()},
            "more_agents": count(),
            "limits": {
                "type": "array", "items": {"type": "string"},
                "description": "What holdmap cannot know or did not read, in words."
            },
            "hidden_sockets": {
                "type": "integer", "minimum": 0,
                "description": "Sockets held by processes holdmap cannot see (other accounts)."
            },
            "warnings": {
                "type": "array", "items": {"type": "string"},
                "description": "What the scan could not see or read."
            },
            "platform": {"type": "string", "description": "The system scanned."},
            "taken_at_ms": {"type": "integer", "minimum": 0}
        },
        "required": ["agents", "more_agents", "limits", "hidden_sockets", "warnings", "platform", "taken_at_ms"],
        "additionalProperties": false,
    })
}

/// The filters of one call.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    pub(crate) agent: Option<String>,
    pub(crate) pid: Option<i32>,
    pub(crate) folder: Option<String>,
    pub(crate) tool: Option<String>,
    pub(crate) include_capabilities: bool,
}

impl Filter {
    pub(crate) fn from_args(args: &Map<String, Value>) -> Result<Filter, String> {
        let text = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let mut f = Filter {
            agent: text("agent"),
            pid: args
                .get("pid")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok()),
            folder: text("folder"),
            tool: text("tool"),
            include_capabilities: args
                .get("include_capabilities")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        if let Some(n) = f.agent.as_deref().and_then(|a| a.strip_prefix("pid:")) {
            let n = n.trim().parse::<i32>().map_err(|_| {
                format!("`agent`: `pid:{n}` is not a pid; write `pid:1234` or a product name")
            })?;
            f.pid = Some(n);
            f.agent = None;
        }
        if let Some(a) = &f.agent
            && !catalog::PRODUCTS.iter().any(|p| catalog::named(p, a))
        {
            let ids: Vec<&str> = catalog::PRODUCTS.iter().map(|p| p.id).collect();
            return Err(format!(
                "`agent`: no agent product is called `{}`; known products: {}",
                clean(a),
                ids.join(", ")
            ));
        }
        if let Some(folder) = &f.folder
            && !Path::new(folder).is_absolute()
        {
            return Err("`folder`: give an absolute path (`/home/me/shop`)".into());
        }
        Ok(f)
    }

    pub(crate) fn keeps(&self, r: &AgentReport) -> bool {
        let product = catalog::by_id(r.product);
        self.agent
            .as_deref()
            .is_none_or(|a| product.is_some_and(|p| catalog::named(p, a)))
            && self.pid.is_none_or(|n| r.process_ids.contains(&n))
            && self.folder.as_deref().is_none_or(|dir| {
                r.folders.iter().any(|f| {
                    f.path.starts_with(dir)
                        || f.project.as_ref().is_some_and(|p| p.starts_with(dir))
                })
            })
            && self
                .tool
                .as_deref()
                .is_none_or(|t| r.tools.iter().any(|c| tools::named(c, t)))
    }
}

fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let filter = match Filter::from_args(args) {
        Ok(f) => f,
        Err(e) => return Reply::Now(Outcome::Failed(e)),
    };
    Reply::Now(match cx.world.observe() {
        Ok(snap) => list(&snap, &filter),
        Err(e) => Outcome::Failed(e),
    })
}

/// Every agent of `snap` as a report; with `capabilities`, each same-account agent's config
/// metadata too. Read by `get_agent_flow`, `list_needs` and the analyzers.
pub(crate) fn reports(snap: &Snapshot, capabilities: bool) -> Vec<AgentReport> {
    let (mut all, _) = report::build(snap);
    if capabilities {
        for r in all.iter_mut().filter(|r| r.uid == Some(snap.me.uid)) {
            r.capabilities = Some(capabilities::of(r, snap));
        }
    }
    all
}

pub(crate) fn list(snap: &Snapshot, filter: &Filter) -> Outcome {
    let (all, unseen) = report::build(snap);
    let mut kept: Vec<AgentReport> = all.into_iter().filter(|r| filter.keeps(r)).collect();
    let mut limits: Vec<String> = ALWAYS_LIMITS.iter().map(|s| (*s).to_owned()).collect();
    if filter.include_capabilities {
        for r in &mut kept {
            if r.uid == Some(snap.me.uid) {
                r.capabilities = Some(capabilities::of(r, snap));
            } else {
                limits.push(format!(
                    "Capabilities of {} were not read: it runs as {}; holdmap reads only its own \
                     account's configuration files.",
                    r.id,
                    r.uid
                        .map_or_else(|| "an unknown account".into(), |u| format!("uid {u}"))
                ));
            }
        }
    } else {
        limits.push(
            "Configuration files were not read (capabilities is null): pass \
             include_capabilities: true to read each agent's MCP servers, permissions and skills."
                .into(),
        );
    }
    limits.extend(unseen_limits(unseen));
    if snap.hidden_sockets > 0 {
        limits.push(format!(
            "{} socket(s) are held by processes holdmap cannot read; their ports and links are \
             not attributed to any agent.",
            snap.hidden_sockets
        ));
    }
    let more_agents = kept.len().saturating_sub(HOLDMAP_AGENTS_MAX);
    kept.truncate(HOLDMAP_AGENTS_MAX);
    let structured = json!({
        "agents": kept.iter().map(|r| to_json(snap, r)).collect::<Vec<_>>(),
        "more_agents": more_agents,
        "limits": limits,
        "hidden_sockets": snap.hidden_sockets,
        "warnings": snap.warnings.iter().map(|w| clean(w)).collect::<Vec<_>>(),
        "platform": snap.platform,
        "taken_at_ms": snap.taken_at_ms,
    });
    Outcome::Done {
        summary: summary(snap, &kept, more_agents, filter),
        structured,
    }
}

fn unseen_limits(u: Unseen) -> Vec<String> {
    let mut out = Vec::new();
    if u.no_command > 0 {
        out.push(format!(
            "{} of the agents' processes had no readable command line.",
            u.no_command
        ));
    }
    if u.no_cwd > 0 {
        out.push(format!(
            "{} of the agents' processes had no readable working folder.",
            u.no_cwd
        ));
    }
    out
}

/// A capped list and how many were left out.
fn capped<T, F: Fn(&T) -> Value>(items: &[T], max: usize, f: F) -> (Vec<Value>, usize) {
    (
        items.iter().take(max).map(f).collect(),
        items.len().saturating_sub(max),
    )
}

fn tool_json(t: &ChildTool) -> Value {
    json!({
        "pid": t.pid, "ppid": t.ppid, "name": t.name, "kind": t.kind.label(),
        "evidence": t.evidence.label(), "package": t.package, "command": t.command,
        "via_holdcall": t.via_holdcall,
    })
}

/// One report as `list_agents` shows it (matches the agent item of its output schema).
pub(crate) fn to_json(snap: &Snapshot, r: &AgentReport) -> Value {
    let signal = snap
        .proc(r.pid)
        .and_then(crate::holdmap::agents::detect::recognise);
    let (recognised_by, evidence) = match signal.map(|(_, s)| s) {
        Some(crate::holdmap::agents::detect::Signal::Argv0) => (
            crate::holdmap::agents::detect::Signal::Argv0.label(),
            Evidence::Inferred,
        ),
        Some(s) => (s.label(), Evidence::Observed),
        None => ("unknown", Evidence::Unknown),
    };
    let (process_ids, more_processes) =
        capped(&r.process_ids, HOLDMAP_AGENT_PROCESSES_MAX, |p| json!(p));
    let (tools, more_tools) = capped(&r.tools, HOLDMAP_AGENT_TOOLS_MAX, tool_json);
    let (folders, more_folders) = capped(&r.folders, HOLDMAP_AGENT_FOLDERS_MAX, |f| {
        json!({
            "path": clean(&f.path.to_string_lossy()),
            "project": f.project.as_ref().map(|p| clean(&p.to_string_lossy())),
            "evidence": f.evidence.label(),
        })
    });
    let (ports, more_ports) = capped(&r.ports, HOLDMAP_AGENT_PORTS_MAX, |p| {
        json!({
            "port": p.port, "protocol": p.protocol.as_str(), "address": p.address,
            "pid": p.pid, "role": p.role.label(), "exposed": p.exposed,
            "evidence": "observed",
        })
    });
    let (links, more_links) = capped(&r.links, HOLDMAP_AGENT_LINKS_MAX, |l| {
        json!({
            "pid": l.pid, "local": l.local, "remote": l.remote, "peer_pid": l.peer_pid,
            "hint": l.hint, "evidence": "observed",
        })
    });
    json!({
        "id": r.id, "pid": r.pid, "start_ticks": r.start_ticks,
        "product": r.product, "name": r.name, "vendor": r.vendor, "kind": r.kind,
        "client": r.client.map(|c| c.id()),
        "recognised_by": recognised_by, "evidence": evidence.label(),
        "command": r.command, "parent": r.parent, "uid": r.uid,
        "process_ids": process_ids, "more_processes": more_processes,
        "tools": tools, "more_tools": more_tools,
        "folders": folders, "more_folders": more_folders,
        "ports": ports, "more_ports": more_ports,
        "links": links, "more_links": more_links,
        "cpu_seconds": r.cpu_seconds, "memory_bytes": r.memory_bytes,
        "access": r.access.iter().map(|a| json!({
            "kind": a.kind, "level": a.level.label(), "evidence": a.evidence.label(),
            "detail": a.detail,
        })).collect::<Vec<_>>(),
        "capabilities": r.capabilities.as_ref().map(capabilities::to_json),
    })
}

fn summary(snap: &Snapshot, kept: &[AgentReport], more: usize, filter: &Filter) -> String {
    let filtered = filter.agent.is_some()
        || filter.pid.is_some()
        || filter.folder.is_some()
        || filter.tool.is_some();
    let mut out = match (kept.len(), filtered) {
        (0, true) => "No running agent matches the filter.".to_owned(),
        (0, false) => "No running AI coding agents found.".to_owned(),
        (1, _) => "1 running agent:".to_owned(),
        (n, _) => format!("{n} running agents:"),
    };
    for r in kept {
        let mcp = r
            .tools
            .iter()
            .filter(|t| t.kind == crate::holdmap::agents::model::ToolKind::McpServer)
            .count();
        let elevated: Vec<&str> = r
            .access
            .iter()
            .filter(|a| a.level == crate::holdmap::agents::model::Level::Elevated)
            .map(|a| a.kind)
            .collect();
        let _ = write!(
            out,
            "\n{}  {}  pid {}  {} tool(s), {} likely MCP server(s) (inferred)",
            r.id,
            r.name,
            r.pid,
            r.tools.len(),
            mcp
        );
        if let Some(f) = r.folders.first() {
            let _ = write!(out, "  in {}", clean(&f.path.to_string_lossy()));
        }
        if !elevated.is_empty() {
            let _ = write!(out, "  elevated: {}", elevated.join(", "));
        }
    }
    if more > 0 {
        let _ = write!(out, "\n… and {more} more (more_agents).");
    }
    for w in &snap.warnings {
        let _ = write!(out, "\nWarnings: {}", clean(w));
    }
    out.push_str(
        "\nInferred MCP servers and configured definitions do not prove use; see limits for \
         what holdmap cannot know.",
    );
    out
}
