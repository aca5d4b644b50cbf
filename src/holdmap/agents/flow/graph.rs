//! The flow graph of agents, built from one snapshot and the agents found in it: a pure
//! function, so every rule is tested over hand-made snapshots. Nodes are the agents, their
//! processes (and the agent process's ancestors), the sockets their processes listen on, the
//! local services and remote endpoints they are connected to; relationships are `spawned`
//! (ppid), `owns` (membership), `listens` and `connects` (ESTABLISHED TCP).
//!
//! Must never: resolve a name (no DNS), read a file, or drop a node or relationship past a cap
//! without counting it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use crate::holdmap::agents::catalog;
use crate::holdmap::agents::detect::Found;
use crate::holdmap::agents::model::Evidence;
use crate::holdmap::listeners::Exposure;
use crate::holdmap::model::{Snapshot, Socket};
use crate::holdmap::redact::redact_argv;
use crate::limits::{
    HOLDMAP_FLOW_ANCESTORS_MAX, HOLDMAP_FLOW_COMMAND_CHARS_MAX, HOLDMAP_FLOW_RELATIONSHIPS_MAX,
    HOLDMAP_FLOW_UNREADABLE_LISTED_MAX,
};
use crate::os::sockets::{Protocol, SocketState};

/// Which agents a call asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Select {
    All,
    /// The agent that owns this pid (any of its processes).
    Pid(i32),
    /// A product, as `list_agents` reads one (`catalog::named`): its id, its name or an
    /// executable name, case-insensitive (`claude-code`, `Claude Code`, `claude`).
    Product(String),
}

impl Select {
    /// `pid:N`, a product, or nothing; an error in words for a malformed `pid:`.
    pub(crate) fn parse(agent: Option<&str>) -> Result<Select, String> {
        let Some(q) = agent.map(str::trim).filter(|q| !q.is_empty()) else {
            return Ok(Select::All);
        };
        if let Some(n) = q.to_ascii_lowercase().strip_prefix("pid:") {
            return match n.trim().parse::<i32>() {
                Ok(pid) if pid > 0 => Ok(Select::Pid(pid)),
                _ => Err(
                    "`agent`: after `pid:` give a process id, a positive whole number (`pid:1234`)"
                        .to_owned(),
                ),
            };
        }
        Ok(Select::Product(q.to_owned()))
    }

    fn keeps(&self, f: &Found) -> bool {
        match self {
            Select::All => true,
            Select::Pid(pid) => f.members.contains(pid) || f.pid == *pid,
            Select::Product(q) => catalog::by_id(f.product).map_or_else(
                || f.product.eq_ignore_ascii_case(q.trim()),
                |p| catalog::named(p, q),
            ),
        }
    }
}

/// What one call asks for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub(crate) select: Select,
    pub(crate) include_remote: bool,
    pub(crate) max_nodes: usize,
}

/// What a process node is to the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The agent's own (topmost) process.
    Agent,
    /// A helper or tool the agent owns.
    Member,
    /// Above the agent's process (its launcher, shell, terminal …).
    Ancestor,
}

impl Role {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Member => "member",
            Role::Ancestor => "ancestor",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Agent {
        pid: i32,
        product: &'static str,
        /// The product's name (`Claude Code`), from the product table.
        name: &'static str,
        processes: usize,
        parent: Option<i32>,
    },
    Process {
        pid: i32,
        ppid: i32,
        name: String,
        command: String,
        /// The agent that owns it, when one does.
        agent: Option<i32>,
        role: Role,
    },
    Listener {
        protocol: Protocol,
        address: SocketAddr,
        pid: i32,
        exposure: Exposure,
        /// Accepted connections open on it now whose client is no process of a shown agent.
        inbound: usize,
    },
    LocalService {
        address: SocketAddr,
        /// The listening process, when it could be seen (another account's is hidden).
        pid: Option<i32>,
        name: Option<String>,
        /// The agent that owns the listening process when it is one not asked about.
        agent: Option<i32>,
        hint: Option<&'static str>,
    },
    Remote {
        address: SocketAddr,
        hint: Option<&'static str>,
    },
}

