//! The process table: every process's identity (pid and start time), parent, account, state,
//! name, command line, executable, working directory and resource use, from `/proc`.
//!
//! Owns: reading `/proc/<pid>/{stat,status,cmdline,exe,cwd}`. Must never: judge a process (dev
//! server, protected, agent: that is holdmap's), fail the whole table because one process exited
//! or hides its files (that process's unreadable fields are `None` or empty), or read more of a
//! file than a bound.
//!
//! A scan reads some 2,000 processes, so each file is opened and read once, into buffers that
//! are reused from one process to the next.

use std::path::PathBuf;

/// One process, as `/proc` showed it at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Proc {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    /// The process's one account: its real uid when the real, effective, saved and file-system
    /// uids (`Uid:` of `/proc/<pid>/status`) are all the same; `None` if unreadable or if they
    /// differ (a setuid program started by a user runs with another account's rights: it is
    /// nobody's "own" process).
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

/// The fields of one `/proc/<pid>/stat` line that a `Proc` keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) name: String,
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) cpu_ticks: u64,
    pub(crate) start_ticks: u64,
    /// Resident set size in pages (field 24).
    pub(crate) rss_pages: u64,
}

/// Parses a stat line: `pid (comm) state ppid … utime(14) stime(15) … starttime(22) vsize
/// rss(24) …`. `comm` is whatever the process named itself, spaces and parentheses included, so
/// it ends at the LAST `)`; every field after it is a number the kernel wrote.
pub(crate) fn parse_stat(line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&b| b == b'(')?;
    let close = line.iter().rposition(|&b| b == b')')?;
    let name = String::from_utf8_lossy(line.get(open.checked_add(1)?..close)?).into_owned();
    let rest = std::str::from_utf8(line.get(close.checked_add(1)?..)?).ok()?;
    // `fields[0]` is field 3 (state).
    let mut fields = rest.split_ascii_whitespace();
    let mut state = fields.next()?.chars();
    let state_letter = state.next()?;
    if state.next().is_some() {
        return None;
    }
    let ppid = fields.next()?.parse().ok()?;
    let mut fields = fields.skip(9); // fields 5 to 13
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let mut fields = fields.skip(6); // fields 16 to 21
    let start_ticks = fields.next()?.parse().ok()?;
    let _vsize = fields.next()?;
    let rss_pages = fields.next()?.parse::<i64>().ok()?;
    Some(Stat {
        name,
        state: state_letter,
        ppid,
        cpu_ticks: utime.saturating_add(stime),
        start_ticks,
        rss_pages: u64::try_from(rss_pages).unwrap_or(0),
    })
}

/// The uid of `Uid:`'s four (real, effective, saved, file system) in the text of
/// `/proc/<pid>/status` when all four are the same; `None` when they differ or cannot be read.
fn parse_real_uid(status: &[u8]) -> Option<u32> {
    let line = status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Uid:"))
        .and_then(|v| std::str::from_utf8(v).ok())?;
    let uids: Vec<u32> = line
        .split_ascii_whitespace()
        .map(|v| v.parse().ok())
        .collect::<Option<Vec<u32>>>()?;
    match uids.as_slice() {
        [real, rest @ ..] if !rest.is_empty() && rest.iter().all(|u| u == real) => Some(*real),
        _ => None,
    }
}

