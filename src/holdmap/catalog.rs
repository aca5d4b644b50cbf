//! Every tool the server has, in the order `tools/list` shows them, and the server's
//! `instructions`. The published schemas are the enforced ones (`schema::validate` reads the
//! same `ToolDef`).

use std::sync::OnceLock;

use crate::holdmap::tool::{Tool, ToolDef};

/// The paragraph `initialize` (and `server/discover`) gives the client.
pub(crate) const INSTRUCTIONS: &str = "holdmap shows what owns each port on this machine.";

fn tools() -> Vec<Tool> {
    let mut out = Vec::new();
    out.extend_from_slice(crate::holdmap::ports::TOOLS);
    out.extend_from_slice(crate::holdmap::topology::TOOLS);
    out.extend_from_slice(crate::holdmap::stop::TOOLS);
    out
}

/// Each tool with its definition, built once.
pub(crate) fn catalog() -> &'static [(ToolDef, Tool)] {
    static CATALOG: OnceLock<Vec<(ToolDef, Tool)>> = OnceLock::new();
    CATALOG.get_or_init(|| tools().into_iter().map(|t| ((t.def)(), t)).collect())
}

/// The tool called `name`.
pub(crate) fn find(name: &str) -> Option<&'static (ToolDef, Tool)> {
    catalog().iter().find(|(def, _)| def.name == name)
}
