//! The `holdcall` binary: parse the command line, set up logging on stderr, run, exit.

use clap::Parser;

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
            eprintln!("{:?}", miette::Report::new(e));
            1
        }
    };
    std::process::exit(code);
}
