//! One test environment: a private home and runtime directory, the real `holdcall` binary, and
//! helpers to drive a relay in front of the built-in demo server, which records every line it
//! receives. Nothing here touches the real home, keyring or network: every command runs without
//! the developer's D-Bus session, unless the test attached a private one (`SecretService`).

pub(crate) mod disk;
pub(crate) mod evidence;
pub(crate) mod impostor;
pub(crate) mod shim;
mod turns;

pub(crate) use turns::alone;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// The refusal text of a call a policy rule denies.
pub(crate) const DENIED: &str =
    "Holdcall refused this call: a policy rule denies it. Do not retry automatically.";

/// A 2026-07-28 request's `_meta` member (revision, capabilities, client info), to splice
/// into a request's `params`.
pub(crate) const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}"#;

/// How long a test waits for something that should happen at once; generous for a loaded
/// 2-core CI machine. Reaching it is a failure, never a pass.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `f` until it holds, failing after `PATIENCE`. For another process's state (a pid's
/// life, a journal row, a file), which gives the test nothing to wait on: the one place the
/// tests poll.
pub(crate) fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Copies an executable for a test to run, by running `cp`, never with `std::fs::copy`: a file
/// this process has open for writing is inherited by every child another test's thread forks
/// meanwhile, until that child execs, and running the copy during that window fails with
/// ETXTBSY ("Text file busy"). With `cp` the only writer is `cp`, which has exited when this
/// returns.
pub(crate) fn copy_executable(from: impl AsRef<Path>, to: impl AsRef<Path>) {
    let status = std::process::Command::new("cp")
        .arg("--")
        .arg(from.as_ref())
        .arg(to.as_ref())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp {:?} {:?} failed",
        from.as_ref(),
        to.as_ref()
    );
}

