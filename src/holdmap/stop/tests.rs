//! The handle rules and guard rails of issue 14, one test each, against a fake machine that
//! records every signal (`fake`). "Nothing happened" is checked as: no signal recorded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};

use super::fake::{FakeWorld, VirtualPacer, add_plain, add_vite, with_vite};
use super::*;
use crate::holdmap::confirm::Handles;
use crate::holdmap::model::fixture::{add, listen, machine, process, socket};
use crate::holdmap::tool::Cx;
use crate::limits::{HOLDMAP_STOP_GRACE, HOLDMAP_STOP_KILL_WAIT};
use crate::os::signal::Sig;
use crate::os::sockets::{Protocol, SocketState};

/// One session on a fake machine.
struct Session {
    fake: Arc<FakeWorld>,
    world: Arc<dyn World>,
    handles: Handles,
    pacer: VirtualPacer,
}

use crate::holdmap::world::World;

impl Session {
    fn new(snap: Snapshot) -> Session {
        let fake = Arc::new(FakeWorld::new(snap));
        let world: Arc<dyn World> = fake.clone();
        Session {
            fake,
            world,
            handles: Handles::new(),
            pacer: VirtualPacer::default(),
        }
    }

    /// Calls a stop tool and, if it gets as far as an execution, runs it on the virtual clock.
    fn call(&mut self, tool: &str, args: Value) -> Outcome {
        let args: Map<String, Value> = args.as_object().unwrap().clone();
        let mut cx = Cx {
            world: &self.world,
            handles: &mut self.handles,
        };
        let begun = match tool {
            "stop_port" => start_port(&args, &mut cx),
            "stop_agent_ports" => start_agents(&args, &mut cx),
            other => panic!("no tool {other}"),
        };
        match begun {
            Begun::Now(o) => o,
            Begun::Execute(retained) => execute(self.world.as_ref(), &self.pacer, &retained),
        }
    }

    fn preview(&mut self, args: Value) -> Value {
        match self.call("stop_port", args) {
            Outcome::Done { structured, .. } => structured,
            Outcome::Failed(e) => panic!("preview failed: {e}"),
        }
    }

    /// A permitted preview's handle.
    fn handle(&mut self, args: Value) -> String {
        let out = self.preview(args);
        assert_eq!(out["permitted"], json!(true), "not permitted: {out:#}");
        out["confirmation_id"].as_str().unwrap().to_owned()
    }

    fn signals(&self) -> Vec<(i32, u64, Sig)> {
        self.fake.signals()
    }
}

fn failed(o: &Outcome) -> &str {
    match o {
        Outcome::Failed(e) => e,
        Outcome::Done { summary, .. } => panic!("expected a tool error, got: {summary}"),
    }
}

fn done(o: &Outcome) -> &Value {
    match o {
        Outcome::Done { structured, .. } => structured,
        Outcome::Failed(e) => panic!("expected a result, got the error: {e}"),
    }
}

fn refused_preview(s: &mut Session, args: Value) -> Value {
    let out = s.preview(args);
    assert_eq!(out["permitted"], json!(false), "permitted: {out:#}");
    assert!(out.get("confirmation_id").is_none(), "a handle: {out:#}");
    assert!(!out["refusals"].as_array().unwrap().is_empty());
    assert_eq!(s.handles.len(), 0);
    out
}

const NO_HANDLE: &str = "no such handle in this session";

#[test]
fn a_permitted_preview_issues_a_handle_that_expires_in_300_s_and_signals_nothing() {
    let mut s = Session::new(with_vite());
    let out = s.preview(json!({"port": 5173}));
    assert_eq!(out["permitted"], json!(true), "{out:#}");
    assert_eq!(out["confirmation_expires_in_s"], json!(300));
    assert!(out["confirmation_id"].as_str().unwrap().contains('-'));
    assert_eq!(out["plans"][0]["risk"], json!("low"));
    assert!(s.signals().is_empty());
}

