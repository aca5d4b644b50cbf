//! Stop plans: what stopping a port's owner would do (the launcher tree, the signals in order,
//! the port to verify), its risk, whether MCP permits it and why not, and whether two plans have
//! the same effects (the check an execution makes against its preview).
//!
//! Owns: choosing which processes a stop would signal, the risk levels and the permit rule.
//! Must never: signal anything (that is `stop`), permit a plan that signals a protected process,
//! another account's or an unseen one, or a process without a start time to pin it by; let
//! display text (names, commands, reasons) count as an effect.
//!
//! Besides `protect::protection` (the one protection list), a plan applies its own hard rule
//! (`hard_guard`: PID ≤ 1, holdmap itself, its ancestors and its children), so that a fault in
//! the judgement of shells and terminals can never let holdmap signal its own process chain.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::holdmap::framework::script_name;
use crate::holdmap::listeners::{Listener, listeners};
use crate::holdmap::model::Snapshot;
use crate::holdmap::protect::protection;
use crate::holdmap::redact::redact_argv;
use crate::limits::{HOLDMAP_STOP_GRACE, HOLDMAP_STOP_KILL_WAIT};
use crate::os::procs::Proc;
use crate::os::signal::Sig;
use crate::os::sockets::Protocol;

mod schema;
#[cfg(test)]
mod tests;

pub(crate) use schema::plan_schema;

/// The options a stop was asked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PlanOptions {
    pub(crate) force: bool,
    pub(crate) allow_non_dev: bool,
}

/// How much could go wrong. Only Low (and Medium with `allow_non_dev`) is ever permitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Risk {
    /// The current account's own dev server.
    Low,
    /// The current account's process that is not a dev server.
    Medium,
    /// Protected, another account's, unseen, unpinned, or several unrelated owners.
    High,
}

impl Risk {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

/// Why a process is in a plan's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It holds the port (the topmost of the holders).
    Owner,
    /// It runs below the owner or below one of its launchers.
    Descendant,
    /// It launched the owner (`npm run dev`, `sh -c vite` …), same account and project.
    Launcher,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Descendant => "descendant",
            Role::Launcher => "launcher",
        }
    }
}

/// One process a plan names: its identity (pid and start time) and what it is shown as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Member {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) start_ticks: u64,
    pub(crate) uid: Option<u32>,
    pub(crate) name: String,
    /// The command line, redacted (display only).
    pub(crate) command: String,
    pub(crate) role: Role,
    /// For an owner: the port's listener is a dev server.
    pub(crate) is_dev: bool,
    /// Why it is protected, if it is (display only; `risk` carries the consequence).
    pub(crate) protected: Option<String>,
}

/// One thing an execution does, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Send `sig` to the process pinned by (pid, start time).
    Signal {
        pid: i32,
        start_ticks: u64,
        sig: Sig,
    },
    /// Wait up to `timeout` for every signalled process to exit; with `then_kill`, SIGKILL the
    /// survivors (bottom-up) and wait `HOLDMAP_STOP_KILL_WAIT` more.
    Wait { timeout: Duration, then_kill: bool },
    /// Check the port (and protocol) is free afterwards.
    Verify {
        port: u16,
        protocol: Option<Protocol>,
    },
}

/// What stopping the owner of one port would do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StopPlan {
    pub(crate) port: u16,
    /// `None`: TCP and UDP.
    pub(crate) protocol: Option<Protocol>,
    pub(crate) options: PlanOptions,
    /// The topmost processes that hold the port.
    pub(crate) owners: Vec<Member>,
    /// Sockets on the port that no visible process holds (another account's).
    pub(crate) hidden: usize,
    /// Every process an execution would signal, in signalling order (deepest first).
    pub(crate) tree: Vec<Member>,
    pub(crate) steps: Vec<Step>,
    pub(crate) risk: Risk,
    /// Why this risk, in words.
    pub(crate) risk_reason: String,
    /// Whether MCP may execute this plan (then `refusal` is `None`).
    pub(crate) permitted: bool,
    pub(crate) refusal: Option<String>,
}

