//! The decision for one call: the Cedar request, two Cedar evaluations per bucket the call can
//! hit, and the fixed precedence wrapper (most specific wins, ties to deny, then ask, then allow,
//! then the oldest; a forbid that cannot be evaluated never lets the call through).

use std::cmp::Reverse;
use std::collections::HashSet;
use std::fmt::Write as _;

use cedar_policy::{
    AuthorizationError, Decision as CedarDecision, Entities, Entity, EntityId, EntityUid, Request,
    Response,
};

use crate::policy::compile::{Names, PolicyInfo, PolicySet};
use crate::policy::context::{ArgumentsProblem, CallContext};
use crate::policy::explain::Considered;
use crate::policy::scope::Effect;

/// One `tools/call` as the policy sees it. `agent: None` is a session with no enrolled agent;
/// `connector` may be `""` when unknown.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    pub agent: Option<&'a str>,
    pub connector: &'a str,
    pub tool: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    pub effect: Effect,
    /// The policy that decided: the winner, or the errored forbid that overrode it.
    pub policy_id: Option<String>,
    pub reason: String,
}

/// Cedar's own two answers, as it reported them, next to what Holdcall decided.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CedarDiagnostics {
    pub permit_decision: String,
    pub permit_reasons: Vec<String>,
    pub forbid_decision: String,
    pub forbid_reasons: Vec<String>,
    pub errors: Vec<String>,
}

/// The wrapper's full result; `decide` keeps the decision, `explain` keeps everything.
pub(super) struct Evaluation {
    pub(super) considered: Vec<Considered>,
    pub(super) decision: Decision,
    pub(super) decider: Option<usize>,
    pub(super) matching: Vec<usize>,
    pub(super) tie_break: String,
    pub(super) cedar: CedarDiagnostics,
}

/// What the ranking gives: the decision, the index of the policy that decided, the tie-break.
type Ranked = (Decision, Option<usize>, String);

impl Evaluation {
    /// A decision reached without ranking: fail closed.
    fn refuse(reason: String, cedar: CedarDiagnostics) -> Evaluation {
        Evaluation {
            considered: Vec::new(),
            decision: Decision {
                effect: Effect::Deny,
                policy_id: None,
                reason: reason.clone(),
            },
            decider: None,
            matching: Vec::new(),
            tie_break: reason,
            cedar,
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn article(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow | Effect::Ask => "an",
        Effect::Deny => "a",
    }
}

fn verb(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "allows",
        Effect::Ask => "asks",
        Effect::Deny => "denies",
    }
}

impl PolicySet {
    /// The daemon's decision for one call. Pure; Cedar evaluations of the (at most four) buckets
    /// the call can hit, then a ranking.
    pub fn decide(&self, req: &CallRequest<'_>) -> Decision {
        self.evaluate(req, &CallContext::empty()).decision
    }

