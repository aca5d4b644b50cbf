use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::rules::{Kind, Severity};
use super::servers::{self, shell_quote};
use super::*;
use crate::holdmap::agents::model::{
    AccessFact, AgentPort, AgentReport, Capabilities, ConfiguredServer, Evidence, Level, PortRole,
    SafetySetting,
};
use crate::holdmap::analyzers::Insight;
use crate::holdmap::confirm::Handles;
use crate::holdmap::model::Snapshot;
use crate::holdmap::model::fixture::{add, machine, process};
use crate::holdmap::stop::fake::{FakeWorld, add_vite};
use crate::holdmap::tool::{Cx, Outcome, Reply};
use crate::holdmap::world::World;
use crate::os::sockets::Protocol;

/// An agent report of `claude` at `pid` (a child of the interactive shell 800), with nothing
/// else known.
fn agent(pid: i32) -> AgentReport {
    AgentReport {
        id: format!("agent:{pid}"),
        pid,
        start_ticks: 1000 + u64::try_from(pid).unwrap(),
        product: "claude-code",
        name: "Claude Code",
        vendor: "Anthropic",
        kind: "cli",
        client: None,
        command: "claude".into(),
        parent: None,
        uid: Some(1000),
        process_ids: vec![pid],
        tools: Vec::new(),
        folders: Vec::new(),
        ports: Vec::new(),
        links: Vec::new(),
        cpu_seconds: 0.0,
        memory_bytes: 0,
        access: Vec::new(),
        capabilities: Some(Capabilities::default()),
    }
}

fn with_agent_process(s: &mut Snapshot, pid: i32) {
    add(
        s,
        process(pid, 800, 1000, "claude", &["claude"], "/home/u/shop"),
    );
}

/// `npx -y some-mcp` in `~/.claude.json`: not routed, unpinned.
fn npx_server() -> ConfiguredServer {
    ConfiguredServer {
        client: "claude-code",
        alias: "some".into(),
        scope: "user".into(),
        source: PathBuf::from("/home/u/.claude.json"),
        transport: "stdio".into(),
        enabled: None,
        runner: Some("npx".into()),
        package: Some("some-mcp".into()),
        pin: "unpinned",
        pin_detail: "npx some-mcp without a version".into(),
        remote_host: None,
        env_names: vec!["API_TOKEN".into()],
        header_names: Vec::new(),
        routing: "not routed",
        routing_detail: None,
        holdcall_home: None,
        holdcall_home_state: None,
        running_pids: Vec::new(),
    }
}

fn with_servers(mut r: AgentReport, servers: Vec<ConfiguredServer>) -> AgentReport {
    r.capabilities = Some(Capabilities {
        servers,
        ..Capabilities::default()
    });
    r
}

fn insight(id: &str, severity: &str, state: &str) -> Insight {
    Insight {
        id: id.into(),
        analyzer: "mcp-pins".into(),
        agent: "claude-code".into(),
        severity: severity.into(),
        state: state.into(),
        subject: "mcp server some in ~/.claude.json".into(),
        title: "Unpinned package".into(),
        detail: "some-mcp has no version".into(),
        action: Some("pin some-mcp@1.2.3".into()),
        found_at_ms: 1,
        rule: "unpinned".into(),
        source: None,
        alias: None,
        package: None,
        pin: None,
        routing: None,
    }
}

fn kinds(ns: &[Need]) -> Vec<&'static str> {
    ns.iter().map(|n| n.kind.label()).collect()
}

fn of_kind(ns: &[Need], kind: Kind) -> Vec<&Need> {
    ns.iter().filter(|n| n.kind == kind).collect()
}

/// The last socket added, rebound to every interface.
fn expose_last(s: &mut Snapshot) {
    let last = s.sockets.last_mut().unwrap();
    last.row.local = format!("0.0.0.0:{}", last.row.local.port())
        .parse()
        .unwrap();
}

