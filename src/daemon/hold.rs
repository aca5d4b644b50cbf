//! Calls held for a person: holding one, a person's word on it, and settling it (journaled
//! before the relay hears the word).

use std::sync::Arc;

use crate::approval::{self, Cause, Hold};
use crate::daemon::{
    Shared,
    decide::AskedCall,
    dispatch::{ConnCtx, ManageNext, Next, SessionNext, error},
    in_force::{in_force, refresh},
    writer::AppendError,
};
use crate::ipc::{self, ManageResponse, Release, SessionResponse, Verdict};
use crate::journal::{self, Fields, Kind};
use crate::limits;
use crate::policy::context::CallContext;
use crate::policy::{CallRequest, Effect};

/// A person's word from `holdcall approve ID` / `holdcall reject ID`. Only the first word on a
/// hold counts: the hold is taken out of the registry before anything else happens.
pub(crate) async fn decide_held(
    state: &Shared,
    id: String,
    approve: bool,
    reason: Option<String>,
) -> ManageNext {
    if let Some(r) = &reason
        && let Err(e) = approval::check_reason(r)
    {
        return error(e);
    }
    if approve && reason.is_some() {
        return error("a reason goes with a rejection: `holdcall reject ID --reason TEXT`");
    }
    let Some(hold) = state.approvals.take(&id) else {
        return error(format!(
            "no call is held with id {:?}: it was decided already, timed out, ended with its session, or never existed; `holdcall approve` lists the calls held now",
            crate::text::visible(&id)
        ));
    };
    let what = format!(
        "call {} to {} (connector {}, seq {})",
        hold.id,
        crate::text::visible(&hold.tool),
        hold.connector,
        hold.seq
    );
    let recorded = if approve {
        release_approved(state, hold).await
    } else {
        settle(state, hold, Release::Rejected, Cause::Person, reason).await
    };
    match recorded {
        Ok(entry) if approve && entry.fields.decision.as_deref() != Some("approved") => {
            Next::Reply(ManageResponse::Decided {
                message: format!(
                    "approved {what}, but it was refused: {} (recorded in the journal as entry {})",
                    entry
                        .fields
                        .detail
                        .as_deref()
                        .unwrap_or("a budget has no room left"),
                    entry.chain_seq
                ),
                chain_seq: entry.chain_seq,
            })
        }
        Ok(entry) => Next::Reply(ManageResponse::Decided {
            message: format!(
                "{} {what} (recorded in the journal as entry {})",
                if approve { "approved" } else { "rejected" },
                entry.chain_seq
            ),
            chain_seq: entry.chain_seq,
        }),
        Err(e) => error(format!(
            "the decision on {what} could not be recorded in the journal, so the call was refused: {e}"
        )),
    }
}

/// Where a person's approval turns into a forward. Everything that must hold before an approved
/// call runs belongs here, before `settle`.
pub(crate) async fn release_approved(state: &Shared, hold: Hold) -> Result<journal::Entry, String> {
    let mut hold = hold;
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        // The rules are asked again with the session's counts and the policy as they are now: a
        // deny added while the call was held, or a `context.session` limit other approved calls
        // have used up meanwhile, refuses it (cause `policy`). An approval never overrides a
        // deny, and it is recorded only while that policy is still the one in force.
        let now = in_force(state);
        if let Some(why) = now.refusal {
            return settle(state, hold, Release::Rejected, Cause::Policy, Some(why)).await;
        }
        let counts = match state.sessions.lock() {
            Ok(sessions) => sessions
                .get(&hold.session_id)
                .map(|s| s.counters.snapshot(&hold.tool)),
            Err(_) => None,
        };
        let Some(counts) = counts else {
            // The session ended while the person was deciding: the relay will not forward it.
            return settle(state, hold, Release::Rejected, Cause::SessionEnded, None).await;
        };
        let ctx = CallContext::from_call(hold.arguments.as_deref(), false, state.clock())
            .with_session(counts);
        let decided = now.set.decide_with(
            &CallRequest {
                agent: hold.agent.as_deref(),
                connector: &hold.connector,
                tool: &hold.tool,
            },
            &ctx,
        );
        if decided.effect == Effect::Deny {
            let why = format!(
                "the rules in force now refuse it: {}{}",
                decided.reason,
                decided
                    .policy_id
                    .map(|p| format!(" (policy {p})"))
                    .unwrap_or_default()
            );
            return settle(state, hold, Release::Rejected, Cause::Policy, Some(why)).await;
        }
        // An approved call is charged to its session's budgets like an allowed one; a budget
        // with no room left by now refuses it, and the journal says so (cause `over-budget`).
        let charged = match state.sessions.lock() {
            Ok(mut sessions) => match sessions.get_mut(&hold.session_id) {
                Some(s) => s
                    .charge(now.budgets.iter().map(|r| &r.budget), hold.seq, &hold.tool)
                    .map_err(|r| (Cause::OverBudget, r.reason())),
                None => Err((Cause::SessionEnded, String::new())),
            },
            Err(_) => Err((Cause::SessionEnded, String::new())),
        };
        if let Err((cause, why)) = charged {
            let why = (!why.is_empty()).then_some(why);
            return settle(state, hold, Release::Rejected, cause, why).await;
        }
        let (session_id, seq, tool) = (hold.session_id.clone(), hold.seq, hold.tool.clone());
        let recorded = settle_guarded(
            state,
            hold,
            Release::Approved,
            Cause::Person,
            None,
            Some(now.generation),
        )
        .await;
        let refund = || {
            if let Ok(mut sessions) = state.sessions.lock()
                && let Some(s) = sessions.get_mut(&session_id)
            {
                // Not recorded, so not run: the charge is taken back.
                s.counters.refund(&tool);
                s.charged.remove(&seq);
            }
        };
        match recorded {
            Ok(entry) => return Ok(entry),
            Err(Unsettled::Stale(back)) if attempt < limits::STALE_DECISION_ATTEMPTS_MAX => {
                refund();
                hold = *back;
                refresh(state, now.generation).await;
            }
            Err(Unsettled::Stale(back)) => {
                refund();
                let why = "the policy kept changing while the approval was checked".to_string();
                return settle(state, *back, Release::Rejected, Cause::Policy, Some(why)).await;
            }
            Err(Unsettled::Failed(e)) => {
                refund();
                return Err(e);
            }
        }
    }
}

