//! holdmap's stops through the real binary, on real listeners. Every stop a test EXECUTES is of
//! a process the test started itself (a `python3 -m http.server` in a temp project folder, or a
//! listener that ignores SIGTERM), by the pid holdmap was shown. For PID 1, the test's own
//! process and holdmap's own chain, a test only PREVIEWS (`dry_run: true`) and checks the
//! preview is refused with no handle, so a broken guard can never signal the machine's own
//! processes.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{PATIENCE, eventually};
use crate::holdmap::client::{Holdmap, accepts, free_port, holdmap_binary, structured};

const VERSION: &str = "2025-11-25";

/// A listener this test started, in a temp project folder (a package.json), killed by its own
/// pid when dropped.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(port: u16, shell_line: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"name":"stops-fixture","scripts":{"dev":"python3 -m http.server"}}"#,
        )
        .unwrap();
        let child = Command::new("sh")
            .arg("-c")
            .arg(shell_line.replace("PORT", &port.to_string()))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            port,
            _dir: dir,
        };
        eventually("the test's server accepts connections", || {
            assert!(
                server.child.try_wait().unwrap().is_none(),
                "the test's server exited early"
            );
            accepts(port)
        });
        server
    }

    /// `python3 -m http.server` replacing its shell.
    fn http(port: u16) -> Server {
        Server::start(port, "exec python3 -m http.server --bind 127.0.0.1 PORT")
    }

    /// The same below a shell that stays (`sh -c '…; true'`): a two-process tree.
    fn http_tree(port: u16) -> Server {
        Server::start(port, "python3 -m http.server --bind 127.0.0.1 PORT; true")
    }

    /// A listener that ignores SIGTERM.
    fn stubborn(port: u16) -> Server {
        Server::start(
            port,
            "exec python3 -c 'import signal, socket\n\
             signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
             s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind((\"127.0.0.1\", PORT)); s.listen()\n\
             while True: signal.pause()'",
        )
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Cleanup after a failed stop: our own shell's children by their pids, then the shell.
        let pid = self.child.id();
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            for child in children.split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", child]).status();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_error(answer: &Value) -> String {
    let result = &answer["result"];
    assert_eq!(result["isError"], json!(true), "not a tool error: {answer}");
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

fn session() -> Holdmap {
    let mut h = Holdmap::start();
    h.initialize(VERSION);
    h
}

/// A permitted preview's handle.
fn preview_handle(h: &mut Holdmap, id: i64, args: Value) -> String {
    let answer = h.call(id, "stop_port", args);
    let out = structured(&answer);
    assert_eq!(out["permitted"], json!(true), "refused: {answer}");
    assert_eq!(out["confirmation_expires_in_s"], json!(300));
    out["confirmation_id"].as_str().unwrap().to_owned()
}

/// `stop_port` executed (`dry_run: false`) on `port` with the handle `id`; the whole answer.
fn execute(h: &mut Holdmap, request: i64, port: u16, id: &str) -> Value {
    h.call(
        request,
        "stop_port",
        json!({"port": port, "dry_run": false, "confirmation_id": id}),
    )
}

fn assert_refused_without_handle(answer: &Value) {
    let out = structured(answer);
    assert_eq!(out["permitted"], json!(false), "permitted: {answer}");
    assert!(out.get("confirmation_id").is_none(), "a handle: {answer}");
    assert!(
        !out["refusals"].as_array().unwrap().is_empty(),
        "no reason given: {answer}"
    );
}

#[test]
fn a_dev_server_is_previewed_then_stopped_and_its_port_is_free() {
    let mut server = Server::http(free_port());
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": server.port}));
    let answer = execute(&mut h, 2, server.port, &id);
    let report = structured(&answer);
    assert_eq!(report["port_free"], json!(true), "{answer}");
    assert_eq!(report["stopped"][0]["signal"], json!("SIGTERM"), "{answer}");
    eventually("the server exits", || server.exited().is_some());
    assert!(!accepts(server.port));
}

#[test]
fn a_dev_servers_launcher_tree_is_stopped_whole() {
    let mut server = Server::http_tree(free_port());
    let mut h = session();
    let answer = h.call(1, "stop_port", json!({"port": server.port}));
    let plan = &structured(&answer)["plans"][0];
    let shell = i64::from(server.child.id());
    assert!(
        plan["tree"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["pid"] == json!(shell) && m["role"] == json!("launcher")),
        "the sh -c launcher is part of the plan: {answer}"
    );
    let id = structured(&answer)["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = execute(&mut h, 2, server.port, &id);
    assert_eq!(structured(&answer)["port_free"], json!(true), "{answer}");
    eventually("the launcher shell exits", || server.exited().is_some());
}

#[test]
fn a_listener_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let mut server = Server::stubborn(free_port());
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": server.port}));
    let answer = execute(&mut h, 2, server.port, &id);
    let report = structured(&answer);
    assert_eq!(report["port_free"], json!(true), "{answer}");
    assert_eq!(report["stopped"][0]["signal"], json!("SIGKILL"), "{answer}");
    eventually("the stubborn listener exits", || server.exited().is_some());
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(server.exited().unwrap().signal(), Some(9));
}

#[test]
fn a_replayed_handle_stops_nothing() {
    let port = free_port();
    let first = Server::http(port);
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": port}));
    let args = json!({"port": port, "dry_run": false, "confirmation_id": id});
    structured(&h.call(2, "stop_port", args.clone()));
    drop(first);
    let mut second = Server::http(port);
    let text = tool_error(&h.call(3, "stop_port", args));
    assert!(text.contains("no such handle in this session"), "{text}");
    assert!(
        second.exited().is_none(),
        "the replay stopped the new server"
    );
    assert!(accepts(port));
}

#[test]
fn a_changed_owner_after_the_preview_is_refused() {
    let port = free_port();
    let first = Server::http(port);
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": port}));
    drop(first);
    eventually("the first server's port is released", || !accepts(port));
    let mut second = Server::http(port);
    let args = json!({"port": port, "dry_run": false, "confirmation_id": id});
    let text = tool_error(&h.call(2, "stop_port", args.clone()));
    assert!(
        text.contains("the owners changed since the preview"),
        "{text}"
    );
    assert!(second.exited().is_none(), "the new owner was stopped");
    let again = tool_error(&h.call(3, "stop_port", args));
    assert!(again.contains("no such handle"), "consumed: {again}");
}

#[test]
fn a_mismatched_option_stops_nothing_and_consumes_the_handle() {
    let mut server = Server::http(free_port());
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": server.port}));
    let text = tool_error(&h.call(
        2,
        "stop_port",
        json!({"port": server.port, "force": true, "dry_run": false, "confirmation_id": id}),
    ));
    assert!(text.contains("Stop target or options changed"), "{text}");
    let again = tool_error(&execute(&mut h, 3, server.port, &id));
    assert!(again.contains("no such handle"), "{again}");
    assert!(server.exited().is_none());
}

#[test]
fn malformed_controls_leave_the_handle_usable() {
    let mut server = Server::http(free_port());
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": server.port}));
    for (n, bad) in [
        json!({"port": server.port, "dry_run": "false", "confirmation_id": id}),
        json!({"port": server.port, "dry_run": false, "confirmation_id": id, "allow_protected": true}),
        json!({"port": server.port, "dry_run": true, "confirmation_id": id}),
    ]
    .into_iter()
    .enumerate()
    {
        tool_error(&h.call(10 + i64::try_from(n).unwrap(), "stop_port", bad));
        assert!(server.exited().is_none());
    }
    let answer = execute(&mut h, 20, server.port, &id);
    assert_eq!(structured(&answer)["port_free"], json!(true), "{answer}");
}

#[test]
fn a_handle_does_not_survive_a_new_initialize() {
    let mut server = Server::http(free_port());
    let mut h = session();
    let id = preview_handle(&mut h, 1, json!({"port": server.port}));
    h.initialize(VERSION);
    let text = tool_error(&execute(&mut h, 2, server.port, &id));
    assert!(text.contains("no such handle"), "{text}");
    assert!(server.exited().is_none());
}

#[test]
fn a_handle_from_another_session_stops_nothing() {
    let mut server = Server::http(free_port());
    let mut one = session();
    let id = preview_handle(&mut one, 1, json!({"port": server.port}));
    let mut other = session();
    let text = tool_error(&execute(&mut other, 1, server.port, &id));
    assert!(text.contains("no such handle"), "{text}");
    assert!(server.exited().is_none());
}

// Previews only from here on: none of these processes is the test's to stop.

#[test]
fn a_port_the_test_process_holds_is_refused_as_holdmaps_ancestor() {
    // This test process is holdmap's parent.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut h = session();
    for args in [
        json!({"port": port, "dry_run": true}),
        json!({"port": port, "dry_run": true, "allow_non_dev": true, "force": true}),
    ] {
        let answer = h.call(1, "stop_port", args);
        assert_refused_without_handle(&answer);
        assert_eq!(structured(&answer)["plans"][0]["risk"], json!("high"));
    }
    assert!(accepts(port));
}

#[test]
fn a_preview_of_pid_1s_ports_is_refused_and_issues_no_handle() {
    let mut h = session();
    // The ports PID 1 holds, if this account may read its fds; otherwise the machine's other
    // listeners this test did not start, whose owners holdmap cannot see or does not own.
    let ports = pid1_ports();
    for port in &ports {
        let answer = h.call(
            1,
            "stop_port",
            json!({"port": port, "dry_run": true, "allow_non_dev": true}),
        );
        assert_refused_without_handle(&answer);
    }
    // Always checked, whether or not PID 1 listens: a port nothing holds gets no handle either.
    let answer = h.call(
        2,
        "stop_port",
        json!({"port": free_port(), "dry_run": true}),
    );
    assert_refused_without_handle(&answer);
}

/// The TCP ports PID 1 listens on, when its fd table can be read.
fn pid1_ports() -> Vec<u16> {
    let Ok(fds) = std::fs::read_dir("/proc/1/fd") else {
        return Vec::new();
    };
    let inodes: Vec<String> = fds
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            if cols.len() > 9 && cols[3] == "0A" && inodes.iter().any(|i| i == cols[9]) {
                let port = cols[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// holdmap started below a process that holds a listening port: `python3` binds it, then
/// either execs holdmap itself (`exec_holdmap`: holdmap holds the port) or execs a shell that
/// runs holdmap (the shell, holdmap's parent, holds it). The test talks to holdmap over the
/// pipes it gave python.
struct Below {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    _home: tempfile::TempDir,
}

impl Below {
    fn start(port: u16, exec_holdmap: bool) -> Below {
        let home = tempfile::tempdir().unwrap();
        let then = if exec_holdmap {
            "os.execv(holdmap, [holdmap, 'mcp'])"
        } else {
            "os.execv('/bin/sh', ['sh', '-c', '\"$0\" mcp; exit $?', holdmap])"
        };
        let script = format!(
            "import os, socket, sys\n\
             holdmap = sys.argv[1]\n\
             s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n\
             os.set_inheritable(s.fileno(), True)\n\
             {then}\n"
        );
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(holdmap_binary())
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut below = Below {
            child,
            stdin,
            lines,
            _home: home,
        };
        below.request(0, "initialize", json!({"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
        below
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
        let answer = self.lines.recv_timeout(PATIENCE).expect("holdmap answered");
        serde_json::from_str(&answer).unwrap()
    }
}

impl Drop for Below {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_port_holdmap_itself_holds_is_refused_and_issues_no_handle() {
    let port = free_port();
    let mut b = Below::start(port, true);
    eventually("holdmap's inherited listener accepts", || accepts(port));
    let answer = b.request(
        1,
        "tools/call",
        json!({"name": "stop_port", "arguments": {"port": port, "dry_run": true, "allow_non_dev": true}}),
    );
    assert_refused_without_handle(&answer);
    assert_eq!(
        i64::from(b.child.id()),
        structured(&answer)["plans"][0]["owners"][0]["pid"]
            .as_i64()
            .unwrap(),
        "the owner is holdmap itself: {answer}"
    );
}

#[test]
fn a_port_holdmaps_parent_shell_holds_is_refused_and_issues_no_handle() {
    let port = free_port();
    let mut b = Below::start(port, false);
    eventually("the shell's inherited listener accepts", || accepts(port));
    let answer = b.request(
        1,
        "tools/call",
        json!({"name": "stop_port", "arguments": {"port": port, "dry_run": true, "allow_non_dev": true, "force": true}}),
    );
    assert_refused_without_handle(&answer);
    assert_eq!(structured(&answer)["plans"][0]["risk"], json!("high"));
    assert!(b.child.try_wait().unwrap().is_none());
}

/// A stand-in agent this test starts: a copy of `sh` named `claude` (holdmap recognises agents
/// by their executable), running `line` in a temp project folder. Only ever addressed as
/// `pid:N`, so no real agent on the machine is ever selected.
struct Agent {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Agent {
    fn start(line: &str) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let exe = dir.path().join("claude");
        crate::common::copy_executable(sh, &exe);
        let project = dir.path().join("shop");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(project.join("package.json"), r#"{"name":"shop"}"#).unwrap();
        let child = Command::new(&exe)
            .arg("-c")
            .arg(line)
            .current_dir(&project)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Agent { child, _dir: dir }
    }

    fn query(&self) -> String {
        format!("pid:{}", self.child.id())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let pid = self.child.id();
        if let Ok(children) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            for child in children.split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", child]).status();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_agents_dev_server_is_previewed_and_stopped_with_one_handle_and_the_agent_is_not() {
    let port = free_port();
    let mut agent = Agent::start(&format!(
        "python3 -m http.server --bind 127.0.0.1 {port} & wait; \
         python3 -c 'import signal; signal.pause()'"
    ));
    eventually("the agent's server accepts", || accepts(port));
    let mut h = session();
    let answer = h.call(1, "stop_agent_ports", json!({"agent": agent.query()}));
    let out = structured(&answer);
    assert_eq!(out["agents"][0]["pid"], json!(agent.child.id()), "{answer}");
    assert_eq!(out["plans"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(out["permitted"], json!(true), "{answer}");
    let id = out["confirmation_id"].as_str().unwrap().to_owned();
    let answer = h.call(
        2,
        "stop_agent_ports",
        json!({"agent": agent.query(), "dry_run": false, "confirmation_id": id}),
    );
    let report = structured(&answer);
    assert_eq!(report["port_free"], json!(true), "{answer}");
    assert_eq!(report["plans_completed"], json!(1));
    assert!(!accepts(port));
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "the agent itself was stopped"
    );
}

#[test]
fn a_bulk_preview_with_a_refused_plan_issues_no_handle() {
    let dev = free_port();
    let plain = free_port();
    let agent = Agent::start(&format!(
        "python3 -m http.server --bind 127.0.0.1 {dev} & \
         cd / && python3 -c 'import signal, socket\n\
         s = socket.socket(); s.bind((\"127.0.0.1\", {plain})); s.listen()\n\
         signal.pause()' & wait"
    ));
    eventually("both of the agent's listeners accept", || {
        accepts(dev) && accepts(plain)
    });
    let mut h = session();
    let answer = h.call(
        1,
        "stop_agent_ports",
        json!({"agent": agent.query(), "dry_run": true}),
    );
    let out = structured(&answer);
    assert_eq!(out["plans"].as_array().unwrap().len(), 2, "{answer}");
    assert_refused_without_handle(&answer);
}
