//! What the connection loop does with one request: `session` for the relay-session protocol,
//! `manage` for the management protocol, each a match that hands the request to the function
//! of its kind; and the shape of what a handled request asks the connection to do next.

use std::collections::HashSet;
use std::sync::Arc;

use crate::approval::Cause;
use crate::config::Durability;
use crate::daemon::{
    Shared,
    decide::{AskedCall, call_request},
    hold::{decide_held, settle},
    in_force::{current_budgets, current_policy, current_refusal},
    manage::agent::{agent_add, agent_list, agent_remove},
    manage::budget::{budget_remove, budget_set},
    manage::connector::{connector_remove, connector_set},
    manage::policy::{listed, policy_import, policy_remove, policy_set},
    pins::{current_drift_guard, setting_set, tools_accept, tools_listed},
    session::session_start,
    writer::Op,
};
use crate::ipc::{
    self, ManageRequest, ManageResponse, Release, SessionEnded, SessionRequest, SessionResponse,
};
use crate::journal::{Fields, Kind};
use crate::policy::budget::CallScope;
use crate::policy::context::CallContext;
use crate::policy::{self, CallRequest};
use crate::vault;

/// What a handled request asks the connection to do next; `A` is the answer type of the
/// connection's protocol.
pub(crate) enum Next<A> {
    Reply(A),
    /// Answer, then close: the peer broke the protocol.
    ReplyAndClose(A),
    /// The answer has already been queued on the connection (a held call's answer must go out
    /// before its hold can be seen, and so before any pushed word about it).
    Sent,
}

impl<A> Next<A> {
    /// The same next step, its answer turned into something else (the line it is sent as).
    pub(crate) fn map<B>(self, f: impl FnOnce(A) -> B) -> Next<B> {
        match self {
            Next::Reply(a) => Next::Reply(f(a)),
            Next::ReplyAndClose(a) => Next::ReplyAndClose(f(a)),
            Next::Sent => Next::Sent,
        }
    }
}

/// What a request of the relay-session protocol asks next.
pub(crate) type SessionNext = Next<SessionResponse>;
/// What a request of the management protocol asks next.
pub(crate) type ManageNext = Next<ManageResponse>;

/// The answer type of either protocol: each says an error the same way (`{"kind":"error"}`).
pub(crate) trait Answer {
    fn error(message: String) -> Self;
}

impl Answer for SessionResponse {
    fn error(message: String) -> Self {
        SessionResponse::Error { message }
    }
}

impl Answer for ManageResponse {
    fn error(message: String) -> Self {
        ManageResponse::Error { message }
    }
}

/// One connection as the handlers see it: its number, and its outgoing lines. Every line to
/// the peer, answer or pushed word, goes through that one `ipc::Outgoing` (written at once by
/// whichever thread has it: the connection's task, or the journal writer right after a commit),
/// so lines never interleave and an answer always precedes a word pushed after it.
pub(crate) struct ConnCtx {
    pub(crate) id: u64,
    pub(crate) out: ipc::Outgoing,
}

pub(crate) fn error<A: Answer>(message: impl Into<String>) -> Next<A> {
    Next::Reply(A::error(message.into()))
}

pub(crate) fn violation<A: Answer>(message: impl Into<String>) -> Next<A> {
    Next::ReplyAndClose(A::error(message.into()))
}

/// A request of the relay-session protocol. `image` is the executable of the relay's parent,
/// read at accept (None: unenrolled).
pub(crate) async fn session(
    state: &Arc<Shared>,
    conn: &ConnCtx,
    owned: &mut HashSet<String>,
    image: Option<&crate::os::process::FileIdentity>,
    req: SessionRequest,
) -> SessionNext {
    match req {
        SessionRequest::SessionStart {
            session_id,
            connector,
            client,
            connector_from,
        } => {
            session_start(
                state,
                owned,
                session_id,
                (connector, connector_from),
                client,
                image,
            )
            .await
        }
        SessionRequest::CallRequest {
            session_id,
            seq,
            tool,
            args_digest,
            arguments,
            arguments_omitted,
            retry_of,
        } => {
            let call = AskedCall {
                session_id,
                seq,
                tool,
                args_digest,
                arguments,
                arguments_omitted,
                retry_of,
                leaked: None,
            };
            asked_call(state, conn, owned, call).await
        }
        SessionRequest::CallOutcome {
            session_id,
            seq,
            ok,
            duration_ms,
        } => {
            report(
                state,
                conn,
                owned,
                Kind::CallOutcome,
                Fields {
                    session_id: Some(session_id),
                    seq: Some(seq),
                    ok: Some(ok),
                    duration_ms: Some(duration_ms),
                    ..Fields::default()
                },
            )
            .await
        }
        SessionRequest::Anomaly {
            session_id,
            anomaly,
        } => {
            report(
                state,
                conn,
                owned,
                Kind::Anomaly,
                Fields {
                    session_id: Some(session_id),
                    anomaly: Some(anomaly),
                    ..Fields::default()
                },
            )
            .await
        }
        SessionRequest::SecretLeak {
            session_id,
            seq,
            encoding,
            view,
            withheld,
        } => {
            crate::daemon::leak::result_leak(
                state,
                conn,
                owned,
                session_id,
                seq,
                (encoding, view, withheld),
            )
            .await
        }
        SessionRequest::ToolsListed {
            session_id,
            tools,
            unreadable,
            complete,
            too_large,
        } => {
            tools_listed(
                state,
                owned,
                session_id,
                tools,
                (unreadable, complete, too_large),
            )
            .await
        }
        SessionRequest::SessionEnd {
            session_id,
            protocol_version,
            ended,
        } => session_end(state, owned, session_id, protocol_version, ended).await,
    }
}

