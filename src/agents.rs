//! Agents: which client program launched a relay, in the kernel's words.
//!
//! Owns: the identity of an executable file (device, inode, size, mtime, ctime; a SHA-256 taken
//! at enrolment), reading it from a path (`agent add`) and from a running process's image
//! (`/proc/<pid>/exe`, stat of the magic link, never readlink-then-stat), finding a relay's
//! parent (`PPid:` of `/proc/<pid>/status`, never `/proc/<pid>/stat`, whose comm field the
//! process chooses), and matching an identity against the enrolments.
//! Must never: take anything a relay or client sends as the agent, refuse a connection because
//! the agent could not be derived (that session is unenrolled), or match a zero device and inode.

use std::io::Read as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, fstatat};
use sha2::{Digest as _, Sha256};

use crate::limits;

/// What identifies an executable file for as long as nobody changes it. `(dev, ino)` names the
/// file; size and mtime change when it is rewritten; ctime changes on any change to the file or
/// its inode (a write, chmod, a new link) and cannot be set by a user, so a new file that reuses
/// a deleted file's inode is noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// Nanoseconds since the epoch, or None past the year 2262.
fn ns(secs: i64, nsec: i64) -> Option<i64> {
    secs.checked_mul(1_000_000_000)?.checked_add(nsec)
}

impl Identity {
    fn from_metadata(m: &std::fs::Metadata) -> Option<Identity> {
        Some(Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec())?,
            ctime_ns: ns(m.ctime(), m.ctime_nsec())?,
        })
    }

    fn from_stat(st: &FileStat) -> Option<Identity> {
        Some(Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: u64::try_from(st.st_size).ok()?,
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec)?,
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec)?,
        })
    }

    /// A zero device and inode is what a failed or faked stat looks like; it names no file.
    pub fn names_a_file(&self) -> bool {
        !(self.dev == 0 && self.ino == 0)
    }

    /// Which parts differ from `enrolled`, in words ("" when none do).
    pub fn differences(&self, enrolled: &Identity) -> Vec<&'static str> {
        let mut out = Vec::new();
        if (self.dev, self.ino) != (enrolled.dev, enrolled.ino) {
            out.push("another file (device and inode differ)");
        }
        if self.size != enrolled.size {
            out.push("size changed");
        }
        if self.mtime_ns != enrolled.mtime_ns {
            out.push("modified (mtime changed)");
        }
        if self.ctime_ns != enrolled.ctime_ns {
            out.push("changed (ctime changed)");
        }
        out
    }
}

/// One enrolment: a name and the identity of the file it was given for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrolment {
    pub name: String,
    pub path: String,
    pub identity: Identity,
    pub sha256: String,
    pub enrolled_at: String,
}

/// Why an executable cannot be enrolled.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AgentError {
    #[error("{path} is not an absolute path")]
    #[diagnostic(
        code(holdcall::agents::relative),
        help("give the full path of the client program's executable")
    )]
    NotAbsolute { path: String },
    #[error("the path is {len} bytes; the limit is {max}")]
    #[diagnostic(code(holdcall::agents::path_long), help("use a shorter path"))]
    PathTooLong { len: usize, max: usize },
    #[error("cannot read {path}: {source}")]
    #[diagnostic(
        code(holdcall::agents::unreadable),
        help("check that the file exists and that you can read it")
    )]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a regular executable file")]
    #[diagnostic(
        code(holdcall::agents::not_executable),
        help(
            "enrol the executable the client runs (its binary, not a directory or a script's data)"
        )
    )]
    NotExecutable { path: String },
    #[error(
        "{path} is a script run by {interpreter}; the process that launches a relay runs the interpreter, never the script, so this enrolment could never match"
    )]
    #[diagnostic(
        code(holdcall::agents::script),
        help(
            "enrol the compiled program that launches your MCP servers (for a Node client, its launcher is `node`, which would name everything node runs); `readlink -f \"$(command -v NAME)\"` shows what a command really is"
        )
    )]
    Script { path: String, interpreter: String },
    #[error("{path} is {size} bytes; the limit is {max} bytes")]
    #[diagnostic(
        code(holdcall::agents::too_large),
        help("enrol the client's launcher executable instead")
    )]
    TooLarge { path: String, size: u64, max: u64 },
    #[error("{path} changed while it was being read")]
    #[diagnostic(
        code(holdcall::agents::changed),
        help("wait until the program is fully installed, then run `holdcall agent add` again")
    )]
    ChangedWhileRead { path: String },
}

