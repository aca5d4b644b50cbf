//! `policy explain`: the same evaluation as a decision, with every policy that could apply, every
//! match, the tie-break and Cedar's own two answers.

use crate::policy::compile::{PolicyInfo, PolicySet};
use crate::policy::context::CallContext;
use crate::policy::decide::{CallRequest, CedarDiagnostics, Decision, Detail, Evaluation};
use crate::policy::scope::Effect;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Explanation {
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    pub decision: Decision,
    /// The policy named by `decision.policy_id` (the winner, or the errored forbid that
    /// overrode it); `None` when no rule applies.
    pub winner: Option<PolicyInfo>,
    /// Every matching policy, most specific first, in the order the wrapper ranks them.
    pub matching: Vec<PolicyInfo>,
    pub tie_break: String,
    pub cedar: CedarDiagnostics,
    /// Every policy that could apply (its scope's bucket is one the call hits), in seq order,
    /// with what became of it.
    #[serde(default)]
    pub considered: Vec<Considered>,
}

/// One policy that could apply to a call, and what its evaluation gave.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Considered {
    pub id: String,
    pub effect: Effect,
    pub specificity: i64,
    /// `matched`, `not matched`, `errored` or `not evaluated`.
    pub outcome: String,
    /// Cedar's error message, or why the rule was not evaluated.
    pub detail: Option<String>,
}

impl PolicySet {
    /// `explain` with the call's arguments and the time.
    pub(crate) fn explain_with(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Explanation {
        let evaluation = self.evaluate(req, ctx, Detail::Explain);
        self.explanation(req, evaluation)
    }

    pub(super) fn explanation(&self, req: &CallRequest<'_>, evaluation: Evaluation) -> Explanation {
        let pick = |i: &usize| self.infos.get(*i).cloned();
        Explanation {
            agent: req.agent.map(str::to_string),
            connector: req.connector.to_string(),
            tool: req.tool.to_string(),
            winner: evaluation.decider.as_ref().and_then(pick),
            matching: evaluation.matching.iter().filter_map(pick).collect(),
            tie_break: evaluation.tie_break,
            cedar: evaluation.cedar,
            considered: evaluation.considered,
            decision: evaluation.decision,
        }
    }
}
