//! The port tools: `list_ports` (list), `explain_port` and `inspect_port` (one inspection, two
//! readings: `inspection`), `find_free_port` (free) and `wait_for_port` (wait).
//!
//! Owns: their published definitions and what they make of a snapshot. Must never: signal or
//! stop anything (every tool here is read-only), connect anywhere but 127.0.0.1 and ::1, or
//! block the request loop on a wait or a probe (those are `Reply::Later`).

mod explain;
mod free;
mod inspect;
mod inspection;
mod list;
mod wait;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use crate::holdmap::model::Snapshot;
use crate::holdmap::tool::{Cx, Tool};

pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        def: list::def,
        run: list::run,
    },
    Tool {
        def: explain::def,
        run: explain::run,
    },
    Tool {
        def: inspect::def,
        run: inspect::run,
    },
    Tool {
        def: free::def,
        run: free::run,
    },
    Tool {
        def: wait::def,
        run: wait::run,
    },
];

/// A fresh snapshot, or the tool error that says the machine could not be read.
fn observe(cx: &Cx<'_>) -> Result<Snapshot, String> {
    cx.world
        .observe()
        .map_err(|e| format!("holdmap could not read this machine's ports: {e}"))
}

fn bool_arg(args: &Map<String, Value>, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The input schema of a tool that takes one required port.
fn port_input_schema(what: &str) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": what},
        },
        "required": ["port"],
        "additionalProperties": false,
    })
}
