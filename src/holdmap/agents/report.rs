//! One `AgentReport` per detected agent: its child tools (`tools`), folders (working
//! directories with their project roots), ports (listeners its processes hold, with a role),
//! established TCP links (no DNS), CPU and memory summed over its processes, and access facts
//! (`access`). Everything comes from the snapshot, except project detection, which reads the
//! folders' marker files as part 1 does.
//!
//! Must never: resolve a name (DNS); read a file inside a folder beyond project detection;
//! hold a command line that has not been through `redact`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;

use crate::clients::routed::Judge;
use crate::holdmap::agents::catalog;
use crate::holdmap::agents::detect::{self, Found};
use crate::holdmap::agents::model::{AgentPort, AgentReport, Evidence, Folder, Link, PortRole};
use crate::holdmap::agents::{access, tools};
use crate::holdmap::listeners::{self, Exposure, Listener};
use crate::holdmap::model::Snapshot;
use crate::holdmap::project;
use crate::holdmap::redact::redact_argv;
use crate::os::sockets::{Protocol, SocketState};

/// What an agent's report leaves out, counted: processes without a readable command line or
/// working directory.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Unseen {
    pub(crate) no_command: usize,
    pub(crate) no_cwd: usize,
}

/// Every agent of `snap` as a report (capabilities not filled), and what could not be seen.
pub(crate) fn build(snap: &Snapshot) -> (Vec<AgentReport>, Unseen) {
    let found = detect::agents(snap);
    let listening = listeners::listeners(snap);
    let dev: BTreeSet<i32> = listening
        .iter()
        .filter(|l| l.is_dev)
        .flat_map(|l| l.pid.into_iter().chain(l.pids.iter().copied()))
        .collect();
    let mut projects = BTreeMap::new();
    let mut unseen = Unseen::default();
    // Which holdcall counts is read from the disk once per collection, not once per process.
    let judge = crate::holdmap::agents::capabilities::holdcall_judge();
    let reports = found
        .iter()
        .filter_map(|f| {
            one(
                snap,
                f,
                &listening,
                &dev,
                &judge,
                &mut projects,
                &mut unseen,
            )
        })
        .collect();
    (reports, unseen)
}

fn one(
    snap: &Snapshot,
    f: &Found,
    listening: &[Listener],
    dev: &BTreeSet<i32>,
    judge: &Judge,
    projects: &mut BTreeMap<PathBuf, Option<PathBuf>>,
    unseen: &mut Unseen,
) -> Option<AgentReport> {
    let root = snap.proc(f.pid)?;
    let product = catalog::by_id(f.product)?;
    // Helpers: the same product's processes below the agent (an editor's renderers).
    let helpers: BTreeSet<i32> = f
        .members
        .iter()
        .copied()
        .filter(|&m| {
            m == f.pid
                || snap
                    .proc(m)
                    .and_then(detect::product_of)
                    .is_some_and(|p| p.id == f.product)
        })
        .collect();
    let mut tool_list = Vec::new();
    let (mut cpu_ticks, mut memory) = (0u64, 0u64);
    for &m in &f.members {
        let Some(p) = snap.proc(m) else { continue };
        cpu_ticks = cpu_ticks.saturating_add(p.cpu_ticks);
        memory = memory.saturating_add(p.rss_bytes);
        if p.argv.is_empty() {
            unseen.no_command += 1;
        }
        if p.cwd.is_none() {
            unseen.no_cwd += 1;
        }
        if !helpers.contains(&m) && !p.is_zombie() {
            let routed = tools::below_holdcall(snap, p.ppid, f.pid, judge);
            tool_list.push(tools::classify(p, dev, routed, judge));
        }
    }
    let folders = folders_of(snap, f, projects);
    let ports = ports_of(f, &helpers, listening);
    let links = links_of(snap, f);
    let access = access::facts(snap, root, f.product, &f.members, &ports);
    Some(AgentReport {
        id: format!("agent:{}", f.pid),
        pid: f.pid,
        start_ticks: root.start_ticks,
        product: product.id,
        name: product.name,
        vendor: product.vendor,
        kind: product.kind.label(),
        client: product.client,
        command: redact_argv(&root.argv),
        parent: f.parent.map(|p| format!("agent:{p}")),
        uid: root.uid,
        process_ids: f.members.clone(),
        tools: tool_list,
        folders,
        ports,
        links,
        cpu_seconds: seconds(cpu_ticks),
        memory_bytes: memory,
        access,
        capabilities: None,
    })
}

