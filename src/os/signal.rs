//! Signals sent to a pinned process: to the process with this pid *and* this start time, never
//! to a process that reused the pid meanwhile.
//!
//! Owns: `pidfd_open`, the start-time re-check through the pidfd's process, and
//! `pidfd_send_signal`. Must never: signal by name, signal without a start time to compare, or
//! fall back to `kill(2)` (a kernel without pidfds is refused: "not supported here").
//!
//! The order is what makes it safe: the pidfd is opened first and names one process for good;
//! the start time read after that is the start time of the process the pidfd names if the pid
//! was not reused in between, and a different one if it was. Either way the signal goes through
//! the pidfd, which can reach no other process: if the pinned process exits after the check, the
//! send fails with ESRCH instead of reaching a newcomer.

#![allow(dead_code)] // until holdmap uses every item (issue 14)

/// Which signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sig {
    Term,
    Kill,
}

/// Why a signal was not sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignalError {
    #[error("process {pid} has exited")]
    Gone { pid: i32 },
    #[error("process {pid} is no longer the process that was checked (its start time changed)")]
    Replaced { pid: i32 },
    #[error("not permitted to signal process {pid}")]
    Denied { pid: i32 },
    #[error("signalling process {pid}: {source}")]
    Io { pid: i32, source: std::io::Error },
}

/// Sends `sig` to `pid` if it is still the process that started at `start_ticks`.
#[cfg(target_os = "linux")]
pub(crate) fn signal_pinned(pid: i32, start_ticks: u64, sig: Sig) -> Result<(), SignalError> {
    use rustix::io::Errno;
    use rustix::process::{PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

    // Checked before `Pid::from_raw`, which asserts a non-negative pid; 0 and negative pids
    // name process groups to kill(2) and are never a pinned process.
    let positive = if pid > 0 { Some(pid) } else { None };
    let Some(target) = positive.and_then(rustix::process::Pid::from_raw) else {
        return Err(SignalError::Io {
            pid,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a pid must be a positive number",
            ),
        });
    };
    let fd = pidfd_open(target, PidfdFlags::empty()).map_err(|e| match e {
        Errno::SRCH => SignalError::Gone { pid },
        Errno::PERM | Errno::ACCESS => SignalError::Denied { pid },
        Errno::NOSYS => SignalError::Io {
            pid,
            source: std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this kernel has no pidfd_open (Linux 5.3 or later is needed); holdmap signals \
                 only through pidfds, so that a reused pid can never be hit",
            ),
        },
        other => SignalError::Io {
            pid,
            source: other.into(),
        },
    })?;
    match crate::os::procs::stat(pid) {
        None => return Err(SignalError::Gone { pid }),
        Some(now) if now.start_ticks != start_ticks => {
            return Err(SignalError::Replaced { pid });
        }
        // A zombie has already exited: signalling it does nothing, and saying it was signalled
        // would be a lie.
        Some(now) if matches!(now.state, 'Z' | 'X') => return Err(SignalError::Gone { pid }),
        Some(_) => {}
    }
    let signal = match sig {
        Sig::Term => Signal::TERM,
        Sig::Kill => Signal::KILL,
    };
    pidfd_send_signal(&fd, signal).map_err(|e| match e {
        Errno::SRCH => SignalError::Gone { pid },
        Errno::PERM => SignalError::Denied { pid },
        other => SignalError::Io {
            pid,
            source: other.into(),
        },
    })
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn signal_pinned(pid: i32, _start_ticks: u64, _sig: Sig) -> Result<(), SignalError> {
    Err(SignalError::Io {
        pid,
        source: crate::os::unsupported("signalling a pinned process"),
    })
}

/// Whether `pid` still runs as the process that started at `start_ticks` (a zombie counts as
/// exited).
pub(crate) fn alive_pinned(pid: i32, start_ticks: u64) -> bool {
    crate::os::procs::stat(pid)
        .is_some_and(|s| s.start_ticks == start_ticks && !matches!(s.state, 'Z' | 'X'))
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    fn sleeper() -> (std::process::Child, i32, u64) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = crate::os::procs::start_ticks(pid).unwrap();
        (child, pid, start)
    }

    #[test]
    fn a_wrong_start_time_is_refused_as_replaced_and_the_process_lives_on() {
        let (mut child, pid, start) = sleeper();
        let err = signal_pinned(pid, start + 1, Sig::Term).unwrap_err();
        assert!(
            matches!(err, SignalError::Replaced { pid: p } if p == pid),
            "{err}"
        );
        assert!(alive_pinned(pid, start));
        assert!(!alive_pinned(pid, start + 1));
        assert_eq!(child.try_wait().unwrap(), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_right_start_time_delivers_the_signal_and_a_reaped_process_is_gone() {
        use std::os::unix::process::ExitStatusExt as _;
        let (mut child, pid, start) = sleeper();
        signal_pinned(pid, start, Sig::Term).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(15));
        assert!(!alive_pinned(pid, start));
        let err = signal_pinned(pid, start, Sig::Kill).unwrap_err();
        assert!(
            matches!(err, SignalError::Gone { pid: p } if p == pid),
            "{err}"
        );
    }

    #[test]
    fn a_zombie_is_gone_and_not_alive() {
        let (mut child, pid, start) = sleeper();
        signal_pinned(pid, start, Sig::Kill).unwrap();
        // Not reaped yet: it is a zombie until `wait`. Its state turns Z once the kernel has
        // finished it; poll with a deadline rather than sleep.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while crate::os::procs::stat(pid).is_some_and(|s| s.state != 'Z') {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::yield_now();
        }
        assert!(!alive_pinned(pid, start));
        let err = signal_pinned(pid, start, Sig::Term).unwrap_err();
        assert!(matches!(err, SignalError::Gone { .. }), "{err}");
        child.wait().unwrap();
    }

    #[test]
    fn a_pid_that_is_not_positive_is_refused_without_a_syscall_on_a_group() {
        for pid in [0, -1, i32::MIN] {
            let err = signal_pinned(pid, 1, Sig::Term).unwrap_err();
            assert!(matches!(err, SignalError::Io { .. }), "{err}");
        }
        assert!(!alive_pinned(0, 0));
    }
}
