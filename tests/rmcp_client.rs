//! The official Rust MCP SDK (`rmcp` 3.11, `client` and `transport-child-process`) as the
//! client, through the real `holdcall serve` and a real daemon, to two servers: the rmcp
//! fixture (`examples/fixture_rmcp.rs`) and the built-in `holdcall demo-server`. Each test runs
//! the same session once directly and once through the relay (list the tools, call an allowed
//! tool, call a denied one, ping, close) and checks that the client cannot tell the difference
//! except where policy says so: the same tools, the same result for the allowed call, the ping
//! answered; the denied call comes back as Holdcall's tool error. Both servers record every
//! byte they read (the fixture also what it writes): through the relay the server read exactly
//! what it read directly minus the denied call's line, and the journal (`holdcall log --json`)
//! holds each decision. `docs/rig.md` lists this among the real clients.
//!
//! rmcp's plain `().serve(transport)` client sends `initialize` proposing 2026-07-28. The
//! fixture (an rmcp server) answers with 2025-11-25, the newest revision that has `initialize`;
//! the demo server echoes what the client proposes, so that session runs as 2026-07-28 from
//! then on (`_meta` on every request, and Holdcall's refusal carries `resultType`). Both are
//! sessions a real rmcp client really makes.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, PingRequest, ServerResult, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

/// A server command line: the program and its arguments; `records_output` when it also
/// records what it writes (to the record's name plus `.out`).
struct Server {
    program: PathBuf,
    args: Vec<String>,
    records_output: bool,
}

impl Server {
    /// The rmcp fixture, recording every byte it reads to `record`.
    fn fixture(record: &Path) -> Server {
        Server {
            program: fixture("fixture_rmcp"),
            args: vec!["--record".into(), record.to_str().unwrap().into()],
            records_output: true,
        }
    }

    /// `holdcall demo-server`, recording every line it reads to `record`.
    fn demo(record: &Path) -> Server {
        Server {
            program: Env::bin(),
            args: vec![
                "demo-server".into(),
                "--record".into(),
                record.to_str().unwrap().into(),
            ],
            records_output: false,
        }
    }
}

/// Starts `command` as an rmcp child-process transport and runs the client's handshake. The
/// child's stderr is copied to `stderr`, so a failure can show it; the receiver fires when that
/// pipe closes, that is when the child and everything it started (which inherit the pipe) have
/// exited.
async fn connect(
    mut command: tokio::process::Command,
    stderr: &Path,
) -> (Client, tokio::sync::oneshot::Receiver<()>) {
    let log = std::fs::File::create(stderr).unwrap();
    command.kill_on_drop(true);
    let (transport, pipe) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (gone_tx, gone) = tokio::sync::oneshot::channel();
    let mut pipe = pipe.unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut log = log;
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let _ = std::io::Write::write_all(&mut log, &buf[..n]);
        }
        let _ = gone_tx.send(());
    });
    let started = tokio::time::timeout(PATIENCE, ().serve(transport)).await;
    match started {
        Ok(Ok(client)) => (client, gone),
        Ok(Err(e)) => panic!("the rmcp client could not start: {e}\n{}", read(stderr)),
        Err(_) => panic!("no handshake within the patience limit\n{}", read(stderr)),
    }
}

/// The rmcp client talking to `server` directly.
async fn direct(env: &Env, server: &Server) -> (Client, tokio::sync::oneshot::Receiver<()>) {
    let mut command = tokio::process::Command::new(&server.program);
    command.args(&server.args);
    connect(command, &env.dir.path().join("direct.stderr")).await
}

/// The rmcp client talking to `server` through `holdcall serve --connector CONNECTOR`, with
/// this environment's private home and runtime directory (so its own daemon).
async fn relayed(
    env: &Env,
    connector: &str,
    server: &Server,
) -> (Client, tokio::sync::oneshot::Receiver<()>) {
    let mut command = tokio::process::Command::new(Env::bin());
    command
        .args(["serve", "--connector", connector, "--client", "rmcp", "--"])
        .arg(&server.program)
        .args(&server.args)
        .env("HOLDCALL_HOME", env.home())
        .env("XDG_RUNTIME_DIR", env.dir.path().join("run"))
        .env_remove("HOLDCALL_LOG");
    connect(command, &env.dir.path().join("relay.stderr")).await
}

