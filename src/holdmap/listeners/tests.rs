use std::collections::BTreeSet;

use super::*;
use crate::holdmap::model::fixture::{add, listen, machine, process, socket};
use crate::holdmap::protect::Level;
use crate::os::sockets::SocketState;

fn only(snap: &Snapshot) -> Listener {
    let all = listeners(snap);
    assert_eq!(all.len(), 1, "{all:?}");
    all.into_iter().next().unwrap()
}

fn exposure_of(addresses: &[&str]) -> Exposure {
    let parsed: Vec<IpAddr> = addresses.iter().map(|a| a.parse().unwrap()).collect();
    Exposure::of(&parsed)
}

#[test]
fn a_socket_held_by_a_parent_and_its_child_is_one_listener_owned_by_the_parent() {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "node", &["node", "serve.js"], "/"),
    );
    add(
        &mut s,
        process(2001, 2000, 1000, "node", &["node", "worker.js"], "/"),
    );
    listen(&mut s, "127.0.0.1:4000", 2001);
    s.sockets.last_mut().unwrap().pids = vec![2000, 2001];
    let l = only(&s);
    assert_eq!(l.pid, Some(2000));
    assert_eq!(l.pids, vec![2000, 2001]);
}

#[test]
fn a_grandchild_holding_the_socket_of_a_higher_numbered_grandparent_names_the_grandparent() {
    let mut s = machine();
    add(
        &mut s,
        process(3000, 800, 1000, "gunicorn", &["gunicorn", "app:app"], "/"),
    );
    add(
        &mut s,
        process(2500, 3000, 1000, "sh", &["sh", "-c", "x"], "/"),
    );
    add(
        &mut s,
        process(2400, 2500, 1000, "gunicorn", &["gunicorn", "app:app"], "/"),
    );
    listen(&mut s, "127.0.0.1:8000", 3000);
    s.sockets.last_mut().unwrap().pids = vec![2400, 3000];
    assert_eq!(only(&s).pid, Some(3000));
}

#[test]
fn one_owner_on_v4_and_v6_is_one_listener_with_both_addresses_sorted() {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "node", &["node", "x.js"], "/"),
    );
    listen(&mut s, "[::1]:5173", 2000);
    listen(&mut s, "127.0.0.1:5173", 2000);
    listen(&mut s, "127.0.0.1:5173", 2000);
    let l = only(&s);
    assert_eq!(l.addresses.len(), 2);
    assert_eq!(l.addresses[0].to_string(), "127.0.0.1");
    assert_eq!(l.exposure, Exposure::Loopback);
}

#[test]
fn exposure_is_all_interfaces_for_any_unspecified_address_and_loopback_only_when_all_are() {
    assert_eq!(exposure_of(&["0.0.0.0"]), Exposure::AllInterfaces);
    assert_eq!(exposure_of(&["::"]), Exposure::AllInterfaces);
    assert_eq!(exposure_of(&["127.0.0.1", "::"]), Exposure::AllInterfaces);
    assert_eq!(exposure_of(&["::ffff:0.0.0.0"]), Exposure::AllInterfaces);
    assert_eq!(exposure_of(&["127.0.0.53", "::1"]), Exposure::Loopback);
    assert_eq!(exposure_of(&["::ffff:127.0.0.1"]), Exposure::Loopback);
    assert_eq!(exposure_of(&["192.168.1.5"]), Exposure::Specific);
    assert_eq!(exposure_of(&["fe80::1"]), Exposure::Specific);
    assert_eq!(exposure_of(&["127.0.0.1", "10.0.0.2"]), Exposure::Specific);
}

#[test]
fn a_listener_no_visible_process_holds_is_kept_with_no_pid_and_is_protected() {
    let mut s = machine();
    listen(&mut s, "0.0.0.0:5432", 0);
    let l = only(&s);
    assert_eq!(l.pid, None);
    assert!(l.pids.is_empty());
    assert!(!l.is_mine);
    assert_eq!(l.protected.map(|p| p.level), Some(Level::Hard));
    assert_eq!(to_json(&only(&s))["pid"], Value::Null);
}

