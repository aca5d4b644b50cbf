//! Unit tests of `include_capabilities` from hand-made agent reports and real config files in a
//! temp HOME: every supported client's servers, a canary secret in every place a secret can sit
//! (env values, header values, URL userinfo, query and path, arguments, other keys) found
//! nowhere in the JSON, the routed, pinned and running judgements, and the closed schema.

use std::path::{Path, PathBuf};

use super::*;
use crate::holdmap::agents::model::{AgentReport, Evidence, Folder};
use crate::holdmap::model::fixture::{add, machine, process};

const CANARY: &str = "CANARYsecret0123456789abcdefXYZ";

struct World {
    _t: tempfile::TempDir,
    places: Places,
    holdcall: PathBuf,
}

fn world() -> World {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("home");
    let p = t.path().join("project");
    std::fs::create_dir_all(&h).unwrap();
    std::fs::create_dir_all(&p).unwrap();
    let holdcall = t.path().join("bin/holdcall");
    write(&holdcall, "#!/bin/sh\n");
    World {
        places: Places {
            home: h.clone(),
            config_dir: h.join(".config"),
            codex_home: h.join(".codex"),
            project: p,
        },
        holdcall,
        _t: t,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn report(client: Option<ClientId>, product: &'static str, pids: &[i32]) -> AgentReport {
    AgentReport {
        id: "agent:2000".into(),
        pid: 2000,
        start_ticks: 3000,
        product,
        name: "Stand-in",
        vendor: "test",
        kind: "cli",
        client,
        command: "agent".into(),
        parent: None,
        uid: Some(1000),
        process_ids: pids.to_vec(),
        tools: Vec::new(),
        folders: vec![Folder {
            path: PathBuf::from("/p"),
            project: None,
            evidence: Evidence::Observed,
        }],
        ports: Vec::new(),
        links: Vec::new(),
        cpu_seconds: 0.0,
        memory_bytes: 0,
        access: Vec::new(),
        capabilities: None,
    }
}

/// A stdio entry with a canary in an env value and an argument, a routed one, an unpinned
/// `npx -y` one and a remote one with a canary in its userinfo, path, query and headers: JSON
/// (`mcpServers` or VS Code's `servers`).
fn json_servers(holdcall: &Path, remote_key: &str) -> String {
    format!(
        r#"{{
  "stdio": {{"command": "npx", "args": ["-y", "@scope/pinned@1.2.3", "--token", "{CANARY}"],
             "env": {{"API_TOKEN": "{CANARY}", "PLAIN": "{CANARY}"}}}},
  "routed": {{"command": "{}", "args": ["serve", "--", "npx", "-y", "pkg@1.2.3"]}},
  "loose": {{"command": "npx", "args": ["-y", "some-mcp"], "disabled": true}},
  "remote": {{"{remote_key}": "https://user:{CANARY}@mcp.example.com:8443/{CANARY}/x?key={CANARY}&q={CANARY}",
              "headers": {{"Authorization": "Bearer {CANARY}", "X-Plain": "{CANARY}"}}}}
}}"#,
        holdcall.display()
    )
}

fn codex_servers(holdcall: &Path) -> String {
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
enabled = false
[mcp_servers.remote]
url = "https://user:{CANARY}@mcp.example.com:8443/{CANARY}/x?key={CANARY}&q={CANARY}"
http_headers = {{ Authorization = "Bearer {CANARY}", X-Plain = "{CANARY}" }}
"#,
        holdcall.display()
    )
}