impl Kind {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Kind::Agent { .. } => "agent",
            Kind::Process { .. } => "process",
            Kind::Listener { .. } => "listener",
            Kind::LocalService { .. } => "local_service",
            Kind::Remote { .. } => "remote",
        }
    }

    /// Order in the result (and what a cap keeps first): agents, processes, listeners, local
    /// services, remotes.
    fn rank(&self) -> (u8, i64) {
        match self {
            Kind::Agent { pid, .. } => (0, i64::from(*pid)),
            Kind::Process { pid, role, .. } => {
                (if *role == Role::Ancestor { 2 } else { 1 }, i64::from(*pid))
            }
            Kind::Listener { address, .. } => (3, i64::from(address.port())),
            Kind::LocalService { address, .. } => (4, i64::from(address.port())),
            Kind::Remote { address, .. } => (5, i64::from(address.port())),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) evidence: Evidence,
    pub(crate) kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rel {
    Spawned,
    Owns,
    Listens,
    Connects,
}

impl Rel {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Rel::Spawned => "spawned",
            Rel::Owns => "owns",
            Rel::Listens => "listens",
            Rel::Connects => "connects",
        }
    }
}

/// The socket and process facts a relationship rests on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// `spawned`: the child's parent pid as its stat line gives it; `owns`: the member.
    pub(crate) pid: Option<i32>,
    pub(crate) ppid: Option<i32>,
    /// `listens` / `connects`: the socket's own endpoint, the peer's, its inode and state.
    pub(crate) local: Option<SocketAddr>,
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) inode: Option<u64>,
    pub(crate) state: Option<&'static str>,
    /// `connects`: how many open connections this one relationship stands for.
    pub(crate) connections: Option<usize>,
    /// `connects`: whether the other end's socket was in the snapshot too (a local peer).
    pub(crate) both_ends_seen: Option<bool>,
    /// `connects`: the process holding the other end, when seen.
    pub(crate) peer_pid: Option<i32>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Edge {
    pub(crate) rel: Rel,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) evidence: Evidence,
    pub(crate) facts: Facts,
}

/// What the flow could not show, or chose to leave out, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) max_nodes: usize,
    pub(crate) nodes_left_out: usize,
    pub(crate) relationships_left_out: usize,
    /// Connections between two processes of the same agent: not shown.
    pub(crate) internal_links: usize,
    /// Connections to other machines left out by `include_remote: false`.
    pub(crate) remote_links_left_out: usize,
    /// Processes of the shown agents whose command line or working folder could not be read.
    pub(crate) unreadable: Vec<i32>,
    pub(crate) unreadable_left_out: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Flow {
    pub(crate) agents: Vec<i32>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) edges: Vec<Edge>,
    pub(crate) counts: Counts,
}

pub(crate) fn agent_id(pid: i32) -> String {
    format!("agent:{pid}")
}

pub(crate) fn process_id(pid: i32) -> String {
    format!("process:{pid}")
}

pub(crate) fn listen_id(protocol: Protocol, at: SocketAddr) -> String {
    format!("listen:{}:{}", protocol.as_str(), unmapped_addr(at))
}

pub(crate) fn remote_id(at: SocketAddr) -> String {
    format!("remote:{}", unmapped_addr(at))
}

fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// `at` with a v4-mapped address read as the IPv4 one: one node for one endpoint, whichever
/// table (tcp or tcp6) showed it.
pub(crate) fn unmapped_addr(at: SocketAddr) -> SocketAddr {
    SocketAddr::new(unmapped(at.ip()), at.port())
}

fn same(a: SocketAddr, b: SocketAddr) -> bool {
    unmapped_addr(a) == unmapped_addr(b)
}

/// Builds nodes and edges without duplicates, in the order they were first seen.
#[derive(Default)]
struct Builder {
    nodes: BTreeMap<String, Node>,
    edges: Vec<Edge>,
    /// (relationship, from, to) → index in `edges`.
    seen: BTreeMap<(&'static str, String, String), usize>,
}

impl Builder {
    fn node(&mut self, id: String, evidence: Evidence, kind: Kind) {
        self.nodes
            .entry(id.clone())
            .or_insert(Node { id, evidence, kind });
    }

