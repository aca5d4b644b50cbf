//! `get_agent_flow` through the real `holdmap mcp`: a fake agent (a copy of `sh` named
//! `crush`, `fake_agent`: a product unlikely to be the agent these tests run under, which would
//! fold a same-product fake into itself as a helper) whose tool child, a `python3 -c` line, connects over TCP to a
//! listener this test bound itself and then blocks reading stdin as a stdio tool does. The
//! agent is addressed only by `pid:N`; every process is stopped by pid when the agent drops.

use std::net::{SocketAddr, TcpListener, TcpStream};

use serde_json::{Value, json};

use crate::common::eventually;
use crate::holdmap::client::Holdmap;
use crate::holdmap::fake_agent::FakeAgent;

const VERSION: &str = "2025-11-25";

/// A fake `crush` whose child connects to `at` and then waits for stdin to close; and the
/// accepted end of that connection (so both sockets are in the machine's tables).
fn agent_connected_to(listener: &TcpListener) -> (FakeAgent, TcpStream) {
    let at = listener.local_addr().unwrap();
    let line = format!(
        "python3 -c 'import socket, sys; s = socket.create_connection((\"127.0.0.1\", {})); sys.stdin.read()'; true",
        at.port()
    );
    let agent = FakeAgent::named("crush").run(&line);
    listener.set_nonblocking(true).unwrap();
    let mut accepted = None;
    eventually("the agent's tool to connect", || {
        if let Ok((stream, _)) = listener.accept() {
            accepted = Some(stream);
        }
        accepted.is_some()
    });
    (agent, accepted.unwrap())
}

fn flow(h: &mut Holdmap, id: i64, arguments: Value) -> Value {
    let answer = h.call(id, "get_agent_flow", arguments);
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(false), "{answer}");
    result["structuredContent"].clone()
}

fn nodes_of<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["type"] == kind)
        .collect()
}

#[test]
fn an_agent_tool_connected_to_a_local_listener_shows_a_local_service_and_connects() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (agent, accepted) = agent_connected_to(&listener);
    let tool_end: SocketAddr = accepted.peer_addr().unwrap();
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    let v = flow(&mut h, 1, json!({"agent": agent.query()}));
    assert_eq!(
        v["agents"],
        json!([format!("agent:{}", agent.pid())]),
        "{v:#}"
    );

    let service_id = format!("listen:tcp:127.0.0.1:{port}");
    let service = nodes_of(&v, "local_service")
        .into_iter()
        .find(|n| n["id"] == service_id)
        .unwrap_or_else(|| panic!("no local service {service_id}: {v:#}"));
    assert_eq!(service["pid"], json!(std::process::id()));
    assert_eq!(service["evidence"], "observed");

    let connects = v["relationships"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "connects" && e["to"] == service_id)
        .unwrap_or_else(|| panic!("no connects to {service_id}: {v:#}"));
    assert_eq!(connects["evidence"], "observed");
    assert_eq!(connects["facts"]["local"], tool_end.to_string());
    assert_eq!(connects["facts"]["both_ends_seen"], true);
    assert_eq!(connects["facts"]["peer_pid"], json!(std::process::id()));
    // The connecting process is the agent's tool: a member, spawned below the agent.
    let from = connects["from"].as_str().unwrap();
    let tool_pid: u32 = from.strip_prefix("process:").unwrap().parse().unwrap();
    assert!(
        agent.descendants().contains(&tool_pid),
        "{from} is not below the agent"
    );
    let tool = nodes_of(&v, "process")
        .into_iter()
        .find(|n| n["id"] == from)
        .unwrap();
    assert_eq!(tool["agent"], json!(format!("agent:{}", agent.pid())));
    assert_eq!(tool["role"], "member");
    assert!(
        v["relationships"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "spawned" && e["to"] == from),
        "no spawned edge into the tool: {v:#}"
    );
    let notes = v["limits"]["notes"].to_string();
    assert!(
        notes.contains("Tool invocations are not observed"),
        "{notes}"
    );
    drop(accepted);
}

#[test]
fn a_pid_no_agent_owns_gives_an_empty_flow_and_says_to_call_list_agents() {
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    // Above any kernel's pid_max: no process, so no agent, has it (the test's own pid would
    // belong to the agent the tests may run under).
    let answer = h.call(1, "get_agent_flow", json!({"agent": "pid:2147483647"}));
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(false), "{answer}");
    assert_eq!(result["structuredContent"]["nodes"], json!([]));
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("list_agents"), "{text}");
}

#[test]
fn wrong_argument_types_and_unknown_options_are_refused_before_the_tool_runs() {
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    for (id, arguments) in [
        (1, json!({"max_nodes": "5"})),
        (2, json!({"max_nodes": 0})),
        (3, json!({"include_remote": "false"})),
        (4, json!({"depth": 3})),
        (5, json!({"agent": "pid:abc"})),
    ] {
        let answer = h.call(id, "get_agent_flow", arguments.clone());
        assert_eq!(
            answer["result"]["isError"],
            json!(true),
            "{arguments} was accepted: {answer}"
        );
    }
}