/// The plan for stopping whatever owns `port` (`protocol` `None`: both).
pub(crate) fn plan_port(
    snap: &Snapshot,
    port: u16,
    protocol: Option<Protocol>,
    opts: PlanOptions,
) -> StopPlan {
    let held = holders(snap, port, protocol);
    let judged = listeners(snap);
    let owner_pids = topmost(snap, &held.pids);
    let owners: Vec<Member> = owner_pids
        .iter()
        .filter_map(|&pid| snap.proc(pid))
        .map(|p| {
            let mut m = member(snap, p, Role::Owner);
            m.is_dev = is_dev(&judged, port, protocol, p.pid);
            m
        })
        .collect();
    let mut tree = tree_of(snap, &owner_pids);
    for m in &mut tree {
        m.is_dev = owners.iter().any(|o| o.pid == m.pid && o.is_dev);
    }
    let steps = steps_for(&tree, port, protocol, opts);
    let (risk, risk_reason) = judge(snap, port, &owners, held.hidden, &tree);
    let refusal = refusal(port, &owners, held.hidden, risk, &risk_reason, opts);
    StopPlan {
        port,
        protocol,
        options: opts,
        owners,
        hidden: held.hidden,
        tree,
        steps,
        risk,
        risk_reason,
        permitted: refusal.is_none(),
        refusal,
    }
}

/// The hard rule a plan applies itself, whatever `protect` says: PID ≤ 1, holdmap itself, its
/// ancestors and its children are never signalled; nor anything when holdmap does not know its
/// own pid.
pub(crate) fn hard_guard(snap: &Snapshot, pid: i32) -> Option<String> {
    if pid <= 1 {
        return Some(format!("PID {pid} is the system's first process"));
    }
    // Without its own entry holdmap cannot know its ancestors, so it refuses everything rather
    // than judge a tree it cannot place itself in.
    if snap.me.pid <= 1 || snap.proc(snap.me.pid).is_none() {
        return Some("holdmap could not identify its own process".to_owned());
    }
    let own = i32::try_from(std::process::id()).unwrap_or(0);
    if pid == snap.me.pid || pid == own {
        return Some("it is holdmap itself".to_owned());
    }
    if snap.me.ancestors.contains(&pid) || snap.ancestors(snap.me.pid).contains(&pid) {
        return Some("it is an ancestor of holdmap (the session that started it)".to_owned());
    }
    if snap.descendants(snap.me.pid).contains(&pid) {
        return Some("it is holdmap's own child".to_owned());
    }
    None
}

/// Why `pid` must never be signalled, if it must not: the hard rule, then the protection list.
pub(crate) fn protected_reason(snap: &Snapshot, pid: i32) -> Option<String> {
    hard_guard(snap, pid).or_else(|| protection(snap, pid).map(|p| p.reason))
}

/// Whether two plans do the same thing: same target, options, owners and tree by (pid, start
/// time), and the same steps. Names, commands, reasons and risk words grant nothing.
pub(crate) fn same_effects(a: &StopPlan, b: &StopPlan) -> bool {
    let ids = |ms: &[Member]| {
        ms.iter()
            .map(|m| (m.pid, m.start_ticks))
            .collect::<Vec<_>>()
    };
    a.port == b.port
        && a.protocol == b.protocol
        && a.options == b.options
        && a.hidden == b.hidden
        && ids(&a.owners) == ids(&b.owners)
        && ids(&a.tree) == ids(&b.tree)
        && a.steps == b.steps
}

/// The plan as published in results (`plan_schema`).
pub(crate) fn to_json(plan: &StopPlan) -> Value {
    json!({
        "port": plan.port,
        "protocol": protocol_str(plan.protocol),
        "force": plan.options.force,
        "allow_non_dev": plan.options.allow_non_dev,
        "allow_protected": false,
        "owners": plan.owners.iter().map(member_json).collect::<Vec<_>>(),
        "hidden_owners": plan.hidden,
        "tree": plan.tree.iter().map(member_json).collect::<Vec<_>>(),
        "steps": plan.steps.iter().map(step_json).collect::<Vec<_>>(),
        "verify": {"port": plan.port, "protocol": protocol_str(plan.protocol)},
        "risk": plan.risk.as_str(),
        "risk_reason": plan.risk_reason,
        "permitted": plan.permitted,
        "refusal": plan.refusal,
    })
}

