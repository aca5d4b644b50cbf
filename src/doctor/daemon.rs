//! The daemon's checks: it answers on this home's socket and is this build; no stray socket at an
//! old path, no second daemon for this home. Probes only: never starts, signals or stops one.

use std::path::PathBuf;

use super::{Check, Ctx, Status, check};
use crate::config::Home;
use crate::ipc::{self, ManageRequest, ManageResponse, Probe};
use crate::limits;

/// The daemon answers, is verified and is this build. Probes only: never starts one.
pub(super) fn daemon(ctx: &Ctx) -> Vec<Check> {
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
            Probe::Other(v) => other_program(name, &v),
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
            Probe::Ours(conn) => answering(name, home, conn).await,
        }
    });
    let mut lines = vec![line];
    lines.extend(stray_sockets(home));
    lines.extend(second_daemons(home));
    lines
}

/// The line for a process on the socket that is not this build's daemon.
fn other_program(name: &str, v: &crate::agents::PeerCheck) -> Check {
    let older = matches!(
        v,
        crate::agents::PeerCheck::OtherProgram {
            older_build: true,
            ..
        }
    );
    if older {
        check(
            name,
            Status::Fail,
            "an older build of holdcall is running; relays of this build refuse it".into(),
            Some("run `holdcall daemon restart`"),
        )
    } else {
        check(
            name,
            Status::Fail,
            v.describe("the process on the socket"),
            Some("stop that process; holdcall never talks to a daemon it cannot verify"),
        )
    }
}

/// The line for a verified daemon of this build: whether it answers, and can decide.
async fn answering(name: &str, home: &Home, conn: ipc::Conn) -> Check {
    let mut conn = conn.manage();
    match conn
        .call(&ManageRequest::Status, limits::CLI_REQUEST_TIMEOUT)
        .await
    {
        Ok(ManageResponse::Status {
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
            Some(
                "free disk space if the journal cannot be written; otherwise run `holdcall verify`",
            ),
        ),
        Ok(ManageResponse::Status { pid, version, .. }) => check(
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
            let digest = crate::ids::sha256_hex(spelling.as_os_str().as_encoded_bytes());
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
                let v = crate::agents::check_peer(&stream);
                let pid = match &v {
                    crate::agents::PeerCheck::Same { pid }
                    | crate::agents::PeerCheck::WrongUser { pid, .. }
                    | crate::agents::PeerCheck::OtherProgram { pid, .. } => Some(*pid),
                    crate::agents::PeerCheck::Unknown { .. } => None,
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
        let v = crate::agents::check_pid(pid);
        let this_binary = matches!(
            v,
            crate::agents::PeerCheck::Same { .. }
                | crate::agents::PeerCheck::OtherProgram {
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
