//! The kernel's socket tables: every TCP and UDP socket (IPv4 and IPv6) with its endpoints,
//! state, owning uid and inode, and which processes hold each inode open.
//!
//! Owns: reading `/proc/net/{tcp,tcp6,udp,udp6}` and `/proc/<pid>/fd`. Must never: judge what a
//! socket means (a dev server, exposure, protection: that is holdmap's), resolve names (no DNS),
//! or fail because one table is missing (IPv6 off) — only when none can be read.

#![allow(dead_code)] // until holdmap uses every item (issue 14)

use std::collections::HashMap;
use std::net::SocketAddr;

/// A socket's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// A socket's state as the kernel reports it (`st` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SocketState {
    /// TCP LISTEN (0x0A).
    Listen,
    /// TCP ESTABLISHED (0x01).
    Established,
    /// TCP TIME_WAIT (0x06): no owner any more (inode 0).
    TimeWait,
    /// A UDP socket bound but not connected (0x07): UDP's "listening".
    Bound,
    /// Any other state, by its kernel number.
    Other(u8),
}

/// One row of a socket table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SocketRow {
    pub(crate) protocol: Protocol,
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) state: SocketState,
    /// The uid that owns the socket (column 8).
    pub(crate) uid: u32,
    /// The socket's inode (column 10); 0 when no process holds it (TIME_WAIT).
    pub(crate) inode: u64,
}

/// Every row of the four tables. An error only when none of them could be read.
pub(crate) fn read_all() -> std::io::Result<Vec<SocketRow>> {
    Err(crate::os::unsupported("reading the socket tables"))
}

/// The rows of one table's text (`/proc/net/tcp6` etc.): the header skipped, unreadable rows
/// skipped. Pure, for tests.
pub(crate) fn parse_table(_text: &str, _protocol: Protocol) -> Vec<SocketRow> {
    Vec::new()
}

/// Which processes hold which socket inodes open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owners {
    /// Socket inode → the pids that hold it (sorted, unique).
    pub(crate) by_inode: HashMap<u64, Vec<i32>>,
    /// How many of the given processes' fd tables could not be read (other accounts' processes
    /// without privilege, or processes that exited meanwhile).
    pub(crate) unreadable: usize,
}

/// Walks the fd tables of `pids` (`/proc/<pid>/fd/*` → `socket:[inode]`).
pub(crate) fn owners(_pids: &[i32]) -> Owners {
    Owners::default()
}
