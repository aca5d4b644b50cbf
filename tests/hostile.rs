//! Hostile input, one test per row of `docs/hostile-input.md` that `tests/relay.rs` does not
//! already prove: what a client or a server can put on the wire to hide a call, crash the
//! relay or hang it. Through the real binary, a real daemon that denies `delete_file`, and the
//! recording demo server (or the raw fixture, for a server that misbehaves). Most rows are a
//! `Case`: the lines a client sends, what each gets back, and what the server and the journal
//! must (not) show afterwards, all checked by `check`.

use crate::common::*;
use std::io::Write;

const UNREADABLE: &str = "Holdcall refused this call: its tool name could not be read \
     unambiguously. Do not retry automatically.";

fn refusal(id: &str, text: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"isError\":true}}}}\n"
    )
}

fn denying_env() -> Env {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);
    env
}

/// Asserts the server never received a line containing `needle`.
fn never_reached_the_server(r: &Relay, needle: &[u8]) {
    for l in r.recorded() {
        assert!(
            !l.windows(needle.len()).any(|w| w == needle),
            "the server got {}",
            String::from_utf8_lossy(&l)
        );
    }
}

fn anomalies(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "anomaly")
        .map(|e| e["anomaly"].as_str().unwrap().to_string())
        .collect()
}

fn decided_tools(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .map(|e| e["tool"].as_str().unwrap().to_string())
        .collect()
}

/// What the relay answers to one line of a `Case`.
enum Then {
    /// Nothing: the line is dropped, or it is a notification.
    Silent,
    /// Exactly the refusal of a call with this raw id and text.
    Refused(&'static str, &'static str),
    /// A JSON-RPC error -32600 from Holdcall, for the request with this id.
    Rejected(u64),
    /// The batch is refused whole (-32000); its first element has this id.
    BatchRefused(u64),
    /// Allowed: the server's answer to this id, no error, and the server got the exact line.
    Relayed(u64),
}

/// One row of hostile input: lines sent through one relay session of a home that denies
/// `delete_file`, each with what comes back, then what the server and the journal show.
#[derive(Default)]
struct Case {
    lines: Vec<(Vec<u8>, Then)>,
    /// Bytes no line the server received may contain.
    never_reach: Vec<Vec<u8>>,
    /// The anomalies journaled, in any order (None: not checked).
    anomalies: Option<Vec<String>>,
    /// The tools a decision was asked for, in order (None: not checked).
    decided: Option<Vec<String>>,
    /// What the relay's stderr must say.
    stderr: Option<&'static str>,
}

impl Case {
    fn send(mut self, line: impl AsRef<[u8]>, then: Then) -> Case {
        self.lines.push((line.as_ref().to_vec(), then));
        self
    }
    fn silent(self, line: impl AsRef<[u8]>) -> Case {
        self.send(line, Then::Silent)
    }
    fn never_reaches(mut self, needle: impl AsRef<[u8]>) -> Case {
        self.never_reach.push(needle.as_ref().to_vec());
        self
    }
    fn anomalies(mut self, kinds: &[&str]) -> Case {
        self.anomalies = Some(kinds.iter().map(ToString::to_string).collect());
        self
    }
    fn decided(mut self, tools: &[&str]) -> Case {
        self.decided = Some(tools.iter().map(ToString::to_string).collect());
        self
    }
    fn stderr_says(mut self, text: &'static str) -> Case {
        self.stderr = Some(text);
        self
    }
}

