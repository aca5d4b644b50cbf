//! The rules of the "needs you" list, as one pure function of a snapshot, the agents' reports
//! and the stored analyzer findings ([`needs`]; configured servers' rules are in `servers`):
//! which facts need the user, how badly, how each
//! is known, what to do, and the dry-run stop or `holdcall init` line that is the usual fix.
//!
//! Must never: read the machine or a file (everything comes in as arguments); decide by itself
//! whether a stop is allowed (that is `plan::plan_port`, the judgement `stop_port` makes, so a
//! preview offered here is never one `stop_port` refuses); put a secret value in a need.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::holdmap::agents::model::{
    AccessFact, AgentReport, Evidence, Level, PortRole, SafetySetting,
};
use crate::holdmap::analyzers::Insight;
use crate::holdmap::listeners::{self, Exposure, Listener};
use crate::holdmap::model::Snapshot;
use crate::holdmap::plan::{self, PlanOptions};
use crate::holdmap::protect;
use crate::os::sockets::Protocol;
use crate::text;

/// How much a need matters. Sorted most urgent first in results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    pub(crate) const ALL: [Severity; 4] = [
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|v| v.label() == s)
    }
}

/// What a need is about. The order here is the order within one severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    AgentRoot,
    ApprovalsDisabled,
    AgentExposed,
    SandboxDisabled,
    RiskySetting,
    ServerNotRouted,
    ServerUnpinned,
    ServerPinUnknown,
    ServerRoutingUnknown,
    DevServerLeftBehind,
    DevServerExposed,
    AnalyzerFinding,
    Incomplete,
}

impl Kind {
    pub(crate) const ALL: [Kind; 13] = [
        Kind::AgentRoot,
        Kind::ApprovalsDisabled,
        Kind::AgentExposed,
        Kind::SandboxDisabled,
        Kind::RiskySetting,
        Kind::ServerNotRouted,
        Kind::ServerUnpinned,
        Kind::ServerPinUnknown,
        Kind::ServerRoutingUnknown,
        Kind::DevServerLeftBehind,
        Kind::DevServerExposed,
        Kind::AnalyzerFinding,
        Kind::Incomplete,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::AgentRoot => "agent_root",
            Kind::ApprovalsDisabled => "approvals_disabled",
            Kind::AgentExposed => "agent_exposed",
            Kind::SandboxDisabled => "sandbox_disabled",
            Kind::RiskySetting => "risky_setting",
            Kind::ServerNotRouted => "server_not_routed",
            Kind::ServerUnpinned => "server_unpinned",
            Kind::ServerPinUnknown => "server_pin_unknown",
            Kind::ServerRoutingUnknown => "server_routing_unknown",
            Kind::DevServerLeftBehind => "dev_server_left_behind",
            Kind::DevServerExposed => "dev_server_exposed",
            Kind::AnalyzerFinding => "analyzer_finding",
            Kind::Incomplete => "incomplete",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.label() == s)
    }
}

/// What a need is about, as data (every field that does not apply is `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subject {
    /// `agent`, `server`, `setting`, `port`, `insight` or `collection`.
    pub(crate) what: &'static str,
    /// One line naming it (`claude-code server github in /home/u/.claude.json`).
    pub(crate) text: String,
    /// `agent:<pid>`, for a need about one agent.
    pub(crate) agent: Option<String>,
    pub(crate) pid: Option<i32>,
    pub(crate) port: Option<u16>,
    pub(crate) protocol: Option<&'static str>,
    /// The client whose file defines a server or setting (`claude-code`).
    pub(crate) client: Option<String>,
    pub(crate) alias: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) source: Option<PathBuf>,
}

