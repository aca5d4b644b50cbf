//! MCP clients' config files, shared by every binary: where each client (Claude Code, Claude
//! Desktop, Cursor, VS Code, Codex, Windsurf, Gemini CLI) keeps its servers, how to read each
//! format (JSON, JSONC, Codex's TOML) by byte span, and what each configured server says, as a
//! neutral [`ServerEntry`] (its name, command, args, env names, URL and spans).
//!
//! Owns: finding the files ([`Places`]), reading them completely or refusing them with a reason
//! ([`read_file`], `entries`, `json`; every file through [`read_regular`]/[`read_head`]:
//! opened non-blocking, judged by the opened file), and the redaction and pinned judgement of what an entry
//! runs (`inspect`). Holdcall's judgement of an entry (routed through `holdcall serve`? to which
//! home?) and the rewrite, backups and undo of `init` are in `crate::routing`, on top of this.
//! Must never: import anything Holdcall-specific (only std, crates, `crate::limits`,
//! `crate::ids`, `crate::text` and the MCP scanner's helpers), write a file, keep an environment
//! value the caller did not ask for, read anything of `~/.claude.json` but its MCP keys, or put
//! a file's text in a refusal (refusals say where, never what), or open a file in a way that
//! can block (a FIFO named like a config file) or judge a path instead of the opened file.

mod entries;
pub(crate) mod inspect;
pub(crate) mod instructions;
pub mod json;
pub(crate) mod routed;
pub(crate) mod settings;
pub(crate) mod skills;

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::limits;

/// Errors of finding and reading client config files (Holdcall's own, of judging and rewriting
/// them, are `routing::RoutingError`). The codes keep their old `clientconfig` names: they are
/// output.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ClientConfigError {
    #[error("cannot tell where your home directory is: HOME is not set")]
    #[diagnostic(
        code(holdcall::clientconfig::no_home),
        help("set HOME to your home directory and run the command again")
    )]
    NoHome,
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
}

/// The clients Holdcall knows. The id is what `--client` gets in a routed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ClientId {
    ClaudeCode,
    Cursor,
    ClaudeDesktop,
    VsCode,
    Codex,
    Windsurf,
    GeminiCli,
}

impl ClientId {
    pub(crate) fn id(self) -> &'static str {
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
pub(crate) enum Format {
    Json(json::Flavour),
    Toml,
}

/// Where in a file the servers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
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
pub(crate) struct FileSpec {
    pub(crate) client: ClientId,
    /// `user` (the whole account) or `project` (the current directory's project).
    pub(crate) scope: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) format: Format,
    pub(crate) layout: Layout,
}

/// The directories the client files hang off. Built from the environment, so tests can point
/// `HOME` and `XDG_CONFIG_HOME` at a temporary directory. `pub` only because `doctor::Ctx`
/// (a `pub` struct) holds one.
#[derive(Debug, Clone)]
pub struct Places {
    pub(crate) home: PathBuf,
    /// Per-user application config: `$XDG_CONFIG_HOME` or `~/.config` (macOS:
    /// `~/Library/Application Support`).
    pub(crate) config_dir: PathBuf,
    /// `$CODEX_HOME` or `~/.codex`.
    pub(crate) codex_home: PathBuf,
    /// The project whose files (`.mcp.json`, `.cursor/`, `.vscode/`, `.gemini/`) are read: the
    /// current directory.
    pub(crate) project: PathBuf,
}

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