/// Runs `case`: every line in order, each answer checked as it comes (a line expected to be
/// silent that is answered fails the next check, or the barrier at the end), then the server's
/// record, the relay's stderr and the journal.
fn check(case: Case) {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    for (line, then) in &case.lines {
        r.send(line);
        let what = String::from_utf8_lossy(line);
        match then {
            Then::Silent => {}
            Then::Refused(id, text) => assert_eq!(r.recv_str(), refusal(id, text), "{what}"),
            Then::Rejected(id) => {
                let a = r.recv_json();
                assert_eq!(a["id"], *id, "{what}: {a}");
                assert_eq!(a["error"]["code"], -32600, "{what}: {a}");
                assert!(
                    a["error"]["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("Holdcall refused this request"),
                    "{what}: {a}"
                );
            }
            Then::BatchRefused(id) => {
                let a = r.recv_json();
                assert_eq!(a[0]["id"], *id, "{what}: {a}");
                assert_eq!(a[0]["error"]["code"], -32000, "{what}: {a}");
            }
            Then::Relayed(id) => {
                let a = r.recv_json();
                assert_eq!(a["id"], *id, "{what}: {a}");
                assert_eq!(a["result"]["isError"], false, "{what}: {a}");
            }
        }
    }
    let before = r.barrier(1);
    assert!(before.is_empty(), "these lines were answered: {before:?}");
    for needle in &case.never_reach {
        never_reached_the_server(&r, needle);
    }
    for (line, then) in &case.lines {
        if matches!(then, Then::Relayed(_)) {
            assert!(
                r.recorded().contains(&[line.as_slice(), b"\n"].concat()),
                "the server did not get {}",
                String::from_utf8_lossy(line)
            );
        }
    }
    let stderr = r.finish();
    if let Some(text) = case.stderr {
        assert!(stderr.contains(text), "{stderr}");
    }
    if let Some(mut expected) = case.anomalies {
        let mut got = anomalies(&env);
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
    }
    if let Some(expected) = case.decided {
        assert_eq!(decided_tools(&env), expected);
    }
}

#[test]
fn a_call_that_repeats_a_top_level_key_is_dropped_unanswered_and_never_reaches_the_server() {
    check(
        Case::default()
            // Which id would the refusal carry, which would the server answer?
            .silent(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"delete_file"}}"#)
            // Two params: one to decide on, one to run.
            .silent(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"},"params":{"name":"delete_file"}}"#)
            // The same key, spelled with an escape.
            .silent(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"},"p\u0061rams":{"name":"delete_file"}}"#)
            .never_reaches("tools/call")
            .anomalies(&["duplicate_key"; 3])
            .decided(&[]),
    );
}

#[test]
fn a_call_that_repeats_a_key_in_its_params_is_refused_as_unreadable() {
    check(
        Case::default()
            .send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"arguments":{"path":"/"}}}"#, Then::Refused("1", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1,"progressToken":2}}}"#, Then::Refused("2", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","n\u0061me":"delete_file"}}"#, Then::Refused("3", UNREADABLE))
            .never_reaches("tools/call")
            .anomalies(&["duplicate_key"; 3])
            .decided(&[]),
    );
}

#[test]
fn a_call_that_repeats_a_key_anywhere_in_its_arguments_is_refused() {
    check(
        Case::default()
            .send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"opts":{"force":false,"force":true}}}}"#, Then::Refused("1", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"items":[{"a":1},{"a":1,"a":2}]}}}"#, Then::Refused("2", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"/tmp/x","t\u0065xt":"/etc/passwd"}}}"#, Then::Refused("3", UNREADABLE))
            .never_reaches("tools/call")
            .anomalies(&["duplicate_key"; 3]),
    );
}

#[test]
fn case_variant_keys_are_read_the_way_a_case_insensitive_server_would() {
    // Go's encoding/json (the Go SDK before CVE-2026-27896, and servers built on it) and .NET
    // with Web defaults match keys case-insensitively, Go folding `ſ` to s and the Kelvin sign
    // to k too, and keep the last of two matches. So a case variant is the same key here.
    check(
        Case::default()
            // Next to `method`, `Method` is a repeated key: dropped, unanswered.
            .silent(br#"{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"delete_file"}}"#)
            // Alone, `METHOD` is the method: decided, here denied.
            .send(br#"{"jsonrpc":"2.0","id":2,"METHOD":"tools/call","params":{"name":"delete_file"}}"#, Then::Refused("2", DENIED))
            // `Name` next to `name`, `paramſ`'s `NAME`, a case variant in the arguments: refused.
            .send(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","Name":"delete_file"}}"#, Then::Refused("3", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","TEXT":"b"}}}"#, Then::Refused("4", UNREADABLE))
            .send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"ke\u{017f}\":1,\"\u{212a}es\":2,\"kes\":3}}}", Then::Refused("5", UNREADABLE))
            .send("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"pa\u{17f}\u{17f}\":1,\"PASS\":2}}}", Then::Refused("6", UNREADABLE))
            .send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"param\u{017f}\":{\"NAME\":\"delete_file\"}}", Then::Refused("7", DENIED))
            // In a batch, `Method` is the method too: the batch carries a call and is refused whole.
            .send(br#"[{"jsonrpc":"2.0","id":8,"Method":"tools/call","params":{"name":"delete_file"}}]"#, Then::BatchRefused(8))
            // A single key in another case is no ambiguity: an ordinary call, allowed and relayed.
            .send(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"Text":"ok"}}}"#, Then::Relayed(9))
            .never_reaches("delete_file")
            .decided(&["delete_file", "delete_file", "echo"]),
    );
}