    /// `decide` with the call's arguments and the time. A rule that reads `context.arguments`
    /// is never evaluated on arguments that could not be read (omitted, beyond a cap,
    /// unreadable): such a deny or ask rule that could apply refuses or holds the call, and such
    /// an allow rule cannot allow it.
    pub(crate) fn decide_with(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Decision {
        self.evaluate(req, ctx).decision
    }

    /// Whether the rules deny every call to this tool whatever its arguments (what hide-denied
    /// takes out of a listing): the winner on `ctx` is a deny without conditions, nothing
    /// errored, and no conditional allow or ask rule more specific than it could apply (with
    /// other arguments it might win). An `ask` is never outright.
    pub(crate) fn denies_outright(&self, req: &CallRequest<'_>, ctx: &CallContext) -> bool {
        let ev = self.evaluate(req, ctx);
        let Some(d) = ev.decider else { return false };
        let (Some(winner), Some((_, conditional))) = (self.infos.get(d), self.scopes.get(d)) else {
            return false;
        };
        if ev.decision.effect != Effect::Deny || winner.effect != Effect::Deny || *conditional {
            return false;
        }
        let tool_id = format!("{}/{}", req.connector, req.tool);
        !self.could_apply(&tool_id, req).into_iter().any(|i| {
            i != d
                && self.infos.get(i).is_some_and(|info| {
                    info.effect != Effect::Deny && info.specificity > winner.specificity
                })
                && self.scopes.get(i).is_some_and(|(_, c)| *c)
        })
    }

    /// Builds the Cedar request and the entity slice: the Tool with its two parents, the
    /// parents themselves, and the Agent (`Agent::""` for an unenrolled session).
    fn request(
        &self,
        names: &Names,
        req: &CallRequest<'_>,
        tool_id: &str,
        ctx: &CallContext,
    ) -> Result<(Request, Entities), String> {
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
        // No schema here: a call must be decided, never rejected for its shape.
        let request = Request::new(agent, names.call.clone(), tool, ctx.to_cedar()?, None)
            .map_err(|e| e.to_string())?;
        Ok((request, entities))
    }

    /// Ranking key: most specific first, then deny > ask > allow, then oldest (index order is
    /// seq order).
    fn rank_key(&self, i: usize) -> (Reverse<i64>, Reverse<Effect>, usize) {
        match self.infos.get(i) {
            Some(info) => (Reverse(info.specificity), Reverse(info.effect), i),
            None => (Reverse(i64::MIN), Reverse(Effect::Allow), i),
        }
    }

    fn summary(&self, i: usize) -> String {
        let (Some(info), Some((scope, conditional))) = (self.infos.get(i), self.scopes.get(i))
        else {
            return String::new();
        };
        let mut s = format!("rule {} ({} {}", info.id, info.effect, scope.describe());
        if *conditional {
            s.push_str(", when its conditions hold");
        }
        s.push(')');
        s
    }

    /// The wrapper, one named step after another: the Cedar request, Cedar's answers for the
    /// buckets the call can hit, what matched and what erred, the rules set aside because they
    /// read arguments that could not be read, the ranking, then the fail-closed floor.
    pub(super) fn evaluate(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Evaluation {
        let Some(names) = &self.names else {
            return Evaluation::refuse(
                "Holdcall could not set up its Cedar names, so every call is denied".to_string(),
                CedarDiagnostics::default(),
            );
        };
        let tool_id = format!("{}/{}", req.connector, req.tool);
        let (request, entities) = match self.request(names, req, &tool_id, ctx) {
            Ok(parts) => parts,
            Err(e) => {
                return Evaluation::refuse(
                    format!(
                        "the call could not be turned into a Cedar request ({e}), so it is denied"
                    ),
                    CedarDiagnostics::default(),
                );
            }
        };
        let (permits, forbids) = self.ask_cedar(&request, &entities, &tool_id, req);
        let cedar = diagnostics(&permits, &forbids);

        let mut matching = match self.matching(&permits, &forbids) {
            Ok(matching) => matching,
            Err(reason) => return Evaluation::refuse(reason, cedar),
        };
        let permit_errors = self.permit_errors(&permits);
        let mut errored = match self.forbid_errors(&forbids) {
            Ok(errored) => errored,
            Err(reason) => return Evaluation::refuse(reason, cedar),
        };
        let could_apply = self.could_apply(&tool_id, req);
        let args_problem = ctx.arguments.as_ref().err();
        if let Some(problem) = args_problem {
            self.set_aside_argument_readers(problem, &could_apply, &mut matching, &mut errored);
        }
        let considered = self.considered(
            &could_apply,
            args_problem,
            &matching,
            &errored,
            &permit_errors,
        );
        matching.sort_by_key(|&i| self.rank_key(i));
        matching.dedup();

        let (mut decision, decider, tie_break) = self.rank(&matching);
        if let Some(problem) = args_problem
            && decision.effect == Effect::Allow
            && could_apply.iter().any(|&i| self.reads_arguments(i))
        {
            let _ = write!(
                decision.reason,
                "; rules that read the arguments were not evaluated: {problem}"
            );
        }
        let (decision, decider, tie_break) =
            self.fail_closed(&errored, (decision, decider, tie_break));
        Evaluation {
            considered,
            decision,
            decider,
            matching,
            tie_break,
            cedar,
        }
    }

    /// Cedar's answers, permits then forbids. Two calls per bucket, not one: in a single set
    /// `reason()` hides every permit once any forbid matches, and the wrapper needs every match.
    /// Only the buckets this request can hit are asked (see `Index`), and an empty half has
    /// nothing to say.
    fn ask_cedar(
        &self,
        request: &Request,
        entities: &Entities,
        tool_id: &str,
        req: &CallRequest<'_>,
    ) -> (Vec<Response>, Vec<Response>) {
        let mut permits: Vec<Response> = Vec::new();
        let mut forbids: Vec<Response> = Vec::new();
        for halves in self.index.buckets(tool_id, req).into_iter().flatten() {
            if !halves.permits.is_empty() {
                permits.push(
                    self.authorizer
                        .is_authorized(request, &halves.permits, entities),
                );
            }
            if !halves.forbids.is_empty() {
                forbids.push(
                    self.authorizer
                        .is_authorized(request, &halves.forbids, entities),
                );
            }
        }
        (permits, forbids)
    }

    /// Every policy Cedar reported as matching, permits first. A rule Holdcall does not know is
    /// the reason to refuse the call (`Err`).
    fn matching(&self, permits: &[Response], forbids: &[Response]) -> Result<Vec<usize>, String> {
        let mut matching = Vec::new();
        for id in permits
            .iter()
            .chain(forbids)
            .flat_map(|r| r.diagnostics().reason())
        {
            match self.by_id.get(AsRef::<str>::as_ref(id)) {
                Some(&i) => matching.push(i),
                None => {
                    return Err(format!(
                        "Cedar reported rule {id}, which Holdcall does not know, so the call is denied"
                    ));
                }
            }
        }
        Ok(matching)
    }

    /// The permits whose evaluation erred, with Cedar's message. Cedar skips them, which only
    /// takes an allow away, so they are only reported.
    fn permit_errors(&self, permits: &[Response]) -> Vec<(usize, String)> {
        permits
            .iter()
            .flat_map(|r| r.diagnostics().errors())
            .filter_map(|err| {
                let AuthorizationError::PolicyEvaluationError(e) = err;
                self.by_id
                    .get(AsRef::<str>::as_ref(e.policy_id()))
                    .map(|&i| (i, e.inner().to_string()))
            })
            .collect()
    }

    /// The forbids whose evaluation erred, with Cedar's message. Skip-on-error would make an
    /// erroring forbid fail open; they are collected to escalate (`fail_closed`). A rule Holdcall
    /// does not know is the reason to refuse the call (`Err`).
    fn forbid_errors(&self, forbids: &[Response]) -> Result<Vec<(usize, String)>, String> {
        let mut errored: Vec<(usize, String)> = Vec::new();
        for err in forbids.iter().flat_map(|r| r.diagnostics().errors()) {
            let AuthorizationError::PolicyEvaluationError(e) = err;
            match self.by_id.get(AsRef::<str>::as_ref(e.policy_id())) {
                Some(&i) => errored.push((i, e.inner().to_string())),
                None => {
                    return Err(format!(
                        "a rule Holdcall does not know failed in Cedar ({err}), so the call is denied"
                    ));
                }
            }
        }
        Ok(errored)
    }

    /// Every policy the call's buckets hold could apply; Cedar said which matched or erred.
    /// Sorted, without repeats.
    fn could_apply(&self, tool_id: &str, req: &CallRequest<'_>) -> Vec<usize> {
        let mut could_apply: Vec<usize> = self
            .index
            .buckets(tool_id, req)
            .into_iter()
            .flatten()
            .flat_map(|h| h.permits.policies().chain(h.forbids.policies()))
            .filter_map(|p| self.by_id.get(AsRef::<str>::as_ref(p.id())).copied())
            .collect();
        could_apply.sort_unstable();
        could_apply.dedup();
        could_apply
    }

    /// Whether policy `i` reads `context.arguments` (an unknown index counts as reading them).
    fn reads_arguments(&self, i: usize) -> bool {
        self.reads_args.get(i).copied().unwrap_or(true)
    }

    /// Arguments that could not be read: no rule that reads them decides on the stand-in
    /// empty record. Their matches and errors are dropped; a deny or ask among them sets a
    /// floor (`fail_closed`: refuse or hold), an allow among them cannot allow.
    fn set_aside_argument_readers(
        &self,
        problem: &ArgumentsProblem,
        could_apply: &[usize],
        matching: &mut Vec<usize>,
        errored: &mut Vec<(usize, String)>,
    ) {
        matching.retain(|&i| !self.reads_arguments(i));
        errored.retain(|(i, _)| !self.reads_arguments(*i));
        for &i in could_apply {
            if self.reads_arguments(i)
                && self
                    .infos
                    .get(i)
                    .is_some_and(|info| info.effect != Effect::Allow)
            {
                errored.push((i, format!("it reads the call's arguments, and {problem}")));
            }
        }
    }

    /// What became of each policy that could apply, in seq order, for `policy explain`.
    fn considered(
        &self,
        could_apply: &[usize],
        args_problem: Option<&ArgumentsProblem>,
        matching: &[usize],
        errored: &[(usize, String)],
        permit_errors: &[(usize, String)],
    ) -> Vec<Considered> {
        could_apply
            .iter()
            .filter_map(|&i| {
                let info = self.infos.get(i)?;
                let (outcome, detail) =
                    if let (true, Some(problem)) = (self.reads_arguments(i), args_problem) {
                        ("not evaluated", Some(problem.to_string()))
                    } else if let Some((_, msg)) = errored.iter().find(|(e, _)| *e == i) {
                        ("errored", Some(msg.clone()))
                    } else if let Some(msg) =
                        permit_errors.iter().find(|(e, _)| *e == i).map(|(_, m)| m)
                    {
                        ("errored", Some(msg.clone()))
                    } else if matching.contains(&i) {
                        ("matched", None)
                    } else {
                        ("not matched", None)
                    };
                Some(Considered {
                    id: info.id.clone(),
                    effect: info.effect,
                    specificity: info.specificity,
                    outcome: outcome.to_string(),
                    detail,
                })
            })
            .collect()
    }

    /// Fail closed: the strictest errored forbid sets a floor on the decision (whatever its
    /// specificity: we cannot know whether it would have matched); among equals, the
    /// best-ranked one is named.
    fn fail_closed(&self, errored: &[(usize, String)], ranked: Ranked) -> Ranked {
        let (mut decision, mut decider, mut tie_break) = ranked;
        let floor = errored
            .iter()
            .filter_map(|(i, msg)| self.infos.get(*i).map(|info| (info, *i, msg)))
            .max_by_key(|(info, i, _)| (info.effect, Reverse(self.rank_key(*i))));
        if let Some((info, i, msg)) = floor {
            if decision.effect >= info.effect {
                let _ = write!(
                    decision.reason,
                    "; rule {} could not be evaluated ({msg}), but the call is {} anyway",
                    info.id,
                    match decision.effect {
                        Effect::Deny => "denied",
                        Effect::Ask => "asked about",
                        Effect::Allow => "allowed",
                    }
                );
            } else {
                let why = format!(
                    "rule {} could not be evaluated ({msg}), and {} {} rule that cannot be evaluated {}",
                    info.id,
                    article(info.effect),
                    info.effect,
                    verb(info.effect)
                );
                tie_break = why.clone();
                decision = Decision {
                    effect: info.effect,
                    policy_id: Some(info.id.clone()),
                    reason: why,
                };
                decider = Some(i);
            }
        }
        (decision, decider, tie_break)
    }

    /// Picks the winner among ranked matches; returns the decision, its index, the tie-break.
    fn rank(&self, matching: &[usize]) -> Ranked {
        let (Some(&w), Some(winner)) = (
            matching.first(),
            matching.first().and_then(|&w| self.infos.get(w)),
        ) else {
            return (
                Decision {
                    effect: Effect::Allow,
                    policy_id: None,
                    reason: "no rule matches this call, so it is allowed".to_string(),
                },
                None,
                "no rule matches: allow".to_string(),
            );
        };
        let n = matching.len();
        let s = winner.specificity;
        let summary = self.summary(w);
        let runner_up = matching.get(1).and_then(|&i| self.infos.get(i));
        let (reason, tie_break) = match runner_up {
            None => (
                format!("{summary} is the only matching rule"),
                "only one rule matches".to_string(),
            ),
            Some(r) if r.specificity < s => (
                format!("{summary} is the most specific of {n} matching rules"),
                format!("highest specificity ({s})"),
            ),
            Some(r) if r.effect < winner.effect => {
                let tied: Vec<&PolicyInfo> = matching
                    .iter()
                    .filter_map(|&i| self.infos.get(i))
                    .filter(|i| i.specificity == s)
                    .collect();
                let mut lower: Vec<Effect> = tied
                    .iter()
                    .map(|i| i.effect)
                    .filter(|e| *e < winner.effect)
                    .collect();
                lower.sort_by(|a, b| b.cmp(a));
                lower.dedup();
                let lower: Vec<&str> = lower.iter().map(|e| e.as_str()).collect();
                let lower = lower.join(" and ");
                (
                    format!(
                        "{summary} ties with {} at specificity {s} (of {n} matching rules) and wins because {} goes before {lower}",
                        plural(tied.len().saturating_sub(1), "other rule"),
                        winner.effect
                    ),
                    format!(
                        "tie at specificity {s} went to {} over {lower}",
                        winner.effect
                    ),
                )
            }
            Some(_) => (
                format!(
                    "{summary} ties at specificity {s} with another {} rule (of {n} matching rules) and wins as the oldest",
                    winner.effect
                ),
                format!(
                    "tie at specificity {s} and {} went to the oldest rule",
                    winner.effect
                ),
            ),
        };
        (
            Decision {
                effect: winner.effect,
                policy_id: Some(winner.id.clone()),
                reason,
            },
            Some(w),
            tie_break,
        )
    }
}

/// Cedar's answers for the permit halves and the forbid halves of the buckets asked, reported
/// as if each kind had been one set: a permits-only set allows exactly when one of its permits
/// matches, and a forbids-only set always denies (a match denies; no match allows nothing).
fn diagnostics(permits: &[Response], forbids: &[Response]) -> CedarDiagnostics {
    let reasons = |rs: &[Response]| {
        let mut ids: Vec<String> = rs
            .iter()
            .flat_map(|r| r.diagnostics().reason())
            .map(ToString::to_string)
            .collect();
        ids.sort();
        ids
    };
    let mut errors: Vec<String> = permits
        .iter()
        .chain(forbids)
        .flat_map(|r| r.diagnostics().errors())
        .map(ToString::to_string)
        .collect();
    errors.sort();
    let permit_decision = if permits.iter().any(|r| r.decision() == CedarDecision::Allow) {
        CedarDecision::Allow
    } else {
        CedarDecision::Deny
    };
    CedarDiagnostics {
        permit_decision: format!("{permit_decision:?}"),
        permit_reasons: reasons(permits),
        forbid_decision: format!("{:?}", CedarDecision::Deny),
        forbid_reasons: reasons(forbids),
        errors,
    }
}
