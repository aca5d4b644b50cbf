//! Clients' permission rules and documented safety settings: where each client keeps them
//! (Claude Code's `settings.json` files, Codex's `config.toml`, Gemini CLI's `settings.json`,
//! Cursor's `cli-config.json`/`cli.json`/`permissions.json`, VS Code's user `settings.json`), and
//! the few keys each documents for what its agent may do without asking. Shared by every binary;
//! holdmap's `include_capabilities` reports them.
//!
//! Owns: [`files`] (the table of settings files), [`read`] (one file, bounded, complete or
//! refused with a reason) and [`clean`] (the sanitiser of any text taken from such a file).
//! Must never: read a file larger than `limits::CLIENT_SETTINGS_BYTES_MAX` or one that is not a
//! regular file, keep a value of a key it does not name, put a file's text in a refusal, or
//! return text that has not been through [`clean`] (control characters stripped, credentials
//! masked, length capped). Imports nothing Holdcall-specific.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::inspect::{self, MASK};
use super::{ClientId, Places, json};
use crate::limits;

/// Which keys a settings file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `permissions.{allow,ask,deny,defaultMode}`, `enableAllProjectMcpServers`,
    /// `enabledMcpjsonServers`, `disabledMcpjsonServers`, `disableBypassPermissionsMode`.
    Claude,
    /// Top-level and per-profile `approval_policy` and `sandbox_mode`.
    Codex,
    /// `tools.autoAccept` (old: `autoAccept`), `tools.sandbox` (old: `sandbox`),
    /// `general.defaultApprovalMode`, `security.disableYoloMode`, `tools.allowed`/`allowedTools`,
    /// `tools.exclude`/`excludeTools`, and `mcpServers.<alias>.trust`.
    Gemini,
    /// Cursor CLI's `permissions.{allow,deny}`.
    CursorCli,
    /// Cursor's `permissions.json`: `mcpAllowlist`, `terminalAllowlist`.
    CursorPermissions,
    /// VS Code's `chat.tools.autoApprove` (and `chat.tools.global.autoApprove`),
    /// `chat.tools.terminal.enableAutoApprove`, `chat.tools.terminal.autoApprove`,
    /// `chat.agent.sandbox.enabled`, `chat.permissions.default`.
    VsCode,
}

/// How a settings file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Json(json::Flavour),
    Toml,
}

/// One settings file a client reads.
#[derive(Debug, Clone)]
pub(crate) struct SettingsSpec {
    pub(crate) client: ClientId,
    /// `user`, `project`, `local` (a project's own, not committed) or `managed`/`system`.
    pub(crate) scope: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) syntax: Syntax,
    pub(crate) kind: Kind,
}

/// A permission rule as its file writes it (cleaned): `Bash(npm test:*)` allowed, …
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    /// `allow`, `ask` or `deny`.
    pub(crate) effect: &'static str,
    pub(crate) rule: String,
}

/// A documented safety setting and its value (cleaned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setting {
    /// The key as the client documents it (`permissions.defaultMode`).
    pub(crate) name: String,
    pub(crate) value: String,
    /// The value lets the agent act without asking, or outside its sandbox.
    pub(crate) risky: bool,
}

/// What one settings file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) rules: Vec<Rule>,
    pub(crate) settings: Vec<Setting>,
    /// Rules past `limits::CLIENT_RULES_PER_FILE_MAX`, counted, not kept.
    pub(crate) rules_omitted: usize,
}

/// A settings file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SettingsState {
    Missing,
    Refused(String),
    Read(Said),
}

const JSONC: json::Flavour = json::Flavour {
    comments: true,
    trailing_commas: true,
};
const COMMENTS: json::Flavour = json::Flavour {
    comments: true,
    trailing_commas: false,
};

