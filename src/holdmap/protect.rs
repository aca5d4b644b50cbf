//! Which processes holdmap never stops: PID 1 and the operating system, holdmap itself and its
//! ancestors, shells, terminals, IDEs and AI-assistant hosts.

use crate::holdmap::model::Snapshot;

/// How firmly a process is protected. Over MCP both are always refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// Never signalled by any surface (PID 1, holdmap and its ancestors, the kernel's own).
    Hard,
    /// A session process (shell, terminal, editor, assistant host, system daemon).
    Soft,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protection {
    pub(crate) level: Level,
    /// Why, in words ("PID 1", "holdmap's own ancestor (bash)", "a terminal (kitty)").
    pub(crate) reason: String,
}

/// Whether `pid` is protected in `snap`, and why.
pub(crate) fn protection(_snap: &Snapshot, _pid: i32) -> Option<Protection> {
    None
}
