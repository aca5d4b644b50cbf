//! The stop tools: `stop_port` and `stop_agent_ports`. Preview by default (a fresh observation,
//! the plans, and a one-use handle only when every plan is permitted); execute only with that
//! handle, after consuming it, comparing the request, re-collecting the machine and finding the
//! same effects; then the retained plans run, in order, until the first failure.
//!
//! Must never: signal anything during a preview; signal anything before the handle was
//! consumed, the request compared and every plan's effects found unchanged; run fresh plans in
//! place of the retained ones; roll back a completed stop; block the server while a stop waits
//! (execution is `Reply::Committed`, on a blocking thread: once begun it runs to its end).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::holdmap::agents::{self, Agent};
use crate::holdmap::confirm::{Request, RetainedPreview};
use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{self, PlanOptions, StopPlan, plan_port};
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::limits::HOLDMAP_HANDLE_TTL;

mod exec;
#[cfg(test)]
pub(crate) mod fake;
mod schema;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use exec::Pacer;
pub(crate) use exec::{RealPacer, execute};

pub(crate) const TOOLS: &[Tool] = &[
    Tool {
        def: stop_port_def,
        run: run_stop_port,
    },
    Tool {
        def: stop_agent_ports_def,
        run: run_stop_agent_ports,
    },
];

fn stop_port_def() -> ToolDef {
    ToolDef {
        name: "stop_port",
        title: "Stop a port's owner",
        description: "Preview the stop plan for whatever owns a port: the launcher tree, SIGTERM \
            then SIGKILL, and a check that the port is free afterwards. Defaults to dry_run: \
            true. A permitted preview returns a one-use confirmation_id (300 s, this session); \
            show the plan and get the user's authorization, then call again with dry_run: \
            false, that confirmation_id and the same port, force and allow_non_dev. Only your \
            own dev servers are permitted (others of your processes with allow_non_dev); \
            protected, foreign and unknown owners are always refused.",
        input_schema: schema::stop_port_input(),
        output_schema: schema::output(false),
        annotations: Annotations::STOPS,
    }
}

fn stop_agent_ports_def() -> ToolDef {
    ToolDef {
        name: "stop_agent_ports",
        title: "Stop the ports an agent started",
        description: "Preview one stop plan per port (and protocol) that the matching agents' \
            child processes listen on; never the agent's own listeners or protected ones. \
            Defaults to dry_run: true. A confirmation_id is issued only when every plan is \
            permitted; execute with dry_run: false, that confirmation_id and the same agent \
            and force. Execution stops at its first failure; a completed stop is not rolled \
            back. Agents are recognised by their executable or entry script (claude, codex, \
            gemini, aider …) or pid:N.",
        input_schema: schema::stop_agent_ports_input(),
        output_schema: schema::output(true),
        annotations: Annotations::STOPS,
    }
}

/// The controls both tools share.
struct Controls {
    dry_run: bool,
    confirmation_id: Option<String>,
    force: bool,
}