/// The thread-group id (`Tgid:`): the pid of the process a thread belongs to.
fn parse_tgid(status: &[u8]) -> Option<i32> {
    status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Tgid:"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A command line: NUL-separated arguments, the last one NUL-terminated (a process that
/// rewrote its argv may leave no NULs at all: then it is one argument).
fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fmt::Write as _;
    use std::io::Read as _;

    use super::{Proc, Stat, parse_cmdline, parse_real_uid, parse_stat, parse_tgid};
    use crate::limits;

    /// Buffers reused from one process to the next.
    #[derive(Default)]
    pub(super) struct Reader {
        path: String,
        buf: Vec<u8>,
        page_size: u64,
    }

    /// Whether an error says the process is gone (rather than hidden from us).
    fn vanished(e: &std::io::Error) -> bool {
        // ESRCH: what reading a file of a process that exited after it was opened returns.
        e.kind() == std::io::ErrorKind::NotFound
            || e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32)
    }

    impl Reader {
        pub(super) fn new() -> Reader {
            Reader {
                page_size: u64::try_from(rustix::param::page_size()).unwrap_or(4096),
                ..Reader::default()
            }
        }

        fn set_path(&mut self, pid: i32, file: &str) {
            self.path.clear();
            let _ = write!(self.path, "/proc/{pid}/{file}");
        }

        /// Reads `/proc/<pid>/<file>` (at most `max` bytes) into `self.buf`.
        fn read(&mut self, pid: i32, file: &str, max: u64) -> std::io::Result<()> {
            self.set_path(pid, file);
            self.buf.clear();
            std::fs::File::open(&self.path)?
                .take(max)
                .read_to_end(&mut self.buf)?;
            Ok(())
        }

        fn link(&mut self, pid: i32, file: &str) -> Option<std::path::PathBuf> {
            self.set_path(pid, file);
            std::fs::read_link(&self.path).ok()
        }

        pub(super) fn stat(&mut self, pid: i32) -> Option<Stat> {
            self.read(pid, "stat", limits::HOLDMAP_PROC_STAT_BYTES_MAX)
                .ok()?;
            parse_stat(&self.buf)
        }

        /// Everything about `pid`, or `None` when it does not exist (or exited while read).
        pub(super) fn proc(&mut self, pid: i32) -> Option<Proc> {
            let stat = self.stat(pid)?;
            let uid = match self.read(pid, "status", limits::PROC_STATUS_BYTES_MAX) {
                // `/proc/<tid>` of a thread opens too (it is only left out of the listing): a
                // thread is not a process of the table.
                Ok(()) if parse_tgid(&self.buf).is_some_and(|tgid| tgid != pid) => return None,
                Ok(()) => parse_real_uid(&self.buf),
                Err(e) if vanished(&e) => return None,
                Err(_) => None,
            };
            let argv = match self.read(pid, "cmdline", limits::HOLDMAP_CMDLINE_BYTES_MAX) {
                Ok(()) => parse_cmdline(&self.buf),
                Err(e) if vanished(&e) => return None,
                Err(_) => Vec::new(),
            };
            let exe = self.link(pid, "exe");
            let cwd = self.link(pid, "cwd");
            Some(Proc {
                pid,
                ppid: stat.ppid,
                uid,
                start_ticks: stat.start_ticks,
                state: stat.state,
                name: stat.name,
                argv,
                exe,
                cwd,
                rss_bytes: stat.rss_pages.saturating_mul(self.page_size),
                cpu_ticks: stat.cpu_ticks,
            })
        }
    }

    pub(super) fn pids() -> std::io::Result<Vec<i32>> {
        let dir = std::fs::read_dir("/proc")
            .map_err(|e| std::io::Error::new(e.kind(), format!("/proc cannot be read: {e}")))?;
        let mut out: Vec<i32> = dir
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                name.to_str()
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<i32>().ok())
            })
            .take(limits::HOLDMAP_PROCS_MAX)
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    pub(super) fn read(pids: &[i32]) -> Vec<Proc> {
        let mut reader = Reader::new();
        pids.iter().filter_map(|&pid| reader.proc(pid)).collect()
    }
}

/// The pids `/proc` lists now, in order (threads are not listed). An error only when `/proc`
/// itself cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn pids() -> std::io::Result<Vec<i32>> {
    linux::pids()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pids() -> std::io::Result<Vec<i32>> {
    Err(crate::os::unsupported("reading the process table"))
}

/// The processes among `pids` that still exist, in the order given (one that exited since it
/// was listed is left out).
#[cfg(target_os = "linux")]
pub(crate) fn read(pids: &[i32]) -> Vec<Proc> {
    linux::read(pids)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn read(_pids: &[i32]) -> Vec<Proc> {
    Vec::new()
}

/// Every process `/proc` lists now. An error only when `/proc` itself cannot be read.
#[cfg(test)]
pub(crate) fn all() -> std::io::Result<Vec<Proc>> {
    Ok(read(&pids()?))
}

/// One process now; `None` if it does not exist (or its `stat` cannot be read).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn one(pid: i32) -> Option<Proc> {
    if pid <= 0 {
        return None;
    }
    linux::Reader::new().proc(pid)
}

#[cfg(all(test, not(target_os = "linux")))]
pub(crate) fn one(_pid: i32) -> Option<Proc> {
    None
}

/// The start time (ticks after boot) of `pid` now; `None` if there is no such process.
#[cfg(test)]
pub(crate) fn start_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start_ticks)
}

