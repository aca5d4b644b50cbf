//! The relay through the real binary, a real daemon and the recording demo server: what reaches
//! the server, what the client sees, and that refusals are exact.

use crate::common::*;

#[test]
fn an_allowed_call_reaches_the_server_byte_for_byte() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    // Odd spacing, an escaped name and unicode: the server must get these exact bytes.
    let line = "{ \"jsonrpc\" : \"2.0\", \"id\" : 7 , \"method\":\"tools/call\",\"params\":{\"name\":\"\\u0065cho\",\"arguments\":{\"text\":\"caf\u{e9} \\u00e9 1.50 \u{1f680}\"}} }\n";
    r.send(line.as_bytes());
    let answer = r.recv_json();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let rec = r.recorded();
    assert!(
        rec.iter().any(|l| l == line.as_bytes()),
        "server got {rec:?}"
    );
    r.finish();
}

#[test]
fn a_denied_call_never_reaches_the_server_and_is_answered_as_a_tool_error() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("41", "delete_file", r#"{"path":"/etc/passwd"}"#));
    let answer = r.recv_str();
    assert_eq!(
        answer,
        "{\"jsonrpc\":\"2.0\",\"id\":41,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Holdcall refused this call: a policy rule denies it. Do not retry automatically.\"}],\"isError\":true}}\n"
    );
    r.barrier(1);
    assert!(
        !r.recorded()
            .iter()
            .any(|l| l.windows(11).any(|w| w == b"delete_file")),
        "the server saw the denied call"
    );
    r.finish();
    let rows = journal_rows(&env.db());
    let req = rows
        .iter()
        .find(|e| e["kind"] == "call.request")
        .expect("the call is journaled");
    assert_eq!(req["decision"], "deny");
    assert_eq!(req["tool"], "delete_file");
    assert_eq!(req["policy_id"], "rule-1");
}

#[test]
fn everything_that_is_not_a_tool_call_is_relayed_byte_for_byte_both_ways() {
    let env = Env::new();
    let mut r = env.relay("demo");
    let lines: Vec<&[u8]> = vec![
        INIT.as_bytes(),
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
        b"   \n",
        b"{\"jsonrpc\" :\"2.0\",\"id\":\"x y\",\"method\":\"tools/list\" }\n",
        b"[{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}]\n",
        b"null\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890123,\"method\":\"ping\",\"params\":{\"a\":1,\"a\":2}}\n",
    ];
    for l in &lines {
        r.send(l);
    }
    let answers = r.barrier(1);
    let rec = r.recorded();
    for l in &lines {
        let with_nl = if l.ends_with(b"\n") {
            l.to_vec()
        } else {
            [*l, b"\n"].concat()
        };
        assert!(
            rec.contains(&with_nl),
            "missing {:?}",
            String::from_utf8_lossy(l)
        );
    }
    // The server's own bytes come back untouched: its answer to the big id keeps every digit.
    let mut saw_big = false;
    for l in answers {
        if l.contains("12345678901234567890123") {
            saw_big = true;
            assert!(l.starts_with("{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890123,"));
        }
    }
    assert!(saw_big);
    r.finish();
}

#[test]
fn a_refused_call_keeps_an_id_beyond_two_to_the_53_and_string_and_null_ids() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    for id in [
        "123456789012345678901234567890",
        "\"abc\\\"d\"",
        "null",
        "-0.5e3",
    ] {
        r.send(&call(id, "delete_file", "{}"));
        let l = r.recv_str();
        assert!(
            l.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":")),
            "{l}"
        );
    }
    r.finish();
}

#[test]
fn a_refusal_carries_result_type_only_once_the_session_speaks_2026_07_28() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.send(&call("1", "delete_file", "{}"));
    assert!(
        !r.recv_str().contains("resultType"),
        "no handshake yet: the older shape"
    );
    r.send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    r.recv();
    r.send(&call("2", "delete_file", "{}"));
    let l = r.recv_str();
    assert!(
        l.ends_with(",\"isError\":true,\"resultType\":\"complete\"}}\n"),
        "{l}"
    );
    r.finish();
}