/// Writes `client`'s user file with the four servers; returns its path.
fn configure(w: &World, client: ClientId) -> PathBuf {
    let h = &w.places.home;
    let servers = |key| json_servers(&w.holdcall, key);
    let (path, text) = match client {
        ClientId::ClaudeCode => (
            h.join(".claude.json"),
            format!(
                r#"{{"mcpServers": {}, "oauthAccount": {{"accessToken": "{CANARY}"}}}}"#,
                servers("url")
            ),
        ),
        ClientId::Cursor => (
            h.join(".cursor/mcp.json"),
            format!(r#"{{"mcpServers": {}}}"#, servers("url")),
        ),
        ClientId::VsCode => (
            w.places.config_dir.join("Code/User/mcp.json"),
            format!(
                "{{\"inputs\": [], // JSONC\n\"servers\": {}}}",
                servers("url")
            ),
        ),
        ClientId::Codex => (h.join(".codex/config.toml"), codex_servers(&w.holdcall)),
        ClientId::GeminiCli => (
            h.join(".gemini/settings.json"),
            format!(
                "// JSON with comments\n{{\"mcpServers\": {}}}",
                servers("httpUrl")
            ),
        ),
        ClientId::Windsurf => (
            h.join(".codeium/windsurf/mcp_config.json"),
            format!(r#"{{"mcpServers": {}}}"#, servers("serverUrl")),
        ),
        ClientId::ClaudeDesktop => (
            w.places
                .config_dir
                .join("Claude/claude_desktop_config.json"),
            format!(r#"{{"mcpServers": {}}}"#, servers("url")),
        ),
    };
    write(&path, &text);
    path
}

/// holdmap's fixture machine with the agent (2000), the routed server's holdcall (2001) and
/// the unpinned one as a python `npx` script (2002), both its children.
fn snap(w: &World) -> Snapshot {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "claude", &["/bin/claude"], "/p"),
    );
    let hc = w.holdcall.to_string_lossy().into_owned();
    add(
        &mut s,
        process(
            2001,
            2000,
            1000,
            "holdcall",
            &[&hc, "serve", "--", "npx", "-y", "pkg@1.2.3"],
            "/p",
        ),
    );
    add(
        &mut s,
        process(
            2002,
            2000,
            1000,
            "python3",
            &["python3", "/t/bin/npx", "-y", "some-mcp"],
            "/p",
        ),
    );
    s
}

fn caps_of(w: &World, client: ClientId) -> Capabilities {
    let r = report(Some(client), "stand-in", &[2000, 2001, 2002]);
    of_at(&r, &snap(w), &w.places, &Judge::binary_at(&w.holdcall))
}

fn server<'a>(c: &'a Capabilities, alias: &str) -> &'a ConfiguredServer {
    c.servers.iter().find(|s| s.alias == alias).unwrap()
}

const CLIENTS: [ClientId; 7] = [
    ClientId::ClaudeCode,
    ClientId::Cursor,
    ClientId::VsCode,
    ClientId::Codex,
    ClientId::GeminiCli,
    ClientId::Windsurf,
    ClientId::ClaudeDesktop,
];

#[test]
fn the_canary_secret_appears_nowhere_in_any_clients_capabilities() {
    for client in CLIENTS {
        let w = world();
        configure(&w, client);
        let c = caps_of(&w, client);
        assert_eq!(c.servers.len(), 4, "{client:?}: {:?}", c.sources);
        let out = to_json(&c).to_string();
        assert!(!out.contains(CANARY), "{client:?}: {out}");
        assert!(!out.contains("CANARY"), "{client:?}: {out}");
    }
}

#[test]
fn every_clients_servers_are_judged_for_routing_pinning_and_running() {
    for client in CLIENTS {
        let w = world();
        let file = configure(&w, client);
        let c = caps_of(&w, client);
        let routed = server(&c, "routed");
        assert_eq!(routed.routing, "routed", "{client:?}");
        assert_eq!(routed.pin, "pinned", "{client:?}");
        assert_eq!(routed.package.as_deref(), Some("pkg"));
        assert_eq!(routed.runner.as_deref(), Some("npx"));
        assert_eq!(routed.running_pids, vec![2001], "{client:?}");
        assert_eq!(routed.source, file);
        let loose = server(&c, "loose");
        assert_eq!(loose.routing, "not routed");
        assert_eq!(loose.pin, "unpinned");
        assert_eq!(loose.enabled, Some(false), "{client:?}");
        assert_eq!(loose.running_pids, vec![2002], "{client:?}");
        let stdio = server(&c, "stdio");
        assert_eq!(stdio.package.as_deref(), Some("@scope/pinned"));
        assert_eq!(stdio.env_names, ["API_TOKEN", "PLAIN"]);
        assert!(stdio.running_pids.is_empty());
        let remote = server(&c, "remote");
        assert_eq!(remote.routing, "remote");
        assert_eq!(
            remote.remote_host.as_deref(),
            Some("mcp.example.com:8443"),
            "{client:?}"
        );
        assert_eq!(
            remote.header_names,
            ["Authorization", "X-Plain"],
            "{client:?}"
        );
    }
}