/// Reads the identity and the SHA-256 of the file at `path` (following symlinks): the file is
/// opened once, its identity read from the open file before and after hashing, and a file that
/// changed in between is refused.
pub fn enrol_file(path: &str) -> Result<(Identity, String), AgentError> {
    if path.len() > limits::AGENT_PATH_BYTES_MAX {
        return Err(AgentError::PathTooLong {
            len: path.len(),
            max: limits::AGENT_PATH_BYTES_MAX,
        });
    }
    if !Path::new(path).is_absolute() {
        return Err(AgentError::NotAbsolute { path: path.into() });
    }
    let unreadable = |source| AgentError::Unreadable {
        path: path.into(),
        source,
    };
    // Never blocks: O_NONBLOCK makes opening a FIFO return at once (and is ignored for a
    // regular file), and what is not a regular file is refused just below.
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NONBLOCK.bits())
            .open(path)
            .map_err(unreadable)?
    };
    let before = file.metadata().map_err(unreadable)?;
    use std::os::unix::fs::PermissionsExt as _;
    if !before.file_type().is_file() || before.permissions().mode() & 0o111 == 0 {
        return Err(AgentError::NotExecutable { path: path.into() });
    }
    if before.size() > limits::AGENT_FILE_BYTES_MAX {
        return Err(AgentError::TooLarge {
            path: path.into(),
            size: before.size(),
            max: limits::AGENT_FILE_BYTES_MAX,
        });
    }
    let changed = || AgentError::ChangedWhileRead { path: path.into() };
    let identity = Identity::from_metadata(&before).ok_or_else(changed)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = file.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            break;
        }
        // A script is run by its interpreter: the relay's parent would run `node` or `sh`, never
        // this file, so enrolling it would be accepted and then silently never match.
        if total == 0
            && let Some(rest) = buf.get(..n).and_then(|b| b.strip_prefix(b"#!"))
        {
            let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = line.get(..line.len().min(200)).unwrap_or_default();
            return Err(AgentError::Script {
                path: path.into(),
                interpreter: crate::text::visible(String::from_utf8_lossy(line).trim()),
            });
        }
        total = total.saturating_add(n as u64);
        if total > limits::AGENT_FILE_BYTES_MAX {
            return Err(changed());
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    let after = file.metadata().map_err(unreadable)?;
    if Identity::from_metadata(&after) != Some(identity) || total != identity.size {
        return Err(changed());
    }
    Ok((identity, crate::ids::hex(&hasher.finalize())))
}

/// The identity of the file at `path` now (following symlinks), for `agent list`.
pub fn identity_of_path(path: &str) -> std::io::Result<Identity> {
    let m = std::fs::metadata(path)?;
    Identity::from_metadata(&m).ok_or_else(|| std::io::Error::other("a time past the year 2262"))
}

/// `current`, or why an enrolment is stale.
pub fn staleness(e: &Enrolment) -> Result<(), String> {
    match identity_of_path(&e.path) {
        Err(err) => Err(format!("the file cannot be read: {err}")),
        Ok(now) => {
            let d = now.differences(&e.identity);
            if d.is_empty() {
                Ok(())
            } else {
                Err(d.join(", "))
            }
        }
    }
}

/// The parent pid in the text of `/proc/<pid>/status`: exactly one line starting `PPid:`, whose
/// value is a positive decimal number. Anything else (no such line, two of them, a value with
/// other characters) is None. The kernel escapes a newline in the process's name, but the rule
/// holds without relying on that: a forged second `PPid:` line makes the answer None.
pub fn parse_ppid(status: &str) -> Option<i32> {
    parse_field(status, "PPid:").filter(|&p| p > 0)
}