pub(crate) struct Env {
    pub dir: tempfile::TempDir,
    /// The address of a private session bus this test attached (`Env::attach`), if any.
    bus: std::sync::OnceLock<String>,
    /// This test's share of the machine, held while the environment lives (see `alone`).
    _turn: turns::Shared,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env::new_in(&std::env::temp_dir())
    }

    /// An environment whose directory is made under `base` (e.g. `CARGO_TARGET_TMPDIR`, on the
    /// real disk, for a test that needs file attributes a tmpfs lacks).
    pub(crate) fn new_in(base: &Path) -> Env {
        let turn = turns::Shared::take();
        let dir = tempfile::Builder::new()
            .prefix("hc")
            .tempdir_in(base)
            .unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        std::fs::create_dir(dir.path().join("user")).unwrap();
        std::fs::create_dir(dir.path().join("project")).unwrap();
        Env {
            dir,
            bus: std::sync::OnceLock::new(),
            _turn: turn,
        }
    }

    /// Every later command of this environment (and the daemon it starts) uses the private
    /// Secret Service `ss`, and only it.
    pub(crate) fn attach(&self, ss: &SecretService) {
        self.bus.set(ss.address.clone()).unwrap();
    }

    /// A home whose journal commits with synchronous=NORMAL: for tests that make many changes.
    pub(crate) fn fast() -> Env {
        let env = Env::new();
        env.write_config("[journal]\ndurability = \"process\"\n");
        env
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    /// The `HOME` every command sees (MCP client config files live under it), never the real one.
    pub(crate) fn user_home(&self) -> PathBuf {
        self.dir.path().join("user")
    }
    /// `XDG_CONFIG_HOME` for every command (Claude Desktop's and VS Code's user files).
    pub(crate) fn user_config(&self) -> PathBuf {
        if cfg!(target_os = "macos") {
            self.user_home().join("Library/Application Support")
        } else {
            self.user_home().join(".config")
        }
    }
    /// A project directory: the current directory of commands run with `in_project`.
    pub(crate) fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }
    /// A command run from the project directory (where `.mcp.json`, `.vscode/` … are read).
    pub(crate) fn in_project(&self, args: &[&str]) -> Output {
        self.cmd(args).current_dir(self.project()).output().unwrap()
    }
    pub(crate) fn db(&self) -> PathBuf {
        self.home().join("holdcall.db")
    }
    pub(crate) fn bin() -> PathBuf {
        PathBuf::from(env!("CARGO_BIN_EXE_holdcall"))
    }
    pub(crate) fn write_config(&self, text: &str) {
        std::fs::write(self.home().join("config.toml"), text).unwrap();
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(Env::bin());
        c.args(args)
            .env("HOLDCALL_HOME", self.home())
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("HOME", self.user_home())
            .env("XDG_CONFIG_HOME", self.user_home().join(".config"))
            .env_remove("CODEX_HOME")
            .env_remove("HOLDCALL_LOG")
            .stdin(Stdio::null());
        // Never the developer's own session bus (and so never their keyring): only a private
        // bus the test attached. DISPLAY would let libdbus try to autolaunch one.
        match self.bus.get() {
            Some(address) => c.env("DBUS_SESSION_BUS_ADDRESS", address),
            None => c.env_remove("DBUS_SESSION_BUS_ADDRESS"),
        };
        c.env_remove("DISPLAY");
        c
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "holdcall {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must fail with `code`; returns its stderr.
    pub(crate) fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "holdcall {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// This home's daemon socket path, as `holdcall status --json` names it.
    pub(crate) fn socket(&self) -> PathBuf {
        let v: serde_json::Value = serde_json::from_str(&self.ok(&["status", "--json"])).unwrap();
        v["socket"].as_str().unwrap().into()
    }

    /// The pid of the daemon of this home, from `holdcall daemon status`.
    pub(crate) fn daemon_pid(&self) -> i32 {
        let s = self.ok(&["daemon", "status"]);
        let rest = s.split("pid ").nth(1).expect("daemon status names a pid");
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Starts a relay in front of the demo server; `record` receives every line the server gets.
    pub(crate) fn relay(&self, connector: &str) -> Relay {
        self.relay_with(connector, &[])
    }

    /// A relay whose demo server gets `server_args` too (e.g. `--stubborn`).
    pub(crate) fn relay_with(&self, connector: &str, server_args: &[&str]) -> Relay {
        let record = self.new_record(connector);
        let mut cmd = self.demo_relay_cmd(connector, &record);
        cmd.args(server_args);
        spawn_relay(cmd, record)
    }

    /// `holdcall serve --connector CONNECTOR --client test -- <demo server> --record RECORD`,
    /// not yet started: for a test that gives it its own environment or stdio. Arguments added
    /// to it go to the demo server.
    pub(crate) fn demo_relay_cmd(&self, connector: &str, record: &Path) -> Command {
        let mut cmd = self.cmd(&["serve", "--connector", connector, "--client", "test", "--"]);
        cmd.arg(Env::bin())
            .arg("demo-server")
            .arg("--record")
            .arg(record);
        cmd
    }

    /// A relay in front of the fixture server built from `examples/{name}.rs`, which appends
    /// what it reads to the relay's `record` and what it writes to `record.out`.
    pub(crate) fn relay_fixture(&self, connector: &str, name: &str) -> Relay {
        let record = self.new_record(connector);
        let program = fixture(name);
        self.relay_to(
            connector,
            &[
                program.to_str().unwrap(),
                "--record",
                record.to_str().unwrap(),
            ],
            record.clone(),
        )
    }

    /// A fresh, empty file for a demo or fixture server's `--record`, named after `connector`.
    pub(crate) fn new_record(&self, connector: &str) -> PathBuf {
        let record = self
            .dir
            .path()
            .join(format!("record-{connector}-{}.log", rand_suffix()));
        std::fs::write(&record, b"").unwrap();
        record
    }

    /// A relay in front of the demo server, started by `wrapper` (a program that runs its
    /// arguments after the first as a child and waits, like `timeout 300 CMD…`), so the relay's
    /// parent process runs `wrapper`'s executable: how a test plays an MCP client program.
    pub(crate) fn relay_under(&self, wrapper: &Path, connector: &str) -> Relay {
        let record = self.new_record(connector);
        let bin = Env::bin();
        let mut c = Command::new(wrapper);
        c.arg("300")
            .arg(&bin)
            .args(["serve", "--connector", connector, "--client", "test", "--"])
            .arg(&bin)
            .arg("demo-server")
            .arg("--record")
            .arg(&record)
            .env("HOLDCALL_HOME", self.home())
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("HOME", self.user_home())
            .env_remove("HOLDCALL_LOG")
            .env_remove("DISPLAY");
        match self.bus.get() {
            Some(address) => c.env("DBUS_SESSION_BUS_ADDRESS", address),
            None => c.env_remove("DBUS_SESSION_BUS_ADDRESS"),
        };
        spawn_relay(c, record)
    }

    /// `holdcall serve --connector demo -- /bin/sh -c SCRIPT`, not yet started.
    pub(crate) fn serve_shell(&self, script: &str) -> Command {
        self.cmd(&[
            "serve",
            "--connector",
            "demo",
            "--",
            "/bin/sh",
            "-c",
            script,
        ])
    }

    /// Starts `holdcall serve` in front of the server command `server`.
    fn relay_to(&self, connector: &str, server: &[&str], record: PathBuf) -> Relay {
        let mut args = vec!["serve", "--connector", connector, "--client", "test", "--"];
        args.extend_from_slice(server);
        spawn_relay(self.cmd(&args), record)
    }
}

/// Spawns a relay command with piped stdio and collects its output.
pub(crate) fn spawn_relay(mut cmd: Command, record: PathBuf) -> Relay {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let lines = lines_of(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let (etx, erx) = channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut s);
        let _ = etx.send(s);
    });
    Relay {
        child,
        stdin,
        lines,
        stderr: Some(erx),
        record,
    }
}

