//! The decision on one call: the rules in force, narrowed by the budgets, journaled before the
//! answer goes out.

use std::collections::HashSet;
use std::sync::Arc;

use crate::daemon::{
    Session, Shared,
    dispatch::{ConnCtx, Next, SessionNext, violation},
    hold::hold_call,
    in_force::{InForceNow, in_force, refresh},
    writer::AppendError,
};
use crate::ipc::{self, SessionResponse, Verdict};
use crate::journal::{Fields, Kind};
use crate::limits;
use crate::policy::budget::Budget;
use crate::policy::context::CallContext;
use crate::policy::{self, CallRequest, Effect};

/// One call as the relay described it.
pub(crate) struct AskedCall {
    pub(crate) session_id: String,
    pub(crate) seq: i64,
    pub(crate) tool: String,
    pub(crate) args_digest: String,
    pub(crate) arguments: Option<String>,
    pub(crate) arguments_omitted: bool,
    /// The call this one retries (2026-07-28 `inputResponses`), as the relay saw it.
    pub(crate) retry_of: Option<i64>,
    /// Why the call is refused whatever the rules say: its arguments carry another connector's
    /// secret (`daemon::leak`), already journaled as `secret.leak`.
    pub(crate) leaked: Option<String>,
}

/// The decision on one call once the budgets have had their say.
pub(crate) struct Ruling {
    pub(crate) verdict: Verdict,
    pub(crate) word: String,
    pub(crate) policy_id: Option<String>,
    pub(crate) reason: String,
    /// Whether the call was charged (so a failed journal write must refund it).
    pub(crate) charged: bool,
}

pub(crate) async fn call_request(
    state: &Arc<Shared>,
    conn: &ConnCtx,
    owned: &HashSet<String>,
    call: AskedCall,
    ctx: CallContext,
) -> SessionNext {
    let (session_id, seq) = (call.session_id.clone(), call.seq);
    let (tool, args_digest) = (call.tool.clone(), call.args_digest.clone());
    let retry_of = call.retry_of;
    let leaked = call.leaked.clone();
    let (connector, agent) = match admit(state, owned, &session_id, seq) {
        Ok(x) => x,
        Err(why) => return violation(why),
    };
    let undecided = |reason: String| {
        Next::Reply(SessionResponse::Decision {
            session_id: session_id.clone(),
            seq,
            decision: Verdict::Undecided,
            policy_id: None,
            reason,
            hold: None,
        })
    };
    if let Err(e) = policy::validate_tool_name(&tool) {
        return undecided(format!("the tool name cannot be decided: {e}"));
    }
    if args_digest.len() != 64 || !args_digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return violation("args_digest is a SHA-256 in hex");
    }
    let mut ctx = ctx;
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        // The set in force, its budgets (borrowed, never copied, on the decision path) and the
        // generation they belong to: the writer records the decision only under that generation.
        let now = in_force(state);
        let asked = CallRequest {
            agent: agent.as_deref(),
            connector: &connector,
            tool: &tool,
        };
        let v = match rule(
            state,
            &now,
            &session_id,
            seq,
            &asked,
            (retry_of, leaked.as_deref()),
            ctx,
        ) {
            Ok((v, read)) => {
                ctx = read;
                v
            }
            Err(why) => return violation(why),
        };
        // Unless the call is held (its answer goes out with its hold), the writer sends the
        // answer itself the moment the entry is committed.
        let answer = (v.verdict != Verdict::Held)
            .then(|| {
                ipc::answer_line(&SessionResponse::Decision {
                    session_id: session_id.clone(),
                    seq,
                    decision: v.verdict,
                    policy_id: v.policy_id.clone(),
                    reason: v.reason.clone(),
                    hold: None,
                })
            })
            .flatten()
            .map(|line| (conn.out.clone(), line));
        let sent_by_writer = answer.is_some();
        let recorded = state
            .writer
            .append_decided(
                Kind::CallRequest,
                Fields {
                    session_id: Some(session_id.clone()),
                    seq: Some(seq),
                    connector: Some(connector.clone()),
                    tool: Some(tool.clone()),
                    agent: agent.clone(),
                    args_digest: Some(args_digest.clone()),
                    decision: Some(v.word.clone()),
                    policy_id: v.policy_id.clone(),
                    reason: Some(v.reason.clone()),
                    // The definition the model was shown, as the pins say (decision 0016).
                    detail: Some(serde_json::json!({ "definition": &ctx.definition }).to_string()),
                    ..Fields::default()
                },
                now.generation,
                answer,
            )
            .await;
        // The answer goes out only after the entry is committed; a call that was not recorded is
        // not decided, and not charged.
        return match recorded {
            Ok(_) if v.verdict == Verdict::Held => {
                hold_call(state, conn, call, connector, agent, v.policy_id, v.reason).await
            }
            // Already sent by the writer, right after the commit.
            Ok(_) if sent_by_writer => Next::Sent,
            Ok(_) => Next::Reply(SessionResponse::Decision {
                session_id,
                seq,
                decision: v.verdict,
                policy_id: v.policy_id,
                reason: v.reason,
                hold: None,
            }),
            Err(AppendError::Stale) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                // Decided with a set that is no longer in force: forgotten, and decided again
                // with the one that is.
                forget_stale(state, &session_id, seq, &tool, &v);
                refresh(state, now.generation).await;
                continue;
            }
            Err(e) => {
                take_back_unrecorded(state, &session_id, seq, &tool, &v);
                undecided(format!("the call could not be recorded: {e}"))
            }
        };
    }
}

