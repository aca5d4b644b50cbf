//! `list_needs` through the real binary: an unrouted MCP server in a fake agent's
//! `~/.claude.json` is listed with the `holdcall init` line, and a dev server the test leaves
//! behind (its launcher gone, so it runs under pid 1 or a subreaper) is listed with a dry-run
//! `stop_port` preview that `stop_port` accepts; a server routed through the holdcall beside
//! holdmap into a relative home is a need. The only process a test stops is its own
//! orphan, by the pid it wrote to a pid file, after checking the plan signals that pid alone.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::eventually;
use crate::holdmap::client::{Holdmap, accepts, free_port, structured};
use crate::holdmap::fake_agent::FakeAgent;

const VERSION: &str = "2025-11-25";

/// A `python3 -m http.server` in a temp project folder whose launcher (`sh -c '… &'`) has
/// exited: its parent is now pid 1 or a subreaper. Killed by its own pid (read from the pid
/// file it wrote, and checked to still be that server) when dropped.
struct Orphan {
    pid: u32,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Orphan {
    fn start() -> Orphan {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"name":"needs-fixture","scripts":{"dev":"python3 -m http.server"}}"#,
        )
        .unwrap();
        let port = free_port();
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "python3 -m http.server --bind 127.0.0.1 {port} </dev/null >/dev/null 2>&1 & \
                 echo $! > server.pid"
            ))
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let pid: u32 = std::fs::read_to_string(dir.path().join("server.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let orphan = Orphan {
            pid,
            port,
            _dir: dir,
        };
        // Until the forked shell has exec'd python its cmdline is still sh's: wait for both.
        eventually("the orphaned server to run and accept connections", || {
            orphan.is_ours() && accepts(port)
        });
        orphan
    }

    /// Whether `pid` still runs this server (not a process that reused the pid).
    fn is_ours(&self) -> bool {
        std::fs::read(format!("/proc/{}/cmdline", self.pid)).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains("http.server") && c.contains(&self.port.to_string())
        })
    }

    fn parent(&self) -> u32 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap();
        let after = stat.rsplit_once(')').unwrap().1;
        after.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Orphan {
    fn drop(&mut self) {
        if self.is_ours() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
        }
    }
}

fn needs_of(hm: &mut Holdmap, id: i64, args: Value) -> Value {
    let answer = hm.call(id, "list_needs", args);
    structured(&answer).clone()
}

