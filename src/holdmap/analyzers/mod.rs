//! Opt-in analyzers and their stored findings: the local catalog file under holdmap's data
//! directory (`catalog`), the one built-in analyzer (`builtin`: every configured MCP server,
//! pinned or not, routed through Holdcall or not; no network), the findings store (`store`),
//! the tools `list_analyzers` and `list_insights` (`tools`), and `holdmap analyze NAME`, the
//! only way an analyzer runs: a command a person types.
//!
//! Must never: run, install, add or approve an analyzer from an MCP tool; store a secret value
//! in a finding; treat an unreadable catalog or store as empty without saying so.

use serde_json::Map;
use serde_json::Value;

use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};

/// A stored finding (one line of the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Insight {
    /// Stable: the same subject and rule give the same id on every run.
    pub(crate) id: String,
    pub(crate) analyzer: String,
    /// The agent product or client it concerns (`claude-code`, …).
    pub(crate) agent: String,
    /// `info`, `low`, `medium`, `high`.
    pub(crate) severity: String,
    /// `open`, `acknowledged`, `resolved`.
    pub(crate) state: String,
    /// What it is about (`mcp server github in ~/.claude.json`), and what was found.
    pub(crate) subject: String,
    pub(crate) title: String,
    pub(crate) detail: String,
    /// What to do about it, in one line (a `holdcall init` line, a pinned version to use).
    pub(crate) action: Option<String>,
    /// When the run that found it ended (Unix epoch, milliseconds).
    pub(crate) found_at_ms: u64,
}

/// Every stored finding, newest run first. (Skeleton.)
pub(crate) fn stored_insights() -> Result<Vec<Insight>, String> {
    Ok(Vec::new())
}

/// `holdmap analyze NAME`: runs one approved analyzer and stores its findings; the exit code.
pub(crate) fn analyze_cli(name: &str) -> i32 {
    eprintln!("holdmap analyze {name}: not built yet");
    2
}

pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        def: list_analyzers_def,
        run: not_built,
    },
    Tool {
        def: list_insights_def,
        run: not_built,
    },
];

fn list_analyzers_def() -> ToolDef {
    stub_def("list_analyzers")
}
fn list_insights_def() -> ToolDef {
    stub_def("list_insights")
}
fn stub_def(name: &'static str) -> ToolDef {
    ToolDef {
        name,
        title: name,
        description: "(skeleton)",
        input_schema: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": true}),
        annotations: Annotations::READ_ONLY,
    }
}
fn not_built(_args: &Map<String, Value>, _cx: &mut Cx<'_>) -> Reply {
    Reply::Now(Outcome::Failed("not built yet".into()))
}