#[test]
fn a_preview_and_its_execution_stop_the_launcher_tree_bottom_up_and_verify_the_port() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    let report = done(&out);
    assert_eq!(report["port_free"], json!(true), "{report:#}");
    assert_eq!(report["failures"], json!([]));
    let pids: Vec<i32> = s.signals().iter().map(|(p, _, _)| *p).collect();
    assert_eq!(
        pids,
        vec![1203, 1202, 1201, 1200],
        "deepest first, not the shell 800"
    );
    assert!(s.signals().iter().all(|(_, _, sig)| *sig == Sig::Term));
    assert_eq!(report["stopped"].as_array().unwrap().len(), 4);
}

#[test]
fn executing_without_a_preview_signals_nothing_and_observes_nothing() {
    let mut s = Session::new(with_vite());
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": "0123456789abcdef-1"}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(s.signals().is_empty());
    assert_eq!(s.fake.observes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_wrong_handle_signals_nothing_and_leaves_the_right_one() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": format!("{id}0")}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(s.signals().is_empty());
    assert_eq!(s.handles.len(), 1);
}

#[test]
fn an_expired_handle_signals_nothing() {
    let now = Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
    let read = Arc::clone(&now);
    let mut s = Session::new(with_vite());
    s.handles = Handles::with_clock(Arc::new(move || *read.lock().unwrap()));
    let id = s.handle(json!({"port": 5173}));
    *now.lock().unwrap() += crate::limits::HOLDMAP_HANDLE_TTL;
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(s.signals().is_empty());
}

#[test]
fn a_replayed_handle_signals_nothing_the_second_time() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    let args = json!({"port": 5173, "dry_run": false, "confirmation_id": id});
    done(&s.call("stop_port", args.clone()));
    let sent = s.signals().len();
    // The same server restarted on the same port: a replay must not stop it.
    s.fake.set(with_vite());
    let again = s.call("stop_port", args);
    assert!(failed(&again).contains(NO_HANDLE));
    assert_eq!(s.signals().len(), sent);
}

#[test]
fn a_handle_from_another_session_signals_nothing() {
    let mut one = Session::new(with_vite());
    let id = one.handle(json!({"port": 5173}));
    let mut other = Session::new(with_vite());
    let out = other.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(other.signals().is_empty());
    assert!(one.signals().is_empty());
}

#[test]
fn a_handle_cleared_by_a_new_initialize_signals_nothing() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    s.handles.clear();
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(s.signals().is_empty());
}

#[test]
fn a_changed_target_or_option_signals_nothing_and_consumes_the_handle() {
    let mut snap = with_vite();
    add_vite(&mut snap, 800, 1300, 5174);
    for changed in [
        json!({"port": 5174}),
        json!({"port": 5173, "force": true}),
        json!({"port": 5173, "allow_non_dev": true}),
    ] {
        let mut s = Session::new(snap.clone());
        let id = s.handle(json!({"port": 5173}));
        let mut args = changed.as_object().unwrap().clone();
        args.insert("dry_run".into(), json!(false));
        args.insert("confirmation_id".into(), json!(id));
        let out = s.call("stop_port", Value::Object(args));
        assert!(
            failed(&out).contains("Stop target or options changed; review a new preview"),
            "{changed}"
        );
        assert!(s.signals().is_empty(), "{changed}");
        let retry = s.call(
            "stop_port",
            json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
        );
        assert!(
            failed(&retry).contains(NO_HANDLE),
            "consumed after {changed}"
        );
        assert!(s.signals().is_empty());
    }
}

#[test]
fn a_changed_owner_signals_nothing_and_consumes_the_handle() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    // The server restarted: the same pid now belongs to a process with another start time.
    s.fake
        .edit(|snap| snap.procs.get_mut(&1202).unwrap().start_ticks += 1);
    let args = json!({"port": 5173, "dry_run": false, "confirmation_id": id});
    let out = s.call("stop_port", args.clone());
    assert!(
        failed(&out).contains("the owners changed since the preview"),
        "{out:?}"
    );
    assert!(failed(&out).contains("review a new preview"));
    assert!(s.signals().is_empty());
    assert!(failed(&s.call("stop_port", args)).contains(NO_HANDLE));
}

