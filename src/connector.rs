//! Connectors with a credential: what `holdcall connector set` registers (an environment key, an
//! absolute command, the names of variables passed through) and what the relay is handed at
//! session start to run it (`Launch`), with the minimal environment it gets.
//!
//! Owns: the rules a registration must meet, resolving a command through PATH once at set time,
//! and building the server's environment. Must never: print, log or journal a secret (every
//! type here that holds one prints it as `<redacted>`), or search PATH when starting a server.
//! No I/O except reading PATH entries' metadata at set time.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::limits;
use crate::vault::Secret;

/// What the daemon hands a verified relay for its own session when the connector is registered:
/// the registered command (absolute path first), the variable that carries the secret, the
/// secret, and the names of variables the relay may pass through from its own environment.
/// Its `Debug` shows everything but the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Launch {
    pub command: Vec<String>,
    pub env_key: String,
    pub secret: Secret,
    pub pass_env: Vec<String>,
    /// The directory `connector set` ran in: the server runs there, never where the relay was
    /// started (a project directory could hold code a launcher like npx would pick up).
    pub cwd: String,
    /// The values of `PINNED_ENV` variables when `connector set` ran: they decide which code
    /// runs (PATH, HOME…), so the relay's values never replace them.
    pub pinned_env: Vec<(String, String)>,
    /// The keyed fingerprints of the secret's encoded forms, for the relay's leak check
    /// (`crate::leak`); `None` when the secret is under `limits::LEAK_SECRET_BYTES_MIN`.
    #[serde(default)]
    pub leak: Option<crate::leak::Fingerprints>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("command", &self.command)
            .field("env_key", &self.env_key)
            .field("secret", &"<redacted>")
            .field("pass_env", &self.pass_env)
            .field("cwd", &self.cwd)
            .field("pinned_env", &self.pinned_env)
            .field("leak", &self.leak)
            .finish()
    }
}

/// A registration as `holdcall connector set` sends it to the daemon. Its `Debug` shows
/// everything but the secret.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct SetRequest {
    pub name: String,
    pub env_key: String,
    pub command: Vec<String>,
    pub pass_env: Vec<String>,
    pub secret: Secret,
    /// Where `connector set` ran (absolute): the server's working directory.
    pub cwd: String,
    /// The `PINNED_ENV` variables set when `connector set` ran, with their values.
    pub pinned_env: Vec<(String, String)>,
}

impl std::fmt::Debug for SetRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetRequest")
            .field("name", &self.name)
            .field("env_key", &self.env_key)
            .field("command", &self.command)
            .field("pass_env", &self.pass_env)
            .field("secret", &"<redacted>")
            .field("cwd", &self.cwd)
            .field("pinned_env", &self.pinned_env)
            .finish()
    }
}

/// A registered connector as `holdcall connector list` shows it (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListedConnector {
    pub name: String,
    pub env_key: String,
    pub command: Vec<String>,
    pub pass_env: Vec<String>,
    pub updated_at: String,
    /// The server's working directory (where `connector set` ran).
    pub cwd: String,
    /// The pinned variables and their set-time values (PATH, HOME…; never a secret).
    pub pinned_env: Vec<(String, String)>,
    /// Which entry of the credential store holds this registration's secret: the account is
    /// `NAME#SECRET_ID`. Each registration gets a fresh id, so a store call that finishes late
    /// can only touch its own entry, never a newer registration's.
    pub secret_id: String,
}

impl ListedConnector {
    /// The credential store account of this registration's secret.
    pub(crate) fn account(&self) -> String {
        account(&self.name, &self.secret_id)
    }
}

/// The credential store account of one registration's secret.
pub(crate) fn account(name: &str, secret_id: &str) -> String {
    format!("{name}#{secret_id}")
}