#[test]
fn duplicate_keys_case_variants_and_batches_cannot_smuggle_a_call() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    // A repeated method: which one would the server take? Neither: dropped, unanswered.
    r.send(br#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"delete_file"}}"#);
    // An escaped key is the same key.
    r.send(br#"{"jsonrpc":"2.0","id":2,"method":"ping","met\u0068od":"tools/call","params":{"name":"delete_file"}}"#);
    // A repeated name inside params: answered as unreadable.
    r.send(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"delete_file"}}"#);
    let a = r.recv_json();
    assert_eq!(a["id"], 3);
    assert!(is_refusal(&a), "{a}");
    // A repeated key inside arguments: a policy could read one value and the server another.
    r.send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","text":"b"}}}"#);
    let a = r.recv_json();
    assert_eq!(a["id"], 4);
    assert!(is_refusal(&a), "{a}");
    // A batch carrying a call is refused whole; each element with an id gets an error.
    r.send(br#"[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_file"}},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":null,"method":"ping"}]"#);
    let a = r.recv_json();
    let arr = a.as_array().expect("a batch answer");
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["id"], 5);
    assert_eq!(arr[0]["error"]["code"], -32000);
    assert!(arr[1]["id"].is_null());
    // A case-variant key is the same key to a case-insensitive server (Go's encoding/json,
    // .NET's Web defaults): a repeated method, dropped unanswered. tests/hostile.rs has more.
    r.send(br#"{"jsonrpc":"2.0","id":6,"method":"ping","Method":"tools/call","params":{"name":"delete_file"}}"#);
    // A case-variant key alone is read as a case-insensitive server reads it: a call, decided.
    r.send(br#"{"jsonrpc":"2.0","id":7,"METHOD":"tools/call","params":{"name":"delete_file"}}"#);
    let a = r.recv_json();
    assert_eq!(a["id"], 7);
    assert!(is_refusal(&a), "{a}");
    // A carriage return: Python and Node readers split the line there, JSON does not.
    r.send(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"params\":\r{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\"}}\r}\n");
    assert!(r.barrier(1).is_empty(), "a dropped line was answered");
    let rec = r.recorded();
    for l in &rec {
        let s = String::from_utf8_lossy(l);
        assert!(
            !s.contains("delete_file"),
            "the server received a call: {s}"
        );
    }
    r.finish();
    let anomalies: Vec<String> = journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly")
        .map(|e| e["anomaly"].as_str().unwrap().to_string())
        .collect();
    assert!(
        anomalies.contains(&"duplicate_key".to_string()),
        "{anomalies:?}"
    );
    assert!(anomalies.contains(&"batch".to_string()), "{anomalies:?}");
}

#[test]
fn unreadable_frames_are_not_relayed_and_are_recorded() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    r.send(br#"{"jsonrpc":"2.0","id":3,"method":"ping","x":NaN}"#);
    r.send(b"\xff\xfe{}\n");
    r.send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":7}}"#);
    let a = r.recv_json();
    assert_eq!(a["id"], 4);
    assert!(is_refusal(&a));
    r.barrier(1);
    let rec = r.recorded();
    assert!(
        !rec.iter()
            .any(|l| l.windows(3).any(|w| w == b"NaN") || l.starts_with(b"\xff")),
        "{rec:?}"
    );
    let stderr = r.finish();
    assert!(stderr.contains("not relaying"), "{stderr}");
    let anomalies: Vec<String> = journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly")
        .map(|e| e["anomaly"].as_str().unwrap().to_string())
        .collect();
    for a in ["framing", "malformed_json", "unreadable_call"] {
        assert!(
            anomalies.contains(&a.to_string()),
            "{a} missing from {anomalies:?}"
        );
    }
}

#[test]
fn stdout_carries_only_protocol_even_with_every_log_on() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let record = env.dir.path().join("rec.log");
    let mut c = env.demo_relay_cmd("demo", &record);
    c.env("HOLDCALL_LOG", "trace")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut w = child.stdin.take().unwrap();
        w.write_all(INIT.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        w.write_all(&call("1", "delete_file", "{}")).unwrap();
        w.write_all(b"\n").unwrap();
        w.write_all(&call("2", "echo", r#"{"text":"x"}"#)).unwrap();
        w.write_all(b"\nnot json\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
    }
}

#[test]
fn the_server_dies_with_the_relay_even_when_the_relay_is_killed() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.child.kill().unwrap(); // SIGKILL: the relay cannot clean up.
    r.child.wait().unwrap();
    // The server holds the other end of the relay's stderr pipe; it reaches end-of-file only
    // when the server has exited too.
    let stderr = r.stderr.take().unwrap().recv_timeout(PATIENCE);
    assert!(stderr.is_ok(), "the server outlived the relay");
}

#[test]
fn a_large_response_and_a_refusal_never_splice() {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "big", r#"{"kib":512}"#));
    r.send(&call("2", "delete_file", "{}"));
    let mut got = [r.recv_json(), r.recv_json()];
    got.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(
        got[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        512 * 1024
    );
    assert!(is_refusal(&got[1]));
    r.finish();
}

#[test]
fn a_server_that_ignores_its_input_closing_and_sigterm_is_killed() {
    let env = Env::new();
    let mut r = env.relay_with("demo", &["--stubborn"]);
    r.handshake();
    r.stdin = None; // the client goes away
    assert!(r.child.wait().unwrap().success());
    // The server held the relay's stderr open; end-of-file means it is gone too.
    let stderr = r.stderr.take().unwrap().recv_timeout(PATIENCE);
    assert!(stderr.is_ok(), "the stubborn server outlived the relay");
}

#[test]
fn a_server_that_dies_mid_call_ends_the_relay() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("9", "quit", "{}"));
    // The client still holds the relay's input open; the relay leaves because the server did.
    assert!(r.child.wait().unwrap().success());
    let rows = journal_rows(&env.db());
    assert!(rows.iter().any(|e| e["kind"] == "session.end"), "{rows:?}");
}

#[test]
fn a_frame_at_the_cap_is_relayed_and_one_byte_over_is_dropped_whole() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    let cap = holdcall::limits::FRAME_BYTES_MAX;
    let frame_of = |len: usize| {
        let head = br#"{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":""#;
        let tail = b"\"}}\n";
        let mut v = head.to_vec();
        v.resize(len - tail.len(), b'x');
        v.extend_from_slice(tail);
        assert_eq!(v.len(), len);
        v
    };
    r.send(&frame_of(cap + 1));
    r.send(&frame_of(cap));
    let a = r.recv_json();
    assert_eq!(a["id"], "big", "only the frame at the cap is answered");
    r.barrier(1);
    let rec = r.recorded();
    assert_eq!(rec.iter().filter(|l| l.len() >= cap).count(), 1);
    assert!(rec.iter().all(|l| l.len() <= cap));
    let stderr = r.finish();
    assert!(stderr.contains("not relaying a line of"), "{stderr}");
    assert_eq!(oversized_anomalies(&env), 1);
}

fn oversized_anomalies(env: &Env) -> usize {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly" && e["anomaly"] == "oversized")
        .count()
}

#[test]
fn a_server_line_over_the_cap_never_reaches_the_client() {
    let env = Env::new();
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "big", r#"{"kib":65536}"#)); // 64 MiB of text plus its envelope
    let before = r.barrier(1);
    assert!(before.is_empty(), "part of an oversized line came through");
    let stderr = r.finish();
    assert!(stderr.contains("from the server"), "{stderr}");
    assert_eq!(oversized_anomalies(&env), 1);
}

/// The reason of the one `session.end` in the journal, once the relay's session has ended.
fn session_end_reason(env: &Env) -> serde_json::Value {
    let mut reason = serde_json::Value::Null;
    eventually("the session's end is journaled", || {
        let rows = journal_rows(&env.db());
        let end = rows.iter().find(|e| e["kind"] == "session.end");
        if let Some(end) = end {
            reason = end["reason"].clone();
        }
        end.is_some()
    });
    reason
}

/// Whether the relay `pid` no longer holds the write end of its server's stdin: the server is
/// the relay's child whose fd 0 is a pipe, and no fd of the relay names that pipe any more.
fn server_input_closed(pid: u32) -> bool {
    let link = |p: std::path::PathBuf| std::fs::read_link(p).ok();
    let children: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let Some(input) = children
        .iter()
        .filter_map(|c| link(format!("/proc/{c}/fd/0").into()))
        .find(|l| l.to_string_lossy().starts_with("pipe:"))
    else {
        return false;
    };
    !std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| link(fd.path()) == Some(input.clone()))
}

