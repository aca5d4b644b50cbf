//! Processes, by the kernel's word: the executable image a process runs and the identity of an
//! executable file, a process's parent, its effective uid, and handles that keep naming one
//! process (`/proc/<pid>` directories, pidfds). Everything here is read from `/proc`, never from
//! what a process says about itself.
//!
//! Linux only for now: `/proc` reads fail at run time elsewhere (the paths do not exist), which
//! every caller already treats as "could not be established".

use std::io::Read as _;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, fstatat};

use crate::limits;

/// An executable image: the device and inode of the file a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// The image this process runs.
pub(crate) fn self_image() -> std::io::Result<Image> {
    image_of_path("/proc/self/exe")
}

fn image_of_path(path: &str) -> std::io::Result<Image> {
    // `metadata` follows the magic link to the file the kernel mapped, not to whatever now sits
    // at the path that was executed.
    let m = std::fs::metadata(path)?;
    Ok(Image {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// The image `pid` runs: the file `/proc/<pid>/exe` names (a stat through the magic link).
pub(crate) fn image_of(pid: i32) -> std::io::Result<Image> {
    image_of_path(&format!("/proc/{pid}/exe"))
        .map_err(|e| std::io::Error::other(format!("cannot read /proc/{pid}/exe: {e}")))
}

/// The path `/proc/<pid>/exe` links to, when it can be read (the kernel appends " (deleted)"
/// to a file replaced since it was executed).
pub(crate) fn exe_path(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// True when `their_exe` names the path this binary runs from (the kernel appends " (deleted)"
/// to a file replaced since it was executed). A path can be swapped: this says where a process
/// was started from, never that it runs the same file (compare `Image`s for that).
pub(crate) fn same_launch_path(their_exe: &std::path::Path) -> bool {
    let theirs = their_exe.to_string_lossy();
    let theirs = theirs.strip_suffix(" (deleted)").unwrap_or(&theirs);
    let Ok(ours) = std::env::current_exe() else {
        return false;
    };
    let ours = ours.to_string_lossy();
    let ours = ours.strip_suffix(" (deleted)").unwrap_or(&ours);
    theirs == ours
}

/// The pid a pidfd refers to, or None once that process has exited (the kernel then reports -1).
pub(crate) fn pid_of_pidfd(fd: &OwnedFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    let pid: i32 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

/// This process's effective uid.
pub(crate) fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The effective uid of `pid`, from `/proc/<pid>/status` (the one a peer's SO_PEERCRED names).
pub(crate) fn effective_uid(pid: i32) -> std::io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| std::io::Error::other(format!("cannot read /proc/{pid}/status: {e}")))?;
    // `Uid:` lists the real, effective, saved and file-system uids; a peer's SO_PEERCRED uid
    // is the effective one.
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|u| u.split_whitespace().nth(1))
        .and_then(|u| u.parse::<u32>().ok())
        .ok_or_else(|| std::io::Error::other(format!("/proc/{pid}/status names no uid")))
}

/// What identifies an executable file for as long as nobody changes it. `(dev, ino)` names the
/// file; size and mtime change when it is rewritten; ctime changes on any change to the file or
/// its inode (a write, chmod, a new link) and cannot be set by a user, so a new file that reuses
/// a deleted file's inode is noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileIdentity {
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

impl FileIdentity {
    pub(crate) fn from_metadata(m: &std::fs::Metadata) -> Option<FileIdentity> {
        Some(FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec())?,
            ctime_ns: ns(m.ctime(), m.ctime_nsec())?,
        })
    }

    pub(crate) fn from_stat(st: &FileStat) -> Option<FileIdentity> {
        Some(FileIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: u64::try_from(st.st_size).ok()?,
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec)?,
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec)?,
        })
    }

    /// A zero device and inode is what a failed or faked stat looks like; it names no file.
    pub(crate) fn names_a_file(&self) -> bool {
        !(self.dev == 0 && self.ino == 0)
    }

    /// Which parts differ from `enrolled`, in words ("" when none do).
    pub(crate) fn differences(&self, enrolled: &FileIdentity) -> Vec<&'static str> {
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

/// The identity of the file at `path` now (following symlinks), for `agent list`.
pub(crate) fn identity_of_path(path: &str) -> std::io::Result<FileIdentity> {
    let m = std::fs::metadata(path)?;
    FileIdentity::from_metadata(&m)
        .ok_or_else(|| std::io::Error::other("a time past the year 2262"))
}

/// The parent pid in the text of `/proc/<pid>/status`: exactly one line starting `PPid:`, whose
/// value is a positive decimal number. Anything else (no such line, two of them, a value with
/// other characters) is None. The kernel escapes a newline in the process's name, but the rule
/// holds without relying on that: a forged second `PPid:` line makes the answer None.
pub(crate) fn parse_ppid(status: &str) -> Option<i32> {
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
pub(crate) struct ProcDir {
    pid: i32,
    fd: OwnedFd,
}

impl ProcDir {
    pub(crate) fn open(pid: i32) -> Result<ProcDir, String> {
        let fd = open(
            format!("/proc/{pid}").as_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open /proc/{pid}: {e}"))?;
        Ok(ProcDir { pid, fd })
    }

    pub(crate) fn status(&self) -> Result<String, String> {
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
    pub(crate) fn alive(&self) -> Result<(), String> {
        let status = self.status()?;
        if parse_field(&status, "Pid:") != Some(self.pid) || is_exited(&status) {
            return Err(format!("process {} exited", self.pid));
        }
        Ok(())
    }

    /// The identity of the file the process runs: a stat through the magic link `exe`, which
    /// the kernel resolves to the mapped file itself (never a path that could be swapped).
    pub(crate) fn image(&self) -> Result<FileIdentity, String> {
        let st = fstatat(self.fd.as_fd(), "exe", AtFlags::empty())
            .map_err(|e| format!("cannot stat /proc/{}/exe: {e}", self.pid))?;
        FileIdentity::from_stat(&st).ok_or_else(|| "an executable with a time past 2262".into())
    }
}

/// Whether a process is pid 1 of its own pid namespace (the last `NSpid:` value is 1): like
/// init, it adopts orphans, so being the parent says nothing about who started the child.
pub(crate) fn is_namespace_init(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .is_some_and(|last| last == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_of_self_is_readable_and_stable() {
        assert_eq!(self_image().unwrap(), self_image().unwrap());
    }

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
}
