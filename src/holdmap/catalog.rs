//! Every tool the server has, in the order `tools/list` shows them (the port tools, topology,
//! then the stops; each module lists its own in its `TOOLS`), and the server's `instructions`.
//! The published schemas are the enforced ones: `schema::validate` reads the same `ToolDef`.
//!
//! Must never: hold a schema of its own beside a tool's `ToolDef` (one source for published and
//! enforced); name in its instructions a tool the catalog does not have.

use std::sync::OnceLock;

use crate::holdmap::tool::{Tool, ToolDef};

/// The paragraph `initialize` (and `server/discover`) gives the client: which tool to choose,
/// how a stop goes, and what a result does not prove. The numbers are the `HOLDMAP_*` limits
/// (a test holds them together).
pub(crate) const INSTRUCTIONS: &str = "holdmap shows what is listening on the ports of the machine \
it runs on, and stops dev servers only after a preview the user has seen. To see what is \
listening, call `list_ports` (filters such as `vite`, `:3000` or `3000-3999`) and read its \
`warnings` and `hidden_sockets` before you treat an empty list as complete; to learn why one port \
is busy and how to free it, call `explain_port`, or `inspect_port` for the structured inspection \
alone; to pick a port for a new server, call `find_free_port` (optionally `near` a port), and \
after the server is launched call `wait_for_port`; to see which local services talk to which, \
call `get_topology` (`all: true` adds system and application services) and `plan_cluster_stop` \
for a dependency-ordered plan that never executes. To see which AI coding agents run here and \
what they started, call `list_agents` (`include_capabilities: true` adds what their MCP config \
files define: names and metadata, never secret values), `get_agent_flow` for their process and \
connection relationships, and `list_needs` for what needs the user's attention; \
`list_analyzers` and `list_insights` only read registered analyzers and their stored findings \
(an analyzer runs only when a person types `holdmap analyze NAME`). `stop_port` and `stop_agent_ports` preview \
first: `dry_run` defaults to true, and a permitted preview returns a `confirmation_id` that works \
once, for 300 s, in this session only; re-initialising the session invalidates every handle, at \
most 32 previews are kept (a new one evicts the oldest), and one preview covers at most 128 ports \
and 1 MiB of plan. Show every plan to the user and get their authorization before you execute it \
with `dry_run: false`, the returned `confirmation_id` and the same target and options: the handle \
ties the execution to the preview, it is not the user's approval. Protected processes and other \
accounts' processes are always refused. A free port is a candidate, not a reservation, and a port \
that accepts TCP connections is not proof that the service behind it is healthy. Each request \
line is limited to 1 MiB and a legacy batch to 64 messages. The holdmap://guide resource explains \
each workflow in more detail.";

fn tools() -> Vec<Tool> {
    let mut out = Vec::new();
    out.extend_from_slice(crate::holdmap::ports::TOOLS);
    out.extend_from_slice(crate::holdmap::topology::TOOLS);
    out.extend_from_slice(crate::holdmap::agents::TOOLS);
    out.extend_from_slice(crate::holdmap::needs::TOOLS);
    out.extend_from_slice(crate::holdmap::analyzers::TOOLS);
    out.extend_from_slice(crate::holdmap::stop::TOOLS);
    out
}

/// Each tool with its definition, built once.
pub(crate) fn catalog() -> &'static [(ToolDef, Tool)] {
    static CATALOG: OnceLock<Vec<(ToolDef, Tool)>> = OnceLock::new();
    CATALOG.get_or_init(|| tools().into_iter().map(|t| ((t.def)(), t)).collect())
}

/// The tool called `name`.
#[cfg(test)]
pub(crate) fn find(name: &str) -> Option<&'static (ToolDef, Tool)> {
    catalog().iter().find(|(def, _)| def.name == name)
}

/// Fails the calling test unless `structured` matches the output schema `tool` publishes: every
/// tool's tests hold its results to the contract `tools/list` shows.
#[cfg(test)]
pub(crate) fn check_output(tool: &str, structured: &serde_json::Value) {
    let Some((def, _)) = find(tool) else {
        panic!("no tool `{tool}` in the catalog");
    };
    if let Err(message) =
        crate::holdmap::schema::validate(&def.output_schema, structured, "structuredContent")
    {
        panic!("`{tool}`'s result does not match its output schema: {message}\n{structured:#}");
    }
}

/// The tools of issues 14 and 15 in catalog order, the names a prompt, the guide or the
/// instructions may use.
#[cfg(test)]
pub(crate) const ISSUE_TOOLS: &[&str] = &[
    "list_ports",
    "explain_port",
    "inspect_port",
    "find_free_port",
    "wait_for_port",
    "get_topology",
    "plan_cluster_stop",
    "list_agents",
    "get_agent_flow",
    "list_needs",
    "list_analyzers",
    "list_insights",
    "stop_port",
    "stop_agent_ports",
];

/// Snake-case words our texts use that are not tools: arguments, result fields, prompts.
#[cfg(test)]
const NOT_TOOLS: &[&str] = &[
    "dry_run",
    "confirmation_id",
    "confirmation_expires_in_s",
    "allow_non_dev",
    "allow_protected",
    "until_free",
    "timeout_s",
    "hidden_sockets",
    "taken_at_ms",
    "is_dev",
    "dev_only",
    "elapsed_ms",
    "bind_risk",
    "all_interfaces",
    "diagnose_port",
    "prepare_dev_server",
    "inspect_agents",
];

/// Every tool name `text` uses: each word starting with a tool verb (`list_`, `stop_`, …) and
/// each backticked snake_case word that is not a known argument, field or prompt.
#[cfg(test)]
pub(crate) fn named_tools(text: &str) -> Vec<String> {
    const VERBS: &[&str] = &[
        "list_", "explain_", "inspect_", "find_", "wait_", "get_", "plan_", "stop_", "kill_",
        "start_",
    ];
    let snake = |w: &str| {
        w.contains('_')
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let mut out: Vec<String> = Vec::new();
    let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    for word in words {
        if VERBS.iter().any(|v| word.starts_with(v)) && !NOT_TOOLS.contains(&word) {
            out.push(word.to_owned());
        }
    }
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 && snake(span) && !NOT_TOOLS.contains(&span) {
            out.push(span.to_owned());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Fails the calling test when `text` names a tool that is not one of the issue's nine, or one
/// whose module has filled in its `TOOLS` without it. Checked per module, so a branch that has
/// merged only some of the tool modules still passes, and the full catalog is held to it.
#[cfg(test)]
pub(crate) fn check_names_only_known_tools(text: &str, place: &str) {
    let landed = |name: &str| {
        let module: &[Tool] = match name {
            "get_topology" | "plan_cluster_stop" => crate::holdmap::topology::TOOLS,
            "stop_port" | "stop_agent_ports" => crate::holdmap::stop::TOOLS,
            _ => crate::holdmap::ports::TOOLS,
        };
        !module.is_empty()
    };
    let names = named_tools(text);
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !ISSUE_TOOLS.contains(&n.as_str()) || (landed(n) && find(n).is_none()))
        .collect();
    assert!(
        missing.is_empty(),
        "{place} names tools the server does not have: {missing:?}"
    );
}

#[cfg(test)]
mod tests;
