//! The command line: every `holdcall` command, its arguments, its output and its exit code.
//!
//! Owns: parsing (clap), rendering for people and `--json` for programs. Must never: hold
//! business logic (decisions are the daemon's, records are the journal's), or write to the
//! database (changes go through the daemon; listings read it read-only).
//!
//! Here: `CliError`, `run` (one arm per command, dispatching to its file) and the daemon client
//! every command shares (`ask_daemon`). One file per command group: `args` (the clap grammar),
//! `serve`, `daemon`, `policy`, `budget`, `agent`, `connector` (with `prompt`, the secret
//! prompt), `approve` (approve, reject), `log` (log, verify), `status`, `setup` (init, doctor's
//! output, inventory); `render` holds the output helpers they share.

use std::io::Write;
use std::time::Duration;

mod agent;
mod approve;
mod args;
mod budget;
mod connector;
mod daemon;
mod log;
mod policy;
mod prompt;
mod render;
mod serve;
mod setup;
mod status;
mod tools;

pub use args::{Cli, Command, DaemonCmd};

use crate::config::{Config, Home};
use crate::ipc::{self, ManageRequest, ManageResponse, WireError};
use crate::journal;
use crate::limits;
use crate::relay;
use crate::text::visible;

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
    Routing(#[from] crate::routing::RoutingError),
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
        } => serve::serve_cmd(connector, client, command),
        Command::Daemon { action } => daemon::daemon_cmd(action),
        Command::Policy { action } => policy::policy_cmd(action),
        Command::Connector { action } => connector::connector_cmd(action),
        Command::Approve {
            id: Some(id),
            watch: _,
            json: _,
        } => approve::decide_cmd(id, true, None),
        Command::Approve {
            id: None,
            watch,
            json,
        } => approve::approve_list(watch, json),
        Command::Reject { id, reason } => approve::decide_cmd(id, false, reason),
        Command::Agent { action } => agent::agent_cmd(action),
        Command::Log(args) => log::log_cmd(args),
        Command::Tools { action } => tools::tools_cmd(action),
        Command::Console { port, bind } => {
            Ok(crate::console::run(crate::console::Options { bind, port })?)
        }
        Command::Verify { expect_head, json } => log::verify_cmd(expect_head, json),
        Command::Status { json } => status::status_cmd(json),
        Command::Init { write, undo, force } => setup::init(write, undo, force),
        Command::Doctor { json } => setup::doctor(json),
        Command::Inventory { json } => setup::inventory(json),
        Command::Version => {
            println!("{}", version_line());
            Ok(0)
        }
        Command::Demo => crate::demo::run().map_err(CliError::Demo),
        Command::DemoServer {
            record,
            stubborn,
            extra_tools,
        } => {
            crate::demo::serve_demo(record.as_deref(), stubborn, extra_tools)?;
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

fn version_line() -> String {
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
pub(crate) fn ask_daemon(req: ManageRequest) -> Result<ManageResponse, CliError> {
    ask_daemon_within(req, limits::CLI_REQUEST_TIMEOUT)
}

pub(super) fn ask_daemon_within(
    req: ManageRequest,
    timeout: Duration,
) -> Result<ManageResponse, CliError> {
    let (home, _) = home_and_config()?;
    let rt = ipc::current_thread()?;
    rt.block_on(async {
        let mut conn = ipc::connect_or_start(&home, crate::limits::DAEMON_READY_TIMEOUT)
            .await?
            .manage();
        match conn.call(&req, timeout).await {
            Ok(ManageResponse::Error { message }) => Err(CliError::Refused(message)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::visible;
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