/// The settings files `client` reads under `places`, in a fixed order. Windsurf and Claude
/// Desktop keep none holdmap reads (their permissions live in the app's own storage).
pub(crate) fn files(places: &Places, client: ClientId) -> Vec<SettingsSpec> {
    let strict = Syntax::Json(json::Flavour::STRICT);
    let f = |scope, path: PathBuf, syntax, kind| SettingsSpec {
        client,
        scope,
        path,
        syntax,
        kind,
    };
    let h = &places.home;
    let p = &places.project;
    let mut all = match client {
        ClientId::ClaudeCode => vec![
            f(
                "managed",
                PathBuf::from("/etc/claude-code/managed-settings.json"),
                strict,
                Kind::Claude,
            ),
            f(
                "user",
                h.join(".claude/settings.json"),
                strict,
                Kind::Claude,
            ),
            f(
                "project",
                p.join(".claude/settings.json"),
                strict,
                Kind::Claude,
            ),
            f(
                "local",
                p.join(".claude/settings.local.json"),
                strict,
                Kind::Claude,
            ),
        ],
        ClientId::Codex => vec![f(
            "user",
            places.codex_home.join("config.toml"),
            Syntax::Toml,
            Kind::Codex,
        )],
        ClientId::GeminiCli => vec![
            f(
                "system",
                PathBuf::from("/etc/gemini-cli/settings.json"),
                Syntax::Json(COMMENTS),
                Kind::Gemini,
            ),
            f(
                "user",
                h.join(".gemini/settings.json"),
                Syntax::Json(COMMENTS),
                Kind::Gemini,
            ),
            f(
                "project",
                p.join(".gemini/settings.json"),
                Syntax::Json(COMMENTS),
                Kind::Gemini,
            ),
        ],
        ClientId::Cursor => vec![
            f(
                "user",
                h.join(".cursor/cli-config.json"),
                strict,
                Kind::CursorCli,
            ),
            f(
                "project",
                p.join(".cursor/cli.json"),
                strict,
                Kind::CursorCli,
            ),
            f(
                "user",
                h.join(".cursor/permissions.json"),
                Syntax::Json(JSONC),
                Kind::CursorPermissions,
            ),
            f(
                "project",
                p.join(".cursor/permissions.json"),
                Syntax::Json(JSONC),
                Kind::CursorPermissions,
            ),
        ],
        ClientId::VsCode => vec![f(
            "user",
            places.config_dir.join("Code/User/settings.json"),
            Syntax::Json(JSONC),
            Kind::VsCode,
        )],
        ClientId::Windsurf | ClientId::ClaudeDesktop => Vec::new(),
    };
    // The project may be the home itself: read each file once.
    let mut seen: Vec<PathBuf> = Vec::new();
    all.retain(|s| {
        let key = std::fs::canonicalize(&s.path).unwrap_or_else(|_| s.path.clone());
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
    all
}

/// Reads one settings file. Never fails: a file that cannot be read is `Refused` with the
/// reason (never its text).
pub(crate) fn read(spec: &SettingsSpec) -> SettingsState {
    let text = match read_bounded(&spec.path, limits::CLIENT_SETTINGS_BYTES_MAX) {
        Ok(Some(t)) => t,
        Ok(None) => return SettingsState::Missing,
        Err(why) => return SettingsState::Refused(why),
    };
    let root = match spec.syntax {
        Syntax::Json(flavour) => match json::parse(&text, flavour) {
            Ok(node) => node.to_value(&text),
            Err(e) => return SettingsState::Refused(format!("not valid JSON: {e}")),
        },
        Syntax::Toml => match toml::from_str::<toml::Table>(&text) {
            Ok(t) => match serde_json::to_value(t) {
                Ok(v) => v,
                Err(_) => return SettingsState::Refused("not valid TOML".into()),
            },
            Err(e) => return SettingsState::Refused(toml_refusal(&text, &e)),
        },
    };
    if !root.is_object() {
        return SettingsState::Refused("not the expected shape: the file is not an object".into());
    }
    let mut said = Said::default();
    match spec.kind {
        Kind::Claude => claude(&root, &mut said),
        Kind::Codex => codex(&root, &mut said),
        Kind::Gemini => gemini(&root, &mut said),
        Kind::CursorCli => {
            let perms = root.get("permissions");
            rules(&mut said, "allow", perms.and_then(|p| p.get("allow")));
            rules(&mut said, "deny", perms.and_then(|p| p.get("deny")));
        }
        Kind::CursorPermissions => {
            rules(&mut said, "allow", root.get("mcpAllowlist"));
            rules(&mut said, "allow", root.get("terminalAllowlist"));
        }
        Kind::VsCode => vscode(&root, &mut said),
    }
    SettingsState::Read(said)
}

/// Where a TOML file stops parsing, by line: never the text there.
fn toml_refusal(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let line = text
                .get(..span.start)
                .map(|t| t.matches('\n').count() + 1)
                .unwrap_or(1);
            format!("not valid TOML (line {line})")
        }
        None => "not valid TOML".into(),
    }
}

/// The text of `path` if it is a regular file of at most `max` bytes of UTF-8; None when it
/// does not exist. Opened without blocking and judged by the opened file
/// (`clients::read_regular`). Symlinks are followed, as the clients follow them.
pub(crate) fn read_bounded(path: &Path, max: usize) -> Result<Option<String>, String> {
    let bytes = match super::read_regular(path, max as u64) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(super::Refusal::TooBig(len)) => {
            return Err(format!(
                "it is {len} bytes; holdmap reads settings files of at most {max} bytes"
            ));
        }
        Err(r) => return Err(r.to_string()),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".to_string())
}

