//! Every way of not getting a decision is a refusal, row by row, and no process other than
//! this Holdcall build gets a decision or a journal entry out of the daemon.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn socket_of(env: &Env) -> String {
    env.socket().to_str().unwrap().to_string()
}

/// Runs `holdcall serve` with a server command that would leave a mark; the relay must exit 1
/// without running it. Returns its stderr.
fn serve_starts_nothing(env: &Env) -> String {
    let marker = env.dir.path().join("server-ran");
    let out = env
        .serve_shell(&format!("touch '{}'", marker.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!marker.exists(), "the server ran");
    String::from_utf8(out.stderr).unwrap()
}

fn assert_no_decision(a: &serde_json::Value) {
    assert!(is_refusal(a), "{a}");
    let text = a["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("could not get a decision"), "{text}");
}

#[test]
fn with_no_daemon_the_server_starts_and_every_call_is_refused() {
    let env = Env::new();
    // A database path the daemon cannot open: it cannot start, so nobody can decide.
    std::fs::create_dir(env.db()).unwrap();
    let mut r = env.relay("demo");
    r.handshake(); // the server runs: initialize is answered by it
    r.send(&call("1", "echo", r#"{"text":"hi"}"#));
    assert_no_decision(&r.recv_json());
    r.barrier(1);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(10).any(|w| w == b"tools/call"))
    );
    let stderr = r.finish();
    assert!(
        stderr.contains("every tool call in this session will be refused"),
        "{stderr}"
    );
}

#[test]
fn a_daemon_that_does_not_answer_in_time_refuses_the_call_and_every_later_one() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert!(!is_refusal(&r.recv_json()));
    let pid = nix::unistd::Pid::from_raw(env.daemon_pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    r.send(&call("2", "echo", r#"{"text":"b"}"#));
    assert_no_decision(&r.recv_json());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    // The daemon is back, but the link that failed once is not trusted again.
    r.send(&call("3", "echo", r#"{"text":"c"}"#));
    assert_no_decision(&r.recv_json());
    r.barrier(1);
    let rec = r.recorded();
    assert!(
        !rec.iter()
            .any(|l| l.windows(3).any(|w| w == b"\"b\"" || w == b"\"c\""))
    );
    r.finish();
}

#[test]
fn a_daemon_that_dies_mid_session_leaves_every_later_call_refused() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    let pid = nix::unistd::Pid::from_raw(env.daemon_pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert_no_decision(&r.recv_json());
    r.send(&call("2", "echo", r#"{"text":"b"}"#));
    assert_no_decision(&r.recv_json());
    r.finish();
}

#[test]
fn a_journal_that_cannot_be_written_refuses_the_call() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_more BEFORE INSERT ON journal BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
    r.send(&call("1", "echo", r#"{"text":"unrecorded"}"#));
    assert_no_decision(&r.recv_json());
    r.barrier(1);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(10).any(|w| w == b"unrecorded"))
    );
    // A policy change that cannot be journaled is not made either.
    let err = env.fails(&["policy", "deny", "echo"], 1);
    assert!(err.contains("not made"), "{err}");
    db.execute_batch("DROP TRIGGER no_more;").unwrap();
    assert!(!env.ok(&["policy", "list"]).contains("echo"));
    r.finish();
    env.ok(&["verify"]);
}

#[test]
fn an_impostor_on_the_socket_decides_nothing() {
    let env = Env::new();
    env.ok(&["status"]); // creates nothing, but tells us the socket path
    let _impostor = crate::common::impostor::listen(&env.socket());
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert_no_decision(&r.recv_json());
    let stderr = r.finish();
    assert!(stderr.contains("not this Holdcall build"), "{stderr}");
}

#[test]
fn a_process_that_is_not_holdcall_gets_no_decision_and_no_journal_write() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let before = journal_rows(&env.db()).len();
    let socket = socket_of(&env);
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
# The daemon may close the connection before the second line is sent: that is a refusal too.
try:
    s.sendall(b'{"kind":"session.start","session_id":"0123456789abcdef0123456789abcdef","connector":"x","client":null}\n')
    s.sendall(b'{"kind":"call.request","session_id":"0123456789abcdef0123456789abcdef","seq":1,"tool":"t","args_digest":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","arguments":null,"arguments_omitted":false}\n')
    data = s.recv(4096)
except (ConnectionResetError, BrokenPipeError):
    data = b""
print(repr(data))
"#;
    let out = Command::new("python3")
        .args(["-c", script, &socket])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "b''");
    assert_eq!(journal_rows(&env.db()).len(), before);
}

#[test]
fn an_unreadable_database_is_refused_with_its_name_and_no_call_runs() {
    let env = Env::new();
    std::fs::write(
        env.db(),
        b"this is not a database, it is a text file of some length",
    )
    .unwrap();
    let err = env.fails(&["log"], 1);
    assert!(err.contains("holdcall.db"), "{err}");
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert_no_decision(&r.recv_json());
    let stderr = r.finish();
    assert!(stderr.contains("holdcall"), "{stderr}");
}

#[test]
fn a_stale_socket_left_by_a_killed_daemon_is_reclaimed() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let pid = nix::unistd::Pid::from_raw(env.daemon_pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    // A SIGKILLed process loses its executable before it closes its files: until it has
    // exited, a command can still connect to its socket and (rightly) refuse a listener whose
    // identity cannot be read. The socket is stale once the daemon has exited.
    eventually("the killed daemon has exited", || !alive(pid.as_raw()));
    assert!(env.socket().exists());
    env.ok(&["policy", "deny", "x"]); // starts a new daemon over the stale socket
    assert_ne!(env.daemon_pid(), pid.as_raw());
}

#[test]
fn a_second_daemon_for_the_same_home_does_not_start() {
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let pid = env.daemon_pid();
    let out = env.run(&["daemon", "run"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already running"));
    assert_eq!(env.daemon_pid(), pid);
}

#[test]
fn a_process_that_listens_and_then_becomes_holdcall_still_decides_nothing() {
    // The kernel names the process that called listen() as the peer; that process then runs
    // Holdcall, so its image passes the check. But every answer comes from a forked child, and
    // the relay checks who wrote each byte.
    let env = Env::new();
    let socket = socket_of(&env);
    std::fs::create_dir_all(std::path::Path::new(&socket).parent().unwrap()).unwrap();
    let script = r#"
import os, socket, sys, json
path, holdcall = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
r, w = os.pipe()
# The parent's exec closes its end of this pipe (Python's pipes are close-on-exec), after the
# kernel names the new image: the child's read returns then.
execd, exec_note = os.pipe()
if os.fork() > 0:
    os.dup2(r, 0)
    os.execv(holdcall, [holdcall, "demo-server"])
parent = os.getppid()
os.close(exec_note)
os.read(execd, 1)
assert os.path.realpath(f"/proc/{parent}/exe") == os.path.realpath(holdcall)
print(parent, os.getpid(), flush=True)
# Let go of the test's pipes, so nothing waits on this process's output after the test.
devnull = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(devnull, fd)
while True:
    c, _ = s.accept()
    f = c.makefile("rwb")
    for line in f:
        m = json.loads(line)
        if m.get("kind") == "call.request":
            a = {"kind":"decision","session_id":m["session_id"],"seq":m["seq"],"decision":"allow","policy_id":None,"reason":""}
        else:
            a = {"kind":"ok"}
        f.write((json.dumps(a) + "\n").encode()); f.flush()
"#;
    let bin = Env::bin();
    let mut imp = Command::new("python3")
        .args(["-c", script, &socket, bin.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pids = String::new();
    BufReader::new(imp.stdout.take().unwrap())
        .read_line(&mut pids)
        .unwrap();
    let pids: Vec<i32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // Both the process that became Holdcall and its forked listener die with the test.
    let _guard = KillOnDrop(pids);
    // The daemon's first answer (which home it serves, asked before anything else) came from
    // the wrong process, so the relay takes nothing from it: no session is opened and every
    // call is refused, as with any impostor, and it says why.
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    assert_no_decision(&r.recv_json());
    let stderr = r.finish();
    assert!(stderr.contains("instead of the verified pid"), "{stderr}");
    let _ = imp.kill();
    let _ = imp.wait();
}

#[test]
fn a_session_the_daemon_cannot_open_starts_no_server() {
    // A verified daemon that does not open the session may hold this connector's registration;
    // running the command given after `--` instead could run a server it was meant to replace.
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_more BEFORE INSERT ON journal BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
    let stderr = serve_starts_nothing(&env);
    assert!(stderr.contains("no server was started"), "{stderr}");
    db.execute_batch("DROP TRIGGER no_more;").unwrap();
}

#[test]
fn a_stopped_daemon_at_session_start_leaves_the_server_answering_and_every_call_refused_in_time() {
    // Regression (issue 12, item 9): a relay whose daemon was stopped said nothing to the
    // client for 25 s (the session start's bound, which allows for store reads), then exited 1.
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let pid = nix::unistd::Pid::from_raw(env.daemon_pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let _continue = SignalOnDrop(pid.as_raw(), nix::sys::signal::Signal::SIGCONT);
    let started = std::time::Instant::now();
    let mut r = env.relay("demo");
    r.handshake(); // answered by the server
    r.send(&call("1", "echo", r#"{"text":"undecided"}"#));
    assert_no_decision(&r.recv_json());
    let took = started.elapsed();
    eprintln!("relay start to the call's refusal: {took:?}");
    let bound = holdcall::limits::DECISION_TIMEOUT + std::time::Duration::from_secs(3);
    assert!(took < bound, "the call was refused after {took:?}");
    r.barrier(1);
    assert!(!r.server_got(b"undecided"));
    let stderr = r.finish();
    assert!(stderr.contains("did not answer within"), "{stderr}");
}
