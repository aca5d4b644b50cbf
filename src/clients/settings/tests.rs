//! Unit tests of the settings readers: each client's keys from real files in a temp HOME, every
//! refusal (too big, not a regular file, not parseable, wrong shape) and the sanitiser.

use super::*;

const CANARY: &str = "CANARYsecret0123456789abcdefXYZ";

struct Home {
    _t: tempfile::TempDir,
    places: Places,
}

fn home() -> Home {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("home");
    let p = t.path().join("project");
    std::fs::create_dir_all(&h).unwrap();
    std::fs::create_dir_all(&p).unwrap();
    let places = Places {
        home: h.clone(),
        config_dir: h.join(".config"),
        codex_home: h.join(".codex"),
        project: p,
    };
    Home { _t: t, places }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn said(h: &Home, client: ClientId, path: &Path) -> Said {
    let spec = files(&h.places, client)
        .into_iter()
        .find(|s| s.path == path)
        .unwrap();
    match read(&spec) {
        SettingsState::Read(s) => s,
        other => panic!("{other:?}"),
    }
}

fn value<'a>(s: &'a Said, name: &str) -> &'a Setting {
    s.settings.iter().find(|x| x.name == name).unwrap()
}

#[test]
fn claude_code_rules_and_risky_settings_are_read_from_user_project_and_local_files() {
    let h = home();
    let user = h.places.home.join(".claude/settings.json");
    write(
        &user,
        r#"{"permissions": {"allow": ["Bash(npm test:*)"], "ask": ["WebFetch"], "deny": ["Read(./.env)"],
            "defaultMode": "bypassPermissions"},
            "enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["x"],
            "env": {"TOKEN": "CANARYsecret0123456789abcdefXYZ"}}"#,
    );
    let local = h.places.project.join(".claude/settings.local.json");
    write(&local, r#"{"permissions": {"defaultMode": "acceptEdits"}}"#);
    let s = said(&h, ClientId::ClaudeCode, &user);
    let got: Vec<(&str, &str)> = s
        .rules
        .iter()
        .map(|r| (r.effect, r.rule.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("allow", "Bash(npm test:*)"),
            ("ask", "WebFetch"),
            ("deny", "Read(./.env)")
        ]
    );
    assert!(value(&s, "permissions.defaultMode").risky);
    assert!(value(&s, "enableAllProjectMcpServers").risky);
    assert_eq!(value(&s, "disabledMcpjsonServers").value, "x");
    assert!(!format!("{s:?}").contains(CANARY));
    let l = said(&h, ClientId::ClaudeCode, &local);
    assert!(!value(&l, "permissions.defaultMode").risky);
}

#[test]
fn codex_approval_never_and_full_access_are_risky_at_top_level_and_in_profiles() {
    let h = home();
    let f = h.places.codex_home.join("config.toml");
    write(
        &f,
        "approval_policy = \"never\"\nsandbox_mode = \"workspace-write\"\n\
         [profiles.yolo]\nsandbox_mode = \"danger-full-access\"\n\
         [mcp_servers.x]\ncommand = \"npx\"\nenv = { K = \"CANARYsecret0123456789abcdefXYZ\" }\n",
    );
    let s = said(&h, ClientId::Codex, &f);
    assert!(value(&s, "approval_policy").risky);
    assert!(!value(&s, "sandbox_mode").risky);
    assert!(value(&s, "profiles.yolo.sandbox_mode").risky);
    assert!(!format!("{s:?}").contains(CANARY));
}

#[test]
fn gemini_auto_accept_trust_and_tool_lists_are_read_in_both_settings_formats() {
    let h = home();
    let f = h.places.home.join(".gemini/settings.json");
    write(
        &f,
        r#"{ // comments are Gemini's flavour
            "tools": {"autoAccept": true, "sandbox": "docker", "allowed": ["run_shell_command(git status)"]},
            "excludeTools": ["web_fetch"],
            "mcpServers": {"gh": {"command": "npx", "trust": true, "env": {"T": "CANARYsecret0123456789abcdefXYZ"}}}}"#,
    );
    let s = said(&h, ClientId::GeminiCli, &f);
    assert!(value(&s, "tools.autoAccept").risky);
    assert_eq!(value(&s, "tools.sandbox").value, "docker");
    assert!(value(&s, "mcpServers.gh.trust").risky);
    assert!(s.rules.contains(&Rule {
        effect: "deny",
        rule: "web_fetch".into()
    }));
    assert!(!format!("{s:?}").contains(CANARY));
}

