//! Unit tests of the shared readers: the JSON reader, the layouts' shape refusals, redaction,
//! pinning.

use super::inspect::{Pin, looks_like_token, pin, redact_args, redact_url, secret_key};
use super::json::{self, Flavour};
use super::*;

const JSONC: Flavour = Flavour {
    comments: true,
    trailing_commas: true,
};

/// A file spec at a fixed path, for the readers' tests and `routing`'s.
pub(crate) fn spec(client: ClientId, format: Format, layout: Layout) -> FileSpec {
    FileSpec {
        client,
        scope: "user",
        path: PathBuf::from("/h/file"),
        format,
        layout,
    }
}

pub(crate) fn cursor() -> FileSpec {
    spec(
        ClientId::Cursor,
        Format::Json(Flavour::STRICT),
        Layout::McpServers,
    )
}

pub(crate) fn codex() -> FileSpec {
    spec(ClientId::Codex, Format::Toml, Layout::CodexToml)
}

#[test]
fn the_json_reader_agrees_with_serde_json_on_what_it_accepts() {
    let text = r#"{"a": [1, -2.5e3, true, null, "x\u00e9\ud83d\ude00\n"], "b": {"c": {}}}"#;
    let node = json::parse(text, Flavour::STRICT).unwrap();
    let want: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(node.to_value(text), want);
}

#[test]
fn spans_point_at_the_values_themselves() {
    let text = "{ \"k\" : \"v\" , \"n\": [ 1 ] }";
    let node = json::parse(text, Flavour::STRICT).unwrap();
    assert_eq!(&text[node.get("k").unwrap().span.clone()], "\"v\"");
    assert_eq!(&text[node.get("n").unwrap().span.clone()], "[ 1 ]");
}

