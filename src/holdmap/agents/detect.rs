//! Who the agents are: each process recognised as an agent product (by its executable and
//! process tree, never by a name it chose for itself), the topmost process of a product as the
//! agent and the same product below it as its helper, and every other process owned by its
//! nearest agent ancestor. A nested agent (Claude Code in Cursor's terminal) is its own agent
//! with the outer one as its parent.
//!
//! Recognition, in order: an install-path fragment or app bundle in the executable's path
//! (`catalog::by_path`), the executable's basename (`catalog::by_name`), then for a runtime
//! (node, bun, deno, python) the entry script's path or basename, or the python module
//! (`entry::entry`). `argv[0]` stands in for the executable only when the executable cannot be
//! read (another account's process).
//!
//! Must never: recognise an agent by `comm` or `argv[0]` when its executable says otherwise;
//! treat a flag's value or inline code as an entry script; fold two accounts' processes into
//! one agent.

use std::collections::BTreeMap;
use std::path::Path;

use crate::holdmap::agents::catalog::{self, Product};
use crate::holdmap::agents::entry::{Entry, entry};
use crate::holdmap::framework::script_name;
use crate::holdmap::model::Snapshot;
use crate::os::procs::Proc;

/// One agent found in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) pid: i32,
    /// The product's id (`claude-code`, …): see `catalog` for the product table.
    pub(crate) product: &'static str,
    /// Every process it owns, itself included, sorted.
    pub(crate) members: Vec<i32>,
    /// The agent it runs inside, when nested.
    pub(crate) parent: Option<i32>,
}

/// The product `p` runs, if any. The executable decides when it can be read; only when it
/// cannot (another account's process) does `argv[0]` stand in for it.
pub(crate) fn product_of(p: &Proc) -> Option<&'static Product> {
    recognise(p).map(|(prod, _)| prod)
}

/// How a process was recognised, in words for `recognised_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    ExecutablePath,
    ExecutableName,
    EntryScript,
    EntryModule,
    /// The executable could not be read; `argv[0]` stood in (inferred, not observed).
    Argv0,
}

impl Signal {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Signal::ExecutablePath => "executable path",
            Signal::ExecutableName => "executable name",
            Signal::EntryScript => "runtime entry script",
            Signal::EntryModule => "runtime entry module",
            Signal::Argv0 => "argv[0] (executable unreadable)",
        }
    }
}

/// The product `p` runs and the signal that said so.
pub(crate) fn recognise(p: &Proc) -> Option<(&'static Product, Signal)> {
    let exe = p.exe.as_deref().and_then(Path::to_str);
    let (image, readable) = match exe {
        Some(e) => (e, true),
        None => (p.argv.first()?.as_str(), false),
    };
    // The kernel marks a replaced executable "(deleted)" (an agent upgraded while running).
    let image = image.strip_suffix(" (deleted)").unwrap_or(image);
    let direct = |s: Signal| if readable { s } else { Signal::Argv0 };
    if let Some(prod) = catalog::by_path(image) {
        return Some((prod, direct(Signal::ExecutablePath)));
    }
    if let Some(prod) = catalog::by_name(script_name(image)) {
        return Some((prod, direct(Signal::ExecutableName)));
    }
    let found = match entry(&p.argv, script_name(image))? {
        Entry::Script(script) => catalog::by_path(script)
            .or_else(|| catalog::by_entry(script_name(script)))
            .map(|prod| (prod, Signal::EntryScript)),
        Entry::Module(module) => {
            let top = module.split('.').next().unwrap_or(module);
            catalog::by_entry(top).map(|prod| (prod, Signal::EntryModule))
        }
    };
    found.map(|(prod, s)| (prod, direct(s)))
}

/// Every agent of the snapshot, in pid order.
pub(crate) fn agents(snap: &Snapshot) -> Vec<Found> {
    let recognised: BTreeMap<i32, &'static Product> = snap
        .procs
        .values()
        .filter(|p| !p.is_zombie())
        .filter_map(|p| product_of(p).map(|prod| (p.pid, prod)))
        .collect();
    // A root: no ancestor runs the same product (then it is that ancestor's helper).
    let roots: Vec<(i32, &'static Product)> = recognised
        .iter()
        .filter(|&(&pid, prod)| {
            !snap
                .ancestors(pid)
                .iter()
                .any(|a| recognised.get(a).is_some_and(|ap| ap.id == prod.id))
        })
        .map(|(&pid, &prod)| (pid, prod))
        .collect();
    // Each root's agent: itself, or for a folding kind the lowest-pid root of the same product
    // and the same (known) account.
    let mut agent_of_root: BTreeMap<i32, i32> = BTreeMap::new();
    for &(pid, prod) in &roots {
        let uid = snap.proc(pid).and_then(|p| p.uid);
        let rep = if prod.kind.folds() && uid.is_some() {
            roots
                .iter()
                .find(|&&(other, op)| {
                    op.id == prod.id && snap.proc(other).and_then(|p| p.uid) == uid
                })
                .map_or(pid, |&(other, _)| other)
        } else {
            pid
        };
        agent_of_root.insert(pid, rep);
    }
    let owner = |pid: i32| -> Option<i32> {
        std::iter::once(pid)
            .chain(snap.ancestors(pid))
            .find_map(|a| agent_of_root.get(&a).copied())
    };
    let mut members: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for &pid in snap.procs.keys() {
        if let Some(agent) = owner(pid) {
            members.entry(agent).or_default().push(pid);
        }
    }
    members
        .into_iter()
        .filter_map(|(pid, members)| {
            let product = recognised.get(&pid)?.id;
            // The nearest agent above any of its roots that is not itself.
            let parent = agent_of_root
                .iter()
                .filter(|&(_, &rep)| rep == pid)
                .find_map(|(&root, _)| {
                    snap.ancestors(root)
                        .into_iter()
                        .find_map(|a| agent_of_root.get(&a).copied())
                        .filter(|&outer| outer != pid)
                });
            Some(Found {
                pid,
                product,
                members,
                parent,
            })
        })
        .collect()
}
