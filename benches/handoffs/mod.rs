//! Thread hand-offs per decision (issue 18), counted the way the kernel counts them: a thread
//! that blocks (on a pipe, a socket, a channel, a lock) and is woken again makes one voluntary
//! context switch, so the voluntary switches of every thread of the relay and of the daemon
//! over N sequential calls, divided by N, is how many times a call went to sleep and had to be
//! woken on its way. The demo server's own are the same direct or relayed and are counted
//! apart. Threads that exit inside the window (tokio's blocking pool) take their count with
//! them, so the figure is a floor of what was spent.

use std::collections::BTreeMap;
use std::path::Path;

/// The sum of `voluntary_ctxt_switches` over every live thread of `pid`.
pub(crate) fn voluntary_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// `voluntary_ctxt_switches` of `pid`'s live threads, summed by thread name (`comm`).
pub(crate) fn by_thread(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.filter_map(Result::ok) {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let n = std::fs::read_to_string(t.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .unwrap_or(0);
        *out.entry(name.trim().to_string()).or_insert(0) += n;
    }
    out
}

/// Per call, by thread name: what each named thread added between `before` and `after`,
/// most first, as `name 1.23`.
pub(crate) fn by_thread_per_call(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    calls: usize,
) -> String {
    let mut each: Vec<(f64, &str)> = after
        .iter()
        .map(|(name, a)| {
            let b = before.get(name).copied().unwrap_or(0);
            (
                a.saturating_sub(b) as f64 / calls.max(1) as f64,
                name.as_str(),
            )
        })
        .filter(|(n, _)| *n >= 0.01)
        .collect();
    each.sort_by(|x, y| y.0.total_cmp(&x.0));
    each.iter()
        .map(|(n, name)| format!("{name} {n:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pids of `pid`'s children (the relay's server), from `/proc/<pid>/task/*/children`.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Voluntary switches of each process in `pids` at one moment.
pub(crate) fn snapshot(pids: &[u32]) -> Vec<u64> {
    pids.iter().map(|&p| voluntary_switches(p)).collect()
}

/// Per call: (after − before) / calls for each process.
pub(crate) fn per_call(before: &[u64], after: &[u64], calls: usize) -> Vec<f64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.saturating_sub(*b) as f64 / calls.max(1) as f64)
        .collect()
}

/// True when `/proc` says how many switches a thread made (it does on Linux).
pub(crate) fn countable() -> bool {
    Path::new("/proc/self/task").exists() && voluntary_switches(std::process::id()) > 0
}