#[test]
fn an_unrouted_npx_server_needs_routing_with_the_holdcall_init_lines_and_a_pin() {
    let mut s = machine();
    with_agent_process(&mut s, 1100);
    let r = with_servers(agent(1100), vec![npx_server()]);
    let ns = needs(&s, &[r], &[]);
    assert_eq!(kinds(&ns), vec!["server_not_routed", "server_unpinned"]);
    let routed = of_kind(&ns, Kind::ServerNotRouted)[0];
    assert_eq!(routed.severity, Severity::Medium);
    assert_eq!(routed.evidence, Evidence::Observed);
    let init = routed.holdcall_init.as_ref().unwrap();
    assert_eq!(init.preview, "holdcall init");
    assert_eq!(init.write, "holdcall init --write");
    assert_eq!(init.directory, None);
    assert!(
        routed.action.contains("holdcall init --write"),
        "{}",
        routed.action
    );
    assert_eq!(routed.preview_port, None);
    assert_eq!(routed.subject.alias.as_deref(), Some("some"));
    assert_eq!(routed.agents, vec!["agent:1100".to_owned()]);
    let pin = of_kind(&ns, Kind::ServerUnpinned)[0];
    assert!(pin.holdcall_init.is_none());
    assert!(pin.action.contains("some-mcp@"), "{}", pin.action);
}

#[test]
fn a_project_scope_servers_init_line_runs_in_its_project_folder_quoted() {
    let mut s = npx_server();
    s.scope = "project".into();
    s.source = PathBuf::from("/home/u/my shop/.cursor/mcp.json");
    let init = servers::holdcall_init(&s);
    assert_eq!(init.directory, Some(PathBuf::from("/home/u/my shop")));
    assert_eq!(init.preview, "cd '/home/u/my shop' && holdcall init");
    assert_eq!(init.write, "cd '/home/u/my shop' && holdcall init --write");
    s.source = PathBuf::from("/home/u/shop/.mcp.json");
    assert_eq!(
        servers::holdcall_init(&s).write,
        "cd /home/u/shop && holdcall init --write"
    );
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
}

#[test]
fn the_pin_action_writes_the_version_the_way_the_runner_reads_it() {
    let mut server = npx_server();
    server.runner = Some("uvx".into());
    server.package = Some("mcp-server-git".into());
    let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
    let pin = of_kind(&ns, Kind::ServerUnpinned)[0];
    assert!(
        pin.action.contains("mcp-server-git==1.2.3"),
        "{}",
        pin.action
    );
}

#[test]
fn a_routed_pinned_server_needs_nothing() {
    let mut server = npx_server();
    server.routing = "routed";
    server.pin = "pinned";
    let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
    assert!(ns.is_empty(), "{ns:?}");
}

#[test]
fn a_remote_server_is_an_info_routing_unknown_need_without_an_init_line() {
    let mut server = npx_server();
    server.transport = "http".into();
    server.routing = "remote";
    server.pin = "unknown";
    server.remote_host = Some("mcp.example.com".into());
    let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
    assert_eq!(kinds(&ns), vec!["server_routing_unknown"]);
    assert_eq!(ns[0].severity, Severity::Info);
    assert_eq!(ns[0].evidence, Evidence::Unknown);
    assert!(ns[0].holdcall_init.is_none());
    assert!(ns[0].summary.contains("mcp.example.com"));
}

#[test]
fn a_server_two_agents_share_is_one_need_naming_both() {
    let a = with_servers(agent(1100), vec![npx_server()]);
    let b = with_servers(agent(1150), vec![npx_server()]);
    let ns = needs(&machine(), &[a, b], &[]);
    let routed = of_kind(&ns, Kind::ServerNotRouted);
    assert_eq!(routed.len(), 1);
    assert_eq!(
        routed[0].agents,
        vec!["agent:1100".to_owned(), "agent:1150".to_owned()]
    );
}

