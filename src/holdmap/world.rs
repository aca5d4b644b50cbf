//! The machine holdmap observes and acts on, behind one trait so that the tools' logic is
//! tested against fixture snapshots, and the real machine (`Live`) only in the integration
//! tests, on processes the tests started.

use crate::holdmap::model::Snapshot;
use crate::os::signal::{Sig, SignalError};

#[cfg(target_os = "linux")]
use crate::holdmap::model::{Me, Socket};
#[cfg(target_os = "linux")]
use crate::os::{procs, sockets};

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
        observe_live()
    }

    fn signal(&self, pid: i32, start_ticks: u64, sig: Sig) -> Result<(), SignalError> {
        crate::os::signal::signal_pinned(pid, start_ticks, sig)
    }

    fn alive(&self, pid: i32, start_ticks: u64) -> bool {
        crate::os::signal::alive_pinned(pid, start_ticks)
    }
}

/// One collection of the machine: the process table, then the socket tables, then who holds
/// each socket. A socket opened after its table was read is simply not listed; one closed
/// before its holder's descriptors were walked shows up held by nobody (hidden) for one scan.
#[cfg(target_os = "linux")]
fn observe_live() -> Result<Snapshot, String> {
    let taken_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let table = procs::all().map_err(|e| format!("the process table could not be read: {e}"))?;
    let tables =
        sockets::read_tables().map_err(|e| format!("the socket tables could not be read: {e}"))?;
    let pids: Vec<i32> = table.iter().map(|p| p.pid).collect();
    let owners = sockets::owners(&pids);

    let me_pid = i32::try_from(std::process::id()).unwrap_or(0);
    let me_uid = crate::os::process::euid();
    let mut snapshot = Snapshot {
        taken_at_ms,
        platform: std::env::consts::OS,
        me: Me {
            pid: me_pid,
            uid: me_uid,
            ancestors: Vec::new(),
        },
        procs: table.into_iter().map(|p| (p.pid, p)).collect(),
        sockets: Vec::with_capacity(tables.rows.len()),
        hidden_sockets: 0,
        warnings: tables.problems,
    };
    snapshot.me.ancestors = snapshot.ancestors(me_pid);

    let mut hidden_foreign = 0usize;
    for row in tables.rows {
        let pids = match row.inode {
            0 => Vec::new(),
            inode => owners.by_inode.get(&inode).cloned().unwrap_or_default(),
        };
        if row.inode != 0 && pids.is_empty() {
            snapshot.hidden_sockets += 1;
            if row.uid != me_uid {
                hidden_foreign += 1;
            }
        }
        snapshot.sockets.push(Socket { row, pids });
    }

    // Kernel threads (kthreadd, pid 2, and its children) hold no sockets of their own, and
    // their descriptors are closed to everyone but root: leaving them out keeps the count to
    // processes whose sockets could be missing.
    let unreadable_foreign = owners
        .unreadable_pids
        .iter()
        .filter_map(|pid| snapshot.procs.get(pid))
        .filter(|p| p.pid != 2 && p.ppid != 2 && p.uid != Some(me_uid))
        .count();
    if unreadable_foreign > 0 {
        snapshot.warnings.push(format!(
            "{unreadable_foreign} {} of other accounts could not be read (their open files are \
             private to them); their {hidden_foreign} {} counted as hidden_sockets, with no \
             owner shown. Run holdmap as that account, or as root, to see them",
            plural(unreadable_foreign, "process", "processes"),
            plural(hidden_foreign, "socket is", "sockets are"),
        ));
    } else if snapshot.hidden_sockets > 0 {
        snapshot.warnings.push(format!(
            "{} {} no readable process holds (held by the kernel, or closed during the scan); \
             counted as hidden_sockets",
            snapshot.hidden_sockets,
            plural(snapshot.hidden_sockets, "socket", "sockets"),
        ));
    }
    Ok(snapshot)
}

#[cfg(target_os = "linux")]
fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

#[cfg(not(target_os = "linux"))]
fn observe_live() -> Result<Snapshot, String> {
    Err(format!(
        "holdmap reads ports on Linux only; this system ({}) is not supported yet",
        std::env::consts::OS
    ))
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;
    use crate::os::sockets::{Protocol, SocketState};

    #[test]
    fn the_live_machine_shows_a_listener_we_bound_held_by_us() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let s = Live.observe().unwrap();
        let me = std::process::id() as i32;
        assert_eq!(s.me.pid, me);
        assert_eq!(s.me.uid, crate::os::process::euid());
        assert_eq!(s.platform, "linux");
        assert!(s.taken_at_ms > 1_600_000_000_000);
        assert_eq!(
            s.me.ancestors.first(),
            Some(&nix::unistd::getppid().as_raw())
        );
        assert!(s.proc(me).is_some());
        let socket = s
            .sockets
            .iter()
            .find(|x| x.row.protocol == Protocol::Tcp && x.row.local == at)
            .unwrap_or_else(|| panic!("no socket on {at}"));
        assert_eq!(socket.row.state, SocketState::Listen);
        assert_eq!(socket.pids, vec![me]);
        let hidden = s
            .sockets
            .iter()
            .filter(|x| x.row.inode != 0 && x.pids.is_empty())
            .count();
        assert_eq!(s.hidden_sockets, hidden);
    }
}