/// The `holdcall init` lines that route a configured server through Holdcall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HoldcallInit {
    /// The folder to run it in (a project-scope file is read from the current directory).
    pub(crate) directory: Option<PathBuf>,
    /// Shows what it would change; writes nothing.
    pub(crate) preview: String,
    /// Writes the change (each file backed up first).
    pub(crate) write: String,
}

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Need {
    /// `need:` and 16 hex digits of SHA-256 over the kind and the subject's identity: the same
    /// on every call while the subject is the same, so it can later be acknowledged.
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) severity: Severity,
    pub(crate) evidence: Evidence,
    pub(crate) subject: Subject,
    /// The agents it concerns (`agent:<pid>`), sorted.
    pub(crate) agents: Vec<String>,
    pub(crate) summary: String,
    pub(crate) action: String,
    /// A dry-run `stop_port` for this port: only when `stop_port` would permit it.
    pub(crate) preview_port: Option<u16>,
    pub(crate) holdcall_init: Option<HoldcallInit>,
}

fn need_id(kind: Kind, key: &str) -> String {
    let digest = crate::ids::sha256_hex(format!("{}\0{key}", kind.label()).as_bytes());
    format!("need:{}", digest.get(..16).unwrap_or(&digest))
}

/// A need with its id made from `key` (the subject's identity, never display text alone).
#[allow(clippy::too_many_arguments)] // one private constructor, every field named at its callers
pub(super) fn need(
    kind: Kind,
    key: &str,
    severity: Severity,
    evidence: Evidence,
    subject: Subject,
    agents: Vec<String>,
    summary: String,
    action: String,
) -> Need {
    Need {
        id: need_id(kind, key),
        kind,
        severity,
        evidence,
        subject,
        agents,
        summary: text::visible(&summary),
        action: text::visible(&action),
        preview_port: None,
        holdcall_init: None,
    }
}

/// The port of a dry-run `stop_port` to offer for `port`, when `stop_port` (same snapshot,
/// default options) would permit it: holdmap's own account, not protected, a dev server.
pub(crate) fn stoppable(snap: &Snapshot, port: u16) -> Option<u16> {
    plan::plan_port(snap, port, None, PlanOptions::default())
        .permitted
        .then_some(port)
}

/// Every need of this machine, sorted most severe first, then by kind and subject.
pub(crate) fn needs(snap: &Snapshot, reports: &[AgentReport], insights: &[Insight]) -> Vec<Need> {
    let mut out: Vec<Need> = Vec::new();
    for r in reports {
        access_needs(snap, r, &mut out);
        if let Some(caps) = &r.capabilities {
            for s in &caps.settings {
                if s.risky {
                    push_merged(&mut out, setting_need(r, s));
                }
            }
            for s in &caps.servers {
                for n in super::servers::server_needs(r, s) {
                    push_merged(&mut out, n);
                }
            }
        }
    }
    dev_server_needs(snap, reports, &mut out);
    for i in insights.iter().filter(|i| i.state == "open") {
        if !repeats_a_live_need(&out, i) {
            out.push(insight_need(i));
        }
    }
    sort(&mut out);
    out
}

/// Most severe first, then kind, subject and id: a stable order.
pub(crate) fn sort(out: &mut [Need]) {
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.kind.cmp(&b.kind))
            .then_with(|| a.subject.text.cmp(&b.subject.text))
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// Adds `n`, or adds its agents to the need already there with the same id (two sessions of
/// one client read the same config file).
fn push_merged(out: &mut Vec<Need>, n: Need) {
    match out.iter_mut().find(|o| o.id == n.id) {
        Some(o) => {
            o.agents.extend(n.agents);
            o.agents.sort();
            o.agents.dedup();
        }
        None => out.push(n),
    }
}

fn agent_subject(r: &AgentReport) -> Subject {
    Subject {
        what: "agent",
        text: format!("{} ({}, pid {})", r.name, r.id, r.pid),
        agent: Some(r.id.clone()),
        pid: Some(r.pid),
        ..Subject::default()
    }
}

/// The agent's identity for an id: its pid and start time, so a reused pid is a new subject.
fn agent_key(r: &AgentReport) -> String {
    format!("{}@{}", r.id, r.start_ticks)
}

