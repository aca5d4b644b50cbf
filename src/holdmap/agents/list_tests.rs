//! `list_agents` from fixture snapshots: child-tool classification (MCP inference and its
//! refusals), access facts, ports, links, filters and the closed output schema.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::holdmap::agents::list::{self, Filter};
use crate::holdmap::agents::model::{Level, ToolKind};
use crate::holdmap::agents::{report, tools};
use crate::holdmap::model::Snapshot;
use crate::holdmap::model::fixture::{add, listen, machine, process, socket};
use crate::holdmap::stop::fake::add_vite;
use crate::holdmap::tool::Outcome;
use crate::os::procs::Proc;
use crate::os::sockets::{Protocol, SocketState};

fn proc(pid: i32, ppid: i32, exe: &str, argv: &[&str]) -> Proc {
    let name = crate::holdmap::framework::basename(exe);
    let mut p = process(pid, ppid, 1000, name, argv, "/home/u/shop");
    p.exe = Some(exe.into());
    p
}

fn kind_of(exe: &str, argv: &[&str]) -> (ToolKind, Option<String>) {
    let t = tools::classify(
        &proc(3000, 2000, exe, argv),
        &BTreeSet::new(),
        false,
        &crate::holdmap::agents::capabilities::holdcall_judge(),
    );
    (t.kind, t.package)
}

fn mcp(package: &str) -> (ToolKind, Option<String>) {
    (ToolKind::McpServer, Some(package.to_owned()))
}

#[test]
fn launchers_entries_and_names_that_look_like_mcp_servers_are_inferred_mcp_servers() {
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &[
                "node",
                "/usr/bin/npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.2.3",
                "/tmp"
            ]
        ),
        mcp("@modelcontextprotocol/server-filesystem")
    );
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &["node", "/usr/bin/npx", "-y", "@playwright/mcp@1.2.3"]
        ),
        mcp("@playwright/mcp")
    );
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &[
                "node",
                "/usr/bin/npx",
                "--package",
                "@modelcontextprotocol/server-github@latest",
                "x"
            ]
        ),
        mcp("@modelcontextprotocol/server-github")
    );
    assert_eq!(
        kind_of(
            "/usr/bin/python3.12",
            &["python3", "/home/u/.local/bin/uvx", "mcp-server-fetch"]
        ),
        mcp("mcp-server-fetch")
    );
    assert_eq!(
        kind_of(
            "/usr/local/bin/github-mcp-server",
            &["github-mcp-server", "stdio"]
        ),
        mcp("github-mcp-server")
    );
    assert_eq!(
        kind_of(
            "/usr/bin/python3",
            &["python3", "-m", "mcp_server_git", "--repository", "."]
        ),
        mcp("mcp_server_git")
    );
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &["node", "/opt/context7-mcp/dist/index.js"]
        ),
        (ToolKind::Command, None),
        "a generic script name says nothing"
    );
    let t = tools::classify(
        &proc(
            3000,
            2000,
            "/usr/bin/node",
            &["node", "/usr/bin/npx", "-y", "x-mcp"],
        ),
        &BTreeSet::new(),
        false,
        &crate::holdmap::agents::capabilities::holdcall_judge(),
    );
    assert_eq!(
        t.evidence.label(),
        "inferred",
        "an MCP server is never observed"
    );
}

#[test]
fn a_launchers_option_values_and_later_arguments_are_never_searched_for_mcp_names() {
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &[
                "node",
                "/usr/bin/npx",
                "--registry",
                "mcp-server-secret",
                "ordinary-package"
            ]
        ),
        (ToolKind::Command, None)
    );
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &["node", "/usr/bin/npx", "-y", "ordinary", "mcp-server-x"]
        ),
        (ToolKind::Command, None)
    );
    assert_eq!(
        kind_of(
            "/usr/bin/node",
            &["node", "--conditions", "mcp-server-secret", "worker.js"]
        ),
        (ToolKind::Command, None)
    );
    assert_eq!(
        kind_of("/usr/bin/node", &["node", "-e", "require('mcp-server-x')"]),
        (ToolKind::Command, None)
    );
}

