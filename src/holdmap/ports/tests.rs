//! The port tools against fixture snapshots and a fake `World`; only `find_free_port`,
//! `wait_for_port` and the probe touch real sockets, and only on loopback.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{explain, free, inspect, inspection, list, wait};
use crate::holdmap::confirm::Handles;
use crate::holdmap::model::{Snapshot, fixture};
use crate::holdmap::tool::{Annotations, Cx, Outcome, Reply, ToolDef};
use crate::holdmap::world::World;
use crate::os::signal::{Sig, SignalError};
use crate::os::sockets::{Protocol, SocketState};

/// A machine that shows whatever snapshot the test set, and refuses every signal.
struct FakeWorld(Mutex<Result<Snapshot, String>>);

impl FakeWorld {
    fn new(snap: Snapshot) -> Arc<FakeWorld> {
        Arc::new(FakeWorld(Mutex::new(Ok(snap))))
    }
    fn set(&self, snap: Snapshot) {
        *self.0.lock().unwrap() = Ok(snap);
    }
}

impl World for FakeWorld {
    fn observe(&self) -> Result<Snapshot, String> {
        self.0.lock().unwrap().clone()
    }
    fn signal(&self, pid: i32, _start_ticks: u64, _sig: Sig) -> Result<(), SignalError> {
        Err(SignalError::Denied { pid })
    }
    fn alive(&self, _pid: i32, _start_ticks: u64) -> bool {
        true
    }
}

/// A port nothing listens on (bound and released by the test).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A project folder named shop-web (package.json) on branch main.
fn shop_web() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name":"shop-web"}"#).unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    dir
}

/// The fixture machine plus: npm (4200, under the shell 800) running vite (4242) on
/// 127.0.0.1:`port`, with an esbuild child (4243) and a curl (5000) connected to it; postgres
/// (600, not a dev server) on 0.0.0.0:5432; a UDP socket of 4242 on `port`+1; and root's sshd
/// on 22.
fn machine(project: &std::path::Path, port: u16) -> Snapshot {
    let cwd = project.to_str().unwrap();
    let mut s = fixture::machine();
    let p = fixture::process;
    fixture::add(
        &mut s,
        p(4200, 800, 1000, "npm", &["npm", "run", "dev"], cwd),
    );
    let vite = format!("{cwd}/node_modules/.bin/vite");
    fixture::add(&mut s, p(4242, 4200, 1000, "node", &["node", &vite], cwd));
    fixture::add(
        &mut s,
        p(4243, 4242, 1000, "esbuild", &["esbuild", "--service"], cwd),
    );
    fixture::add(
        &mut s,
        p(5000, 800, 1000, "curl", &["curl", "localhost"], "/home/u"),
    );
    fixture::add(
        &mut s,
        p(
            600,
            1,
            1000,
            "postgres",
            &["postgres", "-D", "/var/pg"],
            "/var/pg",
        ),
    );
    fixture::add(&mut s, p(400, 1, 0, "sshd", &["/usr/sbin/sshd", "-D"], "/"));
    fixture::listen(&mut s, &format!("127.0.0.1:{port}"), 4242);
    fixture::socket(
        &mut s,
        Protocol::Tcp,
        &format!("127.0.0.1:{port}"),
        "127.0.0.1:50123",
        SocketState::Established,
        4242,
    );
    fixture::socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:50123",
        &format!("127.0.0.1:{port}"),
        SocketState::Established,
        5000,
    );
    fixture::socket(
        &mut s,
        Protocol::Udp,
        &format!("127.0.0.1:{}", port + 1),
        "0.0.0.0:0",
        SocketState::Bound,
        4242,
    );
    fixture::listen(&mut s, "0.0.0.0:5432", 600);
    fixture::listen(&mut s, "0.0.0.0:22", 400);
    s
}

