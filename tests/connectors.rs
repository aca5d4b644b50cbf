//! Connectors with a credential, against a real Secret Service (gnome-keyring on a private
//! D-Bus session of the test's own): the secret goes in through stdin, lives only in the store,
//! reaches only the registered command's environment, and a relay that cannot have it starts
//! no server.

use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// A fresh environment attached to a fresh private Secret Service.
pub(crate) fn setup() -> (Env, SecretService) {
    let ss = SecretService::start();
    let env = Env::new();
    env.attach(&ss);
    (env, ss)
}

/// The credential store account of connector `name`'s registration (`NAME#SECRET_ID`).
fn account_of(env: &Env, name: &str) -> String {
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["connector", "list", "--json"])).unwrap();
    let c = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .expect("the connector is registered");
    format!("{name}#{}", c["secret_id"].as_str().unwrap())
}

/// The secret of connector `name`'s registration, read straight from the store.
fn secret_of(env: &Env, ss: &SecretService, name: &str) -> Option<String> {
    ss.lookup(&service_of(env), &account_of(env, name))
}

/// A canary nobody else could print by chance.
pub(crate) fn canary() -> String {
    format!("hc-canary-{}", holdcall::ids::random_hex(12).unwrap())
}

/// Runs `holdcall connector set NAME --env KEY [extra...] -- command...` with `secret` (and a
/// newline) on stdin, and `path` as PATH when given.
pub(crate) fn set(
    env: &Env,
    name: &str,
    key: &str,
    extra: &[&str],
    command: &[&str],
    secret: &str,
) -> Output {
    set_with_path(env, name, key, extra, command, secret, None)
}

