//! Who is on the other end of a Unix socket: same user, and the same Holdcall executable image.
//!
//! Owns: the kernel's word on a peer (SO_PEERCRED, SO_PEERPIDFD, `/proc/<pid>/exe`) and the
//! wording that explains a refusal. Must never: trust anything the peer says about itself, or
//! compare executables by path (a path can be swapped; the image's device and inode cannot).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use nix::sys::socket::{getsockopt, sockopt};

/// An executable image: the device and inode of the file a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub dev: u64,
    pub ino: u64,
}

/// The kernel's account of a peer, and whether it is one of us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
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

impl Verdict {
    pub fn is_same(&self) -> bool {
        matches!(self, Verdict::Same { .. })
    }

    /// One sentence for a log or an error, saying who the peer is and why it is refused.
    pub fn describe(&self, what: &str) -> String {
        match self {
            Verdict::Same { pid } => format!("{what} is this Holdcall build (pid {pid})"),
            Verdict::WrongUser { pid, uid, me } => format!(
                "{what} runs as another user (pid {pid}, uid {uid}; this process runs as uid {me})"
            ),
            Verdict::OtherProgram {
                pid,
                older_build: true,
                ..
            } => format!(
                "{what} is an older build of Holdcall at the same path (pid {pid}); run `holdcall daemon restart`"
            ),
            Verdict::OtherProgram { pid, exe, .. } => format!(
                "{what} is not this Holdcall build (pid {pid} runs {})",
                exe.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "an executable that cannot be read".to_string())
            ),
            Verdict::Unknown { reason } => {
                format!("the identity of {what} could not be established: {reason}")
            }
        }
    }
}

/// The image this process runs.
pub fn self_image() -> std::io::Result<Image> {
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

/// Judges the peer of a connected Unix socket.
///
/// The pid is pinned with SO_PEERPIDFD where the kernel has it (Linux 6.5+): the image is read
/// through `/proc/<pid>/exe` and the pidfd is consulted again afterwards, so a pid that was
/// recycled in between is noticed. Older kernels fall back to the pid from SO_PEERCRED.
pub fn judge<F: AsFd>(sock: &F) -> Verdict {
    let cred = match getsockopt(sock, sockopt::PeerCredentials) {
        Ok(c) => c,
        Err(e) => {
            return Verdict::Unknown {
                reason: format!("SO_PEERCRED failed: {e}"),
            };
        }
    };
    let me = nix::unistd::geteuid().as_raw();
    let pidfd = getsockopt(sock, sockopt::PeerPidfd).ok();
    let pid = match &pidfd {
        Some(fd) => match pid_of_pidfd(fd) {
            Some(p) => p,
            None => {
                return Verdict::Unknown {
                    reason: "the peer process has already exited".to_string(),
                };
            }
        },
        None => cred.pid(),
    };
    if cred.uid() != me {
        return Verdict::WrongUser {
            pid,
            uid: cred.uid(),
            me,
        };
    }
    judge_image(pid, pidfd.as_ref())
}

/// Judges a process known only by its pid (the holder of a home's daemon lock, as the kernel
/// names it) by the same rules as a peer: our effective uid, and this executable image.
pub fn judge_pid(pid: i32) -> Verdict {
    let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) => {
            return Verdict::Unknown {
                reason: format!("cannot read /proc/{pid}/status: {e}"),
            };
        }
    };
    // `Uid:` lists the real, effective, saved and file-system uids; a peer's SO_PEERCRED uid
    // is the effective one.
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|u| u.split_whitespace().nth(1))
        .and_then(|u| u.parse::<u32>().ok());
    let Some(uid) = euid else {
        return Verdict::Unknown {
            reason: format!("/proc/{pid}/status names no uid"),
        };
    };
    let me = nix::unistd::geteuid().as_raw();
    if uid != me {
        return Verdict::WrongUser { pid, uid, me };
    }
    judge_image(pid, None)
}

