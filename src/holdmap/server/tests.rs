//! `serve` driven in-process over a pipe, with fake tools: one that answers at once, one whose
//! work waits for the test to release it (a gate), one whose work never ends.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{serve, serve_recording};
use crate::holdmap::activity::{Record, Recorder, Status};
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, Tool, ToolDef};
use crate::holdmap::world::Live;
use crate::limits::{HOLDMAP_BATCH_MAX, HOLDMAP_PENDING_MAX};

/// How long a test waits for an answer that must come; reaching it is a failure.
const PATIENCE: Duration = Duration::from_secs(20);

const META_2026: &str = "io.modelcontextprotocol/protocolVersion";

fn def_of(name: &'static str) -> ToolDef {
    ToolDef {
        name,
        title: "A fake tool",
        description: "for the server's tests",
        input_schema: json!({
            "type": "object",
            "properties": {
                "gate": {"type": "string"},
                "a": {"type": "integer"},
                "x": {"type": "boolean"},
            },
            "additionalProperties": false,
        }),
        output_schema: json!({"type": "object"}),
        annotations: Annotations::STOPS,
    }
}

fn echo_def() -> ToolDef {
    def_of("echo")
}
fn gate_def() -> ToolDef {
    def_of("gate")
}
fn forever_def() -> ToolDef {
    def_of("forever")
}
fn commit_def() -> ToolDef {
    def_of("commit")
}

fn echo(args: &Map<String, Value>, _: &mut Cx<'_>) -> Reply {
    Reply::Now(Outcome::Done {
        summary: "echoed".to_owned(),
        structured: json!({ "args": args }),
    })
}

/// Gates by name: a test registers the receiving end, the `gate` tool's work waits on it.
static GATES: LazyLock<Mutex<HashMap<String, oneshot::Receiver<()>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn gate(args: &Map<String, Value>, _: &mut Cx<'_>) -> Reply {
    let name = args["gate"].as_str().unwrap().to_owned();
    let rx = GATES.lock().unwrap().remove(&name).unwrap();
    Reply::Later(Box::pin(async move {
        let released = rx.await.is_ok();
        Outcome::Done {
            summary: "released".to_owned(),
            structured: json!({ "released": released }),
        }
    }))
}

/// Like `gate`, but committed work (as a stop's execution is): never cancelled, never dropped.
fn commit(args: &Map<String, Value>, cx: &mut Cx<'_>) -> Reply {
    match gate(args, cx) {
        Reply::Later(work) => Reply::Committed(work),
        other => other,
    }
}

fn forever(_: &Map<String, Value>, _: &mut Cx<'_>) -> Reply {
    Reply::Later(Box::pin(std::future::pending()))
}

static TOOLS: LazyLock<Vec<(ToolDef, Tool)>> = LazyLock::new(|| {
    vec![
        (
            echo_def(),
            Tool {
                def: echo_def,
                run: echo,
            },
        ),
        (
            gate_def(),
            Tool {
                def: gate_def,
                run: gate,
            },
        ),
        (
            forever_def(),
            Tool {
                def: forever_def,
                run: forever,
            },
        ),
        (
            commit_def(),
            Tool {
                def: commit_def,
                run: commit,
            },
        ),
    ]
});

/// A gate named for the test that holds it; the sender releases the `gate` tool's work.
fn new_gate(name: &str) -> oneshot::Sender<()> {
    let (tx, rx) = oneshot::channel();
    GATES.lock().unwrap().insert(name.to_owned(), rx);
    tx
}

/// The server's input and output are two pipes, so each can be closed on its own.
struct Client {
    to_server: DuplexStream,
    lines: Lines<BufReader<DuplexStream>>,
    server: JoinHandle<i32>,
}

impl Client {
    fn start() -> Client {
        let (to_server, server_in) = tokio::io::duplex(4 << 20);
        let (server_out, from_server) = tokio::io::duplex(4 << 20);
        let server = tokio::spawn(serve(
            server_in,
            server_out,
            Arc::new(Live),
            TOOLS.as_slice(),
        ));
        Client {
            to_server,
            lines: BufReader::new(from_server).lines(),
            server,
        }
    }

