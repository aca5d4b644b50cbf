//! Turns on the machine for the tests of every file, which share one test binary and so its
//! test threads. Each `Env` holds a shared turn for its life; a test that loads the machine on
//! purpose (CPU burners) takes it whole with `alone()`, which waits until no other test holds an
//! `Env` and keeps new ones waiting, so its load never pushes another test past a deadline
//! (when each file was its own binary, cargo ran the binaries one after another and only the
//! file's own tests could meet the burners).
//!
//! Turns are counted per thread: a thread that already holds a turn (a test with two homes)
//! never waits for a test waiting to be alone (that would deadlock), and the thread that is
//! alone makes as many homes as it likes. A turn is given back by whichever thread drops it.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

#[derive(Default)]
struct State {
    /// How many shared turns each thread holds.
    shared: HashMap<ThreadId, usize>,
    /// The thread that has the machine to itself, if any.
    alone: Option<ThreadId>,
    /// The threads that wait to be alone: new turns wait for them.
    waiting_alone: HashSet<ThreadId>,
    /// The threads that wait for a shared turn (so a test can see one is waiting).
    waiting_shared: HashSet<ThreadId>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
static CHANGED: Condvar = Condvar::new();

/// The state, even after a test panicked while holding the lock (it only counts).
fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait(guard: MutexGuard<'static, Option<State>>) -> MutexGuard<'static, Option<State>> {
    CHANGED.wait(guard).unwrap_or_else(|e| e.into_inner())
}

/// A shared turn (held by an `Env`); none at all for the thread that is alone.
pub(super) struct Shared(Option<ThreadId>);

impl Shared {
    pub(super) fn take() -> Shared {
        let me = std::thread::current().id();
        let mut guard = state();
        loop {
            let s = guard.get_or_insert_with(State::default);
            if s.alone == Some(me) {
                return Shared(None);
            }
            let mine = s.shared.get(&me).copied().unwrap_or(0);
            if s.alone.is_none() && (mine > 0 || s.waiting_alone.is_empty()) {
                s.waiting_shared.remove(&me);
                s.shared.insert(me, mine + 1);
                return Shared(Some(me));
            }
            if s.waiting_shared.insert(me) {
                CHANGED.notify_all();
            }
            guard = wait(guard);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some(owner) = self.0 else { return };
        let mut guard = state();
        if let Some(s) = guard.as_mut()
            && let Some(n) = s.shared.get_mut(&owner)
        {
            *n -= 1;
            if *n == 0 {
                s.shared.remove(&owner);
            }
        }
        CHANGED.notify_all();
    }
}

/// The machine to this test alone until dropped: waits for every other test's `Env` to be
/// dropped. Take it before making any `Env` of this test.
pub(crate) struct Alone(ThreadId);

pub(crate) fn alone() -> Alone {
    let me = std::thread::current().id();
    let mut guard = state();
    let s = guard.get_or_insert_with(State::default);
    assert!(
        !s.shared.contains_key(&me),
        "take alone() before making an Env: this test would wait for itself"
    );
    s.waiting_alone.insert(me);
    CHANGED.notify_all();
    loop {
        let s = guard.get_or_insert_with(State::default);
        if s.alone.is_none() && s.shared.is_empty() {
            s.waiting_alone.remove(&me);
            s.alone = Some(me);
            return Alone(me);
        }
        guard = wait(guard);
    }
}

impl Drop for Alone {
    fn drop(&mut self) {
        let mut guard = state();
        if let Some(s) = guard.as_mut()
            && s.alone == Some(self.0)
        {
            s.alone = None;
        }
        CHANGED.notify_all();
    }
}

/// Waits until the turns' state shows `what` (each change of it is signalled), failing after
/// `PATIENCE`.
fn until(what: &str, holds: impl Fn(&State) -> bool) {
    let deadline = std::time::Instant::now() + super::PATIENCE;
    let mut guard = state();
    while !guard.as_ref().is_some_and(&holds) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "never: {what}");
        guard = CHANGED
            .wait_timeout(guard, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

#[test]
fn alone_waits_for_every_turn_and_holds_new_ones_back_but_not_a_second_one_of_a_holder() {
    use std::sync::mpsc::channel;
    let patience = super::PATIENCE;
    let mine = Shared::take();
    let (got_alone, alone_now) = channel();
    let (release, released) = channel::<()>();
    let loner = std::thread::spawn(move || {
        let turn = alone();
        got_alone.send(()).unwrap();
        released.recv().unwrap();
        drop(turn);
    });
    let loner_id = loner.thread().id();
    until("alone() waits", |s| s.waiting_alone.contains(&loner_id));
    assert!(
        alone_now.try_recv().is_err(),
        "alone() did not wait for a turn held"
    );
    let (got_shared, shared_now) = channel();
    let newcomer = std::thread::spawn(move || {
        let turn = Shared::take();
        got_shared.send(()).unwrap();
        drop(turn);
    });
    let newcomer_id = newcomer.thread().id();
    until("the new turn waits", |s| {
        s.waiting_shared.contains(&newcomer_id)
    });
    assert!(
        shared_now.try_recv().is_err(),
        "a new turn did not wait for alone()"
    );
    // A thread that holds a turn gets a second one at once (a test with two homes).
    let second = Shared::take();
    drop((mine, second));
    alone_now
        .recv_timeout(patience)
        .expect("alone() once no turn is held");
    // The newcomer was waiting before the loner became alone, and cannot get a turn while it is.
    assert!(
        shared_now.try_recv().is_err(),
        "a new turn while a test is alone"
    );
    release.send(()).unwrap();
    shared_now
        .recv_timeout(patience)
        .expect("a turn once alone() is dropped");
    loner.join().unwrap();
    newcomer.join().unwrap();
}
