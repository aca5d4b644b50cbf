//! MCP clients' config files: where each client keeps its servers, what they say, and rewriting
//! the stdio ones to run through `holdcall serve` (for `holdcall init`, `doctor`, `inventory`).
//!
//! Owns: finding the files, reading them (JSON/JSONC by byte span, Codex TOML by byte span),
//! planning the rewrite, checking it by re-reading, and (in `backup`) writing it safely.
//! Must never: write a file without a backup first, print an environment value or anything of
//! `~/.claude.json` but its MCP keys, change a byte outside the values it rewrites, or touch a
//! file it could not read completely.

pub mod backup;
pub mod inspect;
pub mod json;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::ops::Range;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::limits;

/// Errors of finding, reading and writing client config files.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ClientConfigError {
    #[error("cannot tell where your home directory is: HOME is not set")]
    #[diagnostic(
        code(holdcall::clientconfig::no_home),
        help("set HOME to your home directory and run the command again")
    )]
    NoHome,
    #[error("cannot find the holdcall binary that is running: {0}")]
    #[diagnostic(
        code(holdcall::clientconfig::exe),
        help("run holdcall by its full path, from a directory that still exists")
    )]
    Exe(String),
    #[error("the holdcall home {0} is not UTF-8, so it cannot be written into a client's config")]
    #[diagnostic(
        code(holdcall::clientconfig::home_not_utf8),
        help(
            "choose a home whose path is UTF-8 (`--home DIR` or HOLDCALL_HOME) and run the command again"
        )
    )]
    HomeNotUtf8(PathBuf),
    #[error("{path}: {reason}")]
    #[diagnostic(
        code(holdcall::clientconfig::refused),
        help(
            "nothing was written; fix the file (or move it aside) so its client can read it too, then run the command again"
        )
    )]
    Refused { path: PathBuf, reason: String },
    #[error("cannot {action} {path}: {source}")]
    #[diagnostic(
        code(holdcall::clientconfig::io),
        help("check that the file and its directory exist, belong to you and are writable")
    )]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::clientconfig::undo),
        help(
            "`holdcall init --undo` takes a backup `holdcall init --write` reported; list them in <holdcall home>/backups/index.jsonl"
        )
    )]
    Undo(String),
    #[error(
        "{path} changed since holdcall wrote it (backup {backup}); undoing would lose those changes"
    )]
    #[diagnostic(
        code(holdcall::clientconfig::changed_since),
        help(
            "look at the file first; to restore the backup anyway (the current file is backed up before), add --force"
        )
    )]
    ChangedSince { path: PathBuf, backup: String },
    #[error("{path} changed while holdcall was rewriting it")]
    #[diagnostic(
        code(holdcall::clientconfig::raced),
        help(
            "nothing was written; close the client that is writing it, then run the command again"
        )
    )]
    Raced { path: PathBuf },
    #[error("holdcall's rewrite of {path} did not read back as intended: {why}")]
    #[diagnostic(
        code(holdcall::clientconfig::verify),
        help("nothing was written; please report this with the file's layout (not its values)")
    )]
    EditCheck { path: PathBuf, why: String },
}

/// The clients Holdcall knows. The id is what `--client` gets in a routed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientId {
    ClaudeCode,
    Cursor,
    ClaudeDesktop,
    VsCode,
    Codex,
    Windsurf,
    GeminiCli,
}

impl ClientId {
    pub fn id(self) -> &'static str {
        match self {
            ClientId::ClaudeCode => "claude-code",
            ClientId::Cursor => "cursor",
            ClientId::ClaudeDesktop => "claude-desktop",
            ClientId::VsCode => "vscode",
            ClientId::Codex => "codex",
            ClientId::Windsurf => "windsurf",
            ClientId::GeminiCli => "gemini-cli",
        }
    }
}

/// How a file is written down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json(json::Dialect),
    Toml,
}

/// Where in a file the servers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A top-level `mcpServers` object (Cursor, Claude Desktop, Windsurf, Gemini, `.mcp.json`).
    McpServers,
    /// `~/.claude.json`: top-level `mcpServers` (user scope) and `projects.<dir>.mcpServers`
    /// (local scope). Nothing else in it is read.
    ClaudeJson,
    /// A top-level `servers` object (VS Code).
    Servers,
    /// `[mcp_servers.<name>]` tables (Codex).
    CodexToml,
}

/// One config file a client reads.
#[derive(Debug, Clone)]
pub struct FileSpec {
    pub client: ClientId,
    /// `user` (the whole account) or `project` (the current directory's project).
    pub scope: &'static str,
    pub path: PathBuf,
    pub format: Format,
    pub layout: Layout,
}

