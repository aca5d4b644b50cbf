//! Where Holdcall keeps its files (the home), where its daemon listens, and `config.toml`.
//!
//! Owns: resolving `HOLDCALL_HOME`, the private directories, the socket path, and reading the
//! configuration strictly. Must never: hold policy (policy lives only in SQLite), accept an
//! unknown key, or follow a directory that belongs to another user.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::limits;

/// Errors about the home, its directories and `config.toml`.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigError {
    #[error("cannot tell where Holdcall's home is: neither HOLDCALL_HOME nor HOME is set")]
    #[diagnostic(
        code(holdcall::config::no_home),
        help("set HOLDCALL_HOME to a directory Holdcall may keep its journal in")
    )]
    NoHome,
    #[error("cannot use {path}: {source}")]
    #[diagnostic(
        code(holdcall::config::io),
        help("check that the directory exists, belongs to you and is writable")
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} belongs to uid {owner}, not to you (uid {me})")]
    #[diagnostic(
        code(holdcall::config::not_ours),
        help(
            "Holdcall keeps its socket and journal only in directories you own; remove it or set HOLDCALL_HOME elsewhere"
        )
    )]
    NotOurs { path: PathBuf, owner: u32, me: u32 },
    #[error("the socket path {path} is {len} bytes long; the limit is {max}")]
    #[diagnostic(
        code(holdcall::config::socket_path),
        help("use a home whose path is shorter (HOLDCALL_HOME or --home)")
    )]
    SocketPathTooLong {
        path: PathBuf,
        len: usize,
        max: usize,
    },
    #[error("{path}: {message}")]
    #[diagnostic(
        code(holdcall::config::parse),
        help(
            "config.toml holds only [journal] durability = \"power\" | \"process\" and [approval] timeout = \"2m\" (seconds, minutes or hours: \"90s\", \"2m\", \"1h\"); fix or remove the key it names"
        )
    )]
    Parse { path: PathBuf, message: String },
    #[error("{path} has a [policy] section, and Holdcall does not read policy from config.toml")]
    #[diagnostic(
        code(holdcall::config::policy_section),
        help(
            "policy lives in the journal database so every change is recorded: use `holdcall policy deny|allow|ask TOOL`, then delete the [policy] section"
        )
    )]
    PolicySection { path: PathBuf },
}

/// The home `--home` named for this process, if it did (`Home::set_explicit`).
static EXPLICIT_HOME: std::sync::OnceLock<Home> = std::sync::OnceLock::new();

/// The directory that holds one Holdcall installation's config, database and machine id. Each
/// home has its own daemon and socket, so tests and `holdcall demo` never meet the real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
}

impl Home {
    /// Makes `dir` the home of every later `Home::from_env` in this process: the `--home` flag,
    /// which wins over every environment variable. Set once, by `cli::run`, before anything
    /// reads the home; a second call changes nothing.
    pub(crate) fn set_explicit(dir: PathBuf) {
        let _ = EXPLICIT_HOME.set(Home::at(dir));
    }

    /// `--home` if given, else `HOLDCALL_HOME` if set, else the platform's data directory.
    pub(crate) fn from_env() -> Result<Home, ConfigError> {
        if let Some(home) = EXPLICIT_HOME.get() {
            return Ok(home.clone());
        }
        Home::resolve(|name| std::env::var_os(name))
    }