fn access_needs(snap: &Snapshot, r: &AgentReport, out: &mut Vec<Need>) {
    let exposed: Vec<_> = r
        .ports
        .iter()
        .filter(|p| p.exposed && p.role != PortRole::DevServer)
        .collect();
    for p in &exposed {
        let own = p.role == PortRole::Agent;
        let mut subject = agent_subject(r);
        subject.what = "port";
        subject.text = format!("{}/{} of {}", p.port, p.protocol.as_str(), subject.text);
        subject.pid = Some(p.pid);
        subject.port = Some(p.port);
        subject.protocol = Some(p.protocol.as_str());
        let mut n = need(
            Kind::AgentExposed,
            &format!(
                "{} port {}/{} pid {}",
                agent_key(r),
                p.port,
                p.protocol.as_str(),
                p.pid
            ),
            if own {
                Severity::High
            } else {
                Severity::Medium
            },
            Evidence::Observed,
            subject,
            vec![r.id.clone()],
            format!(
                "{} {} listens on {} port {} ({}), reachable beyond this machine",
                r.name,
                if own {
                    "itself"
                } else {
                    "started a process that"
                },
                p.address,
                p.port,
                p.protocol.as_str()
            ),
            if own {
                format!(
                    "Restart {} bound to 127.0.0.1 (or behind a firewall) unless other machines \
                     must reach it",
                    r.name
                )
            } else {
                format!(
                    "Bind it to 127.0.0.1, or stop it if nobody needs it (port {})",
                    p.port
                )
            },
        );
        if !own && p.protocol == Protocol::Tcp {
            n.preview_port = stoppable(snap, p.port);
        }
        out.push(n);
    }
    for f in r.access.iter().filter(|f| f.level == Level::Elevated) {
        // The network fact repeats the exposed ports (a dev server's too, listed on its own).
        if let Some(n) = access_need(r, f, r.ports.iter().any(|p| p.exposed)) {
            out.push(n);
        }
    }
}

/// An elevated access fact as a need: root, approvals or sandbox off, wider network access
/// (not again when an exposed port already says it).
fn access_need(r: &AgentReport, f: &AccessFact, has_exposed_port: bool) -> Option<Need> {
    let (kind, severity, action) = match f.kind {
        "user" => (
            Kind::AgentRoot,
            Severity::High,
            format!(
                "Run {} as your own account, not root: as root everything it runs can change \
                 the whole machine",
                r.name
            ),
        ),
        "approvals" => (
            Kind::ApprovalsDisabled,
            Severity::High,
            format!(
                "Restart {} without the flag that turns approval prompts off, so it asks before \
                 running commands",
                r.name
            ),
        ),
        "sandbox" => (
            Kind::SandboxDisabled,
            Severity::Medium,
            format!("Restart {} with its sandbox on", r.name),
        ),
        "network" if !has_exposed_port => (
            Kind::AgentExposed,
            Severity::Medium,
            format!(
                "Restart {} without wider network access unless it needs it",
                r.name
            ),
        ),
        _ => return None,
    };
    Some(need(
        kind,
        &format!("{} {}", agent_key(r), f.kind),
        severity,
        f.evidence,
        agent_subject(r),
        vec![r.id.clone()],
        format!("{} (pid {}): {}", r.name, r.pid, f.detail),
        action,
    ))
}