fn read(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// A record's lines, each with its newline.
fn lines(path: &Path) -> Vec<String> {
    read(path).split_inclusive('\n').map(String::from).collect()
}

fn call_params(tool: &'static str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    CallToolRequestParams::new(tool).with_arguments(arguments)
}

/// What one session saw: the tools, an allowed call's result, a denied one's (the session
/// also pinged the server, and closed).
struct Seen {
    tools: Vec<Tool>,
    echo: CallToolResult,
    delete: CallToolResult,
}

/// Awaits `fut`, failing the test if it takes longer than the patience limit.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(t) => t,
        Err(_) => panic!("no answer to {what} within the patience limit"),
    }
}

async fn session(client: Client) -> Seen {
    let tools = within("tools/list", client.list_all_tools()).await.unwrap();
    let echo = within(
        "the echo call",
        client.call_tool(call_params("echo", json!({"text": "héllo \"rmcp\" 🚀"}))),
    )
    .await
    .unwrap();
    let delete = within(
        "the delete_file call",
        client.call_tool(call_params("delete_file", json!({"path": "/tmp/precious"}))),
    )
    .await
    .unwrap();
    let ping = within(
        "ping",
        client.send_request(ClientRequest::PingRequest(PingRequest::default())),
    )
    .await
    .unwrap();
    assert!(
        matches!(ping, ServerResult::EmptyResult(_)),
        "ping answered with {ping:?}"
    );
    // Closing the client closes the relay's stdin and waits for it to exit.
    let quit = within("closing", client.cancel()).await;
    assert!(quit.is_ok(), "the client did not close: {quit:?}");
    Seen {
        tools,
        echo,
        delete,
    }
}

fn text_of(result: &CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"][0]["text"].as_str().unwrap_or("").to_string()
}

