use super::*;
use crate::holdmap::model::fixture::{add, listen, machine, process, socket};
use crate::holdmap::stop::fake::{add_plain, add_vite, with_vite};
use crate::os::sockets::SocketState;

fn pids(ms: &[Member]) -> Vec<i32> {
    ms.iter().map(|m| m.pid).collect()
}

#[test]
fn a_dev_servers_plan_is_its_launcher_tree_deepest_first_and_low_risk() {
    let plan = plan_port(&with_vite(), 5173, None, PlanOptions::default());
    assert_eq!(pids(&plan.owners), vec![1202]);
    assert_eq!(pids(&plan.tree), vec![1203, 1202, 1201, 1200]);
    let roles: Vec<Role> = plan.tree.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            Role::Descendant,
            Role::Owner,
            Role::Launcher,
            Role::Launcher
        ]
    );
    assert_eq!(plan.risk, Risk::Low, "{}", plan.risk_reason);
    assert!(plan.permitted);
    assert_eq!(plan.refusal, None);
}

#[test]
fn the_steps_are_sigterm_bottom_up_a_grace_period_then_a_verify() {
    let plan = plan_port(&with_vite(), 5173, None, PlanOptions::default());
    let signals: Vec<(i32, Sig)> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Signal { pid, sig, .. } => Some((*pid, *sig)),
            _ => None,
        })
        .collect();
    assert_eq!(
        signals,
        vec![
            (1203, Sig::Term),
            (1202, Sig::Term),
            (1201, Sig::Term),
            (1200, Sig::Term)
        ]
    );
    assert_eq!(
        plan.steps[4],
        Step::Wait {
            timeout: HOLDMAP_STOP_GRACE,
            then_kill: true
        }
    );
    assert_eq!(
        plan.steps[5],
        Step::Verify {
            port: 5173,
            protocol: None
        }
    );
}

#[test]
fn force_plans_sigkill_at_once() {
    let opts = PlanOptions {
        force: true,
        allow_non_dev: false,
    };
    let plan = plan_port(&with_vite(), 5173, None, opts);
    assert!(plan.steps.iter().all(|s| !matches!(
        s,
        Step::Signal { sig: Sig::Term, .. }
            | Step::Wait {
                then_kill: true,
                ..
            }
    )));
}

#[test]
fn the_launcher_walk_stops_at_a_process_that_is_not_a_launcher() {
    let mut snap = machine();
    let mut supervisor = process(
        1100,
        1,
        1000,
        "supervisord",
        &["/usr/bin/supervisord"],
        "/home/u/shop",
    );
    supervisor.exe = Some("/usr/bin/supervisord".into());
    add(&mut snap, supervisor);
    add_vite(&mut snap, 1100, 1200, 5173);
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    assert!(!pids(&plan.tree).contains(&1100));
    assert_eq!(pids(&plan.tree), vec![1203, 1202, 1201, 1200]);
}

#[test]
fn the_launcher_walk_stops_at_a_launcher_of_another_project() {
    let mut snap = machine();
    add_vite(&mut snap, 800, 1200, 5173);
    snap.procs.get_mut(&1200).unwrap().cwd = Some("/home/u/other".into());
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    assert_eq!(pids(&plan.tree), vec![1203, 1202, 1201]);
}

#[test]
fn the_launcher_walk_never_reaches_holdmap_or_its_ancestors() {
    // holdmap (900) started by the same `sh -c` that started the server.
    let mut snap = machine();
    add_vite(&mut snap, 800, 1200, 5173);
    snap.procs.get_mut(&900).unwrap().ppid = 1201;
    snap.me.ancestors = vec![1201, 1200, 800, 700, 1];
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    assert!(!pids(&plan.tree).contains(&1201) && !pids(&plan.tree).contains(&1200));
    assert!(!pids(&plan.tree).contains(&900));
}

#[test]
fn a_protected_process_below_the_owner_makes_the_plan_high_risk() {
    let mut snap = with_vite();
    snap.procs.get_mut(&900).unwrap().ppid = 1202;
    let plan = plan_port(
        &snap,
        5173,
        None,
        PlanOptions {
            force: false,
            allow_non_dev: true,
        },
    );
    assert!(pids(&plan.tree).contains(&900));
    assert_eq!(plan.risk, Risk::High);
    assert!(!plan.permitted);
}

#[test]
fn the_hard_guard_covers_pid_1_holdmap_its_ancestors_and_its_children() {
    let mut snap = machine();
    add(&mut snap, process(950, 900, 1000, "child", &["child"], "/"));
    for pid in [0, 1, 900, 800, 700, 950] {
        assert!(hard_guard(&snap, pid).is_some(), "pid {pid}");
    }
    add_plain(&mut snap, 2000, 1, 1000, 4000);
    assert_eq!(hard_guard(&snap, 2000), None);
    snap.me.pid = 0;
    assert!(
        hard_guard(&snap, 2000).is_some(),
        "an unknown self refuses everything"
    );
}

#[test]
fn a_process_without_a_start_time_cannot_be_permitted() {
    let mut snap = machine();
    add_plain(&mut snap, 2000, 1, 1000, 4000);
    snap.procs.get_mut(&2000).unwrap().start_ticks = 0;
    let plan = plan_port(
        &snap,
        4000,
        None,
        PlanOptions {
            force: false,
            allow_non_dev: true,
        },
    );
    assert_eq!(plan.risk, Risk::High);
    assert!(!plan.permitted);
}