/// The directories the client files hang off. Built from the environment, so tests can point
/// `HOME` and `XDG_CONFIG_HOME` at a temporary directory.
#[derive(Debug, Clone)]
pub struct Places {
    pub home: PathBuf,
    /// Per-user application config: `$XDG_CONFIG_HOME` or `~/.config` (macOS:
    /// `~/Library/Application Support`).
    pub config_dir: PathBuf,
    /// `$CODEX_HOME` or `~/.codex`.
    pub codex_home: PathBuf,
    /// The project whose files (`.mcp.json`, `.cursor/`, `.vscode/`, `.gemini/`) are read: the
    /// current directory.
    pub project: PathBuf,
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

impl Places {
    pub fn from_env() -> Result<Places, ClientConfigError> {
        let home = env_dir("HOME").ok_or(ClientConfigError::NoHome)?;
        let config_dir = if cfg!(target_os = "macos") {
            home.join("Library/Application Support")
        } else {
            env_dir("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"))
        };
        let codex_home = env_dir("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
        let project = std::env::current_dir().map_err(|source| ClientConfigError::Io {
            action: "find",
            path: PathBuf::from("."),
            source,
        })?;
        Ok(Places {
            home,
            config_dir,
            codex_home,
            project,
        })
    }

    /// Every file Holdcall looks at, in a fixed order (see docs/clients.md for the sources).
    pub fn files(&self) -> Vec<FileSpec> {
        use ClientId::*;
        let strict = Format::Json(json::Dialect::STRICT);
        let jsonc = Format::Json(json::Dialect {
            comments: true,
            trailing_commas: true,
        });
        let comments = Format::Json(json::Dialect {
            comments: true,
            trailing_commas: false,
        });
        let f = |client, scope, path: PathBuf, format, layout| FileSpec {
            client,
            scope,
            path,
            format,
            layout,
        };
        let h = &self.home;
        let p = &self.project;
        let all = vec![
            f(
                ClaudeCode,
                "user",
                h.join(".claude.json"),
                strict,
                Layout::ClaudeJson,
            ),
            f(
                ClaudeCode,
                "project",
                p.join(".mcp.json"),
                strict,
                Layout::McpServers,
            ),
            f(
                Cursor,
                "user",
                h.join(".cursor/mcp.json"),
                strict,
                Layout::McpServers,
            ),
            f(
                Cursor,
                "project",
                p.join(".cursor/mcp.json"),
                strict,
                Layout::McpServers,
            ),
            f(
                ClaudeDesktop,
                "user",
                self.config_dir.join("Claude/claude_desktop_config.json"),
                strict,
                Layout::McpServers,
            ),
            f(
                VsCode,
                "user",
                self.config_dir.join("Code/User/mcp.json"),
                jsonc,
                Layout::Servers,
            ),
            f(
                VsCode,
                "project",
                p.join(".vscode/mcp.json"),
                jsonc,
                Layout::Servers,
            ),
            f(
                Codex,
                "user",
                self.codex_home.join("config.toml"),
                Format::Toml,
                Layout::CodexToml,
            ),
            f(
                Windsurf,
                "user",
                h.join(".codeium/windsurf/mcp_config.json"),
                strict,
                Layout::McpServers,
            ),
            f(
                GeminiCli,
                "user",
                h.join(".gemini/settings.json"),
                comments,
                Layout::McpServers,
            ),
            f(
                GeminiCli,
                "project",
                p.join(".gemini/settings.json"),
                comments,
                Layout::McpServers,
            ),
        ];
        // The project may be the home itself: read each file once.
        let mut seen: Vec<PathBuf> = Vec::new();
        all.into_iter()
            .filter(|s| {
                let key = std::fs::canonicalize(&s.path).unwrap_or_else(|_| s.path.clone());
                if seen.contains(&key) {
                    false
                } else {
                    seen.push(key);
                    true
                }
            })
            .collect()
    }
}

/// What one server entry is, as far as Holdcall is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// `holdcall serve …` whose command is this running holdcall binary (the same file: device
    /// and inode), named by its absolute path or found on PATH.
    Routed,
    /// `holdcall serve …` through a command that is not this binary: another file named
    /// holdcall, one that does not exist, or a relative path. Not routed: whatever runs there
    /// decides nothing Holdcall knows of. `init --write` points it at this binary.
    OtherHoldcall(OtherHoldcall),
    /// A stdio server that does not go through Holdcall yet.
    NotRouted,
    /// An HTTP/SSE server: reported, never rewritten.
    Remote,
    /// Not a shape Holdcall understands (no command, args not a list of strings, …): left alone.
    Unrecognized(String),
}

/// A `holdcall serve` entry whose command is not this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherHoldcall {
    /// The command as written in the file.
    pub command: String,
    /// What the command resolves to (an absolute path, or the file PATH finds); None when it
    /// names nothing that exists.
    pub resolved: Option<PathBuf>,
}

impl OtherHoldcall {
    /// Why the entry is not routed, in words (the paths through `inspect::printable`).
    pub fn reason(&self) -> String {
        let command = crate::text::visible(&self.command);
        match &self.resolved {
            Some(p) => format!(
                "routed through another holdcall at {}, not this one",
                crate::text::visible(&p.to_string_lossy())
            ),
            None if !self.command.contains('/') => {
                format!("routed through `{command}`, which PATH does not find")
            }
            None if !self.command.starts_with('/') => format!(
                "routed through the relative path {command}, which holdcall cannot resolve as the client would"
            ),
            None => format!("routed through a holdcall that does not exist at {command}"),
        }
    }

    /// The command names an absolute path where nothing exists (moved or uninstalled).
    pub fn missing(&self) -> bool {
        self.resolved.is_none() && self.command.starts_with('/')
    }
}

