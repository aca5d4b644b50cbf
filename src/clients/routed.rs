//! Is a configured server routed through Holdcall? The one judgement both binaries make of a
//! client's entry: `holdcall init`, `doctor` and `inventory` (through `crate::routing`), and
//! holdmap's `list_agents` and `list_needs`. An entry is routed when its command is a given
//! holdcall binary (the same file: device and inode) running `serve`.
//!
//! Owns: [`Routing`], [`Judge`] (which binary counts), the reading of `holdcall … serve …`
//! arguments ([`serve_args`]), and which home a holdcall process uses ([`home_dir`]: the rule
//! `config::Home` applies, so holdmap can tell which home a routed entry's relay lands on). Must never: call an entry routed whose command is not the judge's
//! binary (a file merely named holdcall is [`Routing::OtherHoldcall`]), or read anything but
//! file metadata.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::clients::{ServerEntry, Shape};

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
    pub(crate) fn check(&self, command: &str) -> Result<(), Option<PathBuf>> {
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

/// What `holdcall` arguments of the shape `[--home DIR] serve [OPTIONS…] [-- CMD…]` say.
pub(crate) struct ServeArgs {
    pub(crate) home: Option<String>,
    pub(crate) connector: Option<String>,
}

/// The `serve` arguments of a holdcall command line, or None when it is not `serve`. `--home`
/// is global, so it may come before or after `serve`; options end at `--`.
pub(crate) fn serve_args(args: &[String]) -> Option<ServeArgs> {
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

/// The variables that choose a holdcall home when `--home` is not given (see [`home_dir`]).
pub(crate) const HOME_VARS: [&str; 3] = ["HOLDCALL_HOME", "XDG_DATA_HOME", "HOME"];

/// The home directory a holdcall process uses: its `--home` (`home_arg`) when given, else
/// `HOLDCALL_HOME`, else `holdcall` in the platform's data directory under `HOME`
/// (`XDG_DATA_HOME` when absolute, off macOS). `var` reads one variable of that process's
/// environment. Paths as written: a relative one is relative to that process's working
/// directory. None: no `--home`, no `HOLDCALL_HOME` and no `HOME`. `config::Home` applies
/// exactly this rule.
pub(crate) fn home_dir(
    home_arg: Option<&str>,
    var: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    if let Some(h) = home_arg {
        return Some(PathBuf::from(h));
    }
    if let Some(dir) = var("HOLDCALL_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let home = PathBuf::from(var("HOME").filter(|v| !v.is_empty())?);
    let data = if cfg!(target_os = "macos") {
        home.join("Library/Application Support")
    } else {
        var("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".local/share"))
    };
    Some(data.join("holdcall"))
}

/// The home a `serve` entry's relay uses when the entry itself names one: its `--home`, else
/// the home its `env` block chooses (`HOLDCALL_HOME`, `XDG_DATA_HOME` or `HOME` there; `client`
/// reads the rest of the environment its client gives). None when it names none: the relay
/// uses whatever home its client's environment gives.
pub(crate) fn named_home(
    serve: &ServeArgs,
    kept_env: &[(String, String)],
    client: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    let in_block = |name: &str| {
        kept_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| OsString::from(v))
    };
    if serve.home.is_none() && !HOME_VARS.iter().any(|v| in_block(v).is_some()) {
        return None;
    }
    home_dir(serve.home.as_deref(), |name| {
        in_block(name).or_else(|| client(name))
    })
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

impl Judge {
    /// Whether there is a binary that counts: false for a [`Judge::Running`] whose binary was
    /// not found (then no entry is routed).
    pub(crate) fn has_binary(&self) -> bool {
        match self {
            Judge::Running { this, .. } => this.is_some(),
            Judge::Spelled(_) => true,
        }
    }

    /// The holdcall binary at `binary` (holdmap's judge: the `holdcall` installed beside it),
    /// with this process's PATH for bare command names. No file there: nothing is routed.
    pub(crate) fn binary_at(binary: &Path) -> Judge {
        Judge::Running {
            this: std::fs::metadata(binary).ok().map(|m| (m.dev(), m.ino())),
            path: std::env::var_os("PATH"),
        }
    }
}

/// The routing of one entry as its file says it, and its `serve` arguments when it claims to
/// route (through this binary or another holdcall).
pub(crate) fn classify(entry: &ServerEntry, judge: &Judge) -> (Routing, Option<ServeArgs>) {
    match &entry.shape {
        Shape::Remote => return (Routing::Remote, None),
        Shape::Unrecognized(why) => return (Routing::Unrecognized(why.clone()), None),
        Shape::Stdio => {}
    }
    let command = entry.command.as_deref().unwrap_or("");
    let is_this = judge.check(command);
    match serve_args(&entry.args).filter(|_| is_this.is_ok() || is_holdcall(command)) {
        Some(serve) => {
            let state = match is_this {
                Ok(()) => Routing::Routed,
                Err(resolved) => Routing::OtherHoldcall(OtherHoldcall {
                    command: command.to_string(),
                    resolved,
                }),
            };
            (state, Some(serve))
        }
        None => (Routing::NotRouted, None),
    }
}

/// The command and arguments an entry's server really runs: after `--` when it routes through a
/// holdcall (this one or another), else its own.
pub(crate) fn upstream(entry: &ServerEntry, routing: &Routing) -> Option<(String, Vec<String>)> {
    let command = entry.command.clone()?;
    if matches!(routing, Routing::Routed | Routing::OtherHoldcall(_)) {
        let at = entry.args.iter().position(|a| a == "--")?;
        let mut rest = entry.args.get(at + 1..)?.iter().cloned();
        let cmd = rest.next()?;
        return Some((cmd, rest.collect()));
    }
    Some((command, entry.args.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn serve(args: &[&str]) -> ServeArgs {
        serve_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn home_dir_takes_home_arg_then_holdcall_home_then_the_data_directory_under_home() {
        let all = [
            ("HOLDCALL_HOME", "/hc"),
            ("XDG_DATA_HOME", "/xdg"),
            ("HOME", "/u"),
        ];
        assert_eq!(home_dir(Some("./.hc"), vars(&all)), Some("./.hc".into()));
        assert_eq!(home_dir(None, vars(&all)), Some("/hc".into()));
        if !cfg!(target_os = "macos") {
            assert_eq!(
                home_dir(None, vars(&all[1..])),
                Some("/xdg/holdcall".into())
            );
            // A relative XDG_DATA_HOME is ignored, as the XDG rules say.
            let relative = [("XDG_DATA_HOME", "xdg"), ("HOME", "/u")];
            assert_eq!(
                home_dir(None, vars(&relative)),
                Some("/u/.local/share/holdcall".into())
            );
        }
        assert_eq!(home_dir(None, vars(&[("XDG_DATA_HOME", "/xdg")])), None);
    }

    #[test]
    fn an_entry_names_a_home_only_by_home_arg_or_its_env_block() {
        let client = vars(&[("HOME", "/u")]);
        assert_eq!(named_home(&serve(&["serve"]), &[], &client), None);
        assert_eq!(
            named_home(&serve(&["--home", "./.hc", "serve"]), &[], &client),
            Some("./.hc".into())
        );
        let block = vec![("HOLDCALL_HOME".to_string(), "/other".to_string())];
        assert_eq!(
            named_home(&serve(&["serve", "--connector", "x"]), &block, &client),
            Some("/other".into())
        );
        // --home wins over the env block, as it does in holdcall.
        assert_eq!(
            named_home(&serve(&["serve", "--home=/h"]), &block, &client),
            Some("/h".into())
        );
    }
}
