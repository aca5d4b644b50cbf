//! The machine at one moment (`Snapshot`): every process, every socket with the processes that
//! hold it, who holdmap itself is, and what could not be seen. Every tool reads a snapshot;
//! none reads `/proc` itself.

use std::collections::BTreeMap;

use crate::os::procs::Proc;
use crate::os::sockets::SocketRow;

/// The machine as one collection saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    /// When the collection was made (Unix epoch, milliseconds).
    pub(crate) taken_at_ms: u64,
    /// The system scanned (`std::env::consts::OS`).
    pub(crate) platform: &'static str,
    pub(crate) me: Me,
    pub(crate) procs: BTreeMap<i32, Proc>,
    pub(crate) sockets: Vec<Socket>,
    /// Sockets with an inode that no readable process holds (other accounts' processes): counted,
    /// never silently dropped.
    pub(crate) hidden_sockets: usize,
    /// What the collection could not do, in words (a table that could not be read …).
    pub(crate) warnings: Vec<String>,
}

/// holdmap's own process: never to be stopped, nor its ancestors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Me {
    pub(crate) pid: i32,
    pub(crate) uid: u32,
    /// Parent, grandparent, … up to the first process (nearest first).
    pub(crate) ancestors: Vec<i32>,
}

/// A socket and the processes that hold it open (empty when hidden or TIME_WAIT).
#[derive(Debug, Clone)]
pub(crate) struct Socket {
    pub(crate) row: SocketRow,
    pub(crate) pids: Vec<i32>,
}

impl Snapshot {
    pub(crate) fn proc(&self, pid: i32) -> Option<&Proc> {
        self.procs.get(&pid)
    }

    /// The direct children of `pid`, in pid order.
    pub(crate) fn children(&self, pid: i32) -> Vec<i32> {
        self.procs
            .values()
            .filter(|p| p.ppid == pid && p.pid != pid)
            .map(|p| p.pid)
            .collect()
    }

    /// Every process below `pid` (children first, then theirs …), bounded by the table's size
    /// so a cycle in a torn read cannot loop.
    pub(crate) fn descendants(&self, pid: i32) -> Vec<i32> {
        let mut out = Vec::new();
        let mut next = vec![pid];
        while let Some(p) = next.pop() {
            for child in self.children(p) {
                if out.len() >= self.procs.len() || out.contains(&child) || child == pid {
                    continue;
                }
                out.push(child);
                next.push(child);
            }
        }
        out
    }

    /// The parent chain of `pid`, nearest first, ending before pid 0; bounded like
    /// `descendants`.
    pub(crate) fn ancestors(&self, pid: i32) -> Vec<i32> {
        let mut out = Vec::new();
        let mut at = pid;
        while let Some(p) = self.procs.get(&at) {
            if p.ppid <= 0 || p.ppid == at || out.contains(&p.ppid) || out.len() >= self.procs.len()
            {
                break;
            }
            out.push(p.ppid);
            at = p.ppid;
        }
        out
    }
}

/// Snapshots made by hand, for tests of what a tool makes of a machine.
#[cfg(test)]
pub(crate) mod fixture {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use super::{Me, Snapshot, Socket};
    use crate::os::procs::Proc;
    use crate::os::sockets::{Protocol, SocketRow, SocketState};

    /// A snapshot in which holdmap is pid 900 (uid 1000), a child of a shell 800 under a
    /// terminal 700 under pid 1.
    pub(crate) fn machine() -> Snapshot {
        let mut s = Snapshot {
            taken_at_ms: 1_700_000_000_000,
            platform: "linux",
            me: Me {
                pid: 900,
                uid: 1000,
                ancestors: vec![800, 700, 1],
            },
            ..Snapshot::default()
        };
        add(&mut s, process(1, 0, 0, "systemd", &["/sbin/init"], "/"));
        add(
            &mut s,
            process(
                700,
                1,
                1000,
                "gnome-terminal-",
                &["/usr/libexec/gnome-terminal-server"],
                "/",
            ),
        );
        add(
            &mut s,
            process(800, 700, 1000, "bash", &["bash"], "/home/u"),
        );
        add(
            &mut s,
            process(900, 800, 1000, "holdmap", &["holdmap", "mcp"], "/home/u"),
        );
        s
    }

    pub(crate) fn process(
        pid: i32,
        ppid: i32,
        uid: u32,
        name: &str,
        argv: &[&str],
        cwd: &str,
    ) -> Proc {
        Proc {
            pid,
            ppid,
            uid: Some(uid),
            start_ticks: 1000 + u64::try_from(pid).unwrap_or(0),
            state: 'S',
            name: name.to_owned(),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            exe: argv.first().map(PathBuf::from),
            cwd: Some(PathBuf::from(cwd)),
            rss_bytes: 10 << 20,
            cpu_ticks: 5,
        }
    }

    pub(crate) fn add(s: &mut Snapshot, p: Proc) {
        s.procs.insert(p.pid, p);
    }

    /// A socket held by `pid` (`pid` 0: held by nobody visible).
    pub(crate) fn socket(
        s: &mut Snapshot,
        protocol: Protocol,
        local: &str,
        remote: &str,
        state: SocketState,
        pid: i32,
    ) {
        let inode = 10_000 + u64::try_from(s.sockets.len()).unwrap_or(0);
        let uid = s.procs.get(&pid).and_then(|p| p.uid).unwrap_or(0);
        s.sockets.push(Socket {
            row: SocketRow {
                protocol,
                local: local
                    .parse::<SocketAddr>()
                    .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into()),
                remote: remote
                    .parse::<SocketAddr>()
                    .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into()),
                state,
                uid,
                inode,
            },
            pids: if pid > 0 { vec![pid] } else { Vec::new() },
        });
    }

    /// A TCP listener on `local` held by `pid`.
    pub(crate) fn listen(s: &mut Snapshot, local: &str, pid: i32) {
        socket(
            s,
            Protocol::Tcp,
            local,
            "0.0.0.0:0",
            SocketState::Listen,
            pid,
        );
    }
}