/// A risky safety setting: approvals and sandbox settings get their own kinds.
fn setting_need(r: &AgentReport, s: &SafetySetting) -> Need {
    let name = s.name.to_ascii_lowercase();
    let value = s.value.to_ascii_lowercase();
    // Settings that let the agent act without asking: approval modes, permission modes,
    // auto-accept / auto-approve switches, a server's `trust: true` (Gemini skips every
    // confirmation of its tools).
    let asks_less = [
        "approval",
        "permission",
        "autoaccept",
        "autoapprove",
        "yolo",
    ]
    .iter()
    .any(|w| name.contains(w))
        || name.ends_with(".trust")
        || value.contains("bypass");
    let (kind, severity) = if asks_less {
        (Kind::ApprovalsDisabled, Severity::High)
    } else if name.contains("sandbox") {
        (Kind::SandboxDisabled, Severity::Medium)
    } else {
        (Kind::RiskySetting, Severity::Medium)
    };
    let source = s.source.display().to_string();
    let subject = Subject {
        what: "setting",
        text: format!("{} setting {} in {source}", s.client, s.name),
        client: Some(s.client.to_owned()),
        source: Some(s.source.clone()),
        ..Subject::default()
    };
    need(
        kind,
        &format!("{}\0{}\0{source}", s.client, s.name),
        severity,
        Evidence::Observed,
        subject,
        vec![r.id.clone()],
        format!(
            "{} is set to `{}` in {source}: {} may act without asking",
            s.name, s.value, s.client
        ),
        format!(
            "Change {} in {source} back to a setting that asks first, if you did not mean it",
            s.name
        ),
    )
}

/// Why the dev server owned by `pid` is still looked after, if it is: an ancestor that is a
/// live agent's process or a session (interactive shell, terminal, editor, assistant host).
fn attended_by(snap: &Snapshot, reports: &[AgentReport], pid: i32) -> Option<String> {
    snap.ancestors(pid).into_iter().find_map(|a| {
        if let Some(r) = reports.iter().find(|r| r.process_ids.contains(&a)) {
            return Some(format!("{} ({})", r.name, r.id));
        }
        let p = snap.proc(a)?;
        protect::session_kind(p).map(|kind| format!("{kind} (pid {a})"))
    })
}

/// The process a left-behind server's tree now runs under, in words (`pid 1 (systemd)`): the
/// nearest protected ancestor (pid 1, a service manager such as `systemd --user`), past its
/// launchers (`npm`, `sh -c`).
fn adopted_by(snap: &Snapshot, pid: i32) -> String {
    let chain = snap.ancestors(pid);
    let guard = protect::Guard::new(snap);
    let adopter = chain
        .iter()
        .copied()
        .find(|a| guard.protection(*a).is_some())
        .or_else(|| chain.last().copied())
        .unwrap_or(0);
    match snap.proc(adopter) {
        Some(p) => format!(
            "pid {adopter} ({})",
            text::visible(&crate::holdmap::framework::shown_name(p))
        ),
        None => format!("pid {adopter}"),
    }
}

/// What to call a listener's owner: its framework, else its process name.
fn owner_label(l: &Listener) -> String {
    l.framework
        .map(|f| f.name.to_owned())
        .or_else(|| l.process.clone())
        .unwrap_or_else(|| "an unseen process".to_owned())
}

fn port_subject(l: &Listener, pid: i32) -> Subject {
    Subject {
        what: "port",
        text: format!(
            "{}/{} {} (pid {pid})",
            l.port,
            l.protocol.as_str(),
            owner_label(l)
        ),
        pid: Some(pid),
        port: Some(l.port),
        protocol: Some(l.protocol.as_str()),
        ..Subject::default()
    }
}