fn set_with_path(
    env: &Env,
    name: &str,
    key: &str,
    extra: &[&str],
    command: &[&str],
    secret: &str,
    path: Option<&std::ffi::OsStr>,
) -> Output {
    let mut args = vec!["connector", "set", name, "--env", key];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let mut cmd = env.cmd(&args);
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The CLI may refuse before it reads anything: a closed pipe is then not our failure.
    let _ = stdin.write_all(format!("{secret}\n").as_bytes());
    drop(stdin);
    child.wait_with_output().unwrap()
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A server script: records its pid and its whole environment next to itself, then becomes the
/// demo server (recording every line it receives).
struct Script {
    path: PathBuf,
}

impl Script {
    fn new(dir: &Path, name: &str) -> Script {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        let body = format!(
            "#!/bin/sh\necho $$ > '{p}.pid'\nenv > '{p}.env'\npwd > '{p}.cwd'\nexec '{bin}' demo-server --record '{p}.record'\n",
            p = path.display(),
            bin = Env::bin().display()
        );
        std::fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Script { path }
    }
    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
    fn file(&self, ext: &str) -> PathBuf {
        PathBuf::from(format!("{}.{ext}", self.path.display()))
    }
    fn ran(&self) -> bool {
        self.file("pid").exists()
    }
    fn env_seen(&self) -> String {
        std::fs::read_to_string(self.file("env")).unwrap()
    }
    fn pid(&self) -> i32 {
        std::fs::read_to_string(self.file("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

/// Starts `holdcall serve --connector NAME -- given...` with `vars` added to its environment.
pub(crate) fn relay(
    env: &Env,
    connector: &str,
    given: &[&str],
    vars: &[(&str, &str)],
    record: PathBuf,
) -> Relay {
    let mut args = vec!["serve", "--connector", connector, "--client", "test", "--"];
    args.extend_from_slice(given);
    let mut cmd = env.cmd(&args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    spawn_relay(cmd, record)
}

/// A relay that must refuse to start: exit 1, nothing on stdout; returns its stderr.
fn relay_refuses(env: &Env, connector: &str, given: &[&str]) -> String {
    let mut args = vec!["serve", "--connector", connector, "--"];
    args.extend_from_slice(given);
    let out = env.run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    String::from_utf8(out.stderr).unwrap()
}

fn connector_changes(env: &Env) -> Vec<serde_json::Value> {
    journal_rows(&env.db())
        .into_iter()
        .filter(|r| r["kind"] == "connector.change")
        .collect()
}

#[test]
fn a_connector_is_set_from_stdin_listed_without_its_secret_and_removed() {
    let (env, ss) = setup();
    let secret = canary();
    let out = set(
        &env,
        "gh",
        "GITHUB_TOKEN",
        &["--pass-env", "GITHUB_ORG"],
        &["env", "-0"],
        &secret,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(&secret));
    assert!(text(&out).contains("Secret Service"), "{}", text(&out));
    // The secret is in the store, under this home's service name and the account of this
    // registration (the connector's name and a fresh id).
    assert_eq!(secret_of(&env, &ss, "gh").as_deref(), Some(secret.as_str()));

    let listed = env.ok(&["connector", "list"]);
    assert!(
        listed.contains("gh") && listed.contains("GITHUB_TOKEN"),
        "{listed}"
    );
    assert!(!listed.contains(&secret));
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["connector", "list", "--json"])).unwrap();
    let c = &json[0];
    assert_eq!(c["name"], "gh");
    assert_eq!(c["env_key"], "GITHUB_TOKEN");
    // The command was resolved through PATH at set time, to an absolute path.
    let program = c["command"][0].as_str().unwrap();
    assert!(
        program.starts_with('/') && program.ends_with("/env"),
        "{program}"
    );
    assert_eq!(c["command"][1], "-0");
    assert_eq!(c["pass_env"], serde_json::json!(["GITHUB_ORG"]));
    assert!(!json.to_string().contains(&secret));

    let removed = env.ok(&["connector", "remove", "gh"]);
    assert!(removed.contains("removed"), "{removed}");
    assert!(ss.accounts(&service_of(&env)).is_empty());
    assert_eq!(
        env.ok(&["connector", "list", "--json"]).trim(),
        "[]",
        "nothing is listed after removal"
    );
    let changes = connector_changes(&env);
    assert_eq!(changes.len(), 2);
    assert!(changes.iter().all(|c| c["connector"] == "gh"));
    assert!(!serde_json::to_string(&changes).unwrap().contains(&secret));
    env.ok(&["verify"]);
}

#[test]
fn a_registration_the_journal_cannot_record_leaves_no_secret_in_the_store() {
    let (env, ss) = setup();
    env.ok(&["daemon", "start"]);
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_more BEFORE INSERT ON journal BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &["env"], "tok-0");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("secret was deleted again"),
        "{}",
        text(&out)
    );
    assert!(
        ss.accounts(&service_of(&env)).is_empty(),
        "the secret outlived its registration"
    );
    db.execute_batch("DROP TRIGGER no_more;").unwrap();
    assert_eq!(env.ok(&["connector", "list", "--json"]).trim(), "[]");
    env.ok(&["verify"]);
}

#[test]
fn the_secret_is_never_taken_from_the_command_line() {
    let (env, ss) = setup();
    let out = set(&env, "gh", "GITHUB_TOKEN=abc123", &[], &["env"], "s");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("never from the command line"),
        "{}",
        text(&out)
    );
    // There is no option that takes it either.
    let out = env.run(&[
        "connector",
        "set",
        "gh",
        "--env",
        "K",
        "--secret",
        "abc",
        "--",
        "env",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(ss.accounts(&service_of(&env)).is_empty());
}

/// Runs `holdcall connector set gh --env GITHUB_TOKEN -- env` on a real terminal (python3's
/// pty module): once the prompt shows, `keys` are typed. Returns a report whose first line is
/// `exit=N typed=0|1 echoed=0|1 echo=0|1` (echoed: the typed text showed on the terminal; echo:
/// the terminal echoes again afterwards), then everything the terminal showed, with the typed
/// text replaced by `<TYPED>`.
fn at_a_terminal(env: &Env, ss: &SecretService, keys: &[u8]) -> String {
    let script = r#"
import os, pty, select, sys, termios
keys = bytes.fromhex(sys.argv[1])
text = bytes(b for b in keys if b >= 0x20)
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
shown, typed = b"", False
while True:
    ready, _, _ = select.select([fd], [], [], 20)
    if not ready:
        os.kill(pid, 9)
        break
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    shown += chunk
    if not typed and b"Secret: " in shown:
        os.write(fd, keys)
        typed = True
echo = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(b"exit=%d typed=%d echoed=%d echo=%d\n" % (os.waitstatus_to_exitcode(status), typed, text in shown, echo))
sys.stdout.buffer.write(shown.replace(text, b"<TYPED>"))
"#;
    let hex: String = keys.iter().map(|b| format!("{b:02x}")).collect();
    let out = Command::new("python3")
        .args(["-c", script, &hex, Env::bin().to_str().unwrap()])
        .args([
            "connector",
            "set",
            "gh",
            "--env",
            "GITHUB_TOKEN",
            "--",
            "env",
        ])
        .env("HOLDCALL_HOME", env.home())
        .env("XDG_RUNTIME_DIR", env.dir.path().join("run"))
        .env("DBUS_SESSION_BUS_ADDRESS", &ss.address)
        .env_remove("DISPLAY")
        .env_remove("HOLDCALL_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn at_a_terminal_the_secret_is_typed_at_a_prompt_that_does_not_echo_it() {
    let (env, ss) = setup();
    let secret = canary();
    let report = at_a_terminal(&env, &ss, format!("{secret}\n").as_bytes());
    assert!(report.starts_with("exit=0 typed=1 echoed=0 "), "{report}");
    assert!(report.contains("Secret: "), "{report}");
    assert!(report.contains("connector gh registered"), "{report}");
    assert_eq!(secret_of(&env, &ss, "gh").as_deref(), Some(secret.as_str()));
}

#[test]
fn ctrl_c_at_the_prompt_stores_nothing_and_leaves_the_terminal_echoing() {
    let (env, ss) = setup();
    // This time the person types half a secret, then Ctrl-C.
    let report = at_a_terminal(&env, &ss, b"half-a-sec\x03");
    assert!(
        report.starts_with("exit=1 typed=1 echoed=0 echo=1\n"),
        "{report}"
    );
    assert!(report.contains("interrupted at the prompt"), "{report}");
    assert!(ss.accounts(&service_of(&env)).is_empty());
}

#[test]
fn env_keys_the_loader_reads_and_path_are_refused_before_anything_is_stored() {
    let (env, ss) = setup();
    for key in ["LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "PATH", "1X", "A-B"] {
        let out = set(&env, "gh", key, &[], &["env"], "s");
        assert_eq!(out.status.code(), Some(1), "{key}: {}", text(&out));
    }
    // Nor may --pass-env let through what makes an interpreter load code, or a pinned variable.
    for pass in [
        "NODE_OPTIONS",
        "PYTHONPATH",
        "BASH_ENV",
        "npm_config_userconfig",
        "HOME",
    ] {
        let out = set(&env, "gh", "K", &["--pass-env", pass], &["env"], "s");
        assert_eq!(out.status.code(), Some(1), "{pass}: {}", text(&out));
    }
    let out = set(&env, "gh", "K", &[], &["no-such-program-hc"], "s");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("not found"), "{}", text(&out));
    let out = set(&env, "gh", "K", &[], &["env"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("empty"), "{}", text(&out));
    assert!(ss.accounts(&service_of(&env)).is_empty());
    assert!(!env.db().exists() || connector_changes(&env).is_empty());
}

#[test]
fn with_no_credential_store_connector_set_fails_clearly_and_stores_nothing() {
    let env = Env::new(); // no bus attached: DBUS_SESSION_BUS_ADDRESS is removed
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &["env"], "s3cr3t-value");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("no credential store"), "{said}");
    assert!(said.contains("DBUS_SESSION_BUS_ADDRESS"), "{said}");
    assert!(said.contains("nothing was registered"), "{said}");
    assert!(!said.contains("s3cr3t-value"));
    assert_eq!(env.ok(&["connector", "list", "--json"]).trim(), "[]");
    assert!(connector_changes(&env).is_empty());
}

#[test]
fn a_registered_connector_whose_store_vanished_starts_no_server_and_says_why() {
    let (env, mut ss) = setup();
    let script = Script::new(&env.dir.path().join("bin"), "srv");
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &[script.arg()], "tok-1");
    assert!(out.status.success(), "{}", text(&out));
    ss.stop_keyring();
    let stderr = relay_refuses(&env, "gh", &[]);
    assert!(
        stderr.contains("not starting the server of connector gh"),
        "{stderr}"
    );
    assert!(stderr.contains("cannot be read"), "{stderr}");
    assert!(stderr.contains("help:"), "{stderr}");
    assert!(
        !script.ran(),
        "the registered server must not run without its secret"
    );
    // The journal records no session that did not run.
    assert!(
        !journal_rows(&env.db())
            .iter()
            .any(|r| r["kind"] == "session.start")
    );
}

#[test]
fn a_secret_removed_behind_holdcalls_back_makes_the_relay_refuse_with_the_reason() {
    let (env, ss) = setup();
    let script = Script::new(&env.dir.path().join("bin"), "srv");
    let given = Script::new(&env.dir.path().join("given"), "srv");
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &[script.arg()], "tok-2");
    assert!(out.status.success(), "{}", text(&out));
    ss.clear(&service_of(&env), &account_of(&env, "gh"));
    let stderr = relay_refuses(&env, "gh", &[given.arg()]);
    assert!(
        stderr.contains("missing from the Secret Service"),
        "{stderr}"
    );
    assert!(stderr.contains("holdcall connector set gh"), "{stderr}");
    assert!(!script.ran() && !given.ran(), "no server runs");
}

