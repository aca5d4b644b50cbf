//! `get_agent_flow`: the observed process ancestry and live TCP relationships of agents, as
//! typed nodes and relationships with evidence and collection limits. The graph itself is
//! `graph` (a pure function of a snapshot and the agents `detect` found); this file publishes
//! the tool, its schemas, its JSON and its summary.
//!
//! Must never: read capability files, claim to see tool invocations, resolve a name (no DNS),
//! act on a process, or leave something out past a cap without counting it.

mod graph;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::holdmap::agents::detect;
use crate::holdmap::model::Snapshot;
use crate::holdmap::probe::clean;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits::{HOLDMAP_FLOW_NODES_DEFAULT, HOLDMAP_FLOW_NODES_MAX};

use graph::{Ask, Edge, Flow, Kind, Node, Rel, Select};

pub(crate) const TOOL: Tool = Tool { def, run };

/// What every result says it cannot know, whatever the machine.
const NOTES: &[&str] = &[
    "Tool invocations are not observed; MCP traffic over stdio is invisible to socket tables.",
    "One snapshot of the process table and the TCP socket tables at taken_at_ms: connections \
     opened and closed between snapshots are not seen, and UDP traffic is not followed.",
    "No DNS lookup is made: a remote is an IP address and port; its service hint comes from the \
     port number alone.",
    "Sockets of other accounts' processes cannot be attributed (hidden_sockets): a connection to \
     one shows as a local_service whose holder is unknown.",
    "Capability files are not read here; list_agents with include_capabilities reads them.",
];

fn def() -> ToolDef {
    ToolDef {
        name: "get_agent_flow",
        title: "Agent process and connection flow",
        description: "Observed process ancestry and live TCP relationships for the running AI \
            coding agents, as typed nodes (`agent`, `process`, `listener`, `local_service`, \
            `remote`) and relationships (`spawned`, `owns`, `listens`, `connects`), each with \
            its evidence and the process and socket facts that show it. Filter with `agent` (a \
            product such as `codex`, or `pid:1234` of any process an agent owns). Connections \
            between an agent's own processes are counted, not shown. `limits` says what was \
            left out past `max_nodes`, what could not be seen (other accounts' sockets, \
            unreadable processes) and what cannot be known: tool invocations are not observed, \
            and MCP traffic over stdio is invisible to socket tables. No DNS lookups; it does \
            not inspect capability files. Read-only.",
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "maxLength": 256,
                    "description": "Only this agent: a product id, name or executable name (`claude-code`, `Claude Code`, `codex`), case-insensitive, or `pid:1234` of any process it owns."
                },
                "include_remote": {
                    "type": "boolean",
                    "default": true,
                    "description": "Show connections to other machines as `remote` nodes. false counts them in `limits` instead."
                },
                "max_nodes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": HOLDMAP_FLOW_NODES_MAX,
                    "default": HOLDMAP_FLOW_NODES_DEFAULT,
                    "description": "Most nodes to return (agents first, then their processes, ancestors, listeners, local services, remotes); the rest are counted in `limits.more`."
                }
            },
            "additionalProperties": false,
        }),
        output_schema: output_schema(),
        annotations: Annotations::READ_ONLY,
    }
}

fn run(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let select = match Select::parse(args.get("agent").and_then(Value::as_str)) {
        Ok(s) => s,
        Err(e) => return Reply::Now(Outcome::Failed(e)),
    };
    let ask = Ask {
        select,
        include_remote: args
            .get("include_remote")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        max_nodes: args
            .get("max_nodes")
            .and_then(crate::holdmap::schema::integer)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(HOLDMAP_FLOW_NODES_DEFAULT)
            .clamp(1, HOLDMAP_FLOW_NODES_MAX),
    };
    Reply::Now(match cx.world.observe() {
        Ok(snap) => outcome(&snap, &detect::agents(&snap), &ask),
        Err(e) => Outcome::Failed(format!(
            "holdmap could not read this machine's processes and sockets: {e}"
        )),
    })
}

/// The result for `found` in `snap`.
fn outcome(snap: &Snapshot, found: &[detect::Found], ask: &Ask) -> Outcome {
    let flow = graph::flow(snap, found, ask);
    Outcome::Done {
        summary: summary(snap, &flow, ask),
        structured: to_json(snap, &flow),
    }
}

