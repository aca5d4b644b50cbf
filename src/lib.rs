//! Holdcall: a local MCP firewall. Every `tools/call` an MCP client sends to a stdio server is
//! decided by Cedar policy, written to a hash-chained journal, and only then forwarded, byte for
//! byte; everything else passes through untouched.
//!
//! One module per step of a call's life (ARCHITECTURE.md follows one call through them):
//! - `ids`: lowercase hex and random identifiers.
//! - `limits`: every bound, with its unit and reason.
//! - `mcp`: the MCP wire as bytes: strict JSON, the JSON-RPC envelope, revisions, line reading.
//! - `relay`: `holdcall serve`, the stdio pump between client and server; the only stdout writer.
//! - `wire`: the daemon socket's messages, bounded reads, and verified dialing.
//! - `peer`: who is on the other end of a socket, by the kernel's word.
//! - `approval`: calls held for a person: the registry, the binding, showing arguments as they are.
//! - `agents`: enrolled client programs, and which one launched a relay (its parent's image).
//! - `vault`: the OS credential store (Secret Service, Keychain) that keeps connectors' secrets.
//! - `connector`: registered connectors: their rules, the launch a relay is handed, its environment.
//! - `daemon`: sessions, the decision service, and the single writer of the database.
//! - `context`: the Cedar context of a call (arguments mapped without JSON escapes, time). No I/O.
//! - `budget`: caps on allowed calls per relay session, and the session's counts. No I/O.
//! - `policy`: Cedar: compile, validate, evaluate, the precedence wrapper, explain. No I/O.
//! - `policyfile`: policy files: splitting, checking and linting with located reports. No I/O.
//! - `policytest`: `policy test` cases files, decided with the daemon's own function. No I/O.
//! - `journal`: SQLite storage, the canonical encoding, the hash chain, verify.
//! - `config`: the home, its private directories, the socket path, `config.toml`.
//! - `projection`: journal entries read as calls with their state, sessions and gaps; what
//!   `holdcall log` and the console both show. No I/O.
//! - `console`: `holdcall console`, the read-only loopback web page (axum); it never writes.
//! - `cli`: the commands and their output.
//! - `clientconfig`: MCP clients' config files: reading them, routing their servers through
//!   `holdcall serve` by span edits, backups and undo (`init`, `inventory`).
//! - `doctor`: `holdcall doctor`'s checks, one function each; it never starts the daemon.
//! - `demo`: `holdcall demo` and the built-in demo server.
//! - `bench`: the hidden `holdcall bench-decisions`, which times decisions as a relay asks them.

pub mod agents;
pub mod approval;
pub mod bench;
pub mod cli;
pub mod clients;
pub mod config;
pub mod connector;
pub mod console;
pub mod daemon;
pub mod demo;
pub mod doctor;
pub mod ids;
pub mod ipc;
pub mod journal;
pub mod limits;
pub mod mcp;
pub mod os;
pub mod policy;
pub mod projection;
pub mod relay;
pub(crate) mod routing;
pub mod text;
pub mod vault;

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
