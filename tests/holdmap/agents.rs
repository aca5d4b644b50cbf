//! `list_agents` through the real `holdmap mcp`, against stand-in agents (`fake_agent`): real
//! processes whose executable is a copy of `sh` named like the agent, with real tool children.
//! Every query names the test's own pid (`pid` or `agent: "pid:N"`), and assertions look only
//! at the agent owning that pid: the machine may run other agents.
//!
//! (If the test runner itself runs inside a real agent of the same product, the stand-in is a
//! helper of that agent, as a real nested run would be; these tests assume it does not.)

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::eventually;
use crate::holdmap::client::{Holdmap, structured};
use crate::holdmap::fake_agent::FakeAgent;

const VERSION: &str = "2025-11-25";

fn session() -> Holdmap {
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    h
}

/// The agents of an answer whose own pid is `pid`.
fn agent_with_pid(out: &Value, pid: u32) -> Option<Value> {
    out["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .cloned()
}

fn access(agent: &Value, kind: &str) -> Value {
    agent["access"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == kind)
        .cloned()
        .unwrap()
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_claude_with_an_npx_mcp_server_shows_the_server_inferred_and_its_skipped_permissions() {
    let agent = FakeAgent::named("claude")
        .tool("npx")
        .argv(&["--dangerously-skip-permissions"])
        .run("npx -y @modelcontextprotocol/server-filesystem@1.2.3 /tmp; true");
    agent.wait_for_descendants(1);
    let mut h = session();
    let mut found = None;
    eventually("the npx tool to show under the agent", || {
        let answer = h.call(1, "list_agents", json!({"pid": agent.pid()}));
        found = agent_with_pid(structured(&answer), agent.pid());
        found.as_ref().is_some_and(|a| {
            a["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["kind"] == "mcp_server")
        })
    });
    let a = found.unwrap();
    assert_eq!(a["product"], "claude-code", "{a}");
    assert_eq!(a["client"], "claude-code");
    assert_eq!(a["evidence"], "observed");
    let server = a["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["kind"] == "mcp_server")
        .unwrap()
        .clone();
    assert_eq!(server["package"], "@modelcontextprotocol/server-filesystem");
    assert_eq!(server["evidence"], "inferred");
    assert_eq!(server["via_holdcall"], false);
    let approvals = access(&a, "approvals");
    assert_eq!(approvals["level"], "elevated", "{a}");
    assert_eq!(approvals["evidence"], "observed");
    assert!(
        approvals["detail"]
            .as_str()
            .unwrap()
            .contains("--dangerously-skip-permissions")
    );
    let folder = &a["folders"][0];
    assert_eq!(folder["path"], json!(canonical(&agent.project)));
    assert_eq!(folder["project"], json!(canonical(&agent.project)));
    assert_eq!(a["capabilities"], Value::Null);
    let tool_pid = server["pid"].as_u64().unwrap();
    assert!(
        a["process_ids"]
            .as_array()
            .unwrap()
            .contains(&json!(tool_pid))
    );
}

#[test]
fn a_codex_asked_never_to_ask_for_approval_is_found_by_an_owned_pid_and_the_tool_filter() {
    let agent = FakeAgent::named("codex")
        .tool("npx")
        .argv(&["-a", "never"])
        .run("npx -y @playwright/mcp@0.0.30; true");
    agent.wait_for_descendants(1);
    let mut h = session();
    eventually("the tool to be listed", || {
        let answer = h.call(
            1,
            "list_agents",
            json!({"agent": agent.query(), "tool": "@playwright/mcp"}),
        );
        agent_with_pid(structured(&answer), agent.pid()).is_some()
    });
    let tool_pid = agent.descendants()[0];
    let answer = h.call(2, "list_agents", json!({"pid": tool_pid}));
    let out = structured(&answer);
    let a = agent_with_pid(out, agent.pid()).expect("the tool's pid finds its agent");
    assert_eq!(a["product"], "codex");
    let approvals = access(&a, "approvals");
    assert_eq!(approvals["level"], "elevated", "{a}");
    assert!(approvals["detail"].as_str().unwrap().contains("never"));
    assert!(
        out["limits"]
            .to_string()
            .contains("do not prove that an agent loaded or used")
    );
    // A tool it does not run filters it out.
    let answer = h.call(
        3,
        "list_agents",
        json!({"pid": agent.pid(), "tool": "no-such-tool"}),
    );
    assert!(agent_with_pid(structured(&answer), agent.pid()).is_none());
}

#[test]
fn an_agent_started_inside_another_is_its_own_agent_with_the_outer_as_parent() {
    let inner_dir = tempfile::tempdir().unwrap();
    let inner = inner_dir.path().join("claude");
    crate::common::copy_executable(std::fs::canonicalize("/bin/sh").unwrap(), &inner);
    let outer =
        FakeAgent::named("cursor").run(&format!("'{}' -c 'cat; true'; true", inner.display()));
    outer.wait_for_descendants(1);
    let inner_pid = outer.descendants()[0];
    let mut h = session();
    let mut found = None;
    eventually("the inner agent to show with its parent", || {
        let answer = h.call(1, "list_agents", json!({"pid": inner_pid}));
        found = agent_with_pid(structured(&answer), inner_pid);
        found.is_some()
    });
    let a = found.unwrap();
    assert_eq!(a["product"], "claude-code", "{a}");
    assert_eq!(a["parent"], json!(format!("agent:{}", outer.pid())));
    let answer = h.call(2, "list_agents", json!({"pid": outer.pid()}));
    let cursor = agent_with_pid(structured(&answer), outer.pid()).unwrap();
    assert_eq!(cursor["product"], "cursor");
    assert_eq!(cursor["kind"], "ide");
    assert!(
        !cursor["process_ids"]
            .as_array()
            .unwrap()
            .contains(&json!(inner_pid)),
        "the inner agent's processes are its own"
    );
}

#[test]
fn a_process_whose_comm_and_argv0_say_claude_but_whose_executable_is_python_is_not_an_agent() {
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap().trim().to_owned();
    let mut child = Command::new(&python)
        .arg0("claude")
        // Its comm too: PR_SET_NAME (15) renames the thread "claude".
        .args([
            "-c",
            "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'claude', 0, 0, 0); sys.stdin.read()",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    eventually("the process to call itself claude", || {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "claude")
    });
    let mut h = session();
    let answer = h.call(1, "list_agents", json!({"pid": pid}));
    let out = structured(&answer);
    assert!(agent_with_pid(out, pid).is_none(), "{out}");
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_unknown_product_name_is_refused_with_the_known_ones() {
    let mut h = session();
    let answer = h.call(1, "list_agents", json!({"agent": "notepad"}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("claude-code"), "{text}");
}

#[test]
fn include_capabilities_fills_capabilities_for_an_agent_of_holdmaps_own_account() {
    let agent = FakeAgent::named("gemini").run("cat; true");
    agent.wait_for_descendants(1);
    let mut h = session();
    let answer = h.call(
        1,
        "list_agents",
        json!({"pid": agent.pid(), "include_capabilities": true}),
    );
    let out = structured(&answer);
    let a = agent_with_pid(out, agent.pid()).expect("the agent is listed");
    assert_eq!(a["product"], "gemini");
    assert!(a["capabilities"].is_object(), "{a}");
}
