//! The graph of one snapshot: a node per listening service and per client process, an edge
//! where a process holds an ESTABLISHED TCP connection to a local listening port, clusters as
//! connected components, and the order in which a cluster's services would be stopped.
//!
//! Must never: read the machine (it is given a snapshot and its services), resolve names, or
//! count a connection to another machine as an edge.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use crate::holdmap::framework::{Category, framework_of, shown_name};
use crate::holdmap::listeners::Listener;
use crate::holdmap::model::Snapshot;
use crate::holdmap::project::project_of;
use crate::limits::HOLDMAP_CLUSTER_NAME_CHARS_MAX;
use crate::os::sockets::{Protocol, SocketState};

/// A listening service as the graph needs it: what `listeners::Listener` says of one
/// (protocol, port, owner), so the graph's rules are tested without the judging behind it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Service {
    pub(crate) port: u16,
    pub(crate) protocol: Protocol,
    pub(crate) addresses: Vec<IpAddr>,
    /// The owner (topmost holder); `None` when it could not be seen.
    pub(crate) pid: Option<i32>,
    /// Every process that holds the listening socket.
    pub(crate) pids: Vec<i32>,
    pub(crate) process: Option<String>,
    pub(crate) project: Option<String>,
    pub(crate) is_dev: bool,
    pub(crate) category: Option<Category>,
}

impl Service {
    pub(crate) fn of(l: &Listener) -> Service {
        Service {
            port: l.port,
            protocol: l.protocol,
            addresses: l.addresses.clone(),
            pid: l.pid,
            pids: l.pids.clone(),
            process: l.process.clone(),
            project: l.project.as_ref().map(|p| p.name.clone()),
            is_dev: l.is_dev,
            category: l.framework.map(|f| f.category),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Service,
    Client,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Service => "service",
            Kind::Client => "client",
        }
    }
}

pub(crate) fn category_str(c: Category) -> &'static str {
    match c {
        Category::Dev => "dev",
        Category::App => "app",
        Category::System => "system",
    }
}

/// One node: a listening service (`svc:3000/tcp`) or a process that only connects
/// (`proc:4242`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) port: Option<u16>,
    pub(crate) protocol: Option<Protocol>,
    pub(crate) pid: Option<i32>,
    pub(crate) process: Option<String>,
    pub(crate) project: Option<String>,
    pub(crate) is_dev: bool,
    pub(crate) category: Option<Category>,
}

/// `from` depends on `to`: a process of `from` holds `connections` ESTABLISHED connections to
/// `to`'s listening port. Indices into `Graph::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) connections: u64,
}

/// A connected component of the whole machine's graph (so its name is the same in the default
/// view and with `all`), its nodes in node order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) nodes: Vec<usize>,
}

/// The whole machine's graph. Nodes: services in (port, protocol) order, then clients in pid
/// order. Edges in (from, to) order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    pub(crate) nodes: Vec<Node>,
    pub(crate) edges: Vec<Edge>,
    pub(crate) clusters: Vec<Cluster>,
}