/// `call.request`: the arguments checked against their digest, then decided.
async fn asked_call(
    state: &Arc<Shared>,
    conn: &ConnCtx,
    owned: &HashSet<String>,
    call: AskedCall,
) -> SessionNext {
    // The arguments a rule reads must be the bytes the journal's digest names.
    if call
        .arguments
        .as_deref()
        .is_some_and(|a| crate::ids::sha256_hex(a.as_bytes()) != call.args_digest)
    {
        return violation("the arguments sent do not match their digest");
    }
    let mut call = call;
    if let Some(leak) = arguments_leak(state, owned, &call) {
        // The refusal's reason is journaled first; a journal that cannot take it decides nothing.
        let connector = session_connector(state, &call.session_id).unwrap_or_default();
        if let Err(e) = crate::daemon::leak::record_arguments_leak(
            state,
            &call.session_id,
            call.seq,
            (&connector, &call.tool),
            &leak,
        )
        .await
        {
            return Next::Reply(SessionResponse::Decision {
                session_id: call.session_id,
                seq: call.seq,
                decision: crate::ipc::Verdict::Undecided,
                policy_id: None,
                reason: format!("the call could not be recorded: {e}"),
                hold: None,
            });
        }
        call.leaked = Some(leak.reason);
    }
    let ctx = CallContext::from_call(
        call.arguments.as_deref(),
        call.arguments_omitted,
        state.clock(),
    );
    call_request(state, conn, owned, call, ctx).await
}

/// Another connector's secret in a call of a session this connection opened.
fn arguments_leak(
    state: &Shared,
    owned: &HashSet<String>,
    call: &AskedCall,
) -> Option<crate::daemon::leak::ArgumentsLeak> {
    if !owned.contains(&call.session_id) {
        return None;
    }
    let connector = session_connector(state, &call.session_id)?;
    crate::daemon::leak::in_arguments(
        state,
        &connector,
        call.arguments.as_deref(),
        call.arguments_omitted,
    )
}

fn session_connector(state: &Shared, session_id: &str) -> Option<String> {
    state
        .sessions
        .lock()
        .ok()?
        .get(session_id)
        .map(|s| s.connector.clone())
}

/// `session.end`: the session's held calls are rejected (their words pushed before this
/// answer), then its end is journaled.
async fn session_end(
    state: &Shared,
    owned: &mut HashSet<String>,
    session_id: String,
    protocol_version: Option<String>,
    ended: Option<SessionEnded>,
) -> SessionNext {
    if !owned.remove(&session_id) {
        return violation("this connection did not open that session");
    }
    if let Ok(mut s) = state.sessions.lock() {
        s.remove(&session_id);
    }
    // The relay still listens: each held call's word is pushed before this answer.
    for hold in state.approvals.take_where(|h| h.session_id == session_id) {
        let _ = settle(state, hold, Release::Rejected, Cause::SessionEnded, None).await;
    }
    one_way(
        state,
        Kind::SessionEnd,
        Fields {
            session_id: Some(session_id),
            protocol_version: protocol_version.filter(|v| !v.is_empty()),
            reason: ended.map(|e| e.describe().to_string()),
            ..Fields::default()
        },
    )
    .await
}

