//! The port tools through the real `holdmap mcp`, against real listeners the tests start
//! themselves: `python3 -m http.server` bound to 127.0.0.1 in a temp project folder (a
//! package.json named shop-web, a .git on branch main). Each test kills only its own children,
//! by their pid (`Child::kill`).

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::eventually;
use crate::holdmap::client::{Holdmap, free_port, structured};

const VERSION: &str = "2025-11-25";

/// The real Python interpreter (not a version manager's shim), so the child's pid is the
/// server's.
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    assert!(out.status.success(), "python3 is needed for these tests");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A project folder: package.json named shop-web, .git/HEAD on branch main.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name":"shop-web"}"#).unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.path().join("index.html"), "<title>shop</title>").unwrap();
    dir
}

/// `python3 -m http.server` on 127.0.0.1:`port` in `dir`; killed (by pid) when dropped.
struct DevServer {
    child: Child,
}

impl DevServer {
    fn start(dir: &Path, port: u16) -> DevServer {
        let child = Command::new(python())
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        DevServer { child }
    }

    fn started(dir: &Path, port: u16) -> DevServer {
        let s = DevServer::start(dir, port);
        eventually("the test's http.server accepts connections", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        s
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills our own child, by its pid, and reaps it.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn started_holdmap() -> Holdmap {
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    h
}

fn summary(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn list_ports_finds_the_tests_http_server_with_its_project_branch_and_framework() {
    let dir = project();
    let port = free_port();
    let server = DevServer::started(dir.path(), port);
    let mut h = started_holdmap();
    let answer = h.call(1, "list_ports", json!({"query": format!(":{port}")}));
    let v = structured(&answer);
    let ports = v["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "{v:#}");
    let p = &ports[0];
    assert_eq!(p["port"], port);
    assert_eq!(p["protocol"], "tcp");
    assert_eq!(p["pid"], server.pid());
    assert_eq!(p["project"]["name"], "shop-web", "{p:#}");
    assert_eq!(p["project"]["branch"], "main", "{p:#}");
    assert_eq!(p["framework"], "http.server", "{p:#}");
    assert_eq!(p["is_dev"], true);
    assert_eq!(p["exposure"], "loopback");
    assert_eq!(v["platform"], "linux");
    let line = format!(
        "{port}/tcp  http.server  pid {}  shop-web (main)  loopback",
        server.pid()
    );
    assert!(summary(&answer).contains(&line), "{}", summary(&answer));
}

#[test]
fn explain_port_shows_the_stop_plan_and_a_200_from_the_loopback_probe() {
    let dir = project();
    let port = free_port();
    let server = DevServer::started(dir.path(), port);
    let mut h = started_holdmap();
    let answer = h.call(1, "explain_port", json!({"port": port}));
    let v = structured(&answer);
    assert_eq!(v["status"], "busy");
    assert_eq!(
        v["headline"],
        format!(
            "Port {port} is held by http.server (pid {}), the dev server of shop-web on branch main",
            server.pid()
        )
    );
    assert!(v["plan"].is_object(), "{v:#}");
    assert_eq!(v["http"]["url"], format!("http://127.0.0.1:{port}/"));
    assert_eq!(v["http"]["status"], 200, "{v:#}");
    assert_eq!(v["bind_risk"]["level"], "loopback_only");
    assert!(
        summary(&answer).contains("answered 200"),
        "{}",
        summary(&answer)
    );
    let inspected = structured(&h.call(2, "inspect_port", json!({"port": port}))).clone();
    assert_eq!(inspected["owners"], v["owners"]);
}

#[test]
fn find_free_port_near_a_held_port_skips_it() {
    let dir = project();
    let port = free_port();
    let _server = DevServer::started(dir.path(), port);
    let mut h = started_holdmap();
    let v = structured(&h.call(1, "find_free_port", json!({"near": port}))).clone();
    let got = v["port"].as_u64().unwrap();
    assert!(got > u64::from(port), "{got} is not after the held {port}");
    assert_eq!(v["candidate"], true);
}

#[test]
fn wait_for_port_sees_a_listener_started_after_the_request_and_answers_a_ping_first() {
    let dir = project();
    let port = free_port();
    let mut h = started_holdmap();
    h.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"wait_for_port","arguments":{"port":port,"timeout_s":20}}}));
    h.send(&json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    // The non-stalling rule: the ping is answered while the wait is still waiting.
    let first = h.recv();
    assert_eq!(first["id"], 3, "the wait stalled the server: {first}");
    let _server = DevServer::start(dir.path(), port);
    let waited = h.recv();
    assert_eq!(waited["id"], 2);
    let v = structured(&waited);
    assert_eq!(v["ready"], true);
    assert_eq!(v["port"], port);
}

#[test]
fn wait_for_port_until_free_ends_after_the_test_kills_its_own_server() {
    let dir = project();
    let port = free_port();
    let mut server = DevServer::started(dir.path(), port);
    let mut h = started_holdmap();
    h.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
        "params":{"name":"wait_for_port","arguments":{"port":port,"until_free":true,"timeout_s":20}}}));
    h.send(&json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    assert_eq!(h.recv()["id"], 3);
    server.kill();
    let waited = h.recv();
    assert_eq!(waited["id"], 2);
    let v = structured(&waited);
    assert_eq!(v["until_free"], true);
}

#[test]
fn a_wait_that_times_out_is_a_tool_error() {
    let port = free_port();
    let mut h = started_holdmap();
    let answer = h.call(1, "wait_for_port", json!({"port": port, "timeout_s": 0.3}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"].get("structuredContent").is_none(),
        "{answer}"
    );
    let text = summary(&answer);
    assert!(
        text.contains(&format!(
            "port {port} did not accept connections within 0.3 s"
        )),
        "{text}"
    );
}
