//! The scope index: a set's policies bucketed by their resource scope, so a call asks Cedar
//! about only the at most four buckets it can hit.

use std::collections::HashMap;

use crate::policy::decide::CallRequest;
use crate::policy::scope::Scope;

/// The policies of one index bucket, split by Cedar effect.
#[derive(Default)]
pub(super) struct Halves {
    /// Only the permits: its `reason()` lists every matching permit.
    pub(super) permits: cedar_policy::PolicySet,
    /// Only the forbids: its `reason()` lists every matching forbid (deny and ask).
    pub(super) forbids: cedar_policy::PolicySet,
}

/// The policies indexed by their resource scope, the only part of a scope that names the
/// resource. Every supported resource form matches exactly one key of a request (the resource
/// is always `Tool::"C/T"` with parents `Connector::"C"` and `ToolName::"T"`, nothing else), and
/// Cedar never evaluates the conditions of a policy whose scope does not match, so evaluating
/// the ≤ 4 buckets a request can hit gives the same matches and the same errors as evaluating
/// every policy — at a cost that does not grow with rules about other tools.
#[derive(Default)]
pub(super) struct Index {
    /// `resource == Tool::"C/T"`, keyed by the Tool's id `C/T`.
    pub(super) tools: HashMap<String, Halves>,
    /// `resource in ToolName::"T"`, keyed by `T`.
    pub(super) tool_names: HashMap<String, Halves>,
    /// `resource in Connector::"C"`, keyed by `C`.
    pub(super) connectors: HashMap<String, Halves>,
    /// `resource`: every call.
    pub(super) global: Halves,
}

impl Index {
    /// The bucket of a policy with this (already checked) scope.
    pub(super) fn bucket_mut(&mut self, scope: &Scope) -> &mut Halves {
        match (&scope.tool, &scope.connector) {
            (Some(tool), Some(connector)) => {
                self.tools.entry(format!("{connector}/{tool}")).or_default()
            }
            (Some(tool), None) => self.tool_names.entry(tool.clone()).or_default(),
            (None, Some(connector)) => self.connectors.entry(connector.clone()).or_default(),
            (None, None) => &mut self.global,
        }
    }

    /// The buckets a request for `Tool::"<tool_id>"` can hit, most specific first.
    pub(super) fn buckets<'a>(
        &'a self,
        tool_id: &str,
        req: &CallRequest<'_>,
    ) -> [Option<&'a Halves>; 4] {
        [
            self.tools.get(tool_id),
            self.tool_names.get(req.tool),
            self.connectors.get(req.connector),
            Some(&self.global),
        ]
    }
}