/// "tcp", "udp" or "any".
pub(crate) fn protocol_str(p: Option<Protocol>) -> &'static str {
    p.map_or("any", Protocol::as_str)
}

pub(crate) fn sig_str(sig: Sig) -> &'static str {
    match sig {
        Sig::Term => "SIGTERM",
        Sig::Kill => "SIGKILL",
    }
}

fn member_json(m: &Member) -> Value {
    json!({
        "pid": m.pid,
        "ppid": m.ppid,
        "start_ticks": m.start_ticks,
        "uid": m.uid,
        "name": m.name,
        "command": m.command,
        "role": m.role.as_str(),
        "is_dev": m.is_dev,
        "protected": m.protected,
    })
}

fn step_json(s: &Step) -> Value {
    match s {
        Step::Signal {
            pid,
            start_ticks,
            sig,
        } => {
            json!({"action": "signal", "pid": pid, "start_ticks": start_ticks, "signal": sig_str(*sig)})
        }
        Step::Wait { timeout, then_kill } => json!({
            "action": "wait",
            "timeout_ms": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            "then_kill": then_kill,
        }),
        Step::Verify { port, protocol } => {
            json!({"action": "verify", "port": port, "protocol": protocol_str(*protocol)})
        }
    }
}

/// The processes holding the port, and how many of its sockets nobody visible holds.
struct Held {
    pids: BTreeSet<i32>,
    hidden: usize,
}

/// A TCP listener or bound UDP socket on `port` (`protocol` `None`: either).
pub(crate) fn is_listening_on(
    row: &crate::os::sockets::SocketRow,
    port: u16,
    protocol: Option<Protocol>,
) -> bool {
    row.is_listening() && row.local.port() == port && protocol.is_none_or(|p| p == row.protocol)
}

fn holders(snap: &Snapshot, port: u16, protocol: Option<Protocol>) -> Held {
    let mut held = Held {
        pids: BTreeSet::new(),
        hidden: 0,
    };
    for s in snap
        .sockets
        .iter()
        .filter(|s| is_listening_on(&s.row, port, protocol))
    {
        let live: Vec<i32> = s
            .pids
            .iter()
            .copied()
            .filter(|&pid| snap.proc(pid).is_some_and(|p| !p.is_zombie()))
            .collect();
        if live.is_empty() {
            held.hidden = held.hidden.saturating_add(1);
        }
        held.pids.extend(live);
    }
    held
}

/// The holders none of whose ancestors also holds the port.
fn topmost(snap: &Snapshot, held: &BTreeSet<i32>) -> Vec<i32> {
    held.iter()
        .copied()
        .filter(|&pid| !snap.ancestors(pid).iter().any(|a| held.contains(a)))
        .collect()
}

fn is_dev(judged: &[Listener], port: u16, protocol: Option<Protocol>, pid: i32) -> bool {
    judged.iter().any(|l| {
        l.port == port
            && protocol.is_none_or(|p| p == l.protocol)
            && (l.pid == Some(pid) || l.pids.contains(&pid))
            && l.is_dev
    })
}

fn member(snap: &Snapshot, p: &Proc, role: Role) -> Member {
    let command = if p.argv.is_empty() {
        format!("[{}]", p.name)
    } else {
        redact_argv(&p.argv)
    };
    Member {
        pid: p.pid,
        ppid: p.ppid,
        start_ticks: p.start_ticks,
        uid: p.uid,
        name: p.name.clone(),
        command,
        role,
        is_dev: false,
        protected: protected_reason(snap, p.pid),
    }
}