#[test]
fn an_unreadable_account_is_refused() {
    let mut snap = machine();
    add_plain(&mut snap, 2000, 1, 1000, 4000);
    snap.procs.get_mut(&2000).unwrap().uid = None;
    let plan = plan_port(
        &snap,
        4000,
        None,
        PlanOptions {
            force: false,
            allow_non_dev: true,
        },
    );
    assert_eq!(plan.risk, Risk::High);
}

#[test]
fn a_plan_is_scoped_to_its_protocol() {
    let mut snap = with_vite();
    add_plain(&mut snap, 2000, 1, 1000, 6000);
    socket(
        &mut snap,
        Protocol::Udp,
        "127.0.0.1:5173",
        "0.0.0.0:0",
        SocketState::Bound,
        2000,
    );
    let tcp = plan_port(&snap, 5173, Some(Protocol::Tcp), PlanOptions::default());
    assert_eq!(pids(&tcp.owners), vec![1202]);
    let both = plan_port(&snap, 5173, None, PlanOptions::default());
    assert_eq!(both.owners.len(), 2);
    assert_eq!(both.risk, Risk::High);
}

#[test]
fn a_socket_held_by_a_child_too_has_one_owner() {
    let mut snap = with_vite();
    let inode_holders = &mut snap.sockets.last_mut().unwrap().pids;
    inode_holders.push(1203);
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    assert_eq!(pids(&plan.owners), vec![1202]);
}

#[test]
fn same_effects_compares_identities_not_display_text() {
    let a = plan_port(&with_vite(), 5173, None, PlanOptions::default());
    let mut b = a.clone();
    b.tree[0].name = "renamed".into();
    b.tree[0].command = "shown differently".into();
    b.risk_reason = "other words".into();
    assert!(same_effects(&a, &b));
    let mut restarted = with_vite();
    restarted.procs.get_mut(&1202).unwrap().start_ticks += 1;
    let c = plan_port(&restarted, 5173, None, PlanOptions::default());
    assert!(!same_effects(&a, &c));
    let d = plan_port(
        &with_vite(),
        5173,
        None,
        PlanOptions {
            force: true,
            allow_non_dev: false,
        },
    );
    assert!(!same_effects(&a, &d));
    let mut grown = with_vite();
    add(
        &mut grown,
        process(1250, 1202, 1000, "w", &["w"], "/home/u/shop"),
    );
    assert!(!same_effects(
        &a,
        &plan_port(&grown, 5173, None, PlanOptions::default())
    ));
}

#[test]
fn commands_are_shown_redacted() {
    let mut snap = machine();
    add(
        &mut snap,
        process(2000, 1, 1000, "srv", &["srv", "--token", "hunter2"], "/"),
    );
    listen(&mut snap, "127.0.0.1:4000", 2000);
    let plan = plan_port(&snap, 4000, None, PlanOptions::default());
    assert_eq!(plan.owners[0].command, redact_argv(&snap.procs[&2000].argv));
}

#[test]
fn the_published_plan_matches_its_schema_and_never_allows_protected() {
    let plan = plan_port(&with_vite(), 5173, None, PlanOptions::default());
    let v = to_json(&plan);
    assert_eq!(v["allow_protected"], json!(false));
    crate::holdmap::schema::validate(&plan_schema(), &v, "plan").unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    let props = plan_schema()["properties"].as_object().unwrap().clone();
    assert!(keys.iter().all(|k| props.contains_key(*k)));
    assert_eq!(plan_schema()["additionalProperties"], json!(false));
}

#[test]
fn a_zombie_below_the_owner_is_not_part_of_the_plan() {
    let mut snap = with_vite();
    snap.procs.get_mut(&1203).unwrap().state = 'Z';
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    assert_eq!(pids(&plan.tree), vec![1202, 1201, 1200]);
}

#[test]
fn a_launcher_that_also_started_another_projects_server_is_not_part_of_the_plan() {
    // `concurrently` run from the home folder started shop's vite (1201…) and blog's (1301…):
    // stopping shop's port must not stop blog's server.
    let mut snap = machine();
    let mut both = process(
        1100,
        800,
        1000,
        "npm",
        &["npm", "exec", "concurrently"],
        "/home/u",
    );
    both.exe = Some("/usr/bin/node".into());
    add(&mut snap, both);
    add_vite(&mut snap, 1100, 1200, 5173);
    add_vite(&mut snap, 1100, 1300, 5174);
    for pid in 1300..1304 {
        snap.procs.get_mut(&pid).unwrap().cwd = Some("/home/u/blog".into());
    }
    let plan = plan_port(&snap, 5173, None, PlanOptions::default());
    let tree = pids(&plan.tree);
    assert!(!tree.contains(&1100), "{tree:?}");
    assert!(tree.iter().all(|p| (1200..1204).contains(p)), "{tree:?}");
}

#[test]
fn without_its_own_entry_in_the_snapshot_holdmap_refuses_every_process() {
    let mut snap = with_vite();
    snap.procs.remove(&900);
    assert!(hard_guard(&snap, 1202).is_some());
    assert!(!plan_port(&snap, 5173, None, PlanOptions::default()).permitted);
}