#[test]
fn every_capabilities_object_says_definitions_prove_no_loading_or_use() {
    let w = world();
    let c = caps_of(&w, ClientId::Cursor);
    assert!(c.servers.is_empty());
    assert!(
        c.limits
            .iter()
            .any(|l| l.starts_with("definitions in files do not prove"))
    );
    let none = of_at(
        &report(None, "aider", &[2000]),
        &snap(&w),
        &w.places,
        &Judge::binary_at(&w.holdcall),
    );
    assert!(
        none.limits
            .iter()
            .any(|l| l.starts_with("definitions in files do not prove"))
    );
    assert!(
        none.limits.iter().any(|l| l.contains("has no reader")),
        "{:?}",
        none.limits
    );
}

#[test]
fn a_refused_config_file_is_named_with_its_reason_and_never_its_text() {
    let w = world();
    write(
        &w.places.home.join(".cursor/mcp.json"),
        &format!("{{\"mcpServers\": {CANARY}}}"),
    );
    let c = caps_of(&w, ClientId::Cursor);
    let src = c
        .sources
        .iter()
        .find(|s| s.path.ends_with(".cursor/mcp.json") && s.scope == "user")
        .unwrap();
    assert_eq!(src.state, "refused");
    assert!(c.limits.iter().any(|l| l.contains("was not read")));
    assert!(!to_json(&c).to_string().contains(CANARY));
}

#[test]
fn a_holdcall_that_is_not_the_one_beside_holdmap_is_not_routed() {
    let w = world();
    configure(&w, ClientId::Cursor);
    let other = w.places.home.join("elsewhere/holdcall");
    write(&other, "#!/bin/sh\n");
    let r = report(Some(ClientId::Cursor), "cursor", &[2000]);
    let c = of_at(&r, &snap(&w), &w.places, &Judge::binary_at(&other));
    let routed = server(&c, "routed");
    assert_eq!(routed.routing, "not routed");
    assert!(routed.routing_detail.is_some());
}

#[test]
fn claude_code_permissions_settings_instructions_and_skills_are_reported_without_bodies() {
    let w = world();
    let h = &w.places.home;
    write(
        &h.join(".claude/settings.json"),
        &format!(
            r#"{{"permissions": {{"allow": ["Bash(export API_KEY={CANARY})"], "defaultMode": "bypassPermissions"}}}}"#
        ),
    );
    write(&h.join(".claude/CLAUDE.md"), &format!("BODY {CANARY}"));
    write(
        &h.join(".claude/skills/pdf/SKILL.md"),
        &format!("---\nname: PDF\ndescription: fills forms\n---\nBODY {CANARY}\n"),
    );
    let c = caps_of(&w, ClientId::ClaudeCode);
    assert_eq!(c.permissions.len(), 1);
    assert_eq!(c.permissions[0].effect, "allow");
    assert!(
        c.settings
            .iter()
            .any(|s| s.name == "permissions.defaultMode" && s.risky)
    );
    assert_eq!(c.instructions, vec![h.join(".claude/CLAUDE.md")]);
    assert_eq!(c.skills.len(), 1);
    assert_eq!(c.skills[0].folder, "pdf");
    assert_eq!(c.skills[0].purpose.as_deref(), Some("fills forms"));
    let out = to_json(&c).to_string();
    assert!(!out.contains(CANARY), "{out}");
    assert!(!out.contains("BODY"), "{out}");
}

