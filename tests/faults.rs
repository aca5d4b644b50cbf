//! The fault matrix (issue 16): every way the daemon can fail to decide, as one row of one
//! table, run by one runner. Each row puts one fault on a home and sends one tools/call through a
//! real relay in front of a recording demo server, then checks the same things:
//! - the call is refused (or, for a fault the daemon heals before the call, decided and
//!   journaled), and a refused call never reaches the server;
//! - every call the server received has a committed `call.request` allow in the journal, found
//!   by the SHA-256 of its argument bytes, computed here;
//! - once the fault is undone, `holdcall verify` passes;
//! - the home decides again: on the same relay where the row says the daemon heals in place,
//!   on a new relay where the old link is rightly not trusted again.
//!
//! Rows that need root (a mount, file attributes) say so and skip with the reason when not
//! root; rows that need the LD_PRELOAD shim (tools/shim) skip when no C compiler is there.
//! Nothing here signals a process the row did not start, and only by pid.

use crate::common::disk::{SmallDisk, fill};
use crate::common::evidence::digest;
use crate::common::shim::Shim;
use crate::common::*;
use std::any::Any;
use std::path::Path;
use std::process::Command;

/// When the fault is put on the home.
#[derive(Clone, Copy, PartialEq)]
enum When {
    /// Before the row's relay starts: the relay meets the fault at its session start.
    AtStart,
    /// In the middle of a session whose first call was allowed.
    MidSession,
}

/// What the faulted call must get.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    /// Holdcall's refusal, and the server never sees the call.
    Refused,
    /// A decision: the daemon healed the fault before the call (it is then allowed and
    /// journaled like any other).
    Decided,
}

/// Where the home decides again once the fault is undone.
#[derive(Clone, Copy, PartialEq)]
enum Heals {
    /// The same relay, on the same link: the daemon recovered in place.
    SameRelay,
    /// A new relay: the old link failed once and is not trusted again, or its daemon is gone.
    NewRelay,
}

/// What a row needs of the machine, beyond the test binary.
#[derive(Clone, Copy, PartialEq)]
enum Needs {
    Nothing,
    /// Root: mounting a tmpfs, or `chattr +i`.
    Root,
    /// The LD_PRELOAD shim (tools/shim) on the daemon, which needs a C compiler: the row's
    /// daemon is started with it, in mode `off` until the row injects.
    Shim,
}

/// What an injected fault leaves behind: how to undo it, and what must live until the row
/// ends (a mount, a process to stop).
/// How a row undoes its fault: given the home and, for shim rows, its shim.
type Undo = Box<dyn FnOnce(&Env, Option<&Shim>)>;

struct Fault {
    undo: Undo,
    keep: Vec<Box<dyn Any>>,
}

impl Fault {
    fn undo(undo: impl FnOnce(&Env, Option<&Shim>) + 'static) -> Fault {
        Fault {
            undo: Box::new(undo),
            keep: Vec::new(),
        }
    }
    fn keeping(mut self, what: impl Any) -> Fault {
        self.keep.push(Box::new(what));
        self
    }
}

struct Row {
    fault: &'static str,
    needs: Needs,
    /// `[journal] durability` for the row's home.
    durability: &'static str,
    /// A home on the real disk (file attributes a tmpfs lacks), not under the temp dir.
    on_disk: bool,
    /// Done before anything runs on the home (a mount under it).
    prepare: fn(&Env) -> Vec<Box<dyn Any>>,
    when: When,
    inject: fn(&Env, Option<&Shim>) -> Fault,
    /// Done once the faulted call is written, before its answer is read.
    during: fn(&Env, Option<&Shim>),
    expect: Expect,
    heals: Heals,
}

fn nothing(_: &Env) -> Vec<Box<dyn Any>> {
    Vec::new()
}

fn no_more(_: &Env, _: Option<&Shim>) {}

/// Puts the shim in `mode` for the faulted call, and back to `off` to undo.
fn shim_mode(shim: Option<&Shim>, mode: &str) -> Fault {
    shim.unwrap().set(mode);
    Fault::undo(|_, shim| shim.unwrap().set("off"))
}

/// Stops the row's daemon when dropped: kept after a mount, so it runs before the unmount.
struct StopDaemon(Command);
impl Drop for StopDaemon {
    fn drop(&mut self) {
        let _ = self.0.output();
    }
}

