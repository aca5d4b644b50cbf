//! Who is on the other end of a Unix socket, by the kernel's word: the peer's pid (pinned by a
//! pidfd where the kernel has SO_PEERPIDFD) and uid, the writer of every byte read (credential
//! passing), and the sockets that pass credentials from their first byte.
//!
//! Owns: SO_PEERCRED, SO_PEERPIDFD, SO_PASSCRED and SCM_CREDENTIALS, and putting a listening
//! socket in place whole. Must never: trust anything the peer says about itself, or judge the
//! peer (whether it is one of ours is the caller's policy: `agents::check_peer`).
//!
//! Linux only: elsewhere every call here is an `Unsupported` error (`os::unsupported`).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use nix::sys::socket::{getsockopt, sockopt};

/// The kernel's account of the process on the other end of a connected Unix socket.
#[derive(Debug)]
pub(crate) struct PeerCredentials {
    /// The peer's pid: the pidfd's where the kernel has one, else SO_PEERCRED's.
    pub(crate) pid: i32,
    /// Its effective uid.
    pub(crate) uid: u32,
    /// A pidfd pinned to the peer (Linux 6.5+), to notice a pid recycled while it is read.
    pub(crate) pidfd: Option<OwnedFd>,
}

/// The credentials of the peer of `sock`.
///
/// The pid is pinned with SO_PEERPIDFD where the kernel has it (Linux 6.5+); older kernels fall
/// back to the pid from SO_PEERCRED. An error says why in one sentence: SO_PEERCRED failed, or
/// the peer already exited.
#[cfg(target_os = "linux")]
pub(crate) fn credentials<F: AsFd>(sock: &F) -> std::io::Result<PeerCredentials> {
    let cred = getsockopt(sock, sockopt::PeerCredentials)
        .map_err(|e| std::io::Error::other(format!("SO_PEERCRED failed: {e}")))?;
    let pidfd = pidfd(sock);
    let pid = match &pidfd {
        Some(fd) => crate::os::process::pid_of_pidfd(fd).ok_or_else(|| {
            std::io::Error::other("the peer process has already exited".to_string())
        })?,
        None => cred.pid(),
    };
    Ok(PeerCredentials {
        pid,
        uid: cred.uid(),
        pidfd,
    })
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn credentials<F: AsFd>(_sock: &F) -> std::io::Result<PeerCredentials> {
    Err(crate::os::unsupported(
        "reading a socket peer's credentials",
    ))
}

/// A pidfd pinned to the peer of `sock`, where the kernel has SO_PEERPIDFD (Linux 6.5+).
#[cfg(target_os = "linux")]
pub(crate) fn pidfd<F: AsFd>(sock: &F) -> Option<OwnedFd> {
    getsockopt(sock, sockopt::PeerPidfd).ok()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pidfd<F: AsFd>(_sock: &F) -> Option<OwnedFd> {
    None
}

/// Asks the kernel to attach the sender's credentials to every message on `sock` (and, on a
/// listener, on every connection it accepts). Both ends set it before sending a byte, so every
/// byte either end receives carries the pid of the process that wrote it.
#[cfg(target_os = "linux")]
pub(crate) fn pass_credentials<F: AsFd>(sock: &F) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(sock, sockopt::PassCred, &true).map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pass_credentials<F: AsFd>(_sock: &F) -> std::io::Result<()> {
    Err(crate::os::unsupported("passing credentials on a socket"))
}

/// Reads lines from a verified peer, checking that every byte was written by the process that
/// was verified. A socket can be shared: a process that connects (or listens) and then runs
/// the verified program in its place passes the check at accept, but the kernel still names
/// whoever writes each message. Bytes from any other process close the connection.
pub(crate) struct CheckedReader {
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
    pub(crate) fn new(stream: tokio::net::unix::OwnedReadHalf, pid: i32) -> CheckedReader {
        CheckedReader {
            stream,
            buf: Vec::new(),
            chunk: vec![0u8; READ_CHUNK_BYTES],
            pid,
        }
    }

    /// One line of at most `max` bytes (newline included). A longer line, or bytes from
    /// another process, is an error: the caller closes the connection.
    pub(crate) async fn read_line(&mut self, max: usize) -> std::io::Result<Option<Vec<u8>>> {
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
    #[cfg(target_os = "linux")]
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

    #[cfg(not(target_os = "linux"))]
    async fn recv(&self, _chunk: &mut [u8]) -> std::io::Result<(usize, Option<i32>)> {
        Err(crate::os::unsupported(
            "reading who wrote the bytes on a socket",
        ))
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
pub(crate) struct SocketFile {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl SocketFile {
    /// The file at `path` now, or None when nothing is there (or it cannot be read).
    pub(crate) fn at(path: &std::path::Path) -> Option<SocketFile> {
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
#[cfg(target_os = "linux")]
pub(crate) fn listen_passing_credentials(
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
#[cfg(target_os = "linux")]
pub(crate) fn connect_passing_credentials(
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

#[cfg(not(target_os = "linux"))]
pub(crate) fn listen_passing_credentials(
    _path: &std::path::Path,
) -> std::io::Result<(std::os::unix::net::UnixListener, SocketFile)> {
    Err(crate::os::unsupported("listening with credential passing"))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn connect_passing_credentials(
    _path: &std::path::Path,
) -> std::io::Result<tokio::net::UnixStream> {
    Err(crate::os::unsupported("connecting with credential passing"))
}

// The kernel facts these tests pin are Linux's.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

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
}