/// Whether `req` would change the policy, budgets or enrolments in force.
fn changes_what_is_in_force(req: &ManageRequest) -> bool {
    matches!(
        req,
        ManageRequest::PolicySet { .. }
            | ManageRequest::PolicyRemove { .. }
            | ManageRequest::BudgetSet { .. }
            | ManageRequest::BudgetRemove { .. }
            | ManageRequest::AgentAdd { .. }
            | ManageRequest::AgentRemove { .. }
            | ManageRequest::PolicyImport { dry_run: false, .. }
            | ManageRequest::ToolsAccept { .. }
            | ManageRequest::SettingSet { .. }
    )
}

/// A request of the management protocol.
pub(crate) async fn manage(state: &Arc<Shared>, conn: &ConnCtx, req: ManageRequest) -> ManageNext {
    if changes_what_is_in_force(&req)
        && let Some(refused) = changes_refused(state)
    {
        return refused;
    }
    match req {
        ManageRequest::PolicySet { effect, scope } => policy_set(state, effect, scope).await,
        ManageRequest::PolicyRemove { scope } => policy_remove(state, scope).await,
        ManageRequest::BudgetSet { calls, scope } => budget_set(state, calls, scope).await,
        ManageRequest::BudgetRemove { scope } => budget_remove(state, scope).await,
        ManageRequest::AgentAdd { name, path } => agent_add(state, name, path).await,
        ManageRequest::AgentList => agent_list(state),
        ManageRequest::AgentRemove { name } => agent_remove(state, name).await,
        ManageRequest::ConnectorSet(req) => connector_set(state, req).await,
        ManageRequest::ConnectorRemove { name } => connector_remove(state, name).await,
        ManageRequest::ConnectorList => connector_list(state).await,
        ManageRequest::PolicyList => policy_list(state).await,
        ManageRequest::PolicyExplain {
            agent,
            connector,
            tool,
            arguments,
        } => policy_explain(state, agent, connector, tool, arguments),
        ManageRequest::PolicyImport {
            file,
            text,
            dry_run,
        } => policy_import(state, file, text, dry_run).await,
        ManageRequest::PolicyExport => Next::Reply(ManageResponse::PolicyText {
            text: current_policy(state).text(),
        }),
        ManageRequest::VaultProbe => vault_probe(state).await,
        ManageRequest::Status => status(state).await,
        ManageRequest::Shutdown => shutdown(state, conn),
        ManageRequest::ApprovalList => Next::Reply(ManageResponse::HeldCalls {
            calls: state.approvals.list(),
        }),
        ManageRequest::ApprovalWatch => approval_watch(state, conn),
        ManageRequest::ApprovalDecide {
            id,
            approve,
            reason,
        } => decide_held(state, id, approve, reason).await,
        ManageRequest::ToolsAccept { connector, tool } => {
            tools_accept(state, connector, tool).await
        }
        ManageRequest::SettingSet { key, value } => setting_set(state, key, value).await,
    }
}

/// `connector.list`: the registered connectors, as the writer reads them.
async fn connector_list(state: &Shared) -> ManageNext {
    match state.writer.ask(Op::Connectors).await {
        Ok(Ok(connectors)) => Next::Reply(ManageResponse::ConnectorList { connectors }),
        Ok(Err(e)) => error(format!("the connectors cannot be read: {e}")),
        Err(e) => error(e.to_string()),
    }
}

/// `policy.list`: the policies and budgets in force.
async fn policy_list(state: &Shared) -> ManageNext {
    let rows = state.rows.lock().await;
    Next::Reply(ManageResponse::PolicyList {
        policies: rows.iter().map(listed).collect(),
        budgets: current_budgets(state).to_vec(),
        drift_guard: current_drift_guard(state).to_string(),
    })
}

/// `policy.explain`: how the set in force decides a call described by hand, and the budgets
/// whose scope it falls in.
fn policy_explain(
    state: &Shared,
    agent: Option<String>,
    connector: Option<String>,
    tool: String,
    arguments: Option<String>,
) -> ManageNext {
    if let Err(e) = policy::validate_tool_name(&tool) {
        return error(e.to_string());
    }
    for (kind, name) in [("agent", &agent), ("connector", &connector)] {
        if let Some(n) = name
            && let Err(e) = policy::validate_scope_name(kind, n)
        {
            return error(e.to_string());
        }
    }
    let set = current_policy(state);
    let ctx = CallContext::from_call(arguments.as_deref(), false, state.clock());
    let explanation = set.explain_with(
        &CallRequest {
            agent: agent.as_deref(),
            connector: connector.as_deref().unwrap_or(""),
            tool: &tool,
        },
        &ctx,
    );
    let call = CallScope {
        agent: agent.as_deref(),
        connector: connector.as_deref().unwrap_or(""),
        tool: &tool,
    };
    let budgets = current_budgets(state)
        .iter()
        .filter(|b| b.budget.scope().applies(&call))
        .cloned()
        .collect();
    Next::Reply(ManageResponse::Explain {
        explanation: Box::new(explanation),
        budgets,
    })
}