/// The image half of a verdict: whether `pid` runs this very executable. With `pidfd`, a pid
/// recycled while it was read is noticed.
fn judge_image(pid: i32, pidfd: Option<&OwnedFd>) -> Verdict {
    let theirs = match image_of_path(&format!("/proc/{pid}/exe")) {
        Ok(i) => i,
        Err(e) => {
            return Verdict::Unknown {
                reason: format!("cannot read /proc/{pid}/exe: {e}"),
            };
        }
    };
    if let Some(fd) = pidfd
        && pid_of_pidfd(fd) != Some(pid)
    {
        return Verdict::Unknown {
            reason: "the peer process exited while it was being checked".to_string(),
        };
    }
    let ours = match self_image() {
        Ok(i) => i,
        Err(e) => {
            return Verdict::Unknown {
                reason: format!("cannot read this process's own executable: {e}"),
            };
        }
    };
    if theirs == ours {
        return Verdict::Same { pid };
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let older_build = exe.as_ref().map(|p| same_launch_path(p)).unwrap_or(false);
    Verdict::OtherProgram {
        pid,
        exe,
        older_build,
    }
}

/// True when `their_exe` names the path this binary runs from (the kernel appends " (deleted)"
/// to a file replaced since it was executed). It never admits a peer; it chooses the wording,
/// and lets `daemon stop|restart` signal an older daemon of ours (same user, same path).
fn same_launch_path(their_exe: &std::path::Path) -> bool {
    let theirs = their_exe.to_string_lossy();
    let theirs = theirs.strip_suffix(" (deleted)").unwrap_or(&theirs);
    let Ok(ours) = std::env::current_exe() else {
        return false;
    };
    let ours = ours.to_string_lossy();
    let ours = ours.strip_suffix(" (deleted)").unwrap_or(&ours);
    theirs == ours
}

/// Asks the kernel to attach the sender's credentials to every message on `sock` (and, on a
/// listener, on every connection it accepts). Both ends set it before sending a byte, so every
/// byte either end receives carries the pid of the process that wrote it.
pub fn pass_credentials<F: AsFd>(sock: &F) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(sock, sockopt::PassCred, &true).map_err(std::io::Error::from)
}

/// Reads lines from a verified peer, checking that every byte was written by the process that
/// was verified. A socket can be shared: a process that connects (or listens) and then runs
/// Holdcall in its place passes the check at accept, but the kernel still names whoever writes
/// each message. Bytes from any other process close the connection.
pub struct CheckedReader {
    stream: tokio::net::unix::OwnedReadHalf,
    buf: Vec<u8>,
    /// One read's worth of bytes, reused: a decision's round trip reads a short line, and
    /// zeroing a fresh 64 KiB each time would cost more than the read.
    chunk: Vec<u8>,
    pid: i32,
}

/// Bytes asked for per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

impl CheckedReader {
    pub fn new(stream: tokio::net::unix::OwnedReadHalf, pid: i32) -> CheckedReader {
        CheckedReader {
            stream,
            buf: Vec::new(),
            chunk: vec![0u8; READ_CHUNK_BYTES],
            pid,
        }
    }

