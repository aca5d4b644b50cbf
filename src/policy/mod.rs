//! Holdcall's rules: Cedar policies, compiled once, and the fixed precedence wrapper that turns
//! Cedar's answer into allow / ask / deny for one MCP `tools/call`. Two words carry it: a rule's
//! `Effect` (what one rule says) and the `Decision` (what the rules decide for one call).
//!
//! This module owns:
//! - the Cedar model (schema `schema/holdcall.cedarschema`: principal `Agent`, action
//!   `Action::"call"`, resource `Tool` with parents `Connector` and `ToolName`, empty context);
//! - compiling: checking a stored policy (`@id`, `@holdcall_effect`, the supported scope forms,
//!   strict validation, guarded argument reads) and deriving its effect and specificity from the
//!   scope alone (`compile`, `conditions`, `scope`, `error`);
//! - the decision: Cedar evaluates a permit-only and a forbid-only set (two calls, because
//!   `reason()` lists only the *determining* policies of one call) for each of the ≤ 8 groups
//!   of the scope index a call can hit (exact tool, tool name, connector, every tool; each for
//!   the call's agent and for every agent), merged into one group per call when few; the call's
//!   entities and plan are kept per (agent, connector, tool) and its context holds only what
//!   some rule reads (`request`, decision 0021); then the most specific matching policy wins,
//!   ties to deny, then ask, then allow, then the oldest (lowest `seq`); a forbid that cannot be
//!   evaluated never lets the call through (fail closed) (`index`, `decide`, `explain`);
//! - rendering rules made on the command line as Cedar text, name validation, the import lints,
//!   unified diffs of policy text and their applier, and the precedence-table case parser shared
//!   with tests (`render`, `conditions`, `diff`, `precedence`);
//! - policy files (`file`), `policy test` cases (`cases`), the call's Cedar context (`context`)
//!   and budgets (`budget`).
//!
//! It must never do I/O, touch the journal or a socket: policies come in as text, decisions go
//! out as values; storage, the journal and the socket live elsewhere. A call's arguments never
//! reach Cedar as JSON (`context`). See `docs/decisions/0001-policy-in-cedar.md` for the why.

pub(crate) mod budget;
pub(crate) mod cases;
mod compile;
mod conditions;
pub(crate) mod context;
mod decide;
mod diff;
mod error;
mod explain;
pub(crate) mod file;
mod index;
mod precedence;
mod render;
mod request;
mod scope;

#[cfg(test)]
mod tests;

pub use compile::{PolicySet, StoredPolicy};
pub use decide::{CallRequest, Decision};
pub use diff::{set_text, unified_diff};
pub use error::PolicyError;
// `pub` only while `cli::write_explanation` and `ipc::Response` are; then `pub(crate)`, with
// `PolicyInfo`, `CedarDiagnostics` and `Considered`.
pub use explain::Explanation;
pub use precedence::{PrecedenceCase, parse_precedence_case};
pub use render::cli_rule_text;
pub use scope::{Effect, Scope, specificity_of_scope};

pub(crate) use compile::{
    ID_ANNOTATION, load_validator, parse_effect_and_specificity, validation_problems,
};
pub(crate) use conditions::{agents_named, agents_named_in_text, lint_warnings};
pub(crate) use diff::{apply_unified_diff, ids_of, opens_with_id};
pub(crate) use render::display_name;
pub(crate) use scope::{validate_scope_name, validate_tool_name};
