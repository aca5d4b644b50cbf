//! `holdcall doctor`: one check per thing that must be right for calls to flow through Holdcall,
//! each OK, WARN or FAIL with a one-line remedy.
//!
//! Owns: the checks, as a list of functions of one signature (`CHECKS`), so a new check is one
//! function added to the list. Must never: start the daemon (it only probes the socket and
//! talks to a verified daemon), write anything (the journal is opened read-only, client files
//! are only read), or print an environment value.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::clients::{self, EntryState, FileState, Places, backup::Backups};
use crate::config::{Config, Home};
use crate::ipc::{self, ManageRequest as Request, ManageResponse as Response, Probe};
use crate::journal::{ChainState, Reader};
use crate::limits;
use crate::text::visible;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub fn tag(self) -> &'static str {
        match self {
            Status::Ok => "OK  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: String,
    pub status: Status,
    pub message: String,
    /// What to do; none when all is well.
    pub remedy: Option<String>,
}

fn check(name: &str, status: Status, message: String, remedy: Option<&str>) -> Check {
    Check {
        check: name.to_string(),
        status,
        message,
        remedy: remedy.map(str::to_string),
    }
}

/// What every check may look at.
pub struct Ctx {
    pub home: Result<Home, String>,
    pub places: Result<Places, String>,
    pub exe: Option<PathBuf>,
}

impl Ctx {
    pub fn from_env() -> Ctx {
        Ctx {
            home: Home::from_env().map_err(|e| e.to_string()),
            places: Places::from_env().map_err(|e| e.to_string()),
            exe: std::env::current_exe()
                .ok()
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
        }
    }
}

/// A check: what it found, as zero or more lines.
pub type CheckFn = fn(&Ctx) -> Vec<Check>;

/// The checks, in the order they print.
pub const CHECKS: &[CheckFn] = &[
    binary,
    config_toml,
    daemon,
    journal,
    database_files,
    credential_store,
    enrolments,
    policy,
    connectors,
    clients,
];

/// Runs every check.
pub fn run(ctx: &Ctx) -> Vec<Check> {
    CHECKS.iter().flat_map(|c| c(ctx)).collect()
}

/// 1 when any check failed, else 0.
pub fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.status == Status::Fail) {
        1
    } else {
        0
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The holdcall on PATH is this one.
pub fn binary(ctx: &Ctx) -> Vec<Check> {
    let name = "holdcall binary";
    let me = ctx
        .exe
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "this holdcall".into());
    let found = on_path("holdcall");
    let line = match found {
        None => check(
            name,
            Status::Warn,
            format!("no holdcall on PATH (this one is {me})"),
            Some(
                "add its directory to PATH to type `holdcall`; routed clients use its full path and work without",
            ),
        ),
        Some(p) => {
            let resolved = std::fs::canonicalize(&p).unwrap_or(p.clone());
            if Some(&resolved) == ctx.exe.as_ref() {
                check(
                    name,
                    Status::Ok,
                    format!("{} is this holdcall", p.display()),
                    None,
                )
            } else {
                check(
                    name,
                    Status::Warn,
                    format!("PATH finds {}, not this holdcall ({me})", p.display()),
                    Some("put one holdcall first on PATH, or remove the other copy"),
                )
            }
        }
    };
    vec![line]
}

pub fn config_toml(ctx: &Ctx) -> Vec<Check> {
    let name = "config.toml";
    let home = match &ctx.home {
        Ok(h) => h,
        Err(e) => {
            return vec![check(
                name,
                Status::Fail,
                e.clone(),
                Some("set HOLDCALL_HOME or HOME"),
            )];
        }
    };
    vec![match Config::load(home) {
        Ok(_) if home.config_path().exists() => check(
            name,
            Status::Ok,
            format!("{} reads", home.config_path().display()),
            None,
        ),
        Ok(_) => check(name, Status::Ok, "none (the defaults apply)".into(), None),
        Err(e) => check(
            name,
            Status::Fail,
            e.to_string(),
            Some("fix or remove the key it names; every command refuses to run until then"),
        ),
    }]
}

