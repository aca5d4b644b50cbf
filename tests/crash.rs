//! The crash harness: relays fire pipelined allowed calls at recording demo servers while the
//! daemon is SIGKILLed at a random point, round after round on one home whose journal goes on
//! across rounds. After each round, nothing the server got and nothing the client was told was
//! allowed is missing from the journal, the chain has no gap, and `holdcall verify` passes.
//!
//! `HOLDCALL_CRASH_ROUNDS` sets the number of rounds (50 by default; `tools/crash --rounds N`
//! for the long run) and `HOLDCALL_CRASH_SEED` replays the rounds of a printed seed.

use crate::common::evidence::{Rng, count_from_env, digest, seed_from_env};
use crate::common::*;
use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Relays per round, each its own session in front of its own recording server.
const RELAYS: usize = 4;
/// Calls each relay's client writes per round, all at once, before reading any answer.
const CALLS: usize = 24;
/// One round in this many runs with `durability = "power"`, the others with `"process"`.
const POWER_EVERY: usize = 5;

/// One call a client wrote: its line, and the digest of its arguments.
struct Sent {
    line: Vec<u8>,
    digest: String,
}

#[derive(Default)]
struct Totals {
    sent: usize,
    received: usize,
    acknowledged: usize,
    lost: usize,
    /// Rounds whose `daemon start` gave up before the daemon listened (it was waited for).
    slow_starts: usize,
    slowest_start: std::time::Duration,
}

/// What the journal held after the last round: its length (chain seq runs 1..=len).
struct Journal {
    len: i64,
}

impl Journal {
    /// Checks the chain (contiguous from 1, never shorter than before) and returns the digests
    /// of the allowed call requests committed since the last round.
    fn allows_since_last(&mut self, env: &Env, round: usize) -> HashSet<String> {
        let db = rusqlite::Connection::open_with_flags(
            env.db(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .unwrap();
        let (count, min, max): (i64, Option<i64>, Option<i64>) = db
            .query_row(
                "SELECT count(*), min(chain_seq), max(chain_seq) FROM journal",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        // chain_seq is the primary key, so no duplicate: count == max and min == 1 is 1..=n.
        assert!(
            count > 0 && min == Some(1) && max == Some(count),
            "round {round}: chain seq is not 1..=n: {count} entries from {min:?} to {max:?}"
        );
        assert!(
            count >= self.len,
            "round {round}: the journal shrank from {} to {count} entries",
            self.len
        );
        let mut q = db
            .prepare(
                "SELECT args_digest FROM journal WHERE chain_seq > ?1 \
                 AND kind = 'call.request' AND decision = 'allow'",
            )
            .unwrap();
        let allows = q
            .query_map([self.len], |r| r.get::<_, Option<String>>(0))
            .unwrap()
            .filter_map(|d| d.unwrap())
            .collect();
        self.len = count;
        allows
    }
}

/// How long the harness waits for a daemon whose start outlasted `holdcall daemon start`'s own
/// bound (`limits::DAEMON_READY_TIMEOUT`): a loaded machine, a long journal. The harness tests
/// what a kill loses, not how fast a start is (tools/bench measures that).
const SLOW_START_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// Starts the round's daemon. A start that `daemon start` gave up on is waited for (the
/// daemon it spawned goes on starting) and counted, not taken as a failure of the round.
fn start_daemon(env: &Env, round: usize, totals: &mut Totals) {
    let began = std::time::Instant::now();
    let out = env.run(&["daemon", "start"]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("within"),
            "round {round}: holdcall daemon start failed: {err}"
        );
        totals.slow_starts += 1;
        let deadline = std::time::Instant::now() + SLOW_START_PATIENCE;
        while !env.run(&["daemon", "status"]).status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the daemon did not answer within {SLOW_START_PATIENCE:?} of \
                 its start: {err}"
            );
            // A start offers nothing to wait on but its socket answering; each status is a
            // process spawn, which paces this poll.
            std::thread::yield_now();
        }
    }
    totals.slowest_start = totals.slowest_start.max(began.elapsed());
}