/// The value of the one line starting with `key`, as a non-negative i32.
fn parse_field(status: &str, key: &str) -> Option<i32> {
    let mut found = status.split('\n').filter_map(|l| l.strip_prefix(key));
    let value = found.next()?;
    if found.next().is_some() {
        return None;
    }
    let digits = value.trim_matches(|c| c == ' ' || c == '\t');
    if digits.is_empty() || digits.len() > 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether the `State:` line says the process is a zombie or dead.
fn is_exited(status: &str) -> bool {
    status
        .split('\n')
        .filter_map(|l| l.strip_prefix("State:"))
        .any(|s| matches!(s.trim_start().chars().next(), Some('Z' | 'X' | 'x')))
}

/// A handle on one process: an open `/proc/<pid>` directory. Like a pidfd (the kernel accepts
/// such a descriptor as one), it keeps naming the process it was opened for: once that process
/// is gone, reads through it fail instead of reaching a new process that reuses the pid.
struct ProcDir {
    pid: i32,
    fd: OwnedFd,
}

impl ProcDir {
    fn open(pid: i32) -> Result<ProcDir, String> {
        let fd = open(
            format!("/proc/{pid}").as_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open /proc/{pid}: {e}"))?;
        Ok(ProcDir { pid, fd })
    }

    fn status(&self) -> Result<String, String> {
        let fd = openat(
            self.fd.as_fd(),
            "status",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot read /proc/{}/status: {e}", self.pid))?;
        let mut text = String::new();
        std::fs::File::from(fd)
            .take(limits::PROC_STATUS_BYTES_MAX)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read /proc/{}/status: {e}", self.pid))?;
        Ok(text)
    }

    /// Still the process this handle was opened for, and not exited.
    fn alive(&self) -> Result<(), String> {
        let status = self.status()?;
        if parse_field(&status, "Pid:") != Some(self.pid) || is_exited(&status) {
            return Err(format!("process {} exited", self.pid));
        }
        Ok(())
    }

    /// The identity of the file the process runs: a stat through the magic link `exe`, which
    /// the kernel resolves to the mapped file itself (never a path that could be swapped).
    fn image(&self) -> Result<Identity, String> {
        let st = fstatat(self.fd.as_fd(), "exe", AtFlags::empty())
            .map_err(|e| format!("cannot stat /proc/{}/exe: {e}", self.pid))?;
        Identity::from_stat(&st).ok_or_else(|| "an executable with a time past 2262".into())
    }
}

/// The identity of the executable that `relay_pid`'s parent runs.
///
/// The relay is pinned first (its `/proc` directory, then the socket's pidfd confirms the relay
/// is the process that was verified); its parent pid is read from `status`; the parent is pinned
/// and its image read through the pin; then the relay's parent pid is read again and the parent
/// checked alive. A parent that exited in between reparents the relay (so its `PPid:` changes),
/// and a recycled pid fails the pin: either way the answer is an error, never another program.
pub fn parent_image<F: AsFd>(sock: &F, relay_pid: i32) -> Result<Identity, String> {
    let relay = ProcDir::open(relay_pid)?;
    if let Ok(pidfd) = nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::PeerPidfd)
        && crate::os::peer::pid_of_pidfd(&pidfd) != Some(relay_pid)
    {
        return Err("the relay exited before its parent was read".into());
    }
    let ppid = parse_ppid(&relay.status()?).ok_or("the relay's status has no usable PPid line")?;
    if ppid == 1 {
        // Orphans are adopted by init: its image says nothing about who launched the relay.
        return Err("the relay's parent is init (pid 1): its launcher exited".into());
    }
    let parent = ProcDir::open(ppid)?;
    if is_namespace_init(&parent.status()?) {
        return Err(format!(
            "the relay's parent {ppid} is the init of a pid namespace, which adopts orphans"
        ));
    }
    let image = parent.image()?;
    let again = parse_ppid(&relay.status()?).ok_or("the relay's status has no usable PPid line")?;
    if again != ppid {
        return Err(format!(
            "the relay's parent changed from {ppid} to {again} while it was read"
        ));
    }
    parent.alive()?;
    relay.alive()?;
    Ok(image)
}

/// Whether a process is pid 1 of its own pid namespace (the last `NSpid:` value is 1): like
/// init, it adopts orphans, so being the parent says nothing about who started the child.
fn is_namespace_init(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .is_some_and(|last| last == "1")
}

/// The enrolment whose identity is exactly `image`, if any. A zero device and inode never
/// matches. `(dev, ino)` is unique among enrolments, so at most one can match.
pub fn matching<'a>(image: &Identity, enrolled: &'a [Enrolment]) -> Option<&'a Enrolment> {
    if !image.names_a_file() {
        return None;
    }
    enrolled.iter().find(|e| e.identity == *image)
}

