//! Holdcall's judgement of the servers MCP clients are configured with, on top of the shared
//! readers in `crate::clients`: is an entry routed through `holdcall serve` by this very
//! binary ([`Judge`])? under which connector? would its relay reach this home? And the rewrite
//! `holdcall init` makes to route it (`plan`, checked by re-reading in `verify`), with its
//! backups and undo (`backup`). `doctor` and `inventory` read the same judgement.
//!
//! Owns: [`Routing`] and [`RoutedEntry`] (a [`ServerEntry`] with that judgement), connector
//! names for entries, the span edits, backups, `index.jsonl` and undo. Must never: write a file
//! without a backup and index line first, change a byte outside the values it rewrites, touch a
//! file the readers refused, call an entry routed whose command is not this binary, or print an
//! environment value (it keeps only the values of [`HOME_VARS`], to tell a relay's home).

pub(crate) mod backup;
mod plan;
mod verify;

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::clients::{
    self, ClientConfigError, ClientId, FileSpec, FileState, ServerEntry, Shape, inspect,
};
use crate::ids::sha256_hex;
use crate::limits;

pub(crate) use plan::{Plan, Target, plan};

/// Errors of routing clients through Holdcall: finding this binary, planning and checking a
/// rewrite, writing it with its backup, undoing it; and the readers' own errors. The codes keep
/// their old `clientconfig` names: they are output.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RoutingError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Clients(#[from] ClientConfigError),
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

/// One configured server with Holdcall's judgement of it. It reads as its [`ServerEntry`] (through
/// `Deref`): `e.name`, `e.command`, `e.args` are the file's; `state`, `connector` and `home_arg`
/// are the judgement.
#[derive(Debug, Clone)]
pub(crate) struct RoutedEntry {
    pub(crate) entry: ServerEntry,
    pub(crate) state: Routing,
    /// The connector name it runs under: the one in its `holdcall serve` arguments when routed,
    /// else the one `init` would give it (its name, or a sanitised form; see `connector_name`).
    pub(crate) connector: String,
    /// For a routed entry without `--connector`: what its connector name was derived from, in
    /// words (`holdcall serve` derives it the same way; see `derived_connector`).
    pub(crate) connector_from: Option<String>,
    /// The `--home` its `holdcall … serve` arguments give, when routed.
    pub(crate) home_arg: Option<String>,
}

impl std::ops::Deref for RoutedEntry {
    type Target = ServerEntry;
    fn deref(&self) -> &ServerEntry {
        &self.entry
    }
}

impl RoutedEntry {
    /// The command and arguments the server really runs: after `--` when routed.
    pub(crate) fn upstream(&self) -> Option<(String, Vec<String>)> {
        let command = self.command.clone()?;
        if matches!(self.state, Routing::Routed | Routing::OtherHoldcall(_)) {
            let at = self.args.iter().position(|a| a == "--")?;
            let mut rest = self.args.get(at + 1..)?.iter().cloned();
            let cmd = rest.next()?;
            return Some((cmd, rest.collect()));
        }
        Some((command, self.args.clone()))
    }
}

/// Reads one client file and judges its entries against the running binary. Never fails: a
/// file that cannot be read is `Refused` with the reason.
pub(crate) fn load(spec: &FileSpec) -> FileState<RoutedEntry> {
    match clients::read_file(spec, &HOME_VARS) {
        FileState::Missing => FileState::Missing,
        FileState::Refused(reason) => FileState::Refused(reason),
        FileState::Read(l) => {
            let judge = Judge::this_binary();
            FileState::Read(clients::Loaded {
                text: l.text,
                entries: l.entries.into_iter().map(|e| judged(e, &judge)).collect(),
            })
        }
    }
}

/// Parses a file's text into its entries (or why it cannot), judging routed entries against
/// the running binary ([`Judge::this_binary`]).
#[cfg(test)]
pub(crate) fn entries_of(spec: &FileSpec, text: &str) -> Result<Vec<RoutedEntry>, String> {
    entries_judged(spec, text, &Judge::this_binary())
}

/// A file's entries judged with the judge of which commands are this holdcall given.
pub(crate) fn entries_judged(
    spec: &FileSpec,
    text: &str,
    judge: &Judge,
) -> Result<Vec<RoutedEntry>, String> {
    let entries = clients::entries_of(spec, text, &HOME_VARS)?;
    Ok(entries.into_iter().map(|e| judged(e, judge)).collect())
}

/// Holdcall's judgement of one entry: remote and unrecognized entries as they are, a stdio one
/// routed, routed through another holdcall, or not routed (see `classify_stdio`).
fn judged(entry: ServerEntry, judge: &Judge) -> RoutedEntry {
    let state = match &entry.shape {
        Shape::Remote => Routing::Remote,
        Shape::Unrecognized(why) => Routing::Unrecognized(why.clone()),
        Shape::Stdio => Routing::NotRouted,
    };
    let stdio = entry.shape == Shape::Stdio;
    let mut e = RoutedEntry {
        entry,
        state,
        connector: String::new(),
        connector_from: None,
        home_arg: None,
    };
    if stdio {
        classify_stdio(&mut e, judge);
    }
    e
}