/// `vault.probe`: whether the credential store answers.
async fn vault_probe(state: &Shared) -> ManageNext {
    // A name no connector can have (a space is not allowed in one): a reachable store
    // answers "no such entry", and nothing is read or written.
    let probe = vault::run_blocking(&state.vault, |s| s.get("holdcall probe")).await;
    let where_ = state.vault.describe();
    Next::Reply(match probe {
        Ok(_) => ManageResponse::VaultStatus {
            reachable: true,
            message: format!("{where_} answers"),
        },
        Err(e) => ManageResponse::VaultStatus {
            reachable: false,
            message: format!("{where_}: {e}"),
        },
    })
}

/// `daemon.status`.
async fn status(state: &Shared) -> ManageNext {
    let head = state.writer.ask(Op::Head).await.ok().flatten();
    let sessions = state.sessions.lock().map(|s| s.len()).unwrap_or(0);
    Next::Reply(ManageResponse::Status {
        pid: std::process::id(),
        version: crate::VERSION.to_string(),
        sessions,
        policies: current_policy(state).info().len(),
        entries: head.as_ref().map(|h| h.0),
        head: head.map(|h| h.1),
        durability: match state.durability {
            Durability::Power => "power".into(),
            Durability::Process => "process".into(),
        },
        cannot_decide: current_refusal(state).or_else(|| {
            state
                .writer_fault
                .lock()
                .ok()
                .and_then(|f| f.clone())
                .map(|e| format!("the journal cannot be written, so every call is refused: {e}"))
        }),
    })
}

/// `daemon.shutdown`.
fn shutdown(state: &Shared, conn: &ConnCtx) -> ManageNext {
    // The answer must reach the CLI before the daemon stops: it is queued, then an
    // empty line (never a real one: every line ends in a newline) that the connection's
    // writer turns into the stop once everything before it is written.
    let queued = ipc::answer_line(&ManageResponse::Ok)
        .is_some_and(|line| conn.out.send(line).is_ok())
        && conn.out.send(Vec::new()).is_ok();
    if !queued {
        state.shutdown.notify_one();
    }
    Next::Sent
}

/// `approval.watch`: the held calls now, then each call held later, pushed.
fn approval_watch(state: &Shared, conn: &ConnCtx) -> ManageNext {
    // Subscribed before the list is taken, so no call held in between is missed (one
    // may be shown twice; the CLI skips ids it has shown).
    state.approvals.watch(conn.out.clone());
    Next::Reply(ManageResponse::HeldCalls {
        calls: state.approvals.list(),
    })
}

/// A change to the policy, budgets or enrolments is refused while the tables do not match the
/// journal: its diff would be taken over text the journal never recorded.
pub(crate) fn changes_refused(state: &Shared) -> Option<ManageNext> {
    current_refusal(state).map(|why| error(format!("nothing was changed: {why}")))
}

/// Journals a relay's report about a session this connection opened (and no other). A report
/// is not answered (the relay does not wait on it, and it shares a commit with the decision
/// behind it); one the journal cannot take is pushed back as `report.unrecorded`. The
/// connection reads on before the commit unless `limits::REPORTS_IN_FLIGHT_MAX` of its reports
/// are in flight, so a relay that reports without end cannot grow the writer's queue.
pub(crate) async fn report(
    state: &Shared,
    conn: &ConnCtx,
    owned: &HashSet<String>,
    kind: Kind,
    fields: Fields,
) -> SessionNext {
    if !fields
        .session_id
        .as_ref()
        .is_some_and(|id| owned.contains(id))
    {
        return violation("this connection did not open that session");
    }
    let wait = conn.out.reports_in_flight() >= crate::limits::REPORTS_IN_FLIGHT_MAX;
    if state.writer.report(kind, fields, &conn.out, wait).await {
        return Next::Sent;
    }
    let word = SessionResponse::ReportUnrecorded {
        message: format!("not recorded: {}", crate::daemon::DaemonError::WriterGone),
    };
    Next::Reply(word)
}

pub(crate) async fn one_way(state: &Shared, kind: Kind, fields: Fields) -> SessionNext {
    match state.writer.append(kind, fields).await {
        Ok(_) => Next::Reply(SessionResponse::Ok),
        Err(e) => error(format!("not recorded: {e}")),
    }
}