type Run = fn(&Map<String, Value>, &mut Cx<'_>) -> Reply;
type Def = fn() -> ToolDef;

/// Runs `run` with `args`, awaiting a `Reply::Later`.
async fn call(world: &Arc<FakeWorld>, run: Run, args: Value) -> Outcome {
    let world: Arc<dyn World> = world.clone();
    let mut handles = Handles::new();
    let mut cx = Cx {
        world: &world,
        handles: &mut handles,
    };
    let args = args.as_object().cloned().unwrap();
    match run(&args, &mut cx) {
        Reply::Now(o) => o,
        Reply::Later(f) | Reply::Committed(f) => f.await,
    }
}

/// The outcome's summary and structure, checked against the tool's published output schema.
fn done(def: fn() -> ToolDef, o: Outcome) -> (String, Value) {
    match o {
        Outcome::Done {
            summary,
            structured,
        } => {
            crate::holdmap::catalog::check_output(def().name, &structured);
            assert!(structured.is_object());
            (summary, structured)
        }
        Outcome::Failed(e) => panic!("tool error: {e}"),
    }
}

fn failed(o: Outcome) -> String {
    match o {
        Outcome::Failed(e) => e,
        Outcome::Done { summary, .. } => panic!("expected a tool error, got: {summary}"),
    }
}

fn ports_of(v: &Value) -> Vec<u64> {
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["port"].as_u64().unwrap())
        .collect()
}

#[test]
fn every_port_tool_publishes_a_closed_read_only_definition() {
    let names: Vec<&str> = super::TOOLS.iter().map(|t| (t.def)().name).collect();
    assert_eq!(
        names,
        [
            "list_ports",
            "explain_port",
            "inspect_port",
            "find_free_port",
            "wait_for_port"
        ]
    );
    for t in super::TOOLS {
        let d = (t.def)();
        assert_eq!(d.input_schema["type"], "object", "{}", d.name);
        assert_eq!(d.input_schema["additionalProperties"], false, "{}", d.name);
        assert_eq!(d.output_schema["additionalProperties"], false, "{}", d.name);
        let a: Annotations = d.annotations;
        assert!(a.read_only && !a.destructive, "{}", d.name);
        assert!(!d.title.is_empty() && !d.description.is_empty());
    }
    assert_eq!(
        (explain::def)().output_schema,
        (inspect::def)().output_schema
    );
    assert!((wait::def)().description.contains("not application health"));
    assert!((free::def)().description.contains("not a reservation"));
}

#[tokio::test]
async fn list_ports_lists_every_listener_with_the_snapshot_facts() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let (summary, v) = done(list::def, call(&world, list::run, json!({})).await);
    let mut expected = vec![22, 5432, u64::from(port), u64::from(port) + 1];
    expected.sort_unstable();
    assert_eq!(ports_of(&v), expected);
    assert_eq!(v["platform"], "linux");
    assert_eq!(v["taken_at_ms"], 1_700_000_000_000_u64);
    assert_eq!(v["hidden_sockets"], 0);
    assert_eq!(v["warnings"], json!([]));
    let line = format!("{port}/tcp  vite  pid 4242  shop-web (main)  loopback");
    assert!(summary.contains(&line), "{summary}");
    assert!(summary.starts_with("4 listening ports:"), "{summary}");
    assert!(!summary.contains("Warnings"), "{summary}");
}

#[tokio::test]
async fn list_ports_filters_by_query_dev_only_and_protocol() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let p = u64::from(port);
    let run = |args: Value| {
        let world = world.clone();
        async move { ports_of(&done(list::def, call(&world, list::run, args).await).1) }
    };
    assert_eq!(run(json!({"query": format!(":{port}")})).await, [p]);
    assert_eq!(run(json!({"query": "vite"})).await, [p, p + 1]);
    assert_eq!(run(json!({"query": "5000-5999"})).await, [5432]);
    assert_eq!(run(json!({"protocol": "udp"})).await, [p + 1]);
    assert_eq!(run(json!({"query": "proto:udp"})).await, [p + 1]);
    assert_eq!(run(json!({"query": "pid:600"})).await, [5432]);
    let dev = run(json!({"dev_only": true})).await;
    assert!(
        dev.contains(&p) && !dev.contains(&5432) && !dev.contains(&22),
        "{dev:?}"
    );
    assert_eq!(
        run(json!({"dev_only": true, "protocol": "tcp", "query": "shop"})).await,
        [p]
    );
    let (summary, v) = done(
        list::def,
        call(&world, list::run, json!({"query": "nothing-like-it"})).await,
    );
    assert_eq!(v["ports"], json!([]));
    assert_eq!(summary, "No listening port matches the filter.");
}

#[tokio::test]
async fn a_malformed_query_is_a_tool_error_that_says_why() {
    let world = FakeWorld::new(fixture::machine());
    let e = failed(call(&world, list::run, json!({"query": "pid:x"})).await);
    assert!(e.contains("pid:x"), "{e}");
}

