//! The topology tools against snapshots made by hand (`model::fixture`): edges from both sides
//! of real-looking loopback connections, clusters and their names, the two views, stop order
//! with and without a cycle, and every result against the schema `tools/list` publishes.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::graph::{Graph, Kind, Service};
use super::{TOOLS, get_topology, plan_cluster_stop};
use crate::holdmap::confirm::Handles;
use crate::holdmap::framework::Category;
use crate::holdmap::model::Snapshot;
use crate::holdmap::model::fixture::{add, listen, machine, process, socket};
use crate::holdmap::schema;
use crate::holdmap::tool::{Cx, Outcome, Reply, Tool, ToolDef};
use crate::holdmap::world::World;
use crate::os::signal::{Sig, SignalError};
use crate::os::sockets::{Protocol, SocketState};

/// A machine that is always the same snapshot and never signals.
struct Fixed(Snapshot);

impl World for Fixed {
    fn observe(&self) -> Result<Snapshot, String> {
        Ok(self.0.clone())
    }
    fn signal(&self, pid: i32, _start_ticks: u64, _sig: Sig) -> Result<(), SignalError> {
        panic!("the topology tools signalled pid {pid}")
    }
    fn alive(&self, _pid: i32, _start_ticks: u64) -> bool {
        true
    }
}

/// A machine that cannot be read.
struct Unreadable;

impl World for Unreadable {
    fn observe(&self) -> Result<Snapshot, String> {
        Err("/proc is not mounted".to_owned())
    }
    fn signal(&self, pid: i32, _start_ticks: u64, _sig: Sig) -> Result<(), SignalError> {
        panic!("the topology tools signalled pid {pid}")
    }
    fn alive(&self, _pid: i32, _start_ticks: u64) -> bool {
        false
    }
}

fn service(port: u16, pid: i32, name: &str, is_dev: bool, project: Option<&str>) -> Service {
    Service {
        port,
        protocol: Protocol::Tcp,
        addresses: vec!["127.0.0.1".parse().unwrap()],
        pid: Some(pid),
        pids: vec![pid],
        process: Some(name.to_owned()),
        project: project.map(str::to_owned),
        is_dev,
        category: Some(if is_dev { Category::Dev } else { Category::App }),
    }
}

/// Both ends of one loopback connection, as `/proc/net/tcp` shows them: the client's side
/// (ephemeral local port, the service's port remote), held by `client`, and the accepted side
/// (the service's port local), held by `server`.
fn connect(s: &mut Snapshot, client: i32, ephemeral: u16, server: i32, port: u16) {
    let a = format!("127.0.0.1:{ephemeral}");
    let b = format!("127.0.0.1:{port}");
    socket(s, Protocol::Tcp, &a, &b, SocketState::Established, client);
    socket(s, Protocol::Tcp, &b, &a, SocketState::Established, server);
}

/// web (3000) -> api (3001) -> db (5432), all in project "shop"; db is postgres, not dev.
fn shop() -> (Snapshot, Vec<Service>) {
    let mut s = machine();
    add(
        &mut s,
        process(1001, 800, 1000, "node", &["node", "web.js"], "/p/shop"),
    );
    add(
        &mut s,
        process(1002, 800, 1000, "node", &["node", "api.js"], "/p/shop"),
    );
    add(
        &mut s,
        process(1003, 1, 1000, "postgres", &["postgres"], "/var/lib/pg"),
    );
    listen(&mut s, "127.0.0.1:3000", 1001);
    listen(&mut s, "127.0.0.1:3001", 1002);
    listen(&mut s, "127.0.0.1:5432", 1003);
    connect(&mut s, 1001, 40001, 1002, 3001);
    connect(&mut s, 1001, 40002, 1002, 3001);
    connect(&mut s, 1002, 40003, 1003, 5432);
    let services = vec![
        service(3000, 1001, "node", true, Some("shop")),
        service(3001, 1002, "node", true, Some("shop")),
        service(5432, 1003, "postgres", false, None),
    ];
    (s, services)
}