/// Variables whose values at `connector set` time are kept and given to the server instead of
/// the relay's: they decide which programs and which code a server (or a launcher such as npx)
/// finds, and a client's config can set them for the relay.
pub(crate) const PINNED_ENV: [&str; 7] = [
    "PATH",
    "HOME",
    "SHELL",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

/// Variables `--pass-env` refuses besides the loader's: each makes an interpreter or a tool load
/// code or configuration from where it says (NODE_OPTIONS=--require, PYTHONPATH, BASH_ENV…), so
/// passing one from the relay's environment would let whoever sets it run code with the secret.
/// No list of this kind is complete; docs/security.md says so.
pub(crate) const PASS_ENV_REFUSED: [&str; 24] = [
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "PYTHONINSPECT",
    "BASH_ENV",
    "ENV",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "GCONV_PATH",
    "DOTNET_STARTUP_HOOKS",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_GLOBAL",
    "SSL_CERT_FILE",
];

/// Variables a credentialed server gets from the relay's environment without being asked for:
/// what a program needs to find its tools, its files and its locale. `LC_*` means every
/// variable whose name starts with `LC_`.
pub(crate) const ENV_ALLOW_LIST: [&str; 15] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

fn allowed(name: &str) -> bool {
    ENV_ALLOW_LIST.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *a,
    })
}

/// Why a registration is refused, before anything is stored.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConnectorError {
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::connector::env_key),
        help(
            "an environment variable name is 1-128 bytes of letters, digits and '_', not starting \
             with a digit; PATH and the loader's LD_*/DYLD_* variables are refused"
        )
    )]
    EnvKey(String),
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::connector::command),
        help("holdcall connector set NAME --env KEY -- COMMAND [ARGS...]")
    )]
    Command(String),
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::connector::secret),
        help(
            "pipe the secret on stdin (`printf %s \"$TOKEN\" | holdcall connector set …`) or type \
             it at the prompt; it is 1 to 32768 bytes of UTF-8 on one line"
        )
    )]
    Secret(String),
}

/// Checks an environment variable name used as the secret's key or passed through.
pub(crate) fn validate_env_name(what: &str, key: &str) -> Result<(), ConnectorError> {
    let bad = |why: &str| Err(ConnectorError::EnvKey(format!("{what} {key:?} {why}")));
    if key.is_empty() || key.len() > limits::ENV_KEY_BYTES_MAX {
        return bad(&format!("must be 1 to {} bytes", limits::ENV_KEY_BYTES_MAX));
    }
    let mut bytes = key.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return bad("is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if key.starts_with("LD_") || key.starts_with("DYLD_") || key == "PATH" {
        return bad("is read by the program loader or decides which programs run; it is refused");
    }
    Ok(())
}

/// Checks a whole registration (as the daemon receives it, and as the CLI builds it).
pub(crate) fn validate(req: &SetRequest) -> Result<(), ConnectorError> {
    validate_env_name("the environment key", &req.env_key)?;
    validate_pass_env(&req.env_key, &req.pass_env)?;
    validate_command(&req.command)?;
    if !Path::new(&req.cwd).is_absolute() {
        return Err(ConnectorError::Command(format!(
            "the working directory {:?} is not absolute",
            req.cwd
        )));
    }
    if let Some((k, _)) = req
        .pinned_env
        .iter()
        .find(|(k, v)| !PINNED_ENV.contains(&k.as_str()) || v.contains('\0'))
    {
        return Err(ConnectorError::EnvKey(format!(
            "{k:?} is not a variable holdcall pins, or its value holds a NUL byte"
        )));
    }
    validate_secret(req.secret.expose())
}