#[test]
fn a_new_process_in_the_tree_signals_nothing() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    s.fake.edit(|snap| {
        add(
            snap,
            process(1250, 1202, 1000, "worker", &["worker"], "/home/u/shop"),
        )
    });
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    assert!(failed(&out).contains("the owners changed"));
    assert!(s.signals().is_empty());
}

#[test]
fn an_unreadable_machine_at_execution_signals_nothing_and_consumes_the_handle() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    *s.fake.blind.lock().unwrap() = true;
    let args = json!({"port": 5173, "dry_run": false, "confirmation_id": id});
    let out = s.call("stop_port", args.clone());
    assert!(failed(&out).contains("review a new preview"));
    assert!(s.signals().is_empty());
    *s.fake.blind.lock().unwrap() = false;
    assert!(failed(&s.call("stop_port", args)).contains(NO_HANDLE));
}

#[test]
fn a_confirmation_id_with_a_dry_run_is_a_tool_error_and_keeps_the_handle() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": true, "confirmation_id": id}),
    );
    assert!(failed(&out).contains("only for an execution"));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    assert_eq!(done(&out)["port_free"], json!(true));
}

#[test]
fn dry_run_false_without_a_handle_is_a_tool_error_and_signals_nothing() {
    let mut s = Session::new(with_vite());
    let out = s.call("stop_port", json!({"port": 5173, "dry_run": false}));
    assert!(failed(&out).contains("needs the confirmation_id"));
    assert!(s.signals().is_empty());
}

#[test]
fn the_thirty_third_preview_evicts_the_first_handle() {
    let mut s = Session::new(with_vite());
    let first = s.handle(json!({"port": 5173}));
    for _ in 0..32 {
        s.handle(json!({"port": 5173}));
    }
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": first}),
    );
    assert!(failed(&out).contains(NO_HANDLE));
    assert!(s.signals().is_empty());
}

/// The machine with `pid` (already in the fixture) holding port 4000.
fn holding(pid: i32) -> Snapshot {
    let mut snap = machine();
    listen(&mut snap, "127.0.0.1:4000", pid);
    snap
}

#[test]
fn pid_1_holdmap_itself_and_each_of_its_ancestors_are_refused_even_with_allow_non_dev() {
    for pid in [1, 900, 800, 700] {
        let mut s = Session::new(holding(pid));
        for args in [
            json!({"port": 4000}),
            json!({"port": 4000, "allow_non_dev": true, "force": true}),
        ] {
            let out = refused_preview(&mut s, args);
            assert_eq!(out["plans"][0]["risk"], json!("high"), "pid {pid}: {out:#}");
        }
        assert!(s.signals().is_empty());
    }
}

#[test]
fn a_login_shell_a_terminal_and_an_assistant_host_are_refused_even_with_allow_non_dev() {
    let mut snap = machine();
    add(
        &mut snap,
        process(1100, 700, 1000, "-zsh", &["-zsh"], "/home/u"),
    );
    add(
        &mut snap,
        process(1110, 1, 1000, "kitty", &["/usr/bin/kitty"], "/home/u"),
    );
    let mut claude = process(1120, 1100, 1000, "claude", &["claude"], "/home/u/shop");
    claude.exe = Some("/home/u/.local/share/claude/versions/2.0.1".into());
    add(&mut snap, claude);
    listen(&mut snap, "127.0.0.1:4001", 1100);
    listen(&mut snap, "127.0.0.1:4002", 1110);
    listen(&mut snap, "127.0.0.1:4003", 1120);
    let mut s = Session::new(snap);
    for port in [4001, 4002, 4003] {
        let out = refused_preview(&mut s, json!({"port": port, "allow_non_dev": true}));
        assert!(
            out["plans"][0]["tree"][0]["protected"].is_string(),
            "port {port}: {out:#}"
        );
    }
    assert!(s.signals().is_empty());
}

#[test]
fn another_accounts_or_an_unseen_owner_is_refused_even_with_allow_non_dev() {
    let mut snap = machine();
    add_plain(&mut snap, 2000, 1, 1001, 4000);
    socket(
        &mut snap,
        Protocol::Tcp,
        "0.0.0.0:4001",
        "0.0.0.0:0",
        SocketState::Listen,
        0,
    );
    let mut s = Session::new(snap);
    for port in [4000, 4001] {
        let out = refused_preview(
            &mut s,
            json!({"port": port, "allow_non_dev": true, "force": true}),
        );
        assert_eq!(out["plans"][0]["risk"], json!("high"), "{out:#}");
    }
    assert!(s.signals().is_empty());
}