#[tokio::test]
async fn warnings_and_hidden_sockets_are_echoed_in_the_summary() {
    let mut snap = fixture::machine();
    snap.warnings
        .push("/proc/net/udp6 could not be read".to_owned());
    snap.hidden_sockets = 3;
    let world = FakeWorld::new(snap);
    let (summary, v) = done(list::def, call(&world, list::run, json!({})).await);
    assert_eq!(v["hidden_sockets"], 3);
    assert_eq!(v["warnings"], json!(["/proc/net/udp6 could not be read"]));
    assert!(
        summary.contains("Warnings: /proc/net/udp6 could not be read"),
        "{summary}"
    );
    assert!(summary.contains("Warnings: 3 socket(s) are held by processes holdmap could not read"));
    // A collection warning that already speaks of hidden sockets is not doubled.
    let mut snap = fixture::machine();
    snap.warnings
        .push("2 sockets are held by no readable process; counted as hidden_sockets".to_owned());
    snap.hidden_sockets = 2;
    world.set(snap);
    let (summary, _) = done(list::def, call(&world, list::run, json!({})).await);
    assert_eq!(summary.matches("Warnings:").count(), 1, "{summary}");
    assert!(summary.ends_with("Check warnings before treating an empty result as complete."));
}

#[tokio::test]
async fn a_machine_that_cannot_be_read_is_a_tool_error() {
    let world = Arc::new(FakeWorld(Mutex::new(
        Err("/proc is not mounted".to_owned()),
    )));
    let e = failed(call(&world, list::run, json!({})).await);
    assert!(e.contains("/proc is not mounted"), "{e}");
    let e = failed(call(&world, explain::run, json!({"port": 3000})).await);
    assert!(e.contains("could not read"), "{e}");
}

#[tokio::test]
async fn explaining_a_free_port_says_so_with_no_owner_plan_or_probe() {
    let world = FakeWorld::new(fixture::machine());
    let (summary, v) = done(
        explain::def,
        call(&world, explain::run, json!({"port": 3999})).await,
    );
    assert_eq!(v["status"], "free");
    assert_eq!(v["headline"], "Port 3999 is free: nothing listens on it");
    assert!(
        v["recommendation"]
            .as_str()
            .unwrap()
            .contains("candidate, not a reservation")
    );
    assert_eq!(v["owners"], json!([]));
    assert_eq!(v["process_tree"], json!([]));
    assert_eq!(v["plan"], Value::Null);
    assert_eq!(v["http"], Value::Null);
    assert_eq!(v["bind_risk"]["level"], "none");
    assert!(summary.starts_with("Port 3999 is free"), "{summary}");
}

#[tokio::test]
async fn explaining_a_busy_port_names_the_owner_its_project_peers_and_tree() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let (summary, v) = done(
        explain::def,
        call(&world, explain::run, json!({"port": port})).await,
    );
    assert_eq!(v["status"], "busy");
    assert_eq!(
        v["headline"],
        format!(
            "Port {port} is held by vite (pid 4242), the dev server of shop-web on branch main"
        )
    );
    let rec = v["recommendation"].as_str().unwrap();
    assert!(
        rec.contains("find_free_port") && rec.contains("stop_port"),
        "{rec}"
    );
    assert_eq!(v["owners"].as_array().unwrap().len(), 1);
    assert_eq!(v["owners"][0]["pid"], 4242);
    let conns = v["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert!(
        conns
            .iter()
            .any(|c| c["pid"] == 5000 && c["process"] == "curl")
    );
    assert!(conns.iter().all(|c| c["state"] == "established"));
    let tree: Vec<(i64, &str)> = v["process_tree"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["pid"].as_i64().unwrap(), r["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tree,
        [
            (700, "ancestor"),
            (800, "ancestor"),
            (4200, "ancestor"),
            (4242, "owner"),
            (4243, "descendant")
        ]
    );
    assert_eq!(v["bind_risk"]["level"], "loopback_only");
    // The listener is on 127.0.0.1, so the probe ran there (and found nobody: the port is
    // closed on the real machine).
    assert_eq!(v["http"]["url"], format!("http://127.0.0.1:{port}/"));
    assert_eq!(v["http"]["status"], Value::Null);
    assert!(
        summary.contains("Bind risk: listening on loopback only"),
        "{summary}"
    );
    assert!(summary.contains("curl (pid 5000)"), "{summary}");
    assert!(
        summary.contains(
            "Process tree: gnome-terminal- (700) > bash (800) > npm (4200) > node (4242)"
        ),
        "{summary}"
    );
    assert!(summary.contains("HTTP: GET http://127.0.0.1:"), "{summary}");
}