/// A call's session, checked: this connection opened it, it is still open, and the call's
/// number follows the last one (then it is the last one). Its connector and agent.
fn admit(
    state: &Shared,
    owned: &HashSet<String>,
    session_id: &str,
    seq: i64,
) -> Result<(String, Option<String>), String> {
    if !owned.contains(session_id) {
        return Err("this connection did not open that session".into());
    }
    let Ok(mut sessions) = state.sessions.lock() else {
        return Err("the session table is unavailable".into());
    };
    let Some(s) = sessions.get_mut(session_id) else {
        return Err("that session has ended".into());
    };
    if seq < 1 || seq <= s.last_seq {
        return Err(format!(
            "call numbers start at 1 and only increase; got {seq} after {}",
            s.last_seq
        ));
    }
    s.last_seq = seq;
    Ok((s.connector.clone(), s.agent.clone()))
}

/// The ruling on one call under what is in force `now`, counted in its session: `undecided`
/// while nothing may be decided, else the rules (reading the session's counts, put in `ctx`)
/// narrowed by the budgets. `ctx` comes back with the counts it read.
fn rule(
    state: &Shared,
    now: &InForceNow,
    session_id: &str,
    seq: i64,
    asked: &CallRequest,
    (retry_of, leaked): (Option<i64>, Option<&str>),
    ctx: CallContext,
) -> Result<(Ruling, CallContext), String> {
    let Ok(mut sessions) = state.sessions.lock() else {
        return Err("the session table is unavailable".into());
    };
    let Some(s) = sessions.get_mut(session_id) else {
        return Err("that session has ended".into());
    };
    if let Some(why) = &now.refusal {
        s.counters.note_decided();
        s.counters.note_refused();
        let v = Ruling {
            verdict: Verdict::Undecided,
            word: "undecided".into(),
            policy_id: None,
            reason: why.clone(),
            charged: false,
        };
        return Ok((v, ctx));
    }
    // Another connector's secret in the arguments: refused before any rule is asked, so no
    // allow (and no charge) can follow.
    if let Some(why) = leaked {
        s.counters.note_decided();
        s.counters.note_refused();
        let v = Ruling {
            verdict: Verdict::Deny,
            word: "deny".into(),
            policy_id: None,
            reason: why.to_string(),
            charged: false,
        };
        return Ok((v, ctx));
    }
    let ctx = ctx
        .with_session(s.counters.snapshot(asked.tool))
        .with_definition(crate::daemon::pins::definition_of(state, s, asked.tool));
    let decision = crate::daemon::pins::guarded(
        crate::daemon::pins::current_drift_guard(state),
        &ctx.definition,
        asked.tool,
        now.set.decide_with(asked, &ctx),
    );
    let v = budget_verdict(
        s,
        now.budgets.iter().map(|r| &r.budget),
        seq,
        asked.tool,
        retry_of,
        decision.effect,
        decision.policy_id,
        decision.reason,
    );
    Ok((v, ctx))
}