#[test]
fn a_server_turned_off_in_its_file_only_informs() {
    let mut server = npx_server();
    server.enabled = Some(false);
    let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
    assert_eq!(ns.len(), 2);
    assert!(ns.iter().all(|n| n.severity == Severity::Info), "{ns:?}");
}

#[test]
fn an_agent_as_root_with_approvals_and_sandbox_off_gets_a_need_for_each() {
    let mut r = agent(1100);
    let fact = |kind, detail: &str| AccessFact {
        kind,
        level: Level::Elevated,
        evidence: Evidence::Observed,
        detail: detail.into(),
    };
    r.access = vec![
        fact("user", "runs as root"),
        fact(
            "approvals",
            "--dangerously-skip-permissions on its command line",
        ),
        fact(
            "sandbox",
            "--sandbox danger-full-access on its command line",
        ),
        AccessFact {
            kind: "network",
            level: Level::Normal,
            evidence: Evidence::Observed,
            detail: "loopback only".into(),
        },
    ];
    let ns = needs(&machine(), &[r], &[]);
    assert_eq!(
        kinds(&ns),
        vec!["agent_root", "approvals_disabled", "sandbox_disabled"]
    );
    assert_eq!(ns[0].severity, Severity::High);
    assert_eq!(ns[1].severity, Severity::High);
    assert_eq!(ns[2].severity, Severity::Medium);
    assert!(ns[1].summary.contains("--dangerously-skip-permissions"));
    assert!(ns.iter().all(|n| n.preview_port.is_none()));
}

#[test]
fn a_risky_setting_in_a_config_file_is_a_need_and_a_safe_one_is_not() {
    let setting = |name: &str, value: &str, risky| SafetySetting {
        client: "codex",
        name: name.into(),
        value: value.into(),
        risky,
        source: PathBuf::from("/home/u/.codex/config.toml"),
    };
    let mut r = agent(1100);
    r.capabilities = Some(Capabilities {
        settings: vec![
            setting("approval_policy", "never", true),
            setting("sandbox_mode", "danger-full-access", true),
            setting("model_auto_update", "on", true),
            setting("approval_policy", "on-request", false),
            setting("chat.tools.autoApprove", "true", true),
            setting("mcpServers.gh.trust", "true", true),
        ],
        ..Capabilities::default()
    });
    let ns = needs(&machine(), &[r], &[]);
    assert_eq!(
        kinds(&ns),
        vec![
            "approvals_disabled",
            "approvals_disabled",
            "approvals_disabled",
            "sandbox_disabled",
            "risky_setting"
        ]
    );
    assert!(ns.iter().any(|n| n.summary.contains("never")));
}

#[test]
fn an_agents_own_exposed_listener_is_high_and_offers_no_stop() {
    let mut s = machine();
    with_agent_process(&mut s, 1100);
    crate::holdmap::model::fixture::listen(&mut s, "0.0.0.0:7777", 1100);
    let mut r = agent(1100);
    r.ports = vec![AgentPort {
        port: 7777,
        protocol: Protocol::Tcp,
        address: "0.0.0.0".into(),
        pid: 1100,
        role: PortRole::Agent,
        exposed: true,
    }];
    // The network fact says the same again: not a second need.
    r.access = vec![AccessFact {
        kind: "network",
        level: Level::Elevated,
        evidence: Evidence::Observed,
        detail: "listens beyond loopback: 7777/tcp on 0.0.0.0".into(),
    }];
    let ns = needs(&s, &[r], &[]);
    assert_eq!(kinds(&ns), vec!["agent_exposed"]);
    assert_eq!(ns[0].severity, Severity::High);
    assert_eq!(ns[0].subject.port, Some(7777));
    assert_eq!(ns[0].preview_port, None, "an agent host is protected");
}

