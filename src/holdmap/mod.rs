//! holdmap: the second product, `holdmap mcp`, an MCP server on stdio that shows what owns each
//! port and stops dev servers only behind one-use confirmation handles (docs/holdmap.md).
//!
//! Owns: the server's session (negotiated revision, handles), its tool catalog and the schemas
//! it publishes and enforces, the guide resource and the prompts, reading the machine into a
//! `Snapshot` and judging it (dev server, exposure, protection), stop plans and their execution.
//!
//! Must never: import Holdcall's own subsystems (relay, ipc, daemon, policy, journal, console,
//! Cedar, SQLite, axum, the keyring: tests/layering.rs and tests/holdmap/linking.rs check it) —
//! only the shared layers `mcp`, `os`, `clients` and the foundation; copy what those layers
//! already do; signal a process it has not pinned by pid and start time; signal a protected
//! process or another account's, whatever the arguments; write anything but protocol lines to
//! stdout.
//!
//! The life of one request: `server` reads a capped line and hands it to `wire`, which checks
//! the envelope and says which method it is; `methods` answers the protocol's own methods;
//! `catalog` finds the tool, `schema` checks its arguments against the schema `tools/list`
//! published, and the tool's module (`ports`, `topology`, `stop`) runs it against the `World`
//! (`world`: the live machine, or a fixture in tests); `wire` shapes the result for the
//! revision the request is under and `server` writes it as one line.

mod activity;
mod agents;
mod analyzers;
mod catalog;
mod cli;
mod confirm;
mod framework;
mod guide;
mod home;
mod listeners;
mod methods;
mod model;
mod needs;
mod plan;
mod ports;
mod probe;
mod project;
mod prompts;
mod protect;
mod redact;
mod schema;
mod server;
mod stop;
mod tool;
mod topology;
mod wire;
mod world;

pub use cli::{Cli, HoldmapCommand, run};
#[cfg(feature = "fuzz")]
pub(crate) use server::answers_for_fuzzing;
