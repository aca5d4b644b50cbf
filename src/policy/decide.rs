//! The decision for one call: the Cedar request, Cedar's evaluation of the permits and of the
//! forbids of each group of the index the call can hit, and the fixed precedence wrapper (most
//! specific wins, ties to deny, then ask, then allow, then the oldest; a forbid that cannot be
//! evaluated never lets the call through).

use std::cmp::Reverse;
use std::fmt::Write as _;

use cedar_policy::{AuthorizationError, Decision as CedarDecision, Request, Response};

use crate::policy::compile::{PolicyInfo, PolicySet};
use crate::policy::context::{ArgumentsProblem, CallContext};
use crate::policy::explain::Considered;
use crate::policy::request::CallPlan;
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

/// How much of an evaluation to keep: a decision needs the winner; `policy explain` also wants
/// what became of every policy and Cedar's answers as text, which a decision does not pay for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Detail {
    Decision,
    Explain,
}

/// Cedar's responses for one call: those for the groups' permits, and for their forbids.
#[derive(Default)]
struct Answers {
    permits: Vec<Response>,
    forbids: Vec<Response>,
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
    /// The daemon's decision for one call. Pure but for the set's plan cache; Cedar
    /// evaluations of the (at most eight) groups the call can hit, then a ranking.
    pub fn decide(&self, req: &CallRequest<'_>) -> Decision {
        self.evaluate(req, &CallContext::empty(), Detail::Decision)
            .decision
    }

    /// `decide` with the call's arguments and the time. A rule that reads `context.arguments`
    /// is never evaluated on arguments that could not be read (omitted, beyond a cap,
    /// unreadable): such a deny or ask rule that could apply refuses or holds the call, and such
    /// an allow rule cannot allow it.
    pub(crate) fn decide_with(&self, req: &CallRequest<'_>, ctx: &CallContext) -> Decision {
        self.evaluate(req, ctx, Detail::Decision).decision
    }