/// The agent's own working directory first, then its processes', each once, with the project
/// root part 1 finds for it.
fn folders_of(
    snap: &Snapshot,
    f: &Found,
    projects: &mut BTreeMap<PathBuf, Option<PathBuf>>,
) -> Vec<Folder> {
    let mut seen = BTreeSet::new();
    let order = std::iter::once(f.pid).chain(f.members.iter().copied().filter(|&m| m != f.pid));
    let mut out = Vec::new();
    for m in order {
        let Some(cwd) = snap.proc(m).and_then(|p| p.cwd.clone()) else {
            continue;
        };
        if !seen.insert(cwd.clone()) {
            continue;
        }
        let project = projects
            .entry(cwd.clone())
            .or_insert_with(|| project::project_of(&cwd).map(|p| p.root))
            .clone();
        out.push(Folder {
            path: cwd,
            project,
            evidence: Evidence::Observed,
        });
    }
    out
}

/// The listeners the agent's processes hold: the agent's (or a helper's) own, a dev server's,
/// or another service's.
fn ports_of(f: &Found, helpers: &BTreeSet<i32>, listening: &[Listener]) -> Vec<AgentPort> {
    let members: BTreeSet<i32> = f.members.iter().copied().collect();
    let mut out = Vec::new();
    for l in listening {
        let Some(pid) = l
            .pid
            .filter(|p| members.contains(p))
            .or_else(|| l.pids.iter().copied().find(|p| members.contains(p)))
        else {
            continue;
        };
        let role = if helpers.contains(&pid) {
            PortRole::Agent
        } else if l.is_dev {
            PortRole::DevServer
        } else {
            PortRole::Service
        };
        out.push(AgentPort {
            port: l.port,
            protocol: l.protocol,
            address: widest(&l.addresses),
            pid,
            role,
            exposed: l.exposure != Exposure::Loopback,
        });
    }
    out
}

/// The address that says the most about reach: an unspecified one, else the first.
fn widest(addresses: &[IpAddr]) -> String {
    addresses
        .iter()
        .find(|a| a.is_unspecified())
        .or_else(|| addresses.first())
        .map_or_else(String::new, ToString::to_string)
}

/// A service commonly found on a TCP port: a hint from the number alone, never a DNS name or a
/// lookup (`list_agents`' links and `get_agent_flow`'s nodes).
pub(crate) fn hint(port: u16) -> Option<&'static str> {
    Some(match port {
        22 => "ssh",
        53 => "dns",
        80 => "http",
        443 => "https",
        3306 => "mysql",
        5432 => "postgres",
        5672 => "amqp",
        6379 => "redis",
        8080 => "http-alt",
        9092 => "kafka",
        9200 => "elasticsearch",
        11434 => "ollama",
        27017 => "mongodb",
        _ => return None,
    })
}

/// The agent's established TCP connections, without those between its own processes; the
/// local listener on the far end when the remote end is this machine.
fn links_of(snap: &Snapshot, f: &Found) -> Vec<Link> {
    let members: BTreeSet<i32> = f.members.iter().copied().collect();
    let mut out = Vec::new();
    for s in &snap.sockets {
        if s.row.protocol != Protocol::Tcp || s.row.state != SocketState::Established {
            continue;
        }
        let Some(&pid) = s.pids.iter().find(|p| members.contains(p)) else {
            continue;
        };
        let peer = local_listener(snap, s.row.remote, s.row.local.ip());
        if peer.is_some_and(|p| members.contains(&p)) {
            continue;
        }
        out.push(Link {
            pid,
            local: s.row.local.to_string(),
            remote: s.row.remote.to_string(),
            peer_pid: peer,
            hint: hint(s.row.remote.port()),
        });
    }
    out
}

/// The pid listening on `remote` when it is this machine: an exact bind beats a wildcard.
fn local_listener(snap: &Snapshot, remote: std::net::SocketAddr, local_ip: IpAddr) -> Option<i32> {
    let here = remote.ip().is_loopback() || remote.ip() == local_ip;
    if !here {
        return None;
    }
    let candidates = snap.sockets.iter().filter(|s| {
        s.row.protocol == Protocol::Tcp
            && s.row.state == SocketState::Listen
            && s.row.local.port() == remote.port()
    });
    let mut wildcard = None;
    for s in candidates {
        if s.row.local.ip() == remote.ip() {
            return s.pids.first().copied();
        }
        if s.row.local.ip().is_unspecified() && wildcard.is_none() {
            wildcard = s.pids.first().copied();
        }
    }
    wildcard
}

/// CPU ticks as seconds (`sysconf(_SC_CLK_TCK)` ticks per second).
#[allow(clippy::cast_precision_loss)] // a CPU time in seconds does not need 53 bits
pub(crate) fn seconds(ticks: u64) -> f64 {
    ticks as f64 / ticks_per_second() as f64
}

#[cfg(target_os = "linux")]
fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

#[cfg(not(target_os = "linux"))]
fn ticks_per_second() -> u64 {
    100
}