#[test]
fn project_files_are_read_at_the_agents_project() {
    let w = world();
    let project = w.places.project.clone();
    write(
        &project.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"proj": {"command": "uvx", "args": ["mcp-x==1.0.0"]}}}"#,
    );
    let c = caps_of(&w, ClientId::Cursor);
    let s = server(&c, "proj");
    assert_eq!(s.scope, "project");
    assert_eq!(s.pin, "pinned");
    assert_eq!(s.package.as_deref(), Some("mcp-x"));
}

#[test]
fn a_process_runs_a_server_only_with_the_same_launcher_and_the_same_arguments() {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let args = v(&["-y", "pkg"]);
    assert!(runs(&v(&["npx", "-y", "pkg"]), "npx", &args));
    assert!(runs(
        &v(&["/usr/bin/node", "/usr/bin/npx", "-y", "pkg"]),
        "npx",
        &args
    ));
    assert!(runs(
        &v(&[
            "node",
            "/usr/lib/node_modules/npm/bin/npx-cli.js",
            "-y",
            "pkg"
        ]),
        "npx",
        &args
    ));
    assert!(runs(
        &v(&["python3.12", "/t/bin/npx", "-y", "pkg"]),
        "/abs/npx",
        &args
    ));
    assert!(!runs(&v(&["npx", "-y", "pkg", "extra"]), "npx", &args));
    assert!(!runs(&v(&["npx", "-y", "other"]), "npx", &args));
    // Only an interpreter may stand before the launcher.
    assert!(!runs(&v(&["sudo", "npx", "-y", "pkg"]), "npx", &args));
    assert!(!runs(&v(&[]), "npx", &args));
}

#[test]
fn a_zombie_or_a_process_outside_the_agent_is_never_counted_as_running_it() {
    let w = world();
    configure(&w, ClientId::Cursor);
    let mut s = snap(&w);
    if let Some(p) = s.procs.get_mut(&2002) {
        p.state = 'Z';
    }
    // 2001 runs the routed server but is not among the agent's processes.
    let r = report(Some(ClientId::Cursor), "cursor", &[2000, 2002]);
    let c = of_at(&r, &s, &w.places, &Judge::binary_at(&w.holdcall));
    assert!(server(&c, "routed").running_pids.is_empty());
    assert!(server(&c, "loose").running_pids.is_empty());
}

/// Every object `to_json` makes has exactly the properties its schema declares, each required.
fn conforms(v: &Value, schema: &Value) -> Result<(), String> {
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object().ok_or("no properties")?;
            let req: Vec<&str> = schema["required"]
                .as_array()
                .ok_or("no required")?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for k in m.keys() {
                let sub = props.get(k).ok_or(format!("{k} is not declared"))?;
                conforms(&m[k], sub)?;
            }
            for r in req {
                if !m.contains_key(r) {
                    return Err(format!("{r} is missing"));
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|i| conforms(i, &schema["items"])),
        _ => Ok(()),
    }
}

#[test]
fn the_json_matches_its_closed_schema() {
    let w = world();
    configure(&w, ClientId::ClaudeCode);
    write(
        &w.places.home.join(".claude/settings.json"),
        r#"{"permissions": {"deny": ["Read(.env)"]}}"#,
    );
    write(
        &w.places.home.join(".claude/skills/a/SKILL.md"),
        "---\n---\n",
    );
    write(&w.places.project.join("CLAUDE.md"), "x");
    let out = to_json(&caps_of(&w, ClientId::ClaudeCode));
    let schema = output_schema();
    assert_eq!(schema["additionalProperties"], false);
    conforms(&out, &schema).unwrap();
    for key in [
        "servers",
        "permissions",
        "skills",
        "instructions",
        "sources",
    ] {
        assert!(!out[key].as_array().unwrap().is_empty(), "{key}");
    }
}