#[test]
fn a_batch_that_nests_or_garbles_an_element_is_never_relayed() {
    check(
        Case::default()
            .silent(br#"[[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file"}}]]"#)
            .silent(br#"[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/call","params":{"name":"delete_file"}}]"#)
            .silent(br#"[{"jsonrpc":"2.0","id":4,"method":"ping"},"tools/call"]"#)
            .never_reaches("\"id\":1,")
            .never_reaches("\"id\":2,")
            .never_reaches("\"id\":3,")
            .never_reaches("\"id\":4,")
            .anomalies(&["batch"; 3]),
    );
}

#[test]
fn non_utf8_bytes_make_the_line_unreadable_and_a_call_in_it_never_runs() {
    check(
        Case::default()
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\xff\"}}")
            // An overlong '/' and a UTF-8-encoded surrogate: invalid UTF-8 that lax decoders
            // turn into something else.
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"path\":\"\xc0\xaf\"}}}")
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\xed\xa0\x80\"}}")
            // Latin-1 in a harmless request: still not UTF-8, still not relayed.
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"x\":\"caf\xe9\"}}")
            .never_reaches("\"id\":1,")
            .never_reaches("\"id\":2,")
            .never_reaches("\"id\":3,")
            .never_reaches("\"id\":4,")
            .stderr_says("not exactly one valid JSON value")
            .anomalies(&["malformed_json"; 4])
            .decided(&[]),
    );
}

#[test]
fn control_characters_raw_in_a_string_are_malformed_and_escaped_in_a_tool_name_are_refused() {
    check(
        Case::default()
            // Raw control characters inside a string are not JSON: dropped, unanswered (a raw CR
            // is caught first, as a framing anomaly: some servers' readers end a line there).
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"delete\x00_file\"}}")
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\tb\"}}}")
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"a\rb\"}}}")
            // Escaped, they are valid JSON, but a name with a control character cannot be
            // decided: no rule can name it and a display would hide it. Refused as unreadable.
            .send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete\u0000_file"}}"#, Then::Refused("4", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_file\u001b[2K"}}"#, Then::Refused("5", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"delete_file\u007f"}}"#, Then::Refused("6", UNREADABLE))
            .send(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file\u0085"}}"#, Then::Refused("7", UNREADABLE))
            // In arguments an escaped control character is the tool's business: decided and
            // relayed.
            .send(br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\u0000b"}}}"#, Then::Relayed(8))
            .never_reaches("delete")
            .anomalies(&["framing", "malformed_json", "malformed_json", "unreadable_call", "unreadable_call", "unreadable_call", "unreadable_call"])
            .decided(&["echo"]),
    );
}

#[test]
fn allowed_calls_keep_big_string_and_null_ids_as_written_and_their_outcomes_are_recorded() {
    let env = denying_env();
    let mut r = env.relay("demo");
    r.handshake();
    let ids = [
        "123456789012345678901234567890",
        r#""a\"b""#,
        r#""\u0041""#,
        "null",
        "-0.5e3",
        "1.0",
    ];
    for id in ids {
        let line = call(id, "echo", r#"{"text":"x"}"#);
        r.send(&line);
        let answer = r.recv_str();
        assert!(
            answer.starts_with(&format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":")),
            "{answer}"
        );
        assert!(r.recorded().contains(&[line.as_slice(), b"\n"].concat()));
    }
    r.finish();
    let rows = journal_rows(&env.db());
    let outcomes = rows.iter().filter(|e| e["kind"] == "call.outcome").count();
    assert_eq!(outcomes, ids.len(), "each answer was matched to its call");
}

