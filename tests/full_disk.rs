//! A full disk under the home refuses calls and is survived: the journal writer never dies of
//! an I/O error (nor of the daemon.log on the same full disk), `status` and `doctor` say the
//! daemon cannot decide, and decisions resume on their own once space is back. Issue 12, item 3.

use crate::common::disk::{SmallDisk, fill};
use crate::common::*;

fn echoed(v: &serde_json::Value) -> bool {
    v["result"]["isError"] == false
}

/// Stops the home's daemon when dropped: declared after the disk, so it runs before the
/// unmount.
struct StopFirst<'a>(&'a Env);
impl Drop for StopFirst<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["daemon", "stop"]);
    }
}

#[test]
fn a_full_disk_refuses_calls_and_decisions_resume_once_space_is_back() {
    let env = Env::new();
    let Some(_disk) = SmallDisk::mount(&env.home()) else {
        return;
    };
    let _stop = StopFirst(&env);

    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"before"}"#));
    assert!(echoed(&r.recv_json()));
    let pid = env.daemon_pid();

    let filler = fill(&env.home());
    // Well past the ~40 failed appends that used to kill the writer.
    for i in 2..60 {
        r.send(&call(&i.to_string(), "echo", r#"{"text":"full"}"#));
        let a = r.recv_json();
        assert!(is_refusal(&a), "call {i} on a full disk: {a}");
    }
    assert_eq!(
        r.forwarded_calls(),
        1,
        "a call without a decision reached the server"
    );
    // A report the journal cannot take (here an anomaly: a line with a key twice, dropped
    // unanswered) is not answered, so the relay never waits on it; the daemon pushes back that
    // it was not recorded, and the relay counts it and says so.
    r.send(br#"{"jsonrpc":"2.0","id":70,"id":71,"method":"tools/call","params":{"name":"echo"}}"#);

    let status = env.run(&["status"]);
    let out = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(1), "{out}");
    assert!(
        out.contains("CANNOT DECIDE") && out.contains("journal cannot be written"),
        "{out}"
    );
    let doctor = String::from_utf8(env.run(&["doctor"]).stdout).unwrap();
    assert!(doctor.contains("it cannot decide"), "{doctor}");

    std::fs::remove_file(filler).unwrap();

    // The same relay, the same daemon: decided and journaled again, with nothing restarted.
    r.send(&call("100", "echo", r#"{"text":"after"}"#));
    assert!(echoed(&r.recv_json()));
    assert_eq!(r.forwarded_calls(), 2);
    // A new relay gets a new session: no id was used up by a failed start.
    let mut r2 = env.relay("demo");
    r2.handshake();
    r2.send(&call("1", "echo", r#"{"text":"new relay"}"#));
    assert!(echoed(&r2.recv_json()));
    assert_eq!(env.daemon_pid(), pid, "the daemon was replaced");
    let status = env.ok(&["status"]);
    assert!(!status.contains("CANNOT DECIDE"), "{status}");
    env.ok(&["verify"]);
    let rows = journal_rows(&env.db());
    let allowed = rows
        .iter()
        .filter(|e| e["kind"] == "call.request" && e["decision"] == "allow")
        .count();
    assert_eq!(
        allowed, 3,
        "before the disk filled, after it emptied, and the new relay's"
    );
    let said = r.finish();
    assert!(
        said.contains("a report about this session was not recorded: ")
            && said.contains(
                "1 report(s) about this session (outcomes, anomalies) could not be recorded"
            ),
        "{said}"
    );
    drop(r2);
}

/// A full disk while a relay starts: the start is refused, and once space is back the next
/// relay starts (a failed `session.start` never counts as a used session id).
#[test]
fn a_relay_started_on_a_full_disk_is_refused_and_the_next_one_starts_once_space_is_back() {
    let env = Env::new();
    let Some(_disk) = SmallDisk::mount(&env.home()) else {
        return;
    };
    let _stop = StopFirst(&env);
    env.ok(&["daemon", "start"]);
    let filler = fill(&env.home());
    for _ in 0..5 {
        let out = env
            .cmd(&["serve", "--connector", "demo", "--", "/bin/true"])
            .output()
            .unwrap();
        assert!(!out.status.success());
    }
    std::fs::remove_file(filler).unwrap();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", r#"{"text":"x"}"#));
    assert!(echoed(&r.recv_json()));
    env.ok(&["verify"]);
}
