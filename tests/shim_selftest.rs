//! The fault shim (tools/shim/holdcall_shim.c) does what each of its modes says, against the real
//! daemon: the fault matrix and the power-loss model rely on it, so a shim that silently did
//! nothing would make their passes meaningless. Each test skips, saying why, where the shim
//! cannot be built.

use crate::common::shim::Shim;
use crate::common::*;

/// A home with `durability = "power"` (every commit syncs the -wal), its daemon carrying the
/// shim, and one relay past its handshake, with the shim still off.
fn started() -> Option<(Env, Shim, i32, Relay)> {
    let env = Env::new();
    env.write_config("[journal]\ndurability = \"power\"\n");
    let shim = Shim::new(&env)?;
    let pid = shim.start_daemon(&env);
    let mut r = env.relay("demo");
    r.handshake();
    Some((env, shim, pid, r))
}

#[test]
fn with_eio_a_sync_of_the_journal_fails_and_the_call_is_refused_and_never_forwarded() {
    let Some((_env, shim, pid, mut r)) = started() else {
        return;
    };
    shim.set("eio");
    r.send(&call("1", "echo", r#"{"text":"eio"}"#));
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    assert!(
        shim.log()
            .iter()
            .any(|l| l.starts_with(&format!("eio {pid} holdcall.db"))),
        "{:?}",
        shim.log()
    );
    r.barrier(1);
    assert_eq!(r.forwarded_calls(), 0);
}

#[test]
fn with_pause_the_daemon_blocks_in_its_sync_until_killed_and_the_call_is_refused() {
    let Some((_env, shim, pid, mut r)) = started() else {
        return;
    };
    let _kill = KillOnDrop(vec![pid]);
    shim.set("pause");
    r.send(&call("1", "echo", r#"{"text":"pause"}"#));
    let paused = format!("paused {pid}");
    eventually("the daemon is paused in a sync", || {
        shim.log().contains(&paused)
    });
    assert!(alive(pid), "the paused daemon is still there");
    assert_eq!(r.forwarded_calls(), 0);
    signal_pid(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    r.barrier(1);
    assert_eq!(r.forwarded_calls(), 0);
}

#[test]
fn with_seq_shift_the_daemon_answers_for_another_seq_and_the_relay_refuses() {
    let Some((_env, shim, pid, mut r)) = started() else {
        return;
    };
    shim.set("seq_shift");
    r.send(&call("1", "echo", r#"{"text":"shift"}"#));
    let a = r.recv_json();
    assert!(is_refusal(&a), "{a}");
    assert!(
        shim.log()
            .iter()
            .any(|l| l.starts_with(&format!("shifted {pid} "))),
        "{:?}",
        shim.log()
    );
    r.barrier(1);
    assert_eq!(r.forwarded_calls(), 0);
}

#[test]
fn with_snap_every_sync_of_the_journal_leaves_a_copy_and_a_log_line() {
    let Some((_env, shim, _pid, mut r)) = started() else {
        return;
    };
    shim.set("snap");
    r.send(&call("1", "echo", r#"{"text":"snap"}"#));
    let a = r.recv_json();
    assert!(!is_refusal(&a), "{a}");
    let syncs: Vec<(String, String)> = shim
        .log()
        .iter()
        .filter_map(|l| {
            let mut w = l.strip_prefix("sync ")?.split(' ');
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect();
    assert!(
        syncs.iter().any(|(_, f)| f == "holdcall.db-wal"),
        "a power commit syncs the -wal: {:?}",
        shim.log()
    );
    for (n, file) in &syncs {
        let copy = shim.snapshots.join(format!("{n}-{file}"));
        let len = std::fs::metadata(&copy).unwrap().len();
        assert!(len > 0, "{} is empty", copy.display());
    }
    r.finish();
}