fn at<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, k| v.get(*k))
}

fn setting(said: &mut Said, name: &str, value: Option<&Value>, risky: impl Fn(&Value) -> bool) {
    if let Some(v) = value {
        said.settings.push(Setting {
            name: name.to_string(),
            value: shown(v),
            risky: risky(v),
        });
    }
}

/// A setting's value as text: a string or a scalar as itself, a list of strings joined (names
/// of servers), anything else by its kind.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => clean(s, limits::CLIENT_SETTING_CHARS_MAX),
        Value::Bool(_) | Value::Number(_) | Value::Null => v.to_string(),
        Value::Array(items) => {
            let words: Vec<String> = items
                .iter()
                .take(limits::CLIENT_RULES_PER_FILE_MAX)
                .map(|i| match i {
                    Value::String(s) => clean(s, limits::CLIENT_SETTING_CHARS_MAX),
                    _ => "(not a string)".into(),
                })
                .collect();
            clean(&words.join(", "), limits::CLIENT_SETTING_CHARS_MAX)
        }
        Value::Object(m) => format!("an object of {} keys", m.len()),
    }
}

/// The strings of a list as `effect` rules (anything else in it is skipped: a client ignores it).
fn rules(said: &mut Said, effect: &'static str, list: Option<&Value>) {
    let Some(Value::Array(items)) = list else {
        return;
    };
    for item in items.iter().filter_map(Value::as_str) {
        if said.rules.len() >= limits::CLIENT_RULES_PER_FILE_MAX {
            said.rules_omitted += 1;
            continue;
        }
        said.rules.push(Rule {
            effect,
            rule: clean(item, limits::CLIENT_RULE_CHARS_MAX),
        });
    }
}