/// Dev servers left behind (holdmap's own account, no live agent or session above them), and
/// open dev servers reachable beyond loopback.
fn dev_server_needs(snap: &Snapshot, reports: &[AgentReport], out: &mut Vec<Need>) {
    for l in listeners::listeners(snap) {
        let Some(pid) = l.pid else { continue };
        if !l.is_dev || l.protocol != Protocol::Tcp {
            continue;
        }
        let start = snap.proc(pid).map_or(0, |p| p.start_ticks);
        let key = format!("{}/{} pid {pid}@{start}", l.port, l.protocol.as_str());
        let exposed = l.exposure != Exposure::Loopback;
        let reach = match l.exposure {
            Exposure::Loopback => "this machine only",
            Exposure::AllInterfaces => "every interface",
            Exposure::Specific => "a non-loopback address",
        };
        let agents: Vec<String> = reports
            .iter()
            .filter(|r| r.process_ids.contains(&pid))
            .map(|r| r.id.clone())
            .collect();
        let preview = stoppable(snap, l.port);
        let why_no_stop = match (&preview, &l.protected) {
            (Some(_), _) => None,
            (None, Some(p)) => Some(format!(" holdmap will not stop it: {}.", p.reason)),
            (None, None) if !l.is_mine => {
                Some(" holdmap will not stop it: it is another account's.".to_owned())
            }
            (None, None) => Some(" stop_port would refuse it.".to_owned()),
        };
        let left = l.is_mine && attended_by(snap, reports, pid).is_none();
        let mut n = if left {
            let severity = if exposed {
                Severity::High
            } else {
                Severity::Medium
            };
            need(
                Kind::DevServerLeftBehind,
                &key,
                severity,
                Evidence::Inferred,
                port_subject(&l, pid),
                agents,
                format!(
                    "Dev server {} on port {} (pid {pid}) has no agent or terminal left above \
                     it: it now runs under {}, reachable from {reach}",
                    owner_label(&l),
                    l.port,
                    adopted_by(snap, pid)
                ),
                match &why_no_stop {
                    None => format!(
                        "If nobody uses it, preview the stop (stop_port port {}, dry_run) and \
                         confirm it",
                        l.port
                    ),
                    Some(why) => format!("Stop it yourself if nobody uses it.{why}"),
                },
            )
        } else if exposed {
            need(
                Kind::DevServerExposed,
                &key,
                Severity::Medium,
                Evidence::Observed,
                port_subject(&l, pid),
                agents,
                format!(
                    "Dev server {} on port {} (pid {pid}) is reachable from {reach}",
                    owner_label(&l),
                    l.port
                ),
                format!(
                    "Restart it bound to 127.0.0.1 unless other machines must reach it.{}",
                    why_no_stop.unwrap_or_default()
                ),
            )
        } else {
            continue;
        };
        n.preview_port = preview;
        out.push(n);
    }
}

/// The rules whose findings the live server checks make again, fresher: a stored finding of
/// one of them about a server a live need already names is not listed twice.
const LIVE_RULES: &[&str] = &["unpinned", "pin-unknown", "not-routed", "unrecognized"];

fn repeats_a_live_need(live: &[Need], i: &Insight) -> bool {
    let (Some(source), Some(alias)) = (i.source.as_deref(), i.alias.as_deref()) else {
        return false;
    };
    LIVE_RULES.contains(&i.rule.as_str())
        && live.iter().any(|n| {
            n.subject.what == "server"
                && n.subject.alias.as_deref() == Some(alias)
                && n.subject
                    .source
                    .as_ref()
                    .is_some_and(|p| p.display().to_string() == source)
        })
}

fn insight_need(i: &Insight) -> Need {
    let subject = Subject {
        what: "insight",
        text: format!("{} from analyzer {}", i.subject, i.analyzer),
        client: (!i.agent.is_empty()).then(|| i.agent.clone()),
        ..Subject::default()
    };
    need(
        Kind::AnalyzerFinding,
        &format!("{}\0{}", i.analyzer, i.id),
        Severity::parse(&i.severity).unwrap_or(Severity::Info),
        Evidence::Inferred,
        subject,
        Vec::new(),
        format!("{}: {}", i.title, i.detail),
        i.action.clone().unwrap_or_else(|| {
            format!(
                "Read the finding with list_insights (analyzer {}) and decide",
                i.analyzer
            )
        }),
    )
}

/// A need saying part of the picture is missing (severity `info`), keyed by its cause.
pub(crate) fn incomplete(cause: &str, summary: String, action: String) -> Need {
    need(
        Kind::Incomplete,
        cause,
        Severity::Info,
        Evidence::Observed,
        Subject {
            what: "collection",
            text: cause.to_owned(),
            ..Subject::default()
        },
        Vec::new(),
        summary,
        action,
    )
}

/// How many needs of each severity.
pub(crate) fn counts(needs: &[Need]) -> BTreeMap<&'static str, usize> {
    Severity::ALL
        .into_iter()
        .map(|s| (s.label(), needs.iter().filter(|n| n.severity == s).count()))
        .collect()
}
