//! The machine holdmap observes and acts on, behind one trait so that the tools' logic is
//! tested against fixture snapshots, and the real machine (`Live`) only in the integration
//! tests, on processes the tests started.

use crate::holdmap::model::Snapshot;
use crate::os::signal::{Sig, SignalError};

/// Observing and signalling. `Live` is the machine; tests substitute a fixture.
pub(crate) trait World: Send + Sync {
    /// A fresh collection of every process and socket. An error (in words) when the machine
    /// cannot be read at all; partial visibility is `Snapshot::warnings`, not an error.
    fn observe(&self) -> Result<Snapshot, String>;
    /// Sends `sig` to `pid` only if it is still the process that started at `start_ticks`.
    fn signal(&self, pid: i32, start_ticks: u64, sig: Sig) -> Result<(), SignalError>;
    /// Whether `pid` still runs as the process that started at `start_ticks`.
    fn alive(&self, pid: i32, start_ticks: u64) -> bool;
}

/// The machine this process runs on.
pub(crate) struct Live;

impl World for Live {
    fn observe(&self) -> Result<Snapshot, String> {
        Err("observing the machine is not written yet".to_owned())
    }

    fn signal(&self, pid: i32, start_ticks: u64, sig: Sig) -> Result<(), SignalError> {
        crate::os::signal::signal_pinned(pid, start_ticks, sig)
    }

    fn alive(&self, pid: i32, start_ticks: u64) -> bool {
        crate::os::signal::alive_pinned(pid, start_ticks)
    }
}
