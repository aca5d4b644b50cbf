//! One port's inspection, shared by `explain_port` (read as prose) and `inspect_port` (read as a
//! table): who owns it, the root cause in one sentence, the fix, who is connected, the owner's
//! process tree, the bind risk, the stop plan, and a bounded HTTP probe on loopback.
//!
//! Must never: probe an address other than 127.0.0.1 or ::1 (`probe::Target`), or wait for the
//! probe on the request loop (a port with a TCP listener is answered with `Reply::Later`).

use serde_json::{Map, Value, json};

use crate::holdmap::listeners::{self, Exposure, Listener};
use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{self, PlanOptions};
use crate::holdmap::probe::{self, Probe, Target, clean};
use crate::holdmap::redact::redact_argv;
use crate::holdmap::tool::{Cx, Outcome, Reply};
use crate::limits::HOLDMAP_INSPECT_ROWS_MAX;
use crate::os::sockets::{Protocol, SocketState};

/// How a result is read out as its summary.
pub(super) type Render = fn(&Inspection, Option<&Probe>) -> String;

/// The bind risk's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Risk {
    LoopbackOnly,
    AllInterfaces,
    SpecificAddress,
    None,
}

impl Risk {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Risk::LoopbackOnly => "loopback_only",
            Risk::AllInterfaces => "all_interfaces",
            Risk::SpecificAddress => "specific_address",
            Risk::None => "none",
        }
    }
}

/// Everything but the probe, ready to be finished once the probe (if any) has answered.
#[derive(Debug, Clone)]
pub(super) struct Inspection {
    pub(super) port: u16,
    pub(super) owners: Vec<Listener>,
    pub(super) headline: String,
    pub(super) recommendation: String,
    pub(super) risk: Risk,
    pub(super) risk_words: String,
    pub(super) connections: Vec<Value>,
    pub(super) connections_omitted: usize,
    pub(super) tree: Vec<Value>,
    pub(super) tree_omitted: usize,
    pub(super) plan: Value,
    /// Where the probe goes: a loopback address a TCP owner listens on.
    pub(super) probe_target: Option<Target>,
}

pub(super) fn run(args: &Map<String, Value>, cx: &mut Cx<'_>, render: Render) -> Reply {
    let Some(port) = crate::holdmap::schema::port_argument(args, "port") else {
        return Reply::Now(Outcome::Failed(
            "`port` must be an integer from 1 to 65535".to_owned(),
        ));
    };
    let snap = match super::observe(cx) {
        Ok(s) => s,
        Err(e) => return Reply::Now(Outcome::Failed(e)),
    };
    let ins = inspect(&snap, port);
    match ins.probe_target {
        None => Reply::Now(ins.finish(None, render)),
        Some(target) => Reply::Later(Box::pin(async move {
            let http = probe::probe(target).await;
            ins.finish(Some(http), render)
        })),
    }
}

/// What `snap` says about `port`.
pub(super) fn inspect(snap: &Snapshot, port: u16) -> Inspection {
    let owners: Vec<Listener> = listeners::listeners(snap)
        .into_iter()
        .filter(|l| l.port == port)
        .collect();
    let (risk, risk_words) = bind_risk(port, &owners);
    let (connections, connections_omitted) = connections(snap, port);
    let (tree, tree_omitted) = process_tree(snap, &owners);
    let plan = if owners.is_empty() {
        Value::Null
    } else {
        plan::to_json(&plan::plan_port(snap, port, None, PlanOptions::default()))
    };
    let probe_target = owners
        .iter()
        .filter(|l| l.protocol == Protocol::Tcp)
        .flat_map(|l| l.addresses.iter())
        .filter_map(|ip| Target::for_listener(*ip, port))
        .min_by_key(|t| matches!(t, Target::V6(_)));
    Inspection {
        port,
        headline: headline(snap, port, &owners),
        recommendation: recommendation(port, &owners),
        owners,
        risk,
        risk_words,
        connections,
        connections_omitted,
        tree,
        tree_omitted,
        plan,
        probe_target,
    }
}

