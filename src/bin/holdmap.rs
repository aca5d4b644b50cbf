//! The `holdmap` binary: parse the command line, send logs to stderr, run, exit. It holds no
//! holdmap logic (that is `holdcall::holdmap`) and never writes to stdout itself: under
//! `holdmap mcp`, stdout belongs to the protocol.

use clap::Parser;

fn main() {
    let cli = holdcall::holdmap::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOLDMAP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(false)
        .log_internal_errors(false)
        .init();
    std::process::exit(holdcall::holdmap::run(cli));
}