fn is_true(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

fn claude(root: &Value, said: &mut Said) {
    let perms = root.get("permissions");
    for effect in ["allow", "ask", "deny"] {
        rules(said, effect, perms.and_then(|p| p.get(effect)));
    }
    setting(
        said,
        "permissions.defaultMode",
        perms.and_then(|p| p.get("defaultMode")),
        |v| v.as_str() == Some("bypassPermissions"),
    );
    setting(
        said,
        "permissions.disableBypassPermissionsMode",
        perms.and_then(|p| p.get("disableBypassPermissionsMode")),
        |_| false,
    );
    setting(
        said,
        "enableAllProjectMcpServers",
        root.get("enableAllProjectMcpServers"),
        is_true,
    );
    for key in ["enabledMcpjsonServers", "disabledMcpjsonServers"] {
        setting(said, key, root.get(key), |_| false);
    }
}

fn codex(root: &Value, said: &mut Said) {
    let one = |said: &mut Said, prefix: &str, table: &Value| {
        setting(
            said,
            &format!("{prefix}approval_policy"),
            table.get("approval_policy"),
            |v| v.as_str() == Some("never"),
        );
        setting(
            said,
            &format!("{prefix}sandbox_mode"),
            table.get("sandbox_mode"),
            |v| v.as_str() == Some("danger-full-access"),
        );
    };
    one(said, "", root);
    if let Some(Value::Object(profiles)) = root.get("profiles") {
        for (name, table) in profiles.iter().take(limits::CLIENT_RULES_PER_FILE_MAX) {
            let name = clean(name, limits::CLIENT_SETTING_CHARS_MAX);
            one(said, &format!("profiles.{name}."), table);
        }
    }
}

fn gemini(root: &Value, said: &mut Said) {
    // The nested keys (settings format v2) and their older flat names: a file may hold either.
    for (name, path) in [
        ("tools.autoAccept", &["tools", "autoAccept"][..]),
        ("autoAccept", &["autoAccept"][..]),
    ] {
        setting(said, name, at(root, path), is_true);
    }
    for (name, path) in [
        ("tools.sandbox", &["tools", "sandbox"][..]),
        ("sandbox", &["sandbox"][..]),
    ] {
        setting(said, name, at(root, path), |_| false);
    }
    setting(
        said,
        "general.defaultApprovalMode",
        at(root, &["general", "defaultApprovalMode"]),
        |v| v.as_str() == Some("yolo"),
    );
    setting(
        said,
        "security.disableYoloMode",
        at(root, &["security", "disableYoloMode"]),
        |_| false,
    );
    rules(said, "allow", at(root, &["tools", "allowed"]));
    rules(said, "allow", root.get("allowedTools"));
    rules(said, "deny", at(root, &["tools", "exclude"]));
    rules(said, "deny", root.get("excludeTools"));
    // `trust: true` on a server skips every confirmation of its tools.
    if let Some(Value::Object(servers)) = root.get("mcpServers") {
        for (alias, s) in servers.iter().take(limits::CLIENT_RULES_PER_FILE_MAX) {
            let alias = clean(alias, limits::CLIENT_SETTING_CHARS_MAX);
            setting(
                said,
                &format!("mcpServers.{alias}.trust"),
                s.get("trust"),
                is_true,
            );
        }
    }
}

fn vscode(root: &Value, said: &mut Said) {
    // VS Code's settings.json is flat: the dotted names are the keys themselves.
    for key in ["chat.tools.autoApprove", "chat.tools.global.autoApprove"] {
        setting(said, key, root.get(key), is_true);
    }
    setting(
        said,
        "chat.tools.terminal.enableAutoApprove",
        root.get("chat.tools.terminal.enableAutoApprove"),
        |_| false,
    );
    setting(
        said,
        "chat.agent.sandbox.enabled",
        root.get("chat.agent.sandbox.enabled"),
        |_| false,
    );
    setting(
        said,
        "chat.permissions.default",
        root.get("chat.permissions.default"),
        |_| false,
    );
    // `{"npm test": true, "rm": false}`: true auto-approves the command, false always asks.
    if let Some(Value::Object(m)) = root.get("chat.tools.terminal.autoApprove") {
        for (command, v) in m {
            let effect = match v {
                Value::Bool(true) => "allow",
                Value::Bool(false) => "ask",
                Value::Object(o) if o.get("approve").and_then(Value::as_bool) == Some(true) => {
                    "allow"
                }
                _ => "ask",
            };
            if said.rules.len() >= limits::CLIENT_RULES_PER_FILE_MAX {
                said.rules_omitted += 1;
                continue;
            }
            said.rules.push(Rule {
                effect,
                rule: clean(command, limits::CLIENT_RULE_CHARS_MAX),
            });
        }
    }
}

/// Text from a settings or skill file made safe to return: hidden characters (controls,
/// invisible and right-to-left ones) dropped, each word a credential could be masked by
/// `inspect`'s judgement (`--token=…`, `KEY=…`, `Bearer …`, token-shaped values), the word
/// after a secret name (`X-Api-Key: VALUE`, `aws_secret_access_key VALUE`), after `-u`/`--user`
/// and after `Bearer`/`Basic`/`Token` masked, `-pVALUE` masked, a URL cut to its scheme and
/// host. Text longer than `max` characters is never shown in part: it is replaced whole by a
/// note of its length.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let visible: String = text
        .chars()
        .map(|c| if crate::text::hidden(c) { ' ' } else { c })
        .collect();
    let words: Vec<String> = visible.split(' ').map(str::to_string).collect();
    let masked = inspect::redact_args(&words);
    let masked: Vec<String> = words
        .iter()
        .zip(masked)
        .map(|(w, m)| {
            // `X-Api-Key:` alone: its value is the next word, masked below; keep it as written.
            let key_alone = bare(w)
                .strip_suffix(':')
                .is_some_and(|k| !k.contains(':') && inspect::secret_key(k));
            attached(w).unwrap_or(if key_alone { w.clone() } else { m })
        })
        .collect();
    let masked = mask_following(&words, masked);
    let joined = masked
        .iter()
        .map(|w| userinfo_cut(&url_cut(w)))
        .collect::<Vec<_>>()
        .join(" ");
    let count = joined.chars().count();
    if count > max {
        return format!("({count} characters, longer than holdmap shows)");
    }
    joined
}

/// A word with leading quotes or brackets taken off (`"X-Api-Key:` in `curl -H "X-Api-Key: V"`).
fn bare(w: &str) -> &str {
    w.trim_start_matches(['"', '\'', '`', '(', '['])
}

/// A value attached to a flag that takes a password: `-pVALUE` (mysql), `-uUSER:PASS`,
/// `--user=USER:PASS` (curl).
fn attached(w: &str) -> Option<String> {
    let b = bare(w);
    let head = w.get(..w.len() - b.len()).unwrap_or("");
    if let Some(v) = b.strip_prefix("-p")
        && !v.is_empty()
    {
        return Some(format!("{head}-p{MASK}"));
    }
    if let Some(v) = b.strip_prefix("-u")
        && v.contains(':')
    {
        return Some(format!("{head}-u{MASK}"));
    }
    if let Some(v) = b.strip_prefix("--user=")
        && v.contains(':')
    {
        return Some(format!("{head}--user={MASK}"));
    }
    None
}

