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

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::clients::routed;
pub(crate) use crate::clients::routed::{Judge, Routing};
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
        routed::upstream(&self.entry, &self.state)
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

/// Routed, routed through another holdcall, or not routed, for an entry with a command
/// (`clients::routed::classify`); and the connector it runs (or would run) under.
fn classify_stdio(e: &mut RoutedEntry, judge: &Judge) {
    let (state, serve) = routed::classify(&e.entry, judge);
    e.state = state;
    match serve {
        Some(serve) => {
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
        }
        None => e.connector = connector_name(&e.name),
    }
}

pub(crate) use crate::clients::routed::HOME_VARS;

impl RoutedEntry {
    /// The home this entry's relay would use if its client started it with the MCP SDKs'
    /// minimal environment (only HOME, LOGNAME, PATH, SHELL, TERM and USER, the client's own,
    /// here `user_home`): its `--home` if it has one, else what its own `env` block and HOME
    /// name. None when no home can be told (no HOME at all).
    pub(crate) fn relay_home(&self, user_home: &Path) -> Option<PathBuf> {
        let var = |name: &str| -> Option<OsString> {
            match self.kept_env.iter().find(|(k, _)| k == name) {
                Some((_, v)) => Some(OsString::from(v)),
                None if name == "HOME" => Some(user_home.as_os_str().to_os_string()),
                None => None,
            }
        };
        routed::home_dir(self.home_arg.as_deref(), var)
            .map(|d| crate::config::Home::at(d).dir().to_path_buf())
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