/// The address a socket row shows, with an IPv4-mapped IPv6 address read as the IPv4 one (a
/// dual-stack socket shows `::ffff:127.0.0.1`).
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Graph {
    /// The graph of `snap`, whose listening services are `services` (in their order).
    pub(crate) fn build(snap: &Snapshot, services: &[Service]) -> Graph {
        let mut nodes = Vec::with_capacity(services.len());
        let mut ids = HashSet::new();
        // Which service a process's outgoing connections belong to: the first service (in
        // port order) whose listening socket it holds.
        let mut service_of_pid: HashMap<i32, usize> = HashMap::new();
        for (i, s) in services.iter().enumerate() {
            let base = format!("svc:{}/{}", s.port, s.protocol.as_str());
            // Two owners of one port (SO_REUSEPORT, or IPv4 and IPv6 bound by different
            // processes) are two nodes; the second is told apart by its owner.
            let id = if ids.contains(&base) {
                match s.pid {
                    Some(pid) => format!("{base}@{pid}"),
                    None => format!("{base}@{i}"),
                }
            } else {
                base
            };
            ids.insert(id.clone());
            for pid in s.pid.iter().chain(s.pids.iter()) {
                service_of_pid.entry(*pid).or_insert(i);
            }
            nodes.push(Node {
                id,
                kind: Kind::Service,
                port: Some(s.port),
                protocol: Some(s.protocol),
                pid: s.pid,
                process: s.process.clone(),
                project: s.project.clone(),
                is_dev: s.is_dev,
                category: s.category,
            });
        }

        // The machine's own addresses: every address a socket of this snapshot is bound to
        // (a socket's local address is always one of this machine's), loopback aside.
        let own: HashSet<IpAddr> = snap
            .sockets
            .iter()
            .map(|s| canonical(s.row.local.ip()))
            .filter(|ip| !ip.is_unspecified())
            .collect();
        let is_local = |ip: IpAddr| {
            let ip = canonical(ip);
            ip.is_loopback() || own.contains(&ip)
        };
        let tcp_service = |ip: IpAddr, port: u16| -> Option<usize> {
            let ip = canonical(ip);
            let on_port = || {
                services
                    .iter()
                    .enumerate()
                    .filter(move |(_, s)| s.protocol == Protocol::Tcp && s.port == port)
            };
            on_port()
                .find(|(_, s)| s.addresses.iter().any(|a| canonical(*a) == ip))
                .or_else(|| {
                    on_port().find(|(_, s)| {
                        s.addresses.iter().any(|a| {
                            // 0.0.0.0 takes IPv4; `::` takes both (dual stack).
                            a.is_unspecified() && (a.is_ipv6() || ip.is_ipv4())
                        })
                    })
                })
                .map(|(i, _)| i)
        };

        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        enum From {
            Service(usize),
            Client(i32),
        }
        let mut counts: BTreeMap<(From, usize), u64> = BTreeMap::new();
        for sock in &snap.sockets {
            let row = &sock.row;
            if row.protocol != Protocol::Tcp || row.state != SocketState::Established {
                continue;
            }
            // The accepted (server) side of a connection: its local end is the listening
            // port. Its peer's side, whose remote end is that port, makes the edge.
            if tcp_service(row.local.ip(), row.local.port()).is_some() {
                continue;
            }
            if !is_local(row.remote.ip()) {
                continue;
            }
            let Some(to) = tcp_service(row.remote.ip(), row.remote.port()) else {
                continue;
            };
            let mut froms: BTreeSet<From> = BTreeSet::new();
            for pid in &sock.pids {
                froms.insert(match service_of_pid.get(pid) {
                    Some(i) => From::Service(*i),
                    None => From::Client(*pid),
                });
            }
            for from in froms {
                if from == From::Service(to) {
                    continue;
                }
                *counts.entry((from, to)).or_insert(0) += 1;
            }
        }

        let mut client_index: BTreeMap<i32, usize> = BTreeMap::new();
        for (from, _) in counts.keys() {
            if let From::Client(pid) = from {
                client_index.insert(*pid, 0);
            }
        }
        for (pid, index) in client_index.iter_mut() {
            *index = nodes.len();
            nodes.push(client_node(snap, *pid));
        }
        let edges: Vec<Edge> = {
            let mut e: Vec<Edge> = counts
                .into_iter()
                .filter_map(|((from, to), connections)| {
                    let from = match from {
                        From::Service(i) => i,
                        From::Client(pid) => *client_index.get(&pid)?,
                    };
                    Some(Edge {
                        from,
                        to,
                        connections,
                    })
                })
                .collect();
            e.sort_by_key(|e| (e.from, e.to));
            e
        };
        let clusters = clusters(&nodes, &edges);
        Graph {
            nodes,
            edges,
            clusters,
        }
    }

    /// Which nodes a view shows: with `all`, every node; otherwise the development nodes and
    /// every node one edge away from one.
    pub(crate) fn visible(&self, all: bool) -> Vec<bool> {
        if all {
            return vec![true; self.nodes.len()];
        }
        let mut shown: Vec<bool> = self.nodes.iter().map(|n| n.is_dev).collect();
        for e in &self.edges {
            let from_dev = self.nodes.get(e.from).is_some_and(|n| n.is_dev);
            let to_dev = self.nodes.get(e.to).is_some_and(|n| n.is_dev);
            if from_dev && let Some(s) = shown.get_mut(e.to) {
                *s = true;
            }
            if to_dev && let Some(s) = shown.get_mut(e.from) {
                *s = true;
            }
        }
        shown
    }

    pub(crate) fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    /// The order in which `cluster`'s services would be stopped: dependents first (for
    /// web -> api -> db: web, api, db), ties in node order. A cycle has no such order; it is
    /// broken at a service on the cycle with the fewest running dependents (then the first in
    /// node order), and each break is said in the returned words. Clients are left out: they
    /// listen on no port, so no stop_port call stops them.
    pub(crate) fn stop_order(&self, cluster: &Cluster) -> (Vec<usize>, Vec<String>) {
        let services: Vec<usize> = cluster
            .nodes
            .iter()
            .copied()
            .filter(|i| self.nodes.get(*i).is_some_and(|n| n.kind == Kind::Service))
            .collect();
        let member: HashSet<usize> = services.iter().copied().collect();
        // For each service, how many of the cluster's services that depend on it still run,
        // and whom each depends on (edges are unique per (from, to)).
        let mut running: HashMap<usize, usize> = services.iter().map(|i| (*i, 0)).collect();
        let mut depends_on: HashMap<usize, Vec<usize>> = HashMap::new();
        for e in &self.edges {
            if e.from != e.to && member.contains(&e.from) && member.contains(&e.to) {
                *running.entry(e.to).or_insert(0) += 1;
                depends_on.entry(e.from).or_default().push(e.to);
            }
        }
        let mut stopped: HashSet<usize> = HashSet::new();
        let mut order = Vec::with_capacity(services.len());
        let mut notes = Vec::new();
        while order.len() < services.len() {
            let remaining = || services.iter().copied().filter(|i| !stopped.contains(i));
            let dependents = |i: usize| running.get(&i).copied().unwrap_or(0);
            let next = match remaining().find(|i| dependents(*i) == 0) {
                Some(i) => i,
                None => {
                    // Every remaining service has a running dependent, so some of them form a
                    // cycle. Break it at a service on a cycle (never at one merely below it),
                    // the one with the fewest running dependents, then the lowest port.
                    let reach = |from: usize| {
                        let mut seen: HashSet<usize> = HashSet::new();
                        let mut next: Vec<usize> =
                            depends_on.get(&from).cloned().unwrap_or_default();
                        while let Some(i) = next.pop() {
                            if !stopped.contains(&i) && seen.insert(i) {
                                next.extend(depends_on.get(&i).into_iter().flatten().copied());
                            }
                        }
                        seen
                    };
                    let mut candidates: Vec<usize> = remaining().collect();
                    candidates.sort_by_key(|i| (dependents(*i), *i));
                    let Some(pick) = candidates
                        .iter()
                        .copied()
                        .find(|i| reach(*i).contains(i))
                        .or_else(|| candidates.first().copied())
                    else {
                        break;
                    };
                    let from_pick = reach(pick);
                    let names: Vec<&str> = remaining()
                        .filter(|i| {
                            *i == pick || (from_pick.contains(i) && reach(*i).contains(&pick))
                        })
                        .filter_map(|i| self.nodes.get(i).map(|n| n.id.as_str()))
                        .collect();
                    let picked = self.nodes.get(pick).map_or("?", |n| n.id.as_str());
                    notes.push(format!(
                        "{} depend on each other in a cycle, so no order stops every dependent \
                         first; the cycle was broken at {picked} (fewest running dependents, \
                         then lowest port), which is stopped while a service that depends on it \
                         still runs.",
                        names.join(", ")
                    ));
                    pick
                }
            };
            stopped.insert(next);
            order.push(next);
            for b in depends_on.get(&next).into_iter().flatten() {
                if let Some(n) = running.get_mut(b) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        (order, notes)
    }
}

/// A process that connects but listens on nothing, judged as `listeners` judges an owner: its
/// name as a person knows it, its project, and dev when its framework says so or (no framework
/// known) when it works in a project.
fn client_node(snap: &Snapshot, pid: i32) -> Node {
    let p = snap.proc(pid);
    let framework = p.and_then(framework_of);
    let project = p
        .and_then(|p| p.cwd.as_deref())
        .and_then(project_of)
        .map(|p| p.name);
    let is_dev = match framework.map(|f| f.category) {
        Some(Category::Dev) => true,
        Some(Category::App | Category::System) => false,
        None => project.is_some(),
    };
    Node {
        id: format!("proc:{pid}"),
        kind: Kind::Client,
        port: None,
        protocol: None,
        pid: Some(pid),
        process: p.map(|p| crate::text::visible(&shown_name(p))),
        project,
        is_dev,
        category: framework.map(|f| f.category),
    }
}

/// Connected components (edges taken both ways), in the order of their first node, named.
fn clusters(nodes: &[Node], edges: &[Edge]) -> Vec<Cluster> {
    let mut parent: Vec<usize> = (0..nodes.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        // Bounded by the table's size: a parent chain never repeats, but do not trust that.
        for _ in 0..parent.len() {
            let Some(&p) = parent.get(i) else { break };
            if p == i {
                break;
            }
            i = p;
        }
        i
    }
    for e in edges {
        let a = root(&mut parent, e.from);
        let b = root(&mut parent, e.to);
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        if let Some(slot) = parent.get_mut(hi) {
            *slot = lo;
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..nodes.len() {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut taken: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(groups.len());
    for (n, members) in groups.into_values().enumerate() {
        let base = base_name(nodes, &members).unwrap_or_else(|| format!("cluster-{}", n + 1));
        let mut name = base.clone();
        let mut k = 2;
        while taken.contains(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        taken.insert(name.clone());
        out.push(Cluster {
            name,
            nodes: members,
        });
    }
    out
}

/// A cluster's name before it is made unique: the project of its development service (the
/// first in node order), else that service's process name; a cluster without a development
/// service is named the same way after its first service. Shown as `text::visible` shows text
/// and shortened, so the name a person reads is the one `plan_cluster_stop` accepts.
fn base_name(nodes: &[Node], members: &[usize]) -> Option<String> {
    let services = || {
        members
            .iter()
            .filter_map(|i| nodes.get(*i))
            .filter(|n| n.kind == Kind::Service)
    };
    let lead = services()
        .find(|n| n.is_dev)
        .or_else(|| services().next())?;
    let raw = lead
        .project
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        .or(lead.process.as_deref().filter(|p| !p.trim().is_empty()))?;
    let shown: String = crate::text::visible(raw.trim())
        .chars()
        .take(HOLDMAP_CLUSTER_NAME_CHARS_MAX)
        .collect();
    Some(shown)
}