    /// A server recording to a queue the test reads.
    fn start_recording() -> (Client, tokio::sync::mpsc::Receiver<Record>) {
        let (recorder, records) = Recorder::detached();
        let (to_server, server_in) = tokio::io::duplex(4 << 20);
        let (server_out, from_server) = tokio::io::duplex(4 << 20);
        let server = tokio::spawn(serve_recording(
            server_in,
            server_out,
            Arc::new(Live),
            TOOLS.as_slice(),
            Some(recorder),
        ));
        let client = Client {
            to_server,
            lines: BufReader::new(from_server).lines(),
            server,
        };
        (client, records)
    }

    async fn send_raw(&mut self, text: &str) {
        self.to_server.write_all(text.as_bytes()).await.unwrap();
        self.to_server.flush().await.unwrap();
    }

    async fn send(&mut self, v: Value) {
        self.send_raw(&format!("{v}\n")).await;
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("the server answered in time")
            .unwrap()
            .expect("the server's output is still open");
        serde_json::from_str(&line).unwrap()
    }

    async fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        let answer = self.recv().await;
        assert_eq!(answer["id"], json!(id), "{answer}");
        answer
    }

    async fn initialize(&mut self, revision: &str) -> Value {
        self.request(0, "initialize", json!({"protocolVersion": revision}))
            .await
    }

    async fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .await
    }

    /// The next answer must be the `ping` sent now: nothing else was owed.
    async fn nothing_else_is_owed(&mut self) {
        self.request(999, "ping", json!({})).await;
    }

    async fn close(self) -> i32 {
        drop(self.to_server);
        tokio::time::timeout(PATIENCE, self.server)
            .await
            .expect("the server stopped in time")
            .unwrap()
    }
}

fn call_line(id: i64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":arguments}})
}

#[tokio::test]
async fn a_later_reply_does_not_delay_a_ping_sent_after_it() {
    let mut c = Client::start();
    let release = new_gate("a_later_reply_does_not_delay");
    c.send(call_line(
        1,
        "gate",
        json!({"gate":"a_later_reply_does_not_delay"}),
    ))
    .await;
    let ping = c.request(2, "ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
    release.send(()).unwrap();
    let answer = c.recv().await;
    assert_eq!(answer["id"], json!(1));
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"released": true})
    );
    assert_eq!(answer["result"]["isError"], json!(false));
    assert_eq!(c.close().await, 0);
}

#[tokio::test]
async fn a_cancelled_call_is_aborted_and_never_answered() {
    let mut c = Client::start();
    let mut release = new_gate("a_cancelled_call");
    c.send(call_line(1, "gate", json!({"gate":"a_cancelled_call"})))
        .await;
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}}))
        .await;
    // The tool's work was dropped: its end of the gate is gone.
    tokio::time::timeout(PATIENCE, release.closed())
        .await
        .expect("the cancelled work was dropped");
    c.nothing_else_is_owed().await;
    assert_eq!(c.close().await, 0);
}

#[tokio::test]
async fn a_cancellation_of_an_unknown_request_changes_nothing() {
    let mut c = Client::start();
    let release = new_gate("an_unknown_cancellation");
    c.send(call_line(
        1,
        "gate",
        json!({"gate":"an_unknown_cancellation"}),
    ))
    .await;
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}))
        .await;
    c.nothing_else_is_owed().await;
    release.send(()).unwrap();
    assert_eq!(c.recv().await["id"], json!(1));
}

#[tokio::test]
async fn at_most_the_pending_cap_of_calls_wait_and_the_next_is_a_tool_error() {
    let mut c = Client::start();
    for id in 1..=HOLDMAP_PENDING_MAX as i64 {
        c.send(call_line(id, "forever", json!({}))).await;
    }
    let refused = c.call(1000, "echo", json!({})).await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("still running"), "{text}");
    // One cancelled frees a place.
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}))
        .await;
    let echoed = c.call(1001, "echo", json!({"a": 1})).await;
    assert_eq!(
        echoed["result"]["structuredContent"],
        json!({"args":{"a":1}})
    );
    // And the input closing ends the session at once, pending work or not.
    assert_eq!(c.close().await, 0);
}

