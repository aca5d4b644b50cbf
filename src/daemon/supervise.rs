//! `holdcall daemon run`: a small supervisor that runs the real daemon as its child (the same
//! executable, `daemon run --child`), waits for it, and when it ends abnormally — a signal such
//! as SIGBUS or SIGKILL, or a non-zero exit — says so in `daemon.log` and in `daemon.exit`,
//! which `status` reads. A process that dies of a signal writes nothing itself; only its parent
//! sees how it ended, and the command that started the daemon may be long gone.
//!
//! Owns: the exit record `<home>/daemon.exit`. Must never: hold the daemon lock or open
//! `daemon.lock` (the child is the daemon and the lock's holder), listen on the socket, or
//! outlive its child.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::Home;

/// How the last daemon of a home ended, when it ended abnormally.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ExitRecord {
    /// The daemon's pid (the child, which held the lock).
    pub(crate) pid: u32,
    /// When the supervisor saw it end (RFC 3339, UTC).
    pub(crate) at: String,
    /// How it ended, in words: `killed by SIGBUS`, `exited with status 1`.
    pub(crate) status: String,
    /// The last line the daemon's log held when it ended, if any.
    pub(crate) log: Option<String>,
}

impl ExitRecord {
    /// One sentence for `status`.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!(
            "the last daemon (pid {}) ended unexpectedly at {}: {}",
            self.pid, self.at, self.status
        );
        if let Some(l) = &self.log {
            s.push_str(&format!(
                "; the last line of daemon.log before it ended: {l}"
            ));
        }
        s
    }
}

/// Where a home's exit record lives.
pub(crate) fn exit_record_path(home: &Home) -> PathBuf {
    home.dir().join("daemon.exit")
}

/// The exit record of `home`, if the last daemon ended abnormally and none has started since.
pub(crate) fn last_exit(home: &Home) -> Option<ExitRecord> {
    let text = std::fs::read_to_string(exit_record_path(home)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Forgets the last abnormal end: a daemon that holds the lock now makes it history.
pub(crate) fn clear_exit(home: &Home) {
    let _ = std::fs::remove_file(exit_record_path(home));
}

/// Errors of the supervisor itself (the daemon's own errors are the child's to report).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SuperviseError {
    #[error("cannot run the daemon: {0}")]
    #[diagnostic(
        code(holdcall::supervise::spawn),
        help(
            "check that this holdcall executable is still in place, then `holdcall daemon start`"
        )
    )]
    Spawn(#[source] std::io::Error),
}

/// Words for how a child ended, and whether that is how a daemon ends on purpose.
fn ended(status: std::process::ExitStatus) -> (String, bool) {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| format!("signal {sig}"));
        let core = if status.core_dumped() {
            " (core dumped)"
        } else {
            ""
        };
        return (format!("killed by {name}{core}"), false);
    }
    match status.code() {
        Some(0) => ("exited normally".into(), true),
        Some(c) => (format!("exited with status {c}"), false),
        None => (format!("{status}"), false),
    }
}

/// The exit code the supervisor ends with for its child's end: the child's own code, or
/// 128 + the signal, as a shell reports it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// The last non-empty line of the daemon's log.
fn last_line(home: &Home) -> Option<String> {
    let text = std::fs::read(home.daemon_log_path()).ok()?;
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Records an abnormal end: one line appended to `daemon.log` (and to a terminal, when the
/// supervisor runs in one), and `daemon.exit`.
fn record(home: &Home, pid: u32, how: &str) {
    use std::io::{IsTerminal, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let log = last_line(home);
    let line = format!("the daemon (pid {pid}) ended unexpectedly: {how}");
    // Written to the log directly: in the background stderr is the log itself, so the line is
    // there once; in a terminal it goes to both.
    if std::io::stderr().is_terminal() {
        tracing::error!("{line}");
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(home.daemon_log_path())
    {
        let _ = writeln!(
            f,
            "{} ERROR holdcall supervisor: {line}",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        );
    }
    let rec = ExitRecord {
        pid,
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        status: how.to_string(),
        log,
    };
    if let Ok(text) = serde_json::to_string(&rec) {
        let path = exit_record_path(home);
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
    }
}

/// Runs the daemon of `home` as a child and waits for it, forwarding SIGTERM and SIGINT to it.
/// Returns the exit code to end with: the child's.
pub(crate) async fn supervise(home: &Home) -> Result<i32, SuperviseError> {
    use tokio::signal::unix::{SignalKind, signal};
    let exe = std::env::current_exe().map_err(SuperviseError::Spawn)?;
    let mut term = signal(SignalKind::terminate()).map_err(SuperviseError::Spawn)?;
    let mut int = signal(SignalKind::interrupt()).map_err(SuperviseError::Spawn)?;
    // The child inherits stdin, stdout and stderr (the log, when started in the background),
    // and is named the home twice: by `--home` for itself, by HOLDCALL_HOME for `doctor`, which
    // finds a home's daemons by their environment.
    let mut child = tokio::process::Command::new(exe)
        .arg("--home")
        .arg(home.dir())
        .args(["daemon", "run", "--child"])
        .env("HOLDCALL_HOME", home.dir())
        .spawn()
        .map_err(SuperviseError::Spawn)?;
    let pid = child.id().unwrap_or(0);
    let forward = |sig: nix::sys::signal::Signal| {
        if let Ok(p) = i32::try_from(pid)
            && p > 0
        {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
        }
    };
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = term.recv() => forward(nix::sys::signal::Signal::SIGTERM),
            _ = int.recv() => forward(nix::sys::signal::Signal::SIGINT),
        }
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            record(home, pid, &format!("its end could not be read: {e}"));
            return Ok(1);
        }
    };
    let (how, normal) = ended(status);
    if !normal {
        record(home, pid, &how);
    }
    Ok(exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_signal_is_named_and_ends_the_supervisor_as_a_shell_would_say() {
        let bus = std::process::ExitStatus::from_raw(7); // SIGBUS on Linux, no core
        let (how, normal) = ended(bus);
        assert!(!normal);
        assert_eq!(
            how,
            format!(
                "killed by {}",
                nix::sys::signal::Signal::try_from(7).unwrap().as_str()
            )
        );
        assert_eq!(exit_code(bus), 135);
        let one = std::process::ExitStatus::from_raw(1 << 8);
        assert_eq!(ended(one), ("exited with status 1".to_string(), false));
        assert_eq!(exit_code(one), 1);
        assert!(ended(std::process::ExitStatus::from_raw(0)).1);
    }

    #[test]
    fn an_exit_record_says_the_pid_the_status_and_the_last_log_line() {
        let r = ExitRecord {
            pid: 42,
            at: "2026-01-01T00:00:00Z".into(),
            status: "killed by SIGBUS".into(),
            log: Some("INFO listening".into()),
        };
        let d = r.describe();
        assert!(
            d.contains("pid 42") && d.contains("SIGBUS") && d.contains("INFO listening"),
            "{d}"
        );
    }
}
