//! The command line: every `holdcall` command, its arguments, its output and its exit code.
//!
//! Owns: parsing (clap), rendering for people and `--json` for programs. Must never: hold
//! business logic (decisions are the daemon's, records are the journal's), or write to the
//! database (changes go through the daemon; listings read it read-only).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};

mod daemon;
mod setup;

use daemon::{daemon_cmd, daemon_line};

use crate::config::{Config, Home};
use crate::ipc::{self, ManageRequest as Request, ManageResponse as Response, Probe, WireError};
use crate::journal::{self, ChainState, Entry, LogFilter, Reader};
use crate::limits;
use crate::policy::{Effect, Explanation, Scope};
use crate::relay::{self, ServeOptions};

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

/// Everything a command can fail with. Each is said in one line with what to do.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CliError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Wire(#[from] WireError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Journal(#[from] journal::JournalError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Relay(#[from] relay::RelayError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Daemon(#[from] crate::daemon::DaemonError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Supervise(#[from] crate::daemon::supervise::SuperviseError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    PolicyFile(#[from] crate::policy::file::FileRefused),
    #[error(transparent)]
    #[diagnostic(transparent)]
    BudgetCap(#[from] crate::policy::budget::BadCap),
    #[error(transparent)]
    #[diagnostic(transparent)]
    PolicyCases(#[from] Box<crate::policy::cases::CasesError>),
    #[error(transparent)]
    #[diagnostic(transparent)]
    ClientConfig(#[from] crate::clients::ClientConfigError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Console(#[from] crate::console::ConsoleError),
    #[error("{0}")]
    #[diagnostic(code(holdcall::cli::refused))]
    Refused(String),
    #[error("the daemon sent an answer this command did not expect")]
    #[diagnostic(
        code(holdcall::cli::unexpected),
        help("run `holdcall daemon restart` so the daemon is this build")
    )]
    Unexpected,
    #[error("cannot write the output: {0}")]
    #[diagnostic(code(holdcall::cli::output))]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Bench(#[from] crate::bench::BenchError),
    #[error(transparent)]
    #[diagnostic(transparent)]
    Connector(#[from] crate::connector::ConnectorError),
    #[error("refusing the process on {socket}: {why}; the secret was not sent to it")]
    #[diagnostic(
        code(holdcall::cli::secret_not_sent),
        help(
            "a secret goes only to this Holdcall build's daemon running as you; stop whatever \
             listens there, then `holdcall daemon start`"
        )
    )]
    SecretNotSent { socket: String, why: String },
    #[error("the demo failed: {0}")]
    #[diagnostic(
        code(holdcall::cli::demo),
        help("run `holdcall demo` again; if it repeats, report it")
    )]
    Demo(String),
}

/// Runs one command and returns the process exit code.
pub fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(dir) = cli.home {
        Home::set_explicit(dir);
    }
    match cli.command {
        Command::Serve {
            connector,
            client,
            command,
        } => {
            let home = Home::from_env()?;
            // A bad config is fatal for every command: a relay must not run on settings it
            // could not read.
            Config::load(&home)?;
            let (connector, connector_from) = match connector {
                Some(c) => (c, None),
                None => {
                    let words: Vec<String> = command
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect();
                    let (program, args) =
                        words.split_first().ok_or(relay::RelayError::NoCommand)?;
                    let (c, from) = crate::clients::derived_connector(program, args);
                    eprintln!(
                        "holdcall: no --connector given: using connector {c}, derived from {from}"
                    );
                    (c, Some(from))
                }
            };
            // The relay runs on one thread: the thread that starts the server must outlive it,
            // because the server's parent-death signal follows that thread.
            let rt = ipc::current_thread()?;
            let code = rt.block_on(relay::serve(
                home,
                ServeOptions {
                    connector,
                    connector_from,
                    client,
                    command,
                },
            ));
            // The runtime's stdin reader may still be blocked in read(2) on a client that keeps
            // its end open; do not wait for it.
            rt.shutdown_background();
            Ok(code?)
        }
        Command::Daemon { action } => daemon_cmd(action),
        Command::Policy { action } => policy_cmd(action),
        Command::Connector { action } => connector_cmd(action),
        Command::Approve {
            id: Some(id),
            watch: _,
            json: _,
        } => decide_cmd(id, true, None),
        Command::Approve {
            id: None,
            watch,
            json,
        } => approve_list(watch, json),
        Command::Reject { id, reason } => decide_cmd(id, false, reason),
        Command::Agent { action } => agent_cmd(action),
        Command::Log(args) => log_cmd(args),
        Command::Console { port, bind } => {
            Ok(crate::console::run(crate::console::Options { bind, port })?)
        }
        Command::Verify { expect_head, json } => verify_cmd(expect_head, json),
        Command::Status { json } => status_cmd(json),
        Command::Init { write, undo, force } => setup::init(write, undo, force),
        Command::Doctor { json } => setup::doctor(json),
        Command::Inventory { json } => setup::inventory(json),
        Command::Version => {
            println!("{}", version_line());
            Ok(0)
        }
        Command::Demo => crate::demo::run().map_err(CliError::Demo),
        Command::DemoServer { record, stubborn } => {
            crate::demo::serve_demo(record.as_deref(), stubborn)?;
            Ok(0)
        }
        Command::BenchDecisions {
            relays,
            calls,
            warmup,
            connector,
            tool,
            json,
        } => bench_decisions(
            crate::bench::BenchOptions {
                relays,
                calls,
                warmup,
                connector,
                tool,
            },
            json,
        ),
    }
}

