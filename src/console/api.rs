//! The JSON the page reads: `/api/snapshot`, `/api/events`, `/api/session`, `/api/policy`,
//! `/api/held`, `/api/explain`. Every text another program chose is made visible here.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::Shared;
use super::daemon::{ConsoleDaemon, ask_daemon};
use super::http::{bad_request, failed, json_response, plain};
use super::query::{number, parse_query};
use super::view::View;
use crate::ipc::{ManageRequest, ManageResponse};
use crate::journal::{Entry, LogFilter, Reader};
use crate::limits;
use crate::projection::{self, Projection};
use crate::text::visible;

/// Runs a read of the journal on a blocking thread (SQLite is synchronous).
async fn read<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&Reader, &Shared) -> Result<T, crate::journal::JournalError> + Send + 'static,
) -> Result<T, Response> {
    let shared = shared.clone();
    tokio::task::spawn_blocking(move || {
        let reader = Reader::open(&shared.db)?;
        f(&reader, &shared)
    })
    .await
    .map_err(failed)?
    .map_err(failed)
}

fn opt(s: &Option<String>) -> Value {
    match s {
        Some(s) => Value::String(visible(s)),
        None => Value::Null,
    }
}

/// One entry as the page shows it: every text field made visible, its words, and its place in
/// the chain.
fn entry_json(e: &Entry, p: Option<&Projection>) -> Value {
    let f = &e.fields;
    let call = p.and_then(|p| p.call_at(e.chain_seq));
    json!({
        "chain_seq": e.chain_seq,
        "kind": e.kind,
        "occurred_at": e.occurred_at,
        "session_id": opt(&f.session_id),
        "seq": f.seq,
        "connector": opt(&f.connector),
        "tool": opt(&f.tool),
        "client": opt(&f.client),
        "agent": opt(&f.agent),
        "args_digest": opt(&f.args_digest),
        "decision": opt(&f.decision),
        "policy_id": opt(&f.policy_id),
        "reason": opt(&f.reason),
        "ok": f.ok,
        "duration_ms": f.duration_ms,
        "anomaly": opt(&f.anomaly),
        "protocol_version": opt(&f.protocol_version),
        "detail": f.detail.as_deref().map(projection::visible_lines),
        "why": visible(&projection::why(e, call)),
        "state": call.map(|c| c.state.as_str()),
        "prev_hash": e.prev_hash,
        "hash": e.hash,
    })
}

fn call_json(c: &projection::Call) -> Value {
    json!({
        "chain_seq": c.chain_seq,
        "occurred_at": c.occurred_at,
        "session_id": visible(&c.session_id),
        "seq": c.seq,
        "connector": opt(&c.connector),
        "tool": opt(&c.tool),
        "agent": opt(&c.agent),
        "decision": visible(&c.decision),
        "policy_id": opt(&c.policy_id),
        "reason": opt(&c.reason),
        "state": c.state.as_str(),
        "state_why": visible(&c.state_why),
        "hold": opt(&c.hold),
        "cause": opt(&c.cause),
        "outcome": c.outcome,
    })
}

fn session_json(s: &projection::Session) -> Value {
    json!({
        "id": visible(&s.id),
        "chain_seq": s.chain_seq,
        "state": s.state,
        "started_at": s.started_at,
        "ended_at": s.ended_at,
        "end_reason": opt(&s.end_reason),
        "connector": opt(&s.connector),
        "client": opt(&s.client),
        "agent": opt(&s.agent),
        "protocol_version": opt(&s.protocol_version),
        "calls": s.calls,
        "refused": s.refused,
        "anomalies": s.anomalies,
        "started": s.started,
    })
}

