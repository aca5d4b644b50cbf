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

/// One collection of the machine: the list of pids, then side by side their details and the
/// socket tables followed by who holds each socket. A socket opened after its table was read
/// is simply not listed; one closed before its holder's descriptors were walked shows up held
/// by nobody (hidden) for one scan; a process started after the pids were listed is not seen.
#[cfg(target_os = "linux")]
fn observe_live() -> Result<Snapshot, String> {
    let taken_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let pids = procs::pids().map_err(|e| format!("the process table could not be read: {e}"))?;
    // The two halves take about as long as each other (a few files per process each), so
    // they run side by side: the socket tables and the descriptor walk on a second thread.
    let (table, sockets_half) = std::thread::scope(|scope| {
        let sockets_half =
            scope.spawn(|| sockets::read_tables().map(|tables| (tables, sockets::owners(&pids))));
        let table = procs::read(&pids);
        (table, sockets_half.join())
    });
    let (tables, owners) = sockets_half
        .map_err(|_| "reading the socket tables failed unexpectedly".to_owned())?
        .map_err(|e| format!("the socket tables could not be read: {e}"))?;
    let me = Me {
        pid: i32::try_from(std::process::id()).unwrap_or(0),
        uid: crate::os::process::euid(),
        ancestors: Vec::new(),
    };
    Ok(assemble(taken_at_ms, me, table, tables, &owners))
}

