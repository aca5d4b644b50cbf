//! A daemon is trusted only for the home it serves: another home's real daemon (this build,
//! this user) moved onto this home's socket path decides nothing here (issue 12, item 5).

use crate::common::*;

/// Home A denies `delete_file`; home B allows everything. A's daemon is stopped and B's socket
/// is renamed onto A's socket path, as a same-user process could.
fn b_on_a_socket() -> (Env, Env, SignalOnDrop) {
    let a = Env::new();
    let b = Env::new();
    a.ok(&["policy", "deny", "delete_file"]);
    a.ok(&["daemon", "stop"]);
    b.ok(&["daemon", "start"]);
    // Its socket is moved away, so `daemon stop` of its own home cannot find it.
    let guard = SignalOnDrop(b.daemon_pid(), nix::sys::signal::Signal::SIGTERM);
    std::fs::rename(b.socket(), a.socket()).unwrap();
    (a, b, guard)
}

#[test]
fn another_homes_daemon_moved_onto_this_homes_socket_decides_nothing() {
    let (a, b, _guard) = b_on_a_socket();
    let before = journal_rows(&b.db()).len();
    let mut r = a.relay("demo");
    r.handshake();
    r.send(&call("1", "delete_file", r#"{"path":"/x"}"#));
    let answer = r.recv_json();
    assert!(is_refusal(&answer), "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("could not get a decision"), "{text}");
    // The refusal says which home the daemon serves, and that this home has none running.
    assert!(
        text.contains(&b.home().display().to_string()),
        "the refusal names the other home: {text}"
    );
    assert!(
        text.contains("this home has no daemon of its own running"),
        "{text}"
    );
    r.barrier(1);
    assert!(!r.server_got(b"tools/call"), "the call reached the server");
    let stderr = r.finish();
    assert!(
        stderr.contains("every tool call in this session will be refused"),
        "{stderr}"
    );
    // Nothing of A's session was journaled in B.
    assert_eq!(journal_rows(&b.db()).len(), before);
}

#[test]
fn a_cli_command_refuses_another_homes_daemon_on_this_homes_socket() {
    let (a, b, _guard) = b_on_a_socket();
    let before = journal_rows(&b.db()).len();
    let err = a.fails(&["policy", "deny", "add"], 1);
    assert!(err.contains(&b.home().display().to_string()), "{err}");
    assert!(err.contains("another home's daemon"), "{err}");
    let out = a.run(&["daemon", "status"]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{status}");
    assert!(status.contains("ANOTHER HOME'S"), "{status}");
    // doctor fails it, and `daemon stop` does not stop another home's daemon.
    let out = a.run(&["doctor"]);
    let doctor = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{doctor}");
    assert!(doctor.contains("is not this home's daemon"), "{doctor}");
    let err = a.fails(&["daemon", "stop"], 1);
    assert!(err.contains("not stopping"), "{err}");
    assert!(b.db().exists());
    // B never heard of the rule.
    assert_eq!(journal_rows(&b.db()).len(), before);
}

#[test]
fn a_home_whose_own_daemon_is_on_its_socket_is_served() {
    // The proof is read after the daemon answered: a first start (the daemon creates the
    // database) is served at once.
    let a = Env::new();
    assert!(!a.db().exists());
    let mut r = a.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"a"}"#));
    let answer = r.recv_json();
    assert!(!is_refusal(&answer), "{answer}");
    r.finish();
}

#[test]
fn restart_replaces_this_homes_daemon_after_its_database_was_replaced_behind_it() {
    // Found in review of issue 12, item 5: a database moved into place under a running daemon
    // (a restored backup) made the home's own daemon "another home's": relays rightly refused
    // it, but `daemon stop` and `restart` refused to touch it too, and the message said this
    // home's daemon "is not on this socket" while it was.
    let env = Env::new();
    env.ok(&["daemon", "start"]);
    let pid = env.daemon_pid();
    let db = env.home().join("holdcall.db");
    let copy = env.home().join("restored.db");
    std::fs::copy(&db, &copy).unwrap();
    std::fs::rename(&copy, &db).unwrap();
    let status = env.run(&["daemon", "status"]);
    let said = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(said.contains("holds this home's lock"), "{said}");
    let out = env.run(&["daemon", "restart"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let now = env.daemon_pid();
    assert_ne!(now, pid);
    assert!(env.ok(&["daemon", "status"]).contains("running (pid"));
}