    /// One line of at most `max` bytes (newline included). A longer line, or bytes from
    /// another process, is an error: the caller closes the connection.
    pub async fn read_line(&mut self, max: usize) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                if i >= max {
                    return Err(too_long(max));
                }
                let rest = self.buf.split_off(i + 1);
                return Ok(Some(std::mem::replace(&mut self.buf, rest)));
            }
            if self.buf.len() >= max {
                return Err(too_long(max));
            }
            if self.chunk.len() != READ_CHUNK_BYTES {
                // A read that was cancelled midway (a timeout) took the buffer with it.
                self.chunk = vec![0u8; READ_CHUNK_BYTES];
            }
            let mut chunk = std::mem::take(&mut self.chunk);
            let received = self.recv(&mut chunk).await;
            self.chunk = chunk;
            let (n, sender) = received?;
            if n == 0 {
                return Ok(None);
            }
            if sender != Some(self.pid) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "bytes on this connection came from pid {} instead of the verified pid {}",
                        sender
                            .map(|p| p.to_string())
                            .unwrap_or_else(|| "unknown".into()),
                        self.pid
                    ),
                ));
            }
            self.buf
                .extend_from_slice(self.chunk.get(..n).unwrap_or_default());
        }
    }

    /// One `recvmsg`: the bytes, and the pid the kernel says wrote them. The kernel never
    /// returns bytes from two writers in one call while credentials are being passed.
    async fn recv(&self, chunk: &mut [u8]) -> std::io::Result<(usize, Option<i32>)> {
        use std::os::fd::AsRawFd;
        let sock: &tokio::net::UnixStream = self.stream.as_ref();
        loop {
            sock.readable().await?;
            let fd = sock.as_raw_fd();
            let result = sock.try_io(tokio::io::Interest::READABLE, || {
                let mut iov = [std::io::IoSliceMut::new(chunk)];
                let mut space = nix::cmsg_space!(nix::sys::socket::UnixCredentials);
                let msg = nix::sys::socket::recvmsg::<()>(
                    fd,
                    &mut iov,
                    Some(&mut space),
                    nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
                )
                .map_err(std::io::Error::from)?;
                let mut pid = None;
                for c in msg.cmsgs().map_err(std::io::Error::from)? {
                    if let nix::sys::socket::ControlMessageOwned::ScmCredentials(cred) = c {
                        pid = Some(cred.pid());
                    }
                }
                Ok((msg.bytes, pid))
            });
            match result {
                Ok(r) => return Ok(r),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

fn too_long(max: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("a line over {max} bytes"),
    )
}

/// Which file a socket path names: its device and inode (as `lstat` sees it, never following a
/// symlink), so a socket removed or replaced behind the daemon's back is noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketFile {
    pub dev: u64,
    pub ino: u64,
}

impl SocketFile {
    /// The file at `path` now, or None when nothing is there (or it cannot be read).
    pub fn at(path: &std::path::Path) -> Option<SocketFile> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(SocketFile {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The temporary name a listener is bound under before it is renamed to `path`: in the same
/// directory (a rename never crosses file systems), named after this process. When `path` is
/// already near the socket-address limit, a shorter name in the same directory.
fn temporary_socket_path(path: &std::path::Path) -> PathBuf {
    let pid = std::process::id();
    let mut long = path.as_os_str().to_os_string();
    long.push(format!(".{pid}.new"));
    if long.len() <= crate::limits::SOCKET_PATH_BYTES_MAX {
        return PathBuf::from(long);
    }
    path.with_file_name(format!(".{pid}.new"))
}

/// Listens on `path` with credential passing on before the socket can accept anyone, so the
/// first byte of every connection already names its writer (issue 12, item 10: a listener
/// that turned credential passing on after `listen` accepted connections whose bytes carried
/// no credentials in between, and refused the very CLI that had started it).
///
/// The socket is bound under a temporary name in the same directory, made 0600, and only then
/// renamed onto `path`: nobody can connect before it is complete, and the rename atomically
/// replaces a stale socket (or anything an impostor left there) — the caller holds the home's
/// daemon lock, so no other daemon of this home can own what it replaces. Returns the listener
/// (blocking; the caller converts it) and the file it is now at.
pub fn listen_passing_credentials(
    path: &std::path::Path,
) -> std::io::Result<(std::os::unix::net::UnixListener, SocketFile)> {
    use nix::sys::socket::{AddressFamily, Backlog, SockFlag, SockType, UnixAddr, bind, listen};
    let fd = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(std::io::Error::from)?;
    // Before bind and listen: every connection the kernel queues inherits this flag from the
    // listener at connect time.
    pass_credentials(&fd)?;
    let tmp = temporary_socket_path(path);
    // A leftover of a process with the same pid that died between bind and rename.
    let _ = std::fs::remove_file(&tmp);
    let addr = UnixAddr::new(&tmp).map_err(std::io::Error::from)?;
    // The socket file is created inside a 0700 directory with a 077 umask, so no other user can
    // connect at any moment; it is then narrowed to 0600 explicitly.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let bound = bind(fd.as_raw_fd(), &addr);
    nix::sys::stat::umask(old);
    bound.map_err(std::io::Error::from)?;
    let placed = (|| {
        listen(&fd, Backlog::MAXCONN).map_err(std::io::Error::from)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        let file = SocketFile::at(&tmp).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} vanished before it was put in place", tmp.display()),
            )
        })?;
        std::fs::rename(&tmp, path)?;
        Ok(file)
    })();
    match placed {
        Ok(file) => Ok((std::os::unix::net::UnixListener::from(fd), file)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Connects to a Unix socket with credential passing on before the connection exists, so the
/// first byte sent already names its writer.
pub fn connect_passing_credentials(
    path: &std::path::Path,
) -> std::io::Result<tokio::net::UnixStream> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(std::io::Error::from)?;
    pass_credentials(&fd)?;
    let addr = UnixAddr::new(path).map_err(std::io::Error::from)?;
    use std::os::fd::AsRawFd;
    match connect(fd.as_raw_fd(), &addr) {
        Ok(()) => {}
        // A Unix stream connect completes at once unless the backlog is full.
        Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINPROGRESS) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "the daemon's accept queue is full",
            ));
        }
        Err(e) => return Err(e.into()),
    }
    tokio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_socket_pair_inside_one_process_is_judged_the_same() {
        let (a, _b) = UnixStream::pair().unwrap();
        let v = judge(&a);
        assert!(v.is_same(), "{v:?}");
    }

    #[test]
    fn the_image_of_self_is_readable_and_stable() {
        assert_eq!(self_image().unwrap(), self_image().unwrap());
    }

    #[tokio::test]
    async fn bytes_written_by_another_process_on_a_verified_socket_are_refused() {
        // One end of a pair stays here; a child process inherits the other and writes on it,
        // as a process that connected and then handed its socket on would.
        let (ours, theirs) = UnixStream::pair().unwrap();
        pass_credentials(&ours).unwrap();
        pass_credentials(&theirs).unwrap();
        nix::fcntl::fcntl(
            &theirs,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
        let status = std::process::Command::new("python3")
            .args(["-c", &format!("import os; os.write({fd}, b'hello\\n')")])
            .status()
            .unwrap();
        assert!(status.success());
        ours.set_nonblocking(true).unwrap();
        let (r, _w) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
        let mut reader = CheckedReader::new(r, std::process::id() as i32);
        let err = reader.read_line(1024).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    }

    #[tokio::test]
    async fn bytes_written_by_the_verified_process_are_read() {
        use std::io::Write;
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        pass_credentials(&ours).unwrap();
        pass_credentials(&theirs).unwrap();
        theirs.write_all(b"one\ntwo\n").unwrap();
        drop(theirs);
        ours.set_nonblocking(true).unwrap();
        let (r, _w) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
        let mut reader = CheckedReader::new(r, std::process::id() as i32);
        assert_eq!(
            reader.read_line(1024).await.unwrap(),
            Some(b"one\n".to_vec())
        );
        assert_eq!(
            reader.read_line(1024).await.unwrap(),
            Some(b"two\n".to_vec())
        );
        assert_eq!(reader.read_line(1024).await.unwrap(), None);
    }

    #[test]
    fn this_process_judged_by_its_pid_is_the_same() {
        let v = judge_pid(std::process::id() as i32);
        assert!(v.is_same(), "{v:?}");
    }

    #[test]
    fn a_listener_is_put_in_place_whole_and_replaces_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let (first, f1) = listen_passing_credentials(&path).unwrap();
        drop(first);
        // The first listener is gone; its file is stale and is replaced.
        let (second, f2) = listen_passing_credentials(&path).unwrap();
        assert_ne!(f1, f2);
        assert_eq!(SocketFile::at(&path), Some(f2));
        let passes: bool = getsockopt(&second, sockopt::PassCred).unwrap();
        assert!(passes, "credential passing is on");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary name is left behind");
        UnixStream::connect(&path).unwrap();
    }

    #[tokio::test]
    async fn a_connection_queued_before_the_listener_passes_credentials_carries_none_so_ours_is_set_before_listen()
     {
        // Issue 12, item 10, pinned at the kernel: a connection that arrives between `listen`
        // and turning credential passing on for the listener does not inherit the flag, and its
        // bytes name no writer, so the daemon refuses the very CLI that started it.
        use tokio::io::AsyncWriteExt;
        let me = std::process::id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let old_path = dir.path().join("old.sock");
        let old = std::os::unix::net::UnixListener::bind(&old_path).unwrap();
        let mut early = connect_passing_credentials(&old_path).unwrap();
        pass_credentials(&old).unwrap();
        let (srv, _) = old.accept().unwrap();
        early.write_all(b"hi\n").await.unwrap();
        srv.set_nonblocking(true).unwrap();
        let (r, _w) = tokio::net::UnixStream::from_std(srv).unwrap().into_split();
        let err = CheckedReader::new(r, me).read_line(1024).await.unwrap_err();
        assert!(err.to_string().contains("pid unknown"), "{err}");

        // Ours: on before the socket has its name, so no connection can come before it.
        let path = dir.path().join("daemon.sock");
        let (l, _) = listen_passing_credentials(&path).unwrap();
        let mut first = connect_passing_credentials(&path).unwrap();
        let (srv, _) = l.accept().unwrap();
        first.write_all(b"hi\n").await.unwrap();
        srv.set_nonblocking(true).unwrap();
        let (r, _w) = tokio::net::UnixStream::from_std(srv).unwrap().into_split();
        let got = CheckedReader::new(r, me).read_line(1024).await.unwrap();
        assert_eq!(got, Some(b"hi\n".to_vec()));
    }

    #[test]
    fn a_temporary_socket_name_always_fits_a_socket_address() {
        let deep = format!("/{}/daemon.sock", "d".repeat(86));
        assert!(deep.len() <= crate::limits::SOCKET_PATH_BYTES_MAX);
        let tmp = temporary_socket_path(std::path::Path::new(&deep));
        assert!(
            tmp.as_os_str().len() <= crate::limits::SOCKET_PATH_BYTES_MAX + 8,
            "{tmp:?}"
        );
        assert_eq!(tmp.parent(), std::path::Path::new(&deep).parent());
        let short = temporary_socket_path(std::path::Path::new("/h/daemon.sock"));
        assert!(
            short.to_string_lossy().starts_with("/h/daemon.sock."),
            "{short:?}"
        );
    }

    #[test]
    fn an_older_build_is_named_as_such() {
        let v = Verdict::OtherProgram {
            pid: 7,
            exe: None,
            older_build: true,
        };
        assert!(v.describe("the daemon").contains("older build"));
        assert!(!v.is_same());
    }
}