impl Inspection {
    pub(super) fn status(&self) -> &'static str {
        if self.owners.is_empty() {
            "free"
        } else {
            "busy"
        }
    }

    pub(super) fn finish(&self, http: Option<Probe>, render: Render) -> Outcome {
        let structured = json!({
            "port": self.port,
            "status": self.status(),
            "headline": self.headline,
            "recommendation": self.recommendation,
            "owners": self.owners.iter().map(listeners::to_json).collect::<Vec<_>>(),
            "connections": self.connections,
            "connections_omitted": self.connections_omitted,
            "process_tree": self.tree,
            "process_tree_omitted": self.tree_omitted,
            "bind_risk": {"level": self.risk.as_str(), "words": self.risk_words},
            "plan": self.plan,
            "http": http.as_ref().map_or(Value::Null, Probe::to_json),
        });
        Outcome::Done {
            summary: render(self, http.as_ref()),
            structured,
        }
    }
}

/// The output schema both tools publish.
pub(super) fn output_schema() -> Value {
    let count = |what: &str| json!({"type": "integer", "minimum": 0, "description": what});
    json!({
        "type": "object",
        "properties": {
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "status": {"type": "string", "enum": ["free", "busy"]},
            "headline": {"type": "string", "description": "The root cause in one sentence."},
            "recommendation": {"type": "string", "description": "What to do about it."},
            "owners": {
                "type": "array",
                "items": listeners::listener_schema(),
                "description": "What listens on the port (TCP and UDP)."
            },
            "connections": {
                "type": "array",
                "description": "Established TCP connections whose local or remote port is this port: who is connected.",
                "items": {
                    "type": "object",
                    "properties": {
                        "local": {"type": "string"},
                        "remote": {"type": "string"},
                        "state": {"type": "string", "enum": ["established"]},
                        "pid": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
                        "process": {"anyOf": [{"type": "string"}, {"type": "null"}]}
                    },
                    "required": ["local", "remote", "state", "pid", "process"],
                    "additionalProperties": false
                }
            },
            "connections_omitted": count("Connections past the list's bound, not listed."),
            "process_tree": {
                "type": "array",
                "description": "Each owner's ancestors (below pid 1, farthest first), the owner, then its descendants.",
                "items": {
                    "type": "object",
                    "properties": {
                        "pid": {"type": "integer", "minimum": 1},
                        "ppid": {"type": "integer", "minimum": 0},
                        "name": {"type": "string"},
                        "command": {"type": "string", "description": "Redacted; heuristic."},
                        "role": {"type": "string", "enum": ["ancestor", "owner", "descendant"]}
                    },
                    "required": ["pid", "ppid", "name", "command", "role"],
                    "additionalProperties": false
                }
            },
            "process_tree_omitted": count("Processes past the list's bound, not listed."),
            "bind_risk": {
                "type": "object",
                "properties": {
                    "level": {
                        "type": "string",
                        "enum": ["loopback_only", "all_interfaces", "specific_address", "none"]
                    },
                    "words": {"type": "string"}
                },
                "required": ["level", "words"],
                "additionalProperties": false
            },
            "plan": {
                "anyOf": [plan::plan_schema(), {"type": "null"}],
                "description": "What stop_port would do (a preview of its plan, nothing executed); null when the port is free."
            },
            "http": {
                "anyOf": [probe::probe_schema(), {"type": "null"}],
                "description": "The loopback HTTP probe; null when no TCP listener is reachable on 127.0.0.1 or ::1."
            }
        },
        "required": [
            "port", "status", "headline", "recommendation", "owners", "connections",
            "connections_omitted", "process_tree", "process_tree_omitted", "bind_risk", "plan", "http"
        ],
        "additionalProperties": false,
    })
}