/// The daemon answers, is verified and is this build. Probes only: never starts one.
pub fn daemon(ctx: &Ctx) -> Vec<Check> {
    let name = "daemon";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let Ok(rt) = ipc::current_thread() else {
        return vec![check(
            name,
            Status::Fail,
            "cannot start an async runtime".into(),
            None,
        )];
    };
    let line = rt.block_on(async {
        match ipc::probe(home).await {
            Probe::NotRunning => match ipc::lock_holder(home) {
                None => check(
                    name,
                    Status::Warn,
                    "not running (the first relay starts it)".into(),
                    Some("run `holdcall daemon start` to start it now"),
                ),
                Some(pid) => check(
                    name,
                    Status::Fail,
                    format!(
                        "pid {pid} holds {} but nothing answers on {}",
                        home.lock_path().display(),
                        home.socket_path().display()
                    ),
                    Some(
                        "wait a few seconds (a daemon puts back a removed socket), else run `holdcall daemon restart`",
                    ),
                ),
            },
            Probe::Other(v) => {
                let older = matches!(
                    v,
                    crate::os::peer::Verdict::OtherProgram {
                        older_build: true,
                        ..
                    }
                );
                if older {
                    check(
                        name,
                        Status::Fail,
                        "an older build of holdcall is running; relays of this build refuse it"
                            .into(),
                        Some("run `holdcall daemon restart`"),
                    )
                } else {
                    check(
                        name,
                        Status::Fail,
                        v.describe("the process on the socket"),
                        Some(
                            "stop that process; holdcall never talks to a daemon it cannot verify",
                        ),
                    )
                }
            }
            Probe::OtherHome { pid, why } => check(
                name,
                Status::Fail,
                format!("pid {pid} on this home's socket is not this home's daemon: {why}"),
                Some(
                    "stop that daemon (`holdcall --home <its home> daemon stop`), then run `holdcall daemon start`",
                ),
            ),
            Probe::Silent { pid } => check(
                name,
                Status::Fail,
                format!(
                    "pid {pid} is on {} but does not answer within {:?}",
                    home.socket_path().display(),
                    limits::DAEMON_HELLO_TIMEOUT
                ),
                Some("if it was stopped (SIGSTOP), continue it; else run `holdcall daemon restart`"),
            ),
            Probe::Ours(mut conn) => {
                match conn
                    .call(&Request::Status, limits::CLI_REQUEST_TIMEOUT)
                    .await
                {
                    Ok(Response::Status {
                        pid,
                        version,
                        cannot_decide: Some(why),
                        ..
                    }) => check(
                        name,
                        Status::Fail,
                        format!(
                            "running (pid {pid}, version {version}) but it cannot decide, so every call is refused: {}",
                            crate::text::visible(&why)
                        ),
                        Some("free disk space if the journal cannot be written; otherwise run `holdcall verify`"),
                    ),
                    Ok(Response::Status { pid, version, .. }) => check(
                        name,
                        Status::Ok,
                        format!(
                            "running (pid {pid}, version {version}), verified as this build at {}",
                            home.socket_path().display()
                        ),
                        None,
                    ),
                    _ => check(
                        name,
                        Status::Fail,
                        "verified but not answering".into(),
                        Some("run `holdcall daemon restart`; see daemon.log in the holdcall home"),
                    ),
                }
            }
        }
    });
    let mut lines = vec![line];
    lines.extend(stray_sockets(home));
    lines.extend(second_daemons(home));
    lines
}

