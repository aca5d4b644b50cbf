//! holdmap's command line: `holdmap mcp`. It parses and runs; it never prints to stdout under
//! `mcp` (stdout is the protocol's).

use clap::{Parser, Subcommand};

/// holdmap: what owns each port on this machine, and stopping dev servers safely (docs/holdmap.md).
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
    Mcp {},
}

/// Runs the command; the process's exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        HoldmapCommand::Mcp {} => crate::holdmap::server::run_stdio(),
    }
}