fn ids(g: &Graph, list: &[usize]) -> Vec<String> {
    list.iter().map(|i| g.nodes[*i].id.clone()).collect()
}

fn edges(g: &Graph) -> Vec<(String, String, u64)> {
    g.edges
        .iter()
        .map(|e| {
            (
                g.nodes[e.from].id.clone(),
                g.nodes[e.to].id.clone(),
                e.connections,
            )
        })
        .collect()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn def(name: &str) -> ToolDef {
    TOOLS
        .iter()
        .map(|t| (t.def)())
        .find(|d| d.name == name)
        .unwrap()
}

/// The structured result of a Done outcome, checked against the tool's published schema.
fn done(name: &str, outcome: Outcome) -> (String, Value) {
    match outcome {
        Outcome::Done {
            summary,
            structured,
        } => {
            schema::validate(&def(name).output_schema, &structured, "result").unwrap();
            (summary, structured)
        }
        Outcome::Failed(e) => panic!("{name} failed: {e}"),
    }
}

fn call(world: Arc<dyn World>, name: &str, arguments: Value) -> Outcome {
    let tool: &Tool = TOOLS.iter().find(|t| (t.def)().name == name).unwrap();
    let arguments = args(arguments);
    schema::validate(
        &def(name).input_schema,
        &Value::Object(arguments.clone()),
        "arguments",
    )
    .unwrap();
    let mut handles = Handles::new();
    let mut cx = Cx {
        world: &world,
        handles: &mut handles,
    };
    match (tool.run)(&arguments, &mut cx) {
        Reply::Now(o) => o,
        Reply::Later(_) | Reply::Committed(_) => panic!("{name} answered later"),
    }
}

#[test]
fn each_client_side_of_a_loopback_connection_makes_one_edge_and_the_accepted_side_none() {
    let (s, services) = shop();
    let g = Graph::build(&s, &services);
    assert_eq!(
        edges(&g),
        vec![
            ("svc:3000/tcp".to_owned(), "svc:3001/tcp".to_owned(), 2),
            ("svc:3001/tcp".to_owned(), "svc:5432/tcp".to_owned(), 1),
        ]
    );
    assert!(g.nodes.iter().all(|n| n.kind == Kind::Service));
}

#[test]
fn a_process_that_only_connects_is_a_client_node_named_by_its_pid() {
    let (mut s, services) = shop();
    add(
        &mut s,
        process(
            4242,
            800,
            1000,
            "curl",
            &["curl", "localhost:3000"],
            "/p/shop",
        ),
    );
    connect(&mut s, 4242, 40010, 1001, 3000);
    let g = Graph::build(&s, &services);
    let client = g.nodes.iter().find(|n| n.id == "proc:4242").unwrap();
    assert_eq!(client.kind, Kind::Client);
    assert_eq!(client.pid, Some(4242));
    assert_eq!(client.process.as_deref(), Some("curl"));
    assert_eq!(client.port, None);
    assert!(edges(&g).contains(&("proc:4242".to_owned(), "svc:3000/tcp".to_owned(), 1)));
}

#[test]
fn connections_to_other_machines_and_to_unlistened_ports_are_not_edges() {
    let (mut s, services) = shop();
    // To another machine's 5432, and to a loopback port nobody listens on.
    socket(
        &mut s,
        Protocol::Tcp,
        "192.168.1.5:40020",
        "192.168.1.9:5432",
        SocketState::Established,
        1002,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:40021",
        "127.0.0.1:9999",
        SocketState::Established,
        1002,
    );
    // A closing connection is not a dependency either.
    socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:40022",
        "127.0.0.1:5432",
        SocketState::TimeWait,
        0,
    );
    let g = Graph::build(&s, &services);
    assert_eq!(edges(&g).len(), 2, "{:?}", edges(&g));
    assert_eq!(g.edges[1].connections, 1);
}