#[tokio::test]
async fn inspect_gives_the_same_structure_as_explain_with_a_table_summary() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let (prose, a) = done(
        explain::def,
        call(&world, explain::run, json!({"port": port})).await,
    );
    let (table, b) = done(
        inspect::def,
        call(&world, inspect::run, json!({"port": port})).await,
    );
    let strip = |mut v: Value| {
        v["http"]["error"] = Value::Null;
        v
    };
    assert_eq!(strip(a), strip(b));
    assert_ne!(prose, table);
    assert!(
        table.starts_with(&format!("port         {port}\nstatus       busy\n")),
        "{table}"
    );
    assert!(table.contains("owner        "), "{table}");
}

#[tokio::test]
async fn an_all_interfaces_non_dev_owner_is_a_network_risk_needing_allow_non_dev() {
    let dir = shop_web();
    let world = FakeWorld::new(machine(dir.path(), closed_port()));
    let (_, v) = done(
        explain::def,
        call(&world, explain::run, json!({"port": 5432})).await,
    );
    assert_eq!(v["bind_risk"]["level"], "all_interfaces");
    assert!(
        v["bind_risk"]["words"]
            .as_str()
            .unwrap()
            .contains("reachable from the network")
    );
    assert!(
        v["recommendation"]
            .as_str()
            .unwrap()
            .contains("allow_non_dev"),
        "{v:#}"
    );
    assert!(
        v["headline"]
            .as_str()
            .unwrap()
            .starts_with("Port 5432 is held by postgres (pid 600)")
    );
}

#[tokio::test]
async fn another_accounts_owner_is_said_to_be_unstoppable_from_here() {
    let dir = shop_web();
    let world = FakeWorld::new(machine(dir.path(), closed_port()));
    let (_, v) = done(
        explain::def,
        call(&world, explain::run, json!({"port": 22})).await,
    );
    let rec = v["recommendation"].as_str().unwrap();
    assert!(
        rec.contains("cannot stop") && rec.contains("find_free_port"),
        "{rec}"
    );
    assert!(
        v["headline"].as_str().unwrap().contains("another account"),
        "{v:#}"
    );
}

#[tokio::test]
async fn a_port_held_only_on_a_network_address_is_not_probed() {
    let mut snap = fixture::machine();
    fixture::add(
        &mut snap,
        fixture::process(
            4300,
            800,
            1000,
            "python3",
            &["python3", "-m", "http.server"],
            "/home/u",
        ),
    );
    fixture::listen(&mut snap, "192.168.1.5:8000", 4300);
    let world = FakeWorld::new(snap);
    let (_, v) = done(
        inspect::def,
        call(&world, inspect::run, json!({"port": 8000})).await,
    );
    assert_eq!(v["http"], Value::Null);
    assert_eq!(v["bind_risk"]["level"], "specific_address");
    assert!(
        v["bind_risk"]["words"]
            .as_str()
            .unwrap()
            .contains("192.168.1.5")
    );
}

#[tokio::test]
async fn the_probe_of_a_real_loopback_listener_is_in_the_inspection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf).await.unwrap();
        s.write_all(b"HTTP/1.0 200 OK\r\n\r\n<title>Shop</title>")
            .await
            .unwrap();
    });
    let dir = shop_web();
    let world = FakeWorld::new(machine(dir.path(), port));
    let (summary, v) = done(
        explain::def,
        call(&world, explain::run, json!({"port": port})).await,
    );
    server.await.unwrap();
    assert_eq!(v["http"]["status"], 200);
    assert_eq!(v["http"]["title"], "Shop");
    assert!(
        summary.contains("answered 200 (title \"Shop\")"),
        "{summary}"
    );
}

#[test]
fn the_search_near_a_port_skips_held_and_unbindable_ports_and_stops_at_65535() {
    let held = [3000, 3001].into_iter().collect();
    assert_eq!(free::find_near(&held, 3000, |p| p != 3002), Ok((3003, 3)));
    assert_eq!(free::find_near(&held, 2999, |_| true), Ok((2999, 0)));
    let e = free::find_near(&held, 65530, |_| false).unwrap_err();
    assert!(e.contains("65530-65535 (6 tried)"), "{e}");
    let e = free::find_near(&held, 1, |_| false).unwrap_err();
    assert!(e.contains("1-500 (500 tried)"), "{e}");
}