    /// The home an environment names, without `--home`: `HOLDCALL_HOME` if set, else the
    /// platform's data directory under `HOME` (`XDG_DATA_HOME` when absolute). `var` reads one
    /// variable, so `doctor` can ask what a relay started with a client's environment would use.
    pub fn resolve(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Home, ConfigError> {
        // One rule for Holdcall and holdmap (which judges routed entries' homes with it).
        crate::clients::routed::home_dir(None, var)
            .map(Home::at)
            .ok_or(ConfigError::NoHome)
    }

    /// A home at an explicit directory (made absolute against the current directory).
    pub fn at(dir: PathBuf) -> Home {
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()
                .map(|cwd| cwd.join(&dir))
                .unwrap_or(dir)
        };
        Home { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn db_path(&self) -> PathBuf {
        self.dir.join("holdcall.db")
    }
    pub fn machine_id_path(&self) -> PathBuf {
        self.dir.join("machine-id")
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }
    pub(crate) fn daemon_log_path(&self) -> PathBuf {
        self.dir.join("daemon.log")
    }

    /// The daemon's socket for this home, decided by the home alone and never by an environment
    /// variable an MCP client may strip (SDK clients start servers with only HOME, LOGNAME,
    /// PATH, SHELL, TERM and USER): `<home>/daemon.sock` when that path fits a socket address,
    /// else `/tmp/holdcall-<uid>/d-<hash of the home>.sock` (the fixed `/tmp`, never `TMPDIR`).
    /// See decision 0010.
    pub(crate) fn socket_path(&self) -> PathBuf {
        let inside = self.dir.join("daemon.sock");
        if inside.as_os_str().len() <= limits::SOCKET_PATH_BYTES_MAX {
            return inside;
        }
        Home::fallback_socket_dir().join(format!("d-{}.sock", self.short_id()))
    }

    /// Where a home too deep for `<home>/daemon.sock` keeps its socket: `/tmp/holdcall-<uid>`.
    fn fallback_socket_dir() -> PathBuf {
        PathBuf::from(format!("/tmp/holdcall-{}", nix::unistd::geteuid()))
    }

    /// Twelve hex characters naming this home: the home's real path (symlinks resolved when it
    /// exists), so two spellings of one home name one socket.
    fn short_id(&self) -> String {
        let real = fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let digest = crate::ids::sha256_hex(real.as_os_str().as_encoded_bytes());
        digest.get(..12).unwrap_or(&digest).to_string()
    }

    /// The lock a daemon holds for its whole life: in the home, beside the database, so exactly
    /// one daemon serves one database whatever the socket path or environment.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.dir.join("daemon.lock")
    }

    /// Creates the home and the socket directory (0700, ours) and checks the socket path fits.
    pub fn prepare(&self) -> Result<(), ConfigError> {
        ensure_private_dir(&self.dir)?;
        let sock = self.socket_path();
        if let Some(parent) = sock.parent() {
            ensure_private_dir(parent)?;
        }
        let len = sock.as_os_str().len();
        if len > limits::SOCKET_PATH_BYTES_MAX {
            return Err(ConfigError::SocketPathTooLong {
                path: sock,
                len,
                max: limits::SOCKET_PATH_BYTES_MAX,
            });
        }
        Ok(())
    }
}

/// Creates `dir` with mode 0700 if missing; refuses one that another user owns; narrows the mode
/// of one we own to 0700.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<(), ConfigError> {
    let io = |source| ConfigError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
    }
    let meta = fs::symlink_metadata(dir).map_err(io)?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(ConfigError::NotOurs {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if !meta.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory (a symlink is not accepted here)",
        )));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    Ok(())
}

/// The contents of `config.toml`. Every key is known; anything else is refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    #[serde(default)]
    pub journal: JournalConfig,
    #[serde(default)]
    pub approval: ApprovalConfig,
}

/// `[approval]`: how long a held call waits for a person.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalConfig {
    /// `"90s"`, `"2m"`, `"1h"`: between `limits::APPROVAL_TIMEOUT_MIN` and `_MAX`.
    #[serde(
        default = "default_approval_timeout",
        deserialize_with = "approval_timeout"
    )]
    pub timeout: std::time::Duration,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            timeout: default_approval_timeout(),
        }
    }
}

fn default_approval_timeout() -> std::time::Duration {
    limits::APPROVAL_TIMEOUT_DEFAULT
}

fn approval_timeout<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::time::Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_timeout(&text).map_err(serde::de::Error::custom)
}

/// Reads an approval timeout: a whole number and one unit, `s`, `m` or `h`, within the limits.
pub(crate) fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_at);
    let n: u64 = number.parse().map_err(|_| {
        format!(
            "approval timeout {text:?} is not a whole number with a unit (s, m or h), like \"2m\""
        )
    })?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(|| {
        format!("approval timeout {text:?} needs a unit: s, m or h (\"90s\", \"2m\", \"1h\")")
    })?;
    let t = std::time::Duration::from_secs(secs);
    if t < limits::APPROVAL_TIMEOUT_MIN || t > limits::APPROVAL_TIMEOUT_MAX {
        return Err(format!(
            "approval timeout {text:?} is outside {}s to {}s",
            limits::APPROVAL_TIMEOUT_MIN.as_secs(),
            limits::APPROVAL_TIMEOUT_MAX.as_secs()
        ));
    }
    Ok(t)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JournalConfig {
    /// `power` (synchronous=FULL: a decision survives power loss) or `process` (NORMAL: it
    /// survives a crash of the process, not of the machine).
    #[serde(default = "default_durability")]
    pub durability: Durability,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            durability: default_durability(),
        }
    }
}

fn default_durability() -> Durability {
    Durability::Power
}