/// `Bearer`, `Basic`, `Token`: a word saying the next one is a credential.
fn auth_scheme(w: &str) -> bool {
    matches!(
        w.to_ascii_lowercase().as_str(),
        "bearer" | "basic" | "token"
    )
}

/// Whether the word after `w` is a credential: `w` is a secret name alone (`aws_secret_access_key`,
/// `X-Api-Key:`), an auth scheme (`Bearer`, `Authorization:Bearer`), or `-u`/`--user`.
fn masks_next(w: &str) -> bool {
    let b = bare(w);
    if b.is_empty() {
        return false;
    }
    if auth_scheme(b) || matches!(b, "-u" | "--user") {
        return true;
    }
    if let Some((k, v)) = b.split_once(':') {
        return (v.is_empty() && inspect::secret_key(k)) || auth_scheme(v);
    }
    !b.contains('=') && !b.starts_with('-') && inspect::secret_key(b)
}

/// `masked` with every word after one that [`masks_next`] masked too (judged on the words as
/// written). An auth scheme word in that place is kept and the word after it masked instead.
fn mask_following(words: &[String], mut masked: Vec<String>) -> Vec<String> {
    let mut pending = false;
    for (i, w) in words.iter().enumerate() {
        if pending && !w.is_empty() {
            if auth_scheme(bare(w)) {
                continue;
            }
            if let Some(m) = masked.get_mut(i) {
                *m = MASK.to_string();
            }
            pending = false;
            continue;
        }
        if masks_next(w) {
            pending = true;
        }
    }
    masked
}

/// The host (and port) of a URL: what stands between `scheme://` (and any `userinfo@`) and the
/// first `/`, `?` or `#`, returned only when it is plainly a host: a name of letters, digits,
/// `.` and `-` (or a bracketed address) with an optional numeric port, not token-shaped. None
/// otherwise, so no part of a userinfo is ever returned (`https://user:pa/ss@host` has `/` in
/// its password: "user:pa" is no host). When an `@` follows in the path and the authority holds
/// none, the authority must have a dot (or be `localhost` or an address): `https://tok/en@host`
/// may be a userinfo holding a `/`.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    host_of(rest).map(str::to_string)
}

fn host_of(rest: &str) -> Option<&str> {
    let before_query = rest.split(['?', '#']).next().unwrap_or("");
    let authority = before_query.split(['/', '\\']).next().unwrap_or("");
    let (host, had_userinfo) = match authority.rfind('@') {
        Some(i) => (authority.get(i + 1..)?, true),
        None => (authority, false),
    };
    let later_at = !had_userinfo
        && before_query
            .get(authority.len()..)
            .is_some_and(|path| path.contains('@'));
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']')?;
            if addr.is_empty()
                || !addr
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            {
                return None;
            }
            (None, after.strip_prefix(':'))
        }
        None => match host.split_once(':') {
            Some((n, p)) => (Some(n), Some(p)),
            None => (Some(host), None),
        },
    };
    if port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    if let Some(n) = name {
        let chars_ok = !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
        if !chars_ok || inspect::looks_like_token(n) {
            return None;
        }
        if later_at && !n.contains('.') && n != "localhost" {
            return None;
        }
    }
    Some(host)
}

/// A word shaped `user:password@host…` without a scheme (an image or a DSN written bare) loses
/// what stands before its last `@`. `host:5000/img@sha256:…` keeps it: a `/` after the colon
/// says it is a host and port, not a password.
fn userinfo_cut(word: &str) -> String {
    if word.contains("://") {
        return word.to_string();
    }
    match word.rsplit_once('@') {
        Some((before, after))
            if before
                .split_once(':')
                .is_some_and(|(_, pass)| !pass.contains('/')) =>
        {
            let b = bare(before);
            let head = before.get(..before.len() - b.len()).unwrap_or("");
            format!("{head}{MASK}@{after}")
        }
        _ => word.to_string(),
    }
}

/// A word holding `scheme://…` keeps what comes before it and `scheme://host` (see
/// [`url_host`]), then `/…` when something followed the host; `scheme://…` when no plain host
/// can be told. Its path, query and userinfo are never shown.
fn url_cut(word: &str) -> String {
    let Some(i) = word.find("://") else {
        return word.to_string();
    };
    let (head, rest) = word.split_at(i + 3);
    match host_of(rest) {
        Some(host) if rest == host => format!("{head}{host}"),
        Some(host) => format!("{head}{host}/…"),
        None => format!("{head}…"),
    }
}

#[cfg(test)]
mod tests;
