//! Signals sent to a pinned process: to the process with this pid *and* this start time, never
//! to a process that reused the pid meanwhile.
//!
//! Owns: `pidfd_open`, the start-time re-check through the pidfd's process, and
//! `pidfd_send_signal`. Must never: signal by name, signal without a start time to compare, or
//! fall back to `kill(2)` (a kernel without pidfds is refused: "not supported here").

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
pub(crate) fn signal_pinned(pid: i32, _start_ticks: u64, _sig: Sig) -> Result<(), SignalError> {
    Err(SignalError::Io {
        pid,
        source: crate::os::unsupported("signalling a pinned process"),
    })
}

/// Whether `pid` still runs as the process that started at `start_ticks` (a zombie counts as
/// exited).
pub(crate) fn alive_pinned(_pid: i32, _start_ticks: u64) -> bool {
    false
}