    /// Whether the rules deny every call to this tool whatever its arguments (what hide-denied
    /// takes out of a listing): the winner on `ctx` is a deny without conditions, nothing
    /// errored, and no conditional allow or ask rule more specific than it could apply (with
    /// other arguments it might win). An `ask` is never outright.
    pub(crate) fn denies_outright(&self, req: &CallRequest<'_>, ctx: &CallContext) -> bool {
        let ev = self.evaluate(req, ctx, Detail::Decision);
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

    /// Ranking key: most specific first, then deny > ask > allow, then oldest (index order is
    /// seq order).
    fn rank_key(&self, i: usize) -> (Reverse<i64>, Reverse<Effect>, usize) {
        match self.infos.get(i) {
            Some(info) => (Reverse(info.specificity), Reverse(info.effect), i),
            None => (Reverse(i64::MIN), Reverse(Effect::Allow), i),
        }
    }

    /// "rule R (deny tool T for every agent …)": written the first time rule `i` decides a call,
    /// then kept (a reason is written for every decision; the rule never changes).
    fn summary(&self, i: usize) -> &str {
        let Some(kept) = self.summaries.get(i) else {
            return "";
        };
        kept.get_or_init(|| {
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
        })
    }

    /// The wrapper, one named step after another: the Cedar request, Cedar's answers for the
    /// groups the call can hit, what matched and what erred, the rules set aside because they
    /// read arguments that could not be read, the ranking, then the fail-closed floor.
    pub(super) fn evaluate(
        &self,
        req: &CallRequest<'_>,
        ctx: &CallContext,
        detail: Detail,
    ) -> Evaluation {
        let Some(names) = &self.names else {
            return Evaluation::refuse(
                "Holdcall could not set up its Cedar names, so every call is denied".to_string(),
                CedarDiagnostics::default(),
            );
        };
        let tool_id = format!("{}/{}", req.connector, req.tool);
        let (request, plan) = match self.request(names, req, &tool_id, ctx) {
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
        let answers = self.ask_cedar(&request, &plan, &tool_id, req);
        let cedar = if detail == Detail::Explain {
            self.diagnostics(&answers)
        } else {
            CedarDiagnostics::default()
        };

        let mut matching = match self.matching(&answers) {
            Ok(matching) => matching,
            Err(reason) => return Evaluation::refuse(reason, cedar),
        };
        let (permit_errors, mut errored) = match self.errors(&answers) {
            Ok(split) => split,
            Err(reason) => return Evaluation::refuse(reason, cedar),
        };
        let could_apply = &plan.could_apply;
        let args_problem = ctx.arguments.as_ref().err();
        if let Some(problem) = args_problem {
            self.set_aside_argument_readers(problem, could_apply, &mut matching, &mut errored);
        }
        let considered = if detail == Detail::Explain {
            self.considered(
                could_apply,
                args_problem,
                &matching,
                &errored,
                &permit_errors,
            )
        } else {
            Vec::new()
        };
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

    /// Cedar's answers for the groups this call can hit (its plan's merged group, or the index's
    /// groups): one call over each group's permits and one over its forbids, so that each
    /// policy is evaluated once and each answer's reason names every match of its kind.
    fn ask_cedar(
        &self,
        request: &Request,
        plan: &CallPlan,
        tool_id: &str,
        req: &CallRequest<'_>,
    ) -> Answers {
        let mut answers = Answers::default();
        for group in plan.groups(&self.index, tool_id, req) {
            if !group.permits.is_empty() {
                answers.permits.push(self.authorizer.is_authorized(
                    request,
                    &group.permits,
                    &plan.entities,
                ));
            }
            if !group.forbids.is_empty() {
                answers.forbids.push(self.authorizer.is_authorized(
                    request,
                    &group.forbids,
                    &plan.entities,
                ));
            }
        }
        answers
    }

    /// Every policy Cedar reported as matching. A rule Holdcall does not know is the reason to
    /// refuse the call (`Err`).
    fn matching(&self, answers: &Answers) -> Result<Vec<usize>, String> {
        let mut matching = Vec::new();
        for id in answers
            .permits
            .iter()
            .chain(&answers.forbids)
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

    /// The policies whose evaluation erred, with Cedar's message: the permits, which Cedar skips,
    /// which only takes an allow away, so they are only reported; then the forbids, which
    /// skip-on-error would make fail open, collected to escalate (`fail_closed`). A rule Holdcall
    /// does not know is the reason to refuse the call (`Err`).
    #[allow(clippy::type_complexity)]
    fn errors(
        &self,
        answers: &Answers,
    ) -> Result<(Vec<(usize, String)>, Vec<(usize, String)>), String> {
        let read = |responses: &[Response]| -> Result<Vec<(usize, String)>, String> {
            let mut found = Vec::new();
            for err in responses.iter().flat_map(|r| r.diagnostics().errors()) {
                let AuthorizationError::PolicyEvaluationError(e) = err;
                let Some(&i) = self.by_id.get(AsRef::<str>::as_ref(e.policy_id())) else {
                    return Err(format!(
                        "a rule Holdcall does not know failed in Cedar ({err}), so the call is denied"
                    ));
                };
                found.push((i, e.inner().to_string()));
            }
            Ok(found)
        };
        Ok((read(&answers.permits)?, read(&answers.forbids)?))
    }

    /// Every policy the call's groups hold could apply; Cedar said which matched or erred.
    /// Sorted, without repeats.
    fn could_apply(&self, tool_id: &str, req: &CallRequest<'_>) -> Vec<usize> {
        let mut could_apply: Vec<usize> = self
            .index
            .groups(tool_id, req)
            .flat_map(|g| g.members.iter().copied())
            .collect();
        could_apply.sort_unstable();
        could_apply.dedup();
        could_apply
    }

    /// Cedar's answers reported as if the permits and the forbids that could apply had each been
    /// one set: a permits-only set allows exactly when one of its permits matches, and a
    /// forbids-only set always denies (a match denies; no match allows nothing).
    fn diagnostics(&self, answers: &Answers) -> CedarDiagnostics {
        let reasons = |rs: &[Response]| {
            let mut ids: Vec<String> = rs
                .iter()
                .flat_map(|r| r.diagnostics().reason())
                .map(ToString::to_string)
                .collect();
            ids.sort();
            ids
        };
        let mut errors: Vec<String> = answers
            .permits
            .iter()
            .chain(&answers.forbids)
            .flat_map(|r| r.diagnostics().errors())
            .map(ToString::to_string)
            .collect();
        errors.sort();
        let permit_decision = if answers
            .permits
            .iter()
            .any(|r| r.decision() == CedarDecision::Allow)
        {
            CedarDecision::Allow
        } else {
            CedarDecision::Deny
        };
        CedarDiagnostics {
            permit_decision: format!("{permit_decision:?}"),
            permit_reasons: reasons(&answers.permits),
            forbid_decision: format!("{:?}", CedarDecision::Deny),
            forbid_reasons: reasons(&answers.forbids),
            errors,
        }
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