    /// Adds the edge, or for a second `connects` between the same two nodes counts one more
    /// connection on the first.
    fn edge(&mut self, rel: Rel, from: String, to: String, facts: Facts) {
        let key = (rel.label(), from.clone(), to.clone());
        if let Some(e) = self.seen.get(&key).and_then(|&i| self.edges.get_mut(i)) {
            if let Some(n) = e.facts.connections.as_mut() {
                *n += 1;
            }
            return;
        }
        self.seen.insert(key, self.edges.len());
        self.edges.push(Edge {
            rel,
            from,
            to,
            evidence: Evidence::Observed,
            facts,
        });
    }
}

/// The flow of the agents `ask` selects among `found`, as `snap` shows them.
pub(crate) fn flow(snap: &Snapshot, found: &[Found], ask: &Ask) -> Flow {
    let owner: BTreeMap<i32, i32> = found
        .iter()
        .flat_map(|f| f.members.iter().map(move |&m| (m, f.pid)))
        .collect();
    let shown: Vec<&Found> = found.iter().filter(|f| ask.select.keeps(f)).collect();
    let shown_pids: BTreeSet<i32> = shown.iter().map(|f| f.pid).collect();
    let mut b = Builder::default();
    let mut counts = Counts {
        max_nodes: ask.max_nodes,
        ..Counts::default()
    };
    let mut unreadable = BTreeSet::new();
    for f in &shown {
        processes(snap, f, &owner, &mut b, &mut unreadable);
    }
    // Listeners first, so a connection to another shown agent's listener finds its node.
    for f in &shown {
        listeners(snap, f, &mut b);
    }
    let local_ips: BTreeSet<IpAddr> = snap
        .sockets
        .iter()
        .map(|s| unmapped(s.row.local.ip()))
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let cx = Links {
        snap,
        owner: &owner,
        shown: &shown_pids,
        local_ips: &local_ips,
        include_remote: ask.include_remote,
    };
    for f in &shown {
        connections(&cx, f, &mut b, &mut counts);
    }
    counts.unreadable_left_out = unreadable
        .len()
        .saturating_sub(HOLDMAP_FLOW_UNREADABLE_LISTED_MAX);
    counts.unreadable = unreadable
        .into_iter()
        .take(HOLDMAP_FLOW_UNREADABLE_LISTED_MAX)
        .collect();
    let (nodes, edges) = capped(b, ask.max_nodes, &mut counts);
    Flow {
        agents: shown.iter().map(|f| f.pid).collect(),
        nodes,
        edges,
        counts,
    }
}

/// Keeps the first `max_nodes` nodes in rank order and the relationships between kept nodes,
/// at most `HOLDMAP_FLOW_RELATIONSHIPS_MAX`; counts the rest.
fn capped(b: Builder, max_nodes: usize, counts: &mut Counts) -> (Vec<Node>, Vec<Edge>) {
    let mut nodes: Vec<Node> = b.nodes.into_values().collect();
    nodes.sort_by(|x, y| {
        x.kind
            .rank()
            .cmp(&y.kind.rank())
            .then_with(|| x.id.cmp(&y.id))
    });
    counts.nodes_left_out = nodes.len().saturating_sub(max_nodes);
    nodes.truncate(max_nodes);
    let kept: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let total = b.edges.len();
    let mut edges: Vec<Edge> = b
        .edges
        .into_iter()
        .filter(|e| kept.contains(e.from.as_str()) && kept.contains(e.to.as_str()))
        .collect();
    edges.truncate(HOLDMAP_FLOW_RELATIONSHIPS_MAX);
    counts.relationships_left_out = total.saturating_sub(edges.len());
    (nodes, edges)
}

fn command_of(argv: &[String]) -> String {
    let full = redact_argv(argv);
    if full.chars().count() <= HOLDMAP_FLOW_COMMAND_CHARS_MAX {
        return full;
    }
    let mut cut: String = full.chars().take(HOLDMAP_FLOW_COMMAND_CHARS_MAX).collect();
    cut.push('…');
    cut
}

/// The agent node, its process nodes with `owns` and `spawned`, and its process's ancestors.
fn processes(
    snap: &Snapshot,
    f: &Found,
    owner: &BTreeMap<i32, i32>,
    b: &mut Builder,
    unreadable: &mut BTreeSet<i32>,
) {
    let agent = agent_id(f.pid);
    b.node(
        agent.clone(),
        Evidence::Observed,
        Kind::Agent {
            pid: f.pid,
            product: f.product,
            name: catalog::by_id(f.product).map_or(f.product, |p| p.name),
            processes: f.members.len(),
            parent: f.parent,
        },
    );
    let mut add_process = |b: &mut Builder, pid: i32, role: Role| -> Option<i32> {
        let p = snap.proc(pid)?;
        if (p.argv.is_empty() || p.cwd.is_none()) && role != Role::Ancestor {
            unreadable.insert(pid);
        }
        b.node(
            process_id(pid),
            Evidence::Observed,
            Kind::Process {
                pid,
                ppid: p.ppid,
                name: p.name.clone(),
                command: command_of(&p.argv),
                agent: owner.get(&pid).copied(),
                role,
            },
        );
        Some(p.ppid)
    };
    for &m in &f.members {
        let role = if m == f.pid {
            Role::Agent
        } else {
            Role::Member
        };
        let Some(ppid) = add_process(b, m, role) else {
            continue;
        };
        b.edge(
            Rel::Owns,
            agent.clone(),
            process_id(m),
            Facts {
                pid: Some(m),
                ..Facts::default()
            },
        );
        if m != f.pid && f.members.contains(&ppid) {
            spawned(b, ppid, m);
        }
    }
    // The launcher chain above the agent's own process.
    let mut child = f.pid;
    for up in snap
        .ancestors(f.pid)
        .into_iter()
        .take(HOLDMAP_FLOW_ANCESTORS_MAX)
    {
        let role = if owner.contains_key(&up) {
            Role::Member
        } else {
            Role::Ancestor
        };
        if add_process(b, up, role).is_none() {
            break;
        }
        spawned(b, up, child);
        child = up;
    }
}

fn spawned(b: &mut Builder, parent: i32, child: i32) {
    b.edge(
        Rel::Spawned,
        process_id(parent),
        process_id(child),
        Facts {
            pid: Some(child),
            ppid: Some(parent),
            ..Facts::default()
        },
    );
}

fn state_label(s: SocketState) -> &'static str {
    match s {
        SocketState::Listen => "listen",
        SocketState::Established => "established",
        SocketState::TimeWait => "time_wait",
        SocketState::Bound => "bound",
        SocketState::Other(_) => "other",
    }
}