/// How to tell whether an entry's command is this holdcall.
#[derive(Debug, Clone)]
pub enum Judge {
    /// The running binary's device and inode, and the PATH a bare command name is looked up
    /// in: this process's own `PATH` (the one `init`, `doctor` and `inventory` run with).
    /// `this: None`: the running binary could not be found, so no command is this binary.
    Running {
        this: Option<(u64, u64)>,
        path: Option<OsString>,
    },
    /// Exactly this command text (to re-read a planned rewrite, whose command is this binary's
    /// absolute path by construction).
    Spelled(String),
}

impl Judge {
    /// The running binary (`std::env::current_exe`, its metadata followed through symlinks)
    /// and this process's PATH.
    pub fn this_binary() -> Judge {
        let this = std::env::current_exe()
            .and_then(std::fs::metadata)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Judge::Running {
            this,
            path: std::env::var_os("PATH"),
        }
    }

    /// Whether `command` is this binary: Ok(()) when it is, else what it resolves to.
    fn check(&self, command: &str) -> Result<(), Option<PathBuf>> {
        match self {
            Judge::Spelled(s) if s == command => Ok(()),
            Judge::Spelled(_) => Err(resolve_command(command, None)),
            Judge::Running { this, path } => {
                let found = resolve_command(command, path.as_deref());
                let same = found
                    .as_ref()
                    .and_then(|p| std::fs::metadata(p).ok())
                    .is_some_and(|m| this.is_some_and(|t| t == (m.dev(), m.ino())));
                if same { Ok(()) } else { Err(found) }
            }
        }
    }
}

/// The file a client would run for `command`, as `execvp` finds it: a path with a `/` is taken
/// as written when absolute (a relative one depends on the client's working directory, which
/// holdcall cannot know: None); a bare name is the first executable regular file of that name
/// in the directories of `path` (empty entries skipped). None when nothing exists there.
pub fn resolve_command(command: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = Path::new(command);
        return (p.is_absolute() && std::fs::metadata(p).is_ok()).then(|| p.to_path_buf());
    }
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(command))
        .find(|p| executable(p))
}

impl EntryState {
    pub fn label(&self) -> &'static str {
        match self {
            EntryState::Routed => "routed",
            EntryState::NotRouted | EntryState::OtherHoldcall(_) => "not routed",
            EntryState::Remote => "remote",
            EntryState::Unrecognized(_) => "unrecognized",
        }
    }
}

/// Where a rewrite edits an entry.
#[derive(Debug, Clone)]
struct EditSite {
    /// The command value, quotes included.
    command: Range<usize>,
    /// The args array: just past its `[`, and where its first element starts (None: empty).
    args: Option<(usize, Option<usize>)>,
    /// Where the key `command` starts (to copy its indentation when args must be added).
    command_key: usize,
}

/// One configured MCP server.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The path of keys to the servers object, e.g. `["projects", "/p", "mcpServers"]`.
    pub group: Vec<String>,
    /// `user`, `project`, or `local <dir>` (Claude Code's per-project entries in ~/.claude.json).
    pub scope: String,
    pub name: String,
    /// The connector name it runs under: the one in its `holdcall serve` arguments when routed,
    /// else the one `init` would give it (its name, or a sanitised form; see `connector_name`).
    pub connector: String,
    /// For a routed entry without `--connector`: what its connector name was derived from, in
    /// words (`holdcall serve` derives it the same way; see `derived_connector`).
    pub connector_from: Option<String>,
    pub state: EntryState,
    /// `stdio`, `http`, `sse`, or `unknown`.
    pub transport: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Names only: values are never kept (but see `home_env`).
    pub env_names: Vec<String>,
    /// The `--home` its `holdcall … serve` arguments give, when routed.
    pub home_arg: Option<String>,
    /// The values its own `env` block gives the variables that choose a holdcall home
    /// ([`HOME_VARS`]): paths, kept only to tell which home its relay would use.
    pub home_env: Vec<(String, String)>,
    pub url: Option<String>,
    site: Option<EditSite>,
}

impl Entry {
    /// The command and arguments the server really runs: after `--` when routed.
    pub fn upstream(&self) -> Option<(String, Vec<String>)> {
        let command = self.command.clone()?;
        if matches!(
            self.state,
            EntryState::Routed | EntryState::OtherHoldcall(_)
        ) {
            let at = self.args.iter().position(|a| a == "--")?;
            let mut rest = self.args.get(at + 1..)?.iter().cloned();
            let cmd = rest.next()?;
            return Some((cmd, rest.collect()));
        }
        Some((command, self.args.clone()))
    }

    pub fn group_label(&self) -> String {
        match self.group.as_slice() {
            [p, dir, k] if p == "projects" => format!("projects[{dir:?}].{k}"),
            other => other.join("."),
        }
    }
}

/// A file as read: missing, refused (with the reason), or its entries.
#[derive(Debug)]
pub enum FileState {
    Missing,
    Refused(String),
    Read(Loaded),
}

#[derive(Debug, Clone)]
pub struct Loaded {
    pub text: String,
    pub entries: Vec<Entry>,
}

