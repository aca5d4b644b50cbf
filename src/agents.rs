//! Who is on the other end, in Holdcall's terms: whether a peer is one of us (this build, our
//! user: `PeerCheck`), and which enrolled client program launched a relay (its agent).
//!
//! Owns: enrolments (an executable file's identity, `os::process::FileIdentity`, and a SHA-256
//! taken at enrolment: `agent add`), judging a peer or a lock holder from the kernel's facts
//! (`os::peer`, `os::process`) with the wording that explains a refusal, finding a relay's
//! parent's image (through `/proc/<pid>` handles, `PPid:` of its status, never
//! `/proc/<pid>/stat`, whose comm field the process chooses), and matching an identity against
//! the enrolments. Must never: compare executables by path (a path can be swapped; the image's
//! device and inode cannot), take anything a relay or client sends as the agent, refuse a
//! connection because the agent could not be derived (that session is unenrolled), or match a
//! zero device and inode.

use std::io::Read as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use sha2::{Digest as _, Sha256};

use crate::limits;
use crate::os::peer;
use crate::os::process::{self, FileIdentity, ProcDir, is_namespace_init, parse_ppid};

/// One enrolment: a name and the identity of the file it was given for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Enrolment {
    pub name: String,
    pub path: String,
    pub identity: FileIdentity,
    pub sha256: String,
    pub enrolled_at: String,
}

/// Why an executable cannot be enrolled.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub(crate) enum AgentError {
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
pub(crate) fn enrol_file(path: &str) -> Result<(FileIdentity, String), AgentError> {
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
    let identity = FileIdentity::from_metadata(&before).ok_or_else(changed)?;
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
    if FileIdentity::from_metadata(&after) != Some(identity) || total != identity.size {
        return Err(changed());
    }
    Ok((identity, crate::ids::hex(&hasher.finalize())))
}

/// `current`, or why an enrolment is stale.
pub(crate) fn staleness(e: &Enrolment) -> Result<(), String> {
    match process::identity_of_path(&e.path) {
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

/// The identity of the executable that `relay_pid`'s parent runs.
///
/// The relay is pinned first (its `/proc` directory, then the socket's pidfd confirms the relay
/// is the process that was verified); its parent pid is read from `status`; the parent is pinned
/// and its image read through the pin; then the relay's parent pid is read again and the parent
/// checked alive. A parent that exited in between reparents the relay (so its `PPid:` changes),
/// and a recycled pid fails the pin: either way the answer is an error, never another program.
pub(crate) fn parent_image<F: AsFd>(sock: &F, relay_pid: i32) -> Result<FileIdentity, String> {
    let relay = ProcDir::open(relay_pid)?;
    if let Some(pidfd) = peer::pidfd(sock)
        && process::pid_of_pidfd(&pidfd) != Some(relay_pid)
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

/// The enrolment whose identity is exactly `image`, if any. A zero device and inode never
/// matches. `(dev, ino)` is unique among enrolments, so at most one can match.
pub(crate) fn matching<'a>(
    image: &FileIdentity,
    enrolled: &'a [Enrolment],
) -> Option<&'a Enrolment> {
    if !image.names_a_file() {
        return None;
    }
    enrolled.iter().find(|e| e.identity == *image)
}

/// Whether the process on the other end of a socket (or holding a lock) is one of us: this
/// Holdcall build, run by our user. Holdcall's judgement of the kernel's facts (`os::peer`,
/// `os::process`); not a call decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PeerCheck {
    /// Same effective uid, same executable image as this process.
    Same { pid: i32 },
    /// Another user's process.
    WrongUser { pid: i32, uid: u32, me: u32 },
    /// Our user, but another program — or an older build that was replaced at the same path.
    OtherProgram {
        pid: i32,
        exe: Option<PathBuf>,
        older_build: bool,
    },
    /// The kernel could not tell (a syscall failed, or the process already exited).
    Unknown { reason: String },
}