/// "vite (pid 4242), the dev server of shop-web on branch main".
pub(super) fn describe(l: &Listener) -> String {
    let Some(pid) = l.pid else {
        return format!(
            "a process holdmap cannot see (the socket belongs to uid {})",
            l.uid
        );
    };
    let mut out = format!("{} (pid {pid})", super::list::owner_name(l));
    match (&l.project, l.is_dev) {
        (Some(p), true) => {
            out.push_str(&format!(", the dev server of {}", p.name));
            if let Some(b) = &p.branch {
                out.push_str(&format!(" on branch {b}"));
            }
        }
        (Some(p), false) => out.push_str(&format!(", working in {}", p.name)),
        (None, true) => out.push_str(", a dev server"),
        (None, false) => {}
    }
    if !l.is_mine {
        out.push_str(&format!(", running as another account (uid {})", l.uid));
    }
    clean(&out)
}

fn headline(snap: &Snapshot, port: u16, owners: &[Listener]) -> String {
    if owners.is_empty() {
        let waiting = snap
            .sockets
            .iter()
            .filter(|s| s.row.state == SocketState::TimeWait && s.row.local.port() == port)
            .count();
        let mut out = format!("Port {port} is free: nothing listens on it");
        if waiting > 0 {
            out.push_str(&format!(
                " ({waiting} closed connection(s) are still in TIME_WAIT; they have no owner and \
                 do not stop a server that sets SO_REUSEADDR, as most do)"
            ));
        }
        return out;
    }
    // One entry per owner, its protocols merged (a DNS server holds 53 on tcp and udp).
    let mut groups: Vec<(String, Vec<&'static str>)> = Vec::new();
    for l in owners {
        let d = describe(l);
        match groups.iter_mut().find(|(g, _)| *g == d) {
            Some((_, protos)) => protos.push(l.protocol.as_str()),
            None => groups.push((d, vec![l.protocol.as_str()])),
        }
    }
    let with_protos = |(d, protos): &(String, Vec<&str>)| {
        if protos.as_slice() == ["tcp"] {
            d.clone()
        } else {
            format!("{d} ({})", protos.join(" and "))
        }
    };
    match groups.as_slice() {
        [one] => format!("Port {port} is held by {}", with_protos(one)),
        many => format!(
            "Port {port} is held by {} owners: {}",
            many.len(),
            many.iter().map(with_protos).collect::<Vec<_>>().join("; ")
        ),
    }
}

fn recommendation(port: u16, owners: &[Listener]) -> String {
    let another = format!("use another port (find_free_port with near: {port})");
    if owners.is_empty() {
        return format!(
            "Start your server on port {port}. A free port is a candidate, not a reservation: \
             another process may take it first, so wait_for_port after starting yours."
        );
    }
    if let Some(l) = owners.iter().find(|l| l.pid.is_none() || !l.is_mine) {
        return format!(
            "It belongs to another account's process (socket uid {}), which holdmap cannot stop \
             from here: {another}, or ask that account's owner.",
            l.uid
        );
    }
    if let Some((l, why)) = owners
        .iter()
        .find_map(|l| l.protected.as_ref().map(|p| (l, p)))
    {
        return clean(&format!(
            "Do not stop it: {} is protected ({}), and holdmap refuses to stop protected \
             processes whatever the arguments. {}.",
            describe_short(l),
            why.reason,
            capitalise(&another)
        ));
    }
    if owners.iter().all(|l| l.is_dev) {
        return clean(&format!(
            "{}; or, if {} was started for this work and is no longer needed, preview its stop \
             with stop_port {{\"port\": {port}}} (a dry run by default), show the plan to the \
             user, and execute only with their approval.",
            capitalise(&another),
            owners
                .first()
                .map_or_else(|| "it".to_owned(), describe_short),
        ));
    }
    clean(&format!(
        "{}. {} is not a dev server, so stop_port refuses it unless allow_non_dev is true: \
         preview with stop_port {{\"port\": {port}, \"allow_non_dev\": true}} only if the user \
         wants it stopped, and show them the plan first.",
        capitalise(&another),
        owners
            .iter()
            .find(|l| !l.is_dev)
            .map_or_else(|| "The owner".to_owned(), describe_short),
    ))
}

/// "vite (pid 4242)".
fn describe_short(l: &Listener) -> String {
    match l.pid {
        Some(pid) => format!("{} (pid {pid})", super::list::owner_name(l)),
        None => "the owner".to_owned(),
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().chain(c).collect::<String>()
    })
}

