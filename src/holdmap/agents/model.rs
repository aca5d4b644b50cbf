//! What holdmap reports of one agent: plain data, built by `detect` (who the agents are),
//! `list` (their processes, tools, folders, ports, links and access facts), `capabilities`
//! (what their MCP config files define) and read by `flow`, `crate::holdmap::needs` and the
//! analyzers. Every fact carries how it is known ([`Evidence`]).
//!
//! Must never: hold an environment value, a header value, a URL's path, userinfo or query, an
//! instruction file's body, or a command line that has not been through `redact`.

use std::path::PathBuf;

use crate::os::sockets::Protocol;

/// How a fact is known. Serialised as `observed`, `inferred`, `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Evidence {
    /// Read from the machine now: a process, a socket, a flag on a command line, a file.
    Observed,
    /// Concluded from what was observed (a child that looks like an MCP server).
    Inferred,
    /// Could not be told (another account's process, a setting holdmap does not read).
    Unknown,
}

impl Evidence {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Evidence::Observed => "observed",
            Evidence::Inferred => "inferred",
            Evidence::Unknown => "unknown",
        }
    }
}

/// How much an access fact widens what the agent can do. Serialised `normal`, `elevated`,
/// `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Normal,
    Elevated,
    Unknown,
}

impl Level {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Level::Normal => "normal",
            Level::Elevated => "elevated",
            Level::Unknown => "unknown",
        }
    }
}

/// One access fact: `user` (the account; root is elevated), `sandbox`, `approvals`, `network`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AccessFact {
    /// `user`, `sandbox`, `approvals` or `network`.
    pub(crate) kind: &'static str,
    pub(crate) level: Level,
    pub(crate) evidence: Evidence,
    /// In words: `runs as root`, `--dangerously-skip-permissions on its command line`, …
    pub(crate) detail: String,
}

/// What a child process of an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    /// Looks like an MCP server (always `Evidence::Inferred`).
    McpServer,
    /// Holds a dev-server listener.
    DevServer,
    /// sh, bash, zsh, fish, …
    Shell,
    Command,
}

impl ToolKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            ToolKind::McpServer => "mcp_server",
            ToolKind::DevServer => "dev_server",
            ToolKind::Shell => "shell",
            ToolKind::Command => "command",
        }
    }
}

/// A process the agent started (any depth below it, not a nested agent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChildTool {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) name: String,
    pub(crate) kind: ToolKind,
    pub(crate) evidence: Evidence,
    /// For an MCP server: the package or program it was recognised by (`@playwright/mcp`).
    pub(crate) package: Option<String>,
    /// Its command line, redacted.
    pub(crate) command: String,
    /// Whether it runs through Holdcall's relay (`holdcall serve`, or below one).
    pub(crate) via_holdcall: bool,
}

/// A working directory of the agent or one of its processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Folder {
    pub(crate) path: PathBuf,
    /// The project it belongs to (its root), when one was found.
    pub(crate) project: Option<PathBuf>,
    pub(crate) evidence: Evidence,
}

/// The role of a port the agent's processes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortRole {
    /// The agent's own process listens.
    Agent,
    /// A dev server it started.
    DevServer,
    /// Anything else it started.
    Service,
}

impl PortRole {
    pub(crate) fn label(self) -> &'static str {
        match self {
            PortRole::Agent => "agent",
            PortRole::DevServer => "dev_server",
            PortRole::Service => "service",
        }
    }
}

/// A listener held by one of the agent's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentPort {
    pub(crate) port: u16,
    pub(crate) protocol: Protocol,
    /// The bound address, as text (`127.0.0.1`, `0.0.0.0`, `::`).
    pub(crate) address: String,
    pub(crate) pid: i32,
    pub(crate) role: PortRole,
    /// Bound beyond loopback (all interfaces or a non-loopback address).
    pub(crate) exposed: bool,
}

/// An established TCP connection of one of the agent's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) pid: i32,
    pub(crate) local: String,
    pub(crate) remote: String,
    /// The local process that listens on the remote end, when the remote end is this machine.
    pub(crate) peer_pid: Option<i32>,
    /// A well-known service hint for the remote port (`https`, `postgres`), never a DNS name.
    pub(crate) hint: Option<&'static str>,
}