#[tokio::test]
async fn an_id_still_running_cannot_be_reused_by_another_call() {
    let mut c = Client::start();
    c.send(call_line(5, "forever", json!({}))).await;
    let answer = c.call(5, "echo", json!({})).await;
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
}

#[tokio::test]
async fn the_server_stops_quietly_when_its_output_is_closed() {
    let Client {
        mut to_server,
        lines,
        server,
    } = Client::start();
    drop(lines);
    to_server
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .await
        .unwrap();
    let code = tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 0);
}

#[tokio::test]
async fn tools_call_arguments_that_are_not_an_object_are_invalid_params() {
    let mut c = Client::start();
    for (id, arguments) in [
        (1, json!([])),
        (2, json!(null)),
        (3, json!(3)),
        (4, json!("x")),
    ] {
        let answer = c.call(id, "echo", arguments).await;
        assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
        assert!(answer.get("result").is_none());
    }
    let answer = c.request(5, "tools/call", json!({"name":"echo"})).await;
    assert_eq!(answer["result"]["structuredContent"], json!({"args":{}}));
}

/// `tools/list` and an `echo` call at `revision`, after an `initialize` at it.
async fn shapes_at(revision: &str) -> (Value, Value, Value) {
    let mut c = Client::start();
    let init = c.initialize(revision).await;
    assert_eq!(init["result"]["protocolVersion"], json!(revision));
    let list = c.request(1, "tools/list", json!({})).await;
    let call = c.call(2, "echo", json!({"x": true})).await;
    (
        init["result"].clone(),
        list["result"]["tools"][0].clone(),
        call["result"].clone(),
    )
}

#[tokio::test]
async fn answers_are_shaped_for_each_handshake_revision() {
    let (init, tool, call) = shapes_at("2024-11-05").await;
    assert!(init["serverInfo"].get("title").is_none());
    assert!(tool.get("title").is_none() && tool.get("outputSchema").is_none());
    assert!(tool.get("annotations").is_none());
    assert!(call.get("structuredContent").is_none());
    assert_eq!(call["content"].as_array().unwrap().len(), 2);

    let (init, tool, call) = shapes_at("2025-03-26").await;
    assert!(init["serverInfo"].get("title").is_none());
    assert!(tool.get("title").is_none() && tool.get("outputSchema").is_none());
    assert_eq!(tool["annotations"]["destructiveHint"], json!(true));
    assert!(call.get("structuredContent").is_none());

    for revision in ["2025-06-18", "2025-11-25"] {
        let (init, tool, call) = shapes_at(revision).await;
        assert_eq!(init["serverInfo"]["title"], json!("holdmap"));
        assert_eq!(tool["title"], json!("A fake tool"));
        assert_eq!(tool["outputSchema"], json!({"type":"object"}));
        assert_eq!(call["structuredContent"], json!({"args":{"x":true}}));
        assert!(call.get("resultType").is_none());
        assert_eq!(
            call["content"][1]["text"],
            json!(serde_json::to_string_pretty(&call["structuredContent"]).unwrap())
        );
    }
}