#[test]
fn a_dev_server_left_under_pid_1_is_left_behind_with_a_stop_preview() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    let ns = needs(&s, &[], &[]);
    assert_eq!(kinds(&ns), vec!["dev_server_left_behind"]);
    let n = &ns[0];
    assert_eq!(n.severity, Severity::Medium);
    assert_eq!(n.evidence, Evidence::Inferred);
    assert_eq!(n.preview_port, Some(5173));
    assert_eq!(n.subject.pid, Some(1202));
    assert!(n.summary.contains("pid 1 (systemd)"), "{}", n.summary);
    assert_eq!(
        to_json(n)["preview"],
        json!({"name": "stop_port", "arguments": {"port": 5173, "dry_run": true}})
    );
}

#[test]
fn a_left_behind_dev_server_reachable_from_other_machines_is_high() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    expose_last(&mut s);
    let ns = needs(&s, &[], &[]);
    assert_eq!(kinds(&ns), vec!["dev_server_left_behind"]);
    assert_eq!(ns[0].severity, Severity::High);
}

#[test]
fn a_dev_server_under_an_interactive_shell_is_not_left_behind() {
    let mut s = machine();
    add_vite(&mut s, 800, 1200, 5173);
    assert!(needs(&s, &[], &[]).is_empty());
}

#[test]
fn a_dev_server_under_a_live_agents_process_is_not_left_behind() {
    let mut s = machine();
    // An agent whose process is nothing protect recognises: only the report says it is one.
    add(
        &mut s,
        process(1100, 1, 1000, "agentd", &["/opt/agentd"], "/"),
    );
    add_vite(&mut s, 1100, 1200, 5173);
    let mut r = agent(1100);
    r.process_ids = vec![1100, 1200, 1201, 1202, 1203];
    let ns = needs(&s, &[r.clone()], &[]);
    assert!(ns.is_empty(), "{ns:?}");
    // Without the agent's report the same tree is left behind.
    assert_eq!(kinds(&needs(&s, &[], &[])), vec!["dev_server_left_behind"]);
}

#[test]
fn a_protected_left_behind_dev_server_gets_no_preview() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    // A session runs below the dev server: protect says hands off.
    add(
        &mut s,
        process(1300, 1202, 1000, "bash", &["bash"], "/home/u/shop"),
    );
    let ns = needs(&s, &[], &[]);
    assert_eq!(kinds(&ns), vec!["dev_server_left_behind"]);
    assert_eq!(ns[0].preview_port, None);
    assert!(
        ns[0].action.contains("will not stop it"),
        "{}",
        ns[0].action
    );
    assert_eq!(to_json(&ns[0])["preview"], Value::Null);
}

#[test]
fn another_accounts_exposed_dev_server_is_listed_without_a_preview_and_never_left_behind() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    for pid in 1200..=1203 {
        s.procs.get_mut(&pid).unwrap().uid = Some(1001);
    }
    let loopback = needs(&s, &[], &[]);
    assert!(loopback.is_empty(), "{loopback:?}");
    expose_last(&mut s);
    let ns = needs(&s, &[], &[]);
    assert_eq!(kinds(&ns), vec!["dev_server_exposed"]);
    assert_eq!(ns[0].preview_port, None);
    assert!(ns[0].action.contains("another account"), "{}", ns[0].action);
}

#[test]
fn an_attended_dev_server_reachable_from_other_machines_is_exposed_with_a_preview() {
    let mut s = machine();
    add_vite(&mut s, 800, 1200, 5173);
    expose_last(&mut s);
    let ns = needs(&s, &[], &[]);
    assert_eq!(kinds(&ns), vec!["dev_server_exposed"]);
    assert_eq!(ns[0].severity, Severity::Medium);
    assert_eq!(ns[0].preview_port, Some(5173));
}

#[test]
fn open_analyzer_findings_are_listed_and_acknowledged_or_resolved_ones_are_not() {
    let found = vec![
        insight("i1", "high", "open"),
        insight("i2", "high", "acknowledged"),
        insight("i3", "low", "resolved"),
        insight("i4", "bogus", "open"),
    ];
    let ns = needs(&machine(), &[], &found);
    assert_eq!(kinds(&ns), vec!["analyzer_finding", "analyzer_finding"]);
    assert_eq!(ns[0].severity, Severity::High);
    assert_eq!(ns[0].action, "pin some-mcp@1.2.3");
    assert_eq!(
        ns[1].severity,
        Severity::Info,
        "an unknown severity informs"
    );
}

