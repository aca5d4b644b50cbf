//! `list_agents` with `include_capabilities: true` through the real binary: a stand-in agent
//! (a real process named like the product, running an `npx` tool script) and real config files
//! of its client in a temp HOME that `holdmap mcp` is started with. For every supported client:
//! a server routed through the holdcall beside holdmap is `routed`, an unpinned `npx -y` one is
//! `unpinned` and `not routed` (and running, since the agent runs it), and a canary secret in
//! env values, headers, URLs and arguments appears nowhere in the raw answer line.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::client::{Holdmap, holdmap_binary};
use super::fake_agent::FakeAgent;

const CANARY: &str = "CANARYsecret0123456789abcdefXYZ";

/// The holdcall installed beside the holdmap under test (target/debug/holdcall).
fn holdcall_beside_holdmap() -> PathBuf {
    let holdmap = std::fs::canonicalize(holdmap_binary()).unwrap();
    holdmap.parent().unwrap().join("holdcall")
}

/// The four servers, as a JSON object of entries (`mcpServers` / `servers`): pinned with
/// secrets in env and args, routed through holdcall, unpinned `npx -y some-mcp`, and remote
/// with secrets in userinfo, path, query and headers (its URL under `remote_key`).
fn json_servers(remote_key: &str) -> String {
    format!(
        r#"{{
  "stdio": {{"command": "npx", "args": ["-y", "@scope/pinned@1.2.3", "--token", "{CANARY}"],
             "env": {{"API_TOKEN": "{CANARY}", "PLAIN": "{CANARY}"}}}},
  "routed": {{"command": "{}", "args": ["serve", "--", "npx", "-y", "pkg@1.2.3"]}},
  "loose": {{"command": "npx", "args": ["-y", "some-mcp"]}},
  "remote": {{"{remote_key}": "https://user:{CANARY}@mcp.example.com/{CANARY}?key={CANARY}",
              "headers": {{"Authorization": "Bearer {CANARY}"}}}}
}}"#,
        holdcall_beside_holdmap().display()
    )
}

fn codex_servers() -> String {
    format!(
        r#"approval_policy = "never"
[mcp_servers.stdio]
command = "npx"
args = ["-y", "@scope/pinned@1.2.3", "--token", "{CANARY}"]
env = {{ API_TOKEN = "{CANARY}", PLAIN = "{CANARY}" }}
[mcp_servers.routed]
command = "{}"
args = ["serve", "--", "npx", "-y", "pkg@1.2.3"]
[mcp_servers.loose]
command = "npx"
args = ["-y", "some-mcp"]
[mcp_servers.remote]
url = "https://user:{CANARY}@mcp.example.com/{CANARY}?key={CANARY}"
http_headers = {{ Authorization = "Bearer {CANARY}" }}
"#,
        holdcall_beside_holdmap().display()
    )
}

/// Starts a stand-in `program` running `npx -y some-mcp`, with `file` (relative to its HOME)
/// holding `text`, and returns the raw answer line of `list_agents` for its pid with
/// capabilities, and the agent.
fn answer_for(program: &str, file: &str, text: &str) -> (String, FakeAgent) {
    let agent = FakeAgent::named(program)
        .tool("npx")
        // `; true` keeps the shell alive as the agent instead of exec'ing the tool.
        .run("npx -y some-mcp; true");
    agent.write_home(file, text);
    wait_for_npx(&agent);
    let home = agent.home.to_string_lossy().into_owned();
    let mut hm = Holdmap::start_with(&[("HOME", home.as_str())]);
    hm.initialize("2025-06-18");
    hm.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "list_agents",
        "arguments": {"agent": agent.query(), "include_capabilities": true}}}),
    );
    let line = hm
        .recv_line(crate::common::PATIENCE)
        .unwrap_or_else(|| panic!("no answer; stderr:\n{}", hm.stderr()));
    (line, agent)
}

/// Waits until the agent's `npx` script runs under its Python interpreter (`python3 …/npx …`):
/// a wrapper such as a pyenv shim runs first, with another command line.
fn wait_for_npx(agent: &FakeAgent) {
    crate::common::eventually("the agent's npx to run under python", || {
        agent.descendants().iter().any(|pid| {
            let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let words: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
            let first = words
                .first()
                .map(|w| String::from_utf8_lossy(w).into_owned());
            let second = words
                .get(1)
                .map(|w| String::from_utf8_lossy(w).into_owned());
            first.is_some_and(|f| {
                f.rsplit('/')
                    .next()
                    .is_some_and(|b| b.starts_with("python"))
            }) && second.is_some_and(|s| s.ends_with("/npx"))
        })
    });
}

/// The capabilities object of the agent in `line`.
fn capabilities(line: &str, agent: &FakeAgent) -> Value {
    let v: Value = serde_json::from_str(line).unwrap();
    let agents = v["result"]["structuredContent"]["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents in {line}"))
        .clone();
    let me = agents
        .iter()
        .find(|a| a["pid"] == json!(agent.pid()))
        .unwrap_or_else(|| panic!("agent {} not listed in {line}", agent.pid()));
    me["capabilities"].clone()
}

fn server<'a>(caps: &'a Value, alias: &str) -> &'a Value {
    caps["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["alias"] == alias)
        .unwrap_or_else(|| panic!("no server {alias} in {caps}"))
}

