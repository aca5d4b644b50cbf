//! Opt-in activity recording through the real binaries: `holdmap activity serve` as the
//! collector (its endpoint and token read from its stdout), `holdmap mcp --record-activity` with
//! an MCP client's minimal environment plus the two variables, and `holdmap activity snapshot
//! --json` reading back. A canary in arguments and request ids must reach the collector
//! nowhere; the collector must refuse a missing or wrong token; the server must keep answering
//! when the collector is gone.

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::{PATIENCE, eventually};
use crate::holdmap::client::{Holdmap, holdmap_binary, line_reader};

const CANARY: &str = "canary-XYZ";
const VERSION: &str = "2025-11-25";
/// Every field a stored record may have: the record's own and the collector's receipt number.
const FIELDS: [&str; 8] = [
    "tool",
    "status",
    "started_at_ms",
    "duration_ms",
    "request_bytes",
    "result_bytes",
    "dropped_before",
    "seq",
];

/// A running `holdmap activity serve --duration 60s`, killed by its pid when dropped.
struct Collector {
    child: Child,
    endpoint: String,
    token: String,
    port: u16,
}

impl Collector {
    fn start() -> Collector {
        let mut child = Command::new(holdmap_binary())
            .args(["activity", "serve", "--duration", "60s"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = line_reader(child.stdout.take().unwrap());
        let (mut endpoint, mut token) = (None, None);
        let mut printed = String::new();
        while endpoint.is_none() || token.is_none() {
            let line = lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|_| panic!("serve printed no endpoint and token:\n{printed}"));
            printed.push_str(&line);
            let line = line.trim_end();
            if let Some(v) = line.strip_prefix("HOLDMAP_ACTIVITY_ENDPOINT=") {
                endpoint = Some(v.to_owned());
            }
            if let Some(v) = line.strip_prefix("HOLDMAP_ACTIVITY_TOKEN=") {
                token = Some(v.to_owned());
            }
        }
        let endpoint = endpoint.unwrap();
        let token = token.unwrap();
        assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
        assert_eq!(token.len(), 64, "{token}");
        assert!(
            printed.contains(&endpoint) && printed.contains(&token),
            "{printed}"
        );
        let port = endpoint
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // The example line comes after the token; read until it has been printed.
        while !printed.contains(r#"{"command":"holdmap","args":["mcp","--record-activity"]}"#) {
            printed.push_str(&lines.recv_timeout(PATIENCE).unwrap());
        }
        Collector {
            child,
            endpoint,
            token,
            port,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOLDMAP_ACTIVITY_ENDPOINT", self.endpoint.clone()),
            ("HOLDMAP_ACTIVITY_TOKEN", self.token.clone()),
        ]
    }

    /// `holdmap activity snapshot --json` with `token`.
    fn snapshot_with(&self, token: &str) -> Output {
        Command::new(holdmap_binary())
            .args(["activity", "snapshot", "--json"])
            .env_clear()
            .env("HOLDMAP_ACTIVITY_ENDPOINT", &self.endpoint)
            .env("HOLDMAP_ACTIVITY_TOKEN", token)
            .output()
            .unwrap()
    }

    /// The snapshot's stdout (which must succeed) and its records.
    fn snapshot(&self) -> (String, Vec<Value>) {
        let out = self.snapshot_with(&self.token);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let records = v["records"].as_array().unwrap().clone();
        (text, records)
    }

    /// One raw HTTP request to the collector; the whole answer.
    fn raw(&self, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        got
    }

    fn kill(&mut self) {
        // Our own child, by its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `holdmap mcp ARGS…` with an MCP client's minimal environment and `env`, initialized.
fn mcp(args: &[&str], env: &[(&str, String)]) -> Holdmap {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut h = Holdmap::start_args(args, &env);
    assert!(h.initialize(VERSION).is_object());
    h
}

fn records_arrive(c: &Collector, n: usize) -> (String, Vec<Value>) {
    let mut got = (String::new(), Vec::new());
    eventually(&format!("{n} records reach the collector"), || {
        got = c.snapshot();
        got.1.len() >= n
    });
    got
}

#[test]
fn recording_sends_only_the_permitted_fields_and_no_canary_reaches_the_collector() {
    let c = Collector::start();
    let mut m = mcp(&["--record-activity"], &c.env());
    let ok = m.call_value(
        json!(format!("{CANARY}-id-1")),
        "list_ports",
        json!({"query": CANARY}),
    );
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let refused = m.call_value(
        json!(format!("{CANARY}-id-2")),
        "list_ports",
        json!({CANARY: CANARY}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains(CANARY),
        "the error names the argument"
    );
    // An unknown tool is a protocol error and is not recorded at all.
    let unknown = m.call_value(json!(3), &format!("{CANARY}-tool"), json!({}));
    assert!(unknown["error"].is_object(), "{unknown}");
    // A known tool refused as a malformed request is recorded as a protocol error.
    let malformed = m.request_value(
        json!(4),
        "tools/call",
        json!({"name":"list_ports","arguments":CANARY}),
    );
    assert!(malformed["error"].is_object(), "{malformed}");

    let (text, records) = records_arrive(&c, 3);
    assert!(
        !text.contains(CANARY),
        "the canary reached the collector:\n{text}"
    );
    assert_eq!(records.len(), 3, "{text}");
    for r in &records {
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut fields = FIELDS.to_vec();
        fields.sort_unstable();
        assert_eq!(keys, fields, "{r}");
        assert_eq!(r["tool"], "list_ports", "{r}");
        assert!(r["request_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(r["result_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(
            r["started_at_ms"].as_u64().unwrap() > 1_700_000_000_000,
            "{r}"
        );
    }
    let statuses: Vec<&str> = records
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "tool_error", "protocol_error"], "{text}");
}

#[test]
fn the_collector_refuses_a_missing_or_a_wrong_token_and_a_foreign_host() {
    let c = Collector::start();
    let port = c.port;
    let no_token = c.raw(&format!(
        "GET /v1/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    ));
    assert!(no_token.starts_with("HTTP/1.1 401 "), "{no_token}");
    let wrong = "0".repeat(64);
    let wrong_token = c.raw(&format!(
        "GET /v1/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {wrong}\r\n\r\n"
    ));
    assert!(wrong_token.starts_with("HTTP/1.1 401 "), "{wrong_token}");
    assert!(!wrong_token.contains("\"records\""), "{wrong_token}");
    let record = r#"{"tool":"list_ports","status":"ok","started_at_ms":1,"duration_ms":1,"request_bytes":1,"result_bytes":1,"dropped_before":0}"#;
    let post = c.raw(&format!(
        "POST /v1/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {wrong}\r\nContent-Length: {}\r\n\r\n{record}",
        record.len()
    ));
    assert!(post.starts_with("HTTP/1.1 401 "), "{post}");
    let token = &c.token;
    let rebound = c.raw(&format!(
        "GET /v1/records HTTP/1.1\r\nHost: attacker.example:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    ));
    assert!(rebound.starts_with("HTTP/1.1 403 "), "{rebound}");
    let extra = r#"{"tool":"list_ports","status":"ok","started_at_ms":1,"duration_ms":1,"request_bytes":1,"result_bytes":1,"dropped_before":0,"arguments":"canary-XYZ"}"#;
    let pushed = c.raw(&format!(
        "POST /v1/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{extra}",
        extra.len()
    ));
    assert!(pushed.starts_with("HTTP/1.1 400 "), "{pushed}");

    let refused = c.snapshot_with(&wrong);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("refused the token"), "{err}");
    assert!(refused.stdout.is_empty());
    let missing = Command::new(holdmap_binary())
        .args(["activity", "snapshot", "--json"])
        .env_clear()
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("HOLDMAP_ACTIVITY_TOKEN"));

    // Nothing refused was stored.
    let (_, records) = c.snapshot();
    assert_eq!(records, Vec::<Value>::new());
}

#[test]
fn the_server_keeps_answering_when_the_collector_is_gone() {
    let mut c = Collector::start();
    let mut m = mcp(&["--record-activity"], &c.env());
    let first = m.call_value(json!(1), "list_ports", json!({}));
    assert_eq!(first["result"]["isError"], false, "{first}");
    records_arrive(&c, 1);
    c.kill();
    for id in 2..5 {
        let again = m.call_value(json!(id), "list_ports", json!({}));
        assert_eq!(again["result"]["isError"], false, "{again}");
    }
    assert!(m.child.try_wait().unwrap().is_none(), "the server exited");
}

#[test]
fn ordinary_holdmap_mcp_records_nothing_and_opens_no_socket_even_with_the_variables_set() {
    let c = Collector::start();
    let mut plain = mcp(&[], &c.env());
    let answer = plain.call_value(json!(1), "list_ports", json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    #[cfg(target_os = "linux")]
    {
        // It may hold a netlink socket (reading the socket tables), but no TCP socket.
        let pid = plain.child.id();
        let mut tcp = std::collections::HashSet::new();
        for table in ["tcp", "tcp6"] {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
            for row in text.lines().skip(1) {
                if let Some(inode) = row.split_whitespace().nth(9) {
                    tcp.insert(format!("socket:[{inode}]"));
                }
            }
        }
        assert!(
            !tcp.is_empty(),
            "the collector's listener is in the TCP table"
        );
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
            let target = std::fs::read_link(fd.unwrap().path()).unwrap_or_default();
            let target = target.to_string_lossy().into_owned();
            assert!(
                !tcp.contains(&target),
                "plain holdmap mcp holds a TCP socket: {target}"
            );
        }
    }
    // A recording server's call after the plain one's: once it has arrived, the plain one's
    // would have too.
    let mut recording = mcp(&["--record-activity"], &c.env());
    recording.call_value(json!(1), "find_free_port", json!({}));
    let (text, records) = records_arrive(&c, 1);
    assert_eq!(records.len(), 1, "{text}");
    assert_eq!(records[0]["tool"], "find_free_port", "{text}");
}

#[test]
fn a_non_loopback_endpoint_or_missing_variables_record_nothing_and_the_tools_still_work() {
    let env = vec![
        (
            "HOLDMAP_ACTIVITY_ENDPOINT",
            "http://192.0.2.1:9/v1/records".to_owned(),
        ),
        ("HOLDMAP_ACTIVITY_TOKEN", "ab".repeat(32)),
    ];
    let mut far = mcp(&["--record-activity"], &env);
    let answer = far.call_value(json!(1), "list_ports", json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    far.stderr_says("not a loopback address");

    let mut bare = mcp(&["--record-activity"], &[]);
    let answer = bare.call_value(json!(1), "list_ports", json!({}));
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    bare.stderr_says("must both be set");
}