#[test]
fn an_unregistered_connector_runs_the_command_given_and_every_call_is_still_decided() {
    let (env, _ss) = setup();
    env.ok(&["policy", "deny", "delete_file"]);
    let given = Script::new(&env.dir.path().join("given"), "srv");
    let mut r = relay(&env, "plain", &[given.arg()], &[], given.file("record"));
    r.handshake();
    r.send(&call("1", "delete_file", "{}"));
    assert!(is_refusal(&r.recv_json()));
    r.send(&call("2", "echo", r#"{"text":"hi"}"#));
    assert!(!is_refusal(&r.recv_json()));
    let stderr = r.finish();
    assert!(given.ran());
    assert!(!stderr.contains("registered"), "{stderr}");
}

#[test]
fn a_registered_connector_runs_its_registered_command_not_the_one_given() {
    let (env, _ss) = setup();
    let registered = Script::new(&env.dir.path().join("bin"), "srv");
    let given = Script::new(&env.dir.path().join("given"), "srv");
    let out = set(
        &env,
        "gh",
        "GITHUB_TOKEN",
        &[],
        &[registered.arg()],
        "tok-3",
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut r = relay(&env, "gh", &[given.arg()], &[], registered.file("record"));
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"hi"}"#));
    assert!(!is_refusal(&r.recv_json()));
    let stderr = r.finish();
    assert!(registered.ran());
    assert!(!given.ran(), "the command after `--` is ignored");
    assert!(
        stderr.contains("connector gh is registered: running its registered command"),
        "{stderr}"
    );
    assert!(registered.env_seen().contains("GITHUB_TOKEN=tok-3\n"));
    let start = journal_rows(&env.db())
        .into_iter()
        .find(|r| r["kind"] == "session.start")
        .unwrap();
    let detail = start["detail"].as_str().unwrap();
    assert!(detail.contains("\"credentialed\":true"), "{detail}");
    assert!(detail.contains(registered.arg()), "{detail}");
    assert!(!detail.contains("tok-3"));
}

#[test]
fn a_program_earlier_on_path_with_the_registered_name_is_not_run() {
    let (env, _ss) = setup();
    let real_dir = env.dir.path().join("real");
    let real = Script::new(&real_dir, "mcp-srv");
    let path = std::env::join_paths([real_dir.as_path(), Path::new("/usr/bin"), Path::new("/bin")])
        .unwrap();
    let out = set_with_path(
        &env,
        "gh",
        "GITHUB_TOKEN",
        &[],
        &["mcp-srv"],
        "tok-4",
        Some(&path),
    );
    assert!(out.status.success(), "{}", text(&out));
    // Later, someone puts a program of the same name first on the relay's PATH.
    let evil_dir = env.dir.path().join("evil");
    let evil = Script::new(&evil_dir, "mcp-srv");
    let relay_path = format!(
        "{}:{}:/usr/bin:/bin",
        evil_dir.display(),
        real_dir.display()
    );
    let mut r = relay(
        &env,
        "gh",
        &["mcp-srv"],
        &[("PATH", &relay_path)],
        real.file("record"),
    );
    r.handshake();
    r.finish();
    assert!(real.ran(), "the registered program runs");
    assert!(!evil.ran(), "the program earlier on PATH must not run");
}

#[test]
fn the_server_sees_the_allow_list_its_pass_env_names_and_its_secret_and_nothing_else() {
    let (env, _ss) = setup();
    let script = Script::new(&env.dir.path().join("bin"), "srv");
    let out = set(
        &env,
        "gh",
        "GITHUB_TOKEN",
        &["--pass-env", "HC_PASSED"],
        &[script.arg()],
        "tok-5",
    );
    assert!(out.status.success(), "{}", text(&out));
    let vars = [
        ("HC_PASSED", "yes"),
        ("HC_OUTSIDE", "no"),
        ("AWS_SECRET_ACCESS_KEY", "relay-env-only"),
        ("LD_PRELOAD", ""),
        ("GITHUB_TOKEN", "from-the-relay-env"),
        ("LC_TIME", "C"),
    ];
    let mut r = relay(&env, "gh", &[], &vars, script.file("record"));
    r.handshake();
    r.finish();
    let seen = script.env_seen();
    assert!(seen.contains("HC_PASSED=yes\n"), "{seen}");
    assert!(seen.contains("LC_TIME=C\n"), "{seen}");
    assert!(seen.contains("GITHUB_TOKEN=tok-5\n"), "{seen}");
    for absent in [
        "HC_OUTSIDE",
        "AWS_SECRET_ACCESS_KEY",
        "LD_PRELOAD",
        "HOLDCALL_HOME",
        "from-the-relay-env",
    ] {
        assert!(
            !seen.contains(absent),
            "{absent} reached the server: {seen}"
        );
    }
}

#[test]
fn the_server_runs_where_connector_set_ran_with_its_path_and_home_whatever_the_relays_are() {
    // A client starts servers in a project directory and may set PATH or HOME for them: a
    // launcher like npx would then run the project's code, or another `node`, with the secret.
    let (env, _ss) = setup();
    let script = Script::new(&env.dir.path().join("bin"), "srv");
    let place = env.dir.path().join("where-set-ran");
    std::fs::create_dir(&place).unwrap();
    let mut child = env
        .cmd(&[
            "connector",
            "set",
            "gh",
            "--env",
            "GITHUB_TOKEN",
            "--",
            script.arg(),
        ])
        .current_dir(&place)
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &place)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"tok-9\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let evil = env.dir.path().join("evil");
    std::fs::create_dir(&evil).unwrap();
    let evil_path = format!("{}:/usr/bin:/bin", evil.display());
    let vars = [
        ("PATH", evil_path.as_str()),
        ("HOME", evil.to_str().unwrap()),
    ];
    let mut r = relay(&env, "gh", &[], &vars, script.file("record"));
    r.handshake();
    r.finish();
    let seen = script.env_seen();
    assert!(seen.contains("PATH=/usr/bin:/bin\n"), "{seen}");
    assert!(
        seen.contains(&format!("HOME={}\n", place.display())),
        "{seen}"
    );
    assert!(!seen.contains(evil.to_str().unwrap()), "{seen}");
    let cwd = std::fs::read_to_string(script.file("cwd")).unwrap();
    assert_eq!(cwd.trim(), place.to_str().unwrap());
}

#[test]
fn replacing_a_registration_keeps_one_secret_under_a_fresh_store_entry() {
    let (env, ss) = setup();
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &["env"], "tok-old");
    assert!(out.status.success(), "{}", text(&out));
    let first = account_of(&env, "gh");
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &["env"], "tok-new");
    assert!(out.status.success(), "{}", text(&out));
    let second = account_of(&env, "gh");
    // A store call that finished late could only ever touch its own registration's entry.
    assert_ne!(first, second);
    assert_eq!(ss.accounts(&service_of(&env)), vec![second]);
    assert_eq!(secret_of(&env, &ss, "gh").as_deref(), Some("tok-new"));
}

