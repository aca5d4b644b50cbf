//! `get_agent_flow` over hand-made snapshots and hand-made `Found` agents: independent of
//! detection, every rule of the graph and the published output schema.

use serde_json::{Value, json};

use super::graph::{Ask, Select};
use crate::holdmap::agents::detect::Found;
use crate::holdmap::catalog::check_output;
use crate::holdmap::model::Snapshot;
use crate::holdmap::model::fixture::{self, add, listen, process, socket};
use crate::holdmap::tool::Outcome;
use crate::os::sockets::{Protocol, SocketState};

/// The fixture machine with a Claude Code agent (1000) under the shell 800: an MCP server
/// 1010 listening on 127.0.0.1:7777 that the agent talks to, a shell 1020 running `psql` 1030
/// connected to postgres (300, not the agent's) on 127.0.0.1:5432, and the agent connected
/// to 160.79.104.10:443.
fn machine() -> Snapshot {
    let mut s = fixture::machine();
    add(
        &mut s,
        process(
            300,
            1,
            1000,
            "postgres",
            &["/usr/lib/postgresql/16/bin/postgres"],
            "/",
        ),
    );
    add(
        &mut s,
        process(
            1000,
            800,
            1000,
            "claude",
            &["claude", "--token", "s3cr3t"],
            "/home/u/shop",
        ),
    );
    add(
        &mut s,
        process(
            1010,
            1000,
            1000,
            "node",
            &["node", "mcp-server.js"],
            "/home/u/shop",
        ),
    );
    add(
        &mut s,
        process(
            1020,
            1000,
            1000,
            "bash",
            &["bash", "-c", "psql"],
            "/home/u/shop",
        ),
    );
    add(
        &mut s,
        process(
            1030,
            1020,
            1000,
            "psql",
            &["psql", "-h", "127.0.0.1"],
            "/home/u/shop",
        ),
    );
    listen(&mut s, "127.0.0.1:5432", 300);
    established(&mut s, "127.0.0.1:40000", "127.0.0.1:5432", 1030);
    established(&mut s, "127.0.0.1:5432", "127.0.0.1:40000", 300);
    listen(&mut s, "127.0.0.1:7777", 1010);
    established(&mut s, "127.0.0.1:41000", "127.0.0.1:7777", 1000);
    established(&mut s, "127.0.0.1:7777", "127.0.0.1:41000", 1010);
    established(&mut s, "192.168.1.5:50000", "160.79.104.10:443", 1000);
    s
}

fn claude() -> Found {
    Found {
        pid: 1000,
        product: "claude-code",
        members: vec![1000, 1010, 1020, 1030],
        parent: None,
    }
}

fn established(s: &mut Snapshot, local: &str, remote: &str, pid: i32) {
    socket(
        s,
        Protocol::Tcp,
        local,
        remote,
        SocketState::Established,
        pid,
    );
}

fn ask(select: Select) -> Ask {
    Ask {
        select,
        include_remote: true,
        max_nodes: crate::limits::HOLDMAP_FLOW_NODES_DEFAULT,
    }
}

/// The structured result, held to the published output schema, and the summary.
fn flow_of(s: &Snapshot, found: &[Found], a: &Ask) -> (Value, String) {
    match super::outcome(s, found, a) {
        Outcome::Done {
            summary,
            structured,
        } => {
            check_output("get_agent_flow", &structured);
            (structured, summary)
        }
        Outcome::Failed(e) => panic!("failed: {e}"),
    }
}

fn node<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .unwrap_or_else(|| panic!("no node {id} in {v:#}"))
}

fn has_node(v: &Value, id: &str) -> bool {
    v["nodes"].as_array().unwrap().iter().any(|n| n["id"] == id)
}

