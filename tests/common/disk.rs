//! A small disk for the tests that fill one: a 2 MiB tmpfs mounted over a home for a test's
//! life (root only, as CI runs), and the one way a test fills it. Never mounts anywhere but a
//! directory the test made.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A 2 MiB tmpfs mounted on a test's directory; unmounted (lazily, since a daemon may still
/// hold its files for a moment) when dropped, after the daemon is stopped.
pub(crate) struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    /// None (with the reason printed) when this process may not mount.
    pub(crate) fn mount(at: &Path) -> Option<SmallDisk> {
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: mounting a small tmpfs needs root (CI runs the tests as root)");
            return None;
        }
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs"])
            .arg(at)
            .output()
            .unwrap();
        if !out.status.success() {
            println!(
                "skipped: mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        Some(SmallDisk {
            at: at.to_path_buf(),
        })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).output();
    }
}

/// Fills the file system holding `dir` with one file, until the disk says no; returns it.
pub(crate) fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}