/// The snapshot made of what was read: each socket with its holders, the hidden ones counted,
/// and what could not be seen said in words. Pure, for tests.
#[cfg(target_os = "linux")]
fn assemble(
    taken_at_ms: u64,
    me: Me,
    table: Vec<procs::Proc>,
    tables: sockets::Tables,
    owners: &sockets::Owners,
) -> Snapshot {
    let me_uid = me.uid;
    let mut snapshot = Snapshot {
        taken_at_ms,
        platform: std::env::consts::OS,
        me,
        procs: table.into_iter().map(|p| (p.pid, p)).collect(),
        sockets: Vec::with_capacity(tables.rows.len()),
        hidden_sockets: 0,
        warnings: tables.problems,
    };
    snapshot.me.ancestors = snapshot.ancestors(snapshot.me.pid);

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
    // processes whose sockets could be missing. A process that exited during the scan is no
    // longer in the table and is not counted either.
    let mut unreadable_foreign = 0usize;
    let mut unreadable_own = 0usize;
    for p in owners
        .unreadable_pids
        .iter()
        .filter_map(|pid| snapshot.procs.get(pid))
        .filter(|p| p.pid != 2 && p.ppid != 2)
    {
        if p.uid == Some(me_uid) {
            unreadable_own += 1;
        } else {
            unreadable_foreign += 1;
        }
    }
    let mut unexplained = snapshot.hidden_sockets;
    if unreadable_foreign > 0 {
        unexplained -= hidden_foreign;
        snapshot.warnings.push(format!(
            "{unreadable_foreign} {} of other accounts could not be read (their open files are \
             private to them); their {hidden_foreign} {} counted as hidden_sockets, with no \
             owner shown. Run holdmap as that account, or as root, to see them",
            plural(unreadable_foreign, "process", "processes"),
            plural(hidden_foreign, "socket is", "sockets are"),
        ));
    }
    if unexplained > 0 {
        // A process of ours can hide its open files too (a program that makes itself not
        // dumpable, like ssh-agent); say so only when one did.
        let why = match unreadable_own {
            0 => {
                "sockets of the kernel or of other containers, or closed during the scan".to_owned()
            }
            n => format!(
                "{n} of your own processes {} open files private; the rest belong to the \
                 kernel or closed during the scan",
                plural(n, "keeps its", "keep their"),
            ),
        };
        snapshot.warnings.push(format!(
            "{unexplained} {} held by no process holdmap could read ({why}); counted as \
             hidden_sockets",
            plural(unexplained, "socket is", "sockets are"),
        ));
    }
    snapshot
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

    fn row(port: u16, uid: u32, inode: u64, state: SocketState) -> sockets::SocketRow {
        sockets::SocketRow {
            protocol: Protocol::Tcp,
            local: ([127, 0, 0, 1], port).into(),
            remote: ([0, 0, 0, 0], 0).into(),
            state,
            uid,
            inode,
        }
    }

    #[test]
    fn a_process_of_ours_that_hides_its_files_is_named_as_a_reason() {
        use crate::holdmap::model::fixture::process;
        let table = vec![
            process(900, 1, 1000, "holdmap", &["holdmap", "mcp"], "/"),
            process(910, 1, 1000, "ssh-agent", &["ssh-agent"], "/"),
        ];
        let tables = sockets::Tables {
            rows: vec![row(7000, 1000, 21, SocketState::Listen)],
            problems: Vec::new(),
        };
        let owners = sockets::Owners {
            by_inode: Default::default(),
            unreadable: 2,
            unreadable_pids: vec![910, 4242],
        };
        let me = Me {
            pid: 900,
            uid: 1000,
            ancestors: Vec::new(),
        };
        let s = assemble(7, me, table, tables, &owners);
        assert_eq!(s.me.ancestors, vec![1]);
        assert_eq!(s.hidden_sockets, 1);
        assert_eq!(
            s.warnings,
            vec![
                "1 socket is held by no process holdmap could read (1 of your own processes \
                 keeps its open files private; the rest belong to the kernel or closed during the \
                 scan); counted as hidden_sockets"
                    .to_owned()
            ]
        );
    }

    #[test]
    fn sockets_of_unreadable_accounts_are_counted_hidden_and_said_in_words() {
        use crate::holdmap::model::fixture::process;
        let table = vec![
            process(1, 0, 0, "init", &["/sbin/init"], "/"),
            process(2, 0, 0, "kthreadd", &[], "/"),
            process(3, 2, 0, "kworker/0:0", &[], "/"),
            process(50, 1, 0, "sshd", &["sshd"], "/"),
            process(60, 1, 33, "nginx", &["nginx"], "/"),
            process(800, 1, 1000, "bash", &["bash"], "/home/u"),
            process(900, 800, 1000, "holdmap", &["holdmap", "mcp"], "/home/u"),
            process(901, 900, 1000, "vite", &["node", "vite"], "/home/u/app"),
        ];
        let tables = sockets::Tables {
            rows: vec![
                row(22, 0, 11, SocketState::Listen),
                row(80, 33, 12, SocketState::Listen),
                row(443, 33, 13, SocketState::Listen),
                row(5173, 1000, 14, SocketState::Listen),
                row(5173, 1000, 0, SocketState::TimeWait),
                row(6000, 1000, 15, SocketState::Listen),
            ],
            problems: vec!["/proc/net/udp6 could not be read: gone".to_owned()],
        };
        let owners = sockets::Owners {
            by_inode: [(14, vec![901])].into_iter().collect(),
            unreadable: 5,
            unreadable_pids: vec![1, 2, 3, 50, 60],
        };
        let me = Me {
            pid: 900,
            uid: 1000,
            ancestors: Vec::new(),
        };
        let s = assemble(7, me, table, tables, &owners);
        assert_eq!(s.me.ancestors, vec![800, 1]);
        assert_eq!(s.procs.len(), 8);
        assert_eq!(s.sockets.len(), 6);
        assert_eq!(s.sockets[3].pids, vec![901]);
        assert!(s.sockets[4].pids.is_empty());
        // 22, 80, 443 (other accounts) and 6000 (ours, held by nobody we could read).
        assert_eq!(s.hidden_sockets, 4);
        assert_eq!(
            s.warnings,
            vec![
                "/proc/net/udp6 could not be read: gone".to_owned(),
                "3 processes of other accounts could not be read (their open files are private \
                 to them); their 3 sockets are counted as hidden_sockets, with no owner shown. \
                 Run holdmap as that account, or as root, to see them"
                    .to_owned(),
                "1 socket is held by no process holdmap could read (sockets of the kernel or of \
                 other containers, or closed during the scan); counted as hidden_sockets"
                    .to_owned(),
            ]
        );
    }
}