/// The overview: the last chain check, and the counts, sessions and gaps of the projection.
pub(super) fn snapshot_json(
    reader: &Reader,
    path: String,
    machine_id: Option<&str>,
    view: &mut View,
) -> Result<Value, crate::journal::JournalError> {
    view.catch_up(reader)?;
    let checked = view.verified(reader, machine_id)?;
    let report = &checked.report;
    let journal = json!({
        "path": path,
        "entries": report.entries,
        "head": report.head,
        "chain": report.state,
        "problems": report.problems.iter().take(20).map(|pr| json!({"chain_seq": pr.chain_seq, "message": pr.message})).collect::<Vec<_>>(),
        "verified_at": checked.at_text,
        "verify_every_s": limits::CONSOLE_VERIFY_INTERVAL.as_secs(),
        "cursor": view.head,
    });
    let p = &view.projection;
    let policies = reader.policies()?.len();
    let budgets = reader.budgets()?.len();
    let mut sessions: Vec<Value> = p.sessions.iter().rev().map(session_json).collect();
    sessions.truncate(limits::CONSOLE_SESSIONS_MAX);
    let newest_calls: Vec<Value> = p.calls.iter().rev().take(20).map(call_json).collect();
    // Decisions per hour, for the overview's chart.
    let mut per_hour: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
    for c in &p.calls {
        let hour = c
            .occurred_at
            .get(..13)
            .unwrap_or(&c.occurred_at)
            .to_string();
        *per_hour
            .entry(hour)
            .or_default()
            .entry(c.state.as_str())
            .or_insert(0) += 1;
    }
    let gaps = &p.gaps;
    Ok(json!({
        "journal": journal,
        "counts": p.counts(),
        "per_hour": per_hour,
        "newest_calls": newest_calls,
        "sessions": sessions,
        "gaps": {
            "unfinished_sessions": gaps.unfinished_sessions.iter().map(|s| visible(s)).collect::<Vec<_>>(),
            "calls_without_outcome": gaps.calls_without_outcome.iter().map(|(s, seq, at)| json!({"session_id": visible(s), "seq": seq, "chain_seq": at})).collect::<Vec<_>>(),
            "entries_without_call": gaps.entries_without_call,
            "entries_without_session": gaps.entries_without_session,
            "anomalies": gaps.anomalies,
        },
        "policy": {"rules": policies, "budgets": budgets},
    }))
}

/// One page of entries after `after`, each with what became of its call (from the view).
pub(super) fn events_json(
    reader: &Reader,
    view: &mut View,
    after: i64,
    limit: usize,
) -> Result<Value, crate::journal::JournalError> {
    let entries = reader.entries_after(after, limit)?;
    view.rows_read += entries.len();
    // Read after the page, so the projection holds every entry of it that is new enough.
    view.catch_up(reader)?;
    let cursor = entries.last().map_or(after, |e| e.chain_seq);
    Ok(json!({
        "events": entries.iter().map(|e| entry_json(e, Some(&view.projection))).collect::<Vec<_>>(),
        "cursor": cursor,
    }))
}

pub(super) async fn api_snapshot(State(shared): State<Arc<Shared>>) -> Response {
    let snap = read(&shared, |reader, shared| {
        snapshot_json(
            reader,
            shared.db.display().to_string(),
            shared.machine_id.as_deref(),
            &mut shared.view(),
        )
    })
    .await;
    let mut snap = match snap {
        Ok(v) => v,
        Err(r) => return r,
    };
    let held = match ask_daemon(&shared.home, &ManageRequest::ApprovalList).await {
        Ok(ManageResponse::HeldCalls { calls }) => json!({"available": true, "count": calls.len()}),
        Ok(_) => json!({"available": false, "reason": "the daemon sent an unexpected answer"}),
        Err(e) => {
            json!({"available": false, "reason": e.say(), "running": !matches!(e, ConsoleDaemon::NotRunning)})
        }
    };
    if let Some(o) = snap.as_object_mut() {
        o.insert("held".into(), held);
    }
    json_response(&snap)
}