fn flag(args: &Map<String, Value>, key: &str, default: bool) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn controls(args: &Map<String, Value>) -> Result<Controls, Outcome> {
    let c = Controls {
        dry_run: flag(args, "dry_run", true),
        confirmation_id: args
            .get("confirmation_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        force: flag(args, "force", false),
    };
    match (c.dry_run, &c.confirmation_id) {
        (true, Some(_)) => Err(Outcome::Failed(
            "confirmation_id is only for an execution: send it with dry_run: false, or drop it \
             to preview. Nothing was stopped and the handle is still usable."
                .to_owned(),
        )),
        (false, None) => Err(Outcome::Failed(
            "dry_run: false needs the confirmation_id a preview of the same target returned. \
             Preview first (dry_run: true). Nothing was stopped."
                .to_owned(),
        )),
        _ => Ok(c),
    }
}

fn run_stop_port(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let begun = start_port(args, cx);
    later(begun, cx)
}

fn run_stop_agent_ports(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    let begun = start_agents(args, cx);
    later(begun, cx)
}

/// `stop_port` up to its execution: a preview, a refusal, or a retained preview to execute.
pub(crate) fn start_port(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Begun {
    let c = match controls(args) {
        Ok(c) => c,
        Err(o) => return Begun::Now(o),
    };
    let Some(port) = crate::holdmap::schema::port_argument(args, "port") else {
        return Begun::Now(Outcome::Failed(
            "`arguments.port` must be an integer from 1 to 65535".to_owned(),
        ));
    };
    let request = Request::Port {
        port,
        options: PlanOptions {
            force: c.force,
            allow_non_dev: flag(args, "allow_non_dev", false),
        },
    };
    begin(request, c, cx)
}

/// `stop_agent_ports` up to its execution.
pub(crate) fn start_agents(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Begun {
    let c = match controls(args) {
        Ok(c) => c,
        Err(o) => return Begun::Now(o),
    };
    let query = args
        .get("agent")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_lowercase();
    if query.is_empty() {
        return Begun::Now(Outcome::Failed(
            "`arguments.agent` must name an agent (claude, codex …) or pid:N".to_owned(),
        ));
    }
    let request = Request::Agents {
        query,
        force: c.force,
    };
    begin(request, c, cx)
}

/// An answer now, or the execution off the request loop, on a blocking thread (it waits).
fn later(begun: Begun, cx: &Cx<'_>) -> Reply {
    match begun {
        Begun::Now(o) => Reply::Now(o),
        Begun::Execute(retained) => {
            let world = Arc::clone(cx.world);
            Reply::Committed(Box::pin(async move {
                tokio::task::spawn_blocking(move || {
                    execute(world.as_ref(), &RealPacer::new(), &retained)
                })
                .await
                .unwrap_or_else(|e| {
                    Outcome::Failed(format!(
                        "The stop ended unexpectedly ({e}); the confirmation was used. Look at \
                         the port with explain_port and review a new preview before retrying."
                    ))
                })
            }))
        }
    }
}

/// What a call leads to: an answer now, or an execution of a retained preview whose handle
/// was consumed and whose request matched.
pub(crate) enum Begun {
    Now(Outcome),
    Execute(RetainedPreview),
}

/// A preview, or the synchronous start of an execution: the handle consumed first, then the
/// request compared. Everything after (fresh observation, rechecks, signals) is `execute`.
fn begin(request: Request, c: Controls, cx: &mut Cx<'_>) -> Begun {
    let Some(id) = c.confirmation_id.filter(|_| !c.dry_run) else {
        return Begun::Now(preview(request, cx));
    };
    let retained = match cx.handles.take(&id) {
        Ok(r) => r,
        Err(why) => return Begun::Now(Outcome::Failed(why.to_string())),
    };
    if retained.request != request {
        return Begun::Now(Outcome::Failed(
            "Stop target or options changed; review a new preview. Nothing was stopped, and \
             the confirmation was used."
                .to_owned(),
        ));
    }
    Begun::Execute(retained)
}

/// The plans a request leads to on `snap`, and for agents the selected agents.
pub(crate) fn plans_for(snap: &Snapshot, request: &Request) -> (Vec<Agent>, Vec<StopPlan>) {
    match request {
        Request::Port { port, options } => {
            (Vec::new(), vec![plan_port(snap, *port, None, *options)])
        }
        Request::Agents { query, force } => {
            let found = agents::matching(snap, query);
            let mut targets: Vec<_> = found.iter().flat_map(|a| a.ports.iter().copied()).collect();
            targets.sort();
            targets.dedup();
            let opts = PlanOptions {
                force: *force,
                allow_non_dev: false,
            };
            let plans = targets
                .into_iter()
                .map(|(port, protocol)| plan_port(snap, port, Some(protocol), opts))
                .collect();
            (found, plans)
        }
    }
}

/// Agents in a retained preview: by identity, sorted.
pub(crate) fn agent_ids(found: &[Agent]) -> Vec<(i32, u64)> {
    let mut ids: Vec<_> = found.iter().map(|a| (a.pid, a.start_ticks)).collect();
    ids.sort_unstable();
    ids
}

/// Whether a plan may run in this request: permitted, and for a bulk stop low risk only.
pub(crate) fn acceptable(request: &Request, p: &StopPlan) -> bool {
    p.permitted && (matches!(request, Request::Port { .. }) || p.risk == plan::Risk::Low)
}

fn agent_json(a: &Agent) -> Value {
    json!({
        "pid": a.pid,
        "start_ticks": a.start_ticks,
        "program": a.program,
        "name": a.name,
        "command": a.command,
        "ports": a.ports.iter().map(|(port, protocol)| json!({"port": port, "protocol": protocol.as_str()})).collect::<Vec<_>>(),
    })
}

fn preview(request: Request, cx: &mut Cx<'_>) -> Outcome {
    let snap = match cx.world.observe() {
        Ok(s) => s,
        Err(e) => {
            return Outcome::Failed(format!(
                "Could not read the machine to plan the stop: {e}. Nothing was stopped."
            ));
        }
    };
    let (found, plans) = plans_for(&snap, &request);
    let mut refusals: Vec<String> = plans
        .iter()
        .filter(|p| !acceptable(&request, p))
        .map(|p| {
            p.refusal.clone().unwrap_or_else(|| {
                format!(
                    "port {}: a bulk stop runs only low-risk plans ({})",
                    p.port, p.risk_reason
                )
            })
        })
        .collect();
    let bulk = matches!(request, Request::Agents { .. });
    if bulk && found.is_empty() {
        refusals.push("no running agent matches; nothing to stop".to_owned());
    } else if bulk && plans.is_empty() {
        refusals.push(
            "the matching agents' child processes hold no unprotected listening port; nothing \
             to stop"
                .to_owned(),
        );
    }
    let mut handle = None;
    if refusals.is_empty() {
        let retained = RetainedPreview {
            request,
            plans: plans.clone(),
            agents: agent_ids(&found),
        };
        match cx.handles.issue(retained) {
            Ok(id) => handle = Some(id),
            Err(why) => refusals.push(format!("no confirmation_id issued: {why}")),
        }
    }
    let summary = summarize_preview(&plans, &refusals, handle.as_deref());
    let mut out = Map::new();
    out.insert("mode".into(), json!("preview"));
    out.insert("dry_run".into(), json!(true));
    out.insert(
        "plans".into(),
        Value::Array(plans.iter().map(plan::to_json).collect()),
    );
    out.insert("permitted".into(), json!(handle.is_some()));
    out.insert("refusals".into(), json!(refusals));
    if bulk {
        out.insert(
            "agents".into(),
            Value::Array(found.iter().map(agent_json).collect()),
        );
    }
    if let Some(id) = handle {
        out.insert("confirmation_id".into(), json!(id));
        out.insert(
            "confirmation_expires_in_s".into(),
            json!(HOLDMAP_HANDLE_TTL.as_secs()),
        );
    }
    Outcome::Done {
        summary,
        structured: Value::Object(out),
    }
}

fn summarize_preview(plans: &[StopPlan], refusals: &[String], handle: Option<&str>) -> String {
    let mut lines = Vec::new();
    for p in plans {
        let procs: Vec<String> = p
            .tree
            .iter()
            .map(|m| format!("{} (pid {}, {})", m.command, m.pid, m.role.as_str()))
            .collect();
        lines.push(format!(
            "Port {} ({}): {} risk — {}. Would signal, deepest first: {}.",
            p.port,
            plan::protocol_str(p.protocol),
            p.risk.as_str(),
            p.risk_reason,
            if procs.is_empty() {
                "nothing".to_owned()
            } else {
                procs.join("; ")
            }
        ));
    }
    match handle {
        Some(id) => lines.push(format!(
            "Permitted. Show every plan above to the user and get their authorization; then \
             execute with dry_run: false and confirmation_id \"{id}\" (one use, expires in {} s), \
             with the same target and options. Commands are redacted heuristically.",
            HOLDMAP_HANDLE_TTL.as_secs()
        )),
        None => {
            lines.push(
                "Refused: no confirmation_id was issued, and nothing was stopped.".to_owned(),
            );
            lines.extend(refusals.iter().cloned());
        }
    }
    lines.join("\n")
}
