//! Agent enrolment: adding, listing and removing the executables that name agents (the
//! identity itself, and deriving it, live in `agents`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::agents::{self, Enrolment};
use crate::daemon::{
    Shared,
    dispatch::{ManageNext, Next, error},
    in_force::current_budgets,
    writer::Op,
};
use crate::ipc::{self, ManageResponse};
use crate::journal::{AgentChange, Fields};
use crate::limits;
use crate::policy::{self};

pub(crate) fn current_agents(state: &Shared) -> Arc<Vec<Enrolment>> {
    match state.agents.read() {
        Ok(a) => Arc::clone(&a),
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    }
}

pub(crate) fn is_enrolled(state: &Shared, name: &str) -> bool {
    current_agents(state).iter().any(|e| e.name == name)
}

pub(crate) fn not_enrolled(name: &str) -> String {
    format!("agent {name} is not enrolled; run `holdcall agent add {name} PATH` first")
}

/// An error's text with its help, for an answer the CLI prints as is.
pub(crate) fn with_help(e: &(dyn miette::Diagnostic + Send + Sync)) -> String {
    match e.help() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    }
}

/// The `agent.change` entry's `detail`: the enrolment as JSON, and the one it replaced.
pub(crate) fn agent_detail(
    path: &str,
    id: &crate::os::process::FileIdentity,
    sha256: &str,
    was: Option<&Enrolment>,
) -> String {
    let one = |path: &str, id: &crate::os::process::FileIdentity, sha256: &str| {
        serde_json::json!({
            "path": path,
            "dev": id.dev,
            "ino": id.ino,
            "size": id.size,
            "mtime_ns": id.mtime_ns,
            "ctime_ns": id.ctime_ns,
            "sha256": sha256,
        })
    };
    let mut v = one(path, id, sha256);
    if let (Some(w), Some(obj)) = (was, v.as_object_mut()) {
        obj.insert("replaced".into(), one(&w.path, &w.identity, &w.sha256));
    }
    v.to_string()
}

pub(crate) async fn change_agent(
    state: &Shared,
    change: AgentChange,
    fields: Fields,
) -> Result<i64, String> {
    match state
        .writer
        .ask(|reply| Op::ChangeAgent {
            change,
            fields,
            reply,
        })
        .await
    {
        Ok(Ok((entry, enrolled, generation))) => {
            if let Ok(mut a) = state.agents.write() {
                *a = Arc::new(enrolled);
            }
            state.generation.store(generation, Ordering::Release);
            Ok(entry.chain_seq)
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) async fn agent_add(state: &Shared, name: String, path: String) -> ManageNext {
    if let Err(e) = policy::validate_scope_name("agent", &name) {
        return error(e.to_string());
    }
    let file = path.clone();
    // Reading and hashing a large executable takes a while: off the async threads.
    let read = match tokio::task::spawn_blocking(move || agents::enrol_file(&file)).await {
        Ok(r) => r,
        Err(e) => return error(format!("reading {path} failed: {e}")),
    };
    let (identity, sha256) = match read {
        Ok(x) => x,
        Err(e) => return error(with_help(&e)),
    };
    let _rows = state.rows.lock().await;
    let enrolled = current_agents(state);
    if let Some(holder) = enrolled.iter().find(|e| {
        e.name != name && (e.identity.dev, e.identity.ino) == (identity.dev, identity.ino)
    }) {
        return error(format!(
            "{path} is already enrolled as agent {}; one executable has one name (`holdcall agent remove {}` first); nothing was changed",
            holder.name, holder.name
        ));
    }
    let was = enrolled.iter().find(|e| e.name == name);
    if was.is_none() && enrolled.len() >= limits::AGENTS_MAX {
        return error(format!(
            "{} agents are enrolled, the most Holdcall keeps; remove one first",
            limits::AGENTS_MAX
        ));
    }
    let reason = match was {
        Some(w) => format!(
            "replaced the enrolment of agent {name}: {path} (was {})",
            w.path
        ),
        None => format!("enrolled agent {name}: {path}"),
    };
    let fields = Fields {
        agent: Some(name.clone()),
        reason: Some(reason.clone()),
        detail: Some(agent_detail(&path, &identity, &sha256, was)),
        ..Fields::default()
    };
    let change = AgentChange::Put {
        name,
        path,
        identity,
        sha256,
    };
    match change_agent(state, change, fields).await {
        Ok(seq) => Next::Reply(ManageResponse::AgentChanged {
            message: format!("{reason} (recorded in the journal as entry {seq})"),
            chain_seq: seq,
        }),
        Err(e) => error(format!("the enrolment was not made: {e}")),
    }
}

pub(crate) fn agent_list(state: &Shared) -> ManageNext {
    let listed = current_agents(state)
        .iter()
        .map(|e| {
            let stale = agents::staleness(e).err();
            ipc::ListedAgent {
                name: e.name.clone(),
                path: e.path.clone(),
                state: if stale.is_some() { "stale" } else { "current" }.into(),
                stale_because: stale,
                dev: e.identity.dev,
                ino: e.identity.ino,
                size: e.identity.size,
                mtime_ns: e.identity.mtime_ns,
                ctime_ns: e.identity.ctime_ns,
                sha256: e.sha256.clone(),
                enrolled_at: e.enrolled_at.clone(),
            }
        })
        .collect();
    Next::Reply(ManageResponse::AgentList { agents: listed })
}

pub(crate) async fn agent_remove(state: &Shared, name: String) -> ManageNext {
    if let Err(e) = policy::validate_scope_name("agent", &name) {
        return error(e.to_string());
    }
    let rows = state.rows.lock().await;
    let enrolled = current_agents(state);
    let Some(e) = enrolled.iter().find(|e| e.name == name) else {
        return error(format!(
            "there is no agent named {name}; `holdcall agent list` shows the enrolled agents"
        ));
    };
    let naming: Vec<String> = rows
        .iter()
        .filter(|r| {
            r.agent.as_deref() == Some(name.as_str())
                || policy::agents_named_in_text(&r.text).contains(&name)
        })
        .map(|r| r.id.clone())
        .chain(
            current_budgets(state)
                .iter()
                .filter(|b| b.budget.agent.as_deref() == Some(name.as_str()))
                .map(|b| b.budget.id.clone()),
        )
        .collect();
    if !naming.is_empty() {
        return error(format!(
            "agent {name} is named by {}; remove them first (`holdcall policy remove … --agent {name}`, or edit the policy file and import it again)",
            naming.join(", ")
        ));
    }
    let reason = format!("removed agent {name}: {}", e.path);
    let fields = Fields {
        agent: Some(name.clone()),
        reason: Some(reason.clone()),
        detail: Some(agent_detail(&e.path, &e.identity, &e.sha256, None)),
        ..Fields::default()
    };
    match change_agent(state, AgentChange::Remove { name }, fields).await {
        Ok(seq) => Next::Reply(ManageResponse::AgentChanged {
            message: format!("{reason} (recorded in the journal as entry {seq})"),
            chain_seq: seq,
        }),
        Err(e) => error(format!("the agent was not removed: {e}")),
    }
}