/// The first of `f`'s processes that holds `s`.
fn holder(s: &Socket, f: &Found) -> Option<i32> {
    s.pids.iter().copied().find(|p| f.members.contains(p))
}

/// Each socket `f`'s processes listen on (TCP LISTEN, UDP bound), with `listens`.
fn listeners(snap: &Snapshot, f: &Found, b: &mut Builder) {
    for s in snap.sockets.iter().filter(|s| s.row.is_listening()) {
        let Some(pid) = holder(s, f) else { continue };
        let id = listen_id(s.row.protocol, s.row.local);
        b.node(
            id.clone(),
            Evidence::Observed,
            Kind::Listener {
                protocol: s.row.protocol,
                address: unmapped_addr(s.row.local),
                pid,
                exposure: Exposure::of(&[s.row.local.ip()]),
                inbound: 0,
            },
        );
        b.edge(
            Rel::Listens,
            process_id(pid),
            id,
            Facts {
                local: Some(unmapped_addr(s.row.local)),
                inode: Some(s.row.inode),
                state: Some(state_label(s.row.state)),
                ..Facts::default()
            },
        );
    }
}

/// What every connection's classification reads.
struct Links<'a> {
    snap: &'a Snapshot,
    owner: &'a BTreeMap<i32, i32>,
    shown: &'a BTreeSet<i32>,
    local_ips: &'a BTreeSet<IpAddr>,
    include_remote: bool,
}

impl Links<'_> {
    /// The TCP listener a connection to `to` reaches on this machine: bound to that address,
    /// or to every address when `to` is one of this machine's. The exact address wins.
    fn listener_at(&self, to: SocketAddr) -> Option<&Socket> {
        let listening = || {
            self.snap.sockets.iter().filter(move |s| {
                s.row.protocol == Protocol::Tcp
                    && s.row.state == SocketState::Listen
                    && s.row.local.port() == to.port()
            })
        };
        if let Some(exact) = listening().find(|s| same(s.row.local, to)) {
            return Some(exact);
        }
        let ip = unmapped(to.ip());
        if !(ip.is_loopback() || self.local_ips.contains(&ip)) {
            return None;
        }
        listening().find(|s| s.row.local.ip().is_unspecified())
    }

    /// The other end of an established connection, when its socket is in the snapshot.
    fn peer_of(&self, s: &Socket) -> Option<&Socket> {
        self.snap.sockets.iter().find(|o| {
            o.row.protocol == Protocol::Tcp
                && o.row.state == SocketState::Established
                && o.row.inode != s.row.inode
                && same(o.row.local, s.row.remote)
                && same(o.row.remote, s.row.local)
        })
    }
}