impl Config {
    /// Reads `<home>/config.toml`; a missing file is the default configuration.
    pub(crate) fn load(home: &Home) -> Result<Config, ConfigError> {
        let path = home.config_path();
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => return Err(ConfigError::Io { path, source }),
        };
        Config::parse(&path, &text)
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim().to_string(),
        })?;
        if table.contains_key("policy") {
            return Err(ConfigError::PolicySection {
                path: path.to_path_buf(),
            });
        }
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim().to_string(),
        })
    }
}

/// How hard a commit tries to survive a crash (see `docs/journal-format.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL + `synchronous=FULL` (plus `fullfsync` on macOS): a committed entry survives power loss
    /// if the drive honours flushes.
    Power,
    /// WAL + `synchronous=NORMAL`: a committed entry survives the process being killed; an OS crash
    /// or power loss may roll back the latest commits (never corrupts).
    Process,
}

impl Durability {
    /// The `synchronous` setting this durability needs, as SQLite reads it back (0..=3).
    pub(crate) fn synchronous(self) -> (i64, &'static str) {
        match self {
            Durability::Power => (2, "full"),
            Durability::Process => (1, "normal"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("/h/config.toml"), text)
    }

    #[test]
    fn an_empty_config_means_power_durability() {
        assert_eq!(parse("").unwrap().journal.durability, Durability::Power);
    }

    #[test]
    fn process_durability_is_read() {
        let c = parse("[journal]\ndurability = \"process\"\n").unwrap();
        assert_eq!(c.journal.durability, Durability::Process);
    }

    #[test]
    fn an_unknown_key_is_refused_and_named() {
        let err = parse("[journal]\ndurabilty = \"process\"\n").unwrap_err();
        assert!(err.to_string().contains("durabilty"), "{err}");
        let err = parse("[daemon]\nsocket = \"/x\"\n").unwrap_err();
        assert!(err.to_string().contains("daemon"), "{err}");
    }

    #[test]
    fn a_policy_section_is_refused_with_its_own_message() {
        let err = parse("[policy]\ndeny = [\"x\"]\n").unwrap_err();
        assert!(matches!(err, ConfigError::PolicySection { .. }));
    }

    #[test]
    fn an_unknown_durability_is_refused() {
        assert!(parse("[journal]\ndurability = \"maybe\"\n").is_err());
    }

    #[test]
    fn the_approval_timeout_defaults_to_two_minutes_and_reads_units() {
        assert_eq!(
            parse("").unwrap().approval.timeout,
            std::time::Duration::from_secs(120)
        );
        let c = parse("[approval]\ntimeout = \"1s\"\n").unwrap();
        assert_eq!(c.approval.timeout, std::time::Duration::from_secs(1));
        assert_eq!(parse_timeout("90s"), Ok(std::time::Duration::from_secs(90)));
        assert_eq!(
            parse_timeout("1h"),
            Ok(std::time::Duration::from_secs(3600))
        );
    }

    #[test]
    fn an_approval_timeout_without_a_unit_or_out_of_bounds_is_refused_and_named() {
        for bad in ["120", "2 m", "0s", "2d", "-1s", "25h", ""] {
            let err = parse(&format!("[approval]\ntimeout = \"{bad}\"\n")).unwrap_err();
            assert!(err.to_string().contains("approval timeout"), "{bad}: {err}");
        }
        let err = parse("[approval]\ntimout = \"2m\"\n").unwrap_err();
        assert!(err.to_string().contains("timout"), "{err}");
    }

    #[test]
    fn two_homes_get_two_sockets() {
        let a = Home::at(PathBuf::from("/tmp/a")).socket_path();
        let b = Home::at(PathBuf::from("/tmp/b")).socket_path();
        assert_ne!(a, b);
        assert_eq!(a, PathBuf::from("/tmp/a/daemon.sock"));
        let deep = Home::at(PathBuf::from(format!("/tmp/{}", "d".repeat(120))));
        let s = deep.socket_path();
        assert!(
            s.to_string_lossy().starts_with("/tmp/holdcall-"),
            "{}",
            s.display()
        );
        assert!(s.as_os_str().len() <= limits::SOCKET_PATH_BYTES_MAX);
    }

    #[test]
    fn the_socket_and_the_lock_never_depend_on_the_runtime_directory() {
        // An SDK client strips XDG_RUNTIME_DIR and TMPDIR; the socket a relay reaches must be
        // the one the shell's daemon listens on all the same. Nothing here reads them.
        let home = Home::at(PathBuf::from("/tmp/h"));
        assert_eq!(home.lock_path(), PathBuf::from("/tmp/h/daemon.lock"));
        assert_eq!(home.socket_path(), PathBuf::from("/tmp/h/daemon.sock"));
    }
}