#[test]
fn a_unicode_escape_with_a_sign_is_refused_like_any_non_hex_digit() {
    assert!(json::parse(r#"{"a":"\u+041"}"#, Flavour::STRICT).is_err());
    assert!(json::parse(r#"{"a":"\u0041"}"#, Flavour::STRICT).is_ok());
}

#[test]
fn strict_json_refuses_comments_and_trailing_commas_and_jsonc_reads_them() {
    for text in ["{\"a\": 1, }", "{\"a\": [1,]}", "// x\n{}", "{/* x */}"] {
        assert!(json::parse(text, Flavour::STRICT).is_err(), "{text}");
        assert!(json::parse(text, JSONC).is_ok(), "{text}");
    }
}

#[test]
fn a_repeated_key_is_refused_at_any_depth() {
    let err = json::parse(r#"{"a": {"b": 1, "b": 2}}"#, Flavour::STRICT).unwrap_err();
    assert!(err.what.contains("repeated"), "{err}");
    assert_eq!((err.line, err.col), (1, 16));
}

#[test]
fn a_parse_error_says_where_and_never_quotes_the_file() {
    let text = "{\n  \"env\": {\"K\": \"SECRET-VALUE\" \"x\"}\n}";
    let err = json::parse(text, Flavour::STRICT).unwrap_err();
    assert_eq!(err.line, 2);
    assert!(!err.to_string().contains("SECRET"), "{err}");
}

#[test]
fn nesting_past_the_limit_is_refused() {
    let deep = format!(
        "{}{}",
        "[".repeat(limits::JSON_DEPTH_MAX + 1),
        "]".repeat(limits::JSON_DEPTH_MAX + 1)
    );
    assert!(json::parse(&deep, Flavour::STRICT).is_err());
}

#[test]
fn lone_surrogates_and_raw_control_characters_are_refused() {
    assert!(json::parse(r#"["\ud800"]"#, Flavour::STRICT).is_err());
    assert!(json::parse("[\"a\u{1}b\"]", Flavour::STRICT).is_err());
}

#[test]
fn a_file_that_is_not_an_object_or_whose_servers_are_not_an_object_is_refused() {
    assert!(
        entries_of(&cursor(), "[]", &[])
            .unwrap_err()
            .contains("not the expected shape")
    );
    assert!(
        entries_of(&cursor(), r#"{"mcpServers": 1}"#, &[])
            .unwrap_err()
            .contains("mcpServers")
    );
}

#[test]
fn vscode_reads_servers_not_mcp_servers() {
    let s = spec(ClientId::VsCode, Format::Json(JSONC), Layout::Servers);
    let text = "{\"servers\": {\"a\": {\"type\": \"stdio\", \"command\": \"x\",},}, \"mcpServers\": {\"b\": {\"command\": \"y\"}}}";
    let entries = entries_of(&s, text, &[]).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].name, "a");
}

#[test]
fn codex_shape_errors_never_quote_a_value() {
    let err = entries_of(&codex(), "[mcp_servers]\nx = \"SECRET-VALUE\"\n", &[]).unwrap_err();
    assert!(
        err.contains("mcp_servers.x") && !err.contains("SECRET"),
        "{err}"
    );
    let err = entries_of(&codex(), "a = \"SECRET-VALUE\n", &[]).unwrap_err();
    assert!(
        err.contains("not valid TOML") && !err.contains("SECRET"),
        "{err}"
    );
}

#[test]
fn secret_arguments_are_masked_and_ordinary_ones_kept() {
    let args: Vec<String> = [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/home/me/Documents",
        "--api-key=abc",
        "--token",
        "abc",
        "API_KEY=abc",
        "Authorization: Bearer abc",
        "ghp_0123456789abcdefghijABCDEFGHIJ",
        "https://me:pw@h.example/x?token=abc&q=1",
        "--port",
        "8080",
        "--local-timezone=Europe/Paris",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let r = redact_args(&args);
    assert_eq!(
        r,
        vec![
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/home/me/Documents",
            "--api-key=••••",
            "--token",
            "••••",
            "API_KEY=••••",
            "Authorization: Bearer ••••",
            "••••",
            "https://••••@h.example/x?token=••••&q=1",
            "--port",
            "8080",
            "--local-timezone=Europe/Paris",
        ]
    );
}

#[test]
fn token_shapes_are_told_from_packages_and_paths() {
    assert!(looks_like_token("sk-proj-a1B2c3D4e5F6g7H8"));
    assert!(looks_like_token("a1B2c3D4e5F6g7H8i9J0kLmNoP"));
    assert!(!looks_like_token("@modelcontextprotocol/server-memory"));
    assert!(!looks_like_token("mcp-server-time"));
    assert!(!looks_like_token("/usr/local/bin/some-long-binary-name"));
    assert_eq!(
        redact_url("https://h/p?X-Api-Key=1&page=2"),
        "https://h/p?X-Api-Key=••••&page=2"
    );
    assert_eq!(
        redact_url("https://h/p?%74oken=1"),
        "https://h/p?%74oken=••••"
    );
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn pinned_means_an_exact_version_a_digest_or_a_local_path() {
    let digest = format!("img@sha256:{}", "a".repeat(64));
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("npx", s(&["-y", "pkg@1.2.3"]), "pinned"),
        ("npx", s(&["-y", "@scope/pkg@1.2.3-beta.1"]), "pinned"),
        ("npx", s(&["-y", "@scope/pkg"]), "unpinned"),
        ("npx", s(&["pkg@^1.2.0"]), "unpinned"),
        ("npx", s(&["pkg@latest"]), "unpinned"),
        ("npx", s(&["--weird", "pkg@1.2.3"]), "unknown"),
        ("npx", s(&["-p", "pkg@1.0.0", "bin"]), "pinned"),
        ("/usr/bin/npx", s(&["pkg@1.0.0"]), "pinned"),
        ("uvx", s(&["pkg==1.2.3"]), "pinned"),
        ("uvx", s(&["--from", "pkg==1.2.3", "cmd"]), "pinned"),
        ("uvx", s(&["pkg>=1.2"]), "unpinned"),
        ("uvx", s(&["pkg"]), "unpinned"),
        ("uvx", s(&["--frobnicate", "pkg==1.0.0"]), "unknown"),
        ("uvx", s(&[]), "unknown"),
        (
            "docker",
            s(&["run", "-i", "--rm", "-e", "K", &digest]),
            "pinned",
        ),
        ("docker", s(&["run", "-i", "img:1.0"]), "unpinned"),
        ("docker", s(&["run", "--mystery", "img"]), "unknown"),
        ("docker", s(&["pull", "img"]), "unknown"),
        ("/opt/srv/bin/server", s(&["--x"]), "pinned"),
        ("node", s(&["/opt/s/index.js"]), "pinned"),
        ("node", s(&["index.js"]), "unknown"),
        ("some-binary", s(&[]), "unknown"),
    ];
    for (cmd, args, want) in cases {
        let got = pin(cmd, &args);
        assert_eq!(got.label(), want, "{cmd} {args:?}: {got:?}");
    }
    assert!(matches!(pin("npx", &s(&["pkg@1.2"])), Pin::Unpinned(_)));
}

#[test]
fn a_short_secret_flag_masks_its_value_and_a_colon_separated_secret_is_masked() {
    let args: Vec<String> = [
        "-p",
        "hunter2",
        "--client-secret:CANARYvalue",
        "--api-key:abc",
        "-u",
        "me",
        "--header:X-Api-Key",
        "--port:8080",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        redact_args(&args),
        vec![
            "-p",
            "••••",
            "--client-secret:••••",
            "--api-key:••••",
            "-u",
            "me",
            "--header:X-Api-Key",
            "--port:8080",
        ]
    );
}

#[test]
fn a_secret_name_is_judged_once_for_both_programs() {
    for secret in [
        "--api-key",
        "API_KEY",
        "apiKey",
        "api.key",
        "OPENAI_KEY",
        "--auth",
        "oauth-token",
        "basic-auth",
        "Authorization",
        "--db-password",
        "pwd",
        "SESSION_ID",
    ] {
        assert!(secret_key(secret), "{secret} should be secret");
    }
    for plain in [
        "--author", "author", "--port", "NODE_ENV", "keyboard", "--host", "",
    ] {
        assert!(!secret_key(plain), "{plain} should not be secret");
    }
}

#[test]
fn a_fifo_named_like_a_client_config_is_refused_at_once_not_waited_on() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(".mcp.json");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_eq!(
        read_capped(&path),
        Err("it is not a regular file".to_string())
    );
}

#[test]
fn a_file_is_read_whole_under_the_bound_and_refused_past_it_by_the_opened_file() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("f.json");
    std::fs::write(&path, "0123456789").unwrap();
    assert_eq!(read_regular(&path, 10), Ok(Some(b"0123456789".to_vec())));
    assert_eq!(read_regular(&path, 9), Err(Refusal::TooBig(10)));
    assert_eq!(read_head(&path, 4), Ok(Some(b"0123".to_vec())));
    assert_eq!(read_regular(&t.path().join("absent"), 9), Ok(None));
    assert_eq!(read_regular(t.path(), 9), Err(Refusal::NotRegular));
}

#[test]
fn a_url_password_holding_a_slash_is_masked_whole_in_listings() {
    for url in [
        "https://user:pa/ss@host.example/x",
        "https://tok/en@host.example/x?q=1",
    ] {
        let shown = redact_url(url);
        assert!(
            !shown.contains("pa/ss") && !shown.contains("tok"),
            "{shown}"
        );
        assert!(shown.contains("host.example"), "{shown}");
    }
    let smithery = "https://server.smithery.ai/@owner/name/mcp";
    assert_eq!(redact_url(smithery), smithery);
}
