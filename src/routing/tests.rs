//! Unit tests of Holdcall's judgement and rewrite: which entries are routed, their connectors
//! and homes, and the span edits `init` plans.

use std::path::{Path, PathBuf};

use super::*;
use crate::clients::json::Flavour;
use crate::clients::routed::OtherHoldcall;
use crate::clients::tests::{codex, cursor, spec};
use crate::clients::{Format, Layout, Loaded};

/// The holdcall the unit tests' rewrites point at, and the judge that takes it (and nothing
/// else) for this binary.
const HC: &str = "/opt/hc/holdcall";

fn hc() -> Judge {
    Judge::Spelled(HC.into())
}

/// The user's HOME in the unit tests, and the home `init` runs with: the default one under it.
const USER: &str = "/u";
const HOME_DIR: &str = "/u/.local/share/holdcall";

/// Plans and returns the rewritten text (None: nothing to change).
fn rewrite(spec: &FileSpec, text: &str) -> Option<String> {
    rewrite_for(spec, text, HOME_DIR)
}

/// The same, for an `init` that runs with the home `home`.
fn rewrite_for(spec: &FileSpec, text: &str, home: &str) -> Option<String> {
    let entries = entries_judged(spec, text, &hc()).unwrap();
    let loaded = Loaded {
        text: text.to_string(),
        entries,
    };
    let target = Target {
        home,
        user_home: Path::new(USER),
    };
    plan(spec, &loaded, HC, target).unwrap().map(|p| p.after)
}

#[test]
fn a_missing_args_list_is_added_on_its_own_line_with_the_commands_indentation() {
    let text = "{\n  \"mcpServers\": {\n    \"x\": {\n      \"command\": \"srv\",\n      \"env\": {}\n    }\n  }\n}\n";
    let after = rewrite(&cursor(), text).unwrap();
    assert!(
        after.contains("      \"command\": \"/opt/hc/holdcall\",\n      \"args\": [\"--home\", \"/u/.local/share/holdcall\", \"serve\", \"--connector\", \"x\", \"--client\", \"cursor\", \"--\", \"srv\"],\n      \"env\": {}"),
        "{after}"
    );
}