/// `~/.claude.json` with one server routed through `w.holdcall` with `extra` before `serve` and
/// `env` as its env block.
fn routed_with(w: &World, extra: &[&str], env: &str) -> Capabilities {
    let mut args: Vec<String> = extra.iter().map(|a| format!("\"{a}\"")).collect();
    args.extend(["serve", "--", "npx", "-y", "pkg@1.2.3"].map(|a| format!("\"{a}\"")));
    write(
        &w.places.home.join(".claude.json"),
        &format!(
            r#"{{"mcpServers": {{"hc": {{"command": "{}", "args": [{}], "env": {{{env}}}}}}}}}"#,
            w.holdcall.display(),
            args.join(", ")
        ),
    );
    let r = report(Some(ClientId::ClaudeCode), "stand-in", &[2000]);
    of_at(&r, &snap(w), &w.places, &Judge::binary_at(&w.holdcall))
}

#[test]
fn a_relative_home_is_routed_into_that_home_and_says_it_depends_on_the_working_directory() {
    let w = world();
    let c = routed_with(&w, &["--home", "./.hc"], "");
    let s = server(&c, "hc");
    assert_eq!(s.routing, "routed");
    assert_eq!(s.holdcall_home.as_deref(), Some("./.hc"));
    assert_eq!(s.holdcall_home_state, Some("relative"));
    let detail = s.routing_detail.as_deref().unwrap();
    assert!(detail.contains("working directory"), "{detail}");
}