#[tokio::test]
async fn find_free_port_skips_a_port_held_on_loopback_and_one_in_the_snapshot() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held = holder.local_addr().unwrap().port();
    let mut snap = fixture::machine();
    // The snapshot says the next port is held (on another address): skipped without a bind.
    fixture::listen(&mut snap, &format!("10.0.0.9:{}", held + 1), 900);
    let world = FakeWorld::new(snap);
    let (summary, v) = done(
        free::def,
        call(&world, free::run, json!({"near": held})).await,
    );
    let got = u16::try_from(v["port"].as_u64().unwrap()).unwrap();
    assert!(got > held + 1, "{got} <= {}", held + 1);
    assert_eq!(v["candidate"], true);
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .starts_with("a candidate, not a reservation")
    );
    assert!(summary.contains("not a reservation"), "{summary}");
    assert!(free::binds_loopback_for_tests(got));
    drop(holder);
}

#[tokio::test]
async fn find_free_port_without_near_asks_the_os() {
    let world = FakeWorld::new(fixture::machine());
    let (summary, v) = done(free::def, call(&world, free::run, json!({})).await);
    assert!(v["port"].as_u64().unwrap() > 0);
    assert!(
        summary.contains("handed out by the operating system"),
        "{summary}"
    );
}

#[tokio::test]
async fn wait_for_port_answers_at_once_when_the_port_already_accepts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let world = FakeWorld::new(fixture::machine());
    let (summary, v) = done(
        wait::def,
        call(&world, wait::run, json!({"port": port, "timeout_s": 5})).await,
    );
    assert_eq!(v["ready"], true);
    assert_eq!(v["until_free"], false);
    assert!(
        summary.contains("TCP readiness is not application health"),
        "{summary}"
    );
}

#[tokio::test]
async fn wait_for_port_gives_up_at_its_timeout_with_a_tool_error() {
    let port = closed_port();
    let world = FakeWorld::new(fixture::machine());
    let start = tokio::time::Instant::now();
    let e = failed(call(&world, wait::run, json!({"port": port, "timeout_s": 0.2})).await);
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        e,
        format!(
            "port {port} did not accept connections within 0.2 s on 127.0.0.1 or ::1; check the server's own output, or wait longer with a larger timeout_s"
        )
    );
}

#[tokio::test]
async fn wait_until_free_keeps_waiting_while_the_snapshot_shows_a_listener() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let e = failed(
        call(
            &world,
            wait::run,
            json!({"port": port, "timeout_s": 0.2, "until_free": true}),
        )
        .await,
    );
    assert!(
        e.starts_with(&format!(
            "port {port} was still in use after 0.2 s (held by vite (pid 4242)"
        )),
        "{e}"
    );
    // Once the snapshot no longer shows it (and nothing accepts), the wait ends.
    world.set(fixture::machine());
    let (_, v) = done(
        wait::def,
        call(&world, wait::run, json!({"port": port, "until_free": true})).await,
    );
    assert_eq!(v["until_free"], true);
    // Free at the first look: no poll interval passed.
    assert!(v["elapsed_ms"].as_u64().unwrap() < 100, "{v}");
}

#[tokio::test]
async fn every_done_result_validates_against_its_published_schema() {
    let dir = shop_web();
    let port = closed_port();
    let world = FakeWorld::new(machine(dir.path(), port));
    let cases: Vec<(Def, Run, Value)> = vec![
        (list::def, list::run, json!({})),
        (list::def, list::run, json!({"dev_only": true})),
        (explain::def, explain::run, json!({"port": port})),
        (explain::def, explain::run, json!({"port": 22})),
        (explain::def, explain::run, json!({"port": 1})),
        (inspect::def, inspect::run, json!({"port": 5432})),
        (free::def, free::run, json!({"near": 40000})),
        (free::def, free::run, json!({})),
        (
            wait::def,
            wait::run,
            json!({"port": closed_port(), "until_free": true}),
        ),
    ];
    for (def, run, args) in cases {
        let (_, v) = done(def, call(&world, run, args.clone()).await);
        // The schema's required keys are exactly the keys given (closed both ways).
        let schema = def().output_schema;
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let mut given: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        required.sort_unstable();
        given.sort_unstable();
        assert_eq!(required, given, "{} {args}", def().name);
    }
    let _ = inspection::output_schema();
}