impl PeerCheck {
    /// One sentence for a log or an error, saying who the peer is and why it is refused.
    pub(crate) fn describe(&self, what: &str) -> String {
        match self {
            PeerCheck::Same { pid } => format!("{what} is this Holdcall build (pid {pid})"),
            PeerCheck::WrongUser { pid, uid, me } => format!(
                "{what} runs as another user (pid {pid}, uid {uid}; this process runs as uid {me})"
            ),
            PeerCheck::OtherProgram {
                pid,
                older_build: true,
                ..
            } => format!(
                "{what} is an older build of Holdcall at the same path (pid {pid}); run `holdcall daemon restart`"
            ),
            PeerCheck::OtherProgram { pid, exe, .. } => format!(
                "{what} is not this Holdcall build (pid {pid} runs {})",
                exe.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "an executable that cannot be read".to_string())
            ),
            PeerCheck::Unknown { reason } => {
                format!("the identity of {what} could not be established: {reason}")
            }
        }
    }
}

/// Judges the peer of a connected Unix socket: our effective uid, and this executable image.
///
/// The pid is pinned with SO_PEERPIDFD where the kernel has it (Linux 6.5+): the image is read
/// through `/proc/<pid>/exe` and the pidfd is consulted again afterwards, so a pid that was
/// recycled in between is noticed. Older kernels fall back to the pid from SO_PEERCRED.
pub(crate) fn check_peer<F: AsFd>(sock: &F) -> PeerCheck {
    let cred = match peer::credentials(sock) {
        Ok(c) => c,
        Err(e) => {
            return PeerCheck::Unknown {
                reason: e.to_string(),
            };
        }
    };
    let me = process::euid();
    if cred.uid != me {
        return PeerCheck::WrongUser {
            pid: cred.pid,
            uid: cred.uid,
            me,
        };
    }
    check_image(cred.pid, cred.pidfd.as_ref())
}

/// Judges a process known only by its pid (the holder of a home's daemon lock, as the kernel
/// names it) by the same rules as a peer: our effective uid, and this executable image.
pub(crate) fn check_pid(pid: i32) -> PeerCheck {
    let uid = match process::effective_uid(pid) {
        Ok(uid) => uid,
        Err(e) => {
            return PeerCheck::Unknown {
                reason: e.to_string(),
            };
        }
    };
    let me = process::euid();
    if uid != me {
        return PeerCheck::WrongUser { pid, uid, me };
    }
    check_image(pid, None)
}

/// The image half of a check: whether `pid` runs this very executable. With `pidfd`, a pid
/// recycled while it was read is noticed.
fn check_image(pid: i32, pidfd: Option<&OwnedFd>) -> PeerCheck {
    let theirs = match process::image_of(pid) {
        Ok(i) => i,
        Err(e) => {
            return PeerCheck::Unknown {
                reason: e.to_string(),
            };
        }
    };
    if let Some(fd) = pidfd
        && process::pid_of_pidfd(fd) != Some(pid)
    {
        return PeerCheck::Unknown {
            reason: "the peer process exited while it was being checked".to_string(),
        };
    }
    let ours = match process::self_image() {
        Ok(i) => i,
        Err(e) => {
            return PeerCheck::Unknown {
                reason: format!("cannot read this process's own executable: {e}"),
            };
        }
    };
    if theirs == ours {
        return PeerCheck::Same { pid };
    }
    // The launch path never admits a peer; it chooses the wording, and lets `daemon
    // stop|restart` signal an older daemon of ours (same user, same path).
    let exe = process::exe_path(pid);
    let older_build = exe
        .as_ref()
        .map(|p| process::same_launch_path(p))
        .unwrap_or(false);
    PeerCheck::OtherProgram {
        pid,
        exe,
        older_build,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_identity_never_matches() {
        let zero = FileIdentity {
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

    #[test]
    fn a_socket_pair_inside_one_process_is_judged_the_same() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let v = check_peer(&a);
        assert!(matches!(v, PeerCheck::Same { .. }), "{v:?}");
    }

    #[test]
    fn this_process_judged_by_its_pid_is_the_same() {
        let v = check_pid(std::process::id() as i32);
        assert!(matches!(v, PeerCheck::Same { .. }), "{v:?}");
    }

    #[test]
    fn an_older_build_is_named_as_such() {
        let v = PeerCheck::OtherProgram {
            pid: 7,
            exe: None,
            older_build: true,
        };
        assert!(v.describe("the daemon").contains("older build"));
        assert!(!matches!(v, PeerCheck::Same { .. }));
    }
}
