//! The `holdcall` binary: parse the command line, set up logging on stderr, run, exit. It never
//! holds Holdcall logic (that is the library's, `holdcall::cli::run`) and never logs to stdout.

use clap::Parser;
use miette::Diagnostic;

fn main() {
    let cli = holdcall::cli::Cli::parse();
    if prints_for_a_person(&cli.command) {
        die_quietly_on_a_closed_pipe();
    }
    // Logs go to stderr only: for `serve`, stdout belongs to the protocol.
    let default = if matches!(
        cli.command,
        holdcall::cli::Command::Daemon {
            action: holdcall::cli::DaemonCmd::Run { .. }
        }
    ) {
        "info"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOLDCALL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(false)
        // A log that cannot be written (daemon.log on a full disk) is skipped: tracing would
        // otherwise report it with `eprintln!`, which panics when stderr fails, and take down
        // whichever thread was logging (the journal writer, say).
        .log_internal_errors(false)
        .init();
    let code = match holdcall::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprint!("{}", render(e));
            1
        }
    };
    std::process::exit(code);
}

/// An error as the user reads it: one line saying what went wrong (with its causes, each said
/// once), one saying what to do. Errors that point into a file (a policy's line and column) get
/// miette's full report with the source shown.
fn render(e: holdcall::cli::CliError) -> String {
    if e.labels().is_some() || e.source_code().is_some() || e.related().is_some() {
        return format!("{:?}\n", miette::Report::new(e));
    }
    let mut what = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !what.contains(&text) {
            what.push_str(": ");
            what.push_str(&text);
        }
        cause = c.source();
    }
    let mut out = format!("holdcall: {what}\n");
    if let Some(help) = e.help() {
        out.push_str(&format!("  help: {help}\n"));
    }
    out
}

/// Commands whose output a person may pipe into `head`: when the reader goes away they should
/// stop, as other command-line tools do, not report a write error (or panic in `println!`).
/// The relay, the daemon, the demo and its server keep Rust's default (SIGPIPE ignored, writes
/// fail with EPIPE), since they must notice a closed peer and clean up.
fn prints_for_a_person(command: &holdcall::cli::Command) -> bool {
    use holdcall::cli::{Command, DaemonCmd};
    !matches!(
        command,
        Command::Serve { .. }
            | Command::Demo
            | Command::DemoServer { .. }
            | Command::Daemon {
                action: DaemonCmd::Run { .. }
            }
    )
}

#[allow(unsafe_code)]
fn die_quietly_on_a_closed_pipe() {
    // SAFETY: called first thing in main, before any thread exists; it only restores the
    // default disposition of SIGPIPE, which installs no handler and touches no memory.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        );
    }
}
