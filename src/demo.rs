//! `holdcall demo` (a newcomer's first minute, through the real daemon, relay and journal) and
//! the small built-in MCP server it relays (also the fixture server of the integration tests).
//!
//! Owns: the scripted tour and the demo server. Must never: touch the user's real home or
//! daemon (it makes a fresh home and its own daemon), or take a shortcut around the real
//! command paths — every step runs this binary's own commands.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// Prints a line of the tour, ignoring a reader that went away (`holdcall demo | head`): the
/// tour still runs to the end and stops its own daemon.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// How long the demo waits for any one answer before it gives up.
const DEMO_ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

fn fresh_home() -> Result<PathBuf, String> {
    let name =
        crate::ids::random_hex(4).map_err(|e| format!("no randomness for a fresh home: {e}"))?;
    let dir = std::env::temp_dir().join(format!("holdcall-demo-{name}"));
    crate::config::ensure_private_dir(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

struct Tour {
    exe: PathBuf,
    home: PathBuf,
}

impl Tour {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args).env("HOLDCALL_HOME", &self.home);
        c
    }

    /// Runs one holdcall command in the demo home, as a user would type it, and shows it.
    fn show(&self, args: &[&str]) -> Result<(), String> {
        say!("$ holdcall {}", args.join(" "));
        let out = self
            .command(args)
            .output()
            .map_err(|e| format!("cannot run holdcall {}: {e}", args.join(" ")))?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            say!("  {line}");
        }
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            say!("  {line}");
        }
        // verify exits 1 on a broken chain; in a fresh home that is a demo failure.
        if !out.status.success() {
            return Err(format!("`holdcall {}` failed", args.join(" ")));
        }
        Ok(())
    }
}

fn first_text(answer: &Value) -> &str {
    answer
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or("?")
}

fn is_error(answer: &Value) -> bool {
    answer.pointer("/result/isError") == Some(&Value::Bool(true))
}

/// Runs the tour. Exit code 0 when every step did what it should.
pub(crate) fn run() -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let home = fresh_home()?;
    let tour = Tour {
        exe: exe.clone(),
        home: home.clone(),
    };
    say!("Holdcall demo, in a fresh home: {}", home.display());
    say!("(your own home and daemon are not touched)\n");
    let result = tour_steps(&tour);
    let _ = tour.command(&["daemon", "stop"]).output();
    match &result {
        Ok(()) => {
            say!(
                "\nLook around: HOLDCALL_HOME={} holdcall log",
                home.display()
            );
            Ok(0)
        }
        Err(e) => Err(e.clone()),
    }
}

fn tour_steps(t: &Tour) -> Result<(), String> {
    t.show(&["daemon", "start"])?;
    t.show(&["policy", "deny", "delete_file"])?;
    t.show(&["policy", "allow", "echo", "--connector", "demo"])?;

    say!("\nA scripted MCP client talks to the demo server through the relay:");
    say!("$ holdcall serve --connector demo --client demo-client -- holdcall demo-server");
    let exe = t.exe.to_string_lossy().into_owned();
    let mut relay = t
        .command(&[
            "serve",
            "--connector",
            "demo",
            "--client",
            "demo-client",
            "--",
            &exe,
            "demo-server",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the relay: {e}"))?;
    let mut to_relay = relay.stdin.take().ok_or("the relay has no stdin")?;
    let from_relay = relay.stdout.take().ok_or("the relay has no stdout")?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(from_relay).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut exchange = |request: Value| -> Result<Value, String> {
        let mut line = request.to_string();
        line.push('\n');
        to_relay
            .write_all(line.as_bytes())
            .map_err(|e| format!("the relay stopped reading: {e}"))?;
        if request.get("id").is_none() {
            return Ok(Value::Null);
        }
        let answer = rx
            .recv_timeout(DEMO_ANSWER_TIMEOUT)
            .map_err(|_| "the relay did not answer".to_string())?;
        serde_json::from_str(&answer).map_err(|e| format!("the relay sent {answer:?}: {e}"))
    };
    exchange(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"demo-client","version":"1"}}}),
    )?;
    exchange(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))?;
    let list = exchange(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))?;
    let names: Vec<&str> = list
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    say!("  tools/list            -> {}", names.join(", "));
    let echo = exchange(json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"echo","arguments":{"text":"hello through Holdcall"}}}))?;
    let echo_text = first_text(&echo);
    let echo_ok = !is_error(&echo);
    say!(
        "  tools/call echo       -> {} {echo_text:?}",
        if echo_ok { "allowed:" } else { "REFUSED:" }
    );
    let del = exchange(json!({"jsonrpc":"2.0","id":4,"method":"tools/call",
        "params":{"name":"delete_file","arguments":{"path":"/home/you/notes.txt"}}}))?;
    let del_text = first_text(&del);
    let del_refused = is_error(&del);
    say!(
        "  tools/call delete_file -> {} {del_text:?}",
        if del_refused {
            "refused, as a tool error:"
        } else {
            "ALLOWED:"
        }
    );
    drop(to_relay);
    let _ = relay.wait();
    if !echo_ok || !del_refused {
        return Err("the calls were not decided as the rules say".into());
    }
    say!("  (the demo server never saw the delete_file call)\n");
    t.show(&["log"])?;
    say!();
    t.show(&["verify"])?;
    say!();
    t.show(&["policy", "explain", "delete_file", "--connector", "demo"])?;
    Ok(())
}

