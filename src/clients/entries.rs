//! The readers of each layout: a parsed JSON/JSONC tree or a Codex TOML document into neutral
//! [`ServerEntry`]s, each with the spans a span edit needs.
//!
//! Owns: the layouts (`mcpServers`, `servers`, `~/.claude.json`'s projects, `[mcp_servers.x]`)
//! and the shape checks. Must never: quote a value in a refusal, or keep an env value it was not
//! asked for.

use std::collections::BTreeMap;

use super::{ClientId, FileSpec, Format, Layout, ServerEntry, Shape, Spans, json};

/// Parses a file's text into its entries (or why it cannot), keeping the values of the env
/// variables named in `kept_env`.
pub(crate) fn entries_of(
    spec: &FileSpec,
    text: &str,
    kept_env: &[&str],
) -> Result<Vec<ServerEntry>, String> {
    match spec.format {
        Format::Json(flavour) => {
            let root = json::parse(text, flavour).map_err(|e| format!("not valid JSON: {e}"))?;
            json_entries(spec, text, &root, kept_env)
        }
        Format::Toml => toml_entries(text, kept_env),
    }
}

fn shape(what: &str) -> String {
    format!("not the expected shape: {what}")
}

fn json_entries(
    spec: &FileSpec,
    text: &str,
    root: &json::Node,
    kept_env: &[&str],
) -> Result<Vec<ServerEntry>, String> {
    if root.members().is_none() {
        return Err(shape("the file is not a JSON object"));
    }
    let mut out = Vec::new();
    let key = if spec.layout == Layout::Servers {
        "servers"
    } else {
        "mcpServers"
    };
    if let Some(servers) = root.get(key) {
        let group = vec![key.to_string()];
        json_group(
            spec,
            text,
            servers,
            group,
            spec.scope.to_string(),
            kept_env,
            &mut out,
        )?;
    }
    if spec.layout == Layout::ClaudeJson {
        // Only `projects.<dir>.mcpServers`; a `projects` of another shape is not ours to judge.
        if let Some(projects) = root.get("projects").and_then(json::Node::members) {
            for p in projects {
                if let Some(servers) = p.value.get("mcpServers") {
                    let group = vec!["projects".into(), p.key.clone(), "mcpServers".into()];
                    json_group(
                        spec,
                        text,
                        servers,
                        group,
                        format!("local {}", p.key),
                        kept_env,
                        &mut out,
                    )?;
                }
            }
        }
    }
    Ok(out)
}

fn json_group(
    spec: &FileSpec,
    text: &str,
    servers: &json::Node,
    group: Vec<String>,
    scope: String,
    kept_env: &[&str],
    out: &mut Vec<ServerEntry>,
) -> Result<(), String> {
    let Some(members) = servers.members() else {
        return Err(shape(&format!("`{}` is not an object", group.join("."))));
    };
    for m in members {
        out.push(json_entry(
            spec,
            text,
            &m.key,
            &m.value,
            group.clone(),
            scope.clone(),
            kept_env,
        ));
    }
    Ok(())
}

