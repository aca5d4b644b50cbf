//! The management protocol: what a CLI command (or the console, or `holdcall doctor`) asks the
//! daemon — policy, budgets, agents, connectors, held calls, status, shutdown — and what it is
//! answered, including the held calls pushed to a watching connection.

use serde::{Deserialize, Serialize};

use crate::policy::{Effect, Explanation, Scope};

/// Something a CLI command asks of the daemon. Every request gets exactly one response, in
/// order; a connection that sends one sends only these (see `ipc::Incoming`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum ManageRequest {
    #[serde(rename = "policy.set")]
    PolicySet { effect: Effect, scope: Scope },
    #[serde(rename = "policy.remove")]
    PolicyRemove { scope: Scope },
    #[serde(rename = "policy.list")]
    PolicyList,
    /// Set a budget (`holdcall policy budget N`).
    #[serde(rename = "budget.set")]
    BudgetSet {
        calls: i64,
        scope: crate::policy::budget::BudgetScope,
    },
    #[serde(rename = "budget.remove")]
    BudgetRemove {
        scope: crate::policy::budget::BudgetScope,
    },
    #[serde(rename = "policy.explain")]
    PolicyExplain {
        agent: Option<String>,
        connector: Option<String>,
        tool: String,
        /// The call's arguments as JSON text, to explain argument conditions.
        #[serde(default)]
        arguments: Option<String>,
    },
    /// Import a policy file's text (the daemon is the only writer); `dry_run` only diffs.
    #[serde(rename = "policy.import")]
    PolicyImport {
        file: String,
        text: String,
        dry_run: bool,
    },
    /// The whole policy set in force as Cedar text.
    #[serde(rename = "policy.export")]
    PolicyExport,
    #[serde(rename = "daemon.status")]
    Status,
    #[serde(rename = "daemon.shutdown")]
    Shutdown,
    /// The calls held for a person, with their arguments (`holdcall approve`).
    #[serde(rename = "approval.list")]
    ApprovalList,
    /// The held calls now, then one pushed `approval.held` line per call held later, until the
    /// connection closes (`holdcall approve --watch`).
    #[serde(rename = "approval.watch")]
    ApprovalWatch,
    /// A person's word on one held call: approve it, or reject it with an optional reason.
    #[serde(rename = "approval.decide")]
    ApprovalDecide {
        id: String,
        approve: bool,
        reason: Option<String>,
    },
    /// Enrol (or re-enrol) the executable at `path` (absolute) as agent `name`. The daemon
    /// reads the file itself.
    #[serde(rename = "agent.add")]
    AgentAdd { name: String, path: String },
    #[serde(rename = "agent.list")]
    AgentList,
    #[serde(rename = "agent.remove")]
    AgentRemove { name: String },
    /// Register (or replace) a connector's command and secret. Sent only to a verified daemon;
    /// its `Debug` never shows the secret.
    #[serde(rename = "connector.set")]
    ConnectorSet(crate::connector::SetRequest),
    #[serde(rename = "connector.remove")]
    ConnectorRemove { name: String },
    #[serde(rename = "connector.list")]
    ConnectorList,
    /// Whether the daemon reaches the credential store (`holdcall doctor`): it looks up a name no
    /// connector can have, so nothing is read or written.
    #[serde(rename = "vault.probe")]
    VaultProbe,
    /// Re-pin a connector's changed tools (or one of them) to the definition last listed.
    #[serde(rename = "tools.accept")]
    ToolsAccept {
        connector: String,
        tool: Option<String>,
    },
    /// Change a setting: `tools.drift` (ask, deny, allow) or `hide-denied.<connector>` (on, off).
    #[serde(rename = "setting.set")]
    SettingSet { key: String, value: String },
}

impl ManageRequest {
    /// Every `kind` this protocol has, in the order of the variants.
    pub(crate) const KINDS: &'static [&'static str] = &[
        "policy.set",
        "policy.remove",
        "policy.list",
        "budget.set",
        "budget.remove",
        "policy.explain",
        "policy.import",
        "policy.export",
        "daemon.status",
        "daemon.shutdown",
        "approval.list",
        "approval.watch",
        "approval.decide",
        "agent.add",
        "agent.list",
        "agent.remove",
        "connector.set",
        "connector.remove",
        "connector.list",
        "vault.probe",
        "tools.accept",
        "setting.set",
    ];
}