/// Every process stopping the owners would signal: for each owner, the topmost of its launcher
/// ancestors and everything below it; deepest first, so children go before their parents.
fn tree_of(snap: &Snapshot, owners: &[i32]) -> Vec<Member> {
    let mut roles: Vec<(i32, Role)> = Vec::new();
    let push = |pid: i32, role: Role, roles: &mut Vec<(i32, Role)>| {
        if !roles.iter().any(|(p, _)| *p == pid) {
            roles.push((pid, role));
        }
    };
    for &owner in owners {
        push(owner, Role::Owner, &mut roles);
        let launchers = launcher_chain(snap, owner);
        for &l in &launchers {
            push(l, Role::Launcher, &mut roles);
        }
        let top = launchers.last().copied().unwrap_or(owner);
        for d in snap.descendants(top) {
            push(d, Role::Descendant, &mut roles);
        }
    }
    let mut tree: Vec<(usize, Member)> = roles
        .into_iter()
        // A zombie holds nothing and may be reaped before an execution: not part of the plan.
        .filter_map(|(pid, role)| {
            snap.proc(pid)
                .filter(|p| !p.is_zombie())
                .map(|p| member(snap, p, role))
        })
        .map(|m| (snap.ancestors(m.pid).len(), m))
        .collect();
    tree.sort_by(|(da, a), (db, b)| db.cmp(da).then(a.pid.cmp(&b.pid)));
    tree.into_iter().map(|(_, m)| m).collect()
}

/// The owner's launcher ancestors, nearest first: up while the parent is a launcher of the same
/// account working inside the owner's project, neither protected nor a session process, and
/// everything it started works inside that project too (a `make` or `concurrently` run from the
/// home folder that started dev servers of several projects is not taken, or stopping one
/// project's port would stop the others).
fn launcher_chain(snap: &Snapshot, owner: i32) -> Vec<i32> {
    let mut chain = Vec::new();
    let Some(owner_proc) = snap.proc(owner) else {
        return chain;
    };
    let Some(root) = project_root(owner_proc) else {
        return chain;
    };
    for pid in snap.ancestors(owner) {
        let Some(p) = snap.proc(pid) else { break };
        let everything_inside = snap
            .descendants(pid)
            .iter()
            .all(|d| inside(&root, snap.proc(*d).and_then(|q| q.cwd.as_deref())));
        if protected_reason(snap, pid).is_some()
            || p.uid.is_none()
            || p.uid != owner_proc.uid
            || !is_launcher(p)
            || !inside(&root, p.cwd.as_deref())
            || !everything_inside
        {
            break;
        }
        chain.push(pid);
    }
    chain
}

/// The owner's project folder (`project::project_of` its working directory), else that
/// directory itself; `None` when its working directory is unknown or `/`.
fn project_root(owner: &Proc) -> Option<std::path::PathBuf> {
    let cwd = owner.cwd.as_deref().filter(|c| *c != Path::new("/"))?;
    Some(
        crate::holdmap::project::project_of(cwd)
            .map(|p| p.root)
            .unwrap_or_else(|| cwd.to_path_buf()),
    )
}

/// Whether a process working in `dir` works inside the project folder `root`.
fn inside(root: &Path, dir: Option<&Path>) -> bool {
    dir.is_some_and(|d| d.starts_with(root))
}

/// Programs that start a dev server and have no other job (package scripts, task runners,
/// watchers), and `sh -c …`.
const LAUNCHERS: &[&str] = &[
    "npm",
    "npx",
    "pnpm",
    "pnpx",
    "yarn",
    "yarnpkg",
    "bun",
    "bunx",
    "deno",
    "cargo",
    "make",
    "uv",
    "poetry",
    "pipenv",
    "hatch",
    "pdm",
    "turbo",
    "nx",
    "concurrently",
    "nodemon",
    "npm-run-all",
    "run-p",
    "run-s",
    "watchexec",
    "cargo-watch",
    "air",
    "foreman",
    "honcho",
    "npm-cli",
    "npx-cli",
];

const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "fish"];

fn is_launcher(p: &Proc) -> bool {
    // A process that set its title (npm does) shows its whole command line as argv[0].
    let argv0 = p
        .argv
        .first()
        .and_then(|a| a.split_whitespace().next())
        .unwrap_or("");
    let exe = p
        .exe
        .as_deref()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if SHELLS.contains(&script_name(argv0)) || SHELLS.contains(&exe) {
        // Only `sh -c …`: an interactive or login shell is a session, not a launcher.
        return p.argv.get(1).is_some_and(|a| a == "-c");
    }
    if LAUNCHERS.contains(&script_name(argv0)) || LAUNCHERS.contains(&exe) {
        return true;
    }
    // node running npm's own script: `node /usr/lib/node_modules/npm/bin/npm-cli.js run dev`.
    matches!(exe, "node" | "nodejs" | "bun")
        && p.argv
            .get(1)
            .is_some_and(|script| LAUNCHERS.contains(&script_name(script)))
}

