//! Stop plans: what stopping a port's owner would do (the launcher tree, signals, the port to
//! verify), its risk, whether MCP permits it, and whether two plans have the same effects.

use serde_json::Value;

use crate::holdmap::model::Snapshot;
use crate::os::sockets::Protocol;

/// The options a stop was asked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PlanOptions {
    pub(crate) force: bool,
    pub(crate) allow_non_dev: bool,
}

/// What stopping the owner of one port would do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StopPlan {
    pub(crate) port: u16,
    pub(crate) protocol: Option<Protocol>,
}

/// The plan for stopping whatever owns `port` (`protocol` `None`: both).
pub(crate) fn plan_port(
    _snap: &Snapshot,
    port: u16,
    protocol: Option<Protocol>,
    _opts: PlanOptions,
) -> StopPlan {
    StopPlan { port, protocol }
}

/// The plan as published in results (the `plan` output schema).
pub(crate) fn to_json(_plan: &StopPlan) -> Value {
    Value::Null
}