#[test]
fn an_absolute_other_home_from_home_arg_or_the_env_block_is_reported_as_other() {
    let w = world();
    let other = w.places.home.join("elsewhere-hc");
    let other = other.to_str().unwrap();
    for (extra, env) in [
        (vec!["--home", other], String::new()),
        (Vec::new(), format!(r#""HOLDCALL_HOME": "{other}""#)),
    ] {
        let c = routed_with(&w, &extra, &env);
        let s = server(&c, "hc");
        assert_eq!(s.routing, "routed");
        assert_eq!(s.holdcall_home.as_deref(), Some(other));
        assert_eq!(s.holdcall_home_state, Some("other"), "{extra:?} {env}");
        assert!(s.routing_detail.as_deref().unwrap().contains(other));
    }
}

#[test]
fn an_entry_that_names_no_home_reports_none_and_the_json_carries_the_home() {
    let w = world();
    let c = routed_with(&w, &[], r#""PLAIN": "x""#);
    let s = server(&c, "hc");
    assert_eq!(
        (s.holdcall_home.as_deref(), s.holdcall_home_state),
        (None, None)
    );
    assert_eq!(s.routing_detail, None);
    let c = routed_with(&w, &["--home", "./.hc"], "");
    let v = to_json(&c);
    assert_eq!(v["servers"][0]["holdcall_home"], "./.hc");
    assert_eq!(v["servers"][0]["holdcall_home_state"], "relative");
    conforms(&v, &output_schema()).unwrap();
}

#[test]
fn with_no_holdcall_beside_holdmap_a_holdcall_entry_says_nothing_counts_as_routed() {
    let w = world();
    write(
        &w.places.home.join(".claude.json"),
        &format!(
            r#"{{"mcpServers": {{"hc": {{"command": "{}", "args": ["serve", "--", "npx", "-y", "pkg@1.2.3"]}}}}}}"#,
            w.holdcall.display()
        ),
    );
    let r = report(Some(ClientId::ClaudeCode), "stand-in", &[2000]);
    let nobody = Judge::binary_at(&w.places.home.join("no/holdcall"));
    let c = of_at(&r, &snap(&w), &w.places, &nobody);
    let s = server(&c, "hc");
    assert_eq!(s.routing, "not routed");
    let detail = s.routing_detail.as_deref().unwrap();
    assert!(
        detail.contains("no holdcall is installed beside holdmap"),
        "{detail}"
    );
    assert!(NO_HOLDCALL_LIMIT.contains("PATH"));
}

/// Package specs that hold a credential in a URL's userinfo, as `npx`, `uvx` and `uvx --from`
/// take them: none may become a package.
fn url_specs() -> Vec<(&'static str, Vec<String>)> {
    let a = |v: &[&str]| v.iter().map(|s| s.replace("SECRET", CANARY)).collect();
    vec![
        ("uvx", a(&["git+https://user:SECRET@github.com/o/r"])),
        (
            "npx",
            a(&["-y", "git+https://oauth2:SECRET@gitlab.com/o/r.git"]),
        ),
        ("npx", a(&["-y", "https://SECRET@registry.example/pkg.tgz"])),
        (
            "uvx",
            a(&["--from", "git+https://u:SECRET@github.com/o/r", "tool"]),
        ),
        (
            "uvx",
            a(&["--from=git+https://u:SECRET@github.com/o/r", "tool"]),
        ),
        (
            "docker",
            a(&["run", "-i", "user:SECRET@registry.example/img"]),
        ),
    ]
}

#[test]
fn a_package_spec_that_is_a_url_or_path_gives_no_package_and_no_part_of_it() {
    for (cmd, args) in url_specs() {
        assert_eq!(package_of(cmd, &args), None, "{cmd} {args:?}");
    }
    let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (cmd, args, want) in [
        ("npx", a(&["-y", "@scope/pkg@1.2.3"]), "@scope/pkg"),
        ("npx", a(&["-y", "some-mcp@latest"]), "some-mcp"),
        ("uvx", a(&["mcp-server-git==1.0.0"]), "mcp-server-git"),
        ("uvx", a(&["--from", "mcp-x[cli]>=1", "x"]), "mcp-x"),
        (
            "docker",
            a(&["run", "-i", "ghcr.io/o/img:1.2"]),
            "ghcr.io/o/img",
        ),
        ("docker", a(&["run", "host:5000/img"]), "host:5000/img"),
        (
            "npx",
            a(&["-y", "@scope/x@https://h.example/p.tgz"]),
            "@scope/x",
        ),
        ("npx", a(&["-y", "./local/pkg"]), ""),
        ("npx", a(&["-y", "github:o/r"]), ""),
    ] {
        let want = (!want.is_empty()).then(|| want.to_string());
        assert_eq!(package_of(cmd, &args), want, "{cmd} {args:?}");
    }
}

#[test]
fn a_credential_in_a_package_url_appears_nowhere_in_capabilities() {
    let w = world();
    let servers: serde_json::Map<String, Value> = url_specs()
        .into_iter()
        .enumerate()
        .map(|(i, (cmd, args))| {
            (
                format!("s{i}"),
                serde_json::json!({"command": cmd, "args": args}),
            )
        })
        .collect();
    write(
        &w.places.home.join(".claude.json"),
        &serde_json::json!({ "mcpServers": servers }).to_string(),
    );
    let c = caps_of(&w, ClientId::ClaudeCode);
    assert_eq!(c.servers.len(), url_specs().len(), "{:?}", c.sources);
    assert!(
        c.servers.iter().all(|s| s.package.is_none()),
        "{:?}",
        c.servers
    );
    let out = to_json(&c).to_string();
    assert!(!out.contains("CANARY"), "{out}");
}

#[test]
fn a_remote_host_is_never_part_of_a_userinfo() {
    assert_eq!(url_host("https://user:pa/ss@host.example/x"), None);
    assert_eq!(
        url_host("https://u:p@mcp.example.com:8443/x").as_deref(),
        Some("mcp.example.com:8443")
    );
    assert_eq!(
        url_host("https://server.smithery.ai/@o/n/mcp").as_deref(),
        Some("server.smithery.ai")
    );
}

#[test]
fn a_rules_folder_that_cannot_be_listed_is_said_in_limits() {
    let w = world();
    write(&w.places.project.join(".cursor/rules"), "BODY");
    let c = caps_of(&w, ClientId::Cursor);
    assert!(
        c.limits
            .iter()
            .any(|l| l.starts_with("the rules folder") && l.contains("cannot list it")),
        "{:?}",
        c.limits
    );
}