#[test]
fn ids_are_the_same_on_every_call_and_differ_by_kind_and_subject() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    let r = with_servers(agent(1100), vec![npx_server()]);
    let a = needs(&s, std::slice::from_ref(&r), &[]);
    let b = needs(&s, &[r], &[]);
    let ids = |ns: &[Need]| ns.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    let mut unique = ids(&a);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), a.len(), "two needs share an id: {a:?}");
    assert!(
        a.iter()
            .all(|n| n.id.starts_with("need:") && n.id.len() == 21)
    );
}

#[test]
fn needs_are_sorted_by_severity_then_kind() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    let mut r = with_servers(agent(1100), vec![npx_server()]);
    r.access = vec![AccessFact {
        kind: "user",
        level: Level::Elevated,
        evidence: Evidence::Observed,
        detail: "runs as root".into(),
    }];
    let ns = needs(&s, &[r], &[insight("i1", "low", "open")]);
    assert_eq!(
        kinds(&ns),
        vec![
            "agent_root",
            "server_not_routed",
            "server_unpinned",
            "dev_server_left_behind",
            "analyzer_finding"
        ]
    );
}

#[test]
fn what_was_not_seen_is_an_incomplete_need_and_a_limit() {
    let mut s = machine();
    s.hidden_sockets = 3;
    s.warnings = vec!["/proc/net/tcp6 could not be read".into()];
    let mut foreign = agent(1100);
    foreign.capabilities = None;
    let l = listing(&s, &[foreign], Err("the store is unreadable".into()));
    assert_eq!(
        kinds(&l.needs),
        vec!["incomplete", "incomplete", "incomplete", "incomplete"]
    );
    assert!(l.needs.iter().all(|n| n.severity == Severity::Info));
    let limits = l.limits.join("\n");
    for part in ["3 socket(s)", "tcp6", "store is unreadable", "agent:1100"] {
        assert!(limits.contains(part), "{part} missing from {limits}");
    }
}

fn call(world: Arc<dyn World>, tool: &str, args: Value) -> Outcome {
    let mut handles = Handles::new();
    let mut cx = Cx {
        world: &world,
        handles: &mut handles,
    };
    let (_, t) = crate::holdmap::catalog::find(tool).unwrap();
    match (t.run)(args.as_object().unwrap(), &mut cx) {
        Reply::Now(o) => o,
        _ => panic!("{tool} did not answer at once"),
    }
}

#[test]
fn the_result_matches_the_published_output_schema() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    s.hidden_sockets = 1;
    let mut server = npx_server();
    server.scope = "project".into();
    server.source = "/home/u/shop/.mcp.json".into();
    let r = with_servers(agent(1100), vec![server]);
    let out = list(
        &s,
        &[r],
        Ok(vec![insight("i1", "medium", "open")]),
        &Filter::default(),
    );
    let Outcome::Done {
        summary,
        structured,
    } = out
    else {
        panic!("{out:?}")
    };
    crate::holdmap::catalog::check_output("list_needs", &structured);
    assert_eq!(structured["counts"]["medium"], json!(4));
    assert_eq!(structured["counts"]["info"], json!(1));
    assert!(
        summary.contains("cd /home/u/shop && holdcall init --write"),
        "{summary}"
    );
    assert!(
        summary.contains(r#"{"arguments":{"dry_run":true,"port":5173},"name":"stop_port"}"#)
            || summary.contains("\"port\":5173"),
        "{summary}"
    );
    assert!(!summary.contains("API_TOKEN="), "only names, never values");
}