#[test]
fn several_unrelated_owners_are_refused() {
    let mut snap = machine();
    add_plain(&mut snap, 2000, 1, 1000, 4000);
    add_plain(&mut snap, 2001, 1, 1000, 4000);
    let mut s = Session::new(snap);
    let out = refused_preview(&mut s, json!({"port": 4000, "allow_non_dev": true}));
    assert!(
        out["plans"][0]["risk_reason"]
            .as_str()
            .unwrap()
            .contains("several unrelated")
    );
}

#[test]
fn a_non_dev_process_is_refused_without_allow_non_dev_and_stopped_with_it() {
    let mut snap = machine();
    add_plain(&mut snap, 2000, 1, 1000, 4000);
    let mut s = Session::new(snap);
    let out = refused_preview(&mut s, json!({"port": 4000}));
    assert_eq!(out["plans"][0]["risk"], json!("medium"));
    assert!(
        out["refusals"][0]
            .as_str()
            .unwrap()
            .contains("allow_non_dev")
    );
    let id = s.handle(json!({"port": 4000, "allow_non_dev": true}));
    let out = s.call(
        "stop_port",
        json!({"port": 4000, "allow_non_dev": true, "dry_run": false, "confirmation_id": id}),
    );
    assert_eq!(done(&out)["port_free"], json!(true));
    assert_eq!(s.signals(), vec![(2000, 3000, Sig::Term)]);
}

#[test]
fn nothing_listening_gets_no_handle() {
    let mut s = Session::new(machine());
    let out = refused_preview(&mut s, json!({"port": 4000}));
    assert!(
        out["refusals"][0]
            .as_str()
            .unwrap()
            .contains("nothing is listening")
    );
}

#[test]
fn force_sends_sigkill_at_once() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173, "force": true}));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "force": true, "dry_run": false, "confirmation_id": id}),
    );
    assert_eq!(done(&out)["port_free"], json!(true));
    assert_eq!(s.signals().len(), 4);
    assert!(s.signals().iter().all(|(_, _, sig)| *sig == Sig::Kill));
    assert!(s.pacer.elapsed() < HOLDMAP_STOP_KILL_WAIT);
}

#[test]
fn a_process_that_ignores_sigterm_gets_sigkill_after_the_grace_period() {
    let mut s = Session::new(with_vite());
    s.fake.ignores_term.lock().unwrap().insert(1202);
    let id = s.handle(json!({"port": 5173}));
    let out = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    let report = done(&out).clone();
    assert_eq!(report["port_free"], json!(true), "{report:#}");
    let to_vite: Vec<Sig> = s
        .signals()
        .iter()
        .filter(|(p, _, _)| *p == 1202)
        .map(|(_, _, sig)| *sig)
        .collect();
    assert_eq!(to_vite, vec![Sig::Term, Sig::Kill]);
    assert!(s.pacer.elapsed() >= HOLDMAP_STOP_GRACE);
    let vite = report["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(1202))
        .unwrap();
    assert_eq!(vite["signal"], json!("SIGKILL"));
}

#[test]
fn a_process_that_became_protected_is_not_signalled() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    // Between the same-effects check and the first signal, holdmap's pid changes to one whose
    // ancestors include the tree (as after a re-exec): each signal's own recheck must catch it.
    let fake = Arc::clone(&s.fake);
    let world: Arc<dyn World> = Arc::new(Flip {
        inner: fake,
        flip_after: 2,
    });
    let args: Map<String, Value> = json!({"port": 5173, "dry_run": false, "confirmation_id": id})
        .as_object()
        .unwrap()
        .clone();
    let mut cx = Cx {
        world: &world,
        handles: &mut s.handles,
    };
    let Begun::Execute(retained) = start_port(&args, &mut cx) else {
        panic!("not executed")
    };
    let out = execute(world.as_ref(), &s.pacer, &retained);
    let report = done(&out);
    assert!(
        report["failures"][0]
            .as_str()
            .unwrap()
            .contains("protected"),
        "{report:#}"
    );
    assert!(s.signals().is_empty());
}