/// The relay's session in the journal, one line per entry: the kind, then the fields that
/// matter for it (`-` for null).
fn session_entries(env: &Env) -> Vec<String> {
    journal_rows(&env.db())
        .iter()
        .filter_map(|e| {
            let fields: &[&str] = match e["kind"].as_str()? {
                "session.start" => &["connector", "client"],
                "call.request" => &["seq", "connector", "tool", "decision", "policy_id"],
                "call.outcome" => &["seq", "ok"],
                "session.end" => &["protocol_version"],
                _ => return None,
            };
            let mut line = e["kind"].as_str()?.to_string();
            for f in fields {
                let v = match &e[*f] {
                    Value::Null => "-".to_string(),
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                line.push_str(&format!(" {f}={v}"));
            }
            Some(line)
        })
        .collect()
}

/// Waits until the relay and its server have exited (their stderr pipe closed): the relay
/// writes `session.end` before it exits.
async fn wait_for_exit(env: &Env, gone: tokio::sync::oneshot::Receiver<()>) {
    assert!(
        tokio::time::timeout(PATIENCE, gone).await.is_ok(),
        "the relay never exited\n{}",
        read(&env.dir.path().join("relay.stderr"))
    );
}

/// The whole check, for one server: direct session, relayed session, then what the server
/// read and what the journal holds. `server` builds the server command for a record file;
/// `protocol_version` is the revision the rmcp client and that server settle on.
async fn through_the_relay_as_directly(
    connector: &str,
    server: fn(&Path) -> Server,
    protocol_version: &str,
) {
    let env = Env::new();
    env.ok(&["policy", "deny", "delete_file"]);

    let direct_record = env.dir.path().join("direct.record");
    let direct_server = server(&direct_record);
    let direct_seen = session(direct(&env, &direct_server).await.0).await;
    // Directly, the server does run delete_file: the refusal below is Holdcall's doing.
    assert_ne!(
        direct_seen.delete.is_error,
        Some(true),
        "{:?}",
        direct_seen.delete
    );
    assert!(text_of(&direct_seen.delete).contains("pretended to delete /tmp/precious"));

    let relay_record = env.dir.path().join("relay.record");
    let (client, relay_gone) = relayed(&env, connector, &server(&relay_record)).await;
    let seen = session(client).await;

    // The same tools, and the same result for the allowed call, as directly.
    assert_eq!(seen.tools, direct_seen.tools);
    assert!(seen.tools.iter().any(|t| t.name == "delete_file"));
    assert_eq!(seen.echo, direct_seen.echo);
    assert_eq!(text_of(&seen.echo), "Echo: héllo \"rmcp\" 🚀");

    // The denied call: a tool error in Holdcall's words.
    assert_eq!(seen.delete.is_error, Some(true), "{:?}", seen.delete);
    let refusal = text_of(&seen.delete);
    assert!(
        refusal.contains("Holdcall") && refusal.contains("Do not retry automatically"),
        "{refusal}"
    );
    // From 2026-07-28 every result names its type; Holdcall's refusal follows the session.
    let result_type = serde_json::to_value(&seen.delete).unwrap()["resultType"].clone();
    let expected = if protocol_version >= "2026-07-28" {
        json!("complete")
    } else {
        Value::Null
    };
    assert_eq!(result_type, expected, "{:?}", seen.delete);

    // The server read the handshake, the list, the echo call and the ping, never the denied
    // call; and, byte for byte, exactly what it read directly minus that call's line.
    let read_directly = lines(&direct_record);
    let read_relayed = lines(&relay_record);
    for wanted in [
        r#""method":"initialize""#,
        r#""method":"tools/list""#,
        r#""name":"echo""#,
        r#""method":"ping""#,
    ] {
        assert!(
            read_relayed.iter().any(|l| l.contains(wanted)),
            "the server never read {wanted}: {read_relayed:#?}"
        );
    }
    let (denied, rest): (Vec<String>, Vec<String>) = read_directly
        .into_iter()
        .partition(|l| l.contains("delete_file"));
    assert_eq!(denied.len(), 1, "directly, the server read {denied:#?}");
    assert_eq!(
        read_relayed, rest,
        "the server read other bytes through the relay"
    );
    // What the server wrote, where it keeps a record: the same as directly, minus the denied
    // call's answer.
    let wrote = |record: &Path| lines(&record.with_extension("record.out"));
    let (answered, rest): (Vec<String>, Vec<String>) = wrote(&direct_record)
        .into_iter()
        .partition(|l| l.contains("pretended to delete"));
    if direct_server.records_output {
        assert_eq!(
            answered.len(),
            1,
            "directly, the server wrote {answered:#?}"
        );
        assert!(!rest.is_empty());
    }
    assert_eq!(
        wrote(&relay_record),
        rest,
        "the server wrote other bytes through the relay"
    );

    // The journal: the echo allowed and answered, delete_file denied by the rule, nothing
    // else; the session ended when the client closed, in the revision the two negotiated.
    wait_for_exit(&env, relay_gone).await;
    assert_eq!(
        session_entries(&env),
        [
            format!("session.start connector={connector} client=rmcp"),
            format!(
                "call.request seq=1 connector={connector} tool=echo decision=allow policy_id=-"
            ),
            "call.outcome seq=1 ok=true".to_string(),
            format!(
                "call.request seq=2 connector={connector} tool=delete_file decision=deny policy_id=rule-1"
            ),
            format!("session.end protocol_version={protocol_version}"),
        ]
    );
}

#[tokio::test]
async fn an_rmcp_client_through_the_relay_to_the_rmcp_fixture_sees_what_it_sees_directly_but_a_denied_call_never_reaches_the_server()
 {
    through_the_relay_as_directly("fixture", Server::fixture, "2025-11-25").await;
}

#[tokio::test]
async fn an_rmcp_client_through_the_relay_to_the_demo_server_sees_what_it_sees_directly_but_a_denied_call_never_reaches_the_server()
 {
    through_the_relay_as_directly("demo", Server::demo, "2026-07-28").await;
}

/// `holdcall approve --watch --json` under tokio: the next held call it prints.
async fn next_held(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> Value {
    let line = within("a held call", lines.next_line())
        .await
        .unwrap()
        .expect("the watch printed a held call");
    serde_json::from_str(&line).unwrap()
}

/// Acceptance 1 of approval, through a real client: the rmcp client's call is held; while it
/// is held the same client's ping is answered; a person, running `holdcall approve` at the
/// same time, sees the exact arguments and approves; the server then receives the bytes the
/// person saw. A second call is rejected and comes back as the person-rejected tool error.
#[tokio::test]
async fn an_rmcp_client_call_held_for_a_person_is_approved_by_a_concurrent_holdcall_approve_and_the_server_gets_the_original_bytes()
 {
    use tokio::io::AsyncBufReadExt;
    let env = Env::new();
    env.ok(&["policy", "ask", "echo"]);
    let mut watch = tokio::process::Command::new(Env::bin())
        .args(["approve", "--watch", "--json"])
        .env("HOLDCALL_HOME", env.home())
        .env("XDG_RUNTIME_DIR", env.dir.path().join("run"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut held = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();

    let record = env.dir.path().join("relay.record");
    let (client, gone) = relayed(&env, "demo", &Server::demo(&record)).await;
    let client = std::sync::Arc::new(client);
    let text = "caf\u{e9} \u{202e}txt.exe \"quoted\"";
    let call = {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move {
            client
                .call_tool(call_params("echo", json!({ "text": text })))
                .await
        })
    };
    let first = next_held(&mut held).await;
    // While the call is held, the same session still answers.
    let ping = within(
        "ping while a call is held",
        client.send_request(ClientRequest::PingRequest(PingRequest::default())),
    )
    .await
    .unwrap();
    assert!(matches!(ping, ServerResult::EmptyResult(_)), "{ping:?}");

    let id = first["id"].as_str().unwrap().to_string();
    let arguments = first["arguments"].as_str().unwrap().to_string();
    let listing = env.ok(&["approve"]);
    assert!(
        listing.contains(&format!(
            "  arguments  {}\n",
            holdcall::text::visible(&arguments)
        )),
        "{listing}"
    );
    assert!(listing.contains("\\u{202e}txt.exe"), "{listing}");
    assert!(listing.contains("U+00E9"), "{listing}");
    let approve = tokio::process::Command::new(Env::bin())
        .args(["approve", &id])
        .env("HOLDCALL_HOME", env.home())
        .env("XDG_RUNTIME_DIR", env.dir.path().join("run"))
        .output()
        .await
        .unwrap();
    assert!(approve.status.success(), "{approve:?}");
    let result = within("the approved call", call).await.unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text_of(&result), format!("Echo: {text}"));
    let read = lines(&record);
    let echo: Vec<&String> = read
        .iter()
        .filter(|l| l.contains(r#""name":"echo""#))
        .collect();
    assert_eq!(echo.len(), 1, "{read:#?}");
    assert!(
        echo[0].contains(&format!(r#""arguments":{arguments}"#)),
        "the server read {} but the person saw {arguments}",
        echo[0]
    );

    let second = {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move {
            client
                .call_tool(call_params("echo", json!({"text": "no"})))
                .await
        })
    };
    let held_second = next_held(&mut held).await;
    env.ok(&[
        "reject",
        held_second["id"].as_str().unwrap(),
        "--reason",
        "not now",
    ]);
    let rejected = within("the rejected call", second).await.unwrap().unwrap();
    assert_eq!(rejected.is_error, Some(true), "{rejected:?}");
    assert!(text_of(&rejected).contains("a person looked at it and rejected it"));
    assert!(text_of(&rejected).ends_with("Their reason: not now"));

    let client = std::sync::Arc::into_inner(client).expect("no other handle");
    within("closing", client.cancel()).await.unwrap();
    wait_for_exit(&env, gone).await;
    let decided: Vec<(Value, Value)> = journal_rows(&env.db())
        .into_iter()
        .filter(|e| e["kind"] == "call.approval")
        .map(|e| (e["decision"].clone(), e["reason"].clone()))
        .collect();
    assert_eq!(
        decided,
        [
            (json!("approved"), json!("person")),
            (json!("rejected"), json!("person"))
        ]
    );
}
