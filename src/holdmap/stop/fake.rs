//! A machine for the stop tests: a scripted snapshot that signals change (a signalled process
//! exits unless it ignores SIGTERM; its sockets go with it), every signal recorded, and a
//! virtual clock. Nothing here touches a real process.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::holdmap::model::Snapshot;
use crate::holdmap::model::fixture::{add, listen, machine, process};
use crate::holdmap::stop::Pacer;
use crate::holdmap::world::World;
use crate::os::signal::{Sig, SignalError};

#[derive(Default)]
pub(crate) struct FakeWorld {
    pub(crate) base: Mutex<Snapshot>,
    dead: Mutex<HashSet<i32>>,
    /// Processes that survive SIGTERM (SIGKILL still ends them).
    pub(crate) ignores_term: Mutex<HashSet<i32>>,
    /// Processes whose signals are refused by the kernel (`Denied`).
    pub(crate) denied: Mutex<HashSet<i32>>,
    pub(crate) signals: Mutex<Vec<(i32, u64, Sig)>>,
    pub(crate) observes: AtomicUsize,
    /// When set, `observe` fails.
    pub(crate) blind: Mutex<bool>,
}

impl FakeWorld {
    pub(crate) fn new(snap: Snapshot) -> FakeWorld {
        FakeWorld {
            base: Mutex::new(snap),
            ..FakeWorld::default()
        }
    }

    pub(crate) fn signals(&self) -> Vec<(i32, u64, Sig)> {
        self.signals.lock().unwrap().clone()
    }

    /// Replaces the machine (a process restarted, a new owner …).
    pub(crate) fn set(&self, snap: Snapshot) {
        *self.base.lock().unwrap() = snap;
    }

    pub(crate) fn edit(&self, f: impl FnOnce(&mut Snapshot)) {
        f(&mut self.base.lock().unwrap());
    }
}

impl World for FakeWorld {
    fn observe(&self) -> Result<Snapshot, String> {
        self.observes.fetch_add(1, Ordering::SeqCst);
        if *self.blind.lock().unwrap() {
            return Err("the process table could not be read".to_owned());
        }
        let dead = self.dead.lock().unwrap().clone();
        let mut s = self.base.lock().unwrap().clone();
        s.procs.retain(|pid, _| !dead.contains(pid));
        for sock in &mut s.sockets {
            sock.pids.retain(|p| !dead.contains(p));
        }
        // A socket whose every holder exited is closed.
        let before = self.base.lock().unwrap().sockets.clone();
        let mut i = 0;
        s.sockets.retain(|sock| {
            let had = before.get(i).is_some_and(|b| !b.pids.is_empty());
            i += 1;
            !(had && sock.pids.is_empty())
        });
        Ok(s)
    }

    fn signal(&self, pid: i32, start_ticks: u64, sig: Sig) -> Result<(), SignalError> {
        if !self.alive(pid, start_ticks) {
            let replaced = self.base.lock().unwrap().proc(pid).is_some()
                && !self.dead.lock().unwrap().contains(&pid);
            return Err(if replaced {
                SignalError::Replaced { pid }
            } else {
                SignalError::Gone { pid }
            });
        }
        if self.denied.lock().unwrap().contains(&pid) {
            return Err(SignalError::Denied { pid });
        }
        self.signals.lock().unwrap().push((pid, start_ticks, sig));
        if sig == Sig::Kill || !self.ignores_term.lock().unwrap().contains(&pid) {
            self.dead.lock().unwrap().insert(pid);
        }
        Ok(())
    }

    fn alive(&self, pid: i32, start_ticks: u64) -> bool {
        !self.dead.lock().unwrap().contains(&pid)
            && self
                .base
                .lock()
                .unwrap()
                .proc(pid)
                .is_some_and(|p| p.start_ticks == start_ticks)
    }
}

/// A clock that moves only when paused on.
#[derive(Default)]
pub(crate) struct VirtualPacer {
    nanos: AtomicU64,
}

impl VirtualPacer {
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

impl Pacer for VirtualPacer {
    fn now(&self) -> Duration {
        self.elapsed()
    }
    fn pause(&self, d: Duration) {
        self.nanos
            .fetch_add(u64::try_from(d.as_nanos()).unwrap(), Ordering::SeqCst);
    }
}

/// The fixture machine plus a vite dev server under `npm run dev` → `sh -c vite`, started from
/// the interactive shell 800 in /home/u/shop, listening on 127.0.0.1:5173:
/// npm 1200 → sh 1201 → node vite 1202 → esbuild 1203.
pub(crate) fn with_vite() -> Snapshot {
    let mut s = machine();
    add_vite(&mut s, 800, 1200, 5173);
    s
}

/// Adds the vite tree under `parent`, pids `first`..`first+3`, listening on `port`.
pub(crate) fn add_vite(s: &mut Snapshot, parent: i32, first: i32, port: u16) {
    let dir = "/home/u/shop";
    let mut npm = process(first, parent, 1000, "npm run dev", &["npm run dev"], dir);
    npm.exe = Some("/usr/bin/node".into());
    add(s, npm);
    let mut sh = process(first + 1, first, 1000, "sh", &["sh", "-c", "vite"], dir);
    sh.exe = Some("/usr/bin/dash".into());
    add(s, sh);
    let mut vite = process(
        first + 2,
        first + 1,
        1000,
        "node",
        &["node", "/home/u/shop/node_modules/.bin/vite"],
        dir,
    );
    vite.exe = Some("/usr/bin/node".into());
    add(s, vite);
    let mut esbuild = process(
        first + 3,
        first + 2,
        1000,
        "esbuild",
        &[
            "/home/u/shop/node_modules/@esbuild/linux-x64/bin/esbuild",
            "--service=0.21.5",
        ],
        dir,
    );
    esbuild.exe = Some("/home/u/shop/node_modules/@esbuild/linux-x64/bin/esbuild".into());
    add(s, esbuild);
    listen(s, &format!("127.0.0.1:{port}"), first + 2);
}

/// A process of the current account that is not a dev server: `sleepd` on `port`.
pub(crate) fn add_plain(s: &mut Snapshot, pid: i32, ppid: i32, uid: u32, port: u16) {
    let mut p = process(
        pid,
        ppid,
        uid,
        "sleepd",
        &["/opt/sleepd/sleepd", "--serve"],
        "/",
    );
    p.exe = Some("/opt/sleepd/sleepd".into());
    add(s, p);
    listen(s, &format!("127.0.0.1:{port}"), pid);
}