pub(super) async fn api_events(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["after", "limit"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let (after, limit) = match (number(&q, "after"), number(&q, "limit")) {
        (Ok(a), Ok(l)) => (a.unwrap_or(0), l),
        (Err(why), _) | (_, Err(why)) => return bad_request(&why),
    };
    let limit = match limit.and_then(|l| usize::try_from(l).ok()) {
        Some(l) if (1..=limits::CONSOLE_EVENTS_MAX).contains(&l) => l,
        _ => limits::CONSOLE_EVENTS_MAX,
    };
    let v = read(&shared, move |reader, shared| {
        events_json(reader, &mut shared.view(), after, limit)
    })
    .await;
    match v {
        Ok(v) => json_response(&v),
        Err(r) => r,
    }
}

/// One session's summary and its newest `CONSOLE_SESSION_EVENTS_MAX` entries, with how many
/// earlier ones are not shown; None when no entry names it.
pub(super) fn session_page(
    reader: &Reader,
    id: &str,
) -> Result<Option<Value>, crate::journal::JournalError> {
    let entries: Vec<Entry> = reader
        .entries(&LogFilter {
            session: Some(id.to_string()),
            ..LogFilter::default()
        })?
        .into_iter()
        .filter(|e| e.fields.session_id.as_deref() == Some(id))
        .collect();
    let p = Projection::build(&entries);
    let more = entries
        .len()
        .saturating_sub(limits::CONSOLE_SESSION_EVENTS_MAX);
    Ok(p.sessions.first().map(|s| {
        json!({
            "session": session_json(s),
            "events": entries.iter().skip(more).map(|e| entry_json(e, Some(&p))).collect::<Vec<_>>(),
            "earlier_not_shown": more,
        })
    }))
}

/// The newest `CONSOLE_POLICY_HISTORY_MAX` policy changes, newest first, and how many older
/// ones are not shown.
pub(super) fn policy_history(
    reader: &Reader,
) -> Result<(Vec<Value>, usize), crate::journal::JournalError> {
    let changes = reader.entries(&LogFilter {
        kind: Some("policy.change".into()),
        ..LogFilter::default()
    })?;
    let older = changes
        .len()
        .saturating_sub(limits::CONSOLE_POLICY_HISTORY_MAX);
    let history = changes
        .iter()
        .rev()
        .take(limits::CONSOLE_POLICY_HISTORY_MAX)
        .map(|e| {
            json!({
                "chain_seq": e.chain_seq,
                "occurred_at": e.occurred_at,
                "reason": opt(&e.fields.reason),
                "diff": e.fields.detail.as_deref().map(projection::visible_lines),
            })
        })
        .collect();
    Ok((history, older))
}

pub(super) async fn api_session(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["id"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let Some(id) = q.get("id").cloned() else {
        return bad_request("id is required");
    };
    if id.is_empty()
        || id.len() > 128
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return bad_request("id must be 1 to 128 letters, digits, - or _");
    }
    let v = read(&shared, move |reader, _| session_page(reader, &id)).await;
    match v {
        Ok(Some(v)) => json_response(&v),
        Ok(None) => plain(StatusCode::NOT_FOUND, "no entries for that session"),
        Err(r) => r,
    }
}

pub(super) async fn api_policy(State(shared): State<Arc<Shared>>) -> Response {
    let v = read(&shared, |reader, _| {
        let rules: Vec<Value> = reader
            .policies()?
            .iter()
            .map(|r| {
                json!({
                    "id": visible(&r.id),
                    "seq": r.seq,
                    "source": visible(&r.source),
                    "effect": r.effect,
                    "specificity": r.specificity,
                    "text": projection::visible_lines(&r.text),
                    "created_at": r.created_at,
                })
            })
            .collect();
        let budgets = serde_json::to_value(reader.budgets()?).unwrap_or(Value::Null);
        let stored_agents: Vec<(String, String, String)> = reader
            .agents()?
            .into_iter()
            .map(|a| (a.name, a.path, a.enrolled_at))
            .collect();
        let connectors: Vec<Value> = reader
            .connectors()?
            .iter()
            .map(|c| {
                json!({
                    "name": visible(&c.name),
                    "env_key": visible(&c.env_key),
                    "command": visible(&c.command.join(" ")),
                    "pass_env": visible(&c.pass_env.join(" ")),
                    "updated_at": visible(&c.updated_at),
                })
            })
            .collect();
        let history = policy_history(reader)?;
        Ok((rules, budgets, stored_agents, connectors, history))
    })
    .await;
    let (rules, budgets, stored_agents, connectors, (history, older)) = match v {
        Ok(v) => v,
        Err(r) => return r,
    };
    // Whether each enrolment is still current is the daemon's check (it stats each file again).
    let (agents, agents_note) = match ask_daemon(&shared.home, &ManageRequest::AgentList).await {
        Ok(ManageResponse::AgentList { agents }) => (
            agents
                .iter()
                .map(|a| {
                    json!({
                        "name": visible(&a.name),
                        "path": visible(&a.path),
                        "state": a.state,
                        "stale_because": a.stale_because.as_deref().map(visible),
                        "enrolled_at": a.enrolled_at,
                    })
                })
                .collect::<Vec<_>>(),
            None,
        ),
        other => (
            stored_agents
                .iter()
                .map(|(name, path, at)| {
                    json!({
                        "name": visible(name),
                        "path": visible(path),
                        "state": "unknown",
                        "enrolled_at": at,
                    })
                })
                .collect(),
            Some(match other {
                Err(e) => e.say(),
                Ok(_) => "the daemon sent an unexpected answer".into(),
            }),
        ),
    };
    json_response(&json!({
        "rules": rules,
        "budgets": budgets,
        "agents": agents,
        "agents_note": agents_note,
        "connectors": connectors,
        "history": history,
        "history_not_shown": older,
    }))
}

pub(super) async fn api_held(State(shared): State<Arc<Shared>>) -> Response {
    let v = match ask_daemon(&shared.home, &ManageRequest::ApprovalList).await {
        Ok(ManageResponse::HeldCalls { calls }) => json!({
            "available": true,
            "held": calls.iter().map(|c| {
                let args = c.arguments.as_deref().unwrap_or("");
                json!({
                    "id": visible(&c.id),
                    "session_id": visible(&c.session_id),
                    "seq": c.seq,
                    "agent": opt(&c.agent),
                    "connector": visible(&c.connector),
                    "tool": visible(&c.tool),
                    "args_digest": c.args_digest,
                    "arguments": c.arguments.as_ref().map(|_| visible(args)),
                    "non_ascii": crate::text::non_ascii_note(args),
                    "policy_id": opt(&c.policy_id),
                    "reason": visible(&c.reason),
                    "age_ms": c.age_ms,
                    "left_ms": c.left_ms,
                    "approve": format!("holdcall approve {}", visible(&c.id)),
                    "reject": format!("holdcall reject {}", visible(&c.id)),
                })
            }).collect::<Vec<_>>(),
        }),
        Ok(_) => {
            json!({"available": false, "reason": "the daemon sent an unexpected answer", "held": []})
        }
        Err(e) => json!({"available": false, "reason": e.say(), "held": []}),
    };
    json_response(&v)
}

pub(super) async fn api_explain(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let q = match parse_query(uri.query(), &["tool", "agent", "connector", "arguments"]) {
        Ok(q) => q,
        Err(why) => return bad_request(&why),
    };
    let given = |name: &str| q.get(name).filter(|v| !v.is_empty()).cloned();
    let Some(tool) = given("tool") else {
        return bad_request("tool is required");
    };
    if tool.len() > limits::TOOL_NAME_BYTES_MAX {
        return bad_request(&format!(
            "tool is longer than {} bytes",
            limits::TOOL_NAME_BYTES_MAX
        ));
    }
    for name in ["agent", "connector"] {
        if given(name).is_some_and(|v| v.chars().count() > limits::SCOPE_NAME_CHARS_MAX) {
            return bad_request(&format!(
                "{name} is longer than {} characters",
                limits::SCOPE_NAME_CHARS_MAX
            ));
        }
    }
    let arguments = given("arguments");
    if let Some(a) = &arguments {
        if a.len() > limits::CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX {
            return bad_request(&format!(
                "arguments are longer than {} bytes",
                limits::CONSOLE_EXPLAIN_ARGUMENTS_BYTES_MAX
            ));
        }
        if serde_json::from_str::<Value>(a).map_or(true, |v| !v.is_object()) {
            return bad_request("arguments must be a JSON object");
        }
    }
    let req = ManageRequest::PolicyExplain {
        agent: given("agent"),
        connector: given("connector"),
        tool,
        arguments,
    };
    let v = match ask_daemon(&shared.home, &req).await {
        Ok(ManageResponse::Explain {
            explanation,
            budgets,
        }) => json!({"available": true, "explanation": explanation, "budgets": budgets}),
        Ok(_) => json!({"available": false, "reason": "the daemon sent an unexpected answer"}),
        Err(e) => json!({"available": false, "reason": e.say()}),
    };
    json_response(&v)
}