#[test]
fn two_messages_on_one_line_are_dropped_even_when_the_second_is_a_call() {
    check(
        Case::default()
            .silent(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file"}}"#)
            .silent(br#"{"jsonrpc":"2.0","id":3,"method":"ping"} {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete_file"}}"#)
            .silent(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\"}}")
            .silent(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}[{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"delete_file"}}]"#)
            .never_reaches("delete_file")
            .anomalies(&["framing"; 4])
            .decided(&[]),
    );
}

#[test]
fn a_last_line_without_a_newline_is_decided_and_forwarded_as_is_then_the_relay_ends() {
    let env = denying_env();
    // Allowed: the server gets the exact bytes, no newline added, and still answers.
    let mut r = env.relay("demo");
    r.handshake();
    let line = call("1", "echo", r#"{"text":"last"}"#);
    let mut w = r.stdin.take().unwrap();
    w.write_all(&line).unwrap();
    drop(w);
    let a = r.recv_json();
    assert_eq!(a["id"], 1);
    assert_eq!(a["result"]["content"][0]["text"], "Echo: last");
    assert_eq!(r.recorded().last().unwrap(), &line);
    r.finish();
    // Denied: refused, and the server never sees it.
    let mut r = env.relay("demo");
    r.handshake();
    let mut w = r.stdin.take().unwrap();
    w.write_all(&call("2", "delete_file", "{}")).unwrap();
    drop(w);
    assert_eq!(r.recv_str(), refusal("2", DENIED));
    never_reached_the_server(&r, b"delete_file");
    r.finish();
    assert_eq!(decided_tools(&env), vec!["echo", "delete_file"]);
}

#[test]
fn a_server_that_writes_garbage_has_it_relayed_verbatim_and_the_session_goes_on() {
    let env = denying_env();
    let mut r = env.relay_fixture("raw", "fixture_raw");
    r.handshake();
    r.send(&call("1", "garbage", "{}"));
    let garbage = r.recv();
    assert_eq!(garbage, b"this is not JSON {\"jsonrpc\":\n");
    let a = r.recv_json();
    assert_eq!(a["id"], 1);
    assert_eq!(a["result"]["content"][0]["text"], "after the garbage");
    assert!(r.barrier(1).is_empty());
    r.send(&call("2", "delete_file", "{}"));
    assert_eq!(r.recv_str(), refusal("2", DENIED));
    r.finish();
}

#[test]
fn a_method_that_folds_or_trims_to_one_the_relay_reads_is_refused_and_never_reaches_the_server() {
    // Regression (issue 12, item 2): `Tools/Call` and `tools/call ` reached the server with no
    // decision and no journal entry; a server that folds case or trims would have run them.
    let disguises: Vec<&str> = include_str!("data/disguised_methods.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut case = Case::default();
    for (n, method) in disguises.iter().enumerate() {
        let id = 100 + n as u64;
        case = case
            .send(
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{{"name":"delete_file","arguments":{{}}}}}}"#),
                Then::Rejected(id),
            )
            // As a notification: nothing to answer, still never relayed.
            .silent(format!(
                r#"{{"jsonrpc":"2.0","method":{method},"params":{{"name":"delete_file"}}}}"#
            ));
    }
    // The exact spelling, escaped, is still decided: denied.
    check(
        case.send(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools\/\u0063all","params":{"name":"delete_file"}}"#,
            Then::Refused("7", DENIED),
        )
        .never_reaches("delete_file")
        .anomalies(&vec!["disguised_method"; 2 * disguises.len()])
        .decided(&["delete_file"]),
    );
}

#[test]
fn a_key_that_trims_to_method_or_params_is_refused_and_never_reaches_the_server() {
    // Found in review of issue 12, item 2: `"method "` (or `"me\u200bthod"`) was read past by
    // the relay and forwarded undecided; a server that trims keys, or drops invisible
    // characters in them, would have run the denied call. The same inside a call's params hid
    // a second `name` or `arguments` from the decision.
    check(
        Case::default()
            .send(r#"{"jsonrpc":"2.0","id":100,"method ":"tools/call","params":{"name":"delete_file"}}"#, Then::Rejected(100))
            .send(r#"{"jsonrpc":"2.0","id":101," method":"tools/call","params":{"name":"delete_file"}}"#, Then::Rejected(101))
            .send(r#"{"jsonrpc":"2.0","id":102,"me\u200bthod":"tools/call","params":{"name":"delete_file"}}"#, Then::Rejected(102))
            .send(r#"{"jsonrpc":"2.0","id":103,"method":"tools/call","params":{"name":"echo"},"params ":{"name":"delete_file"}}"#, Then::Rejected(103))
            .silent(br#"{"jsonrpc":"2.0","method ":"tools/call","params":{"name":"delete_file"}}"#)
            .send(br#"{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"echo","name ":"delete_file"}}"#, Then::Refused("104", UNREADABLE))
            .never_reaches("delete_file")
            .anomalies(&["disguised_key"; 6]),
    );
}