/// A world whose observations, from the `flip_after`th on (counting from 0), show holdmap's ancestors as the
/// vite tree.
struct Flip {
    inner: Arc<FakeWorld>,
    flip_after: usize,
}

impl World for Flip {
    fn observe(&self) -> Result<Snapshot, String> {
        let n = self.inner.observes.load(Ordering::SeqCst);
        let mut snap = self.inner.observe()?;
        if n >= self.flip_after {
            snap.me.ancestors = vec![1203, 1202, 1201, 1200, 800, 700, 1];
        }
        Ok(snap)
    }
    fn signal(
        &self,
        pid: i32,
        start_ticks: u64,
        sig: Sig,
    ) -> Result<(), crate::os::signal::SignalError> {
        self.inner.signal(pid, start_ticks, sig)
    }
    fn alive(&self, pid: i32, start_ticks: u64) -> bool {
        self.inner.alive(pid, start_ticks)
    }
}

/// An agent (claude, pid 1100, under the shell) that started two vite servers.
fn agent_machine() -> Snapshot {
    let mut snap = machine();
    let mut claude = process(1100, 800, 1000, "claude", &["claude"], "/home/u/shop");
    claude.exe = Some("/home/u/.local/share/claude/versions/2.0.1".into());
    add(&mut snap, claude);
    add_vite(&mut snap, 1100, 1200, 5173);
    add_vite(&mut snap, 1100, 1300, 5174);
    snap
}

#[test]
fn a_bulk_preview_plans_each_port_of_the_agent_and_issues_one_handle() {
    let mut s = Session::new(agent_machine());
    let out = done(&s.call("stop_agent_ports", json!({"agent": "Claude"}))).clone();
    assert_eq!(out["agents"][0]["pid"], json!(1100));
    assert_eq!(out["plans"].as_array().unwrap().len(), 2, "{out:#}");
    assert_eq!(out["permitted"], json!(true), "{out:#}");
    let id = out["confirmation_id"].as_str().unwrap();
    let report = s.call(
        "stop_agent_ports",
        json!({"agent": "claude", "dry_run": false, "confirmation_id": id}),
    );
    assert_eq!(done(&report)["plans_completed"], json!(2));
    assert!(
        !s.signals().iter().any(|(p, _, _)| *p == 1100),
        "never the agent"
    );
}

#[test]
fn a_refused_bulk_plan_issues_no_handle_at_all() {
    let mut snap = agent_machine();
    add_plain(&mut snap, 1400, 1100, 1000, 6000);
    let mut s = Session::new(snap);
    let out = done(&s.call("stop_agent_ports", json!({"agent": "claude"}))).clone();
    assert_eq!(out["plans"].as_array().unwrap().len(), 3, "{out:#}");
    assert_eq!(out["permitted"], json!(false));
    assert!(out.get("confirmation_id").is_none());
    assert_eq!(s.handles.len(), 0);
}

#[test]
fn a_bulk_execution_stops_at_its_first_failure_without_rollback() {
    let mut s = Session::new(agent_machine());
    s.fake.denied.lock().unwrap().insert(1303);
    let out = done(&s.call("stop_agent_ports", json!({"agent": "claude"}))).clone();
    let id = out["confirmation_id"].as_str().unwrap();
    // The plans are 5173 (succeeds) then 5174 (its esbuild, 1303, refuses the signal).
    let report = s.call(
        "stop_agent_ports",
        json!({"agent": "claude", "dry_run": false, "confirmation_id": id}),
    );
    let report = done(&report);
    assert_eq!(report["plans_completed"], json!(1), "{report:#}");
    assert_eq!(report["plans_total"], json!(2));
    assert_eq!(report["port_free"], json!(false));
    assert!(report["failures"][0].as_str().unwrap().contains("1303"));
    let pids: Vec<i32> = s.signals().iter().map(|(p, _, _)| *p).collect();
    assert_eq!(
        pids,
        vec![1203, 1202, 1201, 1200],
        "nothing of 5174 after its failure"
    );
}

