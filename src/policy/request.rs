//! The Cedar request of one call: its plan (entities and the policies that could apply, kept per
//! agent, connector and tool, which is all they depend on) and the context attributes the set's
//! rules can read.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use cedar_policy::{Entities, Entity, EntityId, EntityUid, Request};

use crate::limits::{CALL_PLAN_POLICIES_MAX, CALL_PLANS_CACHED};
use crate::policy::compile::{Names, PolicySet};
use crate::policy::context::CallContext;
use crate::policy::decide::CallRequest;
use crate::policy::index::{Group, Index};

/// What one (agent, connector, tool) needs from Cedar: the principal, the resource, the entity
/// slice (the Tool with its two parents, the parents themselves, and the Agent — `Agent::""` for
/// an unenrolled session) and, when few enough, every policy that could apply as one group.
pub(super) struct CallPlan {
    /// The call it was built for: agent (`""` for none), connector, tool.
    key: (String, String, String),
    pub(super) agent: EntityUid,
    pub(super) tool: EntityUid,
    pub(super) entities: Entities,
    /// The index's groups for this call as one (only when they hold at most
    /// `CALL_PLAN_POLICIES_MAX` policies): at most two Cedar calls, each policy evaluated
    /// once. `None`: ask the groups one by one.
    pub(super) merged: Option<Group>,
    /// Every policy of those groups (indices into the set's tables), sorted, without repeats.
    pub(super) could_apply: Vec<usize>,
}

impl CallPlan {
    fn is_for(&self, req: &CallRequest<'_>) -> bool {
        self.key.0 == req.agent.unwrap_or("")
            && self.key.1 == req.connector
            && self.key.2 == req.tool
    }
}

/// The plans of the calls a set has decided, up to `limits::CALL_PLANS_CACHED` of them, by a
/// keyed hash of the call (so a hit allocates nothing); a plan is used only for the call it was
/// built for, so two calls with one hash only take turns. A lock that cannot be taken only
/// means building the plan again.
#[derive(Default)]
pub(super) struct PlanCache {
    plans: Mutex<HashMap<u64, Arc<CallPlan>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl PlanCache {
    fn hash(&self, req: &CallRequest<'_>) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = self.hasher.build_hasher();
        // `str`'s Hash ends each string with a marker, so the three cannot run together.
        req.agent.unwrap_or("").hash(&mut h);
        req.connector.hash(&mut h);
        req.tool.hash(&mut h);
        h.finish()
    }

    fn get_or_build(
        &self,
        names: &Names,
        index: &Index,
        req: &CallRequest<'_>,
        tool_id: &str,
    ) -> Result<Arc<CallPlan>, String> {
        let key = self.hash(req);
        if let Ok(plans) = self.plans.lock()
            && let Some(hit) = plans.get(&key)
            && hit.is_for(req)
        {
            return Ok(Arc::clone(hit));
        }
        let built = Arc::new(plan(names, index, req, tool_id)?);
        if let Ok(mut plans) = self.plans.lock() {
            if plans.len() >= CALL_PLANS_CACHED {
                plans.clear();
            }
            plans.insert(key, Arc::clone(&built));
        }
        Ok(built)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.plans.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Whether the kept plan of this call merged its groups (`None`: no plan kept).
    #[cfg(test)]
    pub(super) fn merged(&self, req: &CallRequest<'_>) -> Option<bool> {
        let plans = self.plans.lock().ok()?;
        plans
            .get(&self.hash(req))
            .filter(|p| p.is_for(req))
            .map(|p| p.merged.is_some())
    }
}

fn plan(
    names: &Names,
    index: &Index,
    req: &CallRequest<'_>,
    tool_id: &str,
) -> Result<CallPlan, String> {
    let agent = EntityUid::from_type_name_and_id(
        names.agent.clone(),
        EntityId::new(req.agent.unwrap_or("")),
    );
    let connector =
        EntityUid::from_type_name_and_id(names.connector.clone(), EntityId::new(req.connector));
    let tool_name =
        EntityUid::from_type_name_and_id(names.tool_name.clone(), EntityId::new(req.tool));
    let tool = EntityUid::from_type_name_and_id(names.tool.clone(), EntityId::new(tool_id));
    let entities = Entities::from_entities(
        [
            Entity::new_no_attrs(
                tool.clone(),
                HashSet::from([connector.clone(), tool_name.clone()]),
            ),
            Entity::new_no_attrs(connector, HashSet::new()),
            Entity::new_no_attrs(tool_name, HashSet::new()),
            Entity::new_no_attrs(agent.clone(), HashSet::new()),
        ],
        None,
    )
    .map_err(|e| e.to_string())?;
    let mut could_apply: Vec<usize> = index
        .groups(tool_id, req)
        .flat_map(|g| g.members.iter().copied())
        .collect();
    could_apply.sort_unstable();
    could_apply.dedup();
    Ok(CallPlan {
        key: (
            req.agent.unwrap_or("").to_string(),
            req.connector.to_string(),
            req.tool.to_string(),
        ),
        agent,
        tool,
        entities,
        merged: merge(index.groups(tool_id, req))?,
        could_apply,
    })
}

/// The groups as one, when they hold at most `CALL_PLAN_POLICIES_MAX` policies between them.
fn merge<'a>(groups: impl Iterator<Item = &'a Group>) -> Result<Option<Group>, String> {
    let groups: Vec<&Group> = groups.collect();
    if groups.len() < 2 {
        // Nothing to gain: one group is at most two Cedar calls already.
        return Ok(None);
    }
    if groups.iter().map(|g| g.members.len()).sum::<usize>() > CALL_PLAN_POLICIES_MAX {
        return Ok(None);
    }
    let mut merged = Group::default();
    for g in groups {
        for p in g.permits.policies() {
            merged.permits.add(p.clone()).map_err(|e| e.to_string())?;
        }
        for p in g.forbids.policies() {
            merged.forbids.add(p.clone()).map_err(|e| e.to_string())?;
        }
        merged.members.extend_from_slice(&g.members);
    }
    merged.members.sort_unstable();
    Ok(Some(merged))
}

impl CallPlan {
    /// The groups Cedar is asked about for this call: the merged one, or the index's.
    pub(super) fn groups<'a>(
        &'a self,
        index: &'a Index,
        tool_id: &str,
        req: &CallRequest<'_>,
    ) -> Vec<&'a Group> {
        match &self.merged {
            Some(group) => vec![group],
            None => index.groups(tool_id, req).collect(),
        }
    }
}

impl PolicySet {
    /// The Cedar request and the plan of one call. The context holds what the set's rules can
    /// read (`ContextReads`); no schema: a call must be decided, never rejected for its shape.
    pub(super) fn request(
        &self,
        names: &Names,
        req: &CallRequest<'_>,
        tool_id: &str,
        ctx: &CallContext,
    ) -> Result<(Request, Arc<CallPlan>), String> {
        let plan = self.plans.get_or_build(names, &self.index, req, tool_id)?;
        let request = Request::new(
            plan.agent.clone(),
            names.call.clone(),
            plan.tool.clone(),
            ctx.to_cedar_for(&self.context_reads)?,
            None,
        )
        .map_err(|e| e.to_string())?;
        Ok((request, plan))
    }
}