/// A ruling made with a set no longer in force is forgotten from its session's counts (and
/// its charge taken back), to be ruled on again.
fn forget_stale(state: &Shared, session_id: &str, seq: i64, tool: &str, v: &Ruling) {
    if let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(session_id)
    {
        s.counters.forget_decided();
        if v.charged {
            s.counters.refund(tool);
            s.charged.remove(&seq);
        }
        if matches!(
            v.verdict,
            Verdict::Deny | Verdict::OverBudget | Verdict::Undecided
        ) {
            s.counters.forget_refused();
        }
    }
}

/// A ruling the journal could not record: not run, so not charged, and an allow counts as
/// refused.
fn take_back_unrecorded(state: &Shared, session_id: &str, seq: i64, tool: &str, v: &Ruling) {
    if let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(session_id)
    {
        if v.charged {
            s.counters.refund(tool);
            s.charged.remove(&seq);
        }
        if v.verdict == Verdict::Allow {
            s.counters.note_refused();
        }
    }
}

/// The rules' decision, narrowed by the budgets: an allow is charged (or refused `over-budget`
/// if a budget has no room), a retry of an allowed call is allowed without a second charge, and
/// everything else is counted as refused. Every call counts as decided.
#[allow(clippy::too_many_arguments)]
pub(crate) fn budget_verdict<'a>(
    s: &mut Session,
    budgets: impl IntoIterator<Item = &'a Budget>,
    seq: i64,
    tool: &str,
    retry_of: Option<i64>,
    effect: Effect,
    policy_id: Option<String>,
    reason: String,
) -> Ruling {
    s.counters.note_decided();
    let refused = |s: &mut Session, verdict: Verdict, word: &str, policy_id, reason| {
        s.counters.note_refused();
        Ruling {
            verdict,
            word: word.to_string(),
            policy_id,
            reason,
            charged: false,
        }
    };
    match effect {
        // A held call is neither charged nor refused yet: `release_approved` charges it, and a
        // rejection counts it as refused.
        Effect::Ask => Ruling {
            verdict: Verdict::Held,
            word: "ask".into(),
            policy_id,
            reason,
            charged: false,
        },
        Effect::Deny => refused(s, Verdict::Deny, "deny", policy_id, reason),
        Effect::Allow => {
            // A retry is the same call only if the session did charge that call, for this tool.
            let retry = retry_of
                .filter(|orig| *orig < seq && s.charged.get(orig).is_some_and(|t| t == tool));
            if let Some(orig) = retry {
                return Ruling {
                    verdict: Verdict::Allow,
                    word: "allow".into(),
                    policy_id,
                    reason: format!("{reason}; retry of call {orig}, not charged again"),
                    charged: false,
                };
            }
            match s.charge(budgets, seq, tool) {
                Ok(()) => Ruling {
                    verdict: Verdict::Allow,
                    word: "allow".into(),
                    policy_id,
                    reason,
                    charged: true,
                },
                Err(r) => refused(
                    s,
                    Verdict::OverBudget,
                    OVER_BUDGET,
                    r.policy_id(),
                    r.reason(),
                ),
            }
        }
    }
}

/// The journal's decision word for a call the rules allowed and a budget refused.
pub(crate) const OVER_BUDGET: &str = "over-budget";