fn signal(r: &Relay, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(r.child.id() as i32), signal);
}

#[test]
fn a_health_check_that_initializes_and_closes_is_an_ordinary_end_of_the_session() {
    // Regression (issue 12, item 9): `claude mcp list` connects, initializes and closes; the
    // journal said "the relay's connection closed before it ended the session", an alarm.
    let env = Env::new();
    let mut r = env.relay("demo");
    r.send(INIT.as_bytes());
    assert_eq!(r.recv_json()["id"], 0);
    r.finish();
    assert_eq!(session_end_reason(&env), "the client closed the connection");
}

#[test]
fn a_client_that_closes_then_stops_and_kills_the_relay_still_gets_its_session_ended() {
    // The MCP SDKs close a server by ending its input, then SIGTERM, then SIGKILL, each after a
    // wait of 2 s (the first is shorter here, so the SIGTERM finds the relay still giving the
    // server its grace). Behind a server that ignores both its input's end and
    // SIGTERM, the relay spent 4 s stopping it, was killed first, and the session's end was
    // journaled as the alarm.
    let env = Env::new();
    let mut r = env.relay_with("demo", &["--stubborn"]);
    r.send(INIT.as_bytes());
    assert_eq!(r.recv_json()["id"], 0);
    r.stdin = None;
    // The client's SIGTERM comes while the relay is giving the server its grace: once the
    // relay has closed the server's input.
    let relay = r.child.id();
    eventually("the relay closed the server's input", || {
        server_input_closed(relay)
    });
    signal(&r, nix::sys::signal::Signal::SIGTERM);
    // The SDKs wait 2 s, then SIGKILL: the relay must have ended by then, which its stdout
    // closing says.
    let ended = matches!(
        r.lines.recv_timeout(std::time::Duration::from_secs(2)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
    );
    let exited = if ended {
        Some(r.child.wait().unwrap())
    } else {
        r.child.try_wait().unwrap()
    };
    signal(&r, nix::sys::signal::Signal::SIGKILL);
    assert!(
        exited.is_some_and(|s| s.success()),
        "the relay had not ended within 2 s of SIGTERM: {exited:?}"
    );
    // It ended because the client closed its input; SIGTERM only hurried the server's stop.
    assert_eq!(session_end_reason(&env), "the client closed the connection");
}

#[test]
fn a_client_that_stops_the_relay_with_sigterm_ends_the_session_ordinarily() {
    let env = Env::new();
    let mut r = env.relay_with("demo", &["--stubborn"]);
    r.handshake();
    signal(&r, nix::sys::signal::Signal::SIGTERM);
    let status = r.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        session_end_reason(&env),
        "the client stopped the relay (SIGTERM, SIGHUP or SIGINT)"
    );
}