#[test]
fn a_bulk_execution_refuses_when_the_agents_changed() {
    let mut s = Session::new(agent_machine());
    let out = done(&s.call("stop_agent_ports", json!({"agent": "claude"}))).clone();
    let id = out["confirmation_id"].as_str().unwrap();
    s.fake
        .edit(|snap| snap.procs.get_mut(&1100).unwrap().start_ticks += 1);
    let report = s.call(
        "stop_agent_ports",
        json!({"agent": "claude", "dry_run": false, "confirmation_id": id}),
    );
    assert!(failed(&report).contains("review a new preview"));
    assert!(s.signals().is_empty());
}

#[test]
fn an_execution_runs_off_the_request_loop() {
    let fake = Arc::new(FakeWorld::new(with_vite()));
    let world: Arc<dyn World> = fake.clone();
    let mut handles = Handles::new();
    let mut cx = Cx {
        world: &world,
        handles: &mut handles,
    };
    let preview = run_stop_port(json!({"port": 5173}).as_object().unwrap(), &mut cx);
    let Reply::Now(Outcome::Done { structured, .. }) = preview else {
        panic!("a preview is answered at once")
    };
    let id = structured["confirmation_id"].as_str().unwrap();
    let args = json!({"port": 5173, "dry_run": false, "confirmation_id": id});
    let Reply::Committed(pending) = run_stop_port(args.as_object().unwrap(), &mut cx) else {
        panic!("an execution is deferred")
    };
    assert_eq!(cx.handles.len(), 0, "consumed before the future runs");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = rt.block_on(pending);
    assert_eq!(done(&out)["port_free"], json!(true));
    assert_eq!(fake.signals().len(), 4);
}

#[test]
fn the_published_schemas_are_closed_and_require_a_handle_to_execute() {
    for tool in TOOLS {
        let def = (tool.def)();
        assert_eq!(def.input_schema["additionalProperties"], json!(false));
        assert_eq!(
            def.input_schema["then"]["required"],
            json!(["confirmation_id"])
        );
        assert_eq!(
            def.input_schema["properties"]["dry_run"]["default"],
            json!(true)
        );
        assert!(def.annotations.destructive && !def.annotations.idempotent);
        assert_eq!(def.output_schema["anyOf"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn every_result_matches_its_published_output_schema() {
    let mut s = Session::new(with_vite());
    let schema = (TOOLS[0].def)().output_schema;
    let preview = s.preview(json!({"port": 5173}));
    crate::holdmap::schema::validate(&schema, &preview, "result").unwrap();
    let refused = Session::new(machine()).preview(json!({"port": 1}));
    crate::holdmap::schema::validate(&schema, &refused, "result").unwrap();
    let id = preview["confirmation_id"].as_str().unwrap();
    let report = s.call(
        "stop_port",
        json!({"port": 5173, "dry_run": false, "confirmation_id": id}),
    );
    crate::holdmap::schema::validate(&schema, done(&report), "result").unwrap();
}

#[test]
fn a_plan_that_fails_part_way_still_reports_what_it_signalled() {
    let mut s = Session::new(with_vite());
    let id = s.handle(json!({"port": 5173}));
    // The first signal goes (esbuild, 1203); the recheck before the second finds the tree
    // protected and the plan fails there.
    let fake = Arc::clone(&s.fake);
    let world: Arc<dyn World> = Arc::new(Flip {
        inner: fake,
        flip_after: 3,
    });
    let args: Map<String, Value> = json!({"port": 5173, "dry_run": false, "confirmation_id": id})
        .as_object()
        .unwrap()
        .clone();
    let mut cx = Cx {
        world: &world,
        handles: &mut s.handles,
    };
    let Begun::Execute(retained) = start_port(&args, &mut cx) else {
        panic!("not executed")
    };
    let out = execute(world.as_ref(), &s.pacer, &retained);
    let report = done(&out);
    assert_eq!(s.signals().len(), 1, "{:?}", s.signals());
    let said = report.to_string();
    assert!(
        said.contains("1203"),
        "the signalled process is reported: {report:#}"
    );
    assert!(
        !report["failures"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
}
