//! The command line as a user meets it: the demo, versions, bad input and status.

use crate::common::*;

#[test]
fn the_demo_shows_an_allowed_call_a_refused_one_the_log_and_a_verified_journal() {
    let env = Env::new();
    // The demo makes its own home under TMPDIR; keep it inside this test's directory.
    let out = env
        .cmd(&["demo"])
        .env("TMPDIR", env.dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("allowed: \"Echo: hello through Holdcall\""),
        "{stdout}"
    );
    assert!(stdout.contains("refused, as a tool error"), "{stdout}");
    assert!(stdout.contains("call.request"), "{stdout}");
    assert!(stdout.contains("journal OK"), "{stdout}");
    assert!(stdout.contains("DENY"), "{stdout}");
    assert!(stdout.lines().count() < 70, "about one screen: {stdout}");
}

#[test]
fn version_has_the_documented_shape() {
    let env = Env::new();
    let v = env.ok(&["version"]);
    assert!(v.starts_with("holdcall "), "{v}");
    assert!(v.contains(std::env::consts::OS), "{v}");
}

#[test]
fn an_unknown_config_key_is_refused_by_every_command_with_the_file_named() {
    let env = Env::new();
    env.write_config("[journal]\ndurabilty = \"process\"\n");
    let err = env.fails(&["policy", "list"], 1);
    assert!(err.contains("config.toml"), "{err}");
    assert!(err.contains("durabilty"), "{err}");
}

#[test]
fn a_policy_section_in_the_config_is_refused_with_what_to_do() {
    let env = Env::new();
    env.write_config("[policy]\ndeny = [\"delete_file\"]\n");
    let err = env.fails(&["log"], 1);
    assert!(err.contains("holdcall policy deny"), "{err}");
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    let env = Env::new();
    let err = env.fails(&["log", "--nope"], 2);
    assert!(err.contains("--nope"), "{err}");
}

#[test]
fn log_and_verify_before_anything_was_recorded_say_so() {
    let env = Env::new();
    let err = env.fails(&["log"], 1);
    assert!(err.contains("no journal"), "{err}");
}

#[test]
fn status_names_the_home_the_daemon_and_the_journal() {
    let env = Env::new();
    env.ok(&["policy", "deny", "x"]);
    let s = env.ok(&["status"]);
    assert!(s.contains(&env.home().display().to_string()), "{s}");
    assert!(s.contains("daemon   running"), "{s}");
    assert!(s.contains("policy   1 rule"), "{s}");
    env.ok(&["daemon", "stop"]);
    let s = env.ok(&["status"]);
    assert!(s.contains("daemon   not running"), "{s}");
}

#[test]
fn the_database_and_the_socket_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let mode = std::fs::metadata(env.db()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    let sock = std::path::PathBuf::from(v["socket"].as_str().unwrap());
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir = std::fs::metadata(sock.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir, 0o700);
}

#[test]
fn daemon_restart_replaces_a_running_daemon() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let before = env.daemon_pid();
    let out = env.ok(&["daemon", "restart"]);
    assert!(out.contains("restarted"), "{out}");
    assert_ne!(env.daemon_pid(), before);
}

#[test]
fn an_older_build_of_the_daemon_is_named_as_such_and_restart_replaces_it() {
    let env = Env::new();
    let exe = env.dir.path().join("holdcall-copy");
    crate::common::copy_executable(Env::bin(), &exe);
    let run = |args: &[&str]| {
        std::process::Command::new(&exe)
            .args(args)
            .env("HOLDCALL_HOME", env.home())
            .env("XDG_RUNTIME_DIR", env.dir.path().join("run"))
            .output()
            .unwrap()
    };
    assert!(run(&["daemon", "start"]).status.success());
    // An upgrade in place: a new file (new inode) at the same path.
    let next = env.dir.path().join("holdcall-next");
    let mut bytes = std::fs::read(Env::bin()).unwrap();
    bytes.extend_from_slice(b"another build");
    std::fs::write(&next, bytes).unwrap();
    std::fs::set_permissions(&next, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&next, &exe).unwrap();
    let status = run(&["daemon", "status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("OLDER BUILD"), "{text}");
    assert!(!status.status.success());
    let restart = run(&["daemon", "restart"]);
    assert!(
        restart.status.success(),
        "{}",
        String::from_utf8_lossy(&restart.stderr)
    );
    let status = run(&["daemon", "status"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("daemon   running"));
    assert!(run(&["daemon", "stop"]).status.success());
}

#[test]
fn log_help_says_how_many_entries_it_shows_when_no_limit_is_given() {
    // Regression (issue 12, item 9): `holdcall log` showed the newest 50 and `--help` hid it.
    let env = Env::new();
    let help = env.ok(&["log", "--help"]);
    let default = format!("[default: {}]", holdcall::limits::LOG_DEFAULT_LIMIT);
    assert!(help.contains("newest"), "{help}");
    assert!(help.contains(&default), "{help}");
}

/// Makes a file immutable (`chattr +i`) until dropped, when `chattr -i` always runs.
struct Immutable(std::path::PathBuf);

impl Immutable {
    /// `Err` says why the file system or this user cannot do it (the test then skips).
    fn set(path: &std::path::Path) -> Result<Immutable, String> {
        let out = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .output()
            .map_err(|e| format!("chattr cannot run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "chattr +i {} failed: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Immutable(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn doctor_names_a_database_file_that_is_immutable() {
    // Regression (issue 12, item 8): with holdcall.db-shm immutable the daemon died of SIGBUS,
    // and doctor said all was well. The home is on the target's disk: a tmpfs has no `+i`.
    let env = Env::new_in(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
    env.ok(&["daemon", "start"]);
    let doctor = env.ok(&["doctor"]);
    assert!(
        doctor.contains(
            "[OK  ] database files: holdcall.db, holdcall.db-wal, holdcall.db-shm writable"
        ),
        "{doctor}"
    );
    for name in ["holdcall.db-shm", "holdcall.db"] {
        let path = env.home().join(name);
        let guard = match Immutable::set(&path) {
            Ok(g) => g,
            Err(why) => {
                eprintln!("skipped: {why} (needs root and a file system with chattr +i)");
                env.ok(&["daemon", "stop"]);
                return;
            }
        };
        let out = env.run(&["doctor"]);
        drop(guard);
        let doctor = String::from_utf8(out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{doctor}");
        let line = doctor
            .lines()
            .find(|l| l.starts_with("[FAIL] database files:"))
            .unwrap_or_else(|| panic!("no database files failure for {name}: {doctor}"));
        assert!(line.contains(&format!("{name} is immutable")), "{line}");
        assert!(doctor.contains("chattr -i"), "{doctor}");
    }
    let doctor = env.ok(&["doctor"]);
    assert!(doctor.contains("[OK  ] database files:"), "{doctor}");
    env.ok(&["daemon", "stop"]);
}