#[tokio::test]
async fn a_2026_request_is_served_at_the_revision_it_names_whatever_the_session_negotiated() {
    let mut c = Client::start();
    c.initialize("2024-11-05").await;
    let meta = json!({ META_2026: "2026-07-28" });
    let discover = c
        .request(1, "server/discover", json!({"_meta": meta}))
        .await;
    let d = &discover["result"];
    assert_eq!(
        d["supportedVersions"],
        json!([
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28"
        ])
    );
    assert_eq!(
        (&d["resultType"], &d["ttlMs"], &d["cacheScope"]),
        (&json!("complete"), &json!(0), &json!("private"))
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        json!("holdmap")
    );
    assert_eq!(d["capabilities"]["tools"]["listChanged"], json!(false));

    let list = c.request(2, "tools/list", json!({"_meta": meta})).await;
    assert_eq!(list["result"]["resultType"], json!("complete"));
    assert_eq!(list["result"]["ttlMs"], json!(0));
    assert_eq!(
        list["result"]["tools"][0]["annotations"]["readOnlyHint"],
        json!(false)
    );
    let call = c
        .request(3, "tools/call", json!({"name":"echo","_meta": meta}))
        .await;
    assert_eq!(call["result"]["resultType"], json!("complete"));
    assert!(call["result"].get("ttlMs").is_none());
    assert_eq!(call["result"]["structuredContent"], json!({"args":{}}));
    let ping = c.request(4, "ping", json!({"_meta": meta})).await;
    assert_eq!(ping["result"], json!({"resultType":"complete"}));
    // Without its `_meta`, the same session's request is at the negotiated revision.
    let old = c.request(5, "tools/list", json!({})).await;
    assert!(old["result"].get("resultType").is_none());
    assert!(old["result"]["tools"][0].get("annotations").is_none());
}

#[tokio::test]
async fn a_revision_holdmap_does_not_serve_named_in_meta_is_refused_with_the_ones_it_does() {
    let mut c = Client::start();
    let answer = c
        .request(
            1,
            "server/discover",
            json!({"_meta": { META_2026: "2099-01-01" }}),
        )
        .await;
    assert_eq!(answer["error"]["code"], json!(-32022));
    assert_eq!(answer["error"]["data"]["requested"], json!("2099-01-01"));
    assert_eq!(answer["error"]["data"]["supported"][4], json!("2026-07-28"));
}

#[tokio::test]
async fn uncorrelated_errors_have_a_null_id_before_2025_11_25_and_no_id_from_it_on() {
    let mut c = Client::start();
    c.send_raw("{not json\n").await;
    let fresh = c.recv().await;
    assert_eq!(fresh["error"]["code"], json!(-32700));
    assert!(fresh.get("id").is_none(), "{fresh}");
    c.initialize("2025-06-18").await;
    c.send_raw("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n")
        .await;
    let old = c.recv().await;
    assert_eq!(old["error"]["code"], json!(-32600));
    assert_eq!(old.get("id"), Some(&Value::Null), "{old}");
    c.initialize("2025-11-25").await;
    c.send_raw("[]\n").await;
    let new = c.recv().await;
    assert_eq!(new["error"]["code"], json!(-32600));
    assert!(new.get("id").is_none(), "{new}");
}

#[tokio::test]
async fn a_batch_below_2025_06_18_runs_in_order_and_answers_in_one_array() {
    let mut c = Client::start();
    c.initialize("2025-03-26").await;
    c.send(json!([
        {"jsonrpc":"2.0","id":1,"method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        {"jsonrpc":"2.0","id":2,"method":"nope"},
        3,
        {"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo"}},
    ]))
    .await;
    let answers = c.recv().await;
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0]["id"], json!(1));
    assert_eq!(answers[1]["error"]["code"], json!(-32601));
    assert_eq!(answers[2].get("id"), Some(&Value::Null));
    assert_eq!(answers[2]["error"]["code"], json!(-32600));
    assert_eq!(answers[3]["result"]["isError"], json!(false));
    // A batch of notifications only gets no answer.
    c.send(json!([{"jsonrpc":"2.0","method":"notifications/initialized"}]))
        .await;
    c.nothing_else_is_owed().await;
}

