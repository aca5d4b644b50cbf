//! `holdcall daemon run|start|stop|restart|status`: starting, stopping and describing this
//! home's daemon, found through its lock and its socket. Must never signal a process that is
//! not this Holdcall running as this user.

use std::time::{Duration, Instant};

use super::args::DaemonCmd;
use super::{CliError, home_and_config};
use crate::config::Home;
use crate::ipc::{self, ManageRequest, ManageResponse, Probe};
use crate::limits;
use crate::text::visible;

pub(super) fn daemon_cmd(action: DaemonCmd) -> Result<i32, CliError> {
    let (home, config) = home_and_config()?;
    match action {
        DaemonCmd::Run { child: false } => {
            // Detach from the terminal's session when started in the background; harmless
            // (and refused by the kernel) when already a group leader in the foreground. The
            // daemon, its child, stays in this session.
            let _ = nix::unistd::setsid();
            let rt = ipc::current_thread()?;
            Ok(rt.block_on(crate::daemon::supervise::supervise(&home))?)
        }
        DaemonCmd::Run { child: true } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            match rt.block_on(crate::daemon::run(home, config)) {
                Ok(()) => Ok(0),
                Err(crate::daemon::DaemonError::AlreadyRunning(h)) => {
                    eprintln!("holdcall: a daemon is already running for {h}");
                    Ok(0)
                }
                Err(e) => Err(e.into()),
            }
        }
        DaemonCmd::Start => {
            let rt = ipc::current_thread()?;
            rt.block_on(async {
                match ipc::probe(&home).await {
                    Probe::Ours(_) => {
                        println!(
                            "the daemon is already running ({})",
                            home.socket_path().display()
                        );
                        Ok(0)
                    }
                    Probe::Other(v) => {
                        Err(CliError::Refused(v.describe("the process on the socket")))
                    }
                    Probe::OtherHome { pid, why } => Err(CliError::Refused(format!(
                        "the daemon on {} (pid {pid}) is not this home's: {why}",
                        home.socket_path().display()
                    ))),
                    Probe::Silent { pid } => Err(CliError::Refused(format!(
                        "the daemon on {} (pid {pid}) does not answer within {:?}; run `holdcall daemon restart`",
                        home.socket_path().display(),
                        limits::DAEMON_HELLO_TIMEOUT
                    ))),
                    Probe::NotRunning => {
                        ipc::connect_or_start(&home, crate::limits::DAEMON_READY_TIMEOUT).await?;
                        println!("the daemon is running ({})", home.socket_path().display());
                        Ok(0)
                    }
                }
            })
        }
        DaemonCmd::Stop => {
            let rt = ipc::current_thread()?;
            rt.block_on(stop_daemon(&home))
        }
        DaemonCmd::Restart => {
            let rt = ipc::current_thread()?;
            rt.block_on(async {
                stop_daemon(&home).await?;
                ipc::connect_or_start(&home, crate::limits::DAEMON_READY_TIMEOUT).await?;
                println!(
                    "holdcall: daemon restarted and answering at {}",
                    home.socket_path().display()
                );
                Ok(0)
            })
        }
        DaemonCmd::Status => {
            let rt = ipc::current_thread()?;
            rt.block_on(async {
                let d = daemon_line(&home).await;
                println!("{}", d.text);
                Ok(d.code)
            })
        }
    }
}

/// What `status` and `daemon status` say about the daemon.
pub(super) struct DaemonLine {
    /// One line, starting `daemon   `.
    pub(super) text: String,
    /// The exit code `daemon status` gives: 0 running, 1 something is wrong, 3 not running.
    pub(super) code: i32,
    /// The daemon's pid: the lock holder's, by the kernel's word.
    pub(super) pid: Option<i32>,
}

