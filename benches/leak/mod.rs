//! The secret-leak check's cost (issue 17): 512 KiB answers of the demo server's `big` tool
//! through a relay whose server was given an injected secret (so every line is scanned for it,
//! `relay::leak`), beside the same answers through a relay of an uncredentialed connector (plain
//! passthrough) and direct from the server, in the same run, same daemon, same calls.
//!
//! The credentialed connector needs a Secret Service: a private `dbus-daemon` and a
//! `gnome-keyring-daemon` on it, in a temporary directory, stopped by pid when the section
//! ends (as the integration tests do; never the user's own bus). A folder module for the
//! reason `holdmap_ports` gives.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::{
    Bench, Durability, Effect, FRAME_BYTES, FRAMES, INITIALIZE, Peer, Row, ns, rule, stats,
};

/// The secret injected into the credentialed connector's server (the length of a typical API
/// token); never in any answer, so every answer is scanned whole and passed.
const SECRET: &str = "hc-bench-leak-check-token-0123456789abcdef";

/// A private session bus with a Secret Service on it; both stopped by pid on drop.
struct SecretService {
    address: String,
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl SecretService {
    fn start() -> SecretService {
        let dir = tempfile::Builder::new().prefix("hcbss").tempdir().unwrap();
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
        let mut bus = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .env("HOME", dir.path().join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (Debian package dbus-daemon)");
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let mut ss = SecretService {
            address: address.trim().to_string(),
            dir,
            children: vec![bus],
        };
        let mut keyring = ss
            .env(Command::new("gnome-keyring-daemon"))
            .args(["--foreground", "--components=secrets", "--unlock"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon runs (Debian package gnome-keyring)");
        let mut stdin = keyring.stdin.take().unwrap();
        stdin.write_all(b"holdcall-bench").unwrap();
        drop(stdin);
        ss.children.push(keyring);
        let waited = ss
            .env(Command::new("gdbus"))
            .args([
                "wait",
                "--session",
                "--timeout",
                "20",
                "org.freedesktop.secrets",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("gdbus runs (Debian package libglib2.0-bin)");
        assert!(waited.status.success(), "no Secret Service on the bus");
        ss
    }

    fn env(&self, mut cmd: Command) -> Command {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env_remove("DISPLAY");
        cmd
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What `big` fills its answer with in the escaped case: a quote every 14 bytes, which the
/// answer carries as `\"`, so the scanner also makes and scans the JSON-unescaped view.
const ESCAPED_FILL: &str = "prose, quoted\"";

/// `frames` calls of `big` answering 512 KiB (of `x`, or of `fill` repeated), each timed from
/// writing the call to reading the whole answer (µs); the answer must be the text, not a
/// refusal or a withheld error.
fn time_big(p: &mut Peer, frames: usize, fill: Option<&str>) -> super::Stats {
    let kib = FRAME_BYTES / 1024;
    let fill = fill
        .map(|f| format!(",\"fill\":{}", serde_json::to_string(f).unwrap()))
        .unwrap_or_default();
    p.send(INITIALIZE);
    p.recv();
    let mut out = Vec::with_capacity(frames);
    for i in 0..=frames {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{\"kib\":{kib}{fill}}}}}}}\n",
            i + 1
        );
        let t0 = Instant::now();
        p.send(line.as_bytes());
        let answer = p.recv();
        let took = ns(t0.elapsed());
        assert!(
            answer.len() > FRAME_BYTES,
            "a refusal or an error instead of the big answer: {}",
            String::from_utf8_lossy(&answer[..answer.len().min(300)])
        );
        // The first call warms the caches and the buffers; it is not timed.
        if i > 0 {
            out.push(took);
        }
    }
    stats(&mut out, 1e3)
}

pub(super) fn leak_check(b: &Bench, rows: &mut Vec<Row>) {
    eprintln!("bench: 512 KiB answers with the secret-leak check");
    let s = "secret-leak check, 512 KiB answers, durability=process";
    let ss = SecretService::start();
    let home = b.home_with_daemon(
        "leak",
        Durability::Process,
        &[rule(Effect::Allow, None, None, None)],
    );
    // The daemon reads the secret store: restart it on the private bus.
    b.stop(&home);
    let with_bus = |args: &[&str]| ss.env(b.cmd(&home, args));
    let out = with_bus(&["daemon", "start"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut set = with_bus(&["connector", "set", "leaky", "--env", "BENCH_TOKEN", "--"]);
    set.arg(&b.holdcall)
        .arg("demo-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = set.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{SECRET}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "connector set: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let frames = b.n(FRAMES);
    let run = |c: Command, fill: Option<&str>| {
        let (mut p, _) = Peer::spawn(c);
        let d = time_big(&mut p, frames, fill);
        p.finish();
        d
    };
    let plain_cmd = || {
        let mut c = with_bus(&["serve", "--connector", "plain", "--client", "bench", "--"]);
        c.arg(&b.holdcall).arg("demo-server");
        c
    };
    let checked_cmd = || with_bus(&["serve", "--connector", "leaky", "--client", "bench"]);
    let direct = run(with_bus(&["demo-server"]), None);
    // Plain and checked alternate (A/B/A/B), so a drift of the machine shows as a difference
    // between the two plain runs rather than as the check's cost.
    let plain = run(plain_cmd(), None);
    let checked = run(checked_cmd(), None);
    let plain_again = run(plain_cmd(), None);
    let checked_again = run(checked_cmd(), None);
    let plain_escaped = run(plain_cmd(), Some(ESCAPED_FILL));
    let checked_escaped = run(checked_cmd(), Some(ESCAPED_FILL));
    // No answer carried the secret, so none was withheld (`time_big` checks each is the text).
    b.stop(&home);
    drop(ss);

    rows.push(
        Row::latency(
            s,
            format!("tools/call big, direct to the server ({frames} calls)"),
            "ms",
            super::scale(direct, 1e-3),
        )
        .note("the floor: the demo server alone"),
    );
    let pair = |what: &str, plain: super::Stats, checked: super::Stats, rows: &mut Vec<Row>| {
        rows.push(
            Row::latency(
                s,
                format!("{what}: plain passthrough ({frames} calls)"),
                "ms",
                super::scale(plain, 1e-3),
            )
            .floor("the same calls direct, p99", direct.p99 / 1e3),
        );
        rows.push(
            Row::latency(
                s,
                format!("{what}: leak check on ({frames} calls)"),
                "ms",
                super::scale(checked, 1e-3),
            )
            .floor("plain passthrough, p99", plain.p99 / 1e3)
            .note(format!(
                "a credentialed connector, every answer scanned and passed; added p50 {:.3} ms, p50 ratio checked/plain {:.2}",
                (checked.p50 - plain.p50) / 1e3,
                checked.p50 / plain.p50
            )),
        );
    };
    pair("512 KiB of x, run 1", plain, checked, rows);
    pair("512 KiB of x, run 2", plain_again, checked_again, rows);
    pair(
        "512 KiB with a \\\" every 15 bytes",
        plain_escaped,
        checked_escaped,
        rows,
    );
}