#[test]
fn an_empty_args_list_gets_the_serve_prefix_and_the_command() {
    let text = r#"{"mcpServers":{"x":{"command":"srv","args":[]}}}"#;
    let after = rewrite(&cursor(), text).unwrap();
    assert!(
        after
            .contains(r#""args":["--home", "/u/.local/share/holdcall", "serve", "--connector", "x", "--client", "cursor", "--", "srv"]"#),
        "{after}"
    );
}

#[test]
fn the_original_command_keeps_its_own_escapes() {
    let text = r#"{"mcpServers":{"x":{"command":"/opt/caf\u00e9/srv","args":["a"]}}}"#;
    let after = rewrite(&cursor(), text).unwrap();
    assert!(
        after.contains(r#""--", "/opt/caf\u00e9/srv", "a"]"#),
        "{after}"
    );
}

#[test]
fn a_routed_or_remote_entry_changes_nothing() {
    let text = r#"{"mcpServers":{"r":{"command":"/opt/hc/holdcall","args":["serve","--connector","r","--","a"]},"h":{"type":"http","url":"https://e/mcp"}}}"#;
    assert!(rewrite(&cursor(), text).is_none());
    let entries = entries_judged(&cursor(), text, &hc()).unwrap();
    assert_eq!(entries[0].state, Routing::Routed);
    assert_eq!(entries[0].connector, "r");
    assert_eq!(entries[0].upstream(), Some(("a".to_string(), vec![])));
    assert_eq!(entries[1].state, Routing::Remote);
}

#[test]
fn entries_holdcall_cannot_read_are_left_alone() {
    let text = r#"{"mcpServers":{"a":5,"b":{"args":[]},"c":{"command":""},"d":{"command":"x","args":"y"},"e":{"command":"x","args":[1]}}}"#;
    let entries = entries_of(&cursor(), text).unwrap();
    assert!(
        entries
            .iter()
            .all(|e| matches!(e.state, Routing::Unrecognized(_))),
        "{entries:?}"
    );
    assert!(rewrite(&cursor(), text).is_none());
}

#[test]
fn claude_json_reads_only_the_mcp_keys_and_each_project() {
    let s = spec(
        ClientId::ClaudeCode,
        Format::Json(Flavour::STRICT),
        Layout::ClaudeJson,
    );
    let text = r#"{"oauthAccount":{"x":1},"projects":{"/p":{"mcpServers":{"a":{"command":"x"}}},"/q":{"history":[]},"/r":5},"mcpServers":{"b":{"command":"y"}}}"#;
    let entries = entries_of(&s, text).unwrap();
    let names: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.scope.as_str(), e.name.as_str()))
        .collect();
    assert_eq!(names, vec![("user", "b"), ("local /p", "a")]);
    let after = rewrite(&s, text).unwrap();
    assert!(after.starts_with(r#"{"oauthAccount":{"x":1},"projects":{"/p":{"mcpServers":{"a":{"command":"/opt/hc/holdcall""#), "{after}");
}

#[test]
fn invalid_connector_names_are_sanitised_and_kept_unique() {
    assert_eq!(connector_name("fine.name_1"), "fine.name_1");
    assert_eq!(connector_name("my server"), "my-server");
    assert_eq!(connector_name("  --x--  "), "x");
    assert_eq!(connector_name("日本語-notes"), "notes");
    assert!(connector_name("日本語").starts_with("server-"));
    let long = "a ".repeat(200);
    crate::policy::validate_scope_name("connector", &connector_name(&long)).unwrap();
    let text = r#"{"mcpServers":{"my-server":{"command":"a"},"my server":{"command":"b"}}}"#;
    let after = rewrite(&cursor(), text).unwrap();
    let entries = entries_of(&cursor(), &after).unwrap();
    assert_eq!(entries[0].connector, "my-server");
    assert!(
        entries[1].connector.starts_with("my-server-"),
        "{:?}",
        entries[1]
    );
}

#[test]
fn codex_tables_keep_comments_and_gain_args_where_they_had_none() {
    let text = "# top\n[mcp_servers.a] # c\ncommand = 'npx' # runner\nargs = [\n  \"-y\", # yes\n  \"pkg\",\n]\n\n[mcp_servers.b]\ncommand = \"/bin/srv\"\nenv = { K = \"v\" }\n\n[mcp_servers]\nc = { command = \"uvx\" }\n\n[other]\nd.command = \"not a server\"\n";
    let after = rewrite(&codex(), text).unwrap();
    assert!(after.starts_with("# top\n[mcp_servers.a] # c\ncommand = \"/opt/hc/holdcall\" # runner\nargs = [\n  \"--home\",\n  \"/u/.local/share/holdcall\",\n  \"serve\",\n"), "{after}");
    assert!(after.contains("  'npx',\n  \"-y\", # yes\n"), "{after}");
    assert!(after.contains("command = \"/opt/hc/holdcall\"\nargs = [\"--home\", \"/u/.local/share/holdcall\", \"serve\", \"--connector\", \"b\", \"--client\", \"codex\", \"--\", \"/bin/srv\"]\nenv = { K = \"v\" }"), "{after}");
    assert!(after.contains("c = { command = \"/opt/hc/holdcall\", args = [\"--home\", \"/u/.local/share/holdcall\", \"serve\", \"--connector\", \"c\", \"--client\", \"codex\", \"--\", \"uvx\"] }"), "{after}");
    assert!(
        after.ends_with("[other]\nd.command = \"not a server\"\n"),
        "{after}"
    );
}

#[test]
fn codex_dotted_keys_get_a_dotted_args_key() {
    let text = "[mcp_servers]\nx.command = \"srv\"\nx.env = { A = \"1\" }\n";
    let after = rewrite(&codex(), text).unwrap();
    assert!(
        after.contains("x.command = \"/opt/hc/holdcall\"\nx.args = [\"--home\", \"/u/.local/share/holdcall\", \"serve\","),
        "{after}"
    );
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn a_codex_layout_holdcall_cannot_extend_is_left_whole() {
    // A quoted key and no args: holdcall cannot tell where a new key would go, so it changes
    // neither the command nor anything else, and says so in the dry run.
    let text = "[mcp_servers.q]\n\"command\" = \"srv\"\n";
    assert!(rewrite(&codex(), text).is_none());
}

/// A judge whose "running binary" is `file`, with `path` as PATH.
fn judge_for(file: &Path, path: Option<&Path>) -> Judge {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(file).unwrap();
    Judge::Running {
        this: Some((m.dev(), m.ino())),
        path: path.map(|p| p.as_os_str().to_owned()),
    }
}

fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn state_of(command: &str, judge: &Judge) -> Routing {
    let text = serde_json::json!({"mcpServers": {"x": {
        "command": command,
        "args": ["serve", "--connector", "x", "--", "npx", "server-filesystem", "/"]
    }}})
    .to_string();
    entries_judged(&cursor(), &text, judge).unwrap()[0]
        .state
        .clone()
}

#[test]
fn a_holdcall_serve_entry_is_routed_only_when_its_command_is_this_very_file() {
    let dir = tempfile::tempdir().unwrap();
    let me = dir.path().join("real/holdcall");
    executable(&me);
    let link_dir = dir.path().join("links");
    std::fs::create_dir_all(&link_dir).unwrap();
    std::os::unix::fs::symlink(&me, link_dir.join("holdcall")).unwrap();
    let evil = dir.path().join("evil/holdcall");
    executable(&evil);
    let judge = judge_for(&me, Some(&link_dir));
    assert_eq!(state_of(me.to_str().unwrap(), &judge), Routing::Routed);
    // A symlink to this file is this file; a bare name is looked up on the judge's PATH.
    let link = link_dir.join("holdcall");
    assert_eq!(state_of(link.to_str().unwrap(), &judge), Routing::Routed);
    assert_eq!(state_of("holdcall", &judge), Routing::Routed);
    // Another file named holdcall (even with the same bytes) is not.
    match state_of(evil.to_str().unwrap(), &judge) {
        Routing::OtherHoldcall(o) => {
            assert_eq!(o.resolved.as_deref(), Some(evil.as_path()));
            assert!(!o.missing());
            assert!(
                o.reason()
                    .contains(&format!("another holdcall at {}", evil.display())),
                "{}",
                o.reason()
            );
        }
        other => panic!("{other:?}"),
    }
    let evil_path = judge_for(&me, Some(evil.parent().unwrap()));
    assert!(matches!(
        state_of("holdcall", &evil_path),
        Routing::OtherHoldcall(OtherHoldcall {
            resolved: Some(_),
            ..
        })
    ));
    // Not on PATH, gone, or relative: not routed either.
    let no_path = judge_for(&me, None);
    match state_of("holdcall", &no_path) {
        Routing::OtherHoldcall(o) => {
            assert!(
                o.reason().contains("which PATH does not find"),
                "{}",
                o.reason()
            );
            assert!(!o.missing());
        }
        other => panic!("{other:?}"),
    }
    match state_of("/nonexistent/bin/holdcall", &judge) {
        Routing::OtherHoldcall(o) => assert!(o.missing(), "{o:?}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        state_of("./holdcall", &judge),
        Routing::OtherHoldcall(OtherHoldcall { resolved: None, .. })
    ));
    // No running binary known: nothing is routed.
    let blind = Judge::Running {
        this: None,
        path: None,
    };
    assert!(matches!(
        state_of(me.to_str().unwrap(), &blind),
        Routing::OtherHoldcall(_)
    ));
}

#[test]
fn an_entry_routed_through_another_holdcall_gets_this_binary_and_keeps_its_args_once() {
    let text = "{\"mcpServers\": {\n  \"fs\": {\n    \"command\": \"/tmp/x/evil/holdcall\",\n    \"args\": [\"serve\", \"--connector\", \"fs\", \"--\", \"npx\", \"server-filesystem\", \"/\"]\n  },\n  \"plain\": {\"command\": \"uvx\"}\n}}";
    let after = rewrite(&cursor(), text).unwrap();
    assert_eq!(
        after,
        text.replace("/tmp/x/evil/holdcall", HC).replace(
            "{\"command\": \"uvx\"}",
            "{\"command\": \"/opt/hc/holdcall\", \"args\": [\"--home\", \"/u/.local/share/holdcall\", \"serve\", \"--connector\", \"plain\", \"--client\", \"cursor\", \"--\", \"uvx\"]}"
        )
    );
    let entries = entries_judged(&cursor(), &after, &hc()).unwrap();
    assert_eq!(entries[0].state, Routing::Routed);
    assert_eq!(entries[0].connector, "fs");
    assert_eq!(
        entries[0].upstream(),
        Some((
            "npx".to_string(),
            vec!["server-filesystem".to_string(), "/".to_string()]
        ))
    );
    // Idempotent: the rewritten file needs nothing more.
    assert!(rewrite(&cursor(), &after).is_none());
    // The same in Codex's TOML.
    let toml = "[mcp_servers.fs]\ncommand = \"holdcall\"\nargs = [\"serve\", \"--connector\", \"fs\", \"--\", \"npx\", \"x\"]\n";
    let after = rewrite(&codex(), toml).unwrap();
    assert_eq!(after, toml.replace("\"holdcall\"", "\"/opt/hc/holdcall\""));
    assert!(rewrite(&codex(), &after).is_none());
}

#[test]
fn a_routed_entry_without_home_whose_relay_would_land_elsewhere_gets_home_once() {
    let text = "{\"mcpServers\": {\n  \"fs\": {\n    \"command\": \"/opt/hc/holdcall\",\n    \"args\": [\"serve\", \"--connector\", \"fs\", \"--\", \"npx\", \"x\"]\n  }\n}}";
    // Under the default home it lands where init runs: nothing to change.
    assert!(rewrite(&cursor(), text).is_none());
    // A shell that uses another home (HOLDCALL_HOME or XDG_DATA_HOME): --home goes in front.
    let after = rewrite_for(&cursor(), text, "/h/custom").unwrap();
    assert_eq!(
        after,
        text.replace("[\"serve\"", "[\"--home\", \"/h/custom\", \"serve\"")
    );
    let entries = entries_judged(&cursor(), &after, &hc()).unwrap();
    assert_eq!(entries[0].state, Routing::Routed);
    assert_eq!(entries[0].connector, "fs");
    assert_eq!(entries[0].home_arg.as_deref(), Some("/h/custom"));
    assert_eq!(
        entries[0].relay_home(Path::new(USER)),
        Some(PathBuf::from("/h/custom"))
    );
    // Idempotent, and an entry's own --home is never rewritten.
    assert!(rewrite_for(&cursor(), &after, "/h/custom").is_none());
    assert!(rewrite_for(&cursor(), &after, "/h/other").is_none());
    // The same in Codex's TOML, one element per line.
    let toml = "[mcp_servers.fs]\ncommand = \"/opt/hc/holdcall\"\nargs = [\n  \"serve\",\n  \"--connector\",\n  \"fs\",\n  \"--\",\n  \"x\",\n]\n";
    let after = rewrite_for(&codex(), toml, "/h/custom").unwrap();
    assert!(
        after.contains("args = [\n  \"--home\",\n  \"/h/custom\",\n  \"serve\","),
        "{after}"
    );
    assert!(rewrite_for(&codex(), &after, "/h/custom").is_none());
}

#[test]
fn the_home_a_relay_would_use_follows_its_home_flag_then_its_own_env_then_home() {
    let user = Path::new(USER);
    let routed = |args: &str, env: &str| {
        let text = format!(
            r#"{{"mcpServers":{{"r":{{"command":"/opt/hc/holdcall","args":{args},"env":{env}}}}}}}"#
        );
        let e = entries_judged(&cursor(), &text, &hc()).unwrap().remove(0);
        assert_eq!(e.state, Routing::Routed, "{text}");
        e.relay_home(user).unwrap()
    };
    let plain = r#"["serve","--connector","r","--","a"]"#;
    assert_eq!(routed(plain, "{}"), PathBuf::from(HOME_DIR));
    assert_eq!(
        routed(plain, r#"{"XDG_DATA_HOME":"/d"}"#),
        PathBuf::from("/d/holdcall")
    );
    assert_eq!(
        routed(plain, r#"{"XDG_DATA_HOME":"/d","HOLDCALL_HOME":"/hc"}"#),
        PathBuf::from("/hc")
    );
    assert_eq!(
        routed(
            r#"["--home=/flag","serve","--connector","r","--","a"]"#,
            r#"{"HOLDCALL_HOME":"/hc"}"#
        ),
        PathBuf::from("/flag")
    );
    assert_eq!(
        routed(
            r#"["serve","--home","/after","--connector","r","--","a"]"#,
            "{}"
        ),
        PathBuf::from("/after")
    );
    // Only --home may come before `serve`: anything else is not a serve line.
    let text = r#"{"mcpServers":{"r":{"command":"/opt/hc/holdcall","args":["--x","serve","--connector","r","--","a"]}}}"#;
    let e = entries_judged(&cursor(), text, &hc()).unwrap().remove(0);
    assert_eq!(e.state, Routing::NotRouted);
}

#[test]
fn a_connector_name_is_derived_from_the_package_module_script_or_binary_a_command_runs() {
    let d = |cmd: &str, args: &[&str]| derived_connector(cmd, &s(args));
    assert_eq!(
        d("npx", &["-y", "@scope/server-foo@1.2"]),
        (
            "server-foo".into(),
            "the npm package @scope/server-foo@1.2".into()
        )
    );
    assert_eq!(d("bunx", &["mcp-thing"]).0, "mcp-thing");
    assert_eq!(
        d("uvx", &["mcp-server-git", "--repository", "/r"]),
        (
            "mcp-server-git".into(),
            "the Python package mcp-server-git".into()
        )
    );
    assert_eq!(d("uvx", &["--from", "pkg[cli]==1.2", "pkg-cmd"]).0, "pkg");
    assert_eq!(d("uv", &["tool", "run", "srv@1.0.0"]).0, "srv");
    assert_eq!(
        d("node", &["/x/my-srv/dist/index.js"]),
        ("my-srv".into(), "the script /x/my-srv/dist/index.js".into())
    );
    assert_eq!(d("node", &["/x/y/weather.mjs"]).0, "weather");
    assert_eq!(
        d("python3", &["-m", "mcp_server_time"]),
        (
            "mcp_server_time".into(),
            "the Python module mcp_server_time".into()
        )
    );
    assert_eq!(
        d(
            "docker",
            &["run", "-i", "--rm", "ghcr.io/org/gh-mcp:1@sha256:ab"]
        )
        .0,
        "gh-mcp"
    );
    assert_eq!(
        d("/usr/local/bin/notes-server", &["--flag"]),
        ("notes-server".into(), "the command notes-server".into())
    );
    // Always a valid connector name, even from a name that is not one.
    let odd = d("/opt/日本語 srv", &[]).0;
    crate::policy::validate_scope_name("connector", &odd).unwrap();
    // An npx whose package cannot be told falls back to the command's name.
    assert_eq!(d("npx", &["--weird"]).0, "npx");
}

#[test]
fn a_routed_entry_without_connector_runs_under_the_name_its_relay_derives() {
    let text = r#"{"mcpServers":{"r":{"command":"/opt/hc/holdcall","args":["serve","--","npx","-y","@scope/server-foo@1.2"]}}}"#;
    let e = entries_judged(&cursor(), text, &hc()).unwrap().remove(0);
    assert_eq!(e.state, Routing::Routed);
    assert_eq!(e.connector, "server-foo");
    assert_eq!(
        e.connector_from.as_deref(),
        Some("the npm package @scope/server-foo@1.2")
    );
}