impl Places {
    pub(crate) fn from_env() -> Result<Places, ClientConfigError> {
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

    /// The same places with another project directory (an agent's working directory).
    pub(crate) fn with_project(&self, project: &Path) -> Places {
        Places {
            project: project.to_path_buf(),
            ..self.clone()
        }
    }

    /// Every file Holdcall looks at, in a fixed order (see docs/clients.md for the sources).
    /// Long because it is the table of files, one `f(…)` row each; nothing in it branches.
    pub(crate) fn files(&self) -> Vec<FileSpec> {
        use ClientId::*;
        let strict = Format::Json(json::Flavour::STRICT);
        let jsonc = Format::Json(json::Flavour {
            comments: true,
            trailing_commas: true,
        });
        let comments = Format::Json(json::Flavour {
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

/// Where an entry's values sit in its file: what a span edit needs to rewrite them.
#[derive(Debug, Clone)]
pub(crate) struct Spans {
    /// The command value, quotes included.
    pub(crate) command: Range<usize>,
    /// The args array: just past its `[`, and where its first element starts (None: empty).
    pub(crate) args: Option<(usize, Option<usize>)>,
    /// Where the key `command` starts (to copy its indentation when args must be added).
    pub(crate) command_key: usize,
}

/// What kind of server an entry configures, as far as its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A command (a non-empty string) with args that are a list of strings, or none.
    Stdio,
    /// An HTTP/SSE server (a URL, or a remote `type`).
    Remote,
    /// Not a shape the readers understand (no command, args not a list of strings, …).
    Unrecognized(String),
}

/// One configured MCP server, as its file says it: nothing here is anyone's judgement of it.
#[derive(Debug, Clone)]
pub(crate) struct ServerEntry {
    /// The path of keys to the servers object, e.g. `["projects", "/p", "mcpServers"]`.
    pub(crate) group: Vec<String>,
    /// `user`, `project`, or `local <dir>` (Claude Code's per-project entries in ~/.claude.json).
    pub(crate) scope: String,
    pub(crate) name: String,
    pub(crate) shape: Shape,
    /// `stdio`, `http`, `sse`, or `unknown`.
    pub(crate) transport: String,
    pub(crate) command: Option<String>,
    pub(crate) args: Vec<String>,
    /// Names only: values are never kept (but see `kept_env`).
    pub(crate) env_names: Vec<String>,
    /// The values its own `env` block gives the variables the reader was asked to keep (see
    /// [`read_file`]); every other value is dropped as it is read.
    pub(crate) kept_env: Vec<(String, String)>,
    pub(crate) url: Option<String>,
    /// The names of the HTTP headers a remote entry sends (`headers`, Codex's `http_headers` and
    /// `env_http_headers`): names only, values are never kept.
    pub(crate) header_names: Vec<String>,
    /// What the file says of the entry being on: `Some(false)` for `"disabled": true` (or
    /// Codex's `enabled = false`), `Some(true)` for an explicit `enabled`/`"disabled": false`,
    /// None when it says nothing (the client's default: on).
    pub(crate) enabled: Option<bool>,
    /// Where its command and args sit in the file (a stdio entry only).
    pub(crate) spans: Option<Spans>,
}

impl ServerEntry {
    pub(crate) fn group_label(&self) -> String {
        match self.group.as_slice() {
            [p, dir, k] if p == "projects" => format!("projects[{dir:?}].{k}"),
            other => other.join("."),
        }
    }
}

/// A file as read: missing, refused (with the reason), or its entries (neutral [`ServerEntry`]s, or
/// a view built on them).
#[derive(Debug)]
pub(crate) enum FileState<E = ServerEntry> {
    Missing,
    Refused(String),
    Read(Loaded<E>),
}

#[derive(Debug, Clone)]
pub(crate) struct Loaded<E = ServerEntry> {
    pub(crate) text: String,
    pub(crate) entries: Vec<E>,
}

/// Reads one client file, keeping the values of the env variables named in `kept_env`. Never
/// fails: a file that cannot be read is `Refused` with the reason.
pub(crate) fn read_file(spec: &FileSpec, kept_env: &[&str]) -> FileState {
    let text = match read_capped(&spec.path) {
        Ok(Some(t)) => t,
        Ok(None) => return FileState::Missing,
        Err(reason) => return FileState::Refused(reason),
    };
    match entries_of(spec, &text, kept_env) {
        Ok(entries) => FileState::Read(Loaded { text, entries }),
        Err(reason) => FileState::Refused(reason),
    }
}

pub(crate) use entries::entries_of;

fn read_capped(path: &Path) -> Result<Option<String>, String> {
    let bytes = match read_regular(path, limits::CLIENT_CONFIG_BYTES_MAX as u64) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(Refusal::TooBig(len)) => {
            return Err(format!(
                "it is {len} bytes; holdcall reads client files of at most {} bytes",
                limits::CLIENT_CONFIG_BYTES_MAX
            ));
        }
        Err(r) => return Err(r.to_string()),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".to_string())
}

/// Why [`read_regular`] read nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    NotRegular,
    /// The opened file's size, over the bound.
    TooBig(u64),
    /// The file grew past the bound while it was read.
    Grew(u64),
    Io(std::io::ErrorKind),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotRegular => write!(f, "it is not a regular file"),
            Refusal::TooBig(len) => write!(f, "it is {len} bytes, over holdmap's bound"),
            Refusal::Grew(max) => write!(
                f,
                "it grew past {max} bytes while being read; no part of it is used"
            ),
            Refusal::Io(kind) => write!(f, "cannot read it: {kind}"),
        }
    }
}

/// Opens `path` without blocking (a FIFO or a device named like a config file opens at once
/// instead of waiting for a writer), checks the OPENED file (fstat: a regular file of at most
/// `max` bytes, so a swap between a check and the open cannot slip past), and reads at most
/// `max` bytes of it. None when it does not exist. Symlinks are followed, as the clients follow
/// them.
pub(crate) fn read_regular(path: &Path, max: u64) -> Result<Option<Vec<u8>>, Refusal> {
    read_open(path, max, true)
}

/// [`read_regular`] of the first `max` bytes only: a longer file is read up to `max`, not
/// refused (a skill's header).
pub(crate) fn read_head(path: &Path, max: u64) -> Result<Option<Vec<u8>>, Refusal> {
    read_open(path, max, false)
}

fn read_open(path: &Path, max: u64, whole: bool) -> Result<Option<Vec<u8>>, Refusal> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Refusal::Io(e.kind())),
    };
    let meta = file.metadata().map_err(|e| Refusal::Io(e.kind()))?;
    if !meta.is_file() {
        return Err(Refusal::NotRegular);
    }
    if whole && meta.len() > max {
        return Err(Refusal::TooBig(meta.len()));
    }
    let mut bytes = Vec::new();
    // One byte past the cap: a file that grew since the fstat is refused, not cut.
    let cap = if whole { max.saturating_add(1) } else { max };
    file.take(cap)
        .read_to_end(&mut bytes)
        .map_err(|e| Refusal::Io(e.kind()))?;
    if whole && bytes.len() as u64 > max {
        return Err(Refusal::Grew(max));
    }
    Ok(Some(bytes))
}