#[test]
fn a_sigkilled_relay_takes_its_credentialed_server_down() {
    let (env, _ss) = setup();
    let script = Script::new(&env.dir.path().join("bin"), "srv");
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &[script.arg()], "tok-6");
    assert!(out.status.success(), "{}", text(&out));
    let mut r = relay(&env, "gh", &[], &[], script.file("record"));
    r.handshake();
    let server = script.pid();
    assert!(alive(server));
    r.child.kill().unwrap(); // SIGKILL: the relay cannot clean up.
    r.child.wait().unwrap();
    // The server held the relay's stderr open: end of file means it has exited.
    assert!(
        r.stderr.take().unwrap().recv_timeout(PATIENCE).is_ok(),
        "the credentialed server outlived the relay"
    );
    let deadline = Instant::now() + PATIENCE;
    while alive(server) {
        assert!(Instant::now() < deadline, "server {server} still runs");
        std::thread::yield_now();
    }
}

fn socket_of(env: &Env) -> String {
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    v["socket"].as_str().unwrap().to_string()
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process that is not Holdcall listens on the daemon's socket, records every byte it
/// receives to `heard`, and answers any session start with a launch of `forged`.
fn impostor(env: &Env, heard: &Path, forged: &[&str]) -> KillOnDrop {
    let socket = socket_of(env);
    std::fs::create_dir_all(Path::new(&socket).parent().unwrap()).unwrap();
    let launch = serde_json::json!({
        "kind": "session.opened",
        "launch": {"command": forged, "env_key": "FORGED", "secret": "forged", "pass_env": []}
    });
    let script = r#"
import socket, sys, json, threading
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
heard = open(sys.argv[2], "ab", buffering=0)
answer = (sys.argv[3] + "\n").encode()
print("ready", flush=True)
def serve(c):
    while True:
        data = c.recv(65536)
        if not data:
            return
        heard.write(data)
        try:
            c.sendall(answer)
        except OSError:
            return
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
    std::fs::write(heard, b"").unwrap();
    let mut child = Command::new("python3")
        .args([
            "-c",
            script,
            &socket,
            heard.to_str().unwrap(),
            &launch.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    KillOnDrop(child)
}

#[test]
fn an_impostor_answering_session_start_with_a_forged_launch_gets_nothing_run() {
    let (env, _ss) = setup();
    let marker = env.dir.path().join("forged-ran");
    let heard = env.dir.path().join("heard");
    let touch = format!("touch '{}'", marker.display());
    let _imp = impostor(&env, &heard, &["/bin/sh", "-c", &touch]);
    let given = Script::new(&env.dir.path().join("given"), "srv");
    let mut r = relay(&env, "gh", &[given.arg()], &[], given.file("record"));
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    let stderr = r.finish();
    assert!(stderr.contains("not this Holdcall build"), "{stderr}");
    assert!(!marker.exists(), "the forged command ran");
    assert!(
        given.ran(),
        "only the given command runs, without any secret"
    );
    assert!(!given.env_seen().contains("FORGED"));
    assert!(
        std::fs::read(&heard).unwrap().is_empty(),
        "the relay spoke to the impostor"
    );
}

#[test]
fn connector_set_facing_an_impostor_sends_it_no_byte_of_the_secret() {
    let (env, ss) = setup();
    let heard = env.dir.path().join("heard");
    let _imp = impostor(&env, &heard, &["/bin/true"]);
    let secret = canary();
    let out = set(&env, "gh", "GITHUB_TOKEN", &[], &["env"], &secret);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the secret was not sent"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(&secret));
    assert!(
        std::fs::read(&heard).unwrap().is_empty(),
        "bytes reached the impostor"
    );
    assert!(ss.accounts(&service_of(&env)).is_empty());
}

/// Reads the relay's output up to the answer whose id is `id` (its JSON text); keeps the other
/// lines (notifications, server requests) in `others`.
pub(crate) fn answer_to(r: &mut Relay, id: &str, others: &mut Vec<String>) -> serde_json::Value {
    loop {
        let line = r.recv_str();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v.get("method").is_none()
            && v["id"] == serde_json::from_str::<serde_json::Value>(id).unwrap()
        {
            return v;
        }
        others.push(line);
    }
}

/// Every process's pid and command line (its words, NUL-separated).
fn all_cmdlines() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.bytes().all(|b| b.is_ascii_digit())
            && let Ok(c) = std::fs::read(e.path().join("cmdline"))
        {
            out.push((name, c));
        }
    }
    out
}

pub(crate) fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The acceptance test of issue 5: a canary secret set through `connector set` for the real
/// server-everything reaches its `get-env` tool through the relay, and nothing else: no process's
/// command line, no journal byte, no log, no CLI output, no other line to the client.
#[test]
fn a_canary_secret_reaches_server_everythings_env_and_nowhere_else() {
    let everything = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/rig/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.exists(),
        "{} is missing: run tools/rig/setup first (tools/test does, before cargo test)",
        everything.display()
    );
    let (env, _ss) = setup();
    let secret = canary();
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let out = set(
        &env,
        "everything",
        "HC_CANARY",
        &[],
        &["node", everything.to_str().unwrap(), "stdio"],
        &secret,
    );
    assert!(out.status.success(), "{}", text(&out));
    outputs.push(("connector set".into(), [out.stdout, out.stderr].concat()));

    let mut r = relay(&env, "everything", &[], &[], env.dir.path().join("unused"));
    r.handshake();
    let mut to_client: Vec<String> = Vec::new();
    r.send(br#"{"jsonrpc":"2.0","id":"tl","method":"tools/list"}"#);
    let tools = answer_to(&mut r, "\"tl\"", &mut to_client);
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get-env"),
        "server-everything offers get-env"
    );
    // While the server runs, no process's command line holds the canary.
    for (pid, cmdline) in all_cmdlines() {
        assert!(
            !contains(&cmdline, &secret),
            "the canary is in /proc/{pid}/cmdline"
        );
    }
    // get-env answers the whole environment, canary included: the relay withholds that
    // answer (tests/leak.rs), so the environment is read from /proc below.
    r.send(&call("7", "get-env", "{}"));
    let v = answer_to(&mut r, "7", &mut to_client);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("withheld")),
        "{v}"
    );
    // The documented same-user gap (docs/security.md, "Known gaps"): the secret is in the
    // server's environment, which any process of the same user can read from /proc.
    let server = all_cmdlines()
        .into_iter()
        .find(|(_, c)| contains(c, everything.to_str().unwrap()))
        .map(|(pid, _)| pid)
        .expect("server-everything is running");
    let environ = std::fs::read(format!("/proc/{server}/environ")).unwrap();
    assert!(
        contains(&environ, &format!("HC_CANARY={secret}")),
        "the server's environment holds the secret under HC_CANARY, readable by its user"
    );
    assert!(
        !contains(&environ, "HOLDCALL_HOME="),
        "the relay's environment leaked"
    );
    // Every other line the client read is free of it.
    to_client.extend(r.barrier(1));
    for line in &to_client {
        assert!(
            !line.contains(&secret),
            "a line to the client carries the canary"
        );
    }
    let stderr = r.finish();
    outputs.push(("relay stderr".into(), stderr.into_bytes()));

    for args in [
        vec!["log"],
        vec!["log", "--json"],
        vec!["connector", "list"],
        vec!["connector", "list", "--json"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["verify"],
        vec!["daemon", "status"],
        vec!["policy", "list"],
    ] {
        let o = env.run(&args);
        outputs.push((
            format!("holdcall {}", args.join(" ")),
            [o.stdout, o.stderr].concat(),
        ));
    }
    let home = env.home();
    for f in ["holdcall.db", "holdcall.db-wal", "daemon.log"] {
        outputs.push((f.into(), std::fs::read(home.join(f)).unwrap_or_default()));
    }
    assert!(
        outputs
            .iter()
            .any(|(n, b)| n == "holdcall.db" && !b.is_empty()),
        "the journal was read"
    );
    for (what, bytes) in &outputs {
        assert!(!contains(bytes, &secret), "the canary is in {what}");
    }
    // The journal says the session was credentialed, with the command and never the value.
    let start = journal_rows(&env.db())
        .into_iter()
        .find(|r| r["kind"] == "session.start")
        .unwrap();
    assert!(start["detail"].as_str().unwrap().contains("index.js"));
}

