//! Approval through the real binary, a real daemon, a relay and the recording demo server: a call
//! a rule sends to a person is held without stalling its session, shown with its exact
//! arguments, released or refused once, and journaled before the client hears.

use crate::common::*;

use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// `holdcall approve --watch --json`: one JSON line per held call, the ones held when it starts
/// and each one held later. Killed when dropped.
struct Watch {
    child: Child,
    lines: Receiver<Vec<u8>>,
}

impl Watch {
    fn start(env: &Env) -> Watch {
        let mut child = env
            .cmd(&["approve", "--watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        Watch { child, lines }
    }

    /// The next call held (waits for it, within the patience limit).
    fn next(&self) -> serde_json::Value {
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .expect("a call was held within the patience limit");
        serde_json::from_slice(&line).unwrap()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A policy that holds every call of `tool` for a person, a watch on the held calls, and a relay
/// past its handshake. Bound as `let (env, watch, mut r)`, they drop relay first, environment
/// last.
fn held_for(tool: &str) -> (Env, Watch, Relay) {
    let env = Env::new();
    env.ok(&["policy", "ask", tool]);
    let watch = Watch::start(&env);
    let mut r = env.relay("demo");
    r.handshake();
    (env, watch, r)
}

/// The `call.approval` entries journaled so far.
fn approvals(env: &Env) -> Vec<serde_json::Value> {
    journal_rows(&env.db())
        .into_iter()
        .filter(|e| e["kind"] == "call.approval")
        .collect()
}

/// Waits (within the patience limit) for a `call.approval` entry for call `seq`, re-reading the
/// journal each time: the event is the daemon's commit, which no pipe announces.
fn wait_for_approval(env: &Env, seq: i64) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(e) = approvals(env).into_iter().find(|e| e["seq"] == seq) {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "no call.approval for call {seq} within the patience limit"
        );
    }
}

fn refusal_text(v: &serde_json::Value) -> String {
    assert!(is_refusal(v), "{v}");
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The answer to the call with `id`, skipping nothing: it must be the next line.
fn answer(r: &mut Relay, id: i64) -> serde_json::Value {
    let v = r.recv_json();
    assert_eq!(v["id"], id, "{v}");
    v
}

#[test]
fn a_held_call_is_shown_with_its_exact_arguments_and_once_approved_the_server_gets_the_original_bytes()
 {
    let (env, watch, mut r) = held_for("echo");
    // A raw tab between tokens (a control character), a right-to-left override inside the
    // string, a non-ASCII letter, and JSON's own escape for BEL.
    let line = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\t\"x\u{202e}y caf\u{e9} \\u0007\"}}}\n";
    r.send(line.as_bytes());
    let held = watch.next();
    let id = held["id"].as_str().unwrap().to_string();
    assert_eq!(held["tool"], "echo");
    assert_eq!(held["connector"], "demo");
    assert_eq!(held["seq"], 1);

    let listing = env.ok(&["approve"]);
    let shown = "{\"text\":\\u{9}\"x\\u{202e}y caf\u{e9} \\u0007\"}";
    assert!(
        listing.contains(&format!("  arguments  {shown}\n")),
        "{listing}"
    );
    assert!(
        listing.contains("non-ASCII characters shown as themselves: U+00E9 \u{e9}"),
        "{listing}"
    );
    assert!(listing.contains(&format!("held call {id}")), "{listing}");
    assert!(
        !listing.contains('\u{202e}'),
        "the override reached the terminal"
    );
    assert!(!listing.contains('\t'), "the tab reached the terminal");

    let said = env.ok(&["approve", &id]);
    assert!(said.starts_with("approved call "), "{said}");
    let a = answer(&mut r, 5);
    // Journaled before the client heard.
    let entry = approvals(&env).pop().expect("journaled before the answer");
    assert_eq!(a["result"]["isError"], false, "{a}");
    assert_eq!(entry["decision"], "approved");
    assert_eq!(entry["reason"], "person");
    assert_eq!(entry["policy_id"], id.as_str());
    assert_eq!(entry["tool"], "echo");
    assert!(
        r.recorded().iter().any(|l| l == line.as_bytes()),
        "the server got {:?}",
        r.recorded()
    );
    r.finish();
}

#[test]
fn a_rejected_call_gets_the_person_rejected_error_and_is_journaled_before_the_client_hears() {
    let (env, watch, mut r) = held_for("delete_file");
    r.send(&call(
        "8",
        "delete_file",
        r#"{"path":"/home/me/notes.txt"}"#,
    ));
    let id = watch.next()["id"].as_str().unwrap().to_string();
    env.ok(&["reject", &id, "--reason", "use the trash folder instead"]);
    let a = answer(&mut r, 8);
    let entry = approvals(&env).pop().expect("journaled before the answer");
    assert_eq!(
        refusal_text(&a),
        "Holdcall refused this call: a person looked at it and rejected it. Do not retry automatically. Their reason: use the trash folder instead"
    );
    assert_eq!(entry["decision"], "rejected");
    assert_eq!(entry["reason"], "person");
    assert_eq!(entry["detail"], "use the trash folder instead");
    r.barrier(1);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(11).any(|w| w == b"delete_file")),
        "the server saw the rejected call"
    );
    r.finish();
    let log = env.ok(&["log", "--decision", "rejected"]);
    assert!(
        log.contains("rejected by a person: use the trash folder instead"),
        "{log}"
    );
    assert!(!log.contains("call.request"), "{log}");
}

#[test]
fn a_call_nobody_decides_in_time_gets_the_nobody_decided_error_journaled_first() {
    let env = Env::new();
    env.write_config("[approval]\ntimeout = \"1s\"\n");
    env.ok(&["policy", "ask", "echo"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("3", "echo", r#"{"text":"anyone?"}"#));
    let a = answer(&mut r, 3);
    let entry = approvals(&env).pop().expect("journaled before the answer");
    assert!(refusal_text(&a).contains("nobody decided in time"), "{a}");
    assert_eq!(entry["decision"], "rejected");
    assert_eq!(entry["reason"], "timeout");
    r.finish();
    let log = env.ok(&["log"]);
    assert!(log.contains("rejected: nobody decided in time"), "{log}");
}

#[test]
fn an_approval_is_used_once_and_a_second_one_is_a_clear_error() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"once"}"#));
    let id = watch.next()["id"].as_str().unwrap().to_string();
    env.ok(&["approve", &id]);
    assert_eq!(answer(&mut r, 1)["result"]["isError"], false);
    let err = env.fails(&["approve", &id], 1);
    assert!(err.contains("no call is held with id"), "{err}");
    let err = env.fails(&["reject", &id], 1);
    assert!(err.contains("no call is held with id"), "{err}");
    assert_eq!(approvals(&env).len(), 1);
    let echoes = r
        .recorded()
        .iter()
        .filter(|l| l.windows(4).any(|w| w == b"once"))
        .count();
    assert_eq!(echoes, 1, "the call reached the server more than once");
    r.finish();
}

#[test]
fn an_approval_releases_only_its_own_call_and_the_other_stays_held() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"call A"}"#));
    let a = watch.next();
    r.send(&call("2", "echo", r#"{"text":"call B"}"#));
    let b = watch.next();
    assert_ne!(a["args_digest"], b["args_digest"]);
    env.ok(&["approve", a["id"].as_str().unwrap()]);
    let got = answer(&mut r, 1);
    assert_eq!(got["result"]["content"][0]["text"], "Echo: call A", "{got}");
    let still: Vec<serde_json::Value> = env
        .ok(&["approve", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(still.len(), 1);
    assert_eq!(still[0]["id"], b["id"]);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(6).any(|w| w == b"call B")),
        "B reached the server on A's approval"
    );
    env.ok(&["reject", b["id"].as_str().unwrap()]);
    assert!(is_refusal(&answer(&mut r, 2)));
    r.finish();
}

#[test]
fn a_held_call_does_not_delay_pings_notifications_or_an_allowed_call_sent_after_it() {
    let (env, watch, mut r) = held_for("delete_file");
    r.send(&call("1", "delete_file", r#"{"path":"/tmp/x"}"#));
    let a = watch.next();
    // While A is held: a notification, a ping, and an allowed call B, all answered first.
    r.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}"#);
    r.send(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    assert_eq!(r.recv_json()["id"], "p");
    r.send(&call("2", "echo", r#"{"text":"B"}"#));
    let b = answer(&mut r, 2);
    assert_eq!(b["result"]["content"][0]["text"], "Echo: B", "{b}");
    assert!(
        r.recorded()
            .iter()
            .any(|l| l.windows(23).any(|w| w == b"notifications/cancelled")),
        "the notification did not reach the server"
    );
    env.ok(&["approve", a["id"].as_str().unwrap()]);
    let a = answer(&mut r, 1);
    assert_eq!(a["result"]["isError"], false, "{a}");
    r.finish();
}

#[test]
fn a_call_with_the_id_of_a_held_call_is_refused_as_a_duplicate() {
    let (env, watch, mut r) = held_for("delete_file");
    r.send(&call("1", "delete_file", r#"{"path":"/tmp/x"}"#));
    let a = watch.next();
    r.send(&call("1", "echo", r#"{"text":"same id"}"#));
    let dup = answer(&mut r, 1);
    assert!(refusal_text(&dup).contains("same id"), "{dup}");
    env.ok(&["reject", a["id"].as_str().unwrap()]);
    assert!(is_refusal(&answer(&mut r, 1)));
    r.finish();
}

#[test]
fn ending_the_session_rejects_its_held_calls_journaled_before_the_client_hears() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("4", "echo", r#"{"text":"left behind"}"#));
    let held = watch.next();
    // The client closes its input: the session ends.
    r.stdin = None;
    let a = answer(&mut r, 4);
    let entry = approvals(&env).pop().expect("journaled before the answer");
    assert!(refusal_text(&a).contains("session ended"), "{a}");
    assert_eq!(entry["reason"], "session-ended");
    assert_eq!(entry["policy_id"], held["id"]);
    r.finish();
    let err = env.fails(&["approve", held["id"].as_str().unwrap()], 1);
    assert!(err.contains("no call is held"), "{err}");
    assert!(
        env.ok(&["log"])
            .contains("rejected: the session ended while it was held"),
    );
}

#[test]
fn the_relay_dying_rejects_its_held_calls_as_connection_dropped() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"orphan"}"#));
    let held = watch.next();
    r.child.kill().unwrap();
    r.child.wait().unwrap();
    let entry = wait_for_approval(&env, 1);
    assert_eq!(entry["decision"], "rejected");
    assert_eq!(entry["reason"], "connection-dropped");
    assert_eq!(entry["policy_id"], held["id"]);
    let err = env.fails(&["approve", held["id"].as_str().unwrap()], 1);
    assert!(err.contains("no call is held"), "{err}");
    assert!(
        env.ok(&["log"])
            .contains("rejected: the relay's connection dropped while it was held")
    );
}

#[test]
fn arguments_too_large_to_show_are_rejected_at_once_because_nobody_could_check_them() {
    let env = Env::new();
    env.ok(&["policy", "ask", "echo"]);
    let mut r = env.relay("demo");
    r.handshake();
    let big = "a".repeat(1024 * 1024 + 10);
    r.send(&call("6", "echo", &format!(r#"{{"text":"{big}"}}"#)));
    let a = answer(&mut r, 6);
    let entry = approvals(&env).pop().expect("journaled before the answer");
    assert!(
        refusal_text(&a).contains("too large to show"),
        "{}",
        refusal_text(&a)
    );
    assert_eq!(entry["reason"], "arguments-unknown");
    assert_eq!(entry["decision"], "rejected");
    r.finish();
}

#[test]
fn approve_and_reject_refuse_a_malformed_id_and_a_reason_with_control_characters() {
    let env = Env::new();
    let err = env.fails(&["approve", "nope"], 1);
    assert!(err.contains("not a hold id"), "{err}");
    let err = env.fails(&["reject", "0123456789ab", "--reason", "a\nb"], 1);
    assert!(err.contains("control character"), "{err}");
    let err = env.fails(&["reject", "0123456789ab", "--reason", "a\u{202e}b"], 1);
    assert!(err.contains("U+202E"), "{err}");
    let err = env.fails(&["reject", "0123456789ab"], 1);
    assert!(err.contains("no call is held with id"), "{err}");
    assert_eq!(env.ok(&["approve"]), "no calls are held\n");
}

#[test]
fn an_approval_timeout_out_of_bounds_is_refused_with_a_clear_error() {
    let env = Env::new();
    env.write_config("[approval]\ntimeout = \"0s\"\n");
    let err = env.fails(&["approve"], 1);
    assert!(err.contains("approval timeout \"0s\" is outside"), "{err}");
}

#[test]
fn the_log_tells_a_rule_refusal_a_person_and_a_timeout_apart() {
    let env = Env::new();
    env.write_config("[approval]\ntimeout = \"1s\"\n");
    env.ok(&["policy", "deny", "delete_file"]);
    env.ok(&["policy", "ask", "echo"]);
    let watch = Watch::start(&env);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "delete_file", r#"{"path":"/x"}"#));
    assert!(is_refusal(&answer(&mut r, 1)));
    r.send(&call("2", "echo", r#"{"text":"person"}"#));
    let held = watch.next();
    env.ok(&["reject", held["id"].as_str().unwrap()]);
    assert!(is_refusal(&answer(&mut r, 2)));
    r.send(&call("3", "echo", r#"{"text":"timeout"}"#));
    assert!(is_refusal(&answer(&mut r, 3)));
    r.finish();
    let log = env.ok(&["log"]);
    let line_of = |needle: &str| {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{log}"))
            .to_string()
    };
    assert!(line_of("seq 1 ").contains("deny"));
    assert!(line_of("seq 2 rejected by a person").contains("call.approval"));
    assert!(line_of("seq 3 rejected: nobody decided in time").contains("rejected"));
}

#[test]
fn a_word_that_cannot_be_journaled_refuses_the_call_and_tells_the_person() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"unrecorded"}"#));
    let held = watch.next();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_approvals BEFORE INSERT ON journal WHEN NEW.kind = 'call.approval' \
         BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .unwrap();
    let err = env.fails(&["approve", held["id"].as_str().unwrap()], 1);
    assert!(err.contains("could not be recorded"), "{err}");
    let a = answer(&mut r, 1);
    assert!(refusal_text(&a).contains("could not get a decision"), "{a}");
    db.execute_batch("DROP TRIGGER no_approvals;").unwrap();
    r.barrier(1);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(10).any(|w| w == b"unrecorded")),
        "an unrecorded approval reached the server"
    );
    r.finish();
}

#[test]
fn losing_the_daemon_refuses_every_held_call_at_once() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"first"}"#));
    watch.next();
    r.send(&call("2", "echo", r#"{"text":"second"}"#));
    watch.next();
    drop(watch);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(env.daemon_pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut ids: Vec<i64> = (0..2)
        .map(|_| {
            let v = r.recv_json();
            assert!(refusal_text(&v).contains("could not get a decision"), "{v}");
            v["id"].as_i64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(10).any(|w| w == b"tools/call")),
        "a held call reached the server without a word"
    );
    let stderr = r.finish();
    assert!(stderr.contains("lost the daemon"), "{stderr}");
}

#[test]
fn an_approved_call_is_charged_to_the_budget_and_one_approved_past_it_is_refused_as_over_budget() {
    let env = Env::new();
    env.ok(&["policy", "ask", "echo"]);
    env.ok(&["policy", "budget", "1", "--tool", "echo"]);
    let watch = Watch::start(&env);
    let mut r = env.relay("demo");
    r.handshake();

    // The first approved call uses the budget's one call.
    r.send(&call("1", "echo", r#"{"text":"one"}"#));
    let id = watch.next()["id"].as_str().unwrap().to_string();
    env.ok(&["approve", &id]);
    assert!(!is_refusal(&answer(&mut r, 1)));

    // The second is approved by a person too, but the session has no room left: refused, and
    // the journal and the person are told why.
    r.send(&call("2", "echo", r#"{"text":"two"}"#));
    let id = watch.next()["id"].as_str().unwrap().to_string();
    let said = env.ok(&["approve", &id]);
    assert!(said.contains("but it was refused"), "{said}");
    assert!(said.contains("budget"), "{said}");
    let text = refusal_text(&answer(&mut r, 2));
    assert!(text.contains("budget"), "{text}");
    let e = wait_for_approval(&env, 2);
    assert_eq!(e["decision"], "rejected");
    assert_eq!(e["reason"], "over-budget");
    assert_eq!(
        r.recorded().len(),
        3,
        "initialize, initialized and call 1 only"
    );
    r.finish();
    env.ok(&["verify"]);
}

#[test]
fn an_approval_never_overrides_a_deny_added_while_the_call_was_held() {
    let (env, watch, mut r) = held_for("echo");
    r.send(&call("1", "echo", r#"{"text":"one"}"#));
    let id = watch.next()["id"].as_str().unwrap().to_string();
    // While it waits, the rules change: echo is now denied on this connector.
    env.ok(&["policy", "deny", "echo", "--connector", "demo"]);
    let said = env.ok(&["approve", &id]);
    assert!(said.contains("but it was refused"), "{said}");
    refusal_text(&answer(&mut r, 1));
    let e = wait_for_approval(&env, 1);
    assert_eq!(e["decision"], "rejected");
    assert_eq!(e["reason"], "policy");
    assert_eq!(r.recorded().len(), 2, "the server saw the handshake only");
    r.finish();
}

#[test]
fn held_calls_approved_past_a_context_session_limit_are_refused() {
    let env = Env::new();
    let path = env.dir.path().join("once.cedar");
    std::fs::write(
        &path,
        r#"@id("echo-asks")
@holdcall_effect("ask")
forbid (principal, action, resource in ToolName::"echo");

@id("echo-once-per-session")
forbid (principal, action, resource in ToolName::"echo")
when { context.session.tool_calls >= 1 };
"#,
    )
    .unwrap();
    env.ok(&["policy", "import", path.to_str().unwrap()]);
    let watch = Watch::start(&env);
    let mut r = env.relay("demo");
    r.handshake();
    // Both are held while no echo has run yet, so the limit does not refuse either at once.
    r.send(&call("1", "echo", r#"{"text":"one"}"#));
    let first = watch.next()["id"].as_str().unwrap().to_string();
    r.send(&call("2", "echo", r#"{"text":"two"}"#));
    let second = watch.next()["id"].as_str().unwrap().to_string();
    env.ok(&["approve", &first]);
    assert!(!is_refusal(&answer(&mut r, 1)));
    // The first one ran: approving the second would make two, which the policy forbids.
    let said = env.ok(&["approve", &second]);
    assert!(said.contains("but it was refused"), "{said}");
    assert!(said.contains("echo-once-per-session"), "{said}");
    refusal_text(&answer(&mut r, 2));
    assert_eq!(wait_for_approval(&env, 2)["reason"], "policy");
    r.finish();
    env.ok(&["verify"]);
}

#[test]
fn one_session_cannot_hold_more_than_its_share_and_starve_the_others() {
    let (env, watch, mut r) = held_for("echo");
    let share = holdcall::limits::HELD_CALLS_PER_SESSION_MAX;
    for i in 1..=share {
        r.send(&call(&i.to_string(), "echo", r#"{"text":"x"}"#));
        watch.next();
    }
    // One more from the same session is refused at once, and the journal says why.
    let over = share + 1;
    r.send(&call(&over.to_string(), "echo", r#"{"text":"x"}"#));
    assert!(is_refusal(&answer(&mut r, over as i64)));
    let e = wait_for_approval(&env, over as i64);
    assert_eq!(e["decision"], "rejected");
    assert_eq!(e["reason"], "capacity");
    // Another session can still have a call held.
    let mut other = env.relay("demo");
    other.handshake();
    other.send(&call("1", "echo", r#"{"text":"y"}"#));
    assert_eq!(watch.next()["tool"], "echo");
    drop(other);
    r.finish();
}
