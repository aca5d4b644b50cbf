//! The scope index: a set's policies grouped by their resource scope and by the agent their
//! principal scope names, so a call asks Cedar only about the policies whose scope can match it.

use std::collections::HashMap;

use cedar_policy::Policy;

use crate::policy::decide::CallRequest;
use crate::policy::scope::{Effect, Scope};

/// The policies of one resource bucket that name one agent (or none), as Cedar sets.
#[derive(Default)]
pub(super) struct Group {
    /// Only the permits: its `reason()` lists every matching permit.
    pub(super) permits: cedar_policy::PolicySet,
    /// Only the forbids: its `reason()` lists every matching forbid (deny and ask). In one set
    /// with the permits, Cedar's reason would hide every permit once a forbid matched, and the
    /// wrapper needs every match.
    pub(super) forbids: cedar_policy::PolicySet,
    /// The group's policies (indices into the set's tables), in seq order.
    pub(super) members: Vec<usize>,
}

impl Group {
    /// Adds policy number `i` to its half.
    pub(super) fn add(&mut self, i: usize, effect: Effect, policy: Policy) -> Result<(), String> {
        match effect {
            Effect::Allow => self.permits.add(policy),
            Effect::Ask | Effect::Deny => self.forbids.add(policy),
        }
        .map_err(|e| e.to_string())?;
        self.members.push(i);
        Ok(())
    }
}

/// The policies of one resource bucket, by the agent their principal scope names.
#[derive(Default)]
pub(super) struct Bucket {
    /// `principal`: every agent, and a session with none.
    pub(super) any_agent: Group,
    /// `principal == Agent::"A"`, keyed by `A` (never empty: an agent's name is checked).
    pub(super) agents: HashMap<String, Group>,
}

impl Bucket {
    /// The groups a call by `agent` can hit: its own agent's, then every agent's.
    fn groups(&self, agent: Option<&str>) -> [Option<&Group>; 2] {
        [
            agent.and_then(|a| self.agents.get(a)),
            Some(&self.any_agent),
        ]
    }
}

/// The policies indexed by their scope. Every supported resource form matches exactly one key
/// of a request (the resource is always `Tool::"C/T"` with parents `Connector::"C"` and
/// `ToolName::"T"`, nothing else), every supported principal form is `principal` or
/// `principal == Agent::"A"`, and Cedar never evaluates the conditions of a policy whose scope
/// does not match, so evaluating the ≤ 8 groups a request can hit gives the same matches and the
/// same errors as evaluating every policy — at a cost that does not grow with rules about other
/// tools or other agents.
#[derive(Default)]
pub(super) struct Index {
    /// `resource == Tool::"C/T"`, keyed by the Tool's id `C/T`.
    pub(super) tools: HashMap<String, Bucket>,
    /// `resource in ToolName::"T"`, keyed by `T`.
    pub(super) tool_names: HashMap<String, Bucket>,
    /// `resource in Connector::"C"`, keyed by `C`.
    pub(super) connectors: HashMap<String, Bucket>,
    /// `resource`: every call.
    pub(super) global: Bucket,
}

impl Index {
    /// Adds policy number `i` with this (already checked) scope and effect. `indexed: false`
    /// puts it in the group every call asks (the reference the index is tested against).
    pub(super) fn add(
        &mut self,
        i: usize,
        scope: &Scope,
        effect: Effect,
        policy: Policy,
        indexed: bool,
    ) -> Result<(), String> {
        let group = if indexed {
            let bucket = match (&scope.tool, &scope.connector) {
                (Some(tool), Some(connector)) => {
                    self.tools.entry(format!("{connector}/{tool}")).or_default()
                }
                (Some(tool), None) => self.tool_names.entry(tool.clone()).or_default(),
                (None, Some(connector)) => self.connectors.entry(connector.clone()).or_default(),
                (None, None) => &mut self.global,
            };
            match &scope.agent {
                Some(agent) => bucket.agents.entry(agent.clone()).or_default(),
                None => &mut bucket.any_agent,
            }
        } else {
            &mut self.global.any_agent
        };
        group.add(i, effect, policy)
    }

    /// The groups a request for `Tool::"<tool_id>"` can hit, most specific resource first; the
    /// empty ones are left out.
    pub(super) fn groups<'a>(
        &'a self,
        tool_id: &str,
        req: &CallRequest<'_>,
    ) -> impl Iterator<Item = &'a Group> {
        [
            self.tools.get(tool_id),
            self.tool_names.get(req.tool),
            self.connectors.get(req.connector),
            Some(&self.global),
        ]
        .into_iter()
        .flatten()
        .flat_map(|bucket| bucket.groups(req.agent))
        .flatten()
        .filter(|g| !g.members.is_empty())
    }
}