fn edges(v: &Value, rel: &str) -> Vec<(String, String)> {
    v["relationships"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == rel)
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_owned(),
                e["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn edge<'a>(v: &'a Value, rel: &str, from: &str, to: &str) -> &'a Value {
    v["relationships"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == rel && e["from"] == from && e["to"] == to)
        .unwrap_or_else(|| panic!("no {rel} {from} -> {to} in {v:#}"))
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

#[test]
fn ancestry_shows_spawned_from_each_parent_and_owns_for_each_member() {
    let (v, _) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let spawned = edges(&v, "spawned");
    for (parent, child) in [
        (1000, 1010),
        (1000, 1020),
        (1020, 1030),
        (800, 1000),
        (700, 800),
        (1, 700),
    ] {
        assert!(
            spawned.contains(&pair(
                &format!("process:{parent}"),
                &format!("process:{child}")
            )),
            "{parent} -> {child} missing: {spawned:?}"
        );
    }
    let owns = edges(&v, "owns");
    assert_eq!(owns.len(), 4);
    assert!(owns.iter().all(|(from, _)| from == "agent:1000"));
    let e = edge(&v, "spawned", "process:1020", "process:1030");
    assert_eq!(e["evidence"], "observed");
    assert_eq!(e["facts"], json!({"pid": 1030, "ppid": 1020}));
    assert_eq!(node(&v, "process:1000")["role"], "agent");
    assert_eq!(node(&v, "process:1030")["role"], "member");
    assert_eq!(node(&v, "process:800")["role"], "ancestor");
    assert_eq!(node(&v, "process:800")["agent"], Value::Null);
    assert_eq!(node(&v, "agent:1000")["processes"], 4);
    assert_eq!(node(&v, "agent:1000")["name"], "Claude Code");
}

#[test]
fn a_command_line_is_shown_redacted() {
    let (v, summary) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let command = node(&v, "process:1000")["command"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(command.starts_with("claude --token"), "{command}");
    assert!(!v.to_string().contains("s3cr3t"));
    assert!(!summary.contains("s3cr3t"));
}

#[test]
fn an_agent_talking_to_another_process_s_postgres_shows_a_local_service_and_connects() {
    let (v, summary) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let service = node(&v, "listen:tcp:127.0.0.1:5432");
    assert_eq!(service["type"], "local_service");
    assert_eq!(service["pid"], 300);
    assert_eq!(service["name"], "postgres");
    assert_eq!(service["service_hint"], "postgres");
    assert_eq!(service["agent"], Value::Null);
    assert_eq!(service["evidence"], "observed");
    let e = edge(&v, "connects", "process:1030", "listen:tcp:127.0.0.1:5432");
    assert_eq!(e["evidence"], "observed");
    assert_eq!(e["facts"]["both_ends_seen"], true);
    assert_eq!(e["facts"]["peer_pid"], 300);
    assert_eq!(e["facts"]["local"], "127.0.0.1:40000");
    assert_eq!(e["facts"]["remote"], "127.0.0.1:5432");
    assert_eq!(e["facts"]["connections"], 1);
    // postgres is not the agent's: no process node, no listens edge for it.
    assert!(!has_node(&v, "process:300"));
    assert!(
        summary.contains(
            "psql pid 1030 connects to local service 127.0.0.1:5432 held by postgres pid 300"
        ),
        "{summary}"
    );
}

#[test]
fn a_remote_connection_is_an_ip_and_port_with_a_port_hint_and_no_dns_name() {
    let (v, summary) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let remote = node(&v, "remote:160.79.104.10:443");
    assert_eq!(
        remote,
        &json!({"id": "remote:160.79.104.10:443", "type": "remote", "evidence": "observed",
                "address": "160.79.104.10", "port": 443, "service_hint": "https"})
    );
    let e = edge(&v, "connects", "process:1000", "remote:160.79.104.10:443");
    assert_eq!(e["facts"]["both_ends_seen"], false);
    assert!(e["facts"].get("peer_pid").is_none());
    assert!(summary.contains("No DNS lookups"));
}

#[test]
fn connections_between_an_agent_s_own_processes_are_counted_not_shown() {
    let (v, _) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let connects = edges(&v, "connects");
    assert!(
        connects
            .iter()
            .all(|(_, to)| to != "listen:tcp:127.0.0.1:7777"),
        "{connects:?}"
    );
    assert_eq!(v["limits"]["internal_links"], 1);
    let listener = node(&v, "listen:tcp:127.0.0.1:7777");
    assert_eq!(listener["type"], "listener");
    assert_eq!(listener["exposure"], "loopback");
    assert_eq!(listener["inbound_connections"], 0);
    let e = edge(&v, "listens", "process:1010", "listen:tcp:127.0.0.1:7777");
    assert_eq!(e["facts"]["state"], "listen");
}

#[test]
fn a_cap_on_nodes_keeps_agents_first_and_counts_what_it_left_out() {
    let (all, _) = flow_of(&machine(), &[claude()], &ask(Select::All));
    let total_nodes = all["nodes"].as_array().unwrap().len();
    let total_edges = all["relationships"].as_array().unwrap().len();
    let a = Ask {
        max_nodes: 3,
        ..ask(Select::All)
    };
    let (v, summary) = flow_of(&machine(), &[claude()], &a);
    let ids: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["agent:1000", "process:1000", "process:1010"]);
    assert_eq!(v["limits"]["max_nodes"], 3);
    assert_eq!(v["limits"]["more"]["nodes"], total_nodes - 3);
    let kept = v["relationships"].as_array().unwrap();
    assert!(
        kept.iter()
            .all(|e| ids.contains(&e["from"].as_str().unwrap())
                && ids.contains(&e["to"].as_str().unwrap()))
    );
    assert_eq!(
        v["limits"]["more"]["relationships"],
        total_edges - kept.len()
    );
    assert!(summary.contains("Left out past the caps"), "{summary}");
}

/// The machine with a second agent, Codex (2000), serving 127.0.0.1:3000 that Claude's psql
/// talks to, and a browser (500) connected to Codex's dev server on every interface.
fn two_agents() -> (Snapshot, Vec<Found>) {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "codex", &["codex"], "/home/u/api"),
    );
    add(
        &mut s,
        process(
            2010,
            2000,
            1000,
            "node",
            &["node", "server.js"],
            "/home/u/api",
        ),
    );
    add(
        &mut s,
        process(500, 1, 1000, "firefox", &["firefox"], "/home/u"),
    );
    listen(&mut s, "127.0.0.1:3000", 2010);
    established(&mut s, "127.0.0.1:42000", "127.0.0.1:3000", 1030);
    established(&mut s, "127.0.0.1:3000", "127.0.0.1:42000", 2010);
    listen(&mut s, "0.0.0.0:5173", 2010);
    established(&mut s, "127.0.0.1:43000", "127.0.0.1:5173", 500);
    established(&mut s, "127.0.0.1:5173", "127.0.0.1:43000", 2010);
    let codex = Found {
        pid: 2000,
        product: "codex",
        members: vec![2000, 2010],
        parent: None,
    };
    (s, vec![claude(), codex])
}