/// What the daemon answers a management request, or pushes to a watching connection
/// ([`ManageResponse::HeldNew`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub(crate) enum ManageResponse {
    #[serde(rename = "ok")]
    Ok,
    #[serde(rename = "connector.changed")]
    ConnectorChanged {
        message: String,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "vault.status")]
    VaultStatus { reachable: bool, message: String },
    #[serde(rename = "connector.list")]
    ConnectorList {
        connectors: Vec<crate::connector::ListedConnector>,
    },
    #[serde(rename = "error")]
    Error { message: String },
    #[serde(rename = "approval.list")]
    HeldCalls { calls: Vec<HeldCall> },
    /// Pushed to a watching management connection when a call is held.
    #[serde(rename = "approval.held")]
    HeldNew { call: HeldCall },
    #[serde(rename = "approval.decided")]
    Decided { message: String, chain_seq: i64 },
    #[serde(rename = "policy.changed")]
    PolicyChanged {
        message: String,
        changed: bool,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "policy.list")]
    PolicyList {
        policies: Vec<ListedPolicy>,
        #[serde(default)]
        budgets: Vec<crate::policy::budget::BudgetRow>,
        /// What a call to a tool whose definition changed since it was pinned gets, beside
        /// the rules: `ask` (the default), `deny` or `allow`.
        #[serde(default)]
        drift_guard: String,
    },
    #[serde(rename = "tools.accepted")]
    ToolsAccepted {
        accepted: Vec<crate::journal::Accepted>,
    },
    #[serde(rename = "setting.changed")]
    SettingChanged {
        message: String,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "policy.imported")]
    PolicyImported {
        message: String,
        diff: String,
        changed: bool,
        chain_seq: Option<i64>,
    },
    #[serde(rename = "policy.text")]
    PolicyText { text: String },
    #[serde(rename = "policy.explain")]
    Explain {
        explanation: Box<Explanation>,
        /// The budgets whose scope the explained call falls in, oldest first.
        #[serde(default)]
        budgets: Vec<crate::policy::budget::BudgetRow>,
    },
    #[serde(rename = "agent.changed")]
    AgentChanged { message: String, chain_seq: i64 },
    #[serde(rename = "agent.list")]
    AgentList { agents: Vec<ListedAgent> },
    #[serde(rename = "daemon.status")]
    Status {
        pid: u32,
        version: String,
        sessions: usize,
        policies: usize,
        head: Option<String>,
        entries: Option<i64>,
        durability: String,
        /// Why this daemon decides nothing right now (every call is refused), if so: the
        /// journal cannot be written (a full disk…), or the tables do not match the journal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cannot_decide: Option<String>,
    },
}

/// One held call as `holdcall approve` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HeldCall {
    pub id: String,
    pub session_id: String,
    pub seq: i64,
    pub agent: Option<String>,
    pub connector: String,
    pub tool: String,
    pub args_digest: String,
    /// The exact `params.arguments` text (None when the call had none).
    pub arguments: Option<String>,
    pub policy_id: Option<String>,
    pub reason: String,
    pub age_ms: u64,
    pub left_ms: u64,
}

/// One policy in force, as `holdcall policy list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ListedPolicy {
    pub id: String,
    pub seq: i64,
    /// `cli` for rules made on the command line.
    pub source: String,
    pub effect: String,
    pub specificity: i64,
    /// The scope of a rule made on the command line, in words.
    pub scope: Option<String>,
    pub text: String,
    pub created_at: String,
}

/// One enrolled agent, as `holdcall agent list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ListedAgent {
    pub name: String,
    pub path: String,
    /// `current`, or `stale` when the file is missing or its identity changed.
    pub state: String,
    /// Why it is stale.
    pub stale_because: Option<String>,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// SHA-256 of the content when it was enrolled (not checked again when matching).
    pub sha256: String,
    pub enrolled_at: String,
}
