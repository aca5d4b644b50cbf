//! The daemon's lock: one daemon per home, held for its whole life, and who holds it by the
//! kernel's word.

use crate::config::Home;

/// The lock the daemon of a home holds for its whole life: a POSIX record lock (`fcntl`
/// F_SETLK, a write lock over the whole of `<home>/daemon.lock`), so any process can ask the
/// kernel who holds it (F_GETLK names the holder's pid) and the kernel drops it the moment the
/// holder dies, however it dies. See decision 0010.
///
/// A POSIX lock belongs to the process, and the kernel releases it when the process closes ANY
/// descriptor of that file. So nothing in the daemon may ever open `daemon.lock` besides this
/// one `File` — not [`lock_holder`], not [`daemon_lock_free`], not a log reader: each of those
/// is for other processes only.
pub(crate) struct DaemonLock {
    /// Kept open (and never cloned) for as long as the daemon runs.
    _file: std::fs::File,
}

impl DaemonLock {
    /// The device and inode of the locked file, read from the open descriptor (fstat: nothing
    /// is opened, so the lock is safe).
    pub(crate) fn identity(&self) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt as _;
        self._file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
}

/// The device and inode of the file now at `<home>/daemon.lock`, by `lstat` (nothing is opened,
/// so the daemon may call it: see [`DaemonLock`]); None when nothing is there.
pub(crate) fn lock_file_identity(home: &Home) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(home.lock_path())
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// `l_type` and friends as `libc::flock` spells them (`c_short` on every platform).
fn whole_file(kind: nix::libc::c_int) -> nix::libc::flock {
    nix::libc::flock {
        l_type: kind as nix::libc::c_short,
        l_whence: nix::libc::SEEK_SET as nix::libc::c_short,
        l_start: 0,
        // 0: to the end of the file, however long it grows.
        l_len: 0,
        l_pid: 0,
    }
}

/// Who holds a write lock on `file` by the kernel's word: Some(pid) when another process does.
/// The pid is 0 when the holder lives in another pid namespace.
fn holder_of(file: &std::fs::File) -> std::io::Result<Option<i32>> {
    let mut probe = whole_file(nix::libc::F_WRLCK);
    nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETLK(&mut probe))
        .map_err(std::io::Error::from)?;
    Ok((i32::from(probe.l_type) != nix::libc::F_UNLCK).then_some(probe.l_pid))
}

/// Takes the daemon lock of `home`, or says who holds it: `Err(Some(pid))` (or `Err(None)`
/// when the holder let go in between). The pid and socket path are then written into the file
/// for a person reading it; only the kernel's F_GETLK is ever trusted.
pub(crate) fn take_daemon_lock(home: &Home) -> std::io::Result<Result<DaemonLock, Option<i32>>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        // The lock is this very file in the home, never wherever a symlink planted there points;
        // and a FIFO planted there must not block the open (it is refused below).
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(home.lock_path())?;
    let lock = whole_file(nix::libc::F_WRLCK);
    match nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETLK(&lock)) {
        Ok(_) => {}
        Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EACCES) => {
            return Ok(Err(holder_of(&file).ok().flatten()));
        }
        Err(e) => return Err(e.into()),
    }
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file; remove it",
            home.lock_path().display()
        )));
    }
    // For a person only, so best effort: a full disk must not stop a daemon from starting.
    let noted = file.set_len(0).and_then(|()| {
        write!(
            file,
            "pid {}\nsocket {}\n(for reading only: the daemon is whoever holds the fcntl lock on this file)\n",
            std::process::id(),
            home.socket_path().display()
        )
    });
    if let Err(e) = noted {
        tracing::warn!(
            "could not note the pid in {}: {e}",
            home.lock_path().display()
        );
    }
    Ok(Ok(DaemonLock { _file: file }))
}

/// The pid of the process holding the daemon lock of `home` (the kernel's word, F_GETLK), or
/// None when no daemon of this home runs, not even one still stopping. Never call it inside
/// the daemon: closing the file it opens would release the daemon's own lock (see
/// [`DaemonLock`]).
pub(crate) fn lock_holder(home: &Home) -> Option<i32> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO planted as the lock would block a read-only open until a writer came: every
        // relay and `status` would hang, saying nothing.
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(home.lock_path())
        .ok()?;
    holder_of(&file).ok().flatten()
}

/// True when no daemon of `home` holds its lock: none is running, not even one still stopping.
/// Never call it inside the daemon (see [`lock_holder`]).
pub(crate) fn daemon_lock_free(home: &Home) -> bool {
    lock_holder(home).is_none()
}