#[test]
fn a_dev_server_left_behind_is_listed_with_a_stop_preview_that_stop_port_accepts() {
    let orphan = Orphan::start();
    assert_ne!(
        orphan.parent(),
        std::process::id(),
        "the server must not be the test's child"
    );
    let mut hm = Holdmap::start();
    hm.initialize(VERSION);
    let out = needs_of(&mut hm, 2, json!({"kinds": ["dev_server_left_behind"]}));
    let needs = out["needs"].as_array().unwrap();
    let need = needs
        .iter()
        .find(|n| n["subject"]["port"] == json!(orphan.port))
        .unwrap_or_else(|| panic!("no need for port {}: {out:#}", orphan.port));
    assert_eq!(need["kind"], json!("dev_server_left_behind"));
    assert_eq!(need["evidence"], json!("inferred"));
    assert_eq!(need["subject"]["pid"], json!(orphan.pid));
    let preview = &need["preview"];
    assert_eq!(
        preview,
        &json!({"name": "stop_port", "arguments": {"port": orphan.port, "dry_run": true}})
    );

    // The same id on a second call.
    let again = needs_of(&mut hm, 3, json!({"kinds": ["dev_server_left_behind"]}));
    assert!(
        again["needs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] == need["id"]),
        "{again:#}"
    );

    let answer = hm.request(4, "tools/call", preview.clone());
    let plan = structured(&answer);
    let id = plan["confirmation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no confirmation_id: {answer}"))
        .to_owned();
    let tree: Vec<i64> = plan["plans"][0]["tree"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(
        tree,
        vec![i64::from(orphan.pid)],
        "the stop would signal only the test's own orphan"
    );

    // Execute it: the only process signalled is the test's own orphan, checked just above.
    let answer = hm.call(
        5,
        "stop_port",
        json!({"port": orphan.port, "dry_run": false, "confirmation_id": id}),
    );
    structured(&answer);
    eventually("the orphan to be gone", || !orphan.is_ours());
    let after = needs_of(&mut hm, 6, json!({"kinds": ["dev_server_left_behind"]}));
    assert!(
        !after["needs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["subject"]["port"] == json!(orphan.port)),
        "{after:#}"
    );
}

#[test]
fn an_unrouted_npx_server_of_a_running_agent_is_listed_with_the_holdcall_init_line() {
    let builder = FakeAgent::named("claude").tool("npx");
    let home = builder.home();
    std::fs::write(
        home.join(".claude.json"),
        r#"{"mcpServers":{"some":{"command":"npx","args":["-y","some-mcp"],"env":{"SOME_TOKEN":"canary-needs-7731"}}}}"#,
    )
    .unwrap();
    let agent = builder.run("npx -y some-mcp");
    agent.wait_for_descendants(1);
    let home = agent.home.to_str().unwrap().to_owned();
    let mut hm = Holdmap::start_with(&[("HOME", &home)]);
    hm.initialize(VERSION);
    let answer = hm.call(2, "list_needs", json!({}));
    assert!(
        !answer.to_string().contains("canary-needs-7731"),
        "a secret value in the result"
    );
    let out = structured(&answer);
    let about = |kind: &str| {
        out["needs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| {
                n["kind"] == json!(kind)
                    && n["subject"]["alias"] == json!("some")
                    && n["agents"]
                        .as_array()
                        .unwrap()
                        .contains(&json!(format!("agent:{}", agent.pid())))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} need for `some`: {out:#}"))
    };
    let routed = about("server_not_routed");
    // The lines name the holdcall installed beside holdmap, by its absolute path.
    let beside = std::fs::canonicalize(env!("CARGO_BIN_EXE_holdcall")).unwrap();
    let beside = beside.to_str().unwrap();
    assert_eq!(
        routed["holdcall_init"],
        json!({"directory": null, "preview": format!("{beside} init"), "write": format!("{beside} init --write")})
    );
    assert_eq!(routed["preview"], Value::Null);
    assert!(
        routed["action"]
            .as_str()
            .unwrap()
            .contains("holdcall init --write")
    );
    let unpinned = about("server_unpinned");
    assert_eq!(unpinned["evidence"], json!("observed"));
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("holdcall init --write"), "{text}");
}

#[test]
fn a_server_routed_into_a_relative_holdcall_home_is_a_medium_need() {
    let builder = FakeAgent::named("claude").tool("npx");
    let home = builder.home();
    let holdcall = std::fs::canonicalize(env!("CARGO_BIN_EXE_holdcall")).unwrap();
    std::fs::write(
        home.join(".claude.json"),
        json!({"mcpServers": {"hc": {"command": holdcall.to_str().unwrap(),
            "args": ["--home", "./.hc", "serve", "--", "npx", "-y", "pkg@1.2.3"]}}})
        .to_string(),
    )
    .unwrap();
    let agent = builder.run("npx -y some-mcp");
    agent.wait_for_descendants(1);
    let home = agent.home.to_str().unwrap().to_owned();
    let mut hm = Holdmap::start_with(&[("HOME", &home)]);
    hm.initialize(VERSION);
    let out = needs_of(&mut hm, 2, json!({}));
    let hc: Vec<&Value> = out["needs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["subject"]["alias"] == json!("hc"))
        .collect();
    assert_eq!(hc.len(), 1, "{out:#}");
    assert_eq!(hc[0]["kind"], json!("server_routing_unknown"));
    assert_eq!(hc[0]["severity"], json!("medium"));
    assert!(
        hc[0]["summary"].as_str().unwrap().contains("./.hc"),
        "{:#}",
        hc[0]
    );
}