/// Why a word on a held call was not settled.
pub(crate) enum Unsettled {
    /// The approval was checked against a set no longer in force: nothing was recorded or
    /// pushed, and the hold comes back to be checked again.
    Stale(Box<Hold>),
    /// It could not be recorded; the relay was told `undecided`.
    Failed(String),
}

/// Resolves a hold taken out of the registry: journals `call.approval` and only after the
/// commit pushes the word to the relay that asked. A word that cannot be journaled is pushed as
/// `undecided`, which the relay refuses.
pub(crate) async fn settle(
    state: &Shared,
    hold: Hold,
    verdict: Release,
    cause: Cause,
    reason: Option<String>,
) -> Result<journal::Entry, String> {
    match settle_guarded(state, hold, verdict, cause, reason, None).await {
        Ok(entry) => Ok(entry),
        Err(Unsettled::Failed(e)) => Err(e),
        Err(Unsettled::Stale(_)) => Err("the policy in force changed".into()),
    }
}

/// `settle`, where `guard` is the generation an approval was checked under: if that set is no
/// longer in force, nothing is recorded or pushed and the hold comes back.
pub(crate) async fn settle_guarded(
    state: &Shared,
    hold: Hold,
    verdict: Release,
    cause: Cause,
    reason: Option<String>,
    guard: Option<u64>,
) -> Result<journal::Entry, Unsettled> {
    let decision = match verdict {
        Release::Approved => "approved",
        _ => "rejected",
    };
    let fields = Fields {
        session_id: Some(hold.session_id.clone()),
        seq: Some(hold.seq),
        connector: Some(hold.connector.clone()),
        tool: Some(hold.tool.clone()),
        agent: hold.agent.clone(),
        args_digest: Some(hold.args_digest.clone()),
        decision: Some(decision.into()),
        policy_id: Some(hold.id.clone()),
        reason: Some(cause.as_str().into()),
        detail: reason.clone(),
        ..Fields::default()
    };
    let recorded = match guard {
        Some(generation) => {
            state
                .writer
                .append_decided(Kind::CallApproval, fields, generation, None)
                .await
        }
        None => state
            .writer
            .append(Kind::CallApproval, fields)
            .await
            .map_err(AppendError::Failed),
    };
    let recorded = match recorded {
        Ok(entry) => Ok(entry),
        Err(AppendError::Stale) => return Err(Unsettled::Stale(Box::new(hold))),
        Err(AppendError::Failed(e)) => Err(e),
    };
    let verdict = if recorded.is_ok() {
        verdict
    } else {
        Release::Undecided
    };
    if verdict != Release::Approved
        && let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(&hold.session_id)
    {
        s.counters.note_refused();
    }
    if let Err(e) = &recorded {
        tracing::error!("the word on held call {} was not recorded: {e}", hold.id);
    }
    let word = SessionResponse::Released {
        session_id: hold.session_id,
        seq: hold.seq,
        args_digest: hold.args_digest,
        verdict,
        cause: cause.as_str().into(),
        reason,
    };
    if let Some(line) = ipc::answer_line(&word) {
        // A relay that is gone refuses the call itself.
        let _ = hold.push.send(line);
    }
    recorded.map_err(Unsettled::Failed)
}