#[test]
fn cursor_cli_and_permissions_json_rules_are_read() {
    let h = home();
    let cli = h.places.home.join(".cursor/cli-config.json");
    write(
        &cli,
        r#"{"permissions": {"allow": ["Shell(ls)"], "deny": ["Write(**/.env)"]}}"#,
    );
    let perms = h.places.project.join(".cursor/permissions.json");
    write(
        &perms,
        "{\"terminalAllowlist\": [\"npm test\"], // jsonc\n}",
    );
    assert_eq!(said(&h, ClientId::Cursor, &cli).rules.len(), 2);
    assert_eq!(
        said(&h, ClientId::Cursor, &perms).rules,
        [Rule {
            effect: "allow",
            rule: "npm test".into()
        }]
    );
}

#[test]
fn vscode_global_auto_approve_is_risky_and_terminal_rules_are_listed() {
    let h = home();
    let f = h.places.config_dir.join("Code/User/settings.json");
    write(
        &f,
        "{\n // JSONC\n \"chat.tools.autoApprove\": true,\n \"chat.tools.terminal.autoApprove\": {\"npm test\": true, \"rm\": false},\n}",
    );
    let s = said(&h, ClientId::VsCode, &f);
    assert!(value(&s, "chat.tools.autoApprove").risky);
    assert_eq!(s.rules.len(), 2);
}

#[test]
fn windsurf_and_claude_desktop_have_no_settings_files_holdmap_reads() {
    let h = home();
    assert!(files(&h.places, ClientId::Windsurf).is_empty());
    assert!(files(&h.places, ClientId::ClaudeDesktop).is_empty());
}

#[test]
fn a_settings_file_past_the_size_bound_is_refused_without_its_text() {
    let h = home();
    let f = h.places.home.join(".claude/settings.json");
    let big = format!(
        "{{\"permissions\": {{\"allow\": [\"{CANARY}{}\"]}}}}",
        "x".repeat(limits::CLIENT_SETTINGS_BYTES_MAX)
    );
    write(&f, &big);
    let spec = files(&h.places, ClientId::ClaudeCode)
        .into_iter()
        .find(|s| s.path == f)
        .unwrap();
    let SettingsState::Refused(why) = read(&spec) else {
        panic!("read a file past the bound")
    };
    assert!(why.contains("at most"), "{why}");
    assert!(!why.contains(CANARY));
}

#[test]
fn a_settings_path_that_is_not_a_regular_file_is_refused() {
    let h = home();
    let f = h.places.home.join(".claude/settings.json");
    std::fs::create_dir_all(&f).unwrap();
    let spec = files(&h.places, ClientId::ClaudeCode)
        .into_iter()
        .find(|s| s.path == f)
        .unwrap();
    assert_eq!(
        read(&spec),
        SettingsState::Refused("it is not a regular file".into())
    );
}

#[test]
fn unparseable_and_misshapen_settings_are_refused_without_quoting_them() {
    let h = home();
    let f = h.places.home.join(".claude/settings.json");
    let spec = files(&h.places, ClientId::ClaudeCode)
        .into_iter()
        .find(|s| s.path == f)
        .unwrap();
    for text in [
        format!("{{\"permissions\": {CANARY}}}"),
        // Claude Code's settings are strict JSON: a comment is an error there.
        format!("// {CANARY}\n{{}}"),
        format!("[\"{CANARY}\"]"),
    ] {
        write(&f, &text);
        let SettingsState::Refused(why) = read(&spec) else {
            panic!("read {text}")
        };
        assert!(!why.contains(CANARY), "{why}");
    }
    let codex = h.places.codex_home.join("config.toml");
    write(&codex, &format!("approval_policy = {CANARY}\n"));
    let spec = files(&h.places, ClientId::Codex).remove(0);
    let SettingsState::Refused(why) = read(&spec) else {
        panic!("read bad TOML")
    };
    assert_eq!(why, "not valid TOML (line 1)");
}

#[test]
fn an_absent_settings_file_is_missing_not_refused() {
    let h = home();
    let spec = files(&h.places, ClientId::Codex).remove(0);
    assert_eq!(read(&spec), SettingsState::Missing);
}

#[test]
fn rules_past_the_bound_are_counted_not_kept() {
    let h = home();
    let f = h.places.home.join(".claude/settings.json");
    let many: Vec<String> = (0..limits::CLIENT_RULES_PER_FILE_MAX + 5)
        .map(|i| format!("\"Bash(r{i})\""))
        .collect();
    write(
        &f,
        &format!("{{\"permissions\": {{\"allow\": [{}]}}}}", many.join(",")),
    );
    let s = said(&h, ClientId::ClaudeCode, &f);
    assert_eq!(s.rules.len(), limits::CLIENT_RULES_PER_FILE_MAX);
    assert_eq!(s.rules_omitted, 5);
}