#[test]
fn a_connection_to_the_machines_own_address_counts_like_loopback() {
    let mut s = machine();
    add(
        &mut s,
        process(1001, 800, 1000, "node", &["node", "web.js"], "/p/shop"),
    );
    add(
        &mut s,
        process(1002, 800, 1000, "node", &["node", "api.js"], "/p/shop"),
    );
    listen(&mut s, "0.0.0.0:3000", 1001);
    listen(&mut s, "[::]:3001", 1002);
    // web to api through the machine's LAN address, and api to web over IPv6 loopback.
    socket(
        &mut s,
        Protocol::Tcp,
        "192.168.1.5:40030",
        "192.168.1.5:3001",
        SocketState::Established,
        1001,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "192.168.1.5:3001",
        "192.168.1.5:40030",
        SocketState::Established,
        1002,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "[::1]:40031",
        "[::1]:3000",
        SocketState::Established,
        1002,
    );
    let mut web = service(3000, 1001, "node", true, Some("shop"));
    web.addresses = vec![IpAddr::from([0, 0, 0, 0])];
    let mut api = service(3001, 1002, "node", true, Some("shop"));
    api.addresses = vec!["::".parse().unwrap()];
    let g = Graph::build(&s, &[web, api]);
    // 0.0.0.0 takes only IPv4: api's IPv6 connection to :3000 reaches no listener here.
    assert_eq!(
        edges(&g),
        vec![("svc:3000/tcp".to_owned(), "svc:3001/tcp".to_owned(), 1)]
    );
}

#[test]
fn connected_services_form_one_cluster_named_after_the_dev_services_project() {
    let (mut s, mut services) = shop();
    add(
        &mut s,
        process(1004, 1, 0, "sshd", &["/usr/sbin/sshd"], "/"),
    );
    listen(&mut s, "0.0.0.0:22", 1004);
    let mut sshd = service(22, 1004, "sshd", false, None);
    sshd.category = Some(Category::System);
    services.insert(0, sshd);
    let g = Graph::build(&s, &services);
    let names: Vec<&str> = g.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["sshd", "shop"]);
    let shop = g.cluster("shop").unwrap();
    assert_eq!(
        ids(&g, &shop.nodes),
        vec!["svc:3000/tcp", "svc:3001/tcp", "svc:5432/tcp"]
    );
}

#[test]
fn cluster_names_are_unique_and_fall_back_to_the_process_then_a_number() {
    let mut s = machine();
    add(
        &mut s,
        process(1001, 800, 1000, "node", &["node", "a.js"], "/p/a"),
    );
    add(
        &mut s,
        process(1002, 800, 1000, "node", &["node", "b.js"], "/p/b"),
    );
    add(&mut s, process(1003, 800, 1000, "x", &[], "/"));
    let a = service(3000, 1001, "node", true, Some("shop"));
    let b = service(3001, 1002, "node", true, Some("shop"));
    let c = service(3002, 1003, "node", true, None);
    let mut hidden = service(3003, 0, "", false, None);
    hidden.pid = None;
    hidden.pids = Vec::new();
    hidden.process = None;
    let g = Graph::build(&s, &[a, b, c, hidden]);
    let names: Vec<&str> = g.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["shop", "shop-2", "node", "cluster-4"]);
}

#[test]
fn a_name_with_invisible_characters_is_shown_escaped_and_accepted_as_shown() {
    let mut s = machine();
    add(&mut s, process(1001, 800, 1000, "node", &["node"], "/p"));
    let svc = service(3000, 1001, "node", true, Some("sh\u{202e}op\nx"));
    let g = Graph::build(&s, &[svc]);
    let name = g.clusters[0].name.clone();
    assert!(!name.chars().any(crate::text::hidden), "{name:?}");
    let (_, out) = done(
        "plan_cluster_stop",
        plan_cluster_stop(&s, &g, &args(json!({"cluster": name}))),
    );
    assert_eq!(out["order"][0]["node"], "svc:3000/tcp");
}