fn to_json(snap: &Snapshot, flow: &Flow) -> Value {
    let c = &flow.counts;
    json!({
        "agents": flow.agents.iter().map(|&p| graph::agent_id(p)).collect::<Vec<_>>(),
        "nodes": flow.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "relationships": flow.edges.iter().map(edge_json).collect::<Vec<_>>(),
        "limits": {
            "max_nodes": c.max_nodes,
            "max_relationships": crate::limits::HOLDMAP_FLOW_RELATIONSHIPS_MAX,
            "more": {
                "nodes": c.nodes_left_out,
                "relationships": c.relationships_left_out,
                "unreadable_processes": c.unreadable_left_out,
            },
            "internal_links": c.internal_links,
            "remote_links_left_out": c.remote_links_left_out,
            "hidden_sockets": snap.hidden_sockets,
            "unreadable_processes": c.unreadable,
            "notes": NOTES,
            "warnings": snap.warnings.iter().map(|w| clean(w)).collect::<Vec<_>>(),
        },
        "platform": snap.platform,
        "taken_at_ms": snap.taken_at_ms,
    })
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

fn node_json(n: &Node) -> Value {
    let mut out = json!({
        "id": n.id,
        "type": n.kind.label(),
        "evidence": n.evidence.label(),
    });
    let extra = match &n.kind {
        Kind::Agent {
            pid,
            product,
            name,
            processes,
            parent,
        } => json!({
            "pid": pid,
            "product": product,
            "name": name,
            "processes": processes,
            "parent": opt(parent.map(graph::agent_id)),
        }),
        Kind::Process {
            pid,
            ppid,
            name,
            command,
            agent,
            role,
        } => json!({
            "pid": pid,
            "ppid": ppid,
            "name": clean(name),
            "command": command,
            "agent": opt(agent.map(graph::agent_id)),
            "role": role.label(),
        }),
        Kind::Listener {
            protocol,
            address,
            pid,
            exposure,
            inbound,
        } => json!({
            "protocol": protocol.as_str(),
            "address": address.ip().to_string(),
            "port": address.port(),
            "pid": pid,
            "exposure": exposure.as_str(),
            "inbound_connections": inbound,
        }),
        Kind::LocalService {
            address,
            pid,
            name,
            agent,
            hint,
        } => json!({
            "protocol": "tcp",
            "address": address.ip().to_string(),
            "port": address.port(),
            "pid": opt(*pid),
            "name": opt(name.as_deref().map(clean)),
            "agent": opt(agent.map(graph::agent_id)),
            "service_hint": opt(*hint),
        }),
        Kind::Remote { address, hint } => json!({
            "address": address.ip().to_string(),
            "port": address.port(),
            "service_hint": opt(*hint),
        }),
    };
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
    }
    out
}

fn edge_json(e: &Edge) -> Value {
    let f = &e.facts;
    let mut facts = Map::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            facts.insert(k.to_owned(), v);
        }
    };
    put("pid", opt(f.pid));
    put("ppid", opt(f.ppid));
    put("local", opt(f.local.map(|a| a.to_string())));
    put("remote", opt(f.remote.map(|a| a.to_string())));
    put("inode", opt(f.inode));
    put("state", opt(f.state));
    put("connections", opt(f.connections));
    put("both_ends_seen", opt(f.both_ends_seen));
    put("peer_pid", opt(f.peer_pid));
    json!({
        "type": e.rel.label(),
        "from": e.from,
        "to": e.to,
        "evidence": e.evidence.label(),
        "facts": facts,
    })
}

fn evidence_schema() -> Value {
    json!({"type": "string", "enum": ["observed", "inferred", "unknown"], "description": "How it is known."})
}