fn bench_decisions(opts: crate::bench::BenchOptions, json: bool) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    // One thread, as a relay runs: every relay's connection shares it.
    let rt = ipc::current_thread()?;
    let r = rt.block_on(crate::bench::run(home, opts))?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &r).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        let us = |ns: u64| ns as f64 / 1000.0;
        writeln!(
            out,
            "{} decisions over {} relay(s): p50 {:.1} µs, p95 {:.1} µs, p99 {:.1} µs, max {:.1} µs; {:.0} decisions/s",
            r.decisions,
            r.relays,
            us(r.p50_ns),
            us(r.p95_ns),
            us(r.p99_ns),
            us(r.max_ns),
            r.decisions_per_s
        )?;
    }
    Ok(0)
}

pub fn version_line() -> String {
    format!(
        "holdcall {} ({}/{})",
        crate::VERSION,
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

pub(crate) fn home_and_config() -> Result<(Home, Config), CliError> {
    let home = Home::from_env()?;
    let config = Config::load(&home)?;
    Ok((home, config))
}

/// Sends one management request to the daemon (started if needed) and returns its answer;
/// an `error` answer becomes `CliError::Refused`.
pub(crate) fn ask_daemon(req: Request) -> Result<Response, CliError> {
    ask_daemon_within(req, limits::CLI_REQUEST_TIMEOUT)
}

fn ask_daemon_within(req: Request, timeout: Duration) -> Result<Response, CliError> {
    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    rt.block_on(async {
        let mut conn = ipc::connect_or_start(&home).await?;
        match conn.call(&req, timeout).await {
            Ok(Response::Error { message }) => Err(CliError::Refused(message)),
            Ok(other) => Ok(other),
            // A verified daemon that hangs up without answering says why in its log only.
            Err(WireError::Closed) => Err(CliError::Refused(format!(
                "the daemon closed the connection without answering; the end of {} says: {}",
                home.daemon_log_path().display(),
                log_tail(&home.daemon_log_path(), 3)
            ))),
            Err(e) => Err(e.into()),
        }
    })
}

/// The last `n` lines of a log, on one line, made visible (for an error message).
fn log_tail(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines
        .get(lines.len().saturating_sub(n)..)
        .unwrap_or_default();
    if tail.is_empty() {
        return "(nothing)".into();
    }
    visible(&tail.join(" | "))
}

fn connector_cmd(action: ConnectorCmd) -> Result<i32, CliError> {
    match action {
        ConnectorCmd::Set {
            name,
            env_key,
            pass_env,
            command,
        } => connector_set(name, env_key, pass_env, command),
        ConnectorCmd::Remove { name } => {
            crate::policy::validate_scope_name("connector", &name)?;
            connector_changed(ask_daemon_within(
                Request::ConnectorRemove { name },
                limits::STORE_REQUEST_TIMEOUT,
            )?)
        }
        ConnectorCmd::List { json } => connector_list(json),
    }
}

fn connector_changed(resp: Response) -> Result<i32, CliError> {
    match resp {
        Response::ConnectorChanged { message, .. } => {
            println!("{message}");
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

/// `connector set`: everything is checked and the command resolved before the daemon is dialed;
/// the daemon is verified before the secret is even read; only then is it sent.
fn connector_set(
    name: String,
    env_key: String,
    pass_env: Vec<String>,
    command: Vec<OsString>,
) -> Result<i32, CliError> {
    use crate::connector::{self, ConnectorError};
    crate::policy::validate_scope_name("connector", &name)?;
    if env_key.contains('=') {
        return Err(ConnectorError::EnvKey(
            "--env takes only the variable's name (KEY, not KEY=value): the secret is read from \
             stdin or a prompt, never from the command line"
                .into(),
        )
        .into());
    }
    let words = command
        .iter()
        .map(|w| {
            w.to_str().map(str::to_string).ok_or_else(|| {
                ConnectorError::Command(format!("the command word {w:?} is not UTF-8"))
            })
        })
        .collect::<Result<Vec<String>, _>>()?;
    let Some((program, args)) = words.split_first() else {
        return Err(ConnectorError::Command("no command after `--`".into()).into());
    };
    let cwd = std::env::current_dir()?;
    let resolved = connector::resolve_program(program, std::env::var_os("PATH").as_ref(), &cwd)?;
    let resolved = resolved.to_str().map(str::to_string).ok_or_else(|| {
        ConnectorError::Command(format!("{} is not a UTF-8 path", resolved.display()))
    })?;
    let mut full = vec![resolved];
    full.extend(args.iter().cloned());
    let mut req = connector::SetRequest {
        name,
        env_key,
        command: full,
        pass_env,
        // Checked with a placeholder now, so a bad key or command fails before the prompt.
        secret: crate::vault::Secret::new("x".into()),
        // The server runs here, with PATH, HOME… as they are now, whatever the relay's are.
        cwd: cwd.to_str().map(str::to_string).ok_or_else(|| {
            ConnectorError::Command(format!("{} is not a UTF-8 path", cwd.display()))
        })?,
        pinned_env: connector::pinned_now(),
    };
    connector::validate(&req)?;
    if let Some(notice) = connector::runtime_resolver_notice(&req.command) {
        eprintln!("holdcall: note: {notice}");
    }

    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    let mut conn = rt
        .block_on(ipc::connect_or_start(&home))
        .map_err(|e| match e {
            WireError::NotVerified { socket, why } => CliError::SecretNotSent { socket, why },
            other => CliError::Wire(other),
        })?;
    req.secret = read_secret()?;
    connector::validate_secret(req.secret.expose())?;
    let resp = rt.block_on(async {
        match conn
            .call(&Request::ConnectorSet(req), limits::STORE_REQUEST_TIMEOUT)
            .await?
        {
            Response::Error { message } => Err(CliError::Refused(message)),
            other => Ok(other),
        }
    })?;
    connector_changed(resp)
}

/// The secret: one line from stdin when it is not a terminal, else typed at a `Secret: ` prompt
/// (on stderr) with echo turned off. The newline is not part of it.
fn read_secret() -> Result<crate::vault::Secret, CliError> {
    use std::io::{BufRead, IsTerminal, Read};
    let stdin = std::io::stdin();
    let mut line = Vec::new();
    if stdin.is_terminal() {
        // Echo, line editing and signals go off before the prompt appears, so nothing typed
        // after it is ever shown; the line is read byte by byte here (no 4095-byte canonical
        // line limit), and Ctrl-C is a byte that ends the prompt with the terminal restored.
        let _quiet = EchoOff::new(&stdin)?;
        eprint!("Secret: ");
        std::io::stderr().flush()?;
        let typed = read_typed_line(&mut stdin.lock())?;
        eprintln!();
        line = typed.ok_or_else(|| {
            CliError::Refused("interrupted at the prompt; nothing was stored".into())
        })?;
    } else {
        // One byte past the limit (and its line break) is enough to know it is too long.
        stdin
            .lock()
            .take(limits::SECRET_BYTES_MAX as u64 + 3)
            .read_until(b'\n', &mut line)?;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
    }
    let text = String::from_utf8(line).map_err(|_| {
        crate::connector::ConnectorError::Secret("the secret is not UTF-8 text".into())
    })?;
    crate::connector::validate_secret(&text)?;
    Ok(crate::vault::Secret::new(text))
}

/// One line typed at a terminal in non-canonical mode: Enter ends it, Backspace removes the
/// last character, Ctrl-U clears it, Ctrl-C or Ctrl-D (or the end of input) abandon it (None).
/// At most one byte past `limits::SECRET_BYTES_MAX` is kept, so an over-long secret is refused
/// rather than cut.
fn read_typed_line(input: &mut impl std::io::Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut line: Vec<u8> = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if input.read(&mut byte)? == 0 {
            return Ok(None);
        }
        match byte {
            [b'\r' | b'\n'] => return Ok(Some(line)),
            [0x03 | 0x04] => return Ok(None),
            [0x15] => line.clear(),
            [0x7f | 0x08] => {
                // Remove one whole UTF-8 character.
                while let Some(b) = line.pop() {
                    if b & 0xC0 != 0x80 {
                        break;
                    }
                }
            }
            [b] => {
                if line.len() <= limits::SECRET_BYTES_MAX {
                    line.push(b);
                }
            }
        }
    }
}

/// Terminal echo turned off for as long as it lives (restored on drop, error or not).
struct EchoOff {
    fd: std::os::fd::OwnedFd,
    saved: nix::sys::termios::Termios,
}

impl EchoOff {
    fn new(stdin: &std::io::Stdin) -> Result<EchoOff, CliError> {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        use std::os::fd::AsFd;
        let fd = stdin.as_fd().try_clone_to_owned()?;
        let saved = tcgetattr(&fd).map_err(std::io::Error::from)?;
        let mut quiet = saved.clone();
        // No echo, no line discipline (the line is read byte by byte), no signals from keys:
        // Ctrl-C arrives as a byte, so the terminal is always put back by `Drop`.
        quiet
            .local_flags
            .remove(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::ISIG);
        use nix::sys::termios::SpecialCharacterIndices::{VMIN, VTIME};
        for (index, value) in [(VMIN, 1), (VTIME, 0)] {
            if let Some(c) = quiet.control_chars.get_mut(index as usize) {
                *c = value;
            }
        }
        tcsetattr(&fd, SetArg::TCSAFLUSH, &quiet).map_err(std::io::Error::from)?;
        Ok(EchoOff { fd, saved })
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            &self.fd,
            nix::sys::termios::SetArg::TCSADRAIN,
            &self.saved,
        );
    }
}

/// The start of every `… list [--json]`: the whole list as JSON, or the line that says it is
/// empty. True when that was all there is to print.
fn listed_whole<T: serde::Serialize>(
    out: &mut impl Write,
    items: &[T],
    json: bool,
    empty: &str,
) -> Result<bool, CliError> {
    if json {
        serde_json::to_writer_pretty(&mut *out, items).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(true);
    }
    if items.is_empty() {
        writeln!(out, "{empty}")?;
        return Ok(true);
    }
    Ok(false)
}

fn connector_list(json: bool) -> Result<i32, CliError> {
    let Response::ConnectorList { connectors } = ask_daemon(Request::ConnectorList)? else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if listed_whole(
        &mut out,
        &connectors,
        json,
        "(no connectors registered: every server runs as its client's configuration says, with no secret from Holdcall)",
    )? {
        return Ok(0);
    }
    for c in &connectors {
        let pass = if c.pass_env.is_empty() {
            String::new()
        } else {
            format!("; passes {}", c.pass_env.join(", "))
        };
        writeln!(
            out,
            "{}  secret in {}  runs {}  (since {}{pass})",
            c.name,
            c.env_key,
            visible(&c.command.join(" ")),
            local_time(&c.updated_at)
        )?;
    }
    Ok(0)
}

/// `holdcall approve ID` / `holdcall reject ID [--reason TEXT]`.
fn decide_cmd(id: String, approve: bool, reason: Option<String>) -> Result<i32, CliError> {
    if !crate::approval::valid_hold_id(&id) {
        return Err(CliError::Refused(format!(
            "{:?} is not a hold id (12 lowercase hex characters); `holdcall approve` lists the held calls",
            crate::text::visible(&id)
        )));
    }
    if let Some(r) = &reason {
        crate::approval::check_reason(r).map_err(CliError::Refused)?;
    }
    match ask_daemon(Request::ApprovalDecide {
        id,
        approve,
        reason,
    })? {
        Response::Decided { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

fn agent_cmd(action: AgentCmd) -> Result<i32, CliError> {
    let req = match action {
        AgentCmd::Add { name, path } => {
            crate::policy::validate_scope_name("agent", &name)?;
            // Absolute, symlinks resolved: the daemon stats exactly this file.
            let abs = std::fs::canonicalize(&path).map_err(|e| {
                CliError::Refused(format!(
                    "cannot resolve {}: {e}",
                    visible(&path.display().to_string())
                ))
            })?;
            let Some(abs) = abs.to_str().map(str::to_string) else {
                return Err(CliError::Refused(format!(
                    "{} is not valid UTF-8; Holdcall stores paths as text",
                    abs.display()
                )));
            };
            Request::AgentAdd { name, path: abs }
        }
        AgentCmd::Remove { name } => {
            crate::policy::validate_scope_name("agent", &name)?;
            Request::AgentRemove { name }
        }
        AgentCmd::List { json } => return agent_list(json),
    };
    let timeout = match req {
        Request::AgentAdd { .. } => limits::AGENT_ADD_TIMEOUT,
        _ => limits::CLI_REQUEST_TIMEOUT,
    };
    match ask_daemon_within(req, timeout)? {
        Response::AgentChanged { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

/// `holdcall approve [--watch]`: the held calls, each with its exact arguments. With `--watch`
/// the daemon pushes each call held later on the same connection (no polling: a call shows the
/// moment it is held, and an idle watch costs nothing), until interrupted.
fn approve_list(watch: bool, json: bool) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    rt.block_on(async {
        let mut conn = ipc::connect_or_start(&home).await?;
        let req = if watch {
            Request::ApprovalWatch
        } else {
            Request::ApprovalList
        };
        let calls = match conn.call(&req, limits::CLI_REQUEST_TIMEOUT).await? {
            Response::HeldCalls { calls } => calls,
            Response::Error { message } => return Err(CliError::Refused(message)),
            _ => return Err(CliError::Unexpected),
        };
        let mut shown: std::collections::HashSet<String> = std::collections::HashSet::new();
        if calls.is_empty() && !json {
            let mut out = std::io::stdout().lock();
            if watch {
                writeln!(out, "no calls are held; waiting for the next one (Ctrl-C stops)")?;
            } else {
                writeln!(out, "no calls are held")?;
            }
            out.flush()?;
        }
        for c in &calls {
            show_held(c, json)?;
            shown.insert(c.id.clone());
        }
        if !watch {
            if !calls.is_empty() && !json {
                println!(
                    "approve one with `holdcall approve ID`, reject it with `holdcall reject ID [--reason TEXT]`"
                );
            }
            return Ok(0);
        }
        loop {
            tokio::select! {
                next = conn.recv() => match next {
                    Ok(Response::HeldNew { call }) => {
                        if shown.insert(call.id.clone()) {
                            show_held(&call, json)?;
                        }
                    }
                    Ok(_) => return Err(CliError::Unexpected),
                    Err(WireError::Closed) => {
                        return Err(CliError::Refused(
                            "the daemon closed the connection (it stopped); nothing more will be shown".into(),
                        ));
                    }
                    Err(e) => return Err(e.into()),
                },
                _ = tokio::signal::ctrl_c() => return Ok(0),
            }
        }
    })
}

fn show_held(call: &ipc::HeldCall, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, call).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", crate::approval::render(call))?;
    }
    out.flush()?;
    Ok(())
}

fn agent_list(json: bool) -> Result<i32, CliError> {
    let Response::AgentList { agents } = ask_daemon(Request::AgentList)? else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if listed_whole(
        &mut out,
        &agents,
        json,
        "(no agents enrolled: every session is unenrolled, bound only by rules naming no agent)",
    )? {
        return Ok(0);
    }
    for a in &agents {
        let state = if a.state == "current" {
            "current"
        } else {
            "STALE"
        };
        writeln!(
            out,
            "{}  {}  {}  (enrolled {})",
            visible(&a.name),
            state,
            visible(&a.path),
            local_time(&a.enrolled_at)
        )?;
        if let Some(why) = &a.stale_because {
            writeln!(
                out,
                "    {}; it matches no process until `holdcall agent add {} {}` again",
                visible(why),
                visible(&a.name),
                visible(&a.path)
            )?;
        }
    }
    Ok(0)
}

fn scope(tool: Option<String>, s: ScopeArgs) -> Scope {
    Scope {
        tool,
        agent: s.agent,
        connector: s.connector,
    }
}

fn policy_cmd(action: PolicyCmd) -> Result<i32, CliError> {
    let (effect, sc) = match action {
        PolicyCmd::Deny { tool, scope: s } => (Effect::Deny, scope(Some(tool), s)),
        PolicyCmd::Allow { tool, scope: s } => (Effect::Allow, scope(Some(tool), s)),
        PolicyCmd::Ask { tool, scope: s } => (Effect::Ask, scope(Some(tool), s)),
        PolicyCmd::Default { effect, scope: s } => (effect.into(), scope(None, s)),
        PolicyCmd::Remove { tool, scope: s, .. } => {
            let sc = scope(tool, s);
            check_scope_locally(&sc)?;
            return changed(ask_daemon(Request::PolicyRemove { scope: sc })?);
        }
        PolicyCmd::List { json } => return policy_list(json),
        PolicyCmd::Explain {
            tool,
            scope: s,
            arguments,
            json,
        } => return policy_explain(tool, s, arguments, json),
        PolicyCmd::Import { file, dry_run } => return policy_import(&file, dry_run),
        PolicyCmd::Export { output } => return policy_export(output),
        PolicyCmd::Validate { file } => return policy_validate(&file),
        PolicyCmd::Diff { file } => return policy_import(&file, true),
        PolicyCmd::History => return policy_history(),
        PolicyCmd::Show { at } => return policy_show(at),
        PolicyCmd::Test { cases, policy } => return policy_test(&cases, policy.as_deref()),
        PolicyCmd::Budget {
            action,
            calls,
            which,
            scope,
        } => return policy_budget(action, calls, which, scope),
    };
    check_scope_locally(&sc)?;
    changed(ask_daemon(Request::PolicySet { effect, scope: sc })?)
}

fn budget_scope(
    which: BudgetTools,
    s: ScopeArgs,
) -> Result<crate::policy::budget::BudgetScope, CliError> {
    let sc = crate::policy::budget::BudgetScope {
        tool: which.tool,
        agent: s.agent,
        connector: s.connector,
    };
    check_scope_locally(&scope(
        sc.tool.clone(),
        ScopeArgs {
            agent: sc.agent.clone(),
            connector: sc.connector.clone(),
        },
    ))?;
    Ok(sc)
}

fn policy_budget(
    action: Option<BudgetCmd>,
    calls: Option<String>,
    which: BudgetTools,
    s: ScopeArgs,
) -> Result<i32, CliError> {
    if let Some(BudgetCmd::Remove { which, scope: s }) = action {
        let sc = budget_scope(which, s)?;
        return changed(ask_daemon(Request::BudgetRemove { scope: sc })?);
    }
    let given = calls.unwrap_or_default();
    let bad = || crate::policy::budget::BadCap {
        given: format!("{given:?}"),
        max: limits::BUDGET_CALLS_MAX,
    };
    let n = given.trim().parse::<i64>().map_err(|_| bad())?;
    let n = crate::policy::budget::check_cap(n)?;
    let sc = budget_scope(which, s)?;
    changed(ask_daemon(Request::BudgetSet {
        calls: n,
        scope: sc,
    })?)
}

/// Bad names are refused before anything is sent, with the same words the daemon would use.
fn check_scope_locally(sc: &Scope) -> Result<(), CliError> {
    if let Some(t) = &sc.tool {
        crate::policy::validate_tool_name(t)?;
    }
    if let Some(a) = &sc.agent {
        crate::policy::validate_scope_name("agent", a)?;
    }
    if let Some(c) = &sc.connector {
        crate::policy::validate_scope_name("connector", c)?;
    }
    Ok(())
}

fn changed(resp: Response) -> Result<i32, CliError> {
    match resp {
        Response::PolicyChanged { message, .. } => {
            println!("{}", visible_lines(&message));
            Ok(0)
        }
        _ => Err(CliError::Unexpected),
    }
}

fn policy_list(json: bool) -> Result<i32, CliError> {
    let Response::PolicyList { policies, budgets } = ask_daemon(Request::PolicyList)? else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if json {
        // One array: the policies as before, then each budget as an object with
        // `"kind": "budget"` (policies carry no `kind`).
        let mut items: Vec<serde_json::Value> = policies
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(std::io::Error::other)?;
        for b in &budgets {
            let mut v = serde_json::to_value(b).map_err(std::io::Error::other)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("kind".into(), "budget".into());
                o.insert("scope".into(), b.budget.scope().describe().into());
            }
            items.push(v);
        }
        serde_json::to_writer_pretty(&mut out, &items).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(0);
    }
    write_budgets(&mut out, &budgets)?;
    if policies.is_empty() {
        writeln!(
            out,
            "(no rules: every call is allowed, and every call is still journaled)"
        )?;
        return Ok(0);
    }
    for p in &policies {
        writeln!(
            out,
            "{}  {}  {}  (specificity {}, since {})",
            visible(&p.id),
            p.effect,
            visible(p.scope.as_deref().unwrap_or("(imported)")),
            p.specificity,
            local_time(&p.created_at)
        )?;
        for line in p.text.lines() {
            writeln!(out, "    {}", visible(line))?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "Precedence: an exact tool beats a default; naming the agent, and naming the connector, each beat not naming it; a tie goes to deny, then ask, then allow, then the oldest rule; no matching rule allows."
    )?;
    Ok(0)
}

fn write_budgets(
    out: &mut impl Write,
    budgets: &[crate::policy::budget::BudgetRow],
) -> std::io::Result<()> {
    if budgets.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Budgets (per relay session; only what the rules allow counts):"
    )?;
    for b in budgets {
        writeln!(
            out,
            "{}  {}  (since {})",
            b.budget.id,
            visible(&b.budget.describe()),
            local_time(&b.created_at)
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// Reads a policy file and checks it locally, so errors show with their source; the daemon
/// checks again before it changes anything.
fn read_policy_file(path: &std::path::Path) -> Result<(String, String, Vec<String>), CliError> {
    let text = std::fs::read_to_string(path)?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let checked = crate::policy::file::check(&name, &text)?;
    Ok((name, text, checked.warnings))
}

fn policy_validate(path: &std::path::Path) -> Result<i32, CliError> {
    let (name, text, warnings) = read_policy_file(path)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let n = crate::policy::file::split(&text).len();
    println!("{name}: {n} policies, valid ({} warnings)", warnings.len());
    Ok(0)
}

fn policy_import(path: &std::path::Path, dry_run: bool) -> Result<i32, CliError> {
    let (file, text, warnings) = read_policy_file(path)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let Response::PolicyImported { message, diff, .. } = ask_daemon(Request::PolicyImport {
        file,
        text,
        dry_run,
    })?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if dry_run {
        write!(out, "{diff}")?;
    }
    writeln!(out, "{}", visible_lines(&message))?;
    Ok(0)
}

/// The policy a `policy test` runs against: FILE alone, or the set in force (as exported).
fn policy_under_test(
    policy: Option<&std::path::Path>,
) -> Result<(String, crate::policy::PolicySet), CliError> {
    let (name, text) = match policy {
        Some(path) => {
            let (name, text, _) = read_policy_file(path)?;
            (name, text)
        }
        None => {
            let Response::PolicyText { text } = ask_daemon(Request::PolicyExport)? else {
                return Err(CliError::Unexpected);
            };
            ("the policy in force".to_string(), text)
        }
    };
    let checked = crate::policy::file::check(&name, &text)?;
    let stored: Vec<crate::policy::StoredPolicy> = checked
        .policies
        .into_iter()
        .zip(1..)
        .map(|(p, seq)| crate::policy::StoredPolicy {
            seq,
            id: p.id,
            text: p.text,
        })
        .collect();
    Ok((name, crate::policy::PolicySet::compile(&stored)?))
}

fn policy_test(cases: &std::path::Path, policy: Option<&std::path::Path>) -> Result<i32, CliError> {
    let text = std::fs::read_to_string(cases)?;
    let cases = crate::policy::cases::parse(&cases.display().to_string(), &text)?;
    let (name, set) = policy_under_test(policy)?;
    let results = crate::policy::cases::run(&set, &cases);
    let mut out = std::io::stdout().lock();
    let mut failed = 0usize;
    for r in &results {
        if r.passed() {
            writeln!(out, "pass  {}", visible(&r.case.name))?;
        } else {
            failed += 1;
            writeln!(
                out,
                "FAIL  {} ({}): expected {}, got {}{}: {}",
                visible(&r.case.name),
                r.case.at,
                r.case.expect.as_str(),
                r.decision.effect.as_str(),
                r.decision
                    .policy_id
                    .as_deref()
                    .map_or_else(String::new, |id| format!(" by {id}")),
                visible(&r.decision.reason)
            )?;
        }
    }
    writeln!(
        out,
        "{} of {} cases passed against {name}",
        results.len() - failed,
        results.len()
    )?;
    Ok(if failed == 0 { 0 } else { 1 })
}

fn policy_export(output: Option<PathBuf>) -> Result<i32, CliError> {
    let Response::PolicyText { text } = ask_daemon(Request::PolicyExport)? else {
        return Err(CliError::Unexpected);
    };
    match output {
        Some(path) => std::fs::write(path, text)?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(0)
}

fn policy_changes() -> Result<Vec<Entry>, CliError> {
    let home = Home::from_env()?;
    let reader = open_reader(&home)?;
    Ok(reader.entries(&LogFilter {
        kind: Some("policy.change".into()),
        ..LogFilter::default()
    })?)
}

fn policy_history() -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    for e in policy_changes()? {
        writeln!(
            out,
            "entry {}  {}  {}",
            e.chain_seq,
            local_time(&e.occurred_at),
            visible(e.fields.reason.as_deref().unwrap_or(""))
        )?;
        write!(out, "{}", e.fields.detail.as_deref().unwrap_or(""))?;
        writeln!(out)?;
    }
    Ok(0)
}

fn policy_show(at: i64) -> Result<i32, CliError> {
    let mut text = String::new();
    for e in policy_changes()?.into_iter().filter(|e| e.chain_seq <= at) {
        text = crate::policy::apply_unified_diff(&text, e.fields.detail.as_deref().unwrap_or(""))
            .map_err(|why| {
            CliError::Refused(format!(
                "the diff of entry {} does not apply: {why}",
                e.chain_seq
            ))
        })?;
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(0)
}

fn policy_explain(
    tool: String,
    s: ScopeArgs,
    arguments: Option<String>,
    json: bool,
) -> Result<i32, CliError> {
    crate::policy::validate_tool_name(&tool)?;
    let Response::Explain {
        explanation,
        budgets,
    } = ask_daemon(Request::PolicyExplain {
        agent: s.agent,
        connector: s.connector,
        tool,
        arguments,
    })?
    else {
        return Err(CliError::Unexpected);
    };
    let mut out = std::io::stdout().lock();
    if json {
        let mut v = serde_json::to_value(&explanation).map_err(std::io::Error::other)?;
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "budgets".into(),
                serde_json::to_value(&budgets).map_err(std::io::Error::other)?,
            );
        }
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        write_explanation(&mut out, &explanation)?;
        if budgets.is_empty() {
            writeln!(out, "  budgets: none applies")?;
        } else {
            writeln!(
                out,
                "  budgets that apply if the rules allow it (per relay session, oldest checked first):"
            )?;
            for b in &budgets {
                writeln!(
                    out,
                    "    {}  {}",
                    b.budget.id,
                    visible(&b.budget.describe())
                )?;
            }
        }
    }
    Ok(0)
}

pub fn write_explanation(out: &mut impl Write, e: &Explanation) -> std::io::Result<()> {
    writeln!(
        out,
        "tool {} for {} on {}: {}",
        visible(&e.tool),
        e.agent
            .as_deref()
            .map(|a| format!("agent {}", visible(a)))
            .unwrap_or_else(|| "an unenrolled agent".into()),
        if e.connector.is_empty() {
            "an unnamed connector".to_string()
        } else {
            format!("connector {}", visible(&e.connector))
        },
        e.decision.effect.as_str().to_uppercase()
    )?;
    writeln!(out, "  why: {}", visible(&e.decision.reason))?;
    writeln!(out, "  decided by: {}", e.tie_break)?;
    if let Some(w) = &e.winner {
        writeln!(
            out,
            "  winning rule {} (specificity {}):",
            visible(&w.id),
            w.specificity
        )?;
        for line in w.text.lines() {
            writeln!(out, "    {}", visible(line))?;
        }
    }
    if !e.considered.is_empty() {
        writeln!(out, "  every rule that could apply:")?;
        for c in &e.considered {
            write!(
                out,
                "    {}  {}  specificity {}: {}",
                visible(&c.id),
                c.effect.as_str(),
                c.specificity,
                c.outcome
            )?;
            match &c.detail {
                Some(d) => writeln!(out, " ({})", visible(d))?,
                None => writeln!(out)?,
            }
        }
    }
    if e.matching.len() > 1 {
        writeln!(out, "  every matching rule, most specific first:")?;
        for m in &e.matching {
            writeln!(
                out,
                "    {}  {}  specificity {}",
                visible(&m.id),
                m.effect.as_str(),
                m.specificity
            )?;
        }
    }
    let ids = |v: &[String]| {
        if v.is_empty() {
            "no policy satisfied".to_string()
        } else {
            format!("satisfied: {}", visible(&v.join(", ")))
        }
    };
    writeln!(
        out,
        "  Cedar's own answers (permits and forbids are asked separately):"
    )?;
    writeln!(
        out,
        "    permits: {} ({})",
        e.cedar.permit_decision,
        ids(&e.cedar.permit_reasons)
    )?;
    writeln!(
        out,
        "    forbids: {} ({})",
        e.cedar.forbid_decision,
        ids(&e.cedar.forbid_reasons)
    )?;
    if e.cedar.errors.is_empty() {
        writeln!(out, "    errors: none")?;
    } else {
        for err in &e.cedar.errors {
            writeln!(out, "    error: {err}")?;
        }
    }
    Ok(())
}

fn open_reader(home: &Home) -> Result<Reader, CliError> {
    Ok(Reader::open(&home.db_path())?)
}

fn machine_id(home: &Home) -> Option<String> {
    std::fs::read_to_string(home.machine_id_path())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn log_cmd(args: LogArgs) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let reader = open_reader(&home)?;
    let filter = LogFilter {
        limit: Some(args.limit),
        session: args.session,
        tool: args.tool,
        decision: args.decision,
        kind: None,
    };
    let entries = reader.entries(&filter)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        for e in &entries {
            serde_json::to_writer(&mut out, e).map_err(std::io::Error::other)?;
            writeln!(out)?;
        }
        return Ok(0);
    }
    if entries.is_empty() {
        writeln!(out, "(no matching entries)")?;
        return Ok(0);
    }
    writeln!(
        out,
        "{:>5}  {:<19}  {:<14}  {:<8}  {:<12}  {:<16}  {:<11}  DETAIL",
        "#", "WHEN", "KIND", "SESSION", "CONNECTOR", "TOOL", "DECISION"
    )?;
    let calls = calls_of(&reader, &entries)?;
    for e in &entries {
        writeln!(out, "{}", log_line(e, &calls))?;
    }
    Ok(0)
}

fn local_time(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// Every person-facing rendering of text another program chose (tool names, reasons, paths,
/// agent names) goes through the one function `holdcall approve` uses.
use crate::text::visible;

/// A daemon's reply of one or more lines (it may quote a path, a name or a reason), each line
/// through [`visible`].
fn visible_lines(message: &str) -> String {
    message.lines().map(visible).collect::<Vec<_>>().join("\n")
}

fn log_line(e: &Entry, calls: &crate::projection::Projection) -> String {
    let f = &e.fields;
    let sess = f
        .session_id
        .as_deref()
        .map(|s| s.chars().take(8).collect::<String>())
        .unwrap_or_default();
    let detail = crate::projection::why(e, calls.call_at(e.chain_seq));
    format!(
        "{:>5}  {:<19}  {:<14}  {:<8}  {:<12}  {:<16}  {:<11}  {}",
        e.chain_seq,
        local_time(&e.occurred_at),
        e.kind,
        sess,
        visible(f.connector.as_deref().unwrap_or("")),
        visible(f.tool.as_deref().unwrap_or("")),
        f.decision.as_deref().unwrap_or(""),
        visible(&detail)
    )
}

/// The projection of every session with a call among `shown`, so each call's line can say what
/// became of it even when later entries fall outside the filter or the limit.
fn calls_of(reader: &Reader, shown: &[Entry]) -> Result<crate::projection::Projection, CliError> {
    let mut ids: Vec<&str> = shown
        .iter()
        .filter(|e| e.kind == "call.request")
        .filter_map(|e| e.fields.session_id.as_deref())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut entries = Vec::new();
    for id in ids {
        entries.extend(
            reader
                .entries(&LogFilter {
                    session: Some(id.to_string()),
                    ..LogFilter::default()
                })?
                .into_iter()
                .filter(|e| e.fields.session_id.as_deref() == Some(id)),
        );
    }
    entries.sort_by_key(|e| e.chain_seq);
    Ok(crate::projection::Projection::build(&entries))
}

fn verify_cmd(expect_head: Option<String>, json: bool) -> Result<i32, CliError> {
    let (home, _) = home_and_config()?;
    let reader = open_reader(&home)?;
    let report = reader.verify(machine_id(&home).as_deref(), expect_head.as_deref())?;
    let broken = report.state == ChainState::Broken;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?
        );
    } else if broken {
        eprintln!("journal FAILED verification");
        for p in &report.problems {
            eprintln!("  entry {}: {}", p.chain_seq, p.message);
        }
        if let Some(x) = &report.expect_head {
            eprintln!("  {x}");
        }
        if !report.tables.is_empty() {
            eprintln!(
                "  the policies, budgets and agents tables do not match what the journal recorded:"
            );
            for t in &report.tables {
                eprintln!("  table: {}", visible(t));
            }
            eprintln!(
                "  the daemon refuses every call until they match; restore holdcall.db from a backup"
            );
        }
    } else {
        match report.state {
            ChainState::Empty => println!("journal OK: empty (nothing recorded yet)"),
            ChainState::Partial => println!(
                "journal OK as far as it goes: {} entries link up, but the machine id is missing, so the first link cannot be checked",
                report.entries
            ),
            _ => println!(
                "journal OK: {} entries, every link and hash checks",
                report.entries
            ),
        }
        if let Some(h) = &report.head {
            println!("head {h}");
            println!(
                "  record it elsewhere; later `holdcall verify --expect-head {h}` proves nothing before it was rewritten"
            );
        }
        if let Some(x) = &report.expect_head {
            println!("{x}");
        }
    }
    Ok(if broken { 1 } else { 0 })
}

fn status_cmd(json: bool) -> Result<i32, CliError> {
    let home = Home::from_env()?;
    let config = Config::load(&home);
    let rt = ipc::current_thread()?;
    let d = rt.block_on(daemon_line(&home));
    let daemon = d.text;
    let reader = Reader::open(&home.db_path());
    let (journal_line, head, policies) = match &reader {
        Ok(r) => {
            let report = r.verify(machine_id(&home).as_deref(), None);
            let policies = r.policies().map(|p| p.len()).unwrap_or(0);
            match report {
                Ok(rep) => (
                    format!("journal  {} entries, chain {:?}", rep.entries, rep.state)
                        .to_lowercase(),
                    rep.head,
                    policies,
                ),
                Err(e) => (format!("journal  UNREADABLE: {e}"), None, policies),
            }
        }
        Err(_) if !home.db_path().exists() => {
            ("journal  (nothing recorded yet)".to_string(), None, 0)
        }
        Err(e) => (format!("journal  UNREADABLE: {e}"), None, 0),
    };
    if json {
        let v = serde_json::json!({
            "home": home.dir(),
            "socket": home.socket_path(),
            "config": config.as_ref().map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            "daemon": daemon.trim_start_matches("daemon").trim(),
            "pid": d.pid,
            "journal": journal_line.trim_start_matches("journal").trim(),
            "head": head,
            "policies": policies,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?
        );
        return Ok(0);
    }
    println!("home     {}", home.dir().display());
    println!("socket   {}", home.socket_path().display());
    match &config {
        Ok(_) => println!("config   {} (ok)", home.config_path().display()),
        Err(e) => println!("config   INVALID: {e}"),
    }
    println!("{daemon}");
    println!("{journal_line}");
    if let Some(h) = head {
        println!("head     {h}");
    }
    println!("policy   {policies} rule(s)");
    let unhealthy = config.is_err()
        || d.code == 1
        || journal_line.contains("UNREADABLE")
        || journal_line.contains("broken")
        || daemon.contains("CANNOT DECIDE");
    Ok(if unhealthy { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_secret_ends_at_enter_edits_with_backspace_and_ctrl_c_abandons_it() {
        let read = |b: &[u8]| read_typed_line(&mut &b[..]).unwrap();
        assert_eq!(read(b"s3cret\r"), Some(b"s3cret".to_vec()));
        assert_eq!(read(b"s3crex\x7ft\n"), Some(b"s3cret".to_vec()));
        // Backspace removes a whole UTF-8 character.
        assert_eq!(read("caf\u{e9}\x7fe\r".as_bytes()), Some(b"cafe".to_vec()));
        assert_eq!(read(b"wrong\x15right\r"), Some(b"right".to_vec()));
        assert_eq!(read(b"half\x03"), None);
        assert_eq!(read(b"half\x04"), None);
        assert_eq!(read(b"no end"), None);
        // Longer than a terminal's canonical line (4095 bytes) is kept whole; past the limit
        // one byte is kept, so the secret is refused rather than cut.
        let long = vec![b'x'; 5000];
        assert_eq!(read(&[&long[..], b"\r"].concat()), Some(long));
        let over = vec![b'x'; limits::SECRET_BYTES_MAX + 10];
        assert_eq!(
            read(&[&over[..], b"\r"].concat()).map(|l| l.len()),
            Some(limits::SECRET_BYTES_MAX + 1)
        );
    }
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn control_and_bidi_characters_are_shown_as_escapes() {
        assert_eq!(visible("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(visible("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(visible("café"), "café");
    }
}
