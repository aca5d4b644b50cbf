//! Peer identity with real parts: a second Unix user and a second Holdcall executable. The daemon
//! gives nothing to another user or another program, and the relay and CLI give nothing to a
//! daemon that is either.
//!
//! A real second user needs root (CI runs as root; `tools/test` is the way to run these). Both
//! users run one copy of the binary placed in a world-readable directory, so that both run the
//! same executable image whatever the permissions of the build directory.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

const OTHER_USER: &str = "holdcall-other";

/// The uid of the second user, created on first use. Needs root: without it the test fails with
/// the remedy rather than passing without having checked anything.
fn other_uid() -> u32 {
    static UID: OnceLock<u32> = OnceLock::new();
    *UID.get_or_init(|| {
        let lookup = || {
            Command::new("id")
                .args(["-u", OTHER_USER])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .trim()
                        .parse::<u32>()
                        .unwrap()
                })
        };
        if let Some(uid) = lookup() {
            return uid;
        }
        assert!(
            nix::unistd::geteuid().is_root(),
            "these tests need a second Unix user ({OTHER_USER}); run them as root (tools/test \
             does, CI does), or create the user yourself: useradd --system {OTHER_USER}"
        );
        let out = Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                OTHER_USER,
            ])
            .output()
            .unwrap();
        // Another test binary may have created it in the meantime; the lookup decides.
        lookup().unwrap_or_else(|| {
            panic!(
                "useradd {OTHER_USER} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    })
}

/// A world-readable directory holding a copy of the binary that both users run, and the homes
/// and runtime directories of the test.
struct Place {
    dir: tempfile::TempDir,
    bin: PathBuf,
    guards: Vec<i32>,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::Builder::new().prefix("hcid").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("holdcall");
        crate::common::copy_executable(Env::bin(), &bin);
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        Place {
            dir,
            bin,
            guards: Vec::new(),
        }
    }

    /// A home and runtime directory pair named `name`, owned by `owner`.
    fn homes(&self, name: &str, owner: Option<u32>) -> (PathBuf, PathBuf) {
        let home = self.dir.path().join(format!("{name}-home"));
        let run = self.dir.path().join(format!("{name}-run"));
        for d in [&home, &run] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
            if let Some(uid) = owner {
                nix::unistd::chown(
                    d.as_path(),
                    Some(nix::unistd::Uid::from_raw(uid)),
                    Some(nix::unistd::Gid::from_raw(uid_gid(uid))),
                )
                .unwrap();
            }
        }
        (home, run)
    }

    /// `bin ARGS` with the home and runtime directory given, as this user or as `OTHER_USER`.
    fn cmd(&self, bin: &Path, as_other: bool, home: &Path, run: &Path, args: &[&str]) -> Command {
        let mut c = if as_other {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={OTHER_USER}"),
                &format!("--regid={OTHER_USER}"),
                "--clear-groups",
                "--",
            ])
            .arg(bin);
            c
        } else {
            Command::new(bin)
        };
        c.args(args)
            .env("HOLDCALL_HOME", home)
            .env("XDG_RUNTIME_DIR", run)
            .env_remove("HOLDCALL_LOG")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null());
        c
    }

    /// Runs a relay of this build (as us) for the demo server, sends it one call and closes its
    /// stdin; returns its first stdout line, parsed, and its stderr.
    fn relay_one_call(&mut self, home: &Path, run: &Path) -> (serde_json::Value, String) {
        let mut relay = self
            .cmd(
                &self.bin,
                false,
                home,
                run,
                &[
                    "serve",
                    "--connector",
                    "demo",
                    "--",
                    self.bin.to_str().unwrap(),
                    "demo-server",
                ],
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.guards.push(relay.id() as i32);
        {
            use std::io::Write;
            let mut stdin = relay.stdin.take().unwrap();
            stdin
                .write_all(&call("1", "echo", r#"{"text":"hi"}"#))
                .unwrap();
        }
        let out = relay.wait_with_output().unwrap();
        let answer: serde_json::Value = serde_json::from_slice(
            out.stdout
                .split(|&b| b == b'\n')
                .next()
                .expect("the relay answered"),
        )
        .unwrap();
        (answer, String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn run(&self, as_other: bool, home: &Path, run: &Path, args: &[&str]) -> Output {
        self.cmd(&self.bin, as_other, home, run, args)
            .output()
            .unwrap()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        for &p in &self.guards {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

fn uid_gid(uid: u32) -> u32 {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .unwrap()
        .map(|u| u.gid.as_raw())
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The daemon's socket: in the home, whatever the runtime directory says.
fn socket_in(home: &Path) -> PathBuf {
    let socket = home.join("daemon.sock");
    assert!(socket.exists(), "no socket at {}", socket.display());
    socket
}

/// A Python client, run as the second user, that opens a session and asks for a decision the
/// way a relay would, and prints what it got: the error's class, or the bytes received.
const OTHER_CLIENT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
    s.sendall(b'{"kind":"session.start","session_id":"0123456789abcdef0123456789abcdef","connector":"x","client":null}\n')
    s.sendall(b'{"kind":"call.request","session_id":"0123456789abcdef0123456789abcdef","seq":1,"tool":"t","args_digest":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","arguments":null,"arguments_omitted":false}\n')
    print(repr(s.recv(4096)))
except OSError as e:
    print(type(e).__name__)
"#;

fn other_client(socket: &Path) -> String {
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={OTHER_USER}"),
            &format!("--regid={OTHER_USER}"),
            "--clear-groups",
            "--",
            // Debian's interpreter: one under root's home (pyenv) is out of the other user's reach.
            "/usr/bin/python3",
            "-c",
            OTHER_CLIENT,
        ])
        .arg(socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the other user's client did not run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn another_user_cannot_even_reach_the_socket_in_its_private_directory() {
    other_uid();
    let p = Place::new();
    let (home, run) = p.homes("mine", None);
    // The test's own directories are opened up; the daemon's socket directory is not.
    for d in [&home, &run] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = p.run(false, &home, &run, &["daemon", "start"]);
    assert!(o.status.success(), "{}", text(&o));
    let socket = socket_in(&home);
    let before = journal_rows(&home.join("holdcall.db")).len();
    assert_eq!(other_client(&socket), "PermissionError");
    assert_eq!(journal_rows(&home.join("holdcall.db")).len(), before);
    p.run(false, &home, &run, &["daemon", "stop"]);
}

#[test]
fn another_user_gets_nothing_from_the_daemon_even_when_the_socket_is_opened_to_everyone() {
    other_uid();
    let p = Place::new();
    let (home, run) = p.homes("mine", None);
    let o = p.run(false, &home, &run, &["daemon", "start"]);
    assert!(o.status.success(), "{}", text(&o));
    let socket = socket_in(&home);
    // A mistake (or a hostile chmod) opens every directory and the socket itself: the kernel's
    // word on the peer's uid still refuses the connection before a byte is read.
    for d in [&home, &run] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = journal_rows(&home.join("holdcall.db")).len();
    let got = other_client(&socket);
    assert!(
        got == "b''" || got == "ConnectionResetError" || got == "BrokenPipeError",
        "the other user got {got}"
    );
    assert_eq!(journal_rows(&home.join("holdcall.db")).len(), before);
    let log = std::fs::read_to_string(home.join("daemon.log")).unwrap();
    assert!(log.contains("runs as another user"), "{log}");
    p.run(false, &home, &run, &["daemon", "stop"]);
}

#[test]
fn the_cli_and_a_relay_refuse_a_daemon_run_by_another_user() {
    let uid = other_uid();
    let mut p = Place::new();
    // The other user runs this very build, at the socket path our commands will dial.
    let (home, run) = p.homes("theirs", Some(uid));
    let o = p.run(true, &home, &run, &["daemon", "start"]);
    assert!(o.status.success(), "{}", text(&o));
    let pid = std::fs::read_to_string(home.join("daemon.log")).unwrap();
    assert!(pid.contains("listening"), "{pid}");

    let status = p.run(false, &home, &run, &["daemon", "status"]);
    assert!(!status.status.success(), "{}", text(&status));
    assert!(text(&status).contains("another user"), "{}", text(&status));

    // A relay starts its server but gets no decision: every call is refused.
    let (answer, stderr) = p.relay_one_call(&home, &run);
    assert!(is_refusal(&answer), "{answer}");
    assert!(stderr.contains("another user"), "{stderr}");

    let o = p.run(true, &home, &run, &["daemon", "stop"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_second_copy_of_holdcall_is_an_impostor_to_both_ends() {
    let mut p = Place::new();
    let (home, run) = p.homes("mine", None);
    // Same bytes, same user, another file: not this build. It runs a daemon of its own.
    let impostor = p.dir.path().join("holdcall-copy");
    crate::common::copy_executable(&p.bin, &impostor);
    std::fs::set_permissions(&impostor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = p
        .cmd(&impostor, false, &home, &run, &["daemon", "start"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let before = journal_rows(&home.join("holdcall.db")).len();

    let status = p.run(false, &home, &run, &["daemon", "status"]);
    assert!(!status.status.success(), "{}", text(&status));
    assert!(
        text(&status).contains("not this Holdcall build"),
        "{}",
        text(&status)
    );

    let (answer, stderr) = p.relay_one_call(&home, &run);
    assert!(is_refusal(&answer), "{answer}");
    assert!(stderr.contains("not this Holdcall build"), "{stderr}");
    // And the copy's daemon wrote nothing for the relay it refused.
    assert_eq!(journal_rows(&home.join("holdcall.db")).len(), before);

    let o = p
        .cmd(&impostor, false, &home, &run, &["daemon", "stop"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}