/// One line about the daemon. The home's lock says whether a daemon runs (F_GETLK names its
/// pid); the socket says whether it answers. "not running" only when the lock is free.
pub(super) async fn daemon_line(home: &Home) -> DaemonLine {
    let holder = ipc::lock_holder(home);
    let socket = home.socket_path();
    let line = |text: String, code: i32| DaemonLine {
        text,
        code,
        pid: holder,
    };
    match ipc::probe(home).await {
        Probe::NotRunning => match holder {
            None => {
                let mut text = "daemon   not running".to_string();
                if let Some(rec) = crate::daemon::supervise::last_exit(home) {
                    text.push_str(&format!(" -- {}", rec.describe()));
                }
                line(text, 3)
            }
            Some(pid) => match crate::agents::check_pid(pid) {
                crate::agents::PeerCheck::Same { .. } => line(
                    format!(
                        "daemon   running (pid {pid}) but not answering on {}",
                        socket.display()
                    ),
                    1,
                ),
                v => line(
                    format!(
                        "daemon   the lock {} is held by pid {pid}, and nothing answers on {}: {}",
                        home.lock_path().display(),
                        socket.display(),
                        v.describe("that process")
                    ),
                    1,
                ),
            },
        },
        Probe::Other(v) => {
            let older = matches!(
                v,
                crate::agents::PeerCheck::OtherProgram {
                    older_build: true,
                    ..
                }
            );
            if older {
                line(
                    "daemon   OLDER BUILD -- run `holdcall daemon restart`".into(),
                    1,
                )
            } else {
                line(
                    format!(
                        "daemon   NOT HOLDCALL -- {}",
                        v.describe("the process on the socket")
                    ),
                    1,
                )
            }
        }
        Probe::Ours(conn) => answering(home, holder, conn).await,
        Probe::OtherHome { pid, why } => line(
            format!("daemon   ANOTHER HOME'S -- pid {pid} on this home's socket: {why}"),
            1,
        ),
        Probe::Silent { pid } => line(
            format!(
                "daemon   running (pid {pid}) but not answering on {} within {:?} (stopped or hung?)",
                socket.display(),
                limits::DAEMON_HELLO_TIMEOUT
            ),
            1,
        ),
    }
}

/// The line for a verified daemon of this build: what it says of itself, or that it does not
/// answer.
async fn answering(home: &Home, holder: Option<i32>, conn: ipc::Conn) -> DaemonLine {
    let mut conn = conn.manage();
    let socket = home.socket_path();
    let line = |text: String, code: i32| DaemonLine {
        text,
        code,
        pid: holder,
    };
    match conn
        .call(&ManageRequest::Status, limits::CLI_REQUEST_TIMEOUT)
        .await
    {
        Ok(ManageResponse::Status {
            pid,
            version,
            cannot_decide: Some(why),
            ..
        }) => DaemonLine {
            text: format!(
                "daemon   running (pid {pid}, version {version}) but CANNOT DECIDE: {}",
                visible(&why)
            ),
            code: 1,
            pid: holder.or(i32::try_from(pid).ok()),
        },
        Ok(ManageResponse::Status {
            pid,
            version,
            sessions,
            durability,
            ..
        }) => DaemonLine {
            text: format!(
                "daemon   running (pid {pid}, version {version}, {sessions} live session(s), durability {durability})"
            ),
            code: 0,
            pid: holder.or(i32::try_from(pid).ok()),
        },
        Ok(_) | Err(_) => line(
            format!(
                "daemon   running{} but not answering on {}",
                holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                socket.display()
            ),
            1,
        ),
    }
}