#[test]
fn the_tool_lists_a_left_behind_dev_server_and_its_preview_is_one_stop_port_permits() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    let world: Arc<dyn World> = Arc::new(FakeWorld::new(s));
    let Outcome::Done { structured, .. } = call(world.clone(), "list_needs", json!({})) else {
        panic!("list_needs failed")
    };
    crate::holdmap::catalog::check_output("list_needs", &structured);
    let preview = &structured["needs"][0]["preview"];
    assert_eq!(preview["name"], json!("stop_port"));
    let Outcome::Done { structured, .. } = call(world, "stop_port", preview["arguments"].clone())
    else {
        panic!("the preview was refused")
    };
    assert_eq!(structured["permitted"], json!(true));
    assert!(structured["confirmation_id"].is_string());
}

#[test]
fn min_severity_and_kinds_filter_and_count_what_they_leave_out() {
    let mut s = machine();
    add_vite(&mut s, 1, 1200, 5173);
    let world: Arc<dyn World> = Arc::new(FakeWorld::new(s));
    let Outcome::Done { structured, .. } =
        call(world.clone(), "list_needs", json!({"min_severity": "high"}))
    else {
        panic!("list_needs failed")
    };
    assert_eq!(structured["needs"], json!([]));
    assert_eq!(structured["omitted"], json!(1));
    let Outcome::Done { structured, .. } = call(
        world,
        "list_needs",
        json!({"kinds": ["dev_server_left_behind"]}),
    ) else {
        panic!("list_needs failed")
    };
    assert_eq!(structured["needs"].as_array().unwrap().len(), 1);
    crate::holdmap::catalog::check_output("list_needs", &structured);
}

#[test]
fn a_machine_that_cannot_be_read_is_a_tool_error() {
    let world = Arc::new(FakeWorld::new(machine()));
    *world.blind.lock().unwrap() = true;
    let out = call(world, "list_needs", json!({}));
    assert!(
        matches!(&out, Outcome::Failed(m) if m.contains("could not read")),
        "{out:?}"
    );
}

#[test]
fn past_the_cap_the_most_severe_are_listed_and_the_rest_counted() {
    let mut found: Vec<Insight> = (0..crate::limits::HOLDMAP_NEEDS_LISTED_MAX)
        .map(|i| insight(&format!("i{i}"), "low", "open"))
        .collect();
    found.push(insight("urgent", "high", "open"));
    let out = list(&machine(), &[], Ok(found), &Filter::default());
    let Outcome::Done { structured, .. } = out else {
        panic!("{out:?}")
    };
    let listed = structured["needs"].as_array().unwrap();
    assert_eq!(listed.len(), crate::limits::HOLDMAP_NEEDS_LISTED_MAX);
    assert_eq!(listed[0]["severity"], json!("high"));
    assert_eq!(structured["omitted"], json!(1));
    assert_eq!(structured["counts"]["low"], json!(200));
    assert!(structured["limits"].to_string().contains("most severe"));
    crate::holdmap::catalog::check_output("list_needs", &structured);
}

#[test]
fn a_stored_pin_or_routing_finding_about_a_server_a_live_need_names_is_not_listed_twice() {
    let r = with_servers(agent(1100), vec![npx_server()]);
    let mut same = insight("i1", "medium", "open");
    same.source = Some("/home/u/.claude.json".into());
    same.alias = Some("some".into());
    let mut other_rule = same.clone();
    other_rule.id = "i2".into();
    other_rule.rule = "known-vulnerable".into();
    let mut other_server = same.clone();
    other_server.id = "i3".into();
    other_server.alias = Some("github".into());
    let ns = needs(&machine(), &[r], &[same, other_rule, other_server]);
    let findings = of_kind(&ns, Kind::AnalyzerFinding);
    assert_eq!(findings.len(), 2, "{ns:?}");
}