#[test]
fn only_tcp_listen_and_udp_bound_sockets_are_listeners_in_port_then_protocol_order() {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "node", &["node", "x.js"], "/"),
    );
    listen(&mut s, "127.0.0.1:9000", 2000);
    socket(
        &mut s,
        Protocol::Udp,
        "0.0.0.0:53",
        "0.0.0.0:0",
        SocketState::Bound,
        2000,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:53",
        "0.0.0.0:0",
        SocketState::Listen,
        2000,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:9000",
        "127.0.0.1:40000",
        SocketState::Established,
        2000,
    );
    socket(
        &mut s,
        Protocol::Tcp,
        "127.0.0.1:9001",
        "127.0.0.1:40001",
        SocketState::TimeWait,
        0,
    );
    socket(
        &mut s,
        Protocol::Udp,
        "127.0.0.1:7000",
        "127.0.0.1:7001",
        SocketState::Established,
        2000,
    );
    let got: Vec<(u16, Protocol)> = listeners(&s).iter().map(|l| (l.port, l.protocol)).collect();
    assert_eq!(
        got,
        vec![
            (53, Protocol::Tcp),
            (53, Protocol::Udp),
            (9000, Protocol::Tcp)
        ]
    );
}

#[test]
fn a_known_dev_framework_is_a_dev_server_and_a_database_is_not_even_in_a_project() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name":"shop"}"#).unwrap();
    let cwd = dir.path().to_str().unwrap();
    let mut s = machine();
    add(
        &mut s,
        process(
            2000,
            800,
            1000,
            "node",
            &["node", "/p/node_modules/.bin/vite"],
            "/",
        ),
    );
    add(
        &mut s,
        process(
            2001,
            800,
            1000,
            "postgres",
            &["postgres", "-D", "data"],
            cwd,
        ),
    );
    add(
        &mut s,
        process(2002, 800, 1000, "node", &["node", "server.js"], cwd),
    );
    add(
        &mut s,
        process(2003, 800, 1000, "node", &["node", "server.js"], "/"),
    );
    listen(&mut s, "127.0.0.1:5173", 2000);
    listen(&mut s, "127.0.0.1:5432", 2001);
    listen(&mut s, "127.0.0.1:3000", 2002);
    listen(&mut s, "127.0.0.1:3001", 2003);
    let dev: Vec<(u16, bool)> = listeners(&s).iter().map(|l| (l.port, l.is_dev)).collect();
    assert_eq!(
        dev,
        vec![(3000, true), (3001, false), (5173, true), (5432, false)]
    );
    let by_port = listeners(&s);
    assert_eq!(
        by_port[0].project.as_ref().map(|p| p.name.as_str()),
        Some("shop")
    );
    assert_eq!(by_port[2].framework.map(|f| f.name), Some("vite"));
}

#[test]
fn a_listener_shows_the_full_process_name_and_a_redacted_command() {
    let mut s = machine();
    add(
        &mut s,
        process(
            2000,
            800,
            1000,
            "webpack-dev-ser",
            &[
                "/p/node_modules/.bin/webpack-dev-server",
                "--token",
                "hunter2",
            ],
            "/",
        ),
    );
    listen(&mut s, "127.0.0.1:8080", 2000);
    let l = only(&s);
    assert_eq!(l.process.as_deref(), Some("webpack-dev-server"));
    let command = l.command.unwrap();
    assert!(!command.contains("hunter2"), "{command}");
    assert!(l.is_mine);
    assert!(l.protected.is_none());
}

#[test]
fn the_json_of_a_listener_has_exactly_the_keys_its_schema_requires() {
    let mut s = machine();
    add(
        &mut s,
        process(2000, 800, 1000, "node", &["node", "x.js"], "/"),
    );
    listen(&mut s, "127.0.0.1:4000", 2000);
    listen(&mut s, "0.0.0.0:4001", 0);
    let schema = listener_schema();
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let properties: BTreeSet<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(required, properties);
    for l in listeners(&s) {
        let json = to_json(&l);
        let keys: BTreeSet<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, required);
    }
    assert_eq!(schema["additionalProperties"], Value::Bool(false));
}