/// A fixture server from `examples/` (see `examples/fixture_*.rs`), built on first use in this
/// test process. `cargo test` builds examples, but `cargo test --all-targets` builds them only
/// as test harnesses, so the tests ask cargo for the plain binary themselves (a no-op when it
/// is up to date), in the target directory and profile of the running test.
pub(crate) fn fixture(name: &str) -> PathBuf {
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap(); // <target>/<profile>
    let target_dir = profile_dir.parent().unwrap();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let path = profile_dir.join("examples").join(name);
    let mut built = BUILT.get_or_init(Mutex::default).lock().unwrap();
    if !built.iter().any(|b| b == name) {
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--offline", "--example", name])
            .args(["--profile", profile])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo build --example {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        built.push(name.to_string());
    }
    assert!(path.exists(), "{} is missing", path.display());
    path
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.cmd(&["daemon", "stop"]).output();
    }
}

/// True while `pid` is a live process: a zombie (state Z, or X while it is reaped) is not, and
/// has closed its files.
pub(crate) fn alive(pid: impl Into<i64>) -> bool {
    let pid = pid.into();
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Sends `signal` to the process `pid`, which the test started itself.
pub(crate) fn signal_pid(pid: i32, signal: nix::sys::signal::Signal) -> nix::Result<()> {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
}

/// SIGKILLs the helper processes a test started (by pid) when it ends, passing or not, so none
/// outlives it holding the test runner's pipes.
pub(crate) struct KillOnDrop(pub Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &p in &self.0 {
            let _ = signal_pid(p, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Sends one signal to one process the test started (by pid) when the test ends, passing or
/// not: SIGCONT to a daemon it stopped, SIGTERM to a daemon it cannot reach through its home.
pub(crate) struct SignalOnDrop(pub i32, pub nix::sys::signal::Signal);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        let _ = signal_pid(self.0, self.1);
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// Reads lines (each with its newline, as raw bytes) on a thread, so tests can wait with a limit.
pub(crate) fn lines_of(r: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

pub(crate) struct Relay {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: Receiver<Vec<u8>>,
    pub stderr: Option<Receiver<String>>,
    pub record: PathBuf,
}

pub(crate) const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

impl Relay {
    /// Writes one line (a newline is added unless present).
    pub(crate) fn send(&mut self, line: &[u8]) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(line).unwrap();
        if !line.ends_with(b"\n") {
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
    }

    /// The next line the relay wrote to stdout, with its newline.
    pub(crate) fn recv(&mut self) -> Vec<u8> {
        self.lines
            .recv_timeout(PATIENCE)
            .expect("the relay answered within the patience limit")
    }

    pub(crate) fn recv_str(&mut self) -> String {
        String::from_utf8(self.recv()).unwrap()
    }

    pub(crate) fn recv_json(&mut self) -> serde_json::Value {
        serde_json::from_slice(&self.recv()).unwrap()
    }

    /// initialize + initialized, as a client starts.
    pub(crate) fn handshake(&mut self) {
        self.send(INIT.as_bytes());
        let r = self.recv_json();
        assert_eq!(r["id"], 0, "{r}");
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// Sends a ping with `id` and waits for its answer. Since the relay handles client lines in
    /// order, everything sent before it has been forwarded, refused or held for a person once
    /// the answer arrives.
    /// Returns the lines that arrived before the ping's answer.
    pub(crate) fn barrier(&mut self, id: u64) -> Vec<String> {
        self.send(format!(r#"{{"jsonrpc":"2.0","id":"barrier-{id}","method":"ping"}}"#).as_bytes());
        let mut before = Vec::new();
        loop {
            let l = self.recv_str();
            if l.contains(&format!("\"barrier-{id}\"")) {
                return before;
            }
            before.push(l);
        }
    }

    /// Every line the server received so far, with newlines.
    pub(crate) fn recorded(&self) -> Vec<Vec<u8>> {
        split_lines(&std::fs::read(&self.record).unwrap())
    }

    /// Whether any line the server received so far contains `needle` (not empty).
    pub(crate) fn server_got(&self, needle: &[u8]) -> bool {
        self.recorded()
            .iter()
            .any(|l| l.windows(needle.len()).any(|w| w == needle))
    }

    /// How many lines the server got that name `tools/call`: the calls that were forwarded.
    pub(crate) fn forwarded_calls(&self) -> usize {
        self.recorded()
            .iter()
            .filter(|l| l.windows(10).any(|w| w == b"tools/call"))
            .count()
    }

    /// Every line a fixture server wrote so far, with newlines (fixtures only).
    pub(crate) fn server_wrote(&self) -> Vec<Vec<u8>> {
        let mut out = self.record.clone().into_os_string();
        out.push(".out");
        split_lines(&std::fs::read(out).unwrap_or_default())
    }

    /// Closes the relay's stdin and waits for it to exit; returns its stderr.
    pub(crate) fn finish(mut self) -> String {
        self.stdin = None;
        let status = self.child.wait().unwrap();
        assert!(status.success(), "relay exited with {status}");
        self.stderr
            .take()
            .unwrap()
            .recv_timeout(PATIENCE)
            .unwrap_or_default()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn split_lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

pub(crate) fn call(id: &str, tool: &str, args: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
    )
    .into_bytes()
}

pub(crate) fn is_refusal(v: &serde_json::Value) -> bool {
    v["result"]["isError"] == true
        && v["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Holdcall") && t.contains("retry"))
}

pub(crate) fn journal_rows(db: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(Env::bin())
        .args(["log", "--json", "--limit", "100000"])
        .env("HOLDCALL_HOME", db.parent().unwrap())
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The answer to the one call just sent through `r`. A call an `ask` rule holds for a person
/// has no answer until someone decides: it is found with `holdcall approve --json` and
/// rejected, as a person would, so its refusal comes back.
pub(crate) fn answer_rejecting_held(env: &Env, r: &mut Relay) -> serde_json::Value {
    let before = r.barrier(u64::MAX);
    if let Some(line) = before.first() {
        return serde_json::from_str(line).unwrap();
    }
    let held = env.ok(&["approve", "--json"]);
    let call: serde_json::Value =
        serde_json::from_str(held.lines().next().expect("the call is held")).unwrap();
    env.ok(&["reject", call["id"].as_str().unwrap()]);
    r.recv_json()
}

/// A private D-Bus session bus and a real gnome-keyring-daemon (the Secret Service) on it, both
/// living in a temporary directory of their own and killed when this is dropped. The bus has no
/// service directories, so nothing on it is ever started on demand (no keyring of the
/// developer's is ever reached or spawned).
pub(crate) struct SecretService {
    pub address: String,
    dir: tempfile::TempDir,
    bus: Child,
    keyring: Option<Child>,
}

impl SecretService {
    pub(crate) fn start() -> SecretService {
        let dir = tempfile::Builder::new().prefix("hcss").tempdir().unwrap();
        for d in ["home", "data", "run"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("run"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                dir.path().join("bus").display()
            ),
        )
        .unwrap();
        let mut bus = die_with_test(Command::new("dbus-daemon"))
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .env("HOME", dir.path().join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // It complains that it cannot raise its file limit when not root-less; harmless.
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (Debian package dbus-daemon; tools/test installs it)");
        let lines = lines_of(bus.stdout.take().unwrap());
        let address = match lines.recv_timeout(PATIENCE) {
            Ok(l) => String::from_utf8(l).unwrap().trim().to_string(),
            Err(_) => {
                let _ = bus.kill();
                let _ = bus.wait();
                panic!("dbus-daemon printed no address within {PATIENCE:?}");
            }
        };
        let mut ss = SecretService {
            address,
            dir,
            bus,
            keyring: None,
        };
        // A non-empty password on stdin unlocks (creating) the login keyring; an empty one would
        // make gnome-keyring ask a graphical prompt, which fails here.
        let mut keyring = ss
            .env(die_with_test(Command::new("gnome-keyring-daemon")))
            .args(["--foreground", "--components=secrets", "--unlock"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "gnome-keyring-daemon runs (Debian package gnome-keyring; tools/test installs it)",
            );
        let mut stdin = keyring.stdin.take().unwrap();
        stdin.write_all(b"holdcall-test").unwrap();
        drop(stdin);
        ss.keyring = Some(keyring);
        // Ready when the Secret Service's name is owned on the bus: gdbus blocks until then.
        let waited = ss
            .env(Command::new("gdbus"))
            .args(["wait", "--session", "--timeout"])
            .arg(PATIENCE.as_secs().to_string())
            .arg("org.freedesktop.secrets")
            .stdin(Stdio::null())
            .output()
            .expect("gdbus runs (Debian package libglib2.0-bin; tools/test installs it)");
        assert!(
            waited.status.success(),
            "the Secret Service did not appear on the private bus within {PATIENCE:?}: {}",
            String::from_utf8_lossy(&waited.stderr)
        );
        ss
    }

    /// `cmd` set up to talk to this bus only, with its home and data inside the temp directory.
    pub(crate) fn env(&self, mut cmd: Command) -> Command {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env_remove("DISPLAY");
        cmd
    }

    /// The accounts (`NAME#SECRET_ID`) holding a secret under `service`, as secret-tool finds
    /// them.
    pub(crate) fn accounts(&self, service: &str) -> Vec<String> {
        let out = self
            .env(Command::new("secret-tool"))
            .args(["search", "--all", "service", service])
            .stdin(Stdio::null())
            .output()
            .expect("secret-tool runs (Debian package libsecret-tools)");
        // secret-tool prints an item's attributes on stderr (its label and secret on stdout).
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter_map(|l| l.strip_prefix("attribute.username = "))
            .map(str::to_string)
            .collect()
    }

    /// The secret stored for `account` under `service`, as secret-tool reads it (None if
    /// there is none).
    pub(crate) fn lookup(&self, service: &str, connector: &str) -> Option<String> {
        let out = self
            .env(Command::new("secret-tool"))
            .args(["lookup", "service", service, "username", connector])
            .stdin(Stdio::null())
            .output()
            .expect("secret-tool runs (Debian package libsecret-tools)");
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap())
    }

    /// Deletes the secret of `connector` behind Holdcall's back.
    pub(crate) fn clear(&self, service: &str, connector: &str) {
        let out = self
            .env(Command::new("secret-tool"))
            .args(["clear", "service", service, "username", connector])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// Stops the keyring (the bus stays): the Secret Service is gone.
    pub(crate) fn stop_keyring(&mut self) {
        if let Some(mut k) = self.keyring.take() {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        self.stop_keyring();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

/// `cmd` receives SIGKILL when the test thread that started it ends, or the test process dies
/// by a signal (when `Drop` never runs), so no bus or keyring outlives its test.
#[allow(unsafe_code)]
fn die_with_test(mut cmd: Command) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec; prctl is async-signal-safe and the closure
    // allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    cmd
}

/// The service name Holdcall stores a home's secrets under.
pub(crate) fn service_of(env: &Env) -> String {
    holdcall::vault::service_name(&env.home())
}