#[test]
fn a_routed_server_in_a_relative_home_is_a_medium_need_and_in_another_home_an_info_one() {
    for (state, severity) in [("relative", Severity::Medium), ("other", Severity::Info)] {
        let mut server = npx_server();
        server.routing = "routed";
        server.pin = "pinned";
        server.holdcall_home = Some("./.hc".into());
        server.holdcall_home_state = Some(state);
        let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
        assert_eq!(kinds(&ns), vec!["server_routing_unknown"], "{state}");
        assert_eq!(ns[0].severity, severity);
        assert!(ns[0].summary.contains("./.hc"), "{}", ns[0].summary);
        assert!(
            ns[0].action.contains("home your rules are in"),
            "{}",
            ns[0].action
        );
        assert!(ns[0].holdcall_init.is_none());
    }
}

#[test]
fn a_routed_server_in_the_usual_home_needs_nothing() {
    let mut server = npx_server();
    server.routing = "routed";
    server.pin = "pinned";
    server.holdcall_home = Some("/home/u/.local/share/holdcall".into());
    server.holdcall_home_state = Some("usual");
    let ns = needs(&machine(), &[with_servers(agent(1100), vec![server])], &[]);
    assert!(ns.is_empty(), "{ns:?}");
}

#[test]
fn the_init_lines_name_the_holdcall_beside_holdmap_by_its_absolute_path_quoted() {
    let mut s = npx_server();
    s.scope = "project".into();
    s.source = PathBuf::from("/home/u/shop/.mcp.json");
    let beside = std::path::Path::new("/opt/hold call/bin/holdcall");
    let init = servers::holdcall_init_with(&s, Some(beside));
    assert_eq!(
        init.preview,
        "cd /home/u/shop && '/opt/hold call/bin/holdcall' init"
    );
    assert_eq!(
        init.write,
        "cd /home/u/shop && '/opt/hold call/bin/holdcall' init --write"
    );
    assert_eq!(
        servers::holdcall_init_with(&s, None).write,
        "cd /home/u/shop && holdcall init --write"
    );
}

#[test]
fn with_no_holdcall_beside_holdmap_the_routing_need_says_so_and_which_holdcall_runs() {
    // The unit tests' binary has no `holdcall` beside it.
    assert!(crate::holdmap::agents::capabilities::holdcall_beside().is_none());
    let ns = needs(
        &machine(),
        &[with_servers(agent(1100), vec![npx_server()])],
        &[],
    );
    let routed = of_kind(&ns, Kind::ServerNotRouted)[0];
    assert!(
        routed
            .action
            .contains("No holdcall is installed beside holdmap")
            && routed.action.contains("PATH"),
        "{}",
        routed.action
    );
}

#[test]
fn a_credential_in_a_package_url_appears_in_no_need() {
    const CANARY: &str = "CANARYsecret0123456789abcdefXYZ";
    let t = tempfile::tempdir().unwrap();
    let places = crate::clients::Places {
        home: t.path().to_path_buf(),
        config_dir: t.path().join(".config"),
        codex_home: t.path().join(".codex"),
        project: t.path().join("project"),
    };
    let servers = json!({"mcpServers": {
        "git": {"command": "uvx", "args": [format!("git+https://user:{CANARY}@github.com/o/r")]},
        "tgz": {"command": "npx", "args": ["-y", format!("https://{CANARY}@registry.example/p.tgz")]},
        "from": {"command": "uvx", "args": ["--from", format!("git+https://u:{CANARY}@h.example/r"), "t"]}
    }});
    std::fs::write(t.path().join(".claude.json"), servers.to_string()).unwrap();
    let (_, configured) = crate::holdmap::agents::capabilities::configured_servers(
        &places,
        crate::clients::ClientId::ClaudeCode,
        &crate::clients::routed::Judge::binary_at(std::path::Path::new("/nonexistent/holdcall")),
    );
    assert_eq!(configured.len(), 3);
    let ns = needs(&machine(), &[with_servers(agent(1100), configured)], &[]);
    assert_eq!(of_kind(&ns, Kind::ServerUnpinned).len(), 3, "{ns:?}");
    let shown = format!("{ns:?}");
    assert!(!shown.contains("CANARY"), "{shown}");
    assert!(shown.contains("a URL or path with uvx"), "{shown}");
}