/// What one server entry is, as far as Holdcall is concerned (was `EntryState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Routing {
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
pub(crate) struct OtherHoldcall {
    /// The command as written in the file.
    pub(crate) command: String,
    /// What the command resolves to (an absolute path, or the file PATH finds); None when it
    /// names nothing that exists.
    pub(crate) resolved: Option<PathBuf>,
}

impl OtherHoldcall {
    /// Why the entry is not routed, in words (the paths through `inspect::printable`).
    pub(crate) fn reason(&self) -> String {
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
    pub(crate) fn missing(&self) -> bool {
        self.resolved.is_none() && self.command.starts_with('/')
    }
}

/// How to tell whether an entry's command is this holdcall.
#[derive(Debug, Clone)]
pub(crate) enum Judge {
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
    pub(crate) fn this_binary() -> Judge {
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
pub(crate) fn resolve_command(command: &str, path: Option<&OsStr>) -> Option<PathBuf> {
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

impl Routing {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Routing::Routed => "routed",
            Routing::NotRouted | Routing::OtherHoldcall(_) => "not routed",
            Routing::Remote => "remote",
            Routing::Unrecognized(_) => "unrecognized",
        }
    }
}

/// Routed, routed through another holdcall, or not routed, for an entry with a command; and
/// the connector it runs (or would run) under.
fn classify_stdio(e: &mut RoutedEntry, judge: &Judge) {
    let command = e.command.as_deref().unwrap_or("");
    let is_this = judge.check(command);
    let serve = serve_args(&e.args);
    if let Some(serve) = serve.filter(|_| is_this.is_ok() || is_holdcall(command)) {
        e.state = match is_this {
            Ok(()) => Routing::Routed,
            Err(resolved) => Routing::OtherHoldcall(OtherHoldcall {
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
        e.state = Routing::NotRouted;
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
pub(crate) const HOME_VARS: [&str; 3] = ["HOLDCALL_HOME", "XDG_DATA_HOME", "HOME"];

impl RoutedEntry {
    /// The home this entry's relay would use if its client started it with the MCP SDKs'
    /// minimal environment (only HOME, LOGNAME, PATH, SHELL, TERM and USER, the client's own,
    /// here `user_home`): its `--home` if it has one, else what its own `env` block and HOME
    /// name. None when no home can be told (no HOME at all).
    pub(crate) fn relay_home(&self, user_home: &Path) -> Option<PathBuf> {
        if let Some(h) = &self.home_arg {
            return Some(
                crate::config::Home::at(PathBuf::from(h))
                    .dir()
                    .to_path_buf(),
            );
        }
        let var = |name: &str| -> Option<OsString> {
            match self.kept_env.iter().find(|(k, _)| k == name) {
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
    pub(crate) fn lands_elsewhere(&self, home: &Path, user_home: &Path) -> Option<PathBuf> {
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
        matches!(self.state, Routing::Routed | Routing::OtherHoldcall(_))
            && self.home_arg.is_none()
            && self
                .lands_elsewhere(Path::new(target.home), target.user_home)
                .is_some()
    }
}

/// The connector name for an entry name: the name itself when it is a valid connector name;
/// else every run of other characters becomes one `-`, the ends are trimmed to a letter or
/// digit, and the length is capped; a name with no usable character becomes
/// `server-<8 hex of its SHA-256>`. Always valid (decision 0008).
pub(crate) fn connector_name(name: &str) -> String {
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
    let digest = sha256_hex(name.as_bytes());
    format!("server-{}", digest.get(..8).unwrap_or(&digest))
}

/// The connector name `holdcall serve` without `--connector` runs a server command under, and
/// what it was derived from in words: the name `inspect::server_name` reads from the command,
/// made valid by `connector_name`.
pub(crate) fn derived_connector(command: &str, args: &[String]) -> (String, String) {
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
pub(crate) fn is_holdcall(command: &str) -> bool {
    let base = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    base == "holdcall" || base == "holdcall.exe"
}

/// The arguments a routed entry gets before the original command: the absolute `home` first,
/// so the relay uses the home `init` ran with whatever environment its client gives it.
pub(crate) fn serve_prefix(client: ClientId, connector: &str, home: &str) -> Vec<String> {
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
pub(crate) fn holdcall_command() -> Result<String, RoutingError> {
    let exe = std::env::current_exe().map_err(|e| RoutingError::Exe(e.to_string()))?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.to_str()
        .map(str::to_string)
        .ok_or_else(|| RoutingError::Exe(format!("{} is not UTF-8", exe.display())))
}

#[cfg(test)]
mod tests;
