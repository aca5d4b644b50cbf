//! The process table: every process's identity (pid and start time), parent, account, state,
//! name, command line, executable, working directory and resource use, from `/proc`.
//!
//! Owns: reading `/proc/<pid>/{stat,status,cmdline,exe,cwd}`. Must never: judge a process (dev
//! server, protected, agent: that is holdmap's), fail the whole table because one process exited
//! or hides its files (that process's unreadable fields are `None` or empty), or read more of a
//! file than a bound.

#![allow(dead_code)] // until holdmap uses every item (issue 14)

use std::path::PathBuf;

/// One process, as `/proc` showed it at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    /// Real uid (`Uid:` of `/proc/<pid>/status`); `None` if unreadable.
    pub(crate) uid: Option<u32>,
    /// Start time in clock ticks after boot (field 22 of `stat`): with the pid, the process's
    /// identity — a pid reused by a new process has a different start time.
    pub(crate) start_ticks: u64,
    /// State letter (field 3 of `stat`): `R`, `S`, `Z` (zombie) …
    pub(crate) state: char,
    /// The kernel's name (`comm`, at most 15 bytes).
    pub(crate) name: String,
    /// The command line, one element per argument; empty when unreadable (kernel threads,
    /// other accounts under hidepid) or a zombie.
    pub(crate) argv: Vec<String>,
    pub(crate) exe: Option<PathBuf>,
    pub(crate) cwd: Option<PathBuf>,
    /// Resident memory (bytes).
    pub(crate) rss_bytes: u64,
    /// User plus system CPU time (clock ticks).
    pub(crate) cpu_ticks: u64,
}

impl Proc {
    /// A zombie or dead process: it holds nothing and cannot be stopped.
    pub(crate) fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Every process `/proc` lists now. An error only when `/proc` itself cannot be read.
pub(crate) fn all() -> std::io::Result<Vec<Proc>> {
    Err(crate::os::unsupported("reading the process table"))
}

/// One process now; `None` if it does not exist (or its `stat` cannot be read).
pub(crate) fn one(_pid: i32) -> Option<Proc> {
    None
}

/// The start time (ticks after boot) of `pid` now; `None` if there is no such process.
pub(crate) fn start_ticks(_pid: i32) -> Option<u64> {
    None
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), to turn ticks into seconds.
pub(crate) fn ticks_per_second() -> u64 {
    100
}
