//! The per-connection request loop's answers: one function per request kind, and the shape of
//! what a handled request asks the connection to do next.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use crate::agents;
use crate::approval::{self, Cause};
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
    session::session_start,
    writer::Op,
};
use crate::ipc::{Release, Request, Response};
use crate::journal::{Fields, Kind};
use crate::policy::budget::CallScope;
use crate::policy::context::CallContext;
use crate::policy::{self, CallRequest};
use crate::vault;

/// What a handled request asks the connection to do next.
pub(crate) enum Next {
    Reply(Response),
    /// Answer, then close: the peer broke the protocol.
    ReplyAndClose(Response),
    /// The answer has already been queued on the connection (a held call's answer must go out
    /// before its hold can be seen, and so before any pushed word about it).
    Sent,
}

/// One connection as the handlers see it: its number, and its queue of outgoing lines. Every
/// line to the peer, answer or pushed word, goes through that one queue, so lines never
/// interleave and an answer always precedes a word pushed after it. The queue holds at most one
/// answer (a peer asks one thing at a time) plus one pushed line per held call or new hold
/// watched, each bounded by `limits::HELD_CALLS_MAX`.
pub(crate) struct ConnCtx {
    pub(crate) id: u64,
    pub(crate) out: UnboundedSender<Vec<u8>>,
}

pub(crate) fn error(message: impl Into<String>) -> Next {
    Next::Reply(Response::Error {
        message: message.into(),
    })
}

pub(crate) fn violation(message: impl Into<String>) -> Next {
    Next::ReplyAndClose(Response::Error {
        message: message.into(),
    })
}