/// The names `--pass-env` may let through: variable names, not the secret's key, not a pinned
/// variable (its set-time value is used), and none that loads code into an interpreter.
pub(crate) fn validate_pass_env(env_key: &str, pass_env: &[String]) -> Result<(), ConnectorError> {
    if pass_env.len() > limits::CONNECTOR_PASS_ENV_MAX {
        return Err(ConnectorError::EnvKey(format!(
            "at most {} --pass-env names",
            limits::CONNECTOR_PASS_ENV_MAX
        )));
    }
    for p in pass_env {
        validate_env_name("--pass-env", p)?;
        if p == env_key {
            return Err(ConnectorError::EnvKey(format!(
                "--pass-env {p} is the secret's own key; the secret comes from the store only"
            )));
        }
        if PINNED_ENV.contains(&p.as_str()) {
            return Err(ConnectorError::EnvKey(format!(
                "--pass-env {p}: its value is the one `connector set` saw, pinned; run `connector set` again from an environment with the value you want"
            )));
        }
        if PASS_ENV_REFUSED.contains(&p.as_str())
            || p.starts_with("npm_config_")
            || p.starts_with("NPM_CONFIG_")
            || p.starts_with("GIT_CONFIG")
        {
            return Err(ConnectorError::EnvKey(format!(
                "--pass-env {p} makes a program load code or configuration from where it says; it is refused"
            )));
        }
    }
    Ok(())
}

/// A registered command: 1 to `limits::CONNECTOR_ARGS_MAX` words, each at most
/// `limits::CONNECTOR_ARG_BYTES_MAX` bytes without NUL, the first an absolute path.
pub(crate) fn validate_command(command: &[String]) -> Result<(), ConnectorError> {
    let Some(program) = command.first() else {
        return Err(ConnectorError::Command(
            "no command: give the server's command after `--`".into(),
        ));
    };
    if command.len() > limits::CONNECTOR_ARGS_MAX {
        return Err(ConnectorError::Command(format!(
            "the command has {} words; at most {}",
            command.len(),
            limits::CONNECTOR_ARGS_MAX
        )));
    }
    if let Some(a) = command
        .iter()
        .find(|a| a.len() > limits::CONNECTOR_ARG_BYTES_MAX || a.contains('\0'))
    {
        return Err(ConnectorError::Command(format!(
            "a command word of {} bytes is over {} bytes or holds a NUL byte",
            a.len(),
            limits::CONNECTOR_ARG_BYTES_MAX
        )));
    }
    if !Path::new(program).is_absolute() {
        return Err(ConnectorError::Command(format!(
            "the registered program {program:?} is not an absolute path"
        )));
    }
    Ok(())
}

/// A secret is 1 to `limits::SECRET_BYTES_MAX` bytes, without NUL (an environment value cannot
/// hold one) or a line break.
pub(crate) fn validate_secret(secret: &str) -> Result<(), ConnectorError> {
    if secret.is_empty() {
        return Err(ConnectorError::Secret("the secret is empty".into()));
    }
    if secret.len() > limits::SECRET_BYTES_MAX {
        return Err(ConnectorError::Secret(format!(
            "the secret is over {} bytes",
            limits::SECRET_BYTES_MAX
        )));
    }
    if secret.bytes().any(|b| b == 0 || b == b'\n' || b == b'\r') {
        return Err(ConnectorError::Secret(
            "the secret holds a NUL byte or a line break".into(),
        ));
    }
    Ok(())
}

/// Finds `program` as a shell would, once, at set time: a name with a '/' is taken relative to
/// `cwd`; a bare name is looked up in the absolute directories of `path` (relative entries are
/// skipped: they would depend on where the relay later runs). The result must be an executable
/// regular file.
pub(crate) fn resolve_program(
    program: &str,
    path: Option<&OsString>,
    cwd: &Path,
) -> Result<PathBuf, ConnectorError> {
    if program.is_empty() {
        return Err(ConnectorError::Command("the command is empty".into()));
    }
    if program.contains('/') {
        let p = cwd.join(program);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(ConnectorError::Command(format!(
                "{} is not an executable file",
                p.display()
            )))
        };
    }
    let dirs = path.map(std::env::split_paths).into_iter().flatten();
    for dir in dirs.filter(|d| d.is_absolute()) {
        let p = dir.join(program);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    Err(ConnectorError::Command(format!(
        "{program:?} was not found as an executable file in any absolute directory of PATH"
    )))
}