#[test]
fn a_connection_to_another_shown_agent_s_listener_points_at_that_listener() {
    let (s, found) = two_agents();
    let (v, _) = flow_of(&s, &found, &ask(Select::All));
    assert_eq!(v["agents"], json!(["agent:1000", "agent:2000"]));
    assert_eq!(node(&v, "listen:tcp:127.0.0.1:3000")["type"], "listener");
    edge(&v, "connects", "process:1030", "listen:tcp:127.0.0.1:3000");
    edge(&v, "listens", "process:2010", "listen:tcp:127.0.0.1:3000");
    // A client that is no agent's is counted on the listener, not drawn.
    let dev = node(&v, "listen:tcp:0.0.0.0:5173");
    assert_eq!(dev["exposure"], "all_interfaces");
    assert_eq!(dev["inbound_connections"], 1);
    assert!(!has_node(&v, "process:500"));
    assert_eq!(
        node(&v, "listen:tcp:127.0.0.1:3000")["inbound_connections"],
        0
    );
}

#[test]
fn filtering_by_the_pid_of_a_member_shows_only_its_agent() {
    let (s, found) = two_agents();
    let (v, _) = flow_of(&s, &found, &ask(Select::Pid(1030)));
    assert_eq!(v["agents"], json!(["agent:1000"]));
    assert!(!has_node(&v, "agent:2000"));
    assert!(!has_node(&v, "process:2010"));
    // Codex's listener, seen from Claude alone, is a local service of another agent.
    let service = node(&v, "listen:tcp:127.0.0.1:3000");
    assert_eq!(service["type"], "local_service");
    assert_eq!(service["pid"], 2010);
    assert_eq!(service["agent"], "agent:2000");
}

#[test]
fn filtering_by_product_reads_its_id_or_its_name_alike() {
    let (s, found) = two_agents();
    for q in ["claude-code", "Claude Code", "CLAUDE"] {
        let select = Select::parse(Some(q)).unwrap();
        let (v, _) = flow_of(&s, &found, &ask(select));
        assert_eq!(v["agents"], json!(["agent:1000"]), "{q}");
    }
}

#[test]
fn a_malformed_pid_filter_is_refused_in_words() {
    let e = Select::parse(Some("pid:abc")).unwrap_err();
    assert!(e.contains("pid:1234"), "{e}");
    assert_eq!(Select::parse(Some("PID: 12")), Ok(Select::Pid(12)));
    assert_eq!(Select::parse(Some("  ")), Ok(Select::All));
}

#[test]
fn a_pid_no_agent_owns_gives_an_empty_flow_that_says_what_to_do() {
    let (v, summary) = flow_of(&machine(), &[claude()], &ask(Select::Pid(300)));
    assert_eq!(v["nodes"], json!([]));
    assert_eq!(v["relationships"], json!([]));
    assert!(
        summary.contains("No running agent owns pid 300"),
        "{summary}"
    );
    assert!(summary.contains("list_agents"));
}

#[test]
fn without_include_remote_remotes_are_counted_not_shown() {
    let a = Ask {
        include_remote: false,
        ..ask(Select::All)
    };
    let (v, _) = flow_of(&machine(), &[claude()], &a);
    assert!(!has_node(&v, "remote:160.79.104.10:443"));
    assert_eq!(v["limits"]["remote_links_left_out"], 1);
    assert!(has_node(&v, "listen:tcp:127.0.0.1:5432"));
}