/// A node of one type: `id`, `type`, `evidence` and `fields`, every one required, nothing
/// else.
fn node_schema(kind: &str, what: &str, fields: Value) -> Value {
    let mut properties = json!({
        "id": {"type": "string", "description": "Stable id: `agent:<pid>`, `process:<pid>`, `listen:<proto>:<addr>:<port>` or `remote:<ip>:<port>`."},
        "type": {"const": kind, "description": what},
        "evidence": evidence_schema(),
    });
    let mut required = vec![json!("id"), json!("type"), json!("evidence")];
    if let (Some(p), Value::Object(f)) = (properties.as_object_mut(), fields) {
        required.extend(f.keys().map(|k| json!(k)));
        p.extend(f);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn output_schema() -> Value {
    let pid = json!({"type": "integer", "minimum": 0});
    let pid_or_null = json!({"type": ["integer", "null"], "minimum": 0, "description": "The process, or null when it could not be seen."});
    let port = json!({"type": "integer", "minimum": 0, "maximum": 65535});
    let hint = json!({"type": ["string", "null"], "description": "A service commonly on this port (`postgres`, `https`): from the number alone, never a DNS name."});
    let agent_ref = json!({"type": ["string", "null"], "description": "The agent (`agent:<pid>`) that owns it, if any."});
    let address = json!({"type": "string", "description": "An IP address, never a host name."});
    let count = json!({"type": "integer", "minimum": 0});
    let nodes = json!({"anyOf": [
        node_schema("agent", "A running agent (one per agent found).", json!({
            "pid": pid, "product": {"type": "string", "description": "The product's id (`claude-code`)."},
            "name": {"type": "string", "description": "The product's name (`Claude Code`)."}, "processes": count,
            "parent": {"type": ["string", "null"], "description": "The agent it runs inside, when nested."},
        })),
        node_schema("process", "A process: an agent's own, a helper or tool it owns, or an ancestor above it.", json!({
            "pid": pid, "ppid": pid, "name": {"type": "string"},
            "command": {"type": "string", "description": "Its command line, redacted and shortened."},
            "agent": agent_ref,
            "role": {"type": "string", "enum": ["agent", "member", "ancestor"]},
        })),
        node_schema("listener", "A socket one of the agent's processes listens on (TCP) or has bound (UDP).", json!({
            "protocol": {"type": "string", "enum": ["tcp", "udp"]}, "address": address, "port": port, "pid": pid,
            "exposure": {"type": "string", "enum": ["loopback", "all_interfaces", "specific"]},
            "inbound_connections": {"type": "integer", "minimum": 0, "description": "Accepted connections open now whose client is not a process of a returned agent."},
        })),
        node_schema("local_service", "A listener on this machine of a process the agent does not own, that one of its processes is connected to.", json!({
            "protocol": {"const": "tcp"}, "address": address, "port": port, "pid": pid_or_null,
            "name": {"type": ["string", "null"]}, "agent": agent_ref, "service_hint": hint,
        })),
        node_schema("remote", "An endpoint on another machine one of the agent's processes is connected to.", json!({
            "address": address, "port": port, "service_hint": hint,
        })),
    ]});
    let facts = json!({
        "type": "object",
        "description": "The process and socket facts that show the relationship.",
        "properties": {
            "pid": pid, "ppid": pid,
            "local": {"type": "string", "description": "This side's address:port."},
            "remote": {"type": "string", "description": "The other side's address:port."},
            "inode": count,
            "state": {"type": "string", "enum": ["listen", "bound", "established"]},
            "connections": {"type": "integer", "minimum": 1, "description": "Open connections this relationship stands for."},
            "both_ends_seen": {"type": "boolean", "description": "Whether the other end's socket was in the snapshot too."},
            "peer_pid": pid,
        },
        "additionalProperties": false,
    });
    json!({
        "type": "object",
        "properties": {
            "agents": {"type": "array", "items": {"type": "string"}, "description": "The agents shown (`agent:<pid>`)."},
            "nodes": {"type": "array", "items": nodes},
            "relationships": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["spawned", "owns", "listens", "connects"], "description": "spawned: parent to child (ppid); owns: agent to member process; listens: process to listener; connects: process to local_service, listener or remote (an ESTABLISHED TCP connection)."},
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "evidence": evidence_schema(),
                    "facts": facts,
                },
                "required": ["type", "from", "to", "evidence", "facts"],
                "additionalProperties": false,
            }},
            "limits": {
                "type": "object",
                "properties": {
                    "max_nodes": count,
                    "max_relationships": count,
                    "more": {
                        "type": "object",
                        "description": "How many were left out past the caps.",
                        "properties": {"nodes": count, "relationships": count, "unreadable_processes": count},
                        "required": ["nodes", "relationships", "unreadable_processes"],
                        "additionalProperties": false,
                    },
                    "internal_links": {"type": "integer", "minimum": 0, "description": "Connections between two processes of the same agent: counted, not shown."},
                    "remote_links_left_out": {"type": "integer", "minimum": 0, "description": "Connections to other machines left out by include_remote: false."},
                    "hidden_sockets": {"type": "integer", "minimum": 0, "description": "Sockets of processes holdmap cannot see (other accounts)."},
                    "unreadable_processes": {"type": "array", "items": pid, "description": "Processes of the shown agents whose command line or working folder could not be read."},
                    "notes": {"type": "array", "items": {"type": "string"}, "description": "What this tool cannot know."},
                    "warnings": {"type": "array", "items": {"type": "string"}, "description": "What the scan could not see or read."},
                },
                "required": ["max_nodes", "max_relationships", "more", "internal_links", "remote_links_left_out", "hidden_sockets", "unreadable_processes", "notes", "warnings"],
                "additionalProperties": false,
            },
            "platform": {"type": "string", "description": "The system scanned."},
            "taken_at_ms": {"type": "integer", "minimum": 0, "description": "When the snapshot was taken (Unix epoch, milliseconds)."},
        },
        "required": ["agents", "nodes", "relationships", "limits", "platform", "taken_at_ms"],
        "additionalProperties": false,
    })
}

