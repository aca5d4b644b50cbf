//! Which running processes are AI coding agents, what each runs and may do, and the tools that
//! show it: `list_agents` (`list`, with `capabilities` for `include_capabilities`) and
//! `get_agent_flow` (`flow`). Who the agents are is `detect` (over the product table in
//! `catalog` and the runtime-entry parser in `entry`); `stop_agent_ports` selects agents
//! through [`matching`]. The data every part reads and fills is in `model`.
//!
//! Must never: recognise an agent by the name a process chose for itself (its `comm`, its
//! `argv[0]`) when its executable path says otherwise; count the agent's own listeners or
//! protected processes' as ports it started.

mod access;
pub(crate) mod capabilities;
pub(crate) mod catalog;
pub(crate) mod detect;
pub(crate) mod entry;
mod flow;
pub(crate) mod list;
pub(crate) mod model;
pub(crate) mod report;
pub(crate) mod tools;

use std::collections::BTreeSet;

use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{is_listening_on, protected_reason};
use crate::holdmap::redact::redact_argv;
use crate::holdmap::tool::Tool;
use crate::os::sockets::Protocol;

/// `list_agents` and `get_agent_flow`, in the order `tools/list` shows them.
pub(crate) const TOOLS: &[Tool] = &[list::TOOL, flow::TOOL];

/// A running agent and the ports its descendants hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agent {
    pub(crate) pid: i32,
    pub(crate) start_ticks: u64,
    /// The product's id (`claude-code`, `codex` …).
    pub(crate) program: &'static str,
    pub(crate) name: String,
    /// Redacted command line (display only).
    pub(crate) command: String,
    /// (port, protocol) of every unprotected listener its descendants hold, sorted.
    pub(crate) ports: Vec<(u16, Protocol)>,
}

/// The running agents `query` names: a product (case-insensitive: its id `claude-code`, its
/// name `Claude Code` or its executable `claude`) or `pid:N` (the agent's own pid). Nested runs
/// of the same product count once (the topmost).
pub(crate) fn matching(snap: &Snapshot, query: &str) -> Vec<Agent> {
    let q = query.trim().to_lowercase();
    let by_pid = q.strip_prefix("pid:").map(|n| n.trim().parse::<i32>().ok());
    detect::agents(snap)
        .into_iter()
        .filter(|f| match by_pid {
            Some(Some(n)) => f.pid == n,
            Some(None) => false,
            None => catalog::by_id(f.product).is_some_and(|p| catalog::named(p, &q)),
        })
        .filter_map(|f| {
            let p = snap.proc(f.pid)?;
            Some(Agent {
                pid: p.pid,
                start_ticks: p.start_ticks,
                program: f.product,
                name: p.name.clone(),
                command: redact_argv(&p.argv),
                ports: ports_of(snap, &f),
            })
        })
        .collect()
}

/// The listeners the agent's processes hold (never the agent's own, never a protected
/// holder's, never a nested agent's: those are that agent's ports).
fn ports_of(snap: &Snapshot, agent: &detect::Found) -> Vec<(u16, Protocol)> {
    let below: BTreeSet<i32> = agent
        .members
        .iter()
        .copied()
        .filter(|&p| p != agent.pid)
        .collect();
    let mut out = BTreeSet::new();
    for s in &snap.sockets {
        let port = s.row.local.port();
        if !is_listening_on(&s.row, port, Some(s.row.protocol)) || s.pids.contains(&agent.pid) {
            continue;
        }
        let started = s.pids.iter().any(|p| below.contains(p));
        let protected = s.pids.iter().any(|&p| protected_reason(snap, p).is_some());
        if started && !protected {
            out.insert((port, s.row.protocol));
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod list_tests;
#[cfg(test)]
mod tests;