/// The `stat` fields of `pid` now; `None` if there is no such process.
#[cfg(target_os = "linux")]
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    linux::Reader::default().stat(pid)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn stat(_pid: i32) -> Option<Stat> {
    None
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), to turn ticks into seconds.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

#[cfg(all(test, not(target_os = "linux")))]
pub(crate) fn ticks_per_second() -> u64 {
    100
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line in the kernel's layout, with `comm` and the numbers that matter to us.
    fn line(comm: &str) -> String {
        format!(
            "4242 ({comm}) S 17 4242 4242 0 -1 4194560 1000 0 0 0 \
             250 75 0 0 20 0 1 0 987654 123456789 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0"
        )
    }

    #[test]
    fn a_name_with_parentheses_and_spaces_is_read_to_the_last_parenthesis() {
        let stat = parse_stat(line("a) b (c").as_bytes()).unwrap();
        assert_eq!(stat.name, "a) b (c");
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 17);
        assert_eq!(stat.cpu_ticks, 325);
        assert_eq!(stat.start_ticks, 987654);
        assert_eq!(stat.rss_pages, 321);
    }

    #[test]
    fn a_name_that_fakes_the_fields_after_it_is_not_believed() {
        let stat = parse_stat(line("x) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0").as_bytes())
            .unwrap();
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.start_ticks, 987654);
    }

    #[test]
    fn a_cut_or_garbled_stat_line_is_refused() {
        for bad in [
            "",
            "4242 (name",
            "4242 name) S 1",
            "4242 (name) S",
            "4242 (name) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22",
            "4242 (name) S 1 2 3 4 5 6 7 8 9 10 11",
        ] {
            assert_eq!(parse_stat(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn the_uid_is_read_only_when_all_four_agree_and_the_arguments_are_parsed() {
        assert_eq!(
            parse_real_uid(b"Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\n"),
            Some(1000)
        );
        // A setuid-root program a user started: real 1000, effective 0. Nobody's own process.
        assert_eq!(
            parse_real_uid(b"Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\n"),
            None
        );
        assert_eq!(parse_real_uid(b"Name:\tx\n"), None);
        assert_eq!(
            parse_cmdline(b"node\0server.js\0--port\0\xff3000\0"),
            vec!["node", "server.js", "--port", "\u{fffd}3000"]
        );
        assert_eq!(
            parse_cmdline(b"nginx: worker process"),
            vec!["nginx: worker process"]
        );
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
        assert_eq!(parse_cmdline(b"a\0\0b\0"), vec!["a", "", "b"]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn our_own_process_has_its_start_time_and_arguments() {
        let me = std::process::id() as i32;
        let p = one(me).unwrap();
        assert_eq!(p.pid, me);
        assert_eq!(p.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(p.uid, Some(nix::unistd::getuid().as_raw()));
        assert_eq!(p.argv, std::env::args().collect::<Vec<_>>());
        assert_eq!(p.exe, Some(std::env::current_exe().unwrap()));
        assert_eq!(p.cwd, Some(std::env::current_dir().unwrap()));
        assert_eq!(start_ticks(me), Some(p.start_ticks));
        assert!(p.start_ticks > 0);
        assert!(p.rss_bytes > 0);
        assert!(!p.is_zombie());
        assert!(ticks_per_second() >= 1);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_whole_table_lists_us_and_our_parent_and_no_pid_twice() {
        let all = all().unwrap();
        let me = std::process::id() as i32;
        assert!(all.iter().any(|p| p.pid == me));
        assert!(all.iter().any(|p| p.pid == nix::unistd::getppid().as_raw()));
        assert!(all.windows(2).all(|w| w[0].pid < w[1].pid));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_thread_is_not_a_process() {
        let tid = std::thread::spawn(|| nix::unistd::gettid().as_raw())
            .join()
            .unwrap();
        // The thread has exited; a thread that is still running is refused the same way.
        assert_eq!(one(tid), None);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert!(std::path::Path::new(&format!("/proc/{tid}/stat")).exists());
        assert_eq!(one(tid), None);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(parse_tgid(b"Name:\tx\nTgid:\t77\nPid:\t78\n"), Some(77));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_that_does_not_exist_is_none() {
        assert_eq!(one(i32::MAX), None);
        assert_eq!(one(0), None);
        assert_eq!(one(-1), None);
        assert_eq!(start_ticks(i32::MAX), None);
    }
}