#[test]
fn a_client_that_closes_while_the_server_is_still_starting_ends_the_session_ordinarily() {
    // The client gives up before the server has even read its initialize.
    let env = Env::new();
    let record = env.new_record("slow");
    let bin = Env::bin();
    // The server waits for a writer on a FIFO that nobody opens: it is still starting when
    // the client closes, however slow the machine.
    let gate = env.dir.path().join("never-opened");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let script = format!(
        "cat '{}' >/dev/null; exec '{}' demo-server --record '{}'",
        gate.display(),
        bin.display(),
        record.display()
    );
    let mut r = spawn_relay(env.serve_shell(&script), record);
    r.send(INIT.as_bytes());
    r.finish();
    assert_eq!(session_end_reason(&env), "the client closed the connection");
}

#[test]
fn a_relay_whose_stdin_and_stdout_are_sockets_as_node_clients_give_them_decides_answers_and_ends() {
    // Issue 18: the relay reads a pipe or socket stdin and writes its stdout as non-blocking
    // descriptors of its own (relay::stdio). Node's child_process (Claude Code, Gemini CLI, the
    // inspector) hands a server socket pairs, not pipes; the other tests all use pipes.
    use std::io::Write as _;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    let env = Env::new();
    env.ok(&["policy", "deny", "rm"]);
    let record = env.new_record("demo");
    let (mut to_relay, relay_in) = UnixStream::pair().unwrap();
    let (from_relay, relay_out) = UnixStream::pair().unwrap();
    let mut child = env
        .demo_relay_cmd("demo", &record)
        .stdin(std::process::Stdio::from(OwnedFd::from(relay_in)))
        .stdout(std::process::Stdio::from(OwnedFd::from(relay_out)))
        .spawn()
        .unwrap();
    let _reap = KillOnDrop(vec![child.id() as i32]);
    let lines = lines_of(from_relay);
    let mut send = |line: &str| {
        to_relay.write_all(line.as_bytes()).unwrap();
        to_relay.write_all(b"\n").unwrap();
    };
    let recv = || -> serde_json::Value {
        serde_json::from_slice(&lines.recv_timeout(PATIENCE).expect("an answer")).unwrap()
    };
    send(INIT);
    assert_eq!(recv()["id"], 0);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(
        std::str::from_utf8(&call("1", "echo", r#"{"text":"over a socket"}"#))
            .unwrap()
            .trim_end(),
    );
    let allowed = recv();
    assert!(!is_refusal(&allowed), "{allowed}");
    assert!(allowed.to_string().contains("over a socket"), "{allowed}");
    send(
        std::str::from_utf8(&call("2", "rm", "{}"))
            .unwrap()
            .trim_end(),
    );
    assert!(is_refusal(&recv()));
    // The client closing its end of stdin ends the session.
    drop(to_relay);
    let (tx, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = exited
        .recv_timeout(PATIENCE)
        .expect("the relay ended once its input closed")
        .unwrap();
    assert!(status.success(), "{status}");
}