/// How a node reads in the summary: `postgres pid 300 at 127.0.0.1:5432 (postgres)`.
fn node_words(n: &Node) -> String {
    match &n.kind {
        Kind::Agent { name, pid, .. } => format!("{name} (pid {pid})"),
        Kind::Process { name, pid, .. } => format!("{} pid {pid}", clean(name)),
        Kind::Listener {
            protocol,
            address,
            exposure,
            ..
        } => format!("{address}/{} ({})", protocol.as_str(), exposure.as_str()),
        Kind::LocalService {
            address,
            pid,
            name,
            hint,
            ..
        } => {
            let who = match (name, pid) {
                (Some(n), Some(p)) => format!("{} pid {p}", clean(n)),
                _ => "a process holdmap cannot see".to_owned(),
            };
            let hint = hint.map(|h| format!(", likely {h}")).unwrap_or_default();
            format!("local service {address} held by {who}{hint}")
        }
        Kind::Remote { address, hint } => {
            let hint = hint.map(|h| format!(" (likely {h})")).unwrap_or_default();
            format!("remote {address}{hint}")
        }
    }
}

fn summary(snap: &Snapshot, flow: &Flow, ask: &Ask) -> String {
    let mut out = match (flow.agents.len(), &ask.select) {
        (0, Select::All) => "No running agent found.".to_owned(),
        (0, Select::Pid(p)) => format!(
            "No running agent owns pid {p}. Call list_agents to see the agents and their pids."
        ),
        (0, Select::Product(_)) => {
            "No running agent matches `agent`. Call list_agents to see the agents.".to_owned()
        }
        (n, _) => format!(
            "{n} agent(s), {} node(s), {} relationship(s), as observed at {}:",
            flow.nodes.len(),
            flow.edges.len(),
            snap.taken_at_ms
        ),
    };
    let by_id = |id: &str| flow.nodes.iter().find(|n| n.id == id);
    for n in flow
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, Kind::Agent { .. }))
    {
        let members = flow
            .edges
            .iter()
            .filter(|e| e.rel == Rel::Owns && e.from == n.id)
            .count();
        let _ = write!(out, "\n{}: {members} process(es)", node_words(n));
    }
    for e in flow
        .edges
        .iter()
        .filter(|e| matches!(e.rel, Rel::Listens | Rel::Connects))
    {
        let (Some(from), Some(to)) = (by_id(&e.from), by_id(&e.to)) else {
            continue;
        };
        let times = e
            .facts
            .connections
            .filter(|&c| c > 1)
            .map(|c| format!(" ({c} connections)"))
            .unwrap_or_default();
        let _ = write!(
            out,
            "\n{} {} {}{times}",
            node_words(from),
            if e.rel == Rel::Listens {
                "listens on"
            } else {
                "connects to"
            },
            node_words(to)
        );
    }
    let c = &flow.counts;
    if c.nodes_left_out > 0 || c.relationships_left_out > 0 {
        let _ = write!(
            out,
            "\nLeft out past the caps: {} node(s), {} relationship(s); narrow with `agent` or raise `max_nodes`.",
            c.nodes_left_out, c.relationships_left_out
        );
    }
    if c.internal_links > 0 {
        let _ = write!(
            out,
            "\n{} connection(s) between an agent's own processes are counted, not shown.",
            c.internal_links
        );
    }
    if c.remote_links_left_out > 0 {
        let _ = write!(
            out,
            "\n{} connection(s) to other machines left out (include_remote: false).",
            c.remote_links_left_out
        );
    }
    if !c.unreadable.is_empty() {
        let _ = write!(
            out,
            "\nCould not read the command line or folder of {} process(es).",
            c.unreadable.len() + c.unreadable_left_out
        );
    }
    // The collection usually words its own warning about hidden sockets; one line either way.
    if snap.hidden_sockets > 0 && !snap.warnings.iter().any(|w| w.contains("hidden_sockets")) {
        let _ = write!(
            out,
            "\n{} socket(s) belong to processes holdmap cannot see; connections to them may be missing.",
            snap.hidden_sockets
        );
    }
    for w in &snap.warnings {
        let _ = write!(out, "\nWarnings: {}", clean(w));
    }
    out.push_str("\nLimits: ");
    out.push_str(NOTES.first().copied().unwrap_or_default());
    out.push_str(" No DNS lookups are made.");
    out
}