/// Each ESTABLISHED TCP connection of `f`'s processes, from the client's side: to a listener
/// of another shown agent, a `local_service`, or a `remote`. The accepting side of a
/// connection is counted on its listener (`inbound`) unless a shown agent's process is the
/// client, whose `connects` already shows it.
fn connections(cx: &Links<'_>, f: &Found, b: &mut Builder, counts: &mut Counts) {
    for s in cx
        .snap
        .sockets
        .iter()
        .filter(|s| s.row.protocol == Protocol::Tcp && s.row.state == SocketState::Established)
    {
        let Some(pid) = holder(s, f) else { continue };
        let peer = cx.peer_of(s);
        let peer_pids: &[i32] = peer.map_or(&[], |p| p.pids.as_slice());
        let peer_shown = |pids: &[i32]| {
            pids.iter()
                .any(|p| cx.owner.get(p).is_some_and(|a| cx.shown.contains(a)))
        };
        // The accepting side: a listener of this process on the same local endpoint.
        let accepted = cx.snap.sockets.iter().find(|l| {
            l.row.protocol == Protocol::Tcp
                && l.row.state == SocketState::Listen
                && l.row.local.port() == s.row.local.port()
                && l.pids.contains(&pid)
                && (same(l.row.local, s.row.local) || l.row.local.ip().is_unspecified())
        });
        if let Some(l) = accepted {
            // An internal connection is counted once, from its client's side.
            let internal = !peer_pids.is_empty() && peer_pids.iter().all(|p| f.members.contains(p));
            if !internal && !peer_shown(peer_pids) {
                let id = listen_id(l.row.protocol, l.row.local);
                if let Some(Node {
                    kind: Kind::Listener { inbound, .. },
                    ..
                }) = b.nodes.get_mut(&id)
                {
                    *inbound += 1;
                }
            }
            continue;
        }
        let listener = cx.listener_at(s.row.remote);
        let holders: &[i32] = if peer_pids.is_empty() {
            listener.map_or(&[], |l| l.pids.as_slice())
        } else {
            peer_pids
        };
        if !holders.is_empty() && holders.iter().all(|p| f.members.contains(p)) {
            counts.internal_links += 1;
            continue;
        }
        let remote_ip = unmapped(s.row.remote.ip());
        let local = peer.is_some() || listener.is_some() || remote_ip.is_loopback();
        let facts = Facts {
            local: Some(unmapped_addr(s.row.local)),
            remote: Some(unmapped_addr(s.row.remote)),
            inode: Some(s.row.inode),
            state: Some("established"),
            connections: Some(1),
            both_ends_seen: Some(peer.is_some()),
            peer_pid: peer_pids.first().copied(),
            ..Facts::default()
        };
        let to = if local {
            let at = listener.map_or(s.row.remote, |l| l.row.local);
            let id = listen_id(Protocol::Tcp, at);
            let peer_pid = holders.first().copied();
            b.node(
                id.clone(),
                if peer_pid.is_some() {
                    Evidence::Observed
                } else {
                    Evidence::Unknown
                },
                Kind::LocalService {
                    address: unmapped_addr(at),
                    pid: peer_pid,
                    name: peer_pid
                        .and_then(|p| cx.snap.proc(p))
                        .map(|p| p.name.clone()),
                    agent: peer_pid.and_then(|p| cx.owner.get(&p).copied()),
                    hint: crate::holdmap::agents::report::hint(at.port()),
                },
            );
            id
        } else if cx.include_remote {
            let id = remote_id(s.row.remote);
            b.node(
                id.clone(),
                Evidence::Observed,
                Kind::Remote {
                    address: unmapped_addr(s.row.remote),
                    hint: crate::holdmap::agents::report::hint(s.row.remote.port()),
                },
            );
            id
        } else {
            counts.remote_links_left_out += 1;
            continue;
        };
        b.edge(Rel::Connects, process_id(pid), to, facts);
    }
}
