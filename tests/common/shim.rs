//! The LD_PRELOAD fault shim (tools/shim/holdcall_shim.c) as tests use it: built once per test
//! process, put on the one daemon of a home, switched between modes by a control file, and read
//! back through its log. Owns nothing of the product: it must never be needed by a test that
//! does not ask for it, and it skips (None, with a reason) where it cannot be built, since it
//! needs a C compiler and glibc's dynamic linking.

use super::Env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One home's shim: the library, its control file, its log and its snapshot directory.
pub(crate) struct Shim {
    pub lib: PathBuf,
    pub control: PathBuf,
    pub log: PathBuf,
    pub snapshots: PathBuf,
}

/// The shim library of this test process, or why it could not be built.
fn library() -> Result<&'static Path, &'static str> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(build)
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(String::as_str)
}

/// Builds the shim into the target's temporary directory: into a name of this process's own,
/// then renamed into place, so test processes building at once never see a half-written file,
/// and a daemon still running an earlier copy keeps its own.
fn build() -> Result<PathBuf, String> {
    if !cfg!(target_os = "linux") {
        return Err("the shim intercepts glibc's fsync and socket writes: Linux only".into());
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/shim/holdcall_shim.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join("holdcall_shim.so");
    let tmp = dir.join(format!("holdcall_shim.{}.so", std::process::id()));
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&tmp)
        .arg(&source)
        .arg("-ldl")
        .output()
        .map_err(|e| format!("cc cannot run ({e}); install a C compiler (Debian: gcc)"))?;
    if !built.status.success() {
        return Err(format!(
            "cc could not build {}: {}",
            source.display(),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("rename {}: {e}", tmp.display()))?;
    Ok(out)
}

impl Shim {
    /// Builds the .so once per test process and makes the control file (mode `off`), the log
    /// and the snapshot directory under `env.dir`. None, printing why, when it cannot be built.
    pub(crate) fn new(env: &Env) -> Option<Shim> {
        let lib = match library() {
            Ok(lib) => lib.to_path_buf(),
            Err(why) => {
                eprintln!("skipped: the fault shim is unavailable: {why}");
                return None;
            }
        };
        let shim = Shim {
            lib,
            control: env.dir.path().join("shim-control"),
            log: env.dir.path().join("shim.log"),
            snapshots: env.dir.path().join("shim-snapshots"),
        };
        std::fs::create_dir_all(&shim.snapshots).unwrap();
        std::fs::write(&shim.log, b"").unwrap();
        shim.set("off");
        Some(shim)
    }

    /// Puts the shim on `cmd`: LD_PRELOAD, HOLDCALL_SHIM_CONTROL, HOLDCALL_SHIM_LOG,
    /// HOLDCALL_SHIM_SNAPSHOTS. The files tracked are the journal's (`*.db`, `*.db-wal`).
    pub(crate) fn apply<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("LD_PRELOAD", &self.lib)
            .env("HOLDCALL_SHIM_CONTROL", &self.control)
            .env("HOLDCALL_SHIM_LOG", &self.log)
            .env("HOLDCALL_SHIM_SNAPSHOTS", &self.snapshots)
            .env_remove("HOLDCALL_SHIM_FILES")
    }

    /// Writes the control word ("off", "eio", "pause", "seq_shift", "snap"). The shim reads it
    /// on its next intercepted call; written whole by a rename, so it never reads half a word.
    pub(crate) fn set(&self, mode: &str) {
        let tmp = self.control.with_extension("tmp");
        std::fs::write(&tmp, format!("{mode}\n")).unwrap();
        std::fs::rename(&tmp, &self.control).unwrap();
    }

    /// The log's lines so far.
    pub(crate) fn log(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Starts this env's daemon with the shim on it (`holdcall daemon start` run with `apply`;
    /// the daemon it spawns inherits the environment), asserting success and that the daemon
    /// really has the library mapped (a daemon already running without it would not); returns
    /// its pid.
    pub(crate) fn start_daemon(&self, env: &Env) -> i32 {
        let out = self
            .apply(&mut env.cmd(&["daemon", "start"]))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "holdcall daemon start (with the shim) failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = env.daemon_pid();
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        assert!(
            maps.contains(self.lib.to_str().unwrap()),
            "the daemon (pid {pid}) runs without the shim: was one already running?"
        );
        pid
    }
}