fn steps_for(
    tree: &[Member],
    port: u16,
    protocol: Option<Protocol>,
    opts: PlanOptions,
) -> Vec<Step> {
    let sig = if opts.force { Sig::Kill } else { Sig::Term };
    let mut steps: Vec<Step> = tree
        .iter()
        .map(|m| Step::Signal {
            pid: m.pid,
            start_ticks: m.start_ticks,
            sig,
        })
        .collect();
    if !tree.is_empty() {
        steps.push(if opts.force {
            Step::Wait {
                timeout: HOLDMAP_STOP_KILL_WAIT,
                then_kill: false,
            }
        } else {
            Step::Wait {
                timeout: HOLDMAP_STOP_GRACE,
                then_kill: true,
            }
        });
    }
    steps.push(Step::Verify { port, protocol });
    steps
}

/// The plan's risk and why.
fn judge(
    snap: &Snapshot,
    port: u16,
    owners: &[Member],
    hidden: usize,
    tree: &[Member],
) -> (Risk, String) {
    if hidden > 0 {
        return (
            Risk::High,
            format!(
                "port {port} is held by a process holdmap cannot see (another account's); \
                 only processes it can see and pin are stopped"
            ),
        );
    }
    if owners.len() > 1 {
        let pids: Vec<String> = owners.iter().map(|o| o.pid.to_string()).collect();
        return (
            Risk::High,
            format!(
                "port {port} is held by several unrelated processes (pids {})",
                pids.join(", ")
            ),
        );
    }
    // The owners first: a refusal names the port's own owner when it is the one protected (a
    // shell that is holdmap's ancestor), not some process below it in the tree (holdmap).
    for m in owners.iter().chain(tree) {
        if let Some(why) = &m.protected {
            return (
                Risk::High,
                format!("{} (pid {}) is protected: {why}", m.name, m.pid),
            );
        }
        match m.uid {
            None => {
                return (
                    Risk::High,
                    format!(
                        "the account of {} (pid {}) could not be read",
                        m.name, m.pid
                    ),
                );
            }
            Some(uid) if uid != snap.me.uid => {
                return (
                    Risk::High,
                    format!(
                        "{} (pid {}) runs as another account (uid {uid})",
                        m.name, m.pid
                    ),
                );
            }
            Some(_) => {}
        }
        if m.start_ticks == 0 {
            return (
                Risk::High,
                format!("{} (pid {}) has no start time to pin it by", m.name, m.pid),
            );
        }
    }
    match owners.first() {
        Some(o) if o.is_dev => (
            Risk::Low,
            format!("{} (pid {}) is your own dev server", o.name, o.pid),
        ),
        Some(o) => (
            Risk::Medium,
            format!(
                "{} (pid {}) is your own process, but not a dev server",
                o.name, o.pid
            ),
        ),
        None => (Risk::Low, format!("nothing holds port {port}")),
    }
}

/// The permit rule: why MCP refuses the plan, or `None` when it may run.
fn refusal(
    port: u16,
    owners: &[Member],
    hidden: usize,
    risk: Risk,
    reason: &str,
    opts: PlanOptions,
) -> Option<String> {
    if owners.is_empty() && hidden == 0 {
        return Some(format!(
            "nothing is listening on port {port}; there is nothing to stop"
        ));
    }
    match risk {
        Risk::High => Some(format!(
            "Refused: {reason}. holdmap never stops protected, foreign or unknown processes \
             over MCP, whatever the options."
        )),
        Risk::Medium if !opts.allow_non_dev => Some(format!(
            "Refused: {reason}. To stop it anyway, preview again with allow_non_dev: true and \
             execute with the same options."
        )),
        Risk::Medium | Risk::Low => None,
    }
}
