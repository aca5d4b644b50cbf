//! `get_agent_flow`: the observed process ancestry and live TCP relationships of agents, as
//! typed nodes and relationships with evidence and collection limits. It does not read
//! capability files and cannot see tool invocations. Read-only.

use serde_json::{Map, Value, json};

use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};

pub(crate) const TOOL: Tool = Tool { def, run };

fn def() -> ToolDef {
    ToolDef {
        name: "get_agent_flow",
        title: "Agent process and connection flow",
        description: "(skeleton)",
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: json!({"type": "object", "properties": {}, "additionalProperties": true}),
        annotations: Annotations::READ_ONLY,
    }
}

fn run(_args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(Outcome::Failed("not built yet".into()))
}