/// The rules every client's answer keeps.
fn check(program: &str, file: &str, text: &str) {
    let (line, agent) = answer_for(program, file, text);
    assert!(
        !line.contains(CANARY),
        "the canary reached the answer: {line}"
    );
    assert!(
        !line.contains("CANARY"),
        "part of the canary reached the answer: {line}"
    );
    let caps = capabilities(&line, &agent);
    let routed = server(&caps, "routed");
    assert_eq!(routed["routing"], "routed", "{routed}");
    assert_eq!(routed["pin"], "pinned", "{routed}");
    // It names no home: its relay uses the one its client's environment gives.
    assert_eq!(routed["holdcall_home"], json!(null), "{routed}");
    let loose = server(&caps, "loose");
    assert_eq!(loose["pin"], "unpinned", "{loose}");
    assert_eq!(loose["routing"], "not routed", "{loose}");
    assert_eq!(
        loose["running"], true,
        "the agent runs npx -y some-mcp: {loose}"
    );
    let stdio = server(&caps, "stdio");
    assert_eq!(stdio["env_names"], json!(["API_TOKEN", "PLAIN"]));
    assert_eq!(server(&caps, "remote")["remote_host"], "mcp.example.com");
    let limits = caps["limits"].as_array().unwrap();
    assert!(
        limits.iter().any(|l| l
            .as_str()
            .unwrap()
            .starts_with("definitions in files do not prove")),
        "{limits:?}"
    );
    assert!(
        !limits.iter().any(|l| l
            .as_str()
            .unwrap()
            .contains("no holdcall is installed beside")),
        "a holdcall is beside holdmap: {limits:?}"
    );
}

#[test]
fn claude_codes_servers_are_judged_and_no_secret_of_claude_json_is_returned() {
    let text = format!(
        r#"{{"mcpServers": {}, "oauthAccount": {{"accessToken": "{CANARY}"}}}}"#,
        json_servers("url")
    );
    check("claude", ".claude.json", &text);
}

#[test]
fn cursors_servers_are_judged_and_no_secret_is_returned() {
    check(
        "cursor",
        ".cursor/mcp.json",
        &format!(r#"{{"mcpServers": {}}}"#, json_servers("url")),
    );
}

#[test]
fn vscodes_servers_are_judged_and_no_secret_is_returned() {
    check(
        "copilot-language-server",
        ".config/Code/User/mcp.json",
        &format!("{{// JSONC\n\"servers\": {}}}", json_servers("url")),
    );
}

#[test]
fn codexs_servers_are_judged_and_no_secret_is_returned() {
    check("codex", ".codex/config.toml", &codex_servers());
}

#[test]
fn gemini_clis_servers_are_judged_and_no_secret_is_returned() {
    check(
        "gemini",
        ".gemini/settings.json",
        &format!(
            "// comments\n{{\"mcpServers\": {}}}",
            json_servers("httpUrl")
        ),
    );
}

#[test]
fn windsurfs_servers_are_judged_and_no_secret_is_returned() {
    check(
        "windsurf",
        ".codeium/windsurf/mcp_config.json",
        &format!(r#"{{"mcpServers": {}}}"#, json_servers("serverUrl")),
    );
}

#[test]
fn without_include_capabilities_no_config_file_is_read_into_the_answer() {
    let agent = FakeAgent::named("claude")
        .tool("npx")
        .run("npx -y some-mcp; true");
    agent.write_home(
        ".claude.json",
        &format!(r#"{{"mcpServers": {}}}"#, json_servers("url")),
    );
    wait_for_npx(&agent);
    let home = agent.home.to_string_lossy().into_owned();
    let mut hm = Holdmap::start_with(&[("HOME", home.as_str())]);
    hm.initialize("2025-06-18");
    let answer = hm.call(1, "list_agents", json!({"agent": agent.query()}));
    let agents = answer["result"]["structuredContent"]["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents in {answer}"))
        .clone();
    let me = agents
        .iter()
        .find(|a| a["pid"] == json!(agent.pid()))
        .unwrap_or_else(|| panic!("agent not listed: {answer}"));
    assert!(
        me.get("capabilities").is_none_or(Value::is_null),
        "capabilities without asking: {me}"
    );
}

#[test]
fn claude_codes_risky_settings_rules_instructions_and_skills_are_listed_without_bodies() {
    let settings = format!(
        r#"{{"permissions": {{"allow": ["Bash(export API_KEY={CANARY})"], "defaultMode": "bypassPermissions"}},
            "env": {{"TOKEN": "{CANARY}"}}}}"#
    );
    let agent = FakeAgent::named("claude")
        .tool("npx")
        .run("npx -y some-mcp; true");
    agent.write_home(".claude/settings.json", &settings);
    agent.write_home(".claude/CLAUDE.md", &format!("BODY {CANARY}"));
    agent.write_project(
        ".claude/skills/pdf/SKILL.md",
        &format!("---\nname: PDF\ndescription: fills forms\n---\nBODY {CANARY}\n"),
    );
    wait_for_npx(&agent);
    let home = agent.home.to_string_lossy().into_owned();
    let mut hm = Holdmap::start_with(&[("HOME", home.as_str())]);
    hm.initialize("2025-06-18");
    hm.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "list_agents",
        "arguments": {"agent": agent.query(), "include_capabilities": true}}}),
    );
    let line = hm.recv_line(crate::common::PATIENCE).unwrap();
    assert!(!line.contains("CANARY"), "{line}");
    assert!(
        !line.contains("BODY"),
        "an instruction or skill body was returned: {line}"
    );
    let caps = capabilities(&line, &agent);
    let mode = caps["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "permissions.defaultMode")
        .unwrap_or_else(|| panic!("no defaultMode in {caps}"));
    assert_eq!(mode["risky"], true);
    assert_eq!(caps["permissions"][0]["effect"], "allow");
    assert_eq!(caps["instructions"][0]["name"], "CLAUDE.md");
    assert_eq!(caps["skills"][0]["folder"], "pdf");
    assert_eq!(caps["skills"][0]["scope"], "project");
    assert_eq!(caps["skills"][0]["purpose"], "fills forms");
}
