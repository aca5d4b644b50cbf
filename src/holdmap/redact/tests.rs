use super::*;

fn r(argv: &[&str]) -> String {
    let owned: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
    redact_argv(&owned)
}

#[test]
fn secret_flags_are_masked_in_every_form() {
    assert_eq!(
        r(&["srv", "--db-password=hunter2"]),
        "srv --db-password=••••"
    );
    assert_eq!(
        r(&["srv", "--api-key", "abc123", "--port", "3000"]),
        "srv --api-key •••• --port 3000"
    );
    assert_eq!(
        r(&[
            "env",
            "GITHUB_TOKEN=ghp_x",
            "OPENAI_KEY=sk-1",
            "NODE_ENV=dev"
        ]),
        "env GITHUB_TOKEN=•••• OPENAI_KEY=•••• NODE_ENV=dev"
    );
    assert_eq!(
        r(&["srv", "--clientSecret", "s"]),
        "srv --clientSecret ••••"
    );
    assert_eq!(
        r(&["srv", "--auth", "u:p", "--author", "Ann"]),
        "srv --auth •••• --author Ann"
    );
    assert_eq!(
        r(&["srv", "--sentry-dsn=https://k@o.ingest.io/1"]),
        "srv --sentry-dsn=••••"
    );
    // A secret flag followed by another flag has no value to mask.
    assert_eq!(
        r(&["srv", "--no-auth", "--port", "1"]),
        "srv --no-auth --port 1"
    );
}

#[test]
fn url_passwords_and_secret_query_values_are_masked() {
    assert_eq!(
        r(&["psql", "postgres://u:pw@h:5432/db"]),
        "psql postgres://u:••••@h:5432/db"
    );
    assert_eq!(
        r(&["app", "--db=mysql://root:s3cr3t@localhost/x?sslmode=on"]),
        "app --db=mysql://root:••••@localhost/x?sslmode=on"
    );
    assert_eq!(
        r(&["curl", "https://api.x.io/v1?api_key=abc&page=2#top"]),
        "curl https://api.x.io/v1?api_key=••••&page=2#top"
    );
    assert_eq!(
        r(&["curl", "https://x.io/?access%5Ftoken=abc&sig=zz"]),
        "curl https://x.io/?access%5Ftoken=••••&sig=••••"
    );
    assert_eq!(
        r(&[
            "git",
            "clone",
            "https://ghp_abcdefghijklmnopqrstuvwxyz@github.com/a/b"
        ]),
        "git clone https://••••@github.com/a/b"
    );
    assert_eq!(
        r(&["git", "clone", "https://ann@github.com/a/b"]),
        "git clone https://ann@github.com/a/b"
    );
}

#[test]
fn authorization_headers_keep_their_scheme_and_lose_their_credentials() {
    assert_eq!(
        r(&["curl", "-H", "Authorization: Bearer eyJhbGciOi"]),
        "curl -H 'Authorization: Bearer ••••'"
    );
    assert_eq!(
        r(&["curl", "--header=Authorization: Basic dTpw"]),
        "curl '--header=Authorization: Basic ••••'"
    );
    assert_eq!(
        r(&["curl", "-H", "X-Api-Key: k1"]),
        "curl -H 'X-Api-Key: ••••'"
    );
    assert_eq!(
        r(&["curl", "-H", "Accept: text/html"]),
        "curl -H 'Accept: text/html'"
    );
    assert_eq!(
        r(&["curl", "-u", "ann:pw", "https://x"]),
        "curl -u ann:•••• https://x"
    );
}

#[test]
fn inline_mcp_json_is_redacted_by_key_at_any_depth() {
    let shown = r(&[
        "claude",
        "--mcp-config",
        r#"{"mcpServers":{"x":{"command":"npx","args":["srv","--token","t0k"],"env":{"API_KEY":"s3cr3t","DATABASE_URL":"postgres://u:pw@h/db","LOG":"info"}}}}"#,
    ]);
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert!(!shown.contains("t0k"), "{shown}");
    assert!(!shown.contains(":pw@"), "{shown}");
    assert!(shown.contains(r#""API_KEY":"••••""#), "{shown}");
    assert!(shown.contains(r#""LOG":"info""#), "{shown}");
    assert!(shown.starts_with("claude --mcp-config {"), "{shown}");
}

#[test]
fn json_that_cannot_be_checked_is_masked_whole() {
    assert_eq!(r(&["x", r#"{"token": "abc""#]), "x ••••");
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    assert_eq!(r(&["x", &format!("{{\"a\":{deep}}}")]), "x ••••");
    let big = format!(
        "{{\"a\":\"{}\"}}",
        "z".repeat(HOLDMAP_INLINE_JSON_BYTES_MAX)
    );
    assert_eq!(r(&["x", &big]), "x ••••");
    // An IPv6 address in brackets is not JSON.
    assert_eq!(r(&["srv", "--host", "[::]"]), "srv --host [::]");
}

#[test]
fn control_characters_are_made_visible_so_no_escape_reaches_a_terminal() {
    let osc52 = "\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}";
    let shown = r(&["node", &format!("/tmp/{osc52}/server.js")]);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(shown.contains("\\u{1b}]52;c;"), "{shown}");
}

#[test]
fn arguments_with_spaces_are_quoted_and_the_rest_joined_by_spaces() {
    assert_eq!(
        r(&["python3", "-m", "http.server", "8000"]),
        "python3 -m http.server 8000"
    );
    assert_eq!(r(&["sh", "-c", "echo it's"]), r"sh -c 'echo it'\''s'");
    assert_eq!(r(&["x", ""]), "x ''");
    assert_eq!(r(&[]), "");
}

#[test]
fn a_command_line_rewritten_into_one_title_is_read_as_words() {
    assert_eq!(
        r(&["myapp --password hunter2 --port 3"]),
        "myapp --password •••• --port 3"
    );
    assert_eq!(
        r(&["nginx: master process /usr/sbin/nginx"]),
        "nginx: master process /usr/sbin/nginx"
    );
}