/// Reads one client file. Never fails: a file that cannot be read is `Refused` with the reason.
pub fn load(spec: &FileSpec) -> FileState {
    let text = match read_capped(&spec.path) {
        Ok(Some(t)) => t,
        Ok(None) => return FileState::Missing,
        Err(reason) => return FileState::Refused(reason),
    };
    match entries_of(spec, &text) {
        Ok(entries) => FileState::Read(Loaded { text, entries }),
        Err(reason) => FileState::Refused(reason),
    }
}

fn read_capped(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.len() > limits::CLIENT_CONFIG_BYTES_MAX as u64 {
        return Err(format!(
            "it is {} bytes; holdcall reads client files of at most {} bytes",
            meta.len(),
            limits::CLIENT_CONFIG_BYTES_MAX
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".to_string())
}

/// Parses a file's text into its entries (or why it cannot), judging routed entries against
/// the running binary ([`Judge::this_binary`]).
pub fn entries_of(spec: &FileSpec, text: &str) -> Result<Vec<Entry>, String> {
    entries_judged(spec, text, &Judge::this_binary())
}

/// [`entries_of`] with the judge of which commands are this holdcall given.
pub fn entries_judged(spec: &FileSpec, text: &str, judge: &Judge) -> Result<Vec<Entry>, String> {
    match spec.format {
        Format::Json(dialect) => {
            let root = json::parse(text, dialect).map_err(|e| format!("not valid JSON: {e}"))?;
            json_entries(spec, text, &root, judge)
        }
        Format::Toml => toml_entries(text, judge),
    }
}

fn shape(what: &str) -> String {
    format!("not the expected shape: {what}")
}

fn json_entries(
    spec: &FileSpec,
    text: &str,
    root: &json::Node,
    judge: &Judge,
) -> Result<Vec<Entry>, String> {
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
            judge,
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
                        judge,
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
    judge: &Judge,
    out: &mut Vec<Entry>,
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
            judge,
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

fn json_entry(
    spec: &FileSpec,
    text: &str,
    name: &str,
    v: &json::Node,
    group: Vec<String>,
    scope: String,
    judge: &Judge,
) -> Entry {
    let mut e = Entry {
        group,
        scope,
        name: name.to_string(),
        connector: String::new(),
        connector_from: None,
        state: EntryState::NotRouted,
        transport: "stdio".into(),
        command: None,
        args: Vec::new(),
        env_names: Vec::new(),
        home_arg: None,
        home_env: Vec::new(),
        url: None,
        site: None,
    };
    if v.members().is_none() {
        e.state = EntryState::Unrecognized("not an object".into());
        e.transport = "unknown".into();
        return e;
    }
    if let Some(env) = v.get("env").and_then(json::Node::members) {
        e.env_names = env.iter().map(|m| m.key.clone()).collect();
        e.home_env = env
            .iter()
            .filter(|m| HOME_VARS.contains(&m.key.as_str()))
            .filter_map(|m| m.value.as_str().map(|v| (m.key.clone(), v.to_string())))
            .collect();
    }
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
    if url.is_some() || remote_type {
        e.state = EntryState::Remote;
        e.transport = match (declared.as_deref(), url.as_ref().map(|u| u.0)) {
            (Some("sse"), _) => "sse".into(),
            (Some(_), _) => "http".into(),
            (None, Some("httpUrl")) => "http".into(),
            // Gemini CLI reads a bare `url` as SSE; Cursor and Windsurf decide by probing.
            (None, Some("url")) if spec.client == ClientId::GeminiCli => "sse".into(),
            (None, _) => "http".into(),
        };
        e.url = url.map(|u| u.1);
        return e;
    }
    let Some(cmd_node) = v.get("command") else {
        e.state = EntryState::Unrecognized("it has no command".into());
        e.transport = "unknown".into();
        return e;
    };
    let Some(command) = cmd_node.as_str().filter(|c| !c.trim().is_empty()) else {
        e.state = EntryState::Unrecognized("its command is not a non-empty string".into());
        return e;
    };
    e.command = Some(command.to_string());
    let mut args_site = None;
    if let Some(args) = v.get("args") {
        let Some(items) = args.elements() else {
            e.state = EntryState::Unrecognized("its args are not a list".into());
            return e;
        };
        let mut strings = Vec::new();
        for it in items {
            match it.as_str() {
                Some(s) => strings.push(s.to_string()),
                None => {
                    e.state = EntryState::Unrecognized("its args are not all strings".into());
                    return e;
                }
            }
        }
        e.args = strings;
        let open = args.span.start + 1;
        args_site = Some((open, first_element_start(text, open, Comment::Slash)));
    }
    let key_start = v
        .members()
        .and_then(|ms| ms.iter().find(|m| m.key == "command"))
        .map(|m| m.key_span.start)
        .unwrap_or(cmd_node.span.start);
    e.site = Some(EditSite {
        command: cmd_node.span.clone(),
        args: args_site,
        command_key: key_start,
    });
    classify_stdio(&mut e, judge);
    e
}

/// Routed, routed through another holdcall, or not routed, for an entry with a command; and
/// the connector it runs (or would run) under.
fn classify_stdio(e: &mut Entry, judge: &Judge) {
    let command = e.command.as_deref().unwrap_or("");
    let is_this = judge.check(command);
    let serve = serve_args(&e.args);
    if let Some(serve) = serve.filter(|_| is_this.is_ok() || is_holdcall(command)) {
        e.state = match is_this {
            Ok(()) => EntryState::Routed,
            Err(resolved) => EntryState::OtherHoldcall(OtherHoldcall {
                command: command.to_string(),
                resolved,
            }),
        };
        e.home_arg = serve.home;
        match serve.connector {
            Some(c) => e.connector = c,
            None => {
                // `serve` without --connector: the relay derives the name from its server
                // command, and so does this.
                if let Some((cmd, args)) = e.upstream() {
                    let (c, from) = derived_connector(&cmd, &args);
                    e.connector = c;
                    e.connector_from = Some(from);
                }
            }
        }
    } else {
        e.state = EntryState::NotRouted;
        e.connector = connector_name(&e.name);
    }
}

/// What `holdcall` arguments of the shape `[--home DIR] serve [OPTIONS…] [-- CMD…]` say.
struct ServeArgs {
    home: Option<String>,
    connector: Option<String>,
}

/// The `serve` arguments of a holdcall command line, or None when it is not `serve`. `--home`
/// is global, so it may come before or after `serve`; options end at `--`.
fn serve_args(args: &[String]) -> Option<ServeArgs> {
    let mut out = ServeArgs {
        home: None,
        connector: None,
    };
    let mut it = args.iter();
    let mut serve = false;
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == "serve" && !serve {
            serve = true;
            continue;
        }
        let mut value = |flag: &str| -> Option<Option<String>> {
            if a == flag {
                Some(it.next().cloned())
            } else {
                a.strip_prefix(flag)
                    .and_then(|v| v.strip_prefix('='))
                    .map(|v| Some(v.to_string()))
            }
        };
        if let Some(v) = value("--home") {
            out.home = v;
        } else if !serve {
            // Only --home may come before `serve`.
            return None;
        } else if let Some(v) = value("--connector") {
            out.connector = v;
        }
    }
    serve.then_some(out)
}

/// The variables that choose a holdcall home when `--home` is not given (see
/// `config::Home::resolve`).
pub const HOME_VARS: [&str; 3] = ["HOLDCALL_HOME", "XDG_DATA_HOME", "HOME"];

impl Entry {
    /// The home this entry's relay would use if its client started it with the MCP SDKs'
    /// minimal environment (only HOME, LOGNAME, PATH, SHELL, TERM and USER, the client's own,
    /// here `user_home`): its `--home` if it has one, else what its own `env` block and HOME
    /// name. None when no home can be told (no HOME at all).
    pub fn relay_home(&self, user_home: &Path) -> Option<PathBuf> {
        if let Some(h) = &self.home_arg {
            return Some(
                crate::config::Home::at(PathBuf::from(h))
                    .dir()
                    .to_path_buf(),
            );
        }
        let var = |name: &str| -> Option<OsString> {
            match self.home_env.iter().find(|(k, _)| k == name) {
                Some((_, v)) => Some(OsString::from(v)),
                None if name == "HOME" => Some(user_home.as_os_str().to_os_string()),
                None => None,
            }
        };
        crate::config::Home::resolve(var)
            .ok()
            .map(|h| h.dir().to_path_buf())
    }

    /// The other home this routed entry's relay would land on under a minimal environment
    /// (see `relay_home`), or None when it lands on `home`.
    pub fn lands_elsewhere(&self, home: &Path, user_home: &Path) -> Option<PathBuf> {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        match self.relay_home(user_home) {
            Some(theirs) if real(&theirs) == real(home) => None,
            Some(theirs) => Some(theirs),
            None => Some(PathBuf::from("(no home: HOME is not set)")),
        }
    }

    /// An entry `init` re-routes to `home`: routed (through this holdcall or another) without a
    /// `--home`, whose relay would land on another home.
    fn needs_home(&self, target: &Target) -> bool {
        matches!(
            self.state,
            EntryState::Routed | EntryState::OtherHoldcall(_)
        ) && self.home_arg.is_none()
            && self
                .lands_elsewhere(Path::new(target.home), target.user_home)
                .is_some()
    }
}

/// The connector name for an entry name: the name itself when it is a valid connector name;
/// else every run of other characters becomes one `-`, the ends are trimmed to a letter or
/// digit, and the length is capped; a name with no usable character becomes
/// `server-<8 hex of its SHA-256>`. Always valid (decision 0008).
pub fn connector_name(name: &str) -> String {
    if crate::policy::validate_scope_name("connector", name).is_ok() {
        return name.to_string();
    }
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed: String = out
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(limits::SCOPE_NAME_CHARS_MAX)
        .collect();
    let trimmed = trimmed
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string();
    if crate::policy::validate_scope_name("connector", &trimmed).is_ok() {
        return trimmed;
    }
    let digest = crate::ids::sha256_hex(name.as_bytes());
    format!("server-{}", digest.get(..8).unwrap_or(&digest))
}

/// The connector name `holdcall serve` without `--connector` runs a server command under, and
/// what it was derived from in words: the name `inspect::server_name` reads from the command,
/// made valid by `connector_name`.
pub fn derived_connector(command: &str, args: &[String]) -> (String, String) {
    let (raw, from) = inspect::server_name(command, args);
    let name = if raw.is_empty() {
        connector_name(command)
    } else {
        connector_name(&raw)
    };
    (name, from)
}

/// A command named holdcall (any path): if its arguments are `serve …`, it claims to route.
/// Whether it is *this* holdcall is [`Judge`]'s question.
pub fn is_holdcall(command: &str) -> bool {
    let base = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    base == "holdcall" || base == "holdcall.exe"
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
}

fn toml_entries(text: &str, judge: &Judge) -> Result<Vec<Entry>, String> {
    // Parse once as a plain document for the error message a person can act on.
    let plain = toml::from_str::<toml::Table>(text).map_err(|e| {
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
    })?;
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
    let mut out = Vec::new();
    for (key, s) in servers {
        let name = key.get_ref().clone();
        let mut e = Entry {
            group: vec!["mcp_servers".into()],
            scope: "user".into(),
            connector: String::new(),
            connector_from: None,
            name,
            state: EntryState::NotRouted,
            transport: "stdio".into(),
            command: None,
            args: Vec::new(),
            env_names: Vec::new(),
            home_arg: None,
            home_env: Vec::new(),
            url: None,
            site: None,
        };
        if let Some(toml::Value::Table(env)) = &s.env {
            e.env_names = env.keys().cloned().collect();
            e.home_env = env
                .iter()
                .filter(|(k, _)| HOME_VARS.contains(&k.as_str()))
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect();
        }
        if let Some(url) = &s.url {
            e.state = EntryState::Remote;
            e.transport = "http".into();
            e.url = url.as_str().map(str::to_string);
            out.push(e);
            continue;
        }
        let Some(cmd) = &s.command else {
            e.state = EntryState::Unrecognized("it has no command".into());
            e.transport = "unknown".into();
            out.push(e);
            continue;
        };
        let Some(command) = cmd.get_ref().as_str().filter(|c| !c.trim().is_empty()) else {
            e.state = EntryState::Unrecognized("its command is not a non-empty string".into());
            out.push(e);
            continue;
        };
        e.command = Some(command.to_string());
        let mut args_site = None;
        if let Some(args) = &s.args {
            let Some(items) = args.get_ref().as_array() else {
                e.state = EntryState::Unrecognized("its args are not a list".into());
                out.push(e);
                continue;
            };
            let strings: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect();
            let Some(strings) = strings else {
                e.state = EntryState::Unrecognized("its args are not all strings".into());
                out.push(e);
                continue;
            };
            e.args = strings;
            let open = args.span().start + 1;
            args_site = Some((open, first_element_start(text, open, Comment::Hash)));
        }
        let span = cmd.span();
        e.site = Some(EditSite {
            command: span.clone(),
            args: args_site,
            command_key: key_start_on_line(text, span.start),
        });
        classify_stdio(&mut e, judge);
        out.push(e);
    }
    Ok(out)
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

// ---------------------------------------------------------------------------------------------
// The rewrite
// ---------------------------------------------------------------------------------------------

/// The arguments a routed entry gets before the original command: the absolute `home` first,
/// so the relay uses the home `init` ran with whatever environment its client gives it.
pub fn serve_prefix(client: ClientId, connector: &str, home: &str) -> Vec<String> {
    vec![
        "--home".into(),
        home.into(),
        "serve".into(),
        "--connector".into(),
        connector.into(),
        "--client".into(),
        client.id().into(),
        "--".into(),
    ]
}

/// The command a routed entry runs: the absolute path of this holdcall binary (decision 0008).
pub fn holdcall_command() -> Result<String, ClientConfigError> {
    let exe = std::env::current_exe().map_err(|e| ClientConfigError::Exe(e.to_string()))?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.to_str()
        .map(str::to_string)
        .ok_or_else(|| ClientConfigError::Exe(format!("{} is not UTF-8", exe.display())))
}

/// What `init` would do to one file.
#[derive(Debug, Clone)]
pub struct Plan {
    pub before: String,
    pub after: String,
    /// The entries rewritten (group, name).
    pub routed: Vec<(Vec<String>, String)>,
    /// The connector each rewritten entry runs under (group, name, connector).
    pub connectors: Vec<(Vec<String>, String, String)>,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The home routed entries must reach, and the user's HOME their client passes on.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The absolute home `init` runs with (its `--home`, `HOLDCALL_HOME` or data directory).
    pub home: &'a str,
    pub user_home: &'a Path,
}

/// Elements inserted at the front of an existing args array (`open` just past its `[`, `first`
/// where its first element starts): on lines of their own when the array has one element per
/// line.
fn front_insertion(
    text: &str,
    open: usize,
    first: Option<usize>,
    items: &[String],
) -> (Range<usize>, String) {
    let ws = first.and_then(|f| text.get(open..f)).unwrap_or("");
    match first {
        Some(_) if ws.contains('\n') => (open..open, insert_multiline(items, ws)),
        Some(f) => (f..f, format!("{}, ", items.join(", "))),
        None => (open..open, items.join(", ")),
    }
}

/// Plans the rewrite of every unrouted stdio entry with a valid name, of every entry routed
/// through another holdcall (its command becomes `holdcall`, its arguments stay), and of every
/// routed entry without `--home` whose relay would land on another home (it gets `--home`).
/// `None`: nothing to change.
pub fn plan(
    spec: &FileSpec,
    loaded: &Loaded,
    holdcall: &str,
    target: Target,
) -> Result<Option<Plan>, ClientConfigError> {
    let text = &loaded.text;
    let quote = |s: &str| match spec.format {
        Format::Json(_) => json_string(s),
        Format::Toml => toml_string(s),
    };
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut routed = Vec::new();
    let connectors = connectors_for(loaded);
    let mut planned: Vec<(Vec<String>, String, String)> = Vec::new();
    let home_items = [quote("--home"), quote(target.home)];
    for e in &loaded.entries {
        let rehome = e.needs_home(&target);
        if matches!(e.state, EntryState::OtherHoldcall(_)) || rehome {
            // Routed through another holdcall: point the command at this binary and keep the
            // arguments (`serve … -- <server>`), so the server is wrapped once, not twice. A
            // relay that would land on another home gets `--home` in front of them.
            let Some(site) = &e.site else { continue };
            if text.get(site.command.clone()).unwrap_or("").contains('\n') {
                continue;
            }
            if rehome {
                let Some((open, first)) = site.args else {
                    continue;
                };
                edits.push(front_insertion(text, open, first, &home_items));
            }
            edits.push((site.command.clone(), quote(holdcall)));
            routed.push((e.group.clone(), e.name.clone()));
            planned.push((e.group.clone(), e.name.clone(), e.connector.clone()));
            continue;
        }
        if e.state != EntryState::NotRouted {
            continue;
        }
        let connector = connectors
            .iter()
            .find(|(g, n, _)| g == &e.group && n == &e.name)
            .map(|(_, _, c)| c.clone())
            .unwrap_or_else(|| e.connector.clone());
        let Some(site) = &e.site else { continue };
        let raw_command = text.get(site.command.clone()).unwrap_or("");
        if raw_command.contains('\n') {
            // A multi-line string as a command: not a layout worth guessing about.
            continue;
        }
        let mut new_items: Vec<String> = serve_prefix(spec.client, &connector, target.home)
            .iter()
            .map(|a| quote(a))
            .collect();
        new_items.push(raw_command.to_string());
        let args_edit = match site.args {
            // One element per line: the new ones get lines of their own, with the first
            // original element's indentation, right after '['.
            Some((open, first)) => front_insertion(text, open, first, &new_items),
            None => {
                let items = new_items.join(", ");
                let line_start = text
                    .get(..site.command_key)
                    .and_then(|b| b.rfind('\n'))
                    .map(|i| i + 1)
                    .unwrap_or(0);
                let indent = text.get(line_start..site.command_key).unwrap_or("");
                let own_line = indent.chars().all(|c| c == ' ' || c == '\t');
                match spec.format {
                    Format::Json(_) => {
                        let ins = if own_line {
                            format!(",\n{indent}\"args\": [{items}]")
                        } else {
                            format!(", \"args\": [{items}]")
                        };
                        (site.command.end..site.command.end, ins)
                    }
                    Format::Toml => {
                        // A layout not understood: left alone, and the dry run says so.
                        let Some(ins) = toml_args_insertion(text, site, &items) else {
                            continue;
                        };
                        ins
                    }
                }
            }
        };
        edits.push((site.command.clone(), quote(holdcall)));
        edits.push(args_edit);
        routed.push((e.group.clone(), e.name.clone()));
        planned.push((e.group.clone(), e.name.clone(), connector));
    }
    if routed.is_empty() {
        return Ok(None);
    }
    let after = apply_edits(text, edits);
    check_edit(spec, loaded, &after, holdcall, target, &planned)?;
    Ok(Some(Plan {
        before: text.clone(),
        after,
        routed,
        connectors: planned,
    }))
}

/// The connector each unrouted entry of a file gets: its `connector_name`, made unique within
/// the file (a sanitised name that meets another entry's gets `-<4 hex>` of its own name).
pub fn connectors_for(loaded: &Loaded) -> Vec<(Vec<String>, String, String)> {
    let mut taken: Vec<String> = loaded
        .entries
        .iter()
        .filter(|e| {
            matches!(e.state, EntryState::Routed | EntryState::OtherHoldcall(_))
                || e.connector == e.name
        })
        .map(|e| e.connector.clone())
        .collect();
    let mut out = Vec::new();
    for e in &loaded.entries {
        if e.state != EntryState::NotRouted {
            continue;
        }
        let mut c = e.connector.clone();
        if c != e.name {
            if taken.contains(&c) {
                let digest = crate::ids::sha256_hex(e.name.as_bytes());
                let base: String = c.chars().take(limits::SCOPE_NAME_CHARS_MAX - 5).collect();
                c = format!("{base}-{}", digest.get(..4).unwrap_or(&digest));
            }
            taken.push(c.clone());
        }
        out.push((e.group.clone(), e.name.clone(), c));
    }
    out
}

/// Elements inserted after `[` in an array laid out one element per line: each new element on
/// its own line with the first original element's indentation.
fn insert_multiline(items: &[String], ws: &str) -> String {
    let indent = ws.rsplit('\n').next().unwrap_or("");
    let mut s = String::new();
    for item in items {
        s.push('\n');
        s.push_str(indent);
        s.push_str(item);
        s.push(',');
    }
    s
}

/// Where and what to insert for a Codex entry that has no `args`: a new `args = […]` line after
/// the command's line in a `[mcp_servers.x]` table (with the same dotted prefix, if any), or
/// `, args = […]` after the command in an inline table. `None` for a layout not understood.
fn toml_args_insertion(text: &str, site: &EditSite, items: &str) -> Option<(Range<usize>, String)> {
    let line_start = text
        .get(..site.command.start)
        .and_then(|b| b.rfind('\n'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let before_value = text.get(line_start..site.command.start)?;
    let trimmed = before_value.trim_start();
    let indent = before_value.get(..before_value.len() - trimmed.len())?;
    if trimmed.contains('{') || trimmed.contains(',') {
        return Some((
            site.command.end..site.command.end,
            format!(", args = [{items}]"),
        ));
    }
    // `command = ` or `x.command = ` (a dotted key under [mcp_servers]).
    let key = trimmed.trim_end().strip_suffix('=')?.trim_end();
    let prefix = key.strip_suffix("command")?;
    if !(prefix.is_empty() || prefix.ends_with('.')) {
        return None;
    }
    let line_end = text
        .get(site.command.end..)
        .and_then(|r| r.find('\n'))
        .map(|i| site.command.end + i)
        .unwrap_or(text.len());
    Some((
        line_end..line_end,
        format!("\n{indent}{prefix}args = [{items}]"),
    ))
}

fn apply_edits(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (r, new) in edits {
        out.push_str(text.get(at..r.start).unwrap_or(""));
        out.push_str(&new);
        at = r.end;
    }
    out.push_str(text.get(at..).unwrap_or(""));
    out
}

/// Re-reads the rewritten text and checks that it says exactly what the original said, except
/// that each rewritten entry's command is holdcall and its args are the serve prefix, the
/// original command and the original args (or, for an entry routed through another holdcall,
/// its args unchanged).
fn check_edit(
    spec: &FileSpec,
    loaded: &Loaded,
    after: &str,
    holdcall: &str,
    target: Target,
    routed: &[(Vec<String>, String, String)],
) -> Result<(), ClientConfigError> {
    let fail = |why: String| ClientConfigError::EditCheck {
        path: spec.path.clone(),
        why,
    };
    let expected_args = |group: &[String], name: &str, connector: &str| -> Vec<String> {
        let e = loaded
            .entries
            .iter()
            .find(|e| e.group == group && e.name == name);
        if let Some(e) = e.filter(|e| e.needs_home(&target)) {
            let mut v = vec!["--home".to_string(), target.home.to_string()];
            v.extend(e.args.iter().cloned());
            return v;
        }
        if let Some(e) = e.filter(|e| matches!(e.state, EntryState::OtherHoldcall(_))) {
            return e.args.clone();
        }
        let mut v = serve_prefix(spec.client, connector, target.home);
        if let Some(e) = e {
            v.extend(e.command.clone());
            v.extend(e.args.iter().cloned());
        }
        v
    };
    match spec.format {
        Format::Json(dialect) => {
            let old = json::parse(&loaded.text, dialect)
                .map_err(|e| fail(e.to_string()))?
                .to_value(&loaded.text);
            let new = json::parse(after, dialect)
                .map_err(|e| fail(format!("it no longer parses: {e}")))?
                .to_value(after);
            let mut want = old;
            for (group, name, connector) in routed {
                let mut cur = &mut want;
                for k in group.iter().chain(std::iter::once(name)) {
                    cur = cur
                        .get_mut(k)
                        .ok_or_else(|| fail(format!("{k} vanished")))?;
                }
                let obj = cur
                    .as_object_mut()
                    .ok_or_else(|| fail("entry is not an object".into()))?;
                obj.insert("command".into(), serde_json::Value::from(holdcall));
                obj.insert(
                    "args".into(),
                    serde_json::Value::from(expected_args(group, name, connector)),
                );
            }
            if want != new {
                return Err(fail("other values changed too".into()));
            }
        }
        Format::Toml => {
            let old: toml::Table =
                toml::from_str(&loaded.text).map_err(|e| fail(e.message().to_string()))?;
            let new: toml::Table = toml::from_str(after)
                .map_err(|e| fail(format!("it no longer parses: {}", e.message())))?;
            let mut want = old;
            for (group, name, connector) in routed {
                let entry = group
                    .iter()
                    .chain(std::iter::once(name))
                    .try_fold(&mut want, |t, k| {
                        t.get_mut(k).and_then(toml::Value::as_table_mut)
                    })
                    .ok_or_else(|| fail(format!("{name} vanished")))?;
                entry.insert("command".into(), toml::Value::from(holdcall));
                entry.insert(
                    "args".into(),
                    toml::Value::Array(
                        expected_args(group, name, connector)
                            .into_iter()
                            .map(toml::Value::from)
                            .collect(),
                    ),
                );
            }
            if want != new {
                return Err(fail("other values changed too".into()));
            }
        }
    }
    let entries =
        entries_judged(spec, after, &Judge::Spelled(holdcall.to_string())).map_err(fail)?;
    for (group, name, connector) in routed {
        let ok = entries.iter().any(|e| {
            &e.group == group
                && &e.name == name
                && e.state == EntryState::Routed
                && &e.connector == connector
        });
        if !ok {
            return Err(fail(format!("{name} does not read as routed")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
