//! Holdcall: a local MCP firewall. Every `tools/call` an MCP client sends to a stdio server is
//! decided by Cedar policy, written to a hash-chained journal, and only then forwarded, byte for
//! byte; everything else passes through untouched.
//!
//! `src/` is a house of subsystems in three floors (decision 0011); a module imports only from
//! its own floor or below, which `tests/layering.rs` checks. ARCHITECTURE.md follows one call
//! through them and has a "where is X" map.
//!
//! Foundation (imports nothing else of the crate):
//! - `limits`: every bound, with its unit and reason, and how they relate.
//! - `ids`: lowercase hex, SHA-256 as hex, random identifiers.
//! - `text`: what a person is shown of text another program chose (`visible`).
//!
//! Shared layers (both binaries; nothing Holdcall-specific):
//! - `mcp`: the MCP wire as bytes: the strict JSON scanner and the one escape decoder, the
//!   JSON-RPC envelope, protocol revisions, the capped line reader.
//! - `os`: the kernel's word: peer credentials, process identity and parents, `/proc`, stopping
//!   a child.
//! - `clients`: where each MCP client keeps its config, read into neutral entries.
//!
//! Holdcall:
//! - `relay`: `holdcall serve`, the stdio pump between client and server; the only stdout writer.
//! - `ipc`: the daemon socket: the relay-session and management protocols, dialing, the lock.
//! - `daemon`: sessions, the decision service, held calls, changes; the single database writer.
//! - `policy`: Cedar: compile, decide, explain, lint, files, cases, the call's context, budgets.
//!   No I/O.
//! - `journal`: SQLite storage, the canonical encoding, the hash chain, verify.
//! - `approval`: calls held for a person: the registry and the binding of a word to a call.
//! - `agents`: whether a peer is this build, enrolled client programs, who launched a relay.
//! - `connector`: registered connectors: their rules, the launch a relay is handed.
//! - `leak`: the secret-leak check: a secret's encoded forms as keyed fingerprints, the scanner.
//! - `vault`: the OS credential store (Secret Service, Keychain) for connectors' secrets.
//! - `config`: the home, its private directories, the socket and lock paths, `config.toml`.
//! - `projection`: journal entries read as calls, sessions and gaps (`log`, the console). No I/O.
//! - `routing`: Holdcall's judgement of client entries and the edits of `init`, with backups.
//! - `console`: `holdcall console`, the read-only loopback web page; it never writes.
//! - `doctor`: `holdcall doctor`'s checks; it never starts the daemon.
//! - `cli`: the commands and their output.
//! - `demo`: `holdcall demo` and the built-in demo server.
//! - `bench`: the hidden `holdcall bench-decisions`, which times decisions as a relay asks them.
//!
//! holdmap (beside Holdcall, on the shared layers and the foundation only; decision 0012):
//! - `holdmap`: `holdmap mcp`, the MCP server that explains ports and stops dev servers behind
//!   one-use handles.
//!
//! What the library exposes on purpose is the `pub` modules below: `cli` for the `holdcall`
//! binary, `holdmap` (its `Cli` and `run` only) for the `holdmap` binary; and, for the integration tests (tests/) and the benchmark (benches/), which build
//! journals, policies and homes by hand and check the product's own constants, the items of
//! `config`, `ids`, `journal`, `limits`, `policy`, `relay::classify`, `text`, `vault` and
//! `clients::json` they name. Everything else is `pub(crate)`.

// The module docs are written for the engineers who read `cargo doc --document-private-items`:
// a public item's doc may name a crate-private one.
#![allow(rustdoc::private_intra_doc_links)]

mod agents;
mod approval;
mod bench;
pub mod cli;
pub mod clients;
pub mod config;
mod connector;
mod console;
mod daemon;
mod demo;
mod doctor;
#[cfg(feature = "fuzz")]
pub mod fuzzing;
pub mod holdmap;
pub mod ids;
mod ipc;
pub mod journal;
mod leak;
pub mod limits;
mod mcp;
mod os;
pub mod policy;
mod projection;
pub mod relay;
mod routing;
pub mod text;
pub mod vault;

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
