//! A stdio MCP server whose tool definitions are whatever a file says at each `tools/list`, so a
//! test can change them between sessions (a "rug pull"), reorder their keys or add hidden
//! characters. Not part of Holdcall: a test fixture, built by `cargo test`.
//!
//! Answers:
//! - `initialize`: the client's `protocolVersion`, the tools capability;
//! - `ping`: `{}`;
//! - `tools/list`: `{"tools":` the bytes of `--tools FILE` (a JSON array), exactly as written `}`,
//!   with `"nextCursor":"next"` when the request has no cursor and `--paged` is given;
//! - `tools/call` NAME: the text `called NAME`.
//!
//! Usage: `fixture_tools --tools FILE [--paged] [--record FILE]`. With `--record`, every line
//! read is appended to `FILE` and every line written to `FILE.out`, each before it is acted on
//! or sent.

// A fixture fails loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args[i + 1].clone())
    };
    let tools = arg("--tools").expect("--tools FILE");
    let paged = args.iter().any(|a| a == "--paged");
    let open = |p: String| -> File {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    };
    let mut log_in = arg("--record").map(|p| open(p.clone()));
    let mut log_out = arg("--record").map(|p| open(format!("{p}.out")));
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        if let Some(f) = log_in.as_mut() {
            writeln!(f, "{line}").unwrap();
        }
        let Ok(req) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (req.get("id"), req["method"].as_str()) else {
            continue;
        };
        let result = match method {
            "initialize" => json!({
                "protocolVersion": req["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fixture_tools", "version": "1"}
            })
            .to_string(),
            "ping" => "{}".to_string(),
            "tools/list" => {
                let defs = std::fs::read_to_string(&tools).unwrap();
                let cursor = if paged && req["params"].get("cursor").is_none() {
                    r#","nextCursor":"next""#
                } else {
                    ""
                };
                format!("{{\"tools\":{}{cursor}}}", defs.trim())
            }
            "tools/call" => json!({
                "content": [{"type": "text", "text": format!("called {}", req["params"]["name"].as_str().unwrap_or(""))}],
                "isError": false
            })
            .to_string(),
            _ => {
                let out = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}});
                send(&mut stdout, log_out.as_mut(), &out.to_string());
                continue;
            }
        };
        let out = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}");
        send(&mut stdout, log_out.as_mut(), &out);
    }
}

fn send(stdout: &mut std::io::Stdout, log: Option<&mut File>, line: &str) {
    if let Some(f) = log {
        writeln!(f, "{line}").unwrap();
    }
    let mut out = stdout.lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}