/// One round: start the daemon, open the relays, write every call, SIGKILL the daemon once
/// `kill_at` answers have been read, read every answer, then check the journal against what
/// the servers got and what the clients were told.
fn round(env: &Env, journal: &mut Journal, rng: &mut Rng, round: usize, totals: &mut Totals) {
    let power = round % POWER_EVERY == POWER_EVERY - 1;
    env.write_config(if power {
        "[journal]\ndurability = \"power\"\n"
    } else {
        "[journal]\ndurability = \"process\"\n"
    });
    start_daemon(env, round, totals);
    let pid = env.daemon_pid();
    let mut relays: Vec<Relay> = (0..RELAYS).map(|_| env.relay("demo")).collect();
    for r in &mut relays {
        r.handshake();
    }
    let total = RELAYS * CALLS;
    // 0: killed before any answer; total - 1: after all but the last.
    let kill_at = rng.below(total);
    let answered = Arc::new(AtomicUsize::new(0));
    let mut sent: Vec<Vec<Sent>> = Vec::new();
    let mut readers = Vec::new();
    for (k, r) in relays.iter_mut().enumerate() {
        let calls: Vec<Sent> = (0..CALLS)
            .map(|i| {
                let args = format!(
                    r#"{{"text":"crash r{round} k{k} i{i} {}"}}"#,
                    rng.below(1 << 30)
                );
                Sent {
                    line: call(&(i + 1).to_string(), "echo", &args),
                    digest: digest(args.as_bytes()),
                }
            })
            .collect();
        // Pipelined: every call in one write, none waiting for an answer.
        let mut burst = Vec::new();
        for c in &calls {
            burst.extend_from_slice(&c.line);
            burst.push(b'\n');
        }
        let w = r.stdin.as_mut().unwrap();
        w.write_all(&burst).unwrap();
        w.flush().unwrap();
        sent.push(calls);
        let lines = std::mem::replace(&mut r.lines, std::sync::mpsc::channel().1);
        let answered = Arc::clone(&answered);
        readers.push(std::thread::spawn(move || {
            // Answer ids 1..=CALLS, each Some(refused) once read.
            let mut refused: Vec<Option<bool>> = vec![None; CALLS];
            for _ in 0..CALLS {
                let line = lines
                    .recv_timeout(PATIENCE)
                    .expect("every call is answered within the patience limit");
                let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
                let id = v["id"].as_u64().unwrap_or_else(|| panic!("an answer: {v}")) as usize;
                assert!(refused[id - 1].is_none(), "call {id} answered twice: {v}");
                refused[id - 1] = Some(is_refusal(&v));
                if answered.fetch_add(1, Ordering::SeqCst) + 1 == kill_at {
                    let _ = signal_pid(pid, nix::sys::signal::Signal::SIGKILL);
                }
            }
            refused
                .into_iter()
                .map(Option::unwrap)
                .collect::<Vec<bool>>()
        }));
    }
    if kill_at == 0 {
        signal_pid(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    }
    let refused: Vec<Vec<bool>> = readers.into_iter().map(|t| t.join().unwrap()).collect();
    // The daemon may have been killed by the last answer's reader only; every kill is by pid.
    let _ = signal_pid(pid, nix::sys::signal::Signal::SIGKILL);
    eventually("the killed daemon is gone", || !alive(pid));
    let mut received = Vec::new();
    for mut r in relays {
        r.stdin = None;
        r.child.wait().unwrap();
        received.push(r.recorded());
    }
    env.ok(&["verify"]);
    let allows = journal.allows_since_last(env, round);
    let seed_note = "(replay with HOLDCALL_CRASH_SEED as printed at the start)";
    for (k, calls) in sent.iter().enumerate() {
        let got: HashSet<&[u8]> = received[k]
            .iter()
            .map(|l| l.strip_suffix(b"\n").unwrap_or(l))
            .collect();
        let forwarded = received[k]
            .iter()
            .filter(|l| l.windows(10).any(|w| w == b"tools/call"))
            .count();
        let mut matched = 0;
        for (i, c) in calls.iter().enumerate() {
            let at_server = got.contains(c.line.as_slice());
            let told_allowed = !refused[k][i];
            let journaled = allows.contains(&c.digest);
            matched += usize::from(at_server);
            totals.received += usize::from(at_server);
            totals.acknowledged += usize::from(told_allowed);
            if (at_server || told_allowed) && !journaled {
                totals.lost += 1;
                eprintln!(
                    "LOST round {round} relay {k} call {}: at server {at_server}, told allowed \
                     {told_allowed}, no journaled allow with digest {} {seed_note}",
                    i + 1,
                    c.digest
                );
            }
            assert!(
                told_allowed || !at_server,
                "round {round} relay {k} call {}: refused to the client yet run by the server \
                 {seed_note}",
                i + 1
            );
        }
        assert_eq!(
            forwarded, matched,
            "round {round} relay {k}: the server got calls that were not sent as written"
        );
        totals.sent += calls.len();
    }
    assert_eq!(totals.lost, 0, "round {round}: calls were lost {seed_note}");
}

#[test]
fn no_acknowledged_or_forwarded_call_is_lost_when_the_daemon_is_killed_at_random_points() {
    let rounds = count_from_env("HOLDCALL_CRASH_ROUNDS", 50);
    let seed = seed_from_env("HOLDCALL_CRASH_SEED");
    eprintln!("crash: {rounds} rounds, HOLDCALL_CRASH_SEED={seed}");
    let started = std::time::Instant::now();
    let env = Env::fast();
    let mut rng = Rng(seed | 1);
    let mut journal = Journal { len: 0 };
    let mut totals = Totals::default();
    for n in 0..rounds {
        round(&env, &mut journal, &mut rng, n, &mut totals);
    }
    println!(
        "crash: rounds {rounds}, calls sent {}, received by servers {}, allows acknowledged {}, \
         journal entries {}, lost = {}, seed {seed}, {:.1} s; daemon starts: slowest {:.2} s, \
         {} past daemon start's own bound",
        totals.sent,
        totals.received,
        totals.acknowledged,
        journal.len,
        totals.lost,
        started.elapsed().as_secs_f64(),
        totals.slowest_start.as_secs_f64(),
        totals.slow_starts
    );
    assert_eq!(totals.lost, 0);
}