fn chattr(flag: &str, files: &[std::path::PathBuf]) {
    let out = Command::new("chattr")
        .arg(flag)
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chattr {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn wal(env: &Env) -> std::path::PathBuf {
    env.home().join("holdcall.db-wal")
}

/// The matrix: one row a test, each `test_name: Row { … }`, all run by [`run`].
macro_rules! faults {
    ($($test:ident: $row:expr,)*) => {
        $(
            #[test]
            fn $test() {
                run(&$row);
            }
        )*
    };
}

faults! {
    with_no_daemon_able_to_start_every_call_is_refused: Row {
        fault: "no daemon can start (the database path is a directory)",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::AtStart,
        inject: |env, _| {
            std::fs::create_dir(env.db()).unwrap();
            Fault::undo(|env, _| std::fs::remove_dir(env.db()).unwrap())
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    a_stopped_daemon_refuses_the_call_in_time_and_a_new_relay_decides_once_it_runs_again: Row {
        fault: "the daemon is stopped (SIGSTOP)",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |env, _| {
            let pid = env.daemon_pid();
            signal_pid(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
            Fault::undo(move |_, _| {
                signal_pid(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
            })
            .keeping(SignalOnDrop(pid, nix::sys::signal::Signal::SIGCONT))
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    a_killed_daemon_refuses_the_call_and_a_new_relay_starts_a_new_one: Row {
        fault: "the daemon is killed (SIGKILL)",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |env, _| {
            let pid = env.daemon_pid();
            signal_pid(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
            eventually("the killed daemon has exited", || !alive(pid));
            Fault::undo(|_, _| {})
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    a_daemon_killed_in_the_middle_of_committing_a_decision_refuses_the_call: Row {
        fault: "the daemon is SIGKILLed while it commits the call's decision",
        needs: Needs::Shim,
        durability: "power",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |_, shim| shim_mode(shim, "pause"),
        during: |_, shim| {
            // The shim holds the daemon inside the journal's sync (where it answers nobody,
            // so its pid comes from the shim's log), then it dies there.
            let shim = shim.unwrap();
            let paused = || {
                shim.log()
                    .iter()
                    .find_map(|l| l.strip_prefix("paused ")?.parse::<i32>().ok())
            };
            eventually("the daemon is paused in its sync", || paused().is_some());
            let pid = paused().unwrap();
            signal_pid(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
            eventually("the killed daemon has exited", || !alive(pid));
        },
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    a_daemon_answering_for_another_seq_gets_the_call_refused: Row {
        fault: "the daemon's answer names another seq",
        needs: Needs::Shim,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |_, shim| shim_mode(shim, "seq_shift"),
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    an_eio_from_the_journals_fsync_refuses_the_call: Row {
        fault: "the journal's fsync fails with EIO",
        needs: Needs::Shim,
        durability: "power",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |_, shim| shim_mode(shim, "eio"),
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::SameRelay,
    },
    a_deleted_socket_is_put_back_and_the_call_is_decided: Row {
        fault: "the daemon's socket is deleted",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::AtStart,
        inject: |env, _| {
            env.ok(&["daemon", "start"]);
            std::fs::remove_file(env.socket()).unwrap();
            Fault::undo(|_, _| {})
        },
        // The daemon puts its socket back within a second, and a starting relay waits for it.
        during: no_more,
        expect: Expect::Decided,
        heals: Heals::SameRelay,
    },
    a_socket_replaced_by_a_directory_refuses_the_call_until_it_is_removed: Row {
        fault: "the daemon's socket is replaced by a directory",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::AtStart,
        inject: |env, _| {
            env.ok(&["daemon", "start"]);
            let socket = env.socket();
            std::fs::remove_file(&socket).unwrap();
            std::fs::create_dir(&socket).unwrap();
            Fault::undo(move |_, _| std::fs::remove_dir(&socket).unwrap())
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    another_homes_daemon_on_the_socket_decides_nothing_here: Row {
        fault: "another home's daemon is on this home's socket",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::AtStart,
        inject: |env, _| {
            let other = Env::fast();
            other.ok(&["daemon", "start"]);
            let pid = other.daemon_pid();
            let socket = env.socket();
            std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
            std::fs::rename(other.socket(), &socket).unwrap();
            Fault::undo(move |_, _| {
                signal_pid(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
                eventually("the other home's daemon has exited", || !alive(pid));
                let _ = std::fs::remove_file(&socket);
            })
            .keeping(SignalOnDrop(pid, nix::sys::signal::Signal::SIGTERM))
            .keeping(other)
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    an_impostor_on_the_socket_decides_nothing: Row {
        fault: "an impostor (not Holdcall) listens on the socket",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::AtStart,
        inject: |env, _| {
            let socket = env.socket();
            let impostor = crate::common::impostor::listen(&socket);
            let pid = impostor.0[0];
            Fault::undo(move |_, _| {
                signal_pid(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
                eventually("the impostor has exited", || !alive(pid));
                std::fs::remove_file(&socket).unwrap();
            })
            .keeping(impostor)
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::NewRelay,
    },
    a_read_only_journal_refuses_the_call_and_the_same_relay_decides_once_writable: Row {
        fault: "the journal is read-only (a trigger aborts every insert)",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: nothing,
        when: When::MidSession,
        inject: |env, _| {
            rusqlite::Connection::open(env.db())
                .unwrap()
                .execute_batch(
                    "CREATE TRIGGER read_only BEFORE INSERT ON journal \
                     BEGIN SELECT RAISE(ABORT, 'read-only'); END;",
                )
                .unwrap();
            Fault::undo(|env, _| {
                rusqlite::Connection::open(env.db())
                    .unwrap()
                    .execute_batch("DROP TRIGGER read_only;")
                    .unwrap();
            })
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::SameRelay,
    },
    an_immutable_database_refuses_the_call_and_the_same_relay_decides_once_mutable: Row {
        fault: "the database and its WAL are immutable (chattr +i)",
        needs: Needs::Root,
        durability: "process",
        on_disk: true,
        prepare: nothing,
        when: When::MidSession,
        inject: |env, _| {
            // Not the -shm: SQLite maps it, and a write to an immutable mapping is a SIGBUS at
            // a random moment, not a fault the daemon can be asked to survive.
            let files = vec![env.db(), wal(env)];
            chattr("+i", &files);
            Fault::undo(move |_, _| chattr("-i", &files))
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::SameRelay,
    },
    a_full_disk_refuses_the_call_and_the_same_relay_decides_once_space_is_back: Row {
        fault: "the disk is full (a 2 MiB tmpfs)",
        needs: Needs::Root,
        durability: "process",
        on_disk: false,
        prepare: |env| match SmallDisk::mount(&env.home()) {
            // Dropped in order: the daemon stops before the unmount.
            Some(disk) => vec![
                Box::new(StopDaemon(env.cmd(&["daemon", "stop"]))),
                Box::new(disk),
            ],
            None => panic!("mounting the small disk failed (see above)"),
        },
        when: When::MidSession,
        inject: |env, _| {
            let filler = fill(&env.home());
            Fault::undo(move |_, _| std::fs::remove_file(filler).unwrap())
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::SameRelay,
    },
    policy_tables_edited_behind_the_daemon_refuse_the_call_until_put_back: Row {
        fault: "the policy tables are edited behind the daemon",
        needs: Needs::Nothing,
        durability: "process",
        on_disk: false,
        prepare: |env| {
            env.ok(&["policy", "deny", "rm"]);
            Vec::new()
        },
        when: When::MidSession,
        inject: |env, _| {
            // As a person with sqlite3 would: the append-only triggers dropped, the rule that
            // denied rm deleted. Kept, to be put back exactly.
            let c = rusqlite::Connection::open(env.db()).unwrap();
            c.busy_timeout(PATIENCE).unwrap();
            let triggers: Vec<String> = c
                .prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND sql IS NOT NULL")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let names: Vec<String> = c
                .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            for n in &names {
                c.execute_batch(&format!("DROP TRIGGER \"{n}\";")).unwrap();
            }
            c.execute_batch(
                "CREATE TEMP TABLE kept AS SELECT * FROM main.policies WHERE id = 'rule-1';",
            )
            .unwrap();
            let saved: Vec<rusqlite::types::Value> = {
                let mut q = c.prepare("SELECT * FROM kept").unwrap();
                let n = q.column_count();
                q.query_row([], |r| (0..n).map(|i| r.get(i)).collect())
                    .unwrap()
            };
            assert_eq!(
                c.execute("DELETE FROM policies WHERE id = 'rule-1'", [])
                    .unwrap(),
                1
            );
            drop(c);
            Fault::undo(move |env, _| {
                let c = rusqlite::Connection::open(env.db()).unwrap();
                c.busy_timeout(PATIENCE).unwrap();
                let marks = vec!["?"; saved.len()].join(", ");
                c.execute(
                    &format!("INSERT INTO policies VALUES ({marks})"),
                    rusqlite::params_from_iter(saved),
                )
                .unwrap();
                for t in &triggers {
                    c.execute_batch(t).unwrap();
                }
            })
        },
        during: no_more,
        expect: Expect::Refused,
        heals: Heals::SameRelay,
    },
}

/// The calls a row sent, by their argument text: each must, if the server got it, have a
/// committed allow.
struct Calls {
    sent: Vec<String>,
    next: u64,
}

impl Calls {
    /// Writes an `echo` call whose text is `what` (and a number of its own); returns its
    /// argument text.
    fn write(&mut self, r: &mut Relay, what: &str) -> String {
        self.next += 1;
        let args = format!(r#"{{"text":"{what} {}"}}"#, self.next);
        r.send(&call(&self.next.to_string(), "echo", &args));
        self.sent.push(args.clone());
        args
    }

    /// Writes such a call and returns its answer.
    fn send(&mut self, r: &mut Relay, what: &str) -> serde_json::Value {
        self.write(r, what);
        r.recv_json()
    }

    /// Every sent call the server got has a committed `call.request` allow with its digest.
    fn check_write_ahead(&self, fault: &str, env: &Env, relays: &[&Relay]) {
        let rows = journal_rows(&env.db());
        for args in &self.sent {
            let got = relays.iter().any(|r| r.server_got(args.as_bytes()));
            let allowed = rows.iter().any(|e| {
                e["kind"] == "call.request"
                    && e["decision"] == "allow"
                    && e["args_digest"] == digest(args.as_bytes())
            });
            assert!(
                !got || allowed,
                "{fault}: the server got {args} with no committed allow in the journal"
            );
        }
    }
}

fn run(row: &Row) {
    let fault = row.fault;
    if row.needs == Needs::Root && !nix::unistd::geteuid().is_root() {
        println!("skipped: {fault}: needs root (CI runs the tests as root)");
        return;
    }
    let env = if row.on_disk {
        Env::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")))
    } else {
        Env::new()
    };
    let _prepared = (row.prepare)(&env);
    env.write_config(&format!("[journal]\ndurability = \"{}\"\n", row.durability));
    let shim = match row.needs {
        Needs::Shim => match Shim::new(&env) {
            Some(shim) => {
                shim.start_daemon(&env);
                Some(shim)
            }
            None => {
                println!("skipped: {fault}: needs the fault shim (see above)");
                return;
            }
        },
        _ => None,
    };
    let mut calls = Calls {
        sent: Vec::new(),
        next: 0,
    };

    let mut opened = None;
    if row.when == When::MidSession {
        let mut r = env.relay("demo");
        r.handshake();
        let a = calls.send(&mut r, "before the fault");
        assert!(!is_refusal(&a), "{fault}: the call before the fault: {a}");
        opened = Some(r);
    }
    let injected = (row.inject)(&env, shim.as_ref());
    let mut r = match opened {
        Some(r) => r,
        None => {
            let mut r = env.relay("demo");
            r.handshake(); // the server runs: initialize is answered by it
            r
        }
    };
    let marker = calls.write(&mut r, "under the fault");
    (row.during)(&env, shim.as_ref());
    let a = r.recv_json();
    r.barrier(1);
    match row.expect {
        Expect::Refused => {
            assert!(is_refusal(&a), "{fault}: the call was not refused: {a}");
            assert!(
                !r.server_got(marker.as_bytes()),
                "{fault}: a refused call reached the server"
            );
        }
        Expect::Decided => assert!(!is_refusal(&a), "{fault}: the call was refused: {a}"),
    }

    (injected.undo)(&env, shim.as_ref());
    calls.check_write_ahead(fault, &env, &[&r]);
    // A home whose daemon never ran has no journal yet to verify (the next relay makes it).
    if env.db().is_file() {
        let verify = env.run(&["verify"]);
        assert!(
            verify.status.success(),
            "{fault}: verify after recovery: {}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
    }

    let healed = match row.heals {
        Heals::SameRelay => calls.send(&mut r, "after recovery"),
        Heals::NewRelay => {
            let mut r2 = env.relay("demo");
            r2.handshake();
            let a = calls.send(&mut r2, "after recovery");
            calls.check_write_ahead(fault, &env, &[&r, &r2]);
            a
        }
    };
    assert!(
        !is_refusal(&healed),
        "{fault}: the home does not decide again: {healed}"
    );
    calls.check_write_ahead(fault, &env, &[&r]);
    env.ok(&["verify"]);
    drop(injected.keep);
    println!("fault matrix: {fault}: ok");
}