/// Where builds before decision 0010 put this home's socket: `d-<first 12 hex of the SHA-256
/// of the home's path>.sock` in `$XDG_RUNTIME_DIR/holdcall` or the temporary directory's
/// `holdcall-<uid>`. A daemon of such a build still listening there serves this database with
/// policy of its own, and clients configured long ago may still reach it.
fn old_socket_paths(home: &Home) -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid();
    let mut dirs = vec![
        PathBuf::from(format!("/tmp/holdcall-{uid}")),
        std::env::temp_dir().join(format!("holdcall-{uid}")),
    ];
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        dirs.push(run.join("holdcall"));
    }
    // The old code hashed the home as it was spelled; a symlinked spelling gave another name.
    let mut spellings = vec![home.dir().to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(home.dir()) {
        spellings.push(real);
    }
    let current = home.socket_path();
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in &dirs {
        for spelling in &spellings {
            let digest = crate::frame::sha256_hex(spelling.as_os_str().as_encoded_bytes());
            let short = digest.get(..12).unwrap_or(&digest);
            let p = dir.join(format!("d-{short}.sock"));
            if p != current && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// A socket for this home at an old path: FAIL when something listens there, WARN for a file
/// nothing listens on.
fn stray_sockets(home: &Home) -> Vec<Check> {
    let name = "daemon";
    let mut out = Vec::new();
    for path in old_socket_paths(home) {
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        match std::os::unix::net::UnixStream::connect(&path) {
            Ok(stream) => {
                let v = crate::os::peer::judge(&stream);
                let pid = match &v {
                    crate::os::peer::Verdict::Same { pid }
                    | crate::os::peer::Verdict::WrongUser { pid, .. }
                    | crate::os::peer::Verdict::OtherProgram { pid, .. } => Some(*pid),
                    crate::os::peer::Verdict::Unknown { .. } => None,
                };
                let who = match pid {
                    Some(pid) => format!("pid {pid}"),
                    None => "a process the kernel could not name".into(),
                };
                out.push(Check {
                    check: name.into(),
                    status: Status::Fail,
                    message: format!(
                        "a stray socket for this home at {} (where older builds listened): {who} listens there; {}",
                        path.display(),
                        v.describe("it")
                    ),
                    remedy: Some(format!(
                        "stop that process{}, then remove {}: this build never uses that path, but anything still dialing it reaches a daemon that is not this home's",
                        pid.map(|p| format!(" (`kill {p}`)")).unwrap_or_default(),
                        path.display()
                    )),
                });
            }
            Err(_) => out.push(Check {
                check: name.into(),
                status: Status::Warn,
                message: format!(
                    "a stale socket file for this home at {} (where older builds listened); nothing listens on it",
                    path.display()
                ),
                remedy: Some(format!("remove {}", path.display())),
            }),
        }
    }
    out
}

/// The home a `holdcall daemon run` process serves, read from its command line and environment
/// the way `Home::from_env` would have read them: `--home`, then HOLDCALL_HOME, then the data
/// directory under HOME.
fn home_of_process(pid: i32) -> Option<PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let mut from_flag = None;
    for (i, a) in args.iter().enumerate() {
        if *a == b"--home" {
            from_flag = args.get(i + 1).map(|v| bytes_path(v));
        } else if let Some(v) = a.strip_prefix(b"--home=") {
            from_flag = Some(bytes_path(v));
        }
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let var = |key: &[u8]| -> Option<PathBuf> {
        environ.split(|&b| b == 0).find_map(|kv| {
            let v = kv.strip_prefix(key)?.strip_prefix(b"=")?;
            (!v.is_empty()).then(|| bytes_path(v))
        })
    };
    let dir = from_flag.or_else(|| var(b"HOLDCALL_HOME")).or_else(|| {
        let data = if cfg!(target_os = "macos") {
            var(b"HOME")?.join("Library/Application Support")
        } else {
            var(b"XDG_DATA_HOME")
                .filter(|p| p.is_absolute())
                .or_else(|| var(b"HOME").map(|h| h.join(".local/share")))?
        };
        Some(data.join("holdcall"))
    })?;
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::fs::read_link(format!("/proc/{pid}/cwd"))
            .ok()?
            .join(dir)
    };
    Some(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn bytes_path(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the parenthesised name).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 1..)?;
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Any process running this binary's `daemon run` for this home, as this user, besides the
/// lock holder and its supervisor: a second daemon (FAIL, with its pid).
fn second_daemons(home: &Home) -> Vec<Check> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let holder = ipc::lock_holder(home);
    let supervisor = holder.and_then(parent_of);
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let ours = std::fs::canonicalize(home.dir()).unwrap_or_else(|_| home.dir().to_path_buf());
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me || Some(pid) == holder || Some(pid) == supervisor {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if !args.windows(2).any(|w| w == [&b"daemon"[..], &b"run"[..]]) {
            continue;
        }
        let v = crate::os::peer::judge_pid(pid);
        let this_binary = matches!(
            v,
            crate::os::peer::Verdict::Same { .. }
                | crate::os::peer::Verdict::OtherProgram {
                    older_build: true,
                    ..
                }
        );
        if !this_binary || home_of_process(pid).as_deref() != Some(ours.as_path()) {
            continue;
        }
        out.push(Check {
            check: "daemon".into(),
            status: Status::Fail,
            message: format!(
                "a second daemon for this home: pid {pid} runs `holdcall daemon run` for {} but does not hold {}{}",
                home.dir().display(),
                home.lock_path().display(),
                holder
                    .map(|h| format!(" (pid {h} does)"))
                    .unwrap_or_default()
            ),
            remedy: Some(format!(
                "stop it (`kill {pid}`), then `holdcall daemon restart`; an older build keeps its lock and socket elsewhere and decides with policy of its own"
            )),
        });
    }
    out
}

fn machine_id(home: &Home) -> Option<String> {
    std::fs::read_to_string(home.machine_id_path())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The journal verifies, read-only, as `holdcall verify` does.
pub fn journal(ctx: &Ctx) -> Vec<Check> {
    let name = "journal";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    if !home.db_path().exists() {
        return vec![check(
            name,
            Status::Warn,
            "nothing recorded yet".into(),
            Some("it is created when the daemon first starts"),
        )];
    }
    let line = match Reader::open(&home.db_path())
        .and_then(|r| r.verify(machine_id(home).as_deref(), None))
    {
        Err(e) => check(
            name,
            Status::Fail,
            e.to_string(),
            Some("run `holdcall verify` for the details"),
        ),
        Ok(rep) => match rep.state {
            ChainState::Broken if rep.problems.is_empty() => check(
                name,
                Status::Fail,
                format!(
                    "the policies, budgets or agents tables do not match the journal ({} difference(s), the first: {}); the daemon refuses every call",
                    rep.tables.len(),
                    rep.tables
                        .first()
                        .map(|t| crate::text::visible(t))
                        .unwrap_or_default()
                ),
                Some("run `holdcall verify` to see every difference"),
            ),
            ChainState::Broken => check(
                name,
                Status::Fail,
                format!(
                    "fails verification ({} problem(s){})",
                    rep.problems.len(),
                    if rep.tables.is_empty() {
                        String::new()
                    } else {
                        format!(", and {} table difference(s)", rep.tables.len())
                    }
                ),
                Some("run `holdcall verify` to see which entries"),
            ),
            ChainState::Partial => check(
                name,
                Status::Warn,
                format!(
                    "{} entries link up, but the machine id is missing",
                    rep.entries
                ),
                Some("restore the machine-id file from a backup of the holdcall home"),
            ),
            ChainState::Empty => check(name, Status::Ok, "empty".into(), None),
            _ => check(
                name,
                Status::Ok,
                format!("{} entries, every link and hash checks", rep.entries),
                None,
            ),
        },
    };
    vec![line]
}

/// The database, its `-wal` and its `-shm` (whichever exist), and the home directory they live
/// in, can be written: an immutable `-shm` (`chattr +i`) made the daemon die of SIGBUS. Each
/// file is opened for writing without truncating, creating or writing anything (an immutable or
/// append-only file refuses that even to root); the directory is asked with access(2).
pub fn database_files(ctx: &Ctx) -> Vec<Check> {
    let name = "database files";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let db = home.db_path();
    if !db.exists() {
        // The journal check already says nothing is recorded yet.
        return Vec::new();
    }
    let mut files = vec![db.clone()];
    for suffix in ["-wal", "-shm"] {
        let mut path = db.clone().into_os_string();
        path.push(suffix);
        files.push(PathBuf::from(path));
    }
    let mut lines = Vec::new();
    if let Err(e) = nix::unistd::access(home.dir(), nix::unistd::AccessFlags::W_OK) {
        lines.push(unwritable(name, home.dir(), Some(e as i32), true));
    }
    for file in files.iter().filter(|f| f.exists()) {
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(file) {
            lines.push(unwritable(name, file, e.raw_os_error(), false));
        }
    }
    if lines.is_empty() {
        let present: Vec<String> = files
            .iter()
            .filter(|f| f.exists())
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        lines.push(check(
            name,
            Status::Ok,
            format!("{} writable", present.join(", ")),
            None,
        ));
    }
    lines
}

/// The FAIL line for a database file (or the home directory) that cannot be written, by why.
fn unwritable(name: &str, path: &Path, errno: Option<i32>, directory: bool) -> Check {
    let shown = visible(&path.display().to_string());
    let (why, remedy) = match errno.map(nix::errno::Errno::from_raw) {
        Some(nix::errno::Errno::EPERM) => (
            "is immutable or append-only (chattr +i or +a), so the daemon cannot write to it",
            format!("as root: `chattr -i -a {shown}`, then `holdcall daemon restart`"),
        ),
        Some(nix::errno::Errno::EROFS) => (
            "is on a read-only file system",
            "remount it read-write, or move the holdcall home (--home, HOLDCALL_HOME)".to_string(),
        ),
        _ => (
            "is not writable by this user",
            format!("give this user write permission on {shown} (chown, chmod u+w)"),
        ),
    };
    let what = if directory {
        "the holdcall home"
    } else {
        "database file"
    };
    check(
        name,
        Status::Fail,
        format!("{what} {shown} {why}"),
        Some(&remedy),
    )
}

/// What `read` takes from the journal, or the one line to show instead: `none` (OK) when there
/// is no journal yet, the error (FAIL) when it cannot be read.
fn stored<T>(
    home: &Home,
    name: &str,
    none: &str,
    read: impl FnOnce(&Reader) -> Result<T, crate::journal::JournalError>,
) -> Result<T, Check> {
    if !home.db_path().exists() {
        return Err(check(name, Status::Ok, none.into(), None));
    }
    Reader::open(&home.db_path())
        .and_then(|r| read(&r))
        .map_err(|e| {
            check(
                name,
                Status::Fail,
                e.to_string(),
                Some("run `holdcall verify`"),
            )
        })
}

/// The stored policy compiles; how many rules.
pub fn policy(ctx: &Ctx) -> Vec<Check> {
    let name = "policy";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let rows = match stored(
        home,
        name,
        "no rules yet: every call is allowed",
        Reader::policies,
    ) {
        Ok(r) => r,
        Err(line) => return vec![line],
    };
    let stored: Vec<crate::policy::StoredPolicy> = rows
        .iter()
        .map(|r| crate::policy::StoredPolicy {
            seq: r.seq,
            id: r.id.clone(),
            text: r.text.clone(),
        })
        .collect();
    vec![match crate::policy::PolicySet::compile(&stored) {
        Ok(set) => check(
            name,
            Status::Ok,
            format!("{} rule(s) compile", set.info().len()),
            None,
        ),
        Err(e) => check(
            name,
            Status::Fail,
            format!("the stored policy does not compile: {e}"),
            Some("run `holdcall policy list` and remove the rule it names"),
        ),
    }]
}

/// The registered connectors, read-only from the database (never a secret).
fn registered_connectors(home: &Home) -> Result<Vec<crate::connector::ListedConnector>, String> {
    if !home.db_path().exists() {
        return Ok(Vec::new());
    }
    Reader::open(&home.db_path())
        .and_then(|r| r.connectors())
        .map_err(|e| e.to_string())
}

/// Whether the credential store answers, asked of the running daemon (the only process that
/// reads secrets, and the one whose session bus counts). Not needed while no connector is
/// registered; without a running daemon it cannot be checked, and doctor never starts one.
pub fn credential_store(ctx: &Ctx) -> Vec<Check> {
    let name = "credential store";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let registered = match registered_connectors(home) {
        Ok(c) => c.len(),
        Err(_) => 0,
    };
    let need = |status_if_needed: Status| {
        if registered == 0 {
            Status::Ok
        } else {
            status_if_needed
        }
    };
    let Ok(rt) = ipc::current_thread() else {
        return Vec::new();
    };
    let line = rt.block_on(async {
        match ipc::probe(home).await {
            Probe::Ours(mut conn) => {
                match conn
                    .call(&Request::VaultProbe, limits::STORE_REQUEST_TIMEOUT)
                    .await
                {
                    Ok(Response::VaultStatus {
                        reachable: true,
                        message,
                    }) => check(name, Status::Ok, message, None),
                    // An unreachable store is an error only for a connector that has a secret
                    // in it: with none registered, nothing needs one (and an OK line never
                    // carries an error's text).
                    Ok(Response::VaultStatus { .. }) if registered == 0 => not_needed(name),
                    Ok(Response::VaultStatus { message, .. }) => check(
                        name,
                        Status::Fail,
                        format!("{message}; registered connectors' servers will not start"),
                        Some(STORE_REMEDY),
                    ),
                    _ if registered == 0 => not_needed(name),
                    _ => check(
                        name,
                        Status::Warn,
                        "the daemon did not say whether it reaches the credential store".into(),
                        Some("run `holdcall daemon restart`; see daemon.log in the holdcall home"),
                    ),
                }
            }
            _ => check(
                name,
                need(Status::Warn),
                if registered == 0 {
                    "not checked (no verified daemon is running; no connector needs it yet)".into()
                } else {
                    "not checked: the daemon reads the store, and no verified daemon is running"
                        .into()
                },
                (registered > 0)
                    .then_some("run `holdcall daemon start`, then `holdcall doctor` again"),
            ),
        }
    });
    vec![line]
}

/// What makes a credential store reachable to the daemon.
const STORE_REMEDY: &str = "start a Secret Service in your desktop session (gnome-keyring-daemon, \
     or KeePassXC with its Secret Service on) and unlock it, then start the daemon from that \
     session (`holdcall daemon restart` there) so it sees DBUS_SESSION_BUS_ADDRESS";

/// The line for a store nothing needs: no connector has a secret.
fn not_needed(name: &str) -> Check {
    check(
        name,
        Status::Ok,
        "none needed: no connector has a secret (`holdcall connector set` will need a reachable \
         Secret Service)"
            .into(),
        None,
    )
}

/// Each registered connector: its registered command still exists and is executable (else its
/// servers cannot start).
pub fn connectors(ctx: &Ctx) -> Vec<Check> {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let list = match registered_connectors(home) {
        Ok(l) => l,
        Err(e) => {
            return vec![check(
                "connectors",
                Status::Fail,
                e,
                Some("run `holdcall verify`"),
            )];
        }
    };
    list.iter()
        .map(|c| {
            let what = format!("connector {}", crate::text::visible(&c.name));
            let program = c.command.first().map(String::as_str).unwrap_or_default();
            let runnable = std::fs::metadata(program)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false);
            if runnable {
                check(
                    &what,
                    Status::Ok,
                    format!(
                        "runs {} with its secret in {}",
                        crate::text::visible(&c.command.join(" ")),
                        c.env_key
                    ),
                    None,
                )
            } else {
                check(
                    &what,
                    Status::Fail,
                    format!(
                        "its registered command {} is missing or not executable, so its servers cannot start",
                        crate::text::visible(program)
                    ),
                    Some("register it again: `holdcall connector set NAME --env KEY -- COMMAND…`"),
                )
            }
        })
        .collect()
}

/// What `enrolments` says while no agent is enrolled (or there is no journal yet).
const NO_AGENTS: &str = "no agents enrolled: every session is bound only by rules naming no agent";

/// Each enrolled agent: current, or STALE (the file changed since enrolment, so it matches no
/// process until it is enrolled again).
pub fn enrolments(ctx: &Ctx) -> Vec<Check> {
    let name = "enrolments";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    let agents = match stored(home, name, NO_AGENTS, Reader::agents) {
        Ok(a) => a,
        Err(line) => return vec![line],
    };
    if agents.is_empty() {
        return vec![check(name, Status::Ok, NO_AGENTS.into(), None)];
    }
    agents
        .iter()
        .map(|a| match crate::agents::staleness(a) {
            Ok(()) => check(
                &format!("agent {}", visible(&a.name)),
                Status::Ok,
                format!("current ({})", visible(&a.path)),
                None,
            ),
            Err(why) => check(
                &format!("agent {}", visible(&a.name)),
                Status::Warn,
                format!(
                    "STALE: {}; it matches no process ({})",
                    visible(&why),
                    visible(&a.path)
                ),
                Some("enrol it again: `holdcall agent add NAME PATH` (`holdcall agent list` shows both)"),
            ),
        })
        .collect()
}

/// Each client file: every stdio server routed, or which are not (and which holdcall routed
/// once and the client has since rewritten).
pub fn clients(ctx: &Ctx) -> Vec<Check> {
    let places = match &ctx.places {
        Ok(p) => p,
        Err(e) => return vec![check("clients", Status::Warn, e.clone(), Some("set HOME"))],
    };
    let backups = ctx.home.as_ref().ok().map(Backups::of);
    let mut out = Vec::new();
    for spec in places.files() {
        let name = format!("{} {}", spec.client.id(), spec.scope);
        let path = visible(&spec.path.display().to_string());
        let loaded = match clients::load(&spec) {
            FileState::Missing => continue,
            FileState::Refused(reason) => {
                out.push(check(
                    &name,
                    Status::Warn,
                    format!("{path}: {}", visible(&reason)),
                    Some("fix the file so its client can read it, then run `holdcall init`"),
                ));
                continue;
            }
            FileState::Read(l) => l,
        };
        out.extend(client_lines(
            &name,
            &spec.path,
            &loaded.entries,
            backups.as_ref(),
        ));
        if let Ok(home) = &ctx.home {
            out.extend(elsewhere_lines(
                &name,
                &spec.path,
                &loaded.entries,
                home.dir(),
                &places.home,
            ));
        }
    }
    if out.is_empty() {
        out.push(check(
            "clients",
            Status::Ok,
            "no MCP client config files found in the usual places".into(),
            None,
        ));
    }
    out
}

/// Routed entries whose relay, started with the MCP SDKs' minimal environment (HOME, LOGNAME,
/// PATH, SHELL, TERM, USER and the entry's own `env`), would use another home than this one:
/// their calls would be decided by another home's rules, or by none.
fn elsewhere_lines(
    name: &str,
    path: &Path,
    entries: &[clients::Entry],
    home: &Path,
    user_home: &Path,
) -> Vec<Check> {
    let shown = visible(&path.display().to_string());
    let here = visible(&home.display().to_string());
    let routed = entries
        .iter()
        .filter(|e| matches!(e.state, EntryState::Routed));
    let (mut implicit, mut explicit) = (Vec::new(), Vec::new());
    for e in routed {
        if let Some(theirs) = e.lands_elsewhere(home, user_home) {
            let line = format!(
                "{} would use {}",
                visible(&e.name),
                visible(&theirs.display().to_string())
            );
            if e.home_arg.is_some() {
                explicit.push(line);
            } else {
                implicit.push(line);
            }
        }
    }
    let mut out = Vec::new();
    if !implicit.is_empty() {
        out.push(check(
            name,
            Status::Fail,
            format!(
                "{shown}: {} routed server(s) have no --home and, started by a client with a minimal environment, would reach another home than {here}, whose rules do not apply there ({})",
                implicit.len(),
                implicit.join("; ")
            ),
            Some("run `holdcall init --write` to write --home into them"),
        ));
    }
    if !explicit.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} routed server(s) name another home than {here} with --home ({})",
                explicit.len(),
                explicit.join("; ")
            ),
            Some("if that is not meant, edit its --home to this home's path"),
        ));
    }
    out
}

