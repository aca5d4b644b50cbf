//! The command line's grammar: `Cli`, `Command` and every subcommand's arguments (clap derive).
//! No behaviour here; `run` in `mod.rs` dispatches each command to its file.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::limits;
use crate::policy::Effect;

#[derive(Debug, Parser)]
#[command(
    name = "holdcall",
    version = crate::VERSION,
    about = "A local MCP firewall: every tools/call decided by policy, journaled, then forwarded byte for byte",
    propagate_version = true
)]
pub struct Cli {
    /// The home to use (config, journal, daemon), ahead of HOLDCALL_HOME and XDG_DATA_HOME;
    /// `holdcall init` writes it into every routed entry, so a relay started with a client's
    /// stripped environment uses the same home as your shell.
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Relay one stdio MCP server, deciding every tools/call (what MCP clients run).
    Serve {
        /// The name rules use for this server. Without it, the name is derived from the
        /// server command (its npm or Python package, image, module or script, else the
        /// command's name), and the session's journal entry says from what.
        #[arg(long)]
        connector: Option<String>,
        /// A label for the client program (shown in the journal; never identity).
        #[arg(long)]
        client: Option<String>,
        /// The server command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Run, start, stop, restart or inspect the per-user daemon.
    Daemon {
        #[command(subcommand)]
        action: DaemonCmd,
    },
    /// Add, remove, list and explain rules.
    Policy {
        #[command(subcommand)]
        action: PolicyCmd,
    },
    /// List the calls held for a person, with their exact arguments; or approve one by its id.
    Approve {
        /// The held call to approve (as listed); without it, list the held calls.
        #[arg(conflicts_with_all = ["watch", "json"])]
        id: Option<String>,
        /// Keep listing each call as it is held, until interrupted.
        #[arg(long)]
        watch: bool,
        /// One JSON object per held call.
        #[arg(long)]
        json: bool,
    },
    /// Reject a held call by its id; the client is told a person rejected it.
    Reject {
        id: String,
        /// Why, in one line; journaled, and shown to the client's model.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Enrol client programs (agents) that rules can name, list and remove them.
    Agent {
        #[command(subcommand)]
        action: AgentCmd,
    },
    /// Register, list and remove connectors whose server needs a secret (kept in the OS
    /// credential store, handed only to the registered command).
    Connector {
        #[command(subcommand)]
        action: ConnectorCmd,
    },
    /// The tool definitions each connector's server listed, as pinned: list them with their
    /// state and lint flags, re-pin changed ones after a person looked, set the drift guard.
    Tools {
        #[command(subcommand)]
        action: ToolsCmd,
    },
    /// Show the newest journal entries (as many as `--limit`), oldest first.
    Log(LogArgs),
    /// Serve a read-only page on a loopback address: the journal, held calls, sessions and
    /// policy. Deciding stays on the command line.
    Console {
        /// The port (0 picks a free one; the address is printed).
        #[arg(long, default_value_t = crate::console::DEFAULT_PORT)]
        port: u16,
        /// The loopback address to listen on: 127.0.0.1 (the default) or ::1; nothing else.
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Check the journal's hash chain.
    Verify {
        /// A head hash recorded earlier (by `holdcall status` or `verify`); catches truncation and recomputation.
        #[arg(long, value_name = "HASH")]
        expect_head: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Where Holdcall keeps things, whether the daemon runs, and the state of the journal.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Route every MCP client's stdio servers through holdcall: shows the change (dry run),
    /// writes it with --write (each file backed up first), or puts a file back with --undo.
    Init {
        /// Write the change (each file is backed up first).
        #[arg(long, conflicts_with = "undo")]
        write: bool,
        /// Restore the file this backup was taken of (a path `init --write` printed).
        #[arg(long, value_name = "BACKUP")]
        undo: Option<String>,
        /// With --undo: restore even if the file changed since holdcall wrote it.
        #[arg(long, requires = "undo")]
        force: bool,
    },
    /// Check everything calls need to flow through holdcall; exit 1 on a FAIL.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Every MCP server configured in every client: routed or not, pinned or not.
    Inventory {
        #[arg(long)]
        json: bool,
    },
    /// Print the version.
    Version,
    /// A one-minute tour in a throwaway home: a demo server, two rules, three calls.
    Demo,
    /// The built-in demo MCP server (used by `holdcall demo` and the tests).
    #[command(name = "demo-server", hide = true)]
    DemoServer {
        /// Append every line received to this file.
        #[arg(long)]
        record: Option<PathBuf>,
        /// Ignore end of input and SIGTERM (to test how the relay stops a stubborn server).
        #[arg(long)]
        stubborn: bool,
        /// List this many more tools (`tool-1`…), and answer `prompts/list` with the same
        /// objects: a listing the relay pins beside one of the same size it only passes
        /// (tools/bench).
        #[arg(long, default_value_t = 0)]
        extra_tools: usize,
    },
    /// Time decision round trips against the daemon, connected as relays are (tools/bench).
    #[command(name = "bench-decisions", hide = true)]
    BenchDecisions {
        /// Concurrent relay connections.
        #[arg(long, default_value_t = 1)]
        relays: usize,
        /// Timed calls per relay.
        #[arg(long, default_value_t = 10_000)]
        calls: usize,
        /// Untimed calls per relay first.
        #[arg(long, default_value_t = 200)]
        warmup: usize,
        #[arg(long, default_value = "bench")]
        connector: String,
        #[arg(long, default_value = "echo")]
        tool: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Run the daemon in the foreground (what `start` runs in the background).
    Run {
        /// Be the daemon itself. Without it, `run` supervises: it runs the daemon as its child
        /// and records how it ended when it ends abnormally (`daemon.exit`, `status`).
        #[arg(long, hide = true)]
        child: bool,
    },
    /// Start the daemon in the background if it is not running.
    Start,
    /// Stop the daemon.
    Stop,
    /// Stop the daemon (this build or an older one at the same path) and start this build.
    Restart,
    /// Say whether the daemon runs and whether it is this build.
    Status,
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Enrol the executable at PATH as agent NAME: a relay whose parent process runs that file
    /// gets NAME as its agent. Re-adding a NAME replaces its enrolment.
    Add {
        name: String,
        /// The client program's executable (symlinks are followed).
        path: PathBuf,
    },
    /// List the enrolled agents, each `current` or `STALE` (the file changed or is gone).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an enrolment (refused while rules name the agent).
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub enum ConnectorCmd {
    /// Register NAME's server command and its secret. The secret is read from stdin (one line)
    /// or typed at a prompt that does not echo; never from the command line.
    Set {
        /// The connector name (the --connector given to `holdcall serve`).
        name: String,
        /// The environment variable the server reads its secret from.
        #[arg(long = "env", value_name = "KEY")]
        env_key: String,
        /// A variable of the relay's environment the server also gets (repeatable).
        #[arg(long = "pass-env", value_name = "NAME")]
        pass_env: Vec<String>,
        /// The server command and its arguments, after `--`; resolved to an absolute path now.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Delete NAME's secret from the credential store and unregister it.
    Remove { name: String },
    /// The registered connectors: name, key, command, pass-through names (never a secret).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Take the tools this agent's policy denies outright out of NAME's tools/list (off by
    /// default). The relay then forwards that listing re-serialised without them.
    HideDenied {
        /// The connector name (any, registered or not).
        name: String,
        #[arg(value_enum)]
        state: OnOff,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Debug, Subcommand)]
pub enum ToolsCmd {
    /// Every pinned tool: its connector, state (pinned, changed, gone) and lint flags.
    List {
        /// Only this connector's tools.
        #[arg(long)]
        connector: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Re-pin CONNECTOR's changed tools (or only TOOL) to the definition last listed, after a
    /// person looked at what changed (shown, and journaled).
    Accept {
        connector: String,
        tool: Option<String>,
    },
    /// What a call to a tool whose definition changed since it was pinned gets: ask (held for
    /// a person, the default), deny, or allow (the rules alone decide).
    Drift {
        #[arg(value_parser = ["ask", "deny", "allow"])]
        effect: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// Only for this enrolled agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only for this connector (the --connector name given to `holdcall serve`).
    #[arg(long)]
    pub connector: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EffectArg {
    Deny,
    Allow,
    Ask,
}

impl From<EffectArg> for Effect {
    fn from(e: EffectArg) -> Effect {
        match e {
            EffectArg::Deny => Effect::Deny,
            EffectArg::Allow => Effect::Allow,
            EffectArg::Ask => Effect::Ask,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum PolicyCmd {
    /// Refuse calls to TOOL.
    Deny {
        tool: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Allow calls to TOOL (beats a less specific deny).
    Allow {
        tool: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Hold calls to TOOL for a person.
    Ask {
        tool: String,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Set what happens to every tool no more specific rule names.
    Default {
        effect: EffectArg,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Remove the rule for TOOL (or the default) in the given scope.
    Remove {
        #[arg(required_unless_present = "default", conflicts_with = "default")]
        tool: Option<String>,
        #[arg(long)]
        default: bool,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// List the rules in force, with their Cedar text.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show how a call would be decided, and why.
    Explain {
        tool: String,
        #[command(flatten)]
        scope: ScopeArgs,
        /// The call's arguments, as a JSON object.
        #[arg(long, value_name = "JSON")]
        arguments: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Import a file of Cedar policies (replacing what the same file imported last time).
    Import {
        file: PathBuf,
        /// Print the diff and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the whole policy set in force as Cedar (command-line rules included).
    Export {
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Check a policy file as an import would, changing nothing.
    Validate { file: PathBuf },
    /// Show what importing a file would change, changing nothing.
    Diff { file: PathBuf },
    /// Every policy change recorded in the journal, with its diff.
    History,
    /// The policy set as it stood at a journal entry, rebuilt from the recorded diffs alone.
    Show {
        #[arg(long, value_name = "ENTRY")]
        at: i64,
    },
    /// Cap the calls one relay session may have allowed within a scope (`budget remove …`
    /// lifts it). A budget only narrows what the rules allow; refused calls never count.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        allow_negative_numbers = true
    )]
    Budget {
        #[command(subcommand)]
        action: Option<BudgetCmd>,
        /// Most calls allowed per relay session, 1 to 1000000.
        #[arg(value_name = "N", required = true)]
        calls: Option<String>,
        #[command(flatten)]
        which: BudgetTools,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Decide every call in a cases file and compare with the expected decisions (exit 1 on a
    /// failure). Tests the policy in force, or only FILE with --policy (no daemon needed).
    Test {
        cases: PathBuf,
        /// Test this policy file alone instead of the policy in force.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BudgetCmd {
    /// Remove the budget of exactly this scope.
    Remove {
        #[command(flatten)]
        which: BudgetTools,
        #[command(flatten)]
        scope: ScopeArgs,
    },
}

/// Which tools a budget counts: one, or every tool (exactly one of the two).
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct BudgetTools {
    /// Count calls of this tool only.
    #[arg(long)]
    pub tool: Option<String>,
    /// Count calls of every tool together.
    #[arg(long)]
    pub all_tools: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    #[arg(long)]
    pub json: bool,
    /// Show at most the newest N entries (after the filters).
    #[arg(long, short = 'n', value_name = "N", default_value_t = limits::LOG_DEFAULT_LIMIT)]
    pub limit: usize,
    /// Only this session (a prefix of its id is enough).
    #[arg(long)]
    pub session: Option<String>,
    /// Only calls to this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only entries with this decision: allow, deny, ask, over-budget, undecided
    /// (call.request), approved, rejected (call.approval).
    #[arg(long)]
    pub decision: Option<String>,
}