/// Sends SIGTERM to the holder of the home's daemon lock, after checking that it is this
/// Holdcall (or an older build at the same path) running as us: a pid is only a number.
pub(super) fn signal_lock_holder(home: &Home, pid: i32) -> Result<(), CliError> {
    use crate::agents::PeerCheck;
    match crate::agents::check_pid(pid) {
        PeerCheck::Same { .. }
        | PeerCheck::OtherProgram {
            older_build: true, ..
        } if pid > 0 => {}
        v => {
            return Err(CliError::Refused(format!(
                "not stopping pid {pid}, the holder of {}: {}",
                home.lock_path().display(),
                if pid > 0 {
                    v.describe("that process")
                } else {
                    "the kernel does not name it (it runs in another pid namespace)".into()
                }
            )));
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .map_err(|e| CliError::Refused(format!("cannot stop pid {pid}: {e}")))?;
    // A daemon stopped with SIGSTOP (the "not answering" case `status` suggests a restart for)
    // only acts on the SIGTERM once continued.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGCONT,
    );
    Ok(())
}

pub(super) async fn stop_daemon(home: &Home) -> Result<i32, CliError> {
    match ipc::probe(home).await {
        Probe::NotRunning => match ipc::lock_holder(home) {
            None => {
                println!("holdcall: no daemon was running");
                return Ok(0);
            }
            // Its socket is gone (or not there yet): the lock still names it.
            Some(pid) => {
                signal_lock_holder(home, pid)?;
                println!(
                    "holdcall: stopping the daemon (pid {pid}), which was not answering on {}",
                    home.socket_path().display()
                );
            }
        },
        Probe::Ours(conn) => {
            match conn
                .manage()
                .call(&ManageRequest::Shutdown, limits::CLI_REQUEST_TIMEOUT)
                .await
            {
                Ok(_) => println!("holdcall: stopping the daemon"),
                // It did not answer: the lock names it, and a signal stops it.
                Err(e) => match ipc::lock_holder(home) {
                    Some(pid) => {
                        signal_lock_holder(home, pid)?;
                        println!(
                            "holdcall: stopping the daemon (pid {pid}), which did not answer: {e}"
                        );
                    }
                    None => return Err(e.into()),
                },
            }
        }
        Probe::Other(crate::agents::PeerCheck::OtherProgram {
            pid,
            older_build: true,
            ..
        }) => {
            // An older build cannot be spoken to (it is not verified), but it is ours to stop:
            // same user, same launch path.
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            )
            .map_err(|e| CliError::Refused(format!("cannot stop pid {pid}: {e}")))?;
            println!("holdcall: stopping the older daemon (pid {pid})");
        }
        Probe::Other(v) => {
            return Err(CliError::Refused(format!(
                "not stopping {}",
                v.describe("the process on the socket")
            )));
        }
        // The holder of this home's lock is this home's daemon, whatever database it has open
        // (one replaced behind it is no longer this home's): ours to stop. Any other is not.
        Probe::OtherHome { pid, .. } if ipc::lock_holder(home) == Some(pid) => {
            signal_lock_holder(home, pid)?;
            println!(
                "holdcall: stopping the daemon (pid {pid}), which serves a database this home no longer holds"
            );
        }
        Probe::OtherHome { pid, why } => {
            return Err(CliError::Refused(format!(
                "not stopping pid {pid}: it is not this home's daemon ({why})"
            )));
        }
        // Verified but silent: only the holder of this home's lock is ours to signal.
        Probe::Silent { pid } => {
            if ipc::lock_holder(home) != Some(pid) {
                return Err(CliError::Refused(format!(
                    "not stopping pid {pid}: it does not answer and does not hold {}",
                    home.lock_path().display()
                )));
            }
            signal_lock_holder(home, pid)?;
            println!("holdcall: stopping the daemon (pid {pid}), which was not answering");
        }
    }
    let deadline = Instant::now() + limits::DAEMON_START_TIMEOUT;
    while Instant::now() < deadline {
        // Gone means its lock is released (a daemon still writing its last entries holds the
        // lock after removing its socket) and nothing of ours answers on the socket.
        if ipc::daemon_lock_free(home) && !matches!(ipc::probe(home).await, Probe::Ours(_)) {
            return Ok(0);
        }
        // Waiting for another process to let go of its lock: nothing to wait on but time.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(CliError::Refused(format!(
        "the daemon did not stop within {:?}",
        limits::DAEMON_START_TIMEOUT
    )))
}