#[test]
fn doctor_checks_the_credential_store_through_the_daemon_and_each_connectors_command() {
    let (env, _ss) = setup();
    let server = env.dir.path().join("server");
    crate::common::copy_executable("/usr/bin/true", &server);
    let out = set(
        &env,
        "gh",
        "GH_TOKEN",
        &[],
        &[server.to_str().unwrap()],
        "s3cret-value",
    );
    assert!(out.status.success(), "{}", text(&out));
    let doctor = env.ok(&["doctor"]);
    assert!(doctor.contains("[OK  ] credential store:"), "{doctor}");
    assert!(doctor.contains("[OK  ] connector gh: runs"), "{doctor}");
    assert!(!doctor.contains("s3cret-value"), "{doctor}");

    // The registered command is gone: its servers cannot start, and doctor fails saying so.
    std::fs::remove_file(&server).unwrap();
    let out = env.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let doctor = String::from_utf8(out.stdout).unwrap();
    assert!(doctor.contains("[FAIL] connector gh:"), "{doctor}");
    assert!(doctor.contains("connector set"), "{doctor}");

    // A daemon started where no session bus is reachable cannot read the store: doctor says so
    // for the connector that needs it.
    env.ok(&["daemon", "stop"]);
    let o = env
        .cmd(&["daemon", "start"])
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = env.run(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "credential store")
        .unwrap();
    assert_eq!(store["status"], "FAIL", "{store}");
    assert!(
        store["message"].as_str().unwrap().contains("not reachable"),
        "{store}"
    );
    assert!(
        store["remedy"]
            .as_str()
            .unwrap()
            .contains("start a Secret Service"),
        "{store}"
    );
    env.ok(&["daemon", "stop"]);
}

#[test]
fn doctor_says_no_credential_store_is_needed_while_no_connector_has_a_secret() {
    // Regression (issue 12, item 9): with no session bus, doctor printed `[OK  ] credential
    // store: … no credential store: DBus error …`, an error under an OK label.
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let doctor = env.ok(&["doctor"]);
    let line = doctor
        .lines()
        .find(|l| l.contains("credential store:"))
        .unwrap();
    assert!(
        line.starts_with("[OK  ] credential store: none needed"),
        "{doctor}"
    );
    assert!(!line.to_lowercase().contains("error"), "{line}");
    env.ok(&["daemon", "stop"]);
}