fn vite_on(port: u16) -> Listener {
    let mut s = machine();
    add(
        &mut s,
        process(
            2000,
            800,
            1000,
            "node",
            &["node", "/p/node_modules/.bin/vite"],
            "/",
        ),
    );
    listen(&mut s, &format!("127.0.0.1:{port}"), 2000);
    only(&s)
}

#[test]
fn the_filter_matches_names_ports_ranges_protocols_and_pids() {
    let l = vite_on(3000);
    for yes in [
        "",
        "vite",
        "VITE",
        "nod",
        ":3000",
        "3000",
        "port:3000",
        "3000-3999",
        ":2000-3000",
        "tcp",
        "proto:tcp",
        "pid:2000",
        "vite :3000 tcp",
    ] {
        assert!(matches(&l, yes), "{yes:?} should match");
    }
    for no in [
        "next",
        ":3001",
        "3001-3999",
        "udp",
        "proto:udp",
        "pid:2001",
        "vite udp",
        "pid:x",
        ":70000",
        "4000-3000",
        "proto:sctp",
    ] {
        assert!(!matches(&l, no), "{no:?} should not match");
    }
}

#[test]
fn a_malformed_filter_term_is_an_error_in_words() {
    assert_eq!(
        Query::parse("3000-3999").unwrap(),
        Query(vec![Term::Ports(3000, 3999)])
    );
    assert_eq!(
        Query::parse("udp").unwrap(),
        Query(vec![Term::Protocol(Protocol::Udp)])
    );
    assert!(Query::parse("4000-3000").unwrap_err().contains("3000-4000"));
    assert!(Query::parse(":99999").unwrap_err().contains("65535"));
    assert!(Query::parse("pid:-3").unwrap_err().contains("positive"));
    assert!(
        Query::parse("proto:sctp")
            .unwrap_err()
            .contains("proto:udp")
    );
}

#[test]
fn a_port_a_container_forwarder_holds_is_protected_and_not_a_dev_server() {
    let mut s = machine();
    add(
        &mut s,
        process(
            2000,
            1,
            1000,
            "rootlessport",
            &["rootlessport"],
            "/home/u/app",
        ),
    );
    listen(&mut s, "0.0.0.0:8080", 2000);
    let l = only(&s);
    assert!(!l.is_dev);
    assert_eq!(l.exposure, Exposure::AllInterfaces);
    assert_eq!(l.protected.map(|p| p.level), Some(Level::Soft));
}

#[test]
fn the_json_of_a_dev_server_says_what_it_is_in_words_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("package.json"), r#"{"name":"shop"}"#).unwrap();
    let mut s = machine();
    let cwd = dir.path().to_str().unwrap();
    add(
        &mut s,
        process(
            2000,
            800,
            1000,
            "node",
            &["node", "/p/node_modules/.bin/vite", "--host"],
            cwd,
        ),
    );
    listen(&mut s, "0.0.0.0:5173", 2000);
    listen(&mut s, "[::]:5173", 2000);
    let json = to_json(&only(&s));
    assert_eq!(json["port"], 5173);
    assert_eq!(json["protocol"], "tcp");
    assert_eq!(json["addresses"], serde_json::json!(["0.0.0.0", "::"]));
    assert_eq!(json["exposure"], "all_interfaces");
    assert_eq!(json["pid"], 2000);
    assert_eq!(json["process"], "node");
    assert_eq!(json["command"], "node /p/node_modules/.bin/vite --host");
    assert_eq!(json["framework"], "vite");
    assert_eq!(json["category"], "dev");
    assert_eq!(json["project"]["name"], "shop");
    assert_eq!(json["project"]["branch"], Value::Null);
    assert_eq!(
        (json["is_dev"].clone(), json["is_mine"].clone()),
        (Value::Bool(true), Value::Bool(true))
    );
    assert_eq!(
        (json["protected"].clone(), json["protection"].clone()),
        (Value::Bool(false), Value::Null)
    );
}
