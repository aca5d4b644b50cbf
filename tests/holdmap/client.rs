//! A raw client for `holdmap mcp`: the real binary started with an MCP client's minimal
//! environment (HOME, LOGNAME, PATH, SHELL, TERM, USER only), lines written and read one at a
//! time, each answer waited for with a deadline (a reader thread per pipe, so a stuck server
//! fails the test instead of hanging it). stderr is collected for failure messages.

#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

use crate::common::PATIENCE;

pub(crate) fn holdmap_binary() -> &'static str {
    env!("CARGO_BIN_EXE_holdmap")
}

pub(crate) struct Holdmap {
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    pub(crate) home: tempfile::TempDir,
}

impl Holdmap {
    /// `holdmap mcp` with a client's minimal environment and a private HOME.
    pub(crate) fn start() -> Holdmap {
        Holdmap::start_with(&[])
    }

    pub(crate) fn start_with(extra_env: &[(&str, &str)]) -> Holdmap {
        Holdmap::start_args(&[], extra_env)
    }

    /// `holdmap mcp ARGS…` (`--record-activity`) with a client's minimal environment, a private
    /// HOME and `extra_env` (which may replace HOME).
    pub(crate) fn start_args(args: &[&str], extra_env: &[(&str, &str)]) -> Holdmap {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(holdmap_binary());
        cmd.arg("mcp")
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("LOGNAME", "holdmap-test")
            .env("USER", "holdmap-test")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SHELL", "/bin/sh")
            .env("TERM", "dumb")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let lines = line_reader(child.stdout.take().unwrap());
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        // As it comes, so a test can wait for a line while the server still runs.
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut err_pipe, &mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Holdmap {
            child,
            stdin,
            lines,
            stderr,
            home,
        }
    }

    /// Writes `bytes` as they are (the caller adds the newline).
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Writes one JSON value as a line.
    pub(crate) fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next line the server writes, parsed; fails after `PATIENCE`.
    pub(crate) fn recv(&mut self) -> Value {
        let line = self.recv_line(PATIENCE).unwrap_or_else(|| {
            panic!(
                "holdmap wrote nothing within {PATIENCE:?}; stderr:\n{}",
                self.stderr()
            )
        });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line:?}"))
    }

    /// The next raw line, or `None` if none comes within `wait`.
    pub(crate) fn recv_line(&mut self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Sends a request and returns its answer, which must be the next line (for concurrent
    /// requests, use `send` and `recv`).
    pub(crate) fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.request_value(serde_json::json!(id), method, params)
    }

    /// `request` with any JSON id (a string id, say).
    pub(crate) fn request_value(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&serde_json::json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        let answer = self.recv();
        assert_eq!(answer["id"], id, "answer to another id: {answer}");
        answer
    }

    /// `initialize` at `version`, then `notifications/initialized`; the initialize result.
    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        let answer = self.request(
            0,
            "initialize",
            serde_json::json!({"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
        );
        self.send(&serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        answer["result"].clone()
    }

    /// A `tools/call`; the whole answer.
    pub(crate) fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            serde_json::json!({"name":tool,"arguments":arguments}),
        )
    }

    /// A `tools/call` with any JSON id.
    pub(crate) fn call_value(&mut self, id: Value, tool: &str, arguments: Value) -> Value {
        self.request_value(
            id,
            "tools/call",
            serde_json::json!({"name":tool,"arguments":arguments}),
        )
    }

    /// Closes stdin and waits (bounded by PATIENCE) for stderr to say `what`.
    pub(crate) fn stderr_says(mut self, what: &str) {
        self.close_stdin();
        crate::common::eventually(&format!("holdmap's stderr says {what:?}"), || {
            self.stderr().contains(what)
        });
    }

    /// Closes stdin: the server should then exit 0.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin and waits for the exit status (fails after `PATIENCE`).
    pub(crate) fn finish(mut self) -> std::process::ExitStatus {
        self.close_stdin();
        let mut status = None;
        crate::common::eventually("holdmap exits after its stdin closed", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }
}

impl Drop for Holdmap {
    fn drop(&mut self) {
        // Our own child, by its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The structured content of a successful `tools/call` answer (fails the test on a tool error).
pub(crate) fn structured(answer: &Value) -> &Value {
    let result = &answer["result"];
    assert_eq!(
        result["isError"],
        serde_json::json!(false),
        "a tool error: {answer}"
    );
    &result["structuredContent"]
}

/// A loopback TCP port nothing listened on a moment ago (the probe bind is released at once).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub(crate) fn accepts(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// The lines `pipe` yields, read on a thread of their own so a test can wait for one with a
/// deadline (`recv_timeout`) instead of blocking on a stuck process.
pub(crate) fn line_reader(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(pipe);
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}