/// Holds a call the rules sent to a person: the `held` answer goes out first, then the hold
/// becomes visible to `holdcall approve` and its timer starts. Arguments that were not sent
/// cannot be shown, so such a call is rejected at once.
pub(crate) async fn hold_call(
    state: &Arc<Shared>,
    conn: &ConnCtx,
    call: AskedCall,
    connector: String,
    agent: Option<String>,
    policy_id: Option<String>,
    reason: String,
) -> SessionNext {
    let undecided = |reason: String| {
        Next::Reply(SessionResponse::Decision {
            session_id: call.session_id.clone(),
            seq: call.seq,
            decision: Verdict::Undecided,
            policy_id: None,
            reason,
            hold: None,
        })
    };
    if state.approvals.is_full(&call.session_id) {
        return undecided(refuse_over_capacity(state, &call, &connector, agent.as_ref()).await);
    }
    let Ok(id) = approval::new_hold_id() else {
        return undecided("no random hold id could be drawn".into());
    };
    let timeout = state.approval_timeout;
    let answer = SessionResponse::Decision {
        session_id: call.session_id.clone(),
        seq: call.seq,
        decision: Verdict::Held,
        policy_id: policy_id.clone(),
        reason: reason.clone(),
        hold: Some(ipc::HoldTicket {
            id: id.clone(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
    };
    let Some(line) = ipc::answer_line(&answer) else {
        return undecided("the answer could not be written".into());
    };
    if conn.out.send(line).is_err() {
        return Next::Sent;
    }
    let now = std::time::Instant::now();
    let hold = Hold {
        id: id.clone(),
        conn: conn.id,
        session_id: call.session_id,
        seq: call.seq,
        agent,
        connector,
        tool: call.tool,
        args_digest: call.args_digest,
        arguments: call.arguments,
        policy_id,
        reason,
        held_at: now,
        deadline: now + timeout,
        push: conn.out.clone(),
        timer: None,
    };
    if call.arguments_omitted {
        let _ = settle(
            state,
            hold,
            Release::Rejected,
            Cause::ArgumentsUnknown,
            None,
        )
        .await;
        return Next::Sent;
    }
    let (session_id, seq, digest, push) = (
        hold.session_id.clone(),
        hold.seq,
        hold.args_digest.clone(),
        hold.push.clone(),
    );
    if state.approvals.insert(hold).is_err() {
        // Filled up since the check above (another connection held a call meanwhile): no word
        // can be given, so the call is refused as undecided.
        let word = SessionResponse::Released {
            session_id,
            seq,
            args_digest: digest,
            verdict: Release::Undecided,
            cause: Cause::Timeout.as_str().into(),
            reason: Some(format!(
                "more than {} calls are held already",
                limits::HELD_CALLS_MAX
            )),
        };
        if let Some(line) = ipc::answer_line(&word) {
            let _ = push.send(line);
        }
        return Next::Sent;
    }
    start_timer(state, id, timeout);
    Next::Sent
}

/// A call that cannot be held, every place being taken: its end journaled (so no held call is
/// left without a word) and counted refused. Why, for the relay.
async fn refuse_over_capacity(
    state: &Shared,
    call: &AskedCall,
    connector: &str,
    agent: Option<&String>,
) -> String {
    let why = format!(
        "{} calls are held for a person already ({} at most for one session); this one cannot be held too",
        limits::HELD_CALLS_MAX,
        limits::HELD_CALLS_PER_SESSION_MAX
    );
    // The journal gets the end of this `ask` too, so no held call is left without a word.
    let _ = state
        .writer
        .append(
            Kind::CallApproval,
            Fields {
                session_id: Some(call.session_id.clone()),
                seq: Some(call.seq),
                connector: Some(connector.to_string()),
                tool: Some(call.tool.clone()),
                agent: agent.cloned(),
                args_digest: Some(call.args_digest.clone()),
                decision: Some("rejected".into()),
                reason: Some(Cause::Capacity.as_str().into()),
                detail: Some(why.clone()),
                ..Fields::default()
            },
        )
        .await;
    if let Ok(mut sessions) = state.sessions.lock()
        && let Some(s) = sessions.get_mut(&call.session_id)
    {
        s.counters.note_refused();
    }
    why
}

/// The held call `id` is rejected (cause `timeout`) once `timeout` passes without a word.
fn start_timer(state: &Arc<Shared>, id: String, timeout: std::time::Duration) {
    let st = Arc::clone(state);
    let timer_id = id.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if let Some(hold) = st.approvals.take_expired(&timer_id) {
            let _ = settle(&st, hold, Release::Rejected, Cause::Timeout, None).await;
        }
    });
    state.approvals.set_timer(&id, timer.abort_handle());
}