#[test]
fn the_default_view_shows_dev_services_and_their_peers_and_all_shows_every_service() {
    let (mut s, mut services) = shop();
    add(
        &mut s,
        process(1004, 1, 0, "sshd", &["/usr/sbin/sshd"], "/"),
    );
    add(
        &mut s,
        process(1005, 1, 0, "cupsd", &["/usr/sbin/cupsd"], "/"),
    );
    listen(&mut s, "0.0.0.0:22", 1004);
    listen(&mut s, "127.0.0.1:631", 1005);
    connect(&mut s, 1005, 40040, 1004, 22);
    // In port order, as `listeners` gives them.
    services.splice(
        0..0,
        [
            service(22, 1004, "sshd", false, None),
            service(631, 1005, "cupsd", false, None),
        ],
    );
    let g = Graph::build(&s, &services);

    let (summary, default) = done("get_topology", get_topology(&s, &g, &args(json!({}))));
    let shown: Vec<&str> = default["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    // postgres is not a dev service but api depends on it: a direct peer.
    assert_eq!(shown, vec!["svc:3000/tcp", "svc:3001/tcp", "svc:5432/tcp"]);
    assert_eq!(default["stats"]["edges"], 2);
    assert_eq!(default["stats"]["clusters"], 1);
    assert!(
        summary.contains("2 system or application services are not shown"),
        "{summary}"
    );

    let (_, all) = done(
        "get_topology",
        get_topology(&s, &g, &args(json!({"all": true}))),
    );
    assert_eq!(all["stats"]["services"], 5);
    assert_eq!(all["stats"]["edges"], 3);
    assert_eq!(all["clusters"].as_array().unwrap().len(), 2);
    assert_eq!(
        all["edges"][0],
        json!({"from": "svc:631/tcp", "to": "svc:22/tcp", "connections": 1})
    );
}

#[test]
fn a_plain_client_of_a_service_that_is_not_dev_is_left_out_of_the_default_view() {
    let (mut s, mut services) = shop();
    add(
        &mut s,
        process(1004, 1, 1000, "redis-server", &["redis-server"], "/"),
    );
    add(&mut s, process(4242, 800, 1000, "curl", &["curl"], "/"));
    listen(&mut s, "127.0.0.1:6379", 1004);
    connect(&mut s, 4242, 40050, 1004, 6379);
    services.push(service(6379, 1004, "redis-server", false, None));
    let g = Graph::build(&s, &services);
    let shown = g.visible(false);
    let redis = g.nodes.iter().position(|n| n.id == "svc:6379/tcp").unwrap();
    let curl = g.nodes.iter().position(|n| n.id == "proc:4242").unwrap();
    assert!(!shown[redis] && !shown[curl]);
    assert!(g.visible(true).iter().all(|s| *s));
}

#[test]
fn every_format_renders_the_edges_and_the_json_format_renders_the_tree() {
    let (s, services) = shop();
    let g = Graph::build(&s, &services);
    let render = |format: &str| {
        done(
            "get_topology",
            get_topology(&s, &g, &args(json!({"format": format}))),
        )
        .1["rendered"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let tree = render("tree");
    assert_eq!(render("json"), tree);
    assert!(
        tree.starts_with("shop (3 nodes)\n`-- svc:3000/tcp node (pid 1001), dev, project shop\n"),
        "{tree}"
    );
    assert!(
        tree.contains("    `-- svc:3001/tcp node (pid 1002), dev, project shop [2 connections]\n"),
        "{tree}"
    );
    assert!(
        tree.contains("        `-- svc:5432/tcp postgres (pid 1003), app [1 connection]\n"),
        "{tree}"
    );
    let mermaid = render("mermaid");
    assert!(
        mermaid.starts_with("graph LR\n  subgraph c0[\"shop\"]\n"),
        "{mermaid}"
    );
    assert!(
        mermaid.contains("  n0 -->|2 connections| n1\n"),
        "{mermaid}"
    );
    let dot = render("dot");
    assert!(dot.starts_with("digraph topology {\n"), "{dot}");
    assert!(
        dot.contains("  \"svc:3001/tcp\" -> \"svc:5432/tcp\" [label=\"1 connection\"];\n"),
        "{dot}"
    );
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn a_quote_in_a_process_name_cannot_close_a_label() {
    let mut s = machine();
    add(&mut s, process(1001, 800, 1000, "a\"b", &["x"], "/p"));
    let svc = service(3000, 1001, "a\"b", true, None);
    let g = Graph::build(&s, &[svc]);
    let out = |f: &str| {
        done(
            "get_topology",
            get_topology(&s, &g, &args(json!({"format": f}))),
        )
        .1["rendered"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(out("mermaid").contains("a#quot;b"));
    assert!(out("dot").contains("a\\\"b"));
}

#[test]
fn dependents_are_stopped_first_web_then_api_then_db() {
    let (s, services) = shop();
    let g = Graph::build(&s, &services);
    let (order, notes) = g.stop_order(g.cluster("shop").unwrap());
    assert_eq!(
        ids(&g, &order),
        vec!["svc:3000/tcp", "svc:3001/tcp", "svc:5432/tcp"]
    );
    assert!(notes.is_empty());

    let (summary, out) = done(
        "plan_cluster_stop",
        plan_cluster_stop(&s, &g, &args(json!({"cluster": "shop"}))),
    );
    let nodes: Vec<&str> = out["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, vec!["svc:3000/tcp", "svc:3001/tcp", "svc:5432/tcp"]);
    assert_eq!(out["order"][2]["step"], 3);
    assert_eq!(out["order"][2]["port"], 5432);
    assert_eq!(out["order"][2]["protocol"], "tcp");
    assert_eq!(out["executes"], false);
    assert_eq!(out["note"], super::DRY_RUN_NOTE);
    assert!(summary.contains("nothing was stopped"), "{summary}");
}

#[test]
fn each_step_carries_the_plan_stop_port_would_make_for_its_port() {
    let (s, services) = shop();
    let g = Graph::build(&s, &services);
    let (_, out) = done(
        "plan_cluster_stop",
        plan_cluster_stop(&s, &g, &args(json!({"cluster": "shop"}))),
    );
    let want = crate::holdmap::plan::to_json(&crate::holdmap::plan::plan_port(
        &s,
        3001,
        Some(Protocol::Tcp),
        crate::holdmap::plan::PlanOptions::default(),
    ));
    assert_eq!(out["order"][1]["plan"], want);
}

#[test]
fn a_cycle_is_broken_at_the_same_place_every_time_and_said_so() {
    let (mut s, services) = shop();
    // db also connects back to web: web -> api -> db -> web.
    connect(&mut s, 1003, 40060, 1001, 3000);
    let g = Graph::build(&s, &services);
    let cluster = g.cluster("shop").unwrap();
    let (order, notes) = g.stop_order(cluster);
    assert_eq!(
        ids(&g, &order),
        vec!["svc:3000/tcp", "svc:3001/tcp", "svc:5432/tcp"]
    );
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("cycle was broken at svc:3000/tcp"),
        "{}",
        notes[0]
    );
    assert_eq!(g.stop_order(cluster), (order, notes.clone()));
    let (_, out) = done(
        "plan_cluster_stop",
        plan_cluster_stop(&s, &g, &args(json!({"cluster": "shop"}))),
    );
    assert_eq!(out["warnings"][0], notes[0]);
}

#[test]
fn a_cycle_behind_a_dependent_is_broken_only_after_the_dependent_stops() {
    let (mut s, mut services) = shop();
    // api <-> db, and a front (8080) -> web -> api.
    connect(&mut s, 1003, 40070, 1002, 3001);
    add(
        &mut s,
        process(1005, 800, 1000, "node", &["node", "front.js"], "/p/shop"),
    );
    listen(&mut s, "127.0.0.1:8080", 1005);
    connect(&mut s, 1005, 40071, 1001, 3000);
    services.push(service(8080, 1005, "node", true, Some("shop")));
    let g = Graph::build(&s, &services);
    let (order, notes) = g.stop_order(g.cluster("shop").unwrap());
    assert_eq!(
        ids(&g, &order),
        vec![
            "svc:8080/tcp",
            "svc:3000/tcp",
            "svc:3001/tcp",
            "svc:5432/tcp"
        ]
    );
    assert_eq!(notes.len(), 1);
}

#[test]
fn a_client_in_a_cluster_is_named_in_the_warnings_not_in_the_order() {
    let (mut s, services) = shop();
    add(&mut s, process(4242, 800, 1000, "curl", &["curl"], "/"));
    connect(&mut s, 4242, 40080, 1001, 3000);
    let g = Graph::build(&s, &services);
    let (_, out) = done(
        "plan_cluster_stop",
        plan_cluster_stop(&s, &g, &args(json!({"cluster": "shop"}))),
    );
    assert_eq!(out["order"].as_array().unwrap().len(), 3);
    assert!(
        out["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("proc:4242 curl (pid 4242)")
    );
}

#[test]
fn an_unknown_cluster_is_a_tool_error_listing_the_clusters() {
    let (s, services) = shop();
    let g = Graph::build(&s, &services);
    let Outcome::Failed(e) = plan_cluster_stop(&s, &g, &args(json!({"cluster": "shopp"}))) else {
        panic!("an unknown cluster was planned");
    };
    assert!(e.contains("No cluster is named \"shopp\""), "{e}");
    assert!(e.contains("The clusters now are: shop."), "{e}");

    let empty = Graph::build(&machine(), &[]);
    let Outcome::Failed(e) = plan_cluster_stop(&machine(), &empty, &args(json!({"cluster": "x"})))
    else {
        panic!("a cluster was planned on an empty machine");
    };
    assert!(e.contains("there are no clusters"), "{e}");
}

#[test]
fn hidden_sockets_are_counted_and_said() {
    let (mut s, services) = shop();
    s.hidden_sockets = 3;
    s.warnings
        .push("/proc/net/tcp6 could not be read".to_owned());
    let g = Graph::build(&s, &services);
    let (summary, out) = done("get_topology", get_topology(&s, &g, &args(json!({}))));
    assert_eq!(out["stats"]["hidden_sockets"], 3);
    assert_eq!(out["warnings"].as_array().unwrap().len(), 2);
    assert!(
        summary.contains("warning: /proc/net/tcp6 could not be read\n"),
        "{summary}"
    );
    assert!(
        summary
            .contains("warning: a connection held through any of the 3 hidden sockets has no edge"),
        "{summary}"
    );
    assert_eq!(out["taken_at_ms"], 1_700_000_000_000_u64);
}

#[test]
fn the_tools_through_a_world_answer_read_only_and_within_their_schemas() {
    for t in TOOLS {
        let d = (t.def)();
        assert!(
            d.annotations.read_only && !d.annotations.destructive,
            "{}",
            d.name
        );
        assert_eq!(d.input_schema["additionalProperties"], false);
        assert_eq!(d.output_schema["additionalProperties"], false);
    }
    let (mut s, _) = shop();
    add(
        &mut s,
        process(
            1010,
            800,
            1000,
            "python3",
            &["python3", "-m", "http.server"],
            "/p",
        ),
    );
    listen(&mut s, "127.0.0.1:8000", 1010);
    let world: Arc<dyn World> = Arc::new(Fixed(s));
    for format in ["json", "mermaid", "dot", "tree"] {
        for all in [false, true] {
            done(
                "get_topology",
                call(
                    world.clone(),
                    "get_topology",
                    json!({"all": all, "format": format}),
                ),
            );
        }
    }
    // Whatever the judging of the listeners makes of this machine, each cluster it names plans.
    let (_, all) = done(
        "get_topology",
        call(world.clone(), "get_topology", json!({"all": true})),
    );
    for c in all["clusters"].as_array().unwrap() {
        let (_, out) = done(
            "plan_cluster_stop",
            call(
                world.clone(),
                "plan_cluster_stop",
                json!({"cluster": c["name"]}),
            ),
        );
        assert_eq!(out["executes"], false);
    }
    assert!(matches!(
        call(
            world,
            "plan_cluster_stop",
            json!({"cluster": "no such cluster"})
        ),
        Outcome::Failed(_)
    ));
}

#[test]
fn an_unreadable_machine_is_a_tool_error_in_words() {
    let world: Arc<dyn World> = Arc::new(Unreadable);
    let Outcome::Failed(e) = call(world, "get_topology", json!({})) else {
        panic!("an unreadable machine gave a topology");
    };
    assert_eq!(
        e,
        "holdmap could not read this machine: /proc is not mounted"
    );
}

#[test]
fn a_cycle_is_broken_on_the_cycle_never_at_a_service_below_it() {
    let mut s = machine();
    for (pid, name) in [(1001, "cache"), (1002, "api"), (1003, "db")] {
        add(&mut s, process(pid, 800, 1000, name, &[name], "/p/shop"));
    }
    // cache (2000) has the lowest port; api (3001) <-> db (5432), and db -> cache.
    listen(&mut s, "127.0.0.1:2000", 1001);
    listen(&mut s, "127.0.0.1:3001", 1002);
    listen(&mut s, "127.0.0.1:5432", 1003);
    connect(&mut s, 1002, 40001, 1003, 5432);
    connect(&mut s, 1003, 40002, 1002, 3001);
    connect(&mut s, 1003, 40003, 1001, 2000);
    let services = vec![
        service(2000, 1001, "cache", true, Some("shop")),
        service(3001, 1002, "api", true, Some("shop")),
        service(5432, 1003, "db", true, Some("shop")),
    ];
    let g = Graph::build(&s, &services);
    let (order, notes) = g.stop_order(g.cluster("shop").unwrap());
    assert_eq!(
        ids(&g, &order),
        vec!["svc:3001/tcp", "svc:5432/tcp", "svc:2000/tcp"]
    );
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].starts_with("svc:3001/tcp, svc:5432/tcp depend on each other in a cycle"),
        "{}",
        notes[0]
    );
}

#[test]
fn the_tree_names_a_shared_dependency_and_a_cycle_once_and_points_back_to_it() {
    let (mut s, services) = shop();
    // web also uses db directly, and db calls back into api.
    connect(&mut s, 1001, 40090, 1003, 5432);
    connect(&mut s, 1003, 40091, 1002, 3001);
    let g = Graph::build(&s, &services);
    let (_, out) = done(
        "get_topology",
        get_topology(&s, &g, &args(json!({"format": "tree"}))),
    );
    let tree = out["rendered"].as_str().unwrap();
    assert_eq!(
        tree,
        "shop (3 nodes)\n\
         `-- svc:3000/tcp node (pid 1001), dev, project shop\n\
         \x20   |-- svc:3001/tcp node (pid 1002), dev, project shop [2 connections]\n\
         \x20   |   `-- svc:5432/tcp postgres (pid 1003), app [1 connection]\n\
         \x20   |       `-- svc:3001/tcp node (pid 1002), dev, project shop [1 connection] (see above)\n\
         \x20   `-- svc:5432/tcp postgres (pid 1003), app [1 connection] (see above)\n"
    );
}