fn names(v: &[&clients::Entry]) -> String {
    v.iter()
        .map(|e| visible(&e.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn client_lines(
    name: &str,
    path: &Path,
    entries: &[clients::Entry],
    backups: Option<&Backups>,
) -> Vec<Check> {
    let shown = visible(&path.display().to_string());
    let by = |s: &dyn Fn(&EntryState) -> bool| {
        entries.iter().filter(|e| s(&e.state)).collect::<Vec<_>>()
    };
    let routed = by(&|s| *s == EntryState::Routed);
    let unrouted = by(&|s| *s == EntryState::NotRouted);
    let remote = by(&|s| *s == EntryState::Remote);
    let other = by(&|s| matches!(s, EntryState::OtherHoldcall(_)));
    let reason = |e: &clients::Entry| match &e.state {
        EntryState::OtherHoldcall(o) => o.reason(),
        _ => String::new(),
    };
    let ours = backups.map(|b| b.routed_by_us(path)).unwrap_or_default();
    let dropped: Vec<&clients::Entry> = unrouted
        .iter()
        .copied()
        .filter(|e| ours.contains(&(e.group.clone(), e.name.clone())))
        .collect();
    // A `holdcall serve` entry whose holdcall is gone (moved, uninstalled) is told apart from
    // one that runs another holdcall: the remedy is the same, the cause is not.
    let (missing_binary, foreign): (Vec<&clients::Entry>, Vec<&clients::Entry>) =
        other.iter().copied().partition(|e| match &e.state {
            EntryState::OtherHoldcall(o) => o.missing(),
            _ => false,
        });
    let mut out = Vec::new();
    if !dropped.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) holdcall routed are no longer routed ({}); the client rewrote the file",
                dropped.len(),
                names(&dropped)
            ),
            Some("run `holdcall init --write` again"),
        ));
    }
    let fresh: Vec<&clients::Entry> = unrouted
        .iter()
        .copied()
        .filter(|e| !dropped.iter().any(|d| std::ptr::eq(*d, *e)))
        .collect();
    if !fresh.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} of {} stdio server(s) not routed ({})",
                fresh.len(),
                routed.len() + unrouted.len() + other.len(),
                names(&fresh)
            ),
            Some("run `holdcall init` to see the change, then `holdcall init --write`"),
        ));
    }
    if !missing_binary.is_empty() {
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) name a holdcall that does not exist ({}), so they do not start",
                missing_binary.len(),
                names(&missing_binary)
            ),
            Some("run `holdcall init --write` to point them at this holdcall"),
        ));
    }
    if !foreign.is_empty() {
        let each: Vec<String> = foreign
            .iter()
            .map(|e| format!("{}: {}", visible(&e.name), reason(e)))
            .collect();
        out.push(check(
            name,
            Status::Warn,
            format!(
                "{shown}: {} server(s) NOT routed through this holdcall ({})",
                foreign.len(),
                each.join("; ")
            ),
            Some("run `holdcall init --write` to route them through this holdcall"),
        ));
    }
    if out.is_empty() {
        out.push(check(
            name,
            Status::Ok,
            format!(
                "{shown}: {} stdio server(s) routed, {} remote left alone",
                routed.len(),
                remote.len()
            ),
            None,
        ));
    }
    out
}
