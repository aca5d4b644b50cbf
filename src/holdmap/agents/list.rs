//! `list_agents`: the running agents (`detect`), each with its child tools and likely MCP
//! servers (inferred), folders, ports, TCP connections, CPU, memory and access facts, every fact
//! tagged observed, inferred or unknown; with `include_capabilities`, what its client's config
//! files define (`capabilities`). Read-only.

use serde_json::{Map, Value, json};

use crate::holdmap::agents::model::AgentReport;
use crate::holdmap::model::Snapshot;
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};

pub(crate) const TOOL: Tool = Tool { def, run };

fn def() -> ToolDef {
    ToolDef {
        name: "list_agents",
        title: "List AI coding agents",
        description: "(skeleton)",
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: json!({"type": "object", "properties": {}, "additionalProperties": true}),
        annotations: Annotations::READ_ONLY,
    }
}

fn run(_args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(Outcome::Failed("not built yet".into()))
}

/// Every agent of `snap` as a report; with `capabilities`, each same-account agent's config
/// metadata too. (Skeleton.)
pub(crate) fn reports(_snap: &Snapshot, _capabilities: bool) -> Vec<AgentReport> {
    Vec::new()
}