/// A running agent as `list_agents` reports it.
#[derive(Debug, Clone)]
pub(crate) struct AgentReport {
    /// `agent:<pid>`.
    pub(crate) id: String,
    pub(crate) pid: i32,
    pub(crate) start_ticks: u64,
    /// The product's id (`claude-code`, `codex`, …), name and vendor, and its kind (`cli`,
    /// `ide`, `desktop`, `extension`).
    pub(crate) product: &'static str,
    pub(crate) name: &'static str,
    pub(crate) vendor: &'static str,
    pub(crate) kind: &'static str,
    /// The client whose config files hold its MCP servers, when holdmap reads them.
    pub(crate) client: Option<crate::clients::ClientId>,
    /// Its command line, redacted.
    pub(crate) command: String,
    /// The agent it runs inside (`agent:<pid>`), when nested.
    pub(crate) parent: Option<String>,
    pub(crate) uid: Option<u32>,
    /// Every pid it owns (itself and its helpers and tools), sorted.
    pub(crate) process_ids: Vec<i32>,
    pub(crate) tools: Vec<ChildTool>,
    pub(crate) folders: Vec<Folder>,
    pub(crate) ports: Vec<AgentPort>,
    pub(crate) links: Vec<Link>,
    /// CPU time used by all its processes so far, in seconds, and their resident memory.
    pub(crate) cpu_seconds: f64,
    pub(crate) memory_bytes: u64,
    pub(crate) access: Vec<AccessFact>,
    /// With `include_capabilities`: what its client's config files define.
    pub(crate) capabilities: Option<Capabilities>,
}

/// What an agent's MCP configuration files define (`include_capabilities: true`). Installed
/// definitions do not prove loading or use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Capabilities {
    /// Each file read, missing or refused.
    pub(crate) sources: Vec<SourceFile>,
    pub(crate) servers: Vec<ConfiguredServer>,
    pub(crate) permissions: Vec<PermissionRule>,
    pub(crate) settings: Vec<SafetySetting>,
    /// Instruction files (CLAUDE.md, AGENTS.md, GEMINI.md, …): names and paths only.
    pub(crate) instructions: Vec<PathBuf>,
    pub(crate) skills: Vec<Skill>,
    /// What could not be read or cannot be known, in words.
    pub(crate) limits: Vec<String>,
}

/// A config file holdmap looked at for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceFile {
    pub(crate) path: PathBuf,
    /// `user`, `project`, …
    pub(crate) scope: String,
    /// `read`, `missing` or `refused`.
    pub(crate) state: &'static str,
    /// Why it was refused (never its text).
    pub(crate) reason: Option<String>,
}

/// One MCP server an agent's config defines: metadata only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfiguredServer {
    /// The client (`claude-code`, …) whose file defines it.
    pub(crate) client: &'static str,
    /// Its name in the file.
    pub(crate) alias: String,
    /// `user`, `project`, `local <dir>`.
    pub(crate) scope: String,
    pub(crate) source: PathBuf,
    /// `stdio`, `http`, `sse`, `unknown`.
    pub(crate) transport: String,
    /// What the file says of it being on (None: nothing, the client's default).
    pub(crate) enabled: Option<bool>,
    /// The launcher or program (`npx`, `uvx`, `docker`, `node`, the binary's name).
    pub(crate) runner: Option<String>,
    /// The package or image it runs (without a version), when one could be read.
    pub(crate) package: Option<String>,
    /// `pinned`, `unpinned` or `unknown` (`clients::inspect::pin`), and why.
    pub(crate) pin: &'static str,
    pub(crate) pin_detail: String,
    /// A remote server's host (and port), never its path, userinfo or query.
    pub(crate) remote_host: Option<String>,
    pub(crate) env_names: Vec<String>,
    pub(crate) header_names: Vec<String>,
    /// `routed`, `not routed`, `remote`, `unrecognized` (`clients::routed`), and why when not
    /// routed through this holdcall.
    pub(crate) routing: &'static str,
    pub(crate) routing_detail: Option<String>,
    /// The Holdcall home its relay uses when the entry names one (`--home`, or `HOLDCALL_HOME`,
    /// `XDG_DATA_HOME` or `HOME` in its env block): None when it names none (the relay uses the
    /// home its client's environment gives) or it does not go through `holdcall serve`.
    pub(crate) holdcall_home: Option<String>,
    /// For a named home: `usual` (the home holdcall uses in holdmap's own environment), `other`
    /// or `relative` (resolved against the client's working directory, unknown here).
    pub(crate) holdcall_home_state: Option<&'static str>,
    /// The agent's processes that run it now (matched by command line): empty when none does.
    pub(crate) running_pids: Vec<i32>,
}

/// A permission rule from a client's settings (`Bash(npm test:*)` allowed, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PermissionRule {
    pub(crate) client: &'static str,
    /// `allow`, `ask`, `deny`.
    pub(crate) effect: &'static str,
    pub(crate) rule: String,
    pub(crate) source: PathBuf,
}

/// A documented safety setting and its value (`approval_policy = never`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SafetySetting {
    pub(crate) client: &'static str,
    pub(crate) name: String,
    pub(crate) value: String,
    /// Whether the value widens what the agent may do without asking.
    pub(crate) risky: bool,
    pub(crate) source: PathBuf,
}

/// A skill: a folder with a SKILL.md; its name and purpose only from the bounded YAML header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skill {
    pub(crate) client: &'static str,
    /// The folder's name (the skill's identity).
    pub(crate) folder: String,
    pub(crate) path: PathBuf,
    pub(crate) scope: String,
    /// Sanitised `name` and `description` from the header, when present and in bounds.
    pub(crate) name: Option<String>,
    pub(crate) purpose: Option<String>,
}