#[test]
fn a_service_whose_holder_cannot_be_seen_is_a_local_service_of_unknown_holder() {
    let mut s = machine();
    listen(&mut s, "127.0.0.1:6379", 0);
    established(&mut s, "127.0.0.1:44000", "127.0.0.1:6379", 1010);
    s.hidden_sockets = 1;
    let (v, summary) = flow_of(&s, &[claude()], &ask(Select::All));
    let service = node(&v, "listen:tcp:127.0.0.1:6379");
    assert_eq!(service["type"], "local_service");
    assert_eq!(service["pid"], Value::Null);
    assert_eq!(service["evidence"], "unknown");
    assert_eq!(service["service_hint"], "redis");
    assert_eq!(v["limits"]["hidden_sockets"], 1);
    assert!(
        summary.contains("held by a process holdmap cannot see"),
        "{summary}"
    );
}

#[test]
fn a_remote_on_a_port_this_machine_listens_on_everywhere_stays_remote() {
    let mut s = machine();
    listen(&mut s, "0.0.0.0:8080", 300);
    established(&mut s, "192.168.1.5:51000", "203.0.113.9:8080", 1010);
    let (v, _) = flow_of(&s, &[claude()], &ask(Select::All));
    assert_eq!(node(&v, "remote:203.0.113.9:8080")["type"], "remote");
    assert!(!has_node(&v, "listen:tcp:0.0.0.0:8080"));
}

#[test]
fn a_v4_mapped_peer_is_the_same_local_service_as_its_ipv4_listener() {
    let mut s = machine();
    listen(&mut s, "0.0.0.0:6000", 300);
    established(
        &mut s,
        "[::ffff:127.0.0.1]:45000",
        "[::ffff:127.0.0.1]:6000",
        1010,
    );
    established(&mut s, "127.0.0.1:45000", "127.0.0.1:6000", 1020);
    let (v, _) = flow_of(&s, &[claude()], &ask(Select::All));
    assert_eq!(node(&v, "listen:tcp:0.0.0.0:6000")["pid"], 300);
    edge(&v, "connects", "process:1010", "listen:tcp:0.0.0.0:6000");
    edge(&v, "connects", "process:1020", "listen:tcp:0.0.0.0:6000");
}

#[test]
fn many_connections_to_one_endpoint_are_one_relationship_with_a_count() {
    let mut s = machine();
    established(&mut s, "192.168.1.5:50001", "160.79.104.10:443", 1000);
    established(&mut s, "192.168.1.5:50002", "160.79.104.10:443", 1000);
    let (v, summary) = flow_of(&s, &[claude()], &ask(Select::All));
    let e = edge(&v, "connects", "process:1000", "remote:160.79.104.10:443");
    assert_eq!(e["facts"]["connections"], 3);
    assert_eq!(edges(&v, "connects").len(), 2);
    assert!(summary.contains("(3 connections)"), "{summary}");
}

#[test]
fn unreadable_processes_are_named_in_limits_and_the_limits_say_what_is_not_observed() {
    let mut s = machine();
    if let Some(p) = s.procs.get_mut(&1030) {
        p.argv.clear();
        p.cwd = None;
    }
    let (v, summary) = flow_of(&s, &[claude()], &ask(Select::All));
    assert_eq!(v["limits"]["unreadable_processes"], json!([1030]));
    let notes = v["limits"]["notes"].to_string();
    assert!(notes.contains("Tool invocations are not observed"));
    assert!(notes.contains("MCP traffic over stdio is invisible to socket tables"));
    assert!(notes.contains("No DNS lookup"));
    assert!(summary.contains("Could not read the command line or folder of 1 process(es)."));
    assert!(summary.contains("Tool invocations are not observed"));
}

#[test]
fn a_nested_agent_names_its_parent_and_its_spawn_from_the_outer_agent() {
    let mut s = machine();
    add(
        &mut s,
        process(1040, 1020, 1000, "codex", &["codex"], "/home/u/shop"),
    );
    let mut outer = claude();
    let inner = Found {
        pid: 1040,
        product: "codex",
        members: vec![1040],
        parent: Some(1000),
    };
    outer.members.retain(|m| *m != 1040);
    let (v, _) = flow_of(&s, &[outer, inner], &ask(Select::Pid(1040)));
    assert_eq!(node(&v, "agent:1040")["parent"], "agent:1000");
    edge(&v, "spawned", "process:1020", "process:1040");
    assert_eq!(node(&v, "process:1020")["agent"], "agent:1000");
    assert_eq!(node(&v, "process:1020")["role"], "member");
}

#[test]
fn the_published_schemas_are_closed_and_read_only() {
    let def = (super::TOOL.def)();
    assert_eq!(def.input_schema["additionalProperties"], false);
    assert_eq!(def.output_schema["additionalProperties"], false);
    assert!(def.annotations.read_only);
    assert!(
        def.description
            .contains("tool invocations are not observed")
    );
}