#[tokio::test]
async fn a_batch_with_a_slow_call_is_answered_whole_when_the_call_finishes() {
    let mut c = Client::start();
    c.initialize("2024-11-05").await;
    let release = new_gate("a_batch_with_a_slow_call");
    c.send(json!([
        call_line(1, "gate", json!({"gate":"a_batch_with_a_slow_call"})),
        {"jsonrpc":"2.0","id":2,"method":"ping"},
    ]))
    .await;
    // Meanwhile other lines are answered.
    c.nothing_else_is_owed().await;
    release.send(()).unwrap();
    let answers = c.recv().await;
    assert_eq!(answers[0]["id"], json!(1));
    assert_eq!(
        answers[0]["result"]["content"][0]["text"],
        json!("released")
    );
    assert_eq!(answers[1]["id"], json!(2));
}

#[tokio::test]
async fn batches_are_refused_from_2025_06_18_and_before_any_initialize() {
    for revision in [None, Some("2025-06-18"), Some("2025-11-25")] {
        let mut c = Client::start();
        if let Some(revision) = revision {
            c.initialize(revision).await;
        }
        c.send(json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]))
            .await;
        let answer = c.recv().await;
        assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    }
}

#[tokio::test]
async fn an_empty_batch_is_refused_in_every_revision() {
    for revision in ["2024-11-05", "2025-03-26", "2025-11-25"] {
        let mut c = Client::start();
        c.initialize(revision).await;
        c.send_raw("[ ]\n").await;
        let answer = c.recv().await;
        assert_eq!(
            answer["error"]["code"],
            json!(-32600),
            "{revision}: {answer}"
        );
    }
}

#[tokio::test]
async fn an_oversized_batch_is_refused_whole_and_an_initialize_inside_it_never_runs() {
    let mut c = Client::start();
    c.initialize("2025-03-26").await;
    let mut batch = vec![
        json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18"}}),
    ];
    batch.extend(
        (0..HOLDMAP_BATCH_MAX as i64).map(|id| json!({"jsonrpc":"2.0","id":id,"method":"ping"})),
    );
    c.send(Value::Array(batch)).await;
    let answer = c.recv().await;
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("65"));
    // Still 2025-03-26: a batch is still accepted.
    c.send(json!([{"jsonrpc":"2.0","id":7,"method":"ping"}]))
        .await;
    assert_eq!(c.recv().await[0]["id"], json!(7));
}

#[tokio::test]
async fn an_initialize_inside_a_batch_applies_to_the_messages_after_it() {
    let mut c = Client::start();
    c.initialize("2025-03-26").await;
    c.send(json!([
        {"jsonrpc":"2.0","id":1,"method":"tools/list"},
        {"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2024-11-05"}},
        {"jsonrpc":"2.0","id":3,"method":"tools/list"},
    ]))
    .await;
    let answers = c.recv().await;
    assert!(
        answers[0]["result"]["tools"][0]
            .get("annotations")
            .is_some()
    );
    assert_eq!(answers[1]["result"]["protocolVersion"], json!("2024-11-05"));
    assert!(
        answers[2]["result"]["tools"][0]
            .get("annotations")
            .is_none()
    );
}

#[tokio::test]
async fn notifications_are_never_answered_even_unknown_or_malformed_params_inside() {
    let mut c = Client::start();
    c.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .await;
    c.send(json!({"jsonrpc":"2.0","method":"no/such/thing","params":{"x":1}}))
        .await;
    c.send(json!({"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}))
        .await;
    c.nothing_else_is_owed().await;
}

#[tokio::test]
async fn blank_lines_are_skipped_and_a_last_line_without_a_newline_is_answered() {
    let mut c = Client::start();
    c.send_raw("\n  \r\n\t\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}")
        .await;
    let Client {
        to_server,
        mut lines,
        server,
    } = c;
    drop(to_server);
    let line = lines.next_line().await.unwrap().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["id"],
        json!(1)
    );
    assert_eq!(server.await.unwrap(), 0);
}

#[tokio::test]
async fn arguments_that_fail_the_published_schema_are_a_tool_error_and_the_tool_never_runs() {
    let mut c = Client::start();
    let answer = c.call(1, "echo", json!({"a": "one"})).await;
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(true), "{answer}");
    assert!(result.get("structuredContent").is_none());
    assert_eq!(result["content"].as_array().unwrap().len(), 1);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("arguments.a")
    );
}