/// A bounded listing of one folder (see [`bounded_entries`]).
#[derive(Debug, Default)]
pub(crate) struct Bounded {
    /// The entries `keep` accepted, at most the bound, sorted.
    pub(crate) kept: Vec<PathBuf>,
    /// Entries past the bound (counted by name only, never statted) or unreadable.
    pub(crate) omitted: usize,
    /// Why an existing folder could not be listed (an absent folder is simply empty).
    pub(crate) refused: Option<String>,
}

/// The entries of `dir` that `keep` accepts, at most `max`: past the bound, entries are counted,
/// never statted, so a huge folder costs neither memory nor a stat per entry. Shared by the
/// skills and instruction-file readers.
pub(crate) fn bounded_entries(dir: &Path, max: usize, keep: impl Fn(&Path) -> bool) -> Bounded {
    let mut out = Bounded::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.refused = Some(format!("cannot list it: {}", e.kind()));
            return out;
        }
    };
    for e in entries {
        if out.kept.len() >= max {
            out.omitted += 1;
            continue;
        }
        let Ok(e) = e else {
            out.omitted += 1;
            continue;
        };
        let path = e.path();
        if keep(&path) {
            out.kept.push(path);
        }
    }
    out.kept.sort();
    out
}

#[cfg(test)]
pub(crate) mod tests;
