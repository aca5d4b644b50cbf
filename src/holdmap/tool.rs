//! What every tool is to the server: its published definition (name, schemas, annotations), how
//! it runs, and what it gives back. The server knows tools only through these types.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::holdmap::confirm::Handles;
use crate::holdmap::world::World;

/// A tool as `tools/list` publishes it. `input_schema` is also what `schema::validate` enforces
/// before the tool runs: one source for the published and the enforced schema.
#[derive(Debug, Clone)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) description: &'static str,
    /// A closed object schema (`"additionalProperties": false`).
    pub(crate) input_schema: Value,
    /// A closed object schema describing `structuredContent`.
    pub(crate) output_schema: Value,
    pub(crate) annotations: Annotations,
}

/// The MCP tool annotations (hints to the client, not guarantees).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Annotations {
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) idempotent: bool,
    pub(crate) open_world: bool,
}

impl Annotations {
    /// A tool that only reads the machine.
    pub(crate) const READ_ONLY: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// A tool that may stop processes.
    pub(crate) const STOPS: Annotations = Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Success: a readable summary and the structured result (a JSON object matching the
    /// tool's output schema). The result carries both the summary and the JSON as text.
    Done { summary: String, structured: Value },
    /// A tool error (`isError: true`): a domain failure or a refusal, said in words the model
    /// can act on. No structured content.
    Failed(String),
}

/// Work that takes time (waiting for a port, executing a stop): run off the request loop, so
/// other requests are answered meanwhile.
pub(crate) type Pending = Pin<Box<dyn Future<Output = Outcome> + Send + 'static>>;

/// What running a tool gives the server: the outcome now, or work to await.
pub(crate) enum Reply {
    Now(Outcome),
    /// Work the client may cancel (`notifications/cancelled`), and that stops when stdin closes.
    Later(Pending),
    /// Work that changes the machine once begun (a stop's execution): it runs to its end and
    /// its result is written even when the client cancels it or closes stdin meanwhile, so a
    /// stop is never cut off half-way with nobody told what it did.
    Committed(Pending),
}

/// What a tool may use: the machine (`world`) and the session's confirmation handles.
pub(crate) struct Cx<'a> {
    pub(crate) world: &'a Arc<dyn World>,
    pub(crate) handles: &'a mut Handles,
}

/// A tool: its definition and how to run it. `run` is called only with arguments that passed
/// the definition's input schema.
#[derive(Clone, Copy)]
pub(crate) struct Tool {
    pub(crate) def: fn() -> ToolDef,
    pub(crate) run: fn(&Map<String, Value>, &mut Cx<'_>) -> Reply,
}