/// `image` is the executable of the relay's parent, read at accept (None: unenrolled).
pub(crate) async fn handle(
    state: &Arc<Shared>,
    conn: &ConnCtx,
    owned: &mut HashSet<String>,
    image: Option<&agents::Identity>,
    req: Request,
) -> Next {
    let changes_what_is_in_force = matches!(
        &req,
        Request::PolicySet { .. }
            | Request::PolicyRemove { .. }
            | Request::BudgetSet { .. }
            | Request::BudgetRemove { .. }
            | Request::AgentAdd { .. }
            | Request::AgentRemove { .. }
            | Request::PolicyImport { dry_run: false, .. }
    );
    if changes_what_is_in_force && let Some(refused) = changes_refused(state) {
        return refused;
    }
    match req {
        Request::SessionStart {
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
        Request::CallRequest {
            session_id,
            seq,
            tool,
            args_digest,
            arguments,
            arguments_omitted,
            retry_of,
        } => {
            // The arguments a rule reads must be the bytes the journal's digest names.
            if arguments
                .as_deref()
                .is_some_and(|a| crate::frame::sha256_hex(a.as_bytes()) != args_digest)
            {
                return violation("the arguments sent do not match their digest");
            }
            let ctx =
                CallContext::from_call(arguments.as_deref(), arguments_omitted, state.clock());
            let call = AskedCall {
                session_id,
                seq,
                tool,
                args_digest,
                arguments,
                arguments_omitted,
                retry_of,
            };
            call_request(state, conn, owned, call, ctx).await
        }
        Request::CallOutcome {
            session_id,
            seq,
            ok,
            duration_ms,
        } => {
            report(
                state,
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
        Request::Anomaly {
            session_id,
            anomaly,
        } => {
            report(
                state,
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
        Request::SessionEnd {
            session_id,
            protocol_version,
            ended,
        } => {
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
        Request::PolicySet { effect, scope } => policy_set(state, effect, scope).await,
        Request::PolicyRemove { scope } => policy_remove(state, scope).await,
        Request::BudgetSet { calls, scope } => budget_set(state, calls, scope).await,
        Request::BudgetRemove { scope } => budget_remove(state, scope).await,
        Request::AgentAdd { name, path } => agent_add(state, name, path).await,
        Request::AgentList => agent_list(state),
        Request::AgentRemove { name } => agent_remove(state, name).await,
        Request::ConnectorSet(req) => connector_set(state, req).await,
        Request::ConnectorRemove { name } => connector_remove(state, name).await,
        Request::ConnectorList => match state.writer.ask(Op::Connectors).await {
            Ok(Ok(connectors)) => Next::Reply(Response::ConnectorList { connectors }),
            Ok(Err(e)) => error(format!("the connectors cannot be read: {e}")),
            Err(e) => error(e.to_string()),
        },
        Request::PolicyList => {
            let rows = state.rows.lock().await;
            Next::Reply(Response::PolicyList {
                policies: rows.iter().map(listed).collect(),
                budgets: current_budgets(state).to_vec(),
            })
        }
        Request::PolicyExplain {
            agent,
            connector,
            tool,
            arguments,
        } => {
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
            Next::Reply(Response::Explain {
                explanation: Box::new(explanation),
                budgets,
            })
        }
        Request::PolicyImport {
            file,
            text,
            dry_run,
        } => policy_import(state, file, text, dry_run).await,
        Request::PolicyExport => Next::Reply(Response::PolicyText {
            text: current_policy(state).text(),
        }),
        Request::Hello => Next::Reply(Response::Hello(state.serves.clone())),
        Request::VaultProbe => {
            // A name no connector can have (a space is not allowed in one): a reachable store
            // answers "no such entry", and nothing is read or written.
            let probe = vault::run_blocking(&state.vault, |s| s.get("holdcall probe")).await;
            let where_ = state.vault.describe();
            Next::Reply(match probe {
                Ok(_) => Response::VaultStatus {
                    reachable: true,
                    message: format!("{where_} answers"),
                },
                Err(e) => Response::VaultStatus {
                    reachable: false,
                    message: format!("{where_}: {e}"),
                },
            })
        }
        Request::Status => {
            let head = state.writer.ask(Op::Head).await.ok().flatten();
            let sessions = state.sessions.lock().map(|s| s.len()).unwrap_or(0);
            Next::Reply(Response::Status {
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
                        .map(|e| {
                            format!("the journal cannot be written, so every call is refused: {e}")
                        })
                }),
            })
        }
        Request::Shutdown => {
            // The answer must reach the CLI before the daemon stops: it is queued, then an
            // empty line (never a real one: every line ends in a newline) that the connection's
            // writer turns into the stop once everything before it is written.
            let queued = approval::pushed_line(&Response::Ok)
                .is_some_and(|line| conn.out.send(line).is_ok())
                && conn.out.send(Vec::new()).is_ok();
            if !queued {
                state.shutdown.notify_one();
            }
            Next::Sent
        }
        Request::ApprovalList => Next::Reply(Response::HeldCalls {
            calls: state.approvals.list(),
        }),
        Request::ApprovalWatch => {
            // Subscribed before the list is taken, so no call held in between is missed (one
            // may be shown twice; the CLI skips ids it has shown).
            state.approvals.watch(conn.out.clone());
            Next::Reply(Response::HeldCalls {
                calls: state.approvals.list(),
            })
        }
        Request::ApprovalDecide {
            id,
            approve,
            reason,
        } => decide_held(state, id, approve, reason).await,
    }
}

/// A change to the policy, budgets or enrolments is refused while the tables do not match the
/// journal: its diff would be taken over text the journal never recorded.
pub(crate) fn changes_refused(state: &Shared) -> Option<Next> {
    current_refusal(state).map(|why| error(format!("nothing was changed: {why}")))
}

/// Journals a relay's report about a session this connection opened (and no other).
pub(crate) async fn report(
    state: &Shared,
    owned: &HashSet<String>,
    kind: Kind,
    fields: Fields,
) -> Next {
    if !fields
        .session_id
        .as_ref()
        .is_some_and(|id| owned.contains(id))
    {
        return violation("this connection did not open that session");
    }
    one_way(state, kind, fields).await
}

pub(crate) async fn one_way(state: &Shared, kind: Kind, fields: Fields) -> Next {
    match state.writer.append(kind, fields).await {
        Ok(_) => Next::Reply(Response::Ok),
        Err(e) => error(format!("not recorded: {e}")),
    }
}