#[test]
fn clean_masks_credentials_cuts_urls_strips_controls_and_caps_length() {
    let token = "ghp_0123456789abcdefABCDEF0123456789";
    let header = clean(
        &format!("Bash(curl -H 'Authorization: Bearer {token}')"),
        200,
    );
    assert!(!header.contains(token), "{header}");
    assert!(!clean(&format!("Bash(export API_KEY={CANARY})"), 200).contains(CANARY));
    let url = clean(
        &format!("WebFetch(https://u:{CANARY}@example.com/{CANARY}?k={CANARY})"),
        200,
    );
    assert!(!url.contains(CANARY), "{url}");
    assert!(url.contains("example.com"), "{url}");
    let c = clean("a\u{1b}[2Jb\u{202e}c\nd", 200);
    assert!(!c.contains('\u{1b}') && !c.contains('\u{202e}') && !c.contains('\n'));
    let long = clean(&format!("{}{CANARY}", "y".repeat(500)), 10);
    assert!(!long.contains('y') && !long.contains(CANARY), "{long}");
    assert!(long.contains("531 characters"), "{long}");
}

#[test]
fn a_value_after_a_secret_name_a_password_flag_or_a_user_flag_is_masked() {
    let cases = [
        format!(r#"Bash(curl -H "X-Api-Key: {CANARY}")"#),
        format!("Bash(curl -H Authorization:Bearer {CANARY})"),
        format!("Bash(curl -H 'Authorization: Bearer {CANARY}')"),
        format!("Bash(mysql -p{CANARY} db)"),
        format!("Bash(mysql -p {CANARY} db)"),
        format!("Bash(curl -u admin:{CANARY} https://h)"),
        format!("Bash(curl -uadmin:{CANARY} https://h)"),
        format!("Bash(curl --user admin:{CANARY})"),
        format!("Bash(curl --user=admin:{CANARY})"),
        format!("Bash(aws configure set aws_secret_access_key {CANARY})"),
        format!("Bash(psql password {CANARY})"),
        format!("Bash(gh auth login --with-token Token {CANARY})"),
    ];
    for case in cases {
        let short = case.replace(CANARY, "hunter2");
        for text in [&case, &short] {
            let out = clean(text, 200);
            assert!(
                !out.contains(CANARY) && !out.contains("hunter2"),
                "{text} → {out}"
            );
            assert!(out.contains(MASK), "{text} → {out}");
        }
    }
    let bare = clean(&format!("user:{CANARY}@registry.example/img by tag"), 200);
    assert_eq!(bare, format!("{MASK}@registry.example/img by tag"));
    assert_eq!(
        clean("host:5000/img@sha256:ab and @scope/x@npm:y", 200),
        "host:5000/img@sha256:ab and @scope/x@npm:y"
    );
    // What is not a credential stays readable.
    assert_eq!(clean("Bash(npm test:*)", 200), "Bash(npm test:*)");
    assert_eq!(
        clean(r#"Bash(curl -H "X-Api-Key: V")"#, 200),
        format!(r#"Bash(curl -H "X-Api-Key: {MASK}"#)
    );
}

#[test]
fn a_url_shows_only_a_plain_host_never_part_of_a_userinfo() {
    for (url, host) in [
        (
            "https://mcp.example.com:8443/p?q=1",
            Some("mcp.example.com:8443"),
        ),
        ("https://u:pw@mcp.example.com/x", Some("mcp.example.com")),
        (
            "https://server.smithery.ai/@owner/name/mcp",
            Some("server.smithery.ai"),
        ),
        ("http://localhost:3000/@x", Some("localhost:3000")),
        ("http://[::1]:8080/mcp", Some("[::1]:8080")),
        ("https://user:pa/ss@host.example/x", None),
        ("https://tok/en@host.example/x", None),
        ("https://user:pa?ss@host.example", None),
        ("https://h:notaport/x", None),
        ("https://", None),
        ("no scheme", None),
    ] {
        assert_eq!(url_host(url).as_deref(), host, "{url}");
    }
    let cut = clean("WebFetch(https://user:pa/ss@host.example/x)", 200);
    assert_eq!(cut, "WebFetch(https://host.example/…");
}

#[test]
fn a_fifo_named_like_a_settings_file_is_refused_at_once_not_waited_on() {
    let h = home();
    let path = h.places.home.join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let spec = files(&h.places, ClientId::ClaudeCode)
        .into_iter()
        .find(|s| s.path == path)
        .unwrap();
    assert_eq!(
        read(&spec),
        SettingsState::Refused("it is not a regular file".into())
    );
}