/// The demo MCP server: three tools, newline-delimited JSON-RPC on stdin/stdout. With
/// `record`, every line received is appended to that file first, byte for byte.
/// With `stubborn`, it ignores SIGTERM and stays after its input ends, so only SIGKILL stops it.
pub(crate) fn serve_demo(
    record: Option<&Path>,
    stubborn: bool,
    extra_tools: usize,
) -> std::io::Result<()> {
    if stubborn {
        let mut term = nix::sys::signal::SigSet::empty();
        term.add(nix::sys::signal::Signal::SIGTERM);
        nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&term), None)
            .map_err(std::io::Error::from)?;
    }
    let mut rec = match record {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => None,
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut stdout = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            if stubborn {
                // Parked for good: only SIGKILL ends it (park may wake spuriously, so loop).
                loop {
                    std::thread::park();
                }
            }
            return Ok(());
        }
        if let Some(f) = rec.as_mut() {
            f.write_all(&line)?;
            f.flush()?;
        }
        let msg = crate::mcp::envelope::inspect_server_line(&line);
        let (Some(id), Some(method)) = (msg.id, msg.method.as_deref()) else {
            continue;
        };
        let params: Value = msg
            .params
            .and_then(|p| serde_json::from_slice(p).ok())
            .unwrap_or(Value::Null);
        let reply = match method {
            "initialize" => Ok(json!({
                "protocolVersion": params.get("protocolVersion").and_then(Value::as_str).unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "holdcall-demo-server", "version": crate::VERSION}
            })),
            "ping" => Ok(json!({})),
            "tools/list" if extra_tools > 0 => Ok(json!({ "tools": synthetic_tools(extra_tools) })),
            "prompts/list" if extra_tools > 0 => {
                Ok(json!({ "prompts": synthetic_tools(extra_tools) }))
            }
            "tools/list" => Ok(json!({"tools": [
                {"name": "echo", "description": "Says the text back.",
                 "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                {"name": "add", "description": "Adds two integers.",
                 "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
                {"name": "big", "description": "Returns a text of N KiB.",
                 "inputSchema": {"type": "object", "properties": {"kib": {"type": "integer"}}}},
                {"name": "delete_file", "description": "Pretends to delete a file (deletes nothing).",
                 "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}
            ]})),
            "tools/call" if params.get("name").and_then(Value::as_str) == Some("quit") => {
                // Dies mid-call, without an answer: how a crashing server looks to the relay.
                return Ok(());
            }
            "tools/call" => Ok(call_tool(&params)),
            _ => Err(json!({"code": -32601, "message": format!("method not found: {method}")})),
        };
        let body = match reply {
            Ok(result) => format!(",\"result\":{result}}}"),
            Err(error) => format!(",\"error\":{error}}}"),
        };
        let mut out = b"{\"jsonrpc\":\"2.0\",\"id\":".to_vec();
        out.extend_from_slice(id);
        out.extend_from_slice(body.as_bytes());
        out.push(b'\n');
        stdout.write_all(&out)?;
        stdout.flush()?;
    }
}

/// `n` tool definitions shaped like a real server's (a description, two parameters, one
/// required, annotations), for the listing benchmark.
fn synthetic_tools(n: usize) -> Vec<Value> {
    (1..=n)
        .map(|i| {
            json!({
                "name": format!("tool-{i}"),
                "title": format!("Tool {i}"),
                "description": format!("Does task {i} on a file of the project: reads the path given, applies the change described and returns what changed, as text."),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "The file, relative to the project."},
                        "change": {"type": "string", "description": "What to do, in words."}
                    },
                    "required": ["path"]
                },
                "annotations": {"readOnlyHint": false, "destructiveHint": i % 2 == 0}
            })
        })
        .collect()
}

fn text(t: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": t}], "isError": is_error})
}

fn call_tool(params: &Value) -> Value {
    let args = params.get("arguments").unwrap_or(&Value::Null);
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let i = |k: &str| args.get(k).and_then(Value::as_i64);
    match params.get("name").and_then(Value::as_str).unwrap_or("") {
        "echo" => text(format!("Echo: {}", s("text").unwrap_or("")), false),
        "add" => match (i("a"), i("b")) {
            (Some(a), Some(b)) => text(a.saturating_add(b).to_string(), false),
            _ => text("add needs integers a and b".into(), true),
        },
        "big" => {
            let kib = i("kib").unwrap_or(1).clamp(0, 64 * 1024);
            text("x".repeat(usize::try_from(kib).unwrap_or(1) * 1024), false)
        }
        "delete_file" => text(
            format!(
                "pretended to delete {} (the demo server deletes nothing)",
                s("path").unwrap_or("?")
            ),
            false,
        ),
        other => text(format!("no tool named {other}"), true),
    }
}