#[tokio::test]
async fn committed_work_ignores_a_cancellation_and_is_answered_when_it_ends() {
    let mut c = Client::start();
    let release = new_gate("committed_cancel");
    c.send(call_line(1, "commit", json!({"gate":"committed_cancel"})))
        .await;
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}))
        .await;
    c.nothing_else_is_owed().await;
    release.send(()).unwrap();
    let answer = c.recv().await;
    assert_eq!(answer["id"], json!(1));
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"released": true})
    );
    assert_eq!(c.close().await, 0);
}

#[tokio::test]
async fn closing_the_input_waits_for_committed_work_and_still_writes_its_answer() {
    let mut c = Client::start();
    let release = new_gate("committed_eof");
    let _dropped = new_gate("abandoned_eof");
    c.send(call_line(1, "commit", json!({"gate":"committed_eof"})))
        .await;
    c.send(call_line(2, "gate", json!({"gate":"abandoned_eof"})))
        .await;
    c.nothing_else_is_owed().await;
    let Client {
        to_server,
        mut lines,
        server,
    } = c;
    drop(to_server);
    // The input is closed; the server must still be waiting for the committed work.
    assert!(!server.is_finished());
    release.send(()).unwrap();
    let line = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("the committed work's answer came")
        .unwrap()
        .expect("the server's output is still open");
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        answer["id"],
        json!(1),
        "the abandoned call is never answered"
    );
    let code = tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 0);
}

async fn next_record(records: &mut tokio::sync::mpsc::Receiver<Record>) -> Record {
    tokio::time::timeout(PATIENCE, records.recv())
        .await
        .expect("a record was noted in time")
        .expect("the recorder is still open")
}

#[tokio::test]
async fn each_known_call_is_recorded_once_answered_with_its_catalog_name_and_how_it_ended() {
    let (mut c, mut records) = Client::start_recording();
    c.initialize("2025-11-25").await;
    let answer = c.call(1, "echo", json!({"gate": "canary-XYZ"})).await;
    assert_eq!(answer["result"]["isError"], json!(false));
    let r = next_record(&mut records).await;
    assert_eq!((r.tool, r.status), ("echo", Status::Ok));
    // The answer echoes the argument, so it is larger than the request.
    assert!(
        r.result_bytes > r.request_bytes && r.request_bytes > 0,
        "{r:?}"
    );

    c.call(2, "echo", json!({"canary-XYZ": 1})).await;
    assert_eq!(next_record(&mut records).await.status, Status::ToolError);
    // An unknown tool is not recorded; a known one in a malformed call is a protocol error.
    c.call(3, "canary-XYZ", json!({})).await;
    c.request(4, "tools/call", json!({"name": "echo", "arguments": 5}))
        .await;
    let r = next_record(&mut records).await;
    assert_eq!((r.tool, r.status), ("echo", Status::ProtocolError));

    let release = new_gate("recorded_later");
    c.send(call_line(5, "gate", json!({"gate": "recorded_later"})))
        .await;
    release.send(()).unwrap();
    assert_eq!(c.recv().await["id"], json!(5));
    let r = next_record(&mut records).await;
    assert_eq!((r.tool, r.status), ("gate", Status::Ok));
    assert!(r.result_bytes > 0);

    let mut held = new_gate("recorded_cancelled");
    c.send(call_line(6, "gate", json!({"gate": "recorded_cancelled"})))
        .await;
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}))
        .await;
    tokio::time::timeout(PATIENCE, held.closed())
        .await
        .expect("the cancelled work was dropped");
    let r = next_record(&mut records).await;
    assert_eq!(
        (r.tool, r.status, r.result_bytes),
        ("gate", Status::Cancelled, 0)
    );

    c.request(7, "ping", json!({})).await;
    assert_eq!(c.close().await, 0);
    // Nothing else was noted: the ping, the unknown tool and initialize are not tool calls.
    assert!(records.recv().await.is_none());
}