/// The `PINNED_ENV` variables set in this process's environment, with their values (what
/// `connector set` records).
pub(crate) fn pinned_now() -> Vec<(String, String)> {
    PINNED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_string(), v)))
        .collect()
}

/// A word of caution for commands that decide at run time what code they run (package runners,
/// `env`, `python -m`): printed by `connector set`, never a refusal.
pub(crate) fn runtime_resolver_notice(command: &[String]) -> Option<String> {
    let base = command
        .first()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let runner = matches!(
        base,
        "npx" | "uvx" | "bunx" | "pnpx" | "pipx" | "env" | "npm" | "yarn" | "pnpm" | "deno"
    ) || command.iter().skip(1).any(|a| a == "-m");
    runner.then(|| {
        format!(
            "{base} chooses the code it runs when the server starts (a package registry, a \
             module path): the secret goes to whatever it finds. Pin an exact version \
             (pkg@1.2.3, pkg==1.2.3) or register the installed program itself; the server runs \
             in the directory you ran this in, with PATH and HOME as they are now"
        )
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The whole environment of a credentialed server: the allow-listed variables and the
/// `pass_env` names that are set in the relay's environment `from` (but never a `PINNED_ENV`
/// one: those have their values from `connector set`), then the secret under its key. Nothing
/// else from the relay's environment reaches it.
pub(crate) fn server_env(
    launch: &Launch,
    from: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = from
        .into_iter()
        .filter(|(k, _)| {
            k.to_str().is_some_and(|k| {
                k != launch.env_key
                    && !PINNED_ENV.contains(&k)
                    && (allowed(k) || launch.pass_env.iter().any(|p| p == k))
            })
        })
        .collect();
    // The variables that decide which code runs have the values `connector set` saw.
    out.extend(
        launch
            .pinned_env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    out.push((
        OsString::from(&launch.env_key),
        OsString::from(launch.secret.expose()),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> Launch {
        Launch {
            command: vec!["/usr/bin/env".into()],
            env_key: "API_TOKEN".into(),
            secret: Secret::new("canary-7f3a".into()),
            pass_env: vec!["GITHUB_ORG".into()],
            cwd: "/srv".into(),
            pinned_env: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("HOME".into(), "/home/u".into()),
            ],
            leak: None,
        }
    }

    #[test]
    fn a_launch_and_a_set_request_never_show_the_secret_in_debug_output() {
        let l = launch();
        let text = format!("{l:?}");
        assert!(!text.contains("canary"), "{text}");
        assert!(text.contains("API_TOKEN") && text.contains("/usr/bin/env"));
        let r = SetRequest {
            name: "gh".into(),
            env_key: "API_TOKEN".into(),
            command: vec!["/usr/bin/env".into()],
            pass_env: vec![],
            secret: Secret::new("canary-7f3a".into()),
            cwd: "/".into(),
            pinned_env: vec![],
        };
        assert!(!format!("{r:?}").contains("canary"));
        assert!(!format!("{:#?}", Some(r)).contains("canary"));
    }

    #[test]
    fn env_keys_are_variable_names_and_never_the_loaders_or_path() {
        for ok in ["GITHUB_TOKEN", "_X", "a1"] {
            validate_env_name("k", ok).unwrap();
        }
        let long = "A".repeat(limits::ENV_KEY_BYTES_MAX + 1);
        for bad in [
            "",
            "1A",
            "A-B",
            "A=B",
            "A B",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "PATH",
            "Ä",
            &long,
        ] {
            assert!(validate_env_name("k", bad).is_err(), "{bad:?} accepted");
        }
        validate_env_name("k", &"A".repeat(limits::ENV_KEY_BYTES_MAX)).unwrap();
    }

    #[test]
    fn a_secret_is_one_line_of_1_to_32_kib() {
        assert!(validate_secret("").is_err());
        assert!(validate_secret("a\nb").is_err());
        assert!(validate_secret("a\0b").is_err());
        validate_secret(&"x".repeat(limits::SECRET_BYTES_MAX)).unwrap();
        assert!(validate_secret(&"x".repeat(limits::SECRET_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn a_registered_command_starts_with_an_absolute_path_and_is_bounded() {
        assert!(validate_command(&[]).is_err());
        assert!(validate_command(&["node".into()]).is_err());
        validate_command(&["/usr/bin/node".into(), "x.js".into()]).unwrap();
        let many = vec!["/bin/true".to_string(); limits::CONNECTOR_ARGS_MAX + 1];
        assert!(validate_command(&many).is_err());
        let long = vec![
            "/bin/true".to_string(),
            "a".repeat(limits::CONNECTOR_ARG_BYTES_MAX + 1),
        ];
        assert!(validate_command(&long).is_err());
    }

    #[test]
    fn a_bare_name_is_found_in_the_first_absolute_path_directory_that_has_it() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        let put = |dir: &Path, mode| {
            let p = dir.join("srv");
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        put(a.path(), 0o644); // not executable: skipped
        let want = put(b.path(), 0o755);
        let path = std::env::join_paths(["relative/dir".as_ref(), a.path(), b.path()]).unwrap();
        assert_eq!(
            resolve_program("srv", Some(&path), Path::new("/")).unwrap(),
            want
        );
        assert!(resolve_program("nope", Some(&path), Path::new("/")).is_err());
        assert!(resolve_program("srv", None, Path::new("/")).is_err());
        // A name with a slash is taken from the working directory, never from PATH.
        assert_eq!(
            resolve_program("./srv", Some(&path), b.path()).unwrap(),
            b.path().join("./srv")
        );
    }

    #[test]
    fn the_server_gets_the_allow_list_the_pass_env_names_the_pinned_values_and_the_secret_only() {
        let from = [
            // A client's config can set these for the relay: the pinned values win.
            ("PATH", "/tmp/evil:/usr/bin"),
            ("HOME", "/tmp/evil-home"),
            ("LC_ALL", "C"),
            ("GITHUB_ORG", "acme"),
            ("NODE_OPTIONS", "--require /tmp/x.js"),
            ("AWS_SECRET_ACCESS_KEY", "other"),
            ("LD_PRELOAD", "/evil.so"),
            ("API_TOKEN", "from-the-relay"),
            ("SYSTEMROOT", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = server_env(&launch(), from);
        let pairs: Vec<(&str, &str)> = env
            .iter()
            .map(|(k, v)| (k.to_str().unwrap(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("LC_ALL", "C"),
                ("GITHUB_ORG", "acme"),
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("API_TOKEN", "canary-7f3a"),
            ]
        );
    }

    #[test]
    fn pass_env_refuses_names_that_load_code_pinned_names_and_the_secrets_key() {
        validate_pass_env("K", &["GITHUB_ORG".into(), "DEBUG".into()]).unwrap();
        for bad in [
            "NODE_OPTIONS",
            "PYTHONPATH",
            "BASH_ENV",
            "PERL5OPT",
            "JAVA_TOOL_OPTIONS",
            "GCONV_PATH",
            "npm_config_userconfig",
            "GIT_CONFIG_COUNT",
            "LD_PRELOAD",
            "PATH",
            "HOME",
            "K",
        ] {
            assert!(
                validate_pass_env("K", &[bad.to_string()]).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn package_runners_and_module_runs_get_a_notice_and_a_plain_program_does_not() {
        for cmd in [
            vec!["/usr/bin/npx", "-y", "pkg"],
            vec!["/usr/bin/uvx", "pkg"],
            vec!["/usr/bin/python3", "-m", "server"],
            vec!["/usr/bin/env", "node"],
        ] {
            let cmd: Vec<String> = cmd.into_iter().map(String::from).collect();
            assert!(runtime_resolver_notice(&cmd).is_some(), "{cmd:?}");
        }
        let plain: Vec<String> = vec!["/usr/local/bin/github-mcp-server".into(), "stdio".into()];
        assert!(runtime_resolver_notice(&plain).is_none());
    }
}