/// The agent of a relay connection: the enrolment matching its parent's executable, or None
/// (unenrolled) when there is none or anything could not be read.
pub fn derive<F: AsFd>(sock: &F, relay_pid: i32, enrolled: &[Enrolment]) -> Option<String> {
    match parent_image(sock, relay_pid) {
        Ok(image) => matching(&image, enrolled).map(|e| e.name.clone()),
        Err(why) => {
            tracing::info!("relay pid {relay_pid}: no agent derived ({why}); unenrolled");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_init_is_recognised_as_an_adopter_and_an_ordinary_process_is_not() {
        assert!(is_namespace_init("Name:\tinit\nNSpid:\t4242\t1\n"));
        assert!(is_namespace_init("NSpid:\t1\n"));
        assert!(!is_namespace_init("NSpid:\t4242\t17\n"));
        assert!(!is_namespace_init("NSpid:\t11\n"));
        assert!(!is_namespace_init("Name:\tno nspid line\n"));
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(!is_namespace_init(&own));
    }

    #[test]
    fn the_ppid_line_is_read_from_a_real_status() {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(parse_ppid(&text), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(parse_field(&text, "Pid:"), Some(std::process::id() as i32));
    }

    #[test]
    fn a_forged_ppid_line_in_the_name_makes_the_parent_unknown() {
        // A name with a raw newline (the kernel escapes it, but the parser must not rely on it).
        let forged =
            "Name:\tevil\nPPid:\t1\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t50\nPPid:\t42\n";
        assert_eq!(parse_ppid(forged), None);
    }

    #[test]
    fn hostile_ppid_values_are_refused() {
        for bad in [
            "PPid:\t\n",
            "PPid:\t-1\n",
            "PPid:\t0\n",
            "PPid:\t+5\n",
            "PPid:\t5 6\n",
            "PPid:\t0x10\n",
            "PPid:\t99999999999\n",
            "PPid:\t١٢\n",
            "PPid:\t12\u{0}\n",
            "Name:\tPPid:\t7\n",
            "ppid:\t7\n",
            " PPid:\t7\n",
            "",
        ] {
            assert_eq!(parse_ppid(bad), None, "{bad:?}");
        }
        assert_eq!(parse_ppid("Name:\tx\nPPid:\t  77 \t\nPid:\t8\n"), Some(77));
        assert_eq!(parse_ppid("PPid:\t2147483647\n"), Some(i32::MAX));
        assert_eq!(parse_ppid("PPid:\t2147483648\n"), None);
    }

    #[test]
    fn the_exited_states_are_recognised() {
        assert!(is_exited("State:\tZ (zombie)\n"));
        assert!(is_exited("State:\tX (dead)\n"));
        assert!(!is_exited("State:\tS (sleeping)\n"));
    }

    #[test]
    fn a_handle_on_a_process_stops_working_once_it_is_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let dir = ProcDir::open(child.id() as i32).unwrap();
        assert!(dir.alive().is_ok());
        assert!(dir.image().is_ok());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(dir.alive().is_err());
        assert!(dir.image().is_err());
    }

    #[test]
    fn the_image_read_through_proc_is_the_file_on_disk() {
        let dir = ProcDir::open(std::process::id() as i32).unwrap();
        let exe = std::env::current_exe().unwrap();
        let on_disk = identity_of_path(exe.to_str().unwrap()).unwrap();
        assert_eq!(dir.image().unwrap(), on_disk);
    }

    #[test]
    fn a_zero_identity_never_matches() {
        let zero = Identity {
            dev: 0,
            ino: 0,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        };
        let e = Enrolment {
            name: "a".into(),
            path: "/x".into(),
            identity: zero,
            sha256: String::new(),
            enrolled_at: String::new(),
        };
        assert_eq!(matching(&zero, std::slice::from_ref(&e)), None);
    }

    #[test]
    fn enrolment_reads_identity_and_hash_and_refuses_what_is_not_an_executable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tool");
        std::fs::write(&p, b"hello").unwrap();
        let ps = p.to_str().unwrap();
        assert!(matches!(
            enrol_file(ps),
            Err(AgentError::NotExecutable { .. })
        ));
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (id, sha) = enrol_file(ps).unwrap();
        assert_eq!(id.size, 5);
        assert_eq!(
            sha,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert!(matches!(
            enrol_file("tool"),
            Err(AgentError::NotAbsolute { .. })
        ));
        assert!(matches!(
            enrol_file(dir.path().to_str().unwrap()),
            Err(AgentError::NotExecutable { .. })
        ));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o755)).unwrap();
        assert!(matches!(
            enrol_file(fifo.to_str().unwrap()),
            Err(AgentError::NotExecutable { .. })
        ));
        assert!(matches!(
            enrol_file("/nonexistent/x"),
            Err(AgentError::Unreadable { .. })
        ));
    }
}
