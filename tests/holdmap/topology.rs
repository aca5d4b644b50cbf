//! get_topology and plan_cluster_stop through the real `holdmap mcp`, against three real
//! processes this test starts in a temp project folder (a package.json): "db" listens, "api"
//! listens and holds a connection to db, "web" listens and holds a connection to api — each a
//! small `python3 -c` script on a loopback port the kernel picked. The plan must order web, api,
//! db and stop nothing: all three still accept connections afterwards. Only these children are
//! ever signalled, by their pid, when the test ends.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::holdmap::client::{Holdmap, structured};

/// Listens on a free loopback port; with a port argument, first connects there and keeps the
/// connection; prints its own port once both hold; then accepts (and keeps) forever.
const SERVICE: &str = r#"
import socket, sys
target = int(sys.argv[2])
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
keep = []
if target:
    keep.append(socket.create_connection(("127.0.0.1", target)))
print(s.getsockname()[1], flush=True)
while True:
    keep.append(s.accept()[0])
"#;

/// The children of this test, stopped by their own pid when it ends, whatever happened.
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Kids {
    /// Starts one service (`role` is only a word on its command line) and returns its port.
    fn start(&mut self, dir: &std::path::Path, role: &str, target: u16) -> u16 {
        let mut child = Command::new("python3")
            .args(["-c", SERVICE, role, &target.to_string()])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        self.0.push(child);
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        line.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{role} did not print its port: {line:?}"))
    }

    fn all_running(&mut self) -> bool {
        self.0.iter_mut().all(|c| c.try_wait().unwrap().is_none())
    }
}

fn svc(port: u16) -> String {
    format!("svc:{port}/tcp")
}

#[test]
fn a_web_api_db_chain_is_one_cluster_and_its_plan_stops_web_then_api_then_db_and_nothing_else() {
    let project = tempfile::Builder::new()
        .prefix("topo-shop")
        .tempdir()
        .unwrap();
    std::fs::write(
        project.path().join("package.json"),
        r#"{"name":"topo-shop","private":true,"scripts":{"dev":"python3 web.py"}}"#,
    )
    .unwrap();
    let mut kids = Kids(Vec::new());
    let db = kids.start(project.path(), "db", 0);
    let api = kids.start(project.path(), "api", db);
    let web = kids.start(project.path(), "web", api);

    let mut h = Holdmap::start();
    h.initialize("2025-11-25");
    let answer = h.call(1, "get_topology", json!({"all": true}));
    let all = structured(&answer);
    let edges = all["edges"].as_array().unwrap();
    for (from, to) in [(web, api), (api, db)] {
        assert!(
            edges.contains(&json!({"from": svc(from), "to": svc(to), "connections": 1})),
            "no edge {from} -> {to}: {all}"
        );
    }
    let cluster = all["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["nodes"].as_array().unwrap().contains(&json!(svc(db))))
        .unwrap_or_else(|| panic!("db is in no cluster: {all}"));
    for port in [web, api, db] {
        assert!(
            cluster["nodes"]
                .as_array()
                .unwrap()
                .contains(&json!(svc(port))),
            "{port} is not in db's cluster: {cluster}"
        );
    }
    let name = cluster["name"].as_str().unwrap().to_owned();
    assert!(
        all["rendered"].as_str().unwrap().contains(&svc(api)),
        "{all}"
    );

    // The default view is a part of the whole, and keeps every development service it has.
    let answer = h.call(2, "get_topology", json!({"format": "mermaid"}));
    let default = structured(&answer);
    assert!(
        default["rendered"]
            .as_str()
            .unwrap()
            .starts_with("graph LR\n")
    );
    let every: Vec<&Value> = all["nodes"].as_array().unwrap().iter().collect();
    for n in default["nodes"].as_array().unwrap() {
        assert!(every.contains(&n), "{n} is in the default view only");
    }
    for n in every.iter().filter(|n| n["is_dev"] == json!(true)) {
        assert!(
            default["nodes"].as_array().unwrap().contains(n),
            "{n} left out"
        );
    }

    let answer = h.call(3, "plan_cluster_stop", json!({"cluster": name}));
    let plan = structured(&answer);
    let order: Vec<&str> = plan["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(order, vec![svc(web), svc(api), svc(db)], "{plan}");
    assert_eq!(plan["executes"], json!(false));
    assert!(plan["note"].as_str().unwrap().starts_with("dry run only"));
    assert!(plan.get("confirmation_id").is_none(), "{plan}");

    let answer = h.call(
        4,
        "plan_cluster_stop",
        json!({"cluster": "no such cluster"}),
    );
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    let words = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(words.contains(&name), "{words}");

    // Nothing was stopped: every service still runs and still accepts connections.
    assert!(kids.all_running());
    for port in [web, api, db] {
        TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("port {port} no longer accepts connections: {e}"));
    }
    assert!(h.finish().success());
}
