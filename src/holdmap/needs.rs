//! `list_needs`: the "needs you" list. Agents exposed beyond loopback, running as root or with
//! wider access, risky settings (approval prompts disabled), MCP servers that are unpinned or
//! not routed through Holdcall, dev servers left behind, and stored analyzer findings; each
//! with a kind, a severity, its evidence, a one-line action and a stable id, and a stop to
//! preview (or the `holdcall init` line) where that is the usual fix. Read-only.
//!
//! Must never: run a stop or an analyzer, or offer a stop preview for a process the stop tools
//! would refuse.

use serde_json::{Map, Value, json};

use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};

pub(crate) const TOOLS: &[Tool] = &[Tool { def, run }];

fn def() -> ToolDef {
    ToolDef {
        name: "list_needs",
        title: "What needs you",
        description: "(skeleton)",
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: json!({"type": "object", "properties": {}, "additionalProperties": true}),
        annotations: Annotations::READ_ONLY,
    }
}

fn run(_args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(Outcome::Failed("not built yet".into()))
}
