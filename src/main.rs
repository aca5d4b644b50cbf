//! The `holdcall` binary: parse the command line, set up logging on stderr, run, exit.

use clap::Parser;
use miette::Diagnostic;

fn main() {
    let cli = holdcall::cli::Cli::parse();
    // Logs go to stderr only: for `serve`, stdout belongs to the protocol.
    let default = if matches!(
        cli.command,
        holdcall::cli::Command::Daemon {
            action: holdcall::cli::DaemonCmd::Run
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