#[test]
fn a_holdcall_serve_not_beside_holdmap_is_an_mcp_server_that_only_claims_to_route() {
    let mut snap = machine();
    add(
        &mut snap,
        proc(2000, 1, "/usr/local/bin/claude", &["claude"]),
    );
    add(
        &mut snap,
        proc(
            2100,
            2000,
            "/usr/local/bin/holdcall",
            &[
                "holdcall",
                "serve",
                "--connector",
                "fs",
                "--",
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.0.0",
            ],
        ),
    );
    add(
        &mut snap,
        proc(
            2110,
            2100,
            "/usr/bin/node",
            &[
                "node",
                "/usr/bin/npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.0.0",
            ],
        ),
    );
    let reports = list::reports(&snap, false);
    let tools = &reports[0].tools;
    let serve = tools.iter().find(|t| t.pid == 2100).unwrap();
    assert_eq!(serve.kind, ToolKind::McpServer);
    // /usr/local/bin/holdcall is not the holdcall beside this test binary: it only claims to
    // route (the judged cases are `tools`' own tests).
    assert!(!serve.via_holdcall);
    assert_eq!(
        serve.package.as_deref(),
        Some("@modelcontextprotocol/server-filesystem")
    );
    let upstream = tools.iter().find(|t| t.pid == 2110).unwrap();
    assert!(!upstream.via_holdcall);
    assert_eq!(upstream.kind, ToolKind::McpServer);
}

#[test]
fn shells_dev_servers_and_commands_are_observed_and_helpers_are_not_tools() {
    let mut snap = machine();
    add(
        &mut snap,
        proc(2000, 1, "/usr/share/cursor/cursor", &["cursor"]),
    );
    add(
        &mut snap,
        proc(
            2001,
            2000,
            "/usr/share/cursor/cursor",
            &["cursor", "--type=gpu-process"],
        ),
    );
    add(&mut snap, proc(2010, 2000, "/bin/bash", &["bash"]));
    add(
        &mut snap,
        proc(2020, 2010, "/usr/bin/git", &["git", "status"]),
    );
    add_vite(&mut snap, 2010, 2100, 5173);
    let r = &list::reports(&snap, false)[0];
    let kind = |pid| r.tools.iter().find(|t| t.pid == pid).map(|t| t.kind);
    assert_eq!(
        kind(2001),
        None,
        "a helper of the same product is not a tool"
    );
    assert_eq!(kind(2010), Some(ToolKind::Shell));
    assert_eq!(kind(2020), Some(ToolKind::Command));
    assert_eq!(kind(2102), Some(ToolKind::DevServer));
    assert!(r.tools.iter().all(|t| t.evidence.label() == "observed"));
    let dev = r.ports.iter().find(|p| p.port == 5173).unwrap();
    assert_eq!(dev.role.label(), "dev_server");
    assert!(!dev.exposed);
}

fn access_of(exe: &str, argv: &[&str]) -> Vec<(&'static str, Level, String)> {
    let mut snap = machine();
    add(&mut snap, proc(2000, 1, exe, argv));
    list::reports(&snap, false)[0]
        .access
        .iter()
        .map(|a| (a.kind, a.level, a.evidence.label().to_owned()))
        .collect()
}