/// Who can reach the port, from the widest exposure of its owners.
fn bind_risk(port: u16, owners: &[Listener]) -> (Risk, String) {
    if owners.is_empty() {
        return (Risk::None, format!("nothing listens on port {port}"));
    }
    if owners.iter().any(|l| l.exposure == Exposure::AllInterfaces) {
        return (
            Risk::AllInterfaces,
            "listening on all interfaces: reachable from the network, not only from this machine"
                .to_owned(),
        );
    }
    let specific: Vec<String> = owners
        .iter()
        .filter(|l| l.exposure == Exposure::Specific)
        .flat_map(|l| l.addresses.iter().map(ToString::to_string))
        .collect();
    if !specific.is_empty() {
        return (
            Risk::SpecificAddress,
            format!(
                "listening on {}: reachable from that address's network",
                specific.join(", ")
            ),
        );
    }
    (
        Risk::LoopbackOnly,
        "listening on loopback only: reachable from this machine alone".to_owned(),
    )
}

/// Established TCP connections with `port` at either end, at most `HOLDMAP_INSPECT_ROWS_MAX`;
/// and how many more there were.
fn connections(snap: &Snapshot, port: u16) -> (Vec<Value>, usize) {
    let all: Vec<Value> = snap
        .sockets
        .iter()
        .filter(|s| {
            s.row.protocol == Protocol::Tcp
                && s.row.state == SocketState::Established
                && (s.row.local.port() == port || s.row.remote.port() == port)
        })
        .map(|s| {
            let pid = s.pids.first().copied();
            json!({
                "local": s.row.local.to_string(),
                "remote": s.row.remote.to_string(),
                "state": "established",
                "pid": pid,
                "process": pid.and_then(|p| snap.proc(p)).map(|p| clean(&p.name)),
            })
        })
        .collect();
    bounded(all)
}

/// Each owner's ancestors below pid 1 (farthest first), the owner, then its descendants; each
/// process once, at most `HOLDMAP_INSPECT_ROWS_MAX`.
fn process_tree(snap: &Snapshot, owners: &[Listener]) -> (Vec<Value>, usize) {
    let mut seen: Vec<i32> = Vec::new();
    let mut rows = Vec::new();
    for pid in owners.iter().filter_map(|l| l.pid) {
        let mut ancestors: Vec<i32> = snap.ancestors(pid).into_iter().filter(|p| *p > 1).collect();
        ancestors.reverse();
        let chain = ancestors
            .into_iter()
            .map(|p| (p, "ancestor"))
            .chain(std::iter::once((pid, "owner")))
            .chain(snap.descendants(pid).into_iter().map(|p| (p, "descendant")));
        for (p, role) in chain {
            if seen.contains(&p) {
                continue;
            }
            seen.push(p);
            if let Some(proc) = snap.proc(p) {
                let command = if proc.argv.is_empty() {
                    format!("[{}]", proc.name)
                } else {
                    redact_argv(&proc.argv)
                };
                rows.push(json!({
                    "pid": proc.pid,
                    "ppid": proc.ppid.max(0),
                    "name": clean(&proc.name),
                    "command": clean(&command),
                    "role": role,
                }));
            }
        }
    }
    bounded(rows)
}

fn bounded(mut rows: Vec<Value>) -> (Vec<Value>, usize) {
    let omitted = rows.len().saturating_sub(HOLDMAP_INSPECT_ROWS_MAX);
    rows.truncate(HOLDMAP_INSPECT_ROWS_MAX);
    (rows, omitted)
}
