//! holdmap's command line: `holdmap mcp`, `holdmap analyze NAME`, `holdmap activity serve` and
//! `holdmap activity snapshot`. It parses and runs; it never prints to stdout under `mcp`
//! (stdout is the protocol's).

use std::time::Duration;

use clap::{Parser, Subcommand};

/// holdmap: what owns each port on this machine, which AI agents run and what they are
/// configured with, and stopping dev servers safely (docs/holdmap.md).
#[derive(Debug, Parser)]
#[command(name = "holdmap", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: HoldmapCommand,
}

#[derive(Debug, Subcommand)]
pub enum HoldmapCommand {
    /// Run the MCP server on stdio (newline-delimited JSON-RPC), for a coding assistant.
    ///
    /// Client config: {"command":"holdmap","args":["mcp"]} (Claude Desktop, Cursor), or
    /// {"type":"stdio","command":"holdmap","args":["mcp"]} (VS Code). It observes the machine
    /// it runs on; stops need a preview's one-use confirmation_id. See docs/holdmap.md.
    Mcp {
        /// Report each tool call's name, status, timing and byte counts (never its arguments or
        /// results) to the collector named by HOLDMAP_ACTIVITY_ENDPOINT and
        /// HOLDMAP_ACTIVITY_TOKEN (`holdmap activity serve` prints both).
        #[arg(long)]
        record_activity: bool,
    },
    /// Run one analyzer from the catalog and store its findings (read by `list_insights`).
    ///
    /// `mcp-pins` is built in: it checks every MCP server your clients are configured with for
    /// a pinned version and for routing through Holdcall, with no network. See
    /// `list_analyzers` for the catalog.
    Analyze {
        /// The analyzer's name, as the catalog lists it.
        name: String,
    },
    /// Opt-in recording of holdmap's own tool calls (metadata only).
    Activity {
        #[command(subcommand)]
        command: ActivityCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ActivityCommand {
    /// Run a collector on 127.0.0.1 for a while; print its endpoint and a private token.
    Serve {
        /// How long to collect: `90s`, `10m`, `1h` (at most 24h).
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        duration: Duration,
    },
    /// Print what the collector named by HOLDMAP_ACTIVITY_ENDPOINT and HOLDMAP_ACTIVITY_TOKEN
    /// has received.
    Snapshot {
        /// Print the records as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `90s`, `10m`, `1h`, or a number of seconds; at most 24 hours, more than zero.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => s.split_at(at),
        None => (s, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: write it as 90s, 10m or 1h"))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(|| format!("`{s}` is not a duration: write it as 90s, 10m or 1h"))?;
    if secs == 0 || secs > 24 * 3600 {
        return Err(format!(
            "`{s}` is out of range: a collector runs for more than 0 s and at most 24h"
        ));
    }
    Ok(Duration::from_secs(secs))
}

/// Runs the command; the process's exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        HoldmapCommand::Mcp { record_activity } => {
            crate::holdmap::server::run_stdio(record_activity)
        }
        HoldmapCommand::Analyze { name } => crate::holdmap::analyzers::analyze_cli(&name),
        HoldmapCommand::Activity { command } => match command {
            ActivityCommand::Serve { duration } => crate::holdmap::activity::serve_cli(duration),
            ActivityCommand::Snapshot { json } => crate::holdmap::activity::snapshot_cli(json),
        },
    }
}