fn first_element_start(text: &str, open: usize, comment: Comment) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = open;
    loop {
        match bytes.get(i)? {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' if comment == Comment::Hash => {
                while bytes.get(i).is_some_and(|b| *b != b'\n') {
                    i += 1;
                }
            }
            b'/' if comment == Comment::Slash && bytes.get(i + 1) == Some(&b'/') => {
                while bytes.get(i).is_some_and(|b| *b != b'\n') {
                    i += 1;
                }
            }
            b'/' if comment == Comment::Slash && bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while !(bytes.get(i)? == &b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            b']' => return None,
            _ => return Some(i),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comment {
    Slash,
    Hash,
}

/// An entry with nothing read yet: a stdio entry until its value says otherwise.
fn blank(group: Vec<String>, scope: String, name: String) -> ServerEntry {
    ServerEntry {
        group,
        scope,
        name,
        shape: Shape::Stdio,
        transport: "stdio".into(),
        command: None,
        args: Vec::new(),
        env_names: Vec::new(),
        kept_env: Vec::new(),
        url: None,
        header_names: Vec::new(),
        enabled: None,
        spans: None,
    }
}

/// One server of a JSON file. Its env block is read first, so a remote or unrecognized entry
/// still names its variables.
fn json_entry(
    spec: &FileSpec,
    text: &str,
    name: &str,
    v: &json::Node,
    group: Vec<String>,
    scope: String,
    kept_env: &[&str],
) -> ServerEntry {
    let mut e = blank(group, scope, name.to_string());
    if v.members().is_none() {
        e.shape = Shape::Unrecognized("not an object".into());
        e.transport = "unknown".into();
        return e;
    }
    if let Some(env) = v.get("env").and_then(json::Node::members) {
        e.env_names = env.iter().map(|m| m.key.clone()).collect();
        e.kept_env = env
            .iter()
            .filter(|m| kept_env.contains(&m.key.as_str()))
            .filter_map(|m| m.value.as_str().map(|v| (m.key.clone(), v.to_string())))
            .collect();
    }
    if let Some(headers) = v.get("headers").and_then(json::Node::members) {
        e.header_names = headers.iter().map(|m| m.key.clone()).collect();
    }
    e.enabled = match (v.get("disabled"), v.get("enabled")) {
        (Some(d), _) => d.as_bool().map(|d| !d),
        (None, Some(en)) => en.as_bool(),
        (None, None) => None,
    };
    if let Some((transport, url)) = json_remote(spec, v) {
        e.shape = Shape::Remote;
        e.transport = transport;
        e.url = url;
        return e;
    }
    let Some(cmd_node) = v.get("command") else {
        e.shape = Shape::Unrecognized("it has no command".into());
        e.transport = "unknown".into();
        return e;
    };
    let Some(command) = cmd_node.as_str().filter(|c| !c.trim().is_empty()) else {
        e.shape = Shape::Unrecognized("its command is not a non-empty string".into());
        return e;
    };
    e.command = Some(command.to_string());
    let mut args_site = None;
    if let Some(args) = v.get("args") {
        let Some(items) = args.elements() else {
            e.shape = Shape::Unrecognized("its args are not a list".into());
            return e;
        };
        let strings: Option<Vec<String>> = items
            .iter()
            .map(|it| it.as_str().map(str::to_string))
            .collect();
        let Some(strings) = strings else {
            e.shape = Shape::Unrecognized("its args are not all strings".into());
            return e;
        };
        e.args = strings;
        let open = args.span.start + 1;
        args_site = Some((open, first_element_start(text, open, Comment::Slash)));
    }
    let key_start = v
        .members()
        .and_then(|ms| ms.iter().find(|m| m.key == "command"))
        .map(|m| m.key_span.start)
        .unwrap_or(cmd_node.span.start);
    e.spans = Some(Spans {
        command: cmd_node.span.clone(),
        args: args_site,
        command_key: key_start,
    });
    e
}

/// The transport and URL of a remote JSON entry (a URL key, or a remote `type`); None for one
/// that is not remote.
fn json_remote(spec: &FileSpec, v: &json::Node) -> Option<(String, Option<String>)> {
    let declared = v
        .get("type")
        .and_then(json::Node::as_str)
        .map(str::to_string);
    let url = ["url", "serverUrl", "httpUrl"].iter().find_map(|k| {
        v.get(k)
            .and_then(json::Node::as_str)
            .map(|u| (*k, u.to_string()))
    });
    let remote_type = declared
        .as_deref()
        .is_some_and(|t| matches!(t, "http" | "sse" | "streamable-http" | "streamableHttp"));
    if url.is_none() && !remote_type {
        return None;
    }
    let transport = match (declared.as_deref(), url.as_ref().map(|u| u.0)) {
        (Some("sse"), _) => "sse",
        (Some(_), _) => "http",
        (None, Some("httpUrl")) => "http",
        // Gemini CLI reads a bare `url` as SSE; Cursor and Windsurf decide by probing.
        (None, Some("url")) if spec.client == ClientId::GeminiCli => "sse",
        (None, _) => "http",
    };
    Some((transport.to_string(), url.map(|u| u.1)))
}

#[derive(serde::Deserialize)]
struct CodexDoc {
    #[serde(default)]
    mcp_servers: Option<BTreeMap<toml::Spanned<String>, CodexServer>>,
}

#[derive(serde::Deserialize)]
struct CodexServer {
    command: Option<toml::Spanned<toml::Value>>,
    args: Option<toml::Spanned<toml::Value>>,
    env: Option<toml::Value>,
    url: Option<toml::Value>,
    http_headers: Option<toml::Value>,
    env_http_headers: Option<toml::Value>,
    enabled: Option<toml::Value>,
}

/// The refusal of a file that is not TOML: where and what, never the offending line (toml's
/// message quotes it).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let span = e.span().map(|s| s.start).unwrap_or(0);
    let before = text.get(..span).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    // toml's message quotes the offending line; say only where and what.
    let what = e
        .message()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    format!("not valid TOML: line {line}, column {col}: {what}")
}

fn toml_entries(text: &str, kept_env: &[&str]) -> Result<Vec<ServerEntry>, String> {
    // Parse once as a plain document for the error message a person can act on.
    let plain = toml::from_str::<toml::Table>(text).map_err(|e| toml_error(text, &e))?;
    // The shape, checked by hand so no error message ever quotes a value.
    if let Some(servers) = plain.get("mcp_servers") {
        let Some(table) = servers.as_table() else {
            return Err(shape("`mcp_servers` is not a table"));
        };
        for (k, v) in table {
            if !v.is_table() {
                return Err(shape(&format!("`mcp_servers.{k}` is not a table")));
            }
        }
    }
    let doc: CodexDoc =
        toml::from_str(text).map_err(|_| shape("`mcp_servers` is not a table of server tables"))?;
    let mut servers: Vec<(toml::Spanned<String>, CodexServer)> =
        doc.mcp_servers.unwrap_or_default().into_iter().collect();
    servers.sort_by_key(|(k, _)| k.span().start);
    Ok(servers
        .into_iter()
        .map(|(key, s)| toml_entry(text, key.get_ref().clone(), &s, kept_env))
        .collect())
}

/// One `[mcp_servers.<name>]` table. Its env table is read first, as in JSON.
fn toml_entry(text: &str, name: String, s: &CodexServer, kept_env: &[&str]) -> ServerEntry {
    let mut e = blank(vec!["mcp_servers".into()], "user".into(), name);
    if let Some(toml::Value::Table(env)) = &s.env {
        e.env_names = env.keys().cloned().collect();
        e.kept_env = env
            .iter()
            .filter(|(k, _)| kept_env.contains(&k.as_str()))
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
    }
    for headers in [&s.http_headers, &s.env_http_headers].into_iter().flatten() {
        if let toml::Value::Table(h) = headers {
            e.header_names.extend(h.keys().cloned());
        }
    }
    e.enabled = s.enabled.as_ref().and_then(toml::Value::as_bool);
    if let Some(url) = &s.url {
        e.shape = Shape::Remote;
        e.transport = "http".into();
        e.url = url.as_str().map(str::to_string);
        return e;
    }
    let Some(cmd) = &s.command else {
        e.shape = Shape::Unrecognized("it has no command".into());
        e.transport = "unknown".into();
        return e;
    };
    let Some(command) = cmd.get_ref().as_str().filter(|c| !c.trim().is_empty()) else {
        e.shape = Shape::Unrecognized("its command is not a non-empty string".into());
        return e;
    };
    e.command = Some(command.to_string());
    let mut args_site = None;
    if let Some(args) = &s.args {
        let Some(items) = args.get_ref().as_array() else {
            e.shape = Shape::Unrecognized("its args are not a list".into());
            return e;
        };
        let strings: Option<Vec<String>> = items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect();
        let Some(strings) = strings else {
            e.shape = Shape::Unrecognized("its args are not all strings".into());
            return e;
        };
        e.args = strings;
        let open = args.span().start + 1;
        args_site = Some((open, first_element_start(text, open, Comment::Hash)));
    }
    let span = cmd.span();
    e.spans = Some(Spans {
        command: span.clone(),
        args: args_site,
        command_key: key_start_on_line(text, span.start),
    });
    e
}

/// Where the line holding `pos` starts, past its indentation.
fn key_start_on_line(text: &str, pos: usize) -> usize {
    let before = text.get(..pos).unwrap_or("");
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let indent = text
        .get(line_start..pos)
        .map(|l| l.len() - l.trim_start().len())
        .unwrap_or(0);
    line_start + indent
}