fn level(facts: &[(&'static str, Level, String)], kind: &str) -> (Level, String) {
    facts
        .iter()
        .find(|f| f.0 == kind)
        .map(|f| (f.1, f.2.clone()))
        .unwrap()
}

#[test]
fn approval_flags_on_an_agents_command_line_are_observed_and_elevated() {
    let elevated = (Level::Elevated, "observed".to_owned());
    let cases: &[(&str, &[&str])] = &[
        (
            "/usr/local/bin/claude",
            &["claude", "--dangerously-skip-permissions"],
        ),
        (
            "/usr/local/bin/claude",
            &["claude", "--permission-mode", "bypassPermissions"],
        ),
        ("/usr/local/bin/codex", &["codex", "-a", "never"]),
        (
            "/usr/local/bin/codex",
            &["codex", "--ask-for-approval=never"],
        ),
        ("/usr/local/bin/codex", &["codex", "--full-auto"]),
        (
            "/usr/local/bin/codex",
            &["codex", "--dangerously-bypass-approvals-and-sandbox"],
        ),
        ("/usr/local/bin/codex", &["codex", "--yolo"]),
        ("/usr/local/bin/gemini", &["gemini", "--yolo"]),
        (
            "/usr/local/bin/gemini",
            &["gemini", "--approval-mode", "yolo"],
        ),
        ("/home/u/.local/bin/aider", &["aider", "--yes-always"]),
        ("/usr/local/bin/copilot", &["copilot", "--allow-all-tools"]),
    ];
    for (exe, argv) in cases {
        assert_eq!(
            level(&access_of(exe, argv), "approvals"),
            elevated,
            "{argv:?}"
        );
    }
    assert_eq!(
        level(
            &access_of("/usr/local/bin/claude", &["claude"]),
            "approvals"
        ),
        (Level::Unknown, "unknown".to_owned()),
        "nothing seen is unknown, not normal"
    );
    assert_eq!(
        level(
            &access_of("/usr/local/bin/codex", &["codex", "-a", "on-request"]),
            "approvals"
        )
        .0,
        Level::Normal
    );
}

#[test]
fn sandbox_flags_and_wrappers_are_observed_and_a_root_agent_is_elevated() {
    let codex = |argv: &[&str]| level(&access_of("/usr/local/bin/codex", argv), "sandbox");
    assert_eq!(
        codex(&["codex", "--sandbox", "danger-full-access"]).0,
        Level::Elevated
    );
    assert_eq!(codex(&["codex", "-s", "read-only"]).0, Level::Normal);
    assert_eq!(
        codex(&["codex", "--dangerously-bypass-approvals-and-sandbox"]).0,
        Level::Elevated
    );
    assert_eq!(codex(&["codex"]), (Level::Unknown, "unknown".to_owned()));
    assert_eq!(
        level(
            &access_of("/usr/local/bin/gemini", &["gemini", "--sandbox"]),
            "sandbox"
        )
        .0,
        Level::Normal
    );
    // Codex's commands through codex-linux-sandbox.
    let mut snap = machine();
    add(&mut snap, proc(2000, 1, "/usr/local/bin/codex", &["codex"]));
    add(
        &mut snap,
        proc(
            2010,
            2000,
            "/usr/local/bin/codex-linux-sandbox",
            &["codex-linux-sandbox", "--", "ls"],
        ),
    );
    let r = &list::reports(&snap, false)[0];
    let sandbox = r.access.iter().find(|a| a.kind == "sandbox").unwrap();
    assert_eq!(
        (sandbox.level, sandbox.evidence.label()),
        (Level::Normal, "observed")
    );
    assert!(sandbox.detail.contains("codex-linux-sandbox"));
    // An agent inside bwrap.
    let mut snap = machine();
    add(
        &mut snap,
        proc(1990, 1, "/usr/bin/bwrap", &["bwrap", "--", "claude"]),
    );
    add(
        &mut snap,
        proc(2000, 1990, "/usr/local/bin/claude", &["claude"]),
    );
    let r = &list::reports(&snap, false)[0];
    assert!(
        r.access
            .iter()
            .any(|a| a.kind == "sandbox" && a.detail.contains("bwrap"))
    );
    // Root, and unknown account.
    let mut snap = machine();
    let mut root = proc(2000, 1, "/usr/local/bin/claude", &["claude"]);
    root.uid = Some(0);
    add(&mut snap, root);
    let mut anon = proc(2100, 1, "/usr/local/bin/codex", &["codex"]);
    anon.uid = None;
    add(&mut snap, anon);
    let reports = list::reports(&snap, false);
    let user = |pid| {
        let r = reports.iter().find(|r| r.pid == pid).unwrap();
        let u = r.access.iter().find(|a| a.kind == "user").unwrap();
        (u.level, u.evidence.label())
    };
    assert_eq!(user(2000), (Level::Elevated, "observed"));
    assert_eq!(user(2100), (Level::Unknown, "unknown"));
}

fn busy_machine() -> Snapshot {
    let mut snap = machine();
    add(
        &mut snap,
        proc(
            2000,
            800,
            "/usr/local/bin/claude",
            &["claude", "--dangerously-skip-permissions"],
        ),
    );
    add(
        &mut snap,
        proc(
            2010,
            2000,
            "/usr/bin/node",
            &[
                "node",
                "/usr/bin/npx",
                "-y",
                "@modelcontextprotocol/server-filesystem@1.2.3",
            ],
        ),
    );
    let mut server = proc(2020, 2000, "/usr/bin/python3", &["python3", "app.py"]);
    server.cwd = Some("/home/u/api".into());
    add(&mut snap, server);
    listen(&mut snap, "0.0.0.0:8000", 2020);
    listen(&mut snap, "127.0.0.1:5432", 1);
    socket(
        &mut snap,
        Protocol::Tcp,
        "127.0.0.1:40000",
        "127.0.0.1:5432",
        SocketState::Established,
        2020,
    );
    socket(
        &mut snap,
        Protocol::Tcp,
        "10.0.0.2:40001",
        "140.82.112.3:443",
        SocketState::Established,
        2000,
    );
    add(
        &mut snap,
        proc(3000, 1, "/usr/local/bin/codex", &["codex", "-a", "never"]),
    );
    snap
}

fn call(snap: &Snapshot, args: Value) -> Value {
    let args: Map<String, Value> = args.as_object().cloned().unwrap();
    let filter = Filter::from_args(&args).unwrap();
    match list::list(snap, &filter) {
        Outcome::Done {
            structured,
            summary,
        } => {
            crate::holdmap::catalog::check_output("list_agents", &structured);
            assert!(summary.contains("do not prove use"), "{summary}");
            structured
        }
        Outcome::Failed(e) => panic!("{e}"),
    }
}

#[test]
fn the_answer_matches_its_closed_schema_and_says_what_holdmap_cannot_know() {
    let out = call(&busy_machine(), json!({}));
    assert_eq!(out["agents"].as_array().unwrap().len(), 2);
    let claude = &out["agents"][0];
    assert_eq!(claude["product"], "claude-code");
    assert_eq!(claude["client"], "claude-code");
    assert_eq!(claude["recognised_by"], "executable name");
    assert_eq!(claude["capabilities"], Value::Null);
    let limits = out["limits"].to_string();
    assert!(limits.contains("do not prove"), "{limits}");
    assert!(limits.contains("include_capabilities"), "{limits}");
    let port = &claude["ports"][0];
    assert_eq!(
        (port["port"].as_u64(), port["role"].as_str()),
        (Some(8000), Some("service"))
    );
    assert_eq!(port["exposed"], true);
    let network = claude["access"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "network")
        .unwrap();
    assert_eq!(network["level"], "elevated");
    let links = claude["links"].as_array().unwrap();
    let pg = links
        .iter()
        .find(|l| l["remote"] == "127.0.0.1:5432")
        .unwrap();
    assert_eq!(
        (pg["peer_pid"].as_i64(), pg["hint"].as_str()),
        (Some(1), Some("postgres"))
    );
    let web = links
        .iter()
        .find(|l| l["remote"] == "140.82.112.3:443")
        .unwrap();
    assert_eq!(
        (web["peer_pid"].clone(), web["hint"].as_str()),
        (Value::Null, Some("https"))
    );
    let folders: Vec<&str> = claude["folders"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(
        folders,
        vec!["/home/u/shop", "/home/u/api"],
        "the agent's own folder first"
    );
    assert_eq!(claude["memory_bytes"].as_u64(), Some(3 * (10 << 20)));
}

#[test]
fn filters_take_a_product_an_owned_pid_a_folder_or_a_tool() {
    let snap = busy_machine();
    let pids = |args: Value| -> Vec<i64> {
        call(&snap, args)["agents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["pid"].as_i64())
            .collect()
    };
    assert_eq!(pids(json!({"agent": "Codex"})), vec![3000]);
    assert_eq!(
        pids(json!({"agent": "pid:2010"})),
        vec![2000],
        "any owned pid"
    );
    assert_eq!(pids(json!({"pid": 2020})), vec![2000]);
    assert_eq!(pids(json!({"pid": 900})), Vec::<i64>::new());
    assert_eq!(pids(json!({"folder": "/home/u/api"})), vec![2000]);
    assert_eq!(
        pids(json!({"folder": "/home/u/ap"})),
        Vec::<i64>::new(),
        "by path component"
    );
    assert_eq!(pids(json!({"tool": "server-filesystem"})), vec![2000]);
    assert_eq!(
        pids(json!({"tool": "@modelcontextprotocol/server-filesystem"})),
        vec![2000]
    );
    let bad = |args: Value| Filter::from_args(args.as_object().unwrap()).unwrap_err();
    assert!(bad(json!({"agent": "notepad"})).contains("known products"));
    assert!(bad(json!({"agent": "pid:x"})).contains("pid:1234"));
    assert!(bad(json!({"folder": "shop"})).contains("absolute"));
}

#[test]
fn capabilities_of_another_accounts_agent_are_not_read_and_a_limit_says_why() {
    let mut snap = busy_machine();
    snap.procs.get_mut(&3000).unwrap().uid = Some(1001);
    let out = call(
        &snap,
        json!({"agent": "codex", "include_capabilities": true}),
    );
    assert_eq!(out["agents"][0]["capabilities"], Value::Null);
    assert!(
        out["limits"]
            .to_string()
            .contains("agent:3000 were not read"),
        "{out}"
    );
}

#[test]
fn long_lists_are_capped_with_a_count_of_the_rest() {
    let mut snap = machine();
    add(
        &mut snap,
        proc(2000, 1, "/usr/local/bin/claude", &["claude"]),
    );
    for i in 0..60 {
        add(
            &mut snap,
            proc(2100 + i, 2000, "/bin/sleep", &["sleep", "100"]),
        );
    }
    let out = call(&snap, json!({}));
    let a = &out["agents"][0];
    assert_eq!(
        a["tools"].as_array().unwrap().len(),
        crate::limits::HOLDMAP_AGENT_TOOLS_MAX
    );
    assert_eq!(
        a["more_tools"].as_u64(),
        Some(60 - crate::limits::HOLDMAP_AGENT_TOOLS_MAX as u64)
    );
    assert_eq!(
        a["process_ids"].as_array().unwrap().len(),
        crate::limits::HOLDMAP_AGENT_PROCESSES_MAX
    );
    assert!(a["more_processes"].as_u64().unwrap() > 0);
}

#[test]
fn cpu_ticks_become_seconds() {
    assert!(report::seconds(0).abs() < f64::EPSILON);
    assert!(report::seconds(1_000_000) > 0.0);
}

#[test]
fn holdmap_mcp_run_by_an_agent_is_one_of_its_mcp_servers_and_secrets_in_commands_are_masked() {
    let mut snap = machine();
    add(
        &mut snap,
        proc(
            2000,
            1,
            "/usr/local/bin/claude",
            &["claude", "--api-key", "sk-canary-1234567890"],
        ),
    );
    snap.procs.get_mut(&800).unwrap().ppid = 2000;
    let out = call(&snap, json!({}));
    let text = out.to_string();
    assert!(!text.contains("sk-canary-1234567890"), "{text}");
    let a = &out["agents"][0];
    let me = a["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pid"] == 900)
        .unwrap();
    assert_eq!(
        (me["kind"].as_str(), me["package"].as_str()),
        (Some("mcp_server"), Some("holdmap"))
    );
}

#[test]
fn links_between_an_agents_own_processes_are_left_out() {
    let mut snap = machine();
    add(
        &mut snap,
        proc(2000, 1, "/usr/local/bin/claude", &["claude"]),
    );
    add(
        &mut snap,
        proc(2010, 2000, "/usr/bin/python3", &["python3", "app.py"]),
    );
    listen(&mut snap, "127.0.0.1:8000", 2010);
    socket(
        &mut snap,
        Protocol::Tcp,
        "127.0.0.1:40000",
        "127.0.0.1:8000",
        SocketState::Established,
        2000,
    );
    let r = &list::reports(&snap, false)[0];
    assert!(r.links.is_empty(), "{:?}", r.links);
    assert_eq!(r.ports[0].role.label(), "service");
}
