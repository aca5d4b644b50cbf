//! Holdcall's benchmarks (`tools/bench`, or `cargo bench --profile perf --bench bench`).
//!
//! One run measures the floors — what the machine itself costs for a unix-socket round trip, a
//! SQLite WAL commit (synchronous NORMAL and FULL) and a raw 4 KiB append + fdatasync, on the
//! same disk as the journals — and then Holdcall's own figures, each printed beside the floor it
//! is bounded by, as a ratio, and beside its target with pass or miss. The table goes to stdout;
//! everything, with the machine and the command, to `<target dir>/bench/results.json`, which
//! `docs/benchmarks.md` quotes.
//!
//! Decisions are timed through the real daemon: peer verification admits only the `holdcall`
//! binary, so the timing client is its hidden `bench-decisions` command, which connects exactly
//! as a relay does. End-to-end figures drive real `holdcall serve` relays in front of
//! `holdcall demo-server`. Benchmarks are not tests: nothing here asserts a time.
//!
//! A benchmark that cannot measure should stop loudly rather than print a number it did not
//! measure, hence the unwraps and panics below (the crate denies them on production paths).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use holdcall::config::Durability;
use holdcall::config::Home;
use holdcall::journal::{self, Fields, Journal, Kind, NewPolicy};
use holdcall::policy::{self, CallRequest, Effect, PolicySet, Scope, StoredPolicy};
use holdcall::relay::classify;
use serde::Serialize;
use serde_json::{Value, json};

mod handoffs;
mod holdmap_ports;
mod leak;

// ---------------------------------------------------------------------------------------------
// Sizes of the run (each divided by `QUICK_DIVISOR` with --quick, for trying the harness out)
// ---------------------------------------------------------------------------------------------

/// Timed decisions per daemon configuration (the brief asks for at least 10,000).
const DECISIONS: usize = 10_000;
/// Concurrent relays for the group-commit figure.
const CONCURRENT_RELAYS: usize = 16;
/// Untimed decisions per relay before timing, so the daemon's caches and the WAL are warm.
const DECISION_WARMUP: usize = 200;
/// Rule counts the decision path is timed with.
const RULE_COUNTS: [usize; 4] = [10, 100, 1_000, 10_000];
/// Timed round trips per floor that costs microseconds.
const FAST_FLOOR_SAMPLES: usize = 20_000;
/// Timed commits or syncs per floor that waits for the disk.
const SYNC_FLOOR_SAMPLES: usize = 3_000;
/// Bytes of the row each SQLite floor commit inserts: about one journal entry.
const FLOOR_ROW_BYTES: usize = 300;
/// Bytes each raw-append floor write appends before its fdatasync.
const APPEND_BYTES: usize = 4096;
/// Timed `PolicySet::decide` calls per rule count.
const POLICY_EVALS: usize = 20_000;
/// Timed evaluations of the set no index can help (each costs milliseconds).
const POLICY_EVALS_UNINDEXABLE: usize = 200;
/// Bytes classified per framing figure (about 1 GiB, so a figure is a second's work).
const FRAMING_BYTES: usize = 1 << 30;
/// End-to-end calls timed, relayed and direct (the brief asks for at least 1,000).
const E2E_CALLS: usize = 2_000;
/// Untimed calls before the end-to-end timing.
const E2E_WARMUP: usize = 100;
/// Size of each passthrough frame, newline included.
const FRAME_BYTES: usize = 512 * 1024;
/// Frames per passthrough direction.
const FRAMES: usize = 400;
/// Relay starts timed per configuration.
const RELAY_STARTS: usize = 40;
/// Tools in the listing benchmark's `tools/list` answer.
const LISTED_TOOLS: usize = 200;
/// Listings timed per case, after one untimed (the first pins every tool).
const LISTINGS: usize = 400;
/// Entries in the journal `holdcall verify` walks.
const VERIFY_ENTRIES: usize = 1_000_000;
/// Entries per generator transaction.
const VERIFY_BATCH: usize = 10_000;
/// What --quick divides the counts by.
const QUICK_DIVISOR: usize = 20;

// ---------------------------------------------------------------------------------------------
// Targets (issue 3)
// ---------------------------------------------------------------------------------------------

/// Decision round trip p99 with durability = process (µs).
const TARGET_PROCESS_P99_US: f64 = 50.0;
/// Decision round trip p99 with durability = power, as a multiple of the raw fdatasync p99.
const TARGET_POWER_P99_VS_FDATASYNC: f64 = 1.3;
/// Power-safe decisions per second with 16 relays.
const TARGET_POWER_DECISIONS_PER_S: f64 = 5_000.0;
/// Policy evaluation itself with 10,000 rules, p99 (µs).
const TARGET_POLICY_10K_P99_US: f64 = 20.0;
/// Latency the relay adds to a call, p50 (ms).
const TARGET_ADDED_P50_MS: f64 = 0.1;
/// `classify::classify_client_line` throughput (GB/s, 10^9 bytes).
const TARGET_FRAMING_GBPS: f64 = 1.0;
/// `holdcall verify` speed (entries/s).
const TARGET_VERIFY_PER_S: f64 = 1_000_000.0;
/// Relay start to first forwarded byte (ms).
const TARGET_RELAY_START_MS: f64 = 10.0;
/// Relay peak RSS (MiB).
const TARGET_RELAY_RSS_MIB: f64 = 8.0;

// Issue 18: the decision path against its floors, each a ratio measured in the same run.

/// The section of the table that holds issue 18's ratios not already on another row.
const S18: &str = "issue 18: ratios against floors of the same run";
/// Added end-to-end latency p50 (process), as a multiple of its floor: 2 × the direct call's
/// p50 + socket round trip p50 + WAL NORMAL commit p50 + `decide` (10 rules) p50.
const T18_ADDED_P50_VS_FLOOR: f64 = 2.0;
/// The same at p99, against the same floor built from p99s.
const T18_ADDED_P99_VS_FLOOR: f64 = 3.0;
/// Power-durability decision p99 as a multiple of the raw fdatasync p99.
const T18_POWER_P99_VS_FDATASYNC: f64 = 1.5;
/// `decide` with 10 rules, p50, as a multiple of one Cedar `is_authorized` over a one-policy set.
const T18_DECIDE_VS_ONE_CALL: f64 = 3.0;
/// Passthrough of 512 KiB frames, relayed over direct, each direction.
const T18_PASSTHROUGH_VS_DIRECT: f64 = 0.9;
/// Sequential calls whose thread hand-offs are counted (after the timed ones, so reading
/// `/proc` does not touch the timings).
const HANDOFF_CALLS: usize = 500;

fn ratio_row(
    name: impl Into<String>,
    value: f64,
    floor_name: &str,
    floor: f64,
    unit: &'static str,
) -> Row {
    Row::value(S18, name, unit, value).floor(floor_name.to_string(), floor)
}

// ---------------------------------------------------------------------------------------------
// Statistics and rows
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Serialize)]
struct Stats {
    n: usize,
    p50: f64,
    p95: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

/// Percentiles (nearest rank) of samples in nanoseconds, reported in `unit_ns` units.
fn stats(samples: &mut [u64], unit_ns: f64) -> Stats {
    samples.sort_unstable();
    let n = samples.len();
    let at = |q: f64| {
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        samples[rank - 1] as f64 / unit_ns
    };
    let sum: f64 = samples.iter().map(|&s| s as f64).sum();
    Stats {
        n,
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: samples[n - 1] as f64 / unit_ns,
        mean: sum / n as f64 / unit_ns,
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
struct Row {
    section: &'static str,
    name: String,
    unit: &'static str,
    /// Latency rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<Stats>,
    /// Throughput, size or count rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    /// The floor this figure is bounded by, measured in this run, in the same unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    floor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_value: Option<f64>,
    /// The figure divided by its floor (p99 against p99 for latencies).
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    met: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl Row {
    fn latency(
        section: &'static str,
        name: impl Into<String>,
        unit: &'static str,
        s: Stats,
    ) -> Row {
        Row {
            section,
            name: name.into(),
            unit,
            stats: Some(s),
            value: None,
            floor: None,
            floor_value: None,
            ratio: None,
            target: None,
            met: None,
            note: None,
        }
    }

    fn value(section: &'static str, name: impl Into<String>, unit: &'static str, v: f64) -> Row {
        Row {
            stats: None,
            value: Some(v),
            ..Row::latency(
                section,
                name,
                unit,
                Stats {
                    n: 0,
                    p50: 0.0,
                    p95: 0.0,
                    p99: 0.0,
                    max: 0.0,
                    mean: 0.0,
                },
            )
        }
    }

    /// The figure compared with floors and targets: p99 for latencies, else the value.
    fn figure(&self) -> f64 {
        match (&self.stats, self.value) {
            (Some(s), _) => s.p99,
            (None, Some(v)) => v,
            _ => f64::NAN,
        }
    }

    fn floor(mut self, name: impl Into<String>, value: f64) -> Row {
        self.ratio = Some(self.figure() / value);
        self.floor = Some(name.into());
        self.floor_value = Some(value);
        self
    }

    fn target(mut self, text: impl Into<String>, met: bool) -> Row {
        self.target = Some(text.into());
        self.met = Some(met);
        self
    }

    fn note(mut self, text: impl Into<String>) -> Row {
        self.note = Some(text.into());
        self
    }
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn print_table(rows: &[Row]) {
    let mut section = "";
    println!(
        "{:<58} {:>26} {:>11} {:>8}  target",
        "measurement", "figure (p50 / p95 / p99)", "floor", "x floor"
    );
    for r in rows {
        if r.section != section {
            section = r.section;
            println!("\n== {section}");
        }
        let figure = match (&r.stats, r.value) {
            (Some(s), _) => format!(
                "{} / {} / {} {}",
                fmt_num(s.p50),
                fmt_num(s.p95),
                fmt_num(s.p99),
                r.unit
            ),
            (None, Some(v)) => format!("{} {}", fmt_num(v), r.unit),
            _ => "-".into(),
        };
        let floor = r.floor_value.map(fmt_num).unwrap_or_else(|| "-".into());
        let ratio = r
            .ratio
            .map(|x| format!("{x:.2}x"))
            .unwrap_or_else(|| "-".into());
        let target = match (&r.target, r.met) {
            (Some(t), Some(true)) => format!("{t}: pass"),
            (Some(t), Some(false)) => format!("{t}: MISS"),
            _ => String::new(),
        };
        println!(
            "{:<58} {:>26} {:>11} {:>8}  {}",
            r.name, figure, floor, ratio, target
        );
        if let Some(f) = &r.floor {
            println!("{:<58}   floor: {f}", "");
        }
        if let Some(n) = &r.note {
            println!("{:<58}   note: {n}", "");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The machine
// ---------------------------------------------------------------------------------------------

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The block device holding `dir`, from /proc/mounts, and what sysfs says about it.
fn disk_of(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mounts = read("/proc/mounts");
    let best = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && dir.starts_with(f[1])).then(|| (f[0], f[1], f[2]))
        })
        .max_by_key(|(_, mount, _)| mount.len());
    let Some((dev, mount, fs)) = best else {
        return "unknown".into();
    };
    let name = dev.trim_start_matches("/dev/");
    let sys = format!("/sys/block/{name}");
    let rotational = read(&format!("{sys}/queue/rotational"));
    // What the guest is told; a virtual disk says nothing true about its backing store.
    let kind = match rotational.trim() {
        "" => "queue/rotational unknown".to_string(),
        r => format!("queue/rotational={r}"),
    };
    let model = read(&format!("{sys}/device/model"));
    let driver = std::fs::read_link(format!("{sys}/device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let size_gib = read(&format!("{sys}/size"))
        .trim()
        .parse::<f64>()
        .map(|sectors| sectors * 512.0 / (1u64 << 30) as f64)
        .unwrap_or(0.0);
    format!(
        "{dev} ({}{kind}, {size_gib:.0} GiB{}) mounted at {mount} ({fs})",
        if driver.is_empty() {
            String::new()
        } else {
            format!("{driver}, ")
        },
        if model.trim().is_empty() {
            String::new()
        } else {
            format!(", model {}", model.trim())
        }
    )
}

fn machine(work: &Path, build_seconds: Option<f64>, rustc: &str) -> Value {
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let mem_gib = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kib| kib / (1u64 << 20) as f64)
        .unwrap_or(0.0);
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "memory_gib": (mem_gib * 10.0).round() / 10.0,
        "disk": disk_of(work),
        "rustc": rustc,
        "build_seconds": build_seconds,
    })
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// The run's paths and the binary under test.
struct Bench {
    holdcall: PathBuf,
    /// Homes, databases and floor files: on the disk the journal would use.
    work: tempfile::TempDir,
    /// XDG_RUNTIME_DIR for every command: short, so socket paths fit.
    run: tempfile::TempDir,
    quick: bool,
    homes: std::cell::RefCell<Vec<PathBuf>>,
}

impl Bench {
    fn n(&self, full: usize) -> usize {
        if self.quick {
            (full / QUICK_DIVISOR).max(1)
        } else {
            full
        }
    }

    fn cmd(&self, home: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.holdcall);
        c.args(args)
            .env("HOLDCALL_HOME", home)
            .env("XDG_RUNTIME_DIR", self.run.path())
            .env_remove("HOLDCALL_LOG")
            .stdin(Stdio::null());
        c
    }

    fn ok(&self, home: &Path, args: &[&str]) -> String {
        let out = self.cmd(home, args).output().unwrap();
        assert!(
            out.status.success(),
            "holdcall {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A fresh home with this durability and `rules` rules, seeded through the journal API (as
    /// `holdcall policy` would leave them, without 10,000 round trips), and its daemon running.
    fn home_with_daemon(&self, name: &str, durability: Durability, rules: &[Rule]) -> PathBuf {
        let dir = self.work.path().join(name);
        let home = Home::at(dir.clone());
        home.prepare().unwrap();
        let word = match durability {
            Durability::Power => "power",
            Durability::Process => "process",
        };
        std::fs::write(
            home.config_path(),
            format!("[journal]\ndurability = \"{word}\"\n"),
        )
        .unwrap();
        let machine_id = journal::load_or_create_machine_id(&home.machine_id_path(), true).unwrap();
        let mut j = Journal::open(&home.db_path(), &machine_id, durability).unwrap();
        if !rules.is_empty() {
            let first = j.next_policy_seq().unwrap();
            let add: Vec<NewPolicy> = rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let seq = first + i as i64;
                    let id = format!("rule-{seq}");
                    NewPolicy {
                        seq,
                        text: policy::cli_rule_text(&id, r.effect, &r.scope),
                        id,
                        source: "cli".into(),
                        effect: r.effect.as_str().into(),
                        specificity: policy::specificity_of_scope(&r.scope),
                        tool: r.scope.tool.clone(),
                        agent: r.scope.agent.clone(),
                        connector: r.scope.connector.clone(),
                    }
                })
                .collect();
            // The entry carries the diff of the policy text, as the daemon writes it: a daemon
            // checks its tables against the journal's diffs and refuses every call otherwise.
            let stored: Vec<StoredPolicy> = add
                .iter()
                .map(|p| StoredPolicy {
                    seq: p.seq,
                    id: p.id.clone(),
                    text: p.text.clone(),
                })
                .collect();
            let before = PolicySet::compile(&[]).unwrap().text();
            let after = PolicySet::compile(&stored).unwrap().text();
            j.change_policies(
                add,
                vec![],
                Fields {
                    reason: Some(format!("{} benchmark rules", rules.len())),
                    detail: Some(policy::unified_diff(
                        &before,
                        &after,
                        "policy before",
                        "policy after",
                    )),
                    ..Fields::default()
                },
            )
            .unwrap();
        }
        drop(j);
        self.homes.borrow_mut().push(dir.clone());
        self.ok(&dir, &["daemon", "start"]);
        dir
    }

    fn stop(&self, home: &Path) {
        let _ = self.cmd(home, &["daemon", "stop"]).output();
    }

    fn daemon_pid(&self, home: &Path) -> i32 {
        let s = self.ok(home, &["daemon", "status"]);
        let rest = s.split("pid ").nth(1).expect("daemon status names a pid");
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    fn bench_decisions(&self, home: &Path, relays: usize, calls: usize, tool: &str) -> Value {
        let out = self.ok(
            home,
            &[
                "bench-decisions",
                "--json",
                "--relays",
                &relays.to_string(),
                "--calls",
                &calls.to_string(),
                "--warmup",
                &self.n(DECISION_WARMUP).to_string(),
                "--connector",
                CONNECTOR,
                "--tool",
                tool,
            ],
        );
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["undecided"], 0, "{v}");
        v
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for home in self.homes.borrow().iter() {
            self.stop(home);
        }
    }
}

/// A /proc/<pid>/status figure in KiB (VmRSS, VmHWM).
fn proc_kib(pid: u32, key: &str) -> Option<f64> {
    read(&format!("/proc/{pid}/status"))
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
}

fn mib(kib: f64) -> f64 {
    kib / 1024.0
}

// ---------------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------------

/// The connector every timed session uses.
const CONNECTOR: &str = "bench";
/// The tool the allow path calls; `DENIED_TOOL` is refused by rule.
const ALLOWED_TOOL: &str = "echo";
const DENIED_TOOL: &str = "delete_file";

#[derive(Debug, Clone)]
struct Rule {
    effect: Effect,
    scope: Scope,
}

fn rule(effect: Effect, tool: Option<&str>, agent: Option<&str>, connector: Option<&str>) -> Rule {
    Rule {
        effect,
        scope: Scope {
            tool: tool.map(str::to_string),
            agent: agent.map(str::to_string),
            connector: connector.map(str::to_string),
        },
    }
}

/// `n` rules of the shapes `holdcall policy` makes. Six touch the timed calls (one in each
/// bucket a call can hit, so every bucket is evaluated); the rest name other tools, connectors
/// and agents, spread over every scope form, as a large imported rule set would.
fn rules(n: usize) -> Vec<Rule> {
    let mut out = vec![
        rule(Effect::Allow, Some(ALLOWED_TOOL), None, Some(CONNECTOR)),
        rule(Effect::Deny, Some(DENIED_TOOL), None, Some(CONNECTOR)),
        rule(Effect::Ask, Some(DENIED_TOOL), None, None),
        rule(Effect::Allow, None, None, Some(CONNECTOR)),
        rule(Effect::Deny, None, Some("intruder"), None),
        rule(
            Effect::Deny,
            Some(ALLOWED_TOOL),
            Some("intruder"),
            Some(CONNECTOR),
        ),
    ];
    let mut i = out.len();
    while out.len() < n {
        let (t, c, a) = (
            format!("tool{i}"),
            format!("conn{}", i % 97),
            format!("agent{}", i % 13),
        );
        out.push(match i % 4 {
            0 => rule(Effect::Allow, Some(&t), None, Some(&c)),
            1 => rule(Effect::Deny, Some(&t), None, None),
            2 => rule(Effect::Ask, None, None, Some(&format!("conn{i}"))),
            _ => rule(Effect::Ask, Some(&t), Some(&a), Some(&c)),
        });
        i += 1;
    }
    out.truncate(n);
    out
}

fn stored(rules: &[Rule]) -> Vec<StoredPolicy> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let id = format!("rule-{}", i + 1);
            StoredPolicy {
                seq: i as i64 + 1,
                text: policy::cli_rule_text(&id, r.effect, &r.scope),
                id,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Floors
// ---------------------------------------------------------------------------------------------

struct Floors {
    socket_rt: Stats,
    wal_normal: Stats,
    wal_full: Stats,
    fdatasync: Stats,
}

/// A small line ping-ponged over a unix socketpair between two threads (µs).
fn floor_socket(samples: usize) -> Stats {
    let (a, b) = UnixStream::pair().unwrap();
    let echo = std::thread::spawn(move || {
        let mut w = b.try_clone().unwrap();
        let mut r = BufReader::new(b);
        let mut line = Vec::new();
        loop {
            line.clear();
            if r.read_until(b'\n', &mut line).unwrap() == 0 {
                return;
            }
            w.write_all(&line).unwrap();
        }
    });
    let msg = b"{\"kind\":\"call.request\",\"session_id\":\"0123456789abcdef0123456789abcdef\",\"seq\":1}\n";
    let mut w = a.try_clone().unwrap();
    let mut r = BufReader::new(a);
    let mut line = Vec::new();
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let t0 = Instant::now();
        w.write_all(msg).unwrap();
        line.clear();
        r.read_until(b'\n', &mut line).unwrap();
        if i >= samples / 10 {
            out.push(ns(t0.elapsed()));
        }
    }
    drop(w);
    drop(r);
    echo.join().unwrap();
    stats(&mut out, 1_000.0)
}

/// One small row per `BEGIN IMMEDIATE … COMMIT`, WAL, with this synchronous level (µs).
fn floor_sqlite(dir: &Path, synchronous: &str, samples: usize) -> Stats {
    let path = dir.join(format!("floor-{synchronous}.db"));
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "synchronous", synchronous)
        .unwrap();
    conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        .unwrap();
    let row = vec![b'x'; FLOOR_ROW_BYTES];
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let t0 = Instant::now();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        tx.execute("INSERT INTO t(v) VALUES (?1)", [&row]).unwrap();
        tx.commit().unwrap();
        if i >= samples / 10 {
            out.push(ns(t0.elapsed()));
        }
    }
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    stats(&mut out, 1_000.0)
}

/// 4 KiB appended, then fdatasync, on the journal's disk (µs).
fn floor_fdatasync(dir: &Path, samples: usize) -> Stats {
    let path = dir.join("floor-append.bin");
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let block = vec![b'x'; APPEND_BYTES];
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let t0 = Instant::now();
        f.write_all(&block).unwrap();
        f.sync_data().unwrap();
        if i >= samples / 10 {
            out.push(ns(t0.elapsed()));
        }
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    stats(&mut out, 1_000.0)
}

fn floors(b: &Bench, rows: &mut Vec<Row>) -> Floors {
    eprintln!("bench: floors");
    let dir = b.work.path();
    let f = Floors {
        socket_rt: floor_socket(b.n(FAST_FLOOR_SAMPLES)),
        wal_normal: floor_sqlite(dir, "NORMAL", b.n(FAST_FLOOR_SAMPLES)),
        wal_full: floor_sqlite(dir, "FULL", b.n(SYNC_FLOOR_SAMPLES)),
        fdatasync: floor_fdatasync(dir, b.n(SYNC_FLOOR_SAMPLES)),
    };
    let s = "floors (this machine, this run)";
    rows.push(Row::latency(
        s,
        "unix socketpair round trip, one small line",
        "µs",
        f.socket_rt,
    ));
    rows.push(Row::latency(
        s,
        "SQLite WAL commit, one row, synchronous=NORMAL",
        "µs",
        f.wal_normal,
    ));
    rows.push(Row::latency(
        s,
        "SQLite WAL commit, one row, synchronous=FULL",
        "µs",
        f.wal_full,
    ));
    rows.push(Row::latency(
        s,
        "raw 4 KiB append + fdatasync",
        "µs",
        f.fdatasync,
    ));
    f
}

/// `Journal::append`, one entry per commit, in process: the commit every decision waits for,
/// without the socket or the daemon (µs).
fn journal_append(b: &Bench, f: &Floors, rows: &mut Vec<Row>) {
    eprintln!("bench: journal append");
    let s = "journal append (Journal::append, one call.request entry per commit, in process)";
    for (durability, word, floor_name, floor, samples) in [
        (
            Durability::Process,
            "process",
            "SQLite WAL commit, synchronous=NORMAL, p99",
            f.wal_normal.p99,
            FAST_FLOOR_SAMPLES,
        ),
        (
            Durability::Power,
            "power",
            "SQLite WAL commit, synchronous=FULL, p99",
            f.wal_full.p99,
            SYNC_FLOOR_SAMPLES,
        ),
    ] {
        let dir = b.work.path().join(format!("append-{word}"));
        let home = Home::at(dir);
        home.prepare().unwrap();
        let machine_id = journal::load_or_create_machine_id(&home.machine_id_path(), true).unwrap();
        let mut j = Journal::open(&home.db_path(), &machine_id, durability).unwrap();
        let samples = b.n(samples);
        let mut out = Vec::with_capacity(samples);
        for i in 0..samples + samples / 10 {
            let fields = call_fields(i as i64 + 1);
            let t0 = Instant::now();
            j.append(Kind::CallRequest, fields).unwrap();
            if i >= samples / 10 {
                out.push(ns(t0.elapsed()));
            }
        }
        rows.push(
            Row::latency(s, format!("durability={word}"), "µs", stats(&mut out, 1_000.0))
                .floor(floor_name, floor)
                .note("three pages per commit (the row and two indexes), the head read back in the transaction, SHA-256 of the entry"),
        );
    }
}

/// The fields of a typical `call.request` entry.
fn call_fields(seq: i64) -> Fields {
    let deny = seq % 10 == 0;
    Fields {
        session_id: Some("0123456789abcdef0123456789abcdef".into()),
        seq: Some(seq),
        connector: Some(CONNECTOR.into()),
        tool: Some(if deny { DENIED_TOOL } else { ALLOWED_TOOL }.into()),
        args_digest: Some(classify::args_digest(Some(br#"{"text":"hello"}"#))),
        decision: Some(if deny { "deny" } else { "allow" }.into()),
        policy_id: Some(if deny { "rule-2" } else { "rule-1" }.into()),
        reason: Some(
            "rule rule-1 (allow tool echo for every agent on connector bench) is the most specific of 2 matching rules"
                .into(),
        ),
        ..Fields::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Policy evaluation and framing (in process)
// ---------------------------------------------------------------------------------------------

fn time_decide(set: &PolicySet, req: &CallRequest<'_>, want: Effect, evals: usize) -> Stats {
    for _ in 0..evals / 10 {
        std::hint::black_box(set.decide(req));
    }
    let mut out = Vec::with_capacity(evals);
    for _ in 0..evals {
        let t0 = Instant::now();
        let d = set.decide(std::hint::black_box(req));
        out.push(ns(t0.elapsed()));
        assert_eq!(d.effect, want, "{}", d.reason);
    }
    stats(&mut out, 1_000.0)
}

/// One Cedar `is_authorized` over a set of one policy that matches, the request and entities
/// built once (µs): what `decide` can cost at the very least.
fn time_one_is_authorized(evals: usize) -> Stats {
    use cedar_policy::{Authorizer, Context, Entities, EntityUid, PolicySet as CedarSet, Request};
    let set: CedarSet = r#"permit(principal, action, resource == Tool::"bench/echo");"#
        .parse()
        .unwrap();
    let uid = |t: &str| -> EntityUid { t.parse().unwrap() };
    let request = Request::new(
        uid(r#"Agent::"""#),
        uid(r#"Action::"call""#),
        uid(r#"Tool::"bench/echo""#),
        Context::empty(),
        None,
    )
    .unwrap();
    let entities = Entities::empty();
    let authorizer = Authorizer::new();
    for _ in 0..evals / 10 {
        std::hint::black_box(authorizer.is_authorized(&request, &set, &entities));
    }
    let mut out = Vec::with_capacity(evals);
    for _ in 0..evals {
        let t0 = Instant::now();
        let r = authorizer.is_authorized(std::hint::black_box(&request), &set, &entities);
        out.push(ns(t0.elapsed()));
        assert_eq!(r.decision(), cedar_policy::Decision::Allow);
    }
    stats(&mut out, 1_000.0)
}

/// Times `PolicySet::decide`; returns its 10-rule allow path (µs) for the end-to-end floor.
fn policy_eval(b: &Bench, rows: &mut Vec<Row>, t18: &mut Vec<Row>) -> Stats {
    eprintln!("bench: policy evaluation");
    let one = time_one_is_authorized(b.n(POLICY_EVALS));
    rows.push(Row::latency(
        "policy evaluation (PolicySet::decide, in process; permits and forbids of each group a call can hit)",
        "floor: one Cedar is_authorized, a one-policy set, request and entities built once",
        "µs",
        one,
    ));
    let mut decide10 = one;
    let s = "policy evaluation (PolicySet::decide, in process; permits and forbids of each group a call can hit)";
    let allow = CallRequest {
        agent: None,
        connector: CONNECTOR,
        tool: ALLOWED_TOOL,
    };
    let deny = CallRequest {
        tool: DENIED_TOOL,
        ..allow
    };
    for n in RULE_COUNTS {
        let policies = stored(&rules(n));
        let t0 = Instant::now();
        let set = PolicySet::compile(&policies).unwrap();
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        for (path, req, want) in [
            ("allow", &allow, Effect::Allow),
            ("deny", &deny, Effect::Deny),
        ] {
            let st = time_decide(&set, req, want, b.n(POLICY_EVALS));
            if n == RULE_COUNTS[0] && path == "allow" {
                decide10 = st;
                t18.push(
                    ratio_row(
                        format!("decide, {n} rules, allow path, p50"),
                        st.p50,
                        "one is_authorized over a one-policy set, p50",
                        one.p50,
                        "µs",
                    )
                    .target(
                        format!("≤ {T18_DECIDE_VS_ONE_CALL}x its floor"),
                        st.p50 <= T18_DECIDE_VS_ONE_CALL * one.p50,
                    ),
                );
            }
            let mut row = Row::latency(s, format!("{n} rules, {path} path"), "µs", st);
            if n == 10_000 {
                row = row.target(
                    format!("p99 ≤ {TARGET_POLICY_10K_P99_US} µs"),
                    st.p99 <= TARGET_POLICY_10K_P99_US,
                );
            }
            if path == "allow" {
                row = row.note(format!(
                    "compiling and validating the set took {compile_ms:.0} ms"
                ));
            }
            rows.push(row);
        }
    }
    // What the index cannot help: rules that differ only by agent all sit in the global bucket.
    let n = 10_000;
    let unindexable: Vec<Rule> = (0..n)
        .map(|i| rule(Effect::Deny, None, Some(&format!("agent{i}")), None))
        .collect();
    let set = PolicySet::compile(&stored(&unindexable)).unwrap();
    let st = time_decide(
        &set,
        &allow,
        Effect::Allow,
        b.n(POLICY_EVALS_UNINDEXABLE).max(20),
    );
    rows.push(
        Row::latency(
            s,
            format!("{n} agent-scoped defaults (all in the global bucket)"),
            "µs",
            st,
        )
        .note("no target: the resource index cannot narrow rules that differ only by agent"),
    );
    decide10
}

/// Text with an escape every 14 bytes or so: quotes, newlines, tabs and a `\u` escape.
const DENSE_TEXT: &[u8] =
    br#"Lorem ipsum dolor sit amet, \"quoted\" text\n with a tab\t and caf\u00e9. "#;
/// Prose without escapes: long runs the scanner's fast path skips.
const PLAIN_TEXT: &[u8] =
    b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ";

/// A tools/call line of exactly `bytes` bytes (newline included) whose `content` argument
/// repeats `pattern`.
fn call_line(bytes: usize, pattern: &[u8]) -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/bench.txt","content":""#;
    let tail = b"\"}}}\n";
    let mut line = head.to_vec();
    let room = bytes - head.len() - tail.len();
    while line.len() + pattern.len() <= head.len() + room {
        line.extend_from_slice(pattern);
    }
    line.resize(head.len() + room, b'x');
    line.extend_from_slice(tail);
    assert_eq!(line.len(), bytes);
    line
}

/// A notification line of exactly `bytes` bytes: forwarded, never decided.
fn notification_line(bytes: usize) -> Vec<u8> {
    let head =
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":""#;
    let tail = b"\"}}\n";
    let mut line = head.to_vec();
    line.resize(bytes - tail.len(), b'y');
    line.extend_from_slice(tail);
    line
}

/// Bytes per second (10^9 = 1 GB/s) classifying `line` until `total` bytes have been read.
fn time_classify(line: &[u8], total: usize, expect_call: bool) -> f64 {
    let rounds = (total / line.len()).max(1);
    let is_call = matches!(
        classify::classify_client_line(line),
        classify::ClientFrame::ToolCall(_)
    );
    assert_eq!(is_call, expect_call);
    let t0 = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(classify::classify_client_line(std::hint::black_box(line)));
    }
    (rounds * line.len()) as f64 / t0.elapsed().as_secs_f64()
}

/// The cheapest pass any scanner must make: look at every byte once (bytes/s).
fn time_byte_pass(line: &[u8], total: usize) -> f64 {
    let rounds = (total / line.len()).max(1);
    let t0 = Instant::now();
    for _ in 0..rounds {
        let l = std::hint::black_box(line);
        std::hint::black_box(l.iter().filter(|&&c| c == b'"' || c == b'\\').count());
    }
    (rounds * line.len()) as f64 / t0.elapsed().as_secs_f64()
}

fn framing(b: &Bench, rows: &mut Vec<Row>) {
    eprintln!("bench: framing");
    let s = "framing (frame::classify_client_line, in process)";
    let total = b.n(FRAMING_BYTES);
    let cases = [
        (
            "512 KiB tools/call, prose arguments (no escapes)",
            call_line(FRAME_BYTES, PLAIN_TEXT),
            true,
        ),
        (
            "512 KiB tools/call, an escape every 14 bytes",
            call_line(FRAME_BYTES, DENSE_TEXT),
            true,
        ),
        (
            "512 KiB notification (forwarded)",
            notification_line(FRAME_BYTES),
            false,
        ),
        ("200 B tools/call", call_line(200, PLAIN_TEXT), true),
    ];
    for (name, line, is_call) in cases {
        let gbps = time_classify(&line, total, is_call) / 1e9;
        let floor = time_byte_pass(&line, total) / 1e9;
        let row = Row::value(s, name, "GB/s", gbps).floor(
            "one pass over the same bytes looking for '\"' and '\\'",
            floor,
        );
        rows.push(if line.len() >= FRAME_BYTES {
            row.target(format!("≥ {TARGET_FRAMING_GBPS} GB/s"), gbps >= TARGET_FRAMING_GBPS)
        } else {
            row.note(format!(
                "{:.2} µs per line: a fixed cost per line dominates short lines (no throughput target)",
                line.len() as f64 / (gbps * 1e9) * 1e6
            ))
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Decisions through the daemon
// ---------------------------------------------------------------------------------------------

fn decision_stats(v: &Value) -> Stats {
    let us = |k: &str| v[k].as_f64().unwrap() / 1_000.0;
    Stats {
        n: v["decisions"].as_u64().unwrap() as usize,
        p50: us("p50_ns"),
        p95: us("p95_ns"),
        p99: us("p99_ns"),
        max: us("max_ns"),
        mean: us("mean_ns"),
    }
}

fn decisions(b: &Bench, f: &Floors, rows: &mut Vec<Row>, t18: &mut Vec<Row>) {
    for durability in [Durability::Process, Durability::Power] {
        let (word, s) = match durability {
            Durability::Process => (
                "process",
                "decision round trip, durability=process (WAL, synchronous=NORMAL)",
            ),
            Durability::Power => (
                "power",
                "decision round trip, durability=power (WAL, synchronous=FULL)",
            ),
        };
        for n in RULE_COUNTS {
            eprintln!("bench: decisions, durability={word}, {n} rules");
            let home = b.home_with_daemon(&format!("decide-{word}-{n}"), durability, &rules(n));
            let mut runs: Vec<(String, Value)> = Vec::new();
            let calls = b.n(DECISIONS);
            runs.push((
                format!("1 relay, {n} rules, allow path"),
                b.bench_decisions(&home, 1, calls, ALLOWED_TOOL),
            ));
            if n == RULE_COUNTS[0] {
                runs.push((
                    format!("1 relay, {n} rules, deny path"),
                    b.bench_decisions(&home, 1, calls, DENIED_TOOL),
                ));
                let per = calls.div_ceil(CONCURRENT_RELAYS);
                runs.push((
                    format!("{CONCURRENT_RELAYS} concurrent relays, {n} rules, allow path"),
                    b.bench_decisions(&home, CONCURRENT_RELAYS, per, ALLOWED_TOOL),
                ));
            }
            for (name, v) in runs {
                let st = decision_stats(&v);
                let rate = v["decisions_per_s"].as_f64().unwrap();
                let concurrent = v["relays"].as_u64().unwrap() > 1;
                let mut row = Row::latency(s, name.clone(), "µs", st).note(format!(
                    "{} decisions, {rate:.0} decisions/s, max {:.0} µs",
                    st.n, st.max
                ));
                row = match durability {
                    Durability::Process => {
                        let floor = f.socket_rt.p99 + f.wal_normal.p99;
                        row = row.floor("socket round trip p99 + WAL NORMAL commit p99", floor);
                        if concurrent {
                            row
                        } else {
                            row.target(
                                format!("p99 ≤ {TARGET_PROCESS_P99_US} µs"),
                                st.p99 <= TARGET_PROCESS_P99_US,
                            )
                        }
                    }
                    Durability::Power => {
                        row = row.floor("raw 4 KiB append + fdatasync p99", f.fdatasync.p99);
                        if concurrent {
                            row
                        } else {
                            if n == RULE_COUNTS[0] {
                                t18.push(
                                    ratio_row(
                                        format!("decision, power, {name}, p99"),
                                        st.p99,
                                        "raw 4 KiB append + fdatasync p99",
                                        f.fdatasync.p99,
                                        "µs",
                                    )
                                    .target(
                                        format!("≤ {T18_POWER_P99_VS_FDATASYNC}x its floor"),
                                        st.p99 <= T18_POWER_P99_VS_FDATASYNC * f.fdatasync.p99,
                                    ),
                                );
                            }
                            row.target(
                                format!("p99 ≤ {TARGET_POWER_P99_VS_FDATASYNC}x fdatasync p99"),
                                st.p99 <= TARGET_POWER_P99_VS_FDATASYNC * f.fdatasync.p99,
                            )
                        }
                    }
                };
                rows.push(row);
                if concurrent {
                    let mut r = Row::value(
                        s,
                        format!("{CONCURRENT_RELAYS} concurrent relays: throughput"),
                        "decisions/s",
                        rate,
                    );
                    if durability == Durability::Power {
                        r = r
                            .floor(
                                "1 / fdatasync p50 (one decision per flush)",
                                1e6 / f.fdatasync.p50,
                            )
                            .target(
                                format!("≥ {TARGET_POWER_DECISIONS_PER_S} /s"),
                                rate >= TARGET_POWER_DECISIONS_PER_S,
                            );
                    }
                    rows.push(r);
                }
            }
            if n == RULE_COUNTS[0] || n == RULE_COUNTS[RULE_COUNTS.len() - 1] {
                let pid = b.daemon_pid(&home) as u32;
                let rss = proc_kib(pid, "VmRSS").unwrap_or(f64::NAN);
                let hwm = proc_kib(pid, "VmHWM").unwrap_or(f64::NAN);
                rows.push(
                    Row::value(s, format!("daemon RSS with {n} rules"), "MiB", mib(rss))
                        .note(format!("peak {:.1} MiB", mib(hwm))),
                );
            }
            b.stop(&home);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// End to end: a client, a relay, the demo server
// ---------------------------------------------------------------------------------------------

/// A client's end of an MCP server (the relay, or the server itself).
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn spawn(mut c: Command) -> (Peer, Instant) {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let t0 = Instant::now();
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        (
            Peer {
                child,
                stdin,
                stdout,
            },
            t0,
        )
    }

    fn send(&mut self, line: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(line).unwrap();
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let n = self.stdout.read_until(b'\n', &mut line).unwrap();
        assert!(n > 0, "the server closed its output");
        line
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn finish(mut self) {
        self.stdin = None;
        let mut rest = Vec::new();
        let _ = self.stdout.read_to_end(&mut rest);
        let _ = self.child.wait();
    }
}

const INITIALIZE: &[u8] = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"holdcall-bench","version":"1"}}}
"#;

fn echo_call(id: usize) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"{ALLOWED_TOOL}\",\"arguments\":{{\"text\":\"hello {id}\"}}}}}}\n"
    )
    .into_bytes()
}

fn relay_cmd(b: &Bench, home: &Path) -> Command {
    let mut c = b.cmd(
        home,
        &["serve", "--connector", CONNECTOR, "--client", "bench", "--"],
    );
    c.arg(&b.holdcall).arg("demo-server");
    c
}

fn server_cmd(b: &Bench, home: &Path) -> Command {
    b.cmd(home, &["demo-server"])
}

/// The demo server behind `cat` both ways (`cat | demo-server | cat`): what any process between
/// a client and its server costs, copying each byte through one more pipe each way and
/// deciding nothing. The passthrough's second floor.
fn cat_cmd(b: &Bench, home: &Path) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", "cat | \"$0\" demo-server | cat"])
        .arg(&b.holdcall)
        .env("HOLDCALL_HOME", home)
        .env("XDG_RUNTIME_DIR", b.run.path())
        .env_remove("HOLDCALL_LOG")
        .stdin(Stdio::null());
    c
}

/// The demo server behind a line-at-a-time copier both ways (`python3`, reading each line
/// whole before writing it): what any process that must hold a line before it forwards a byte
/// of it costs. The relay is one (whether a line is a `tools/call` is known only once it is
/// read to its end, and a call reaches the server only decided), `cat` is not: it forwards each
/// chunk as it comes, so the two transfers of a frame overlap. The passthrough's third floor,
/// measured only when [`has_python3`].
fn line_copier_cmd(b: &Bench, home: &Path) -> Command {
    let copier = "import sys\ni, o = sys.stdin.buffer, sys.stdout.buffer\nfor l in i:\n    o.write(l)\n    o.flush()\n";
    let mut c = Command::new("sh");
    c.args([
        "-c",
        "python3 -c \"$1\" | \"$0\" demo-server | python3 -c \"$1\"",
    ])
    .arg(&b.holdcall)
    .arg(copier)
    .env("HOLDCALL_HOME", home)
    .env("XDG_RUNTIME_DIR", b.run.path())
    .env_remove("HOLDCALL_LOG")
    .stdin(Stdio::null());
    c
}

fn has_python3() -> bool {
    Command::new("python3")
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Client → server, then server → client (after the handshake) through a fresh process of
/// `cmd` each (MB/s both).
fn time_both_ways(cmd: impl Fn() -> Command, frames: usize) -> (f64, f64) {
    let (mut peer, _) = Peer::spawn(cmd());
    let up = time_upstream(&mut peer, frames);
    peer.finish();
    let (mut peer, _) = Peer::spawn(cmd());
    peer.send(INITIALIZE);
    peer.recv();
    let down = time_downstream(&mut peer, frames);
    peer.finish();
    (up, down)
}

/// Voluntary context switches per call of the relay, its server and the daemon, over
/// `HANDOFF_CALLS` sequential allowed calls on a relay already warm (see `handoffs`).
fn count_handoffs(b: &Bench, home: &Path, relayed: &mut Peer, word: &str, t18: &mut Vec<Row>) {
    let relay = relayed.pid();
    let server = handoffs::children(relay);
    let daemon = b.daemon_pid(home) as u32;
    let mut pids = vec![relay, daemon];
    pids.extend(&server);
    let calls = b.n(HANDOFF_CALLS);
    let (relay_before, daemon_before) = (handoffs::by_thread(relay), handoffs::by_thread(daemon));
    let before = handoffs::snapshot(&pids);
    for i in 0..calls {
        relayed.send(&echo_call(1_000_000 + i));
        relayed.recv();
    }
    let after = handoffs::snapshot(&pids);
    let relay_threads =
        handoffs::by_thread_per_call(&relay_before, &handoffs::by_thread(relay), calls);
    let daemon_threads =
        handoffs::by_thread_per_call(&daemon_before, &handoffs::by_thread(daemon), calls);
    let each = handoffs::per_call(&before, &after, calls);
    let server_each: f64 = each.iter().skip(2).sum();
    let (r, d) = (
        each.first().copied().unwrap_or(f64::NAN),
        each.get(1).copied().unwrap_or(f64::NAN),
    );
    t18.push(
        Row::value(S18, format!("thread hand-offs per allowed call, {word}: relay + daemon"), "switches", r + d).note(format!(
            "voluntary context switches per call over {calls} calls: relay {r:.2} ({relay_threads}), daemon {d:.2} ({daemon_threads}); the server {server_each:.2} (the same direct)"
        )),
    );
}

/// Sequential echo calls; each timed from writing the line to reading its answer (µs).
fn time_calls(p: &mut Peer, calls: usize, warmup: usize) -> Stats {
    p.send(INITIALIZE);
    p.recv();
    let mut out = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let line = echo_call(i + 1);
        let t0 = Instant::now();
        p.send(&line);
        let answer = p.recv();
        let took = ns(t0.elapsed());
        assert!(
            answer
                .windows(b"Echo: hello".len())
                .any(|w| w == b"Echo: hello"),
            "the call was not answered by the server: {}",
            String::from_utf8_lossy(&answer)
        );
        if i >= warmup {
            out.push(took);
        }
    }
    stats(&mut out, 1_000.0)
}

/// Sequential calls to the denied tool, each answered by the relay with a refusal (µs).
fn time_refusals(p: &mut Peer, calls: usize, warmup: usize) -> Stats {
    p.send(INITIALIZE);
    p.recv();
    let mut out = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"{DENIED_TOOL}\",\"arguments\":{{\"path\":\"/tmp/x\"}}}}}}\n",
            i + 1
        );
        let t0 = Instant::now();
        p.send(line.as_bytes());
        let answer = p.recv();
        let took = ns(t0.elapsed());
        assert!(
            answer
                .windows(b"\"isError\":true".len())
                .any(|w| w == b"\"isError\":true"),
            "the call was not refused: {}",
            String::from_utf8_lossy(&answer)
        );
        if i >= warmup {
            out.push(took);
        }
    }
    stats(&mut out, 1_000.0)
}

/// Time from spawning to the first byte of the answer to an `initialize` written at once (ms).
fn time_start(mut c: impl FnMut() -> Command, starts: usize) -> Stats {
    let mut out = Vec::with_capacity(starts);
    for _ in 0..starts {
        let (mut p, t0) = Peer::spawn(c());
        p.send(INITIALIZE);
        let mut first = [0u8; 1];
        p.stdout.read_exact(&mut first).unwrap();
        out.push(ns(t0.elapsed()));
        p.recv();
        p.finish();
    }
    stats(&mut out, 1_000_000.0)
}

/// Client to server: `frames` notifications of `FRAME_BYTES`, then a ping whose answer says the
/// server read them all (MB/s, 10^6 bytes).
fn time_upstream(p: &mut Peer, frames: usize) -> f64 {
    let line = notification_line(FRAME_BYTES);
    p.send(INITIALIZE);
    p.recv();
    let t0 = Instant::now();
    for _ in 0..frames {
        p.send(&line);
    }
    p.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"done\",\"method\":\"ping\"}\n");
    let answer = p.recv();
    let secs = t0.elapsed().as_secs_f64();
    assert!(answer.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":\"done\""));
    (frames * line.len()) as f64 / secs / 1e6
}

/// Server to client: `frames` calls of the demo server's `big` tool answering 512 KiB (MB/s).
fn time_downstream(p: &mut Peer, frames: usize) -> f64 {
    let kib = FRAME_BYTES / 1024;
    let mut bytes = 0usize;
    let t0 = Instant::now();
    for i in 0..frames {
        p.send(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{\"kib\":{kib}}}}}}}\n",
                i + 1
            )
            .as_bytes(),
        );
        let answer = p.recv();
        assert!(
            answer.len() > FRAME_BYTES,
            "a refusal instead of the big answer"
        );
        bytes += answer.len();
    }
    bytes as f64 / t0.elapsed().as_secs_f64() / 1e6
}

fn end_to_end(b: &Bench, f: &Floors, decide10: Stats, rows: &mut Vec<Row>, t18: &mut Vec<Row>) {
    let rules = rules(RULE_COUNTS[0]);
    for durability in [Durability::Process, Durability::Power] {
        let word = match durability {
            Durability::Process => "process",
            Durability::Power => "power",
        };
        eprintln!("bench: end to end, durability={word}");
        let s = match durability {
            Durability::Process => "end to end: client -> relay -> demo server, durability=process",
            Durability::Power => "end to end: client -> relay -> demo server, durability=power",
        };
        let home = b.home_with_daemon(&format!("e2e-{word}"), durability, &rules);
        let calls = b.n(E2E_CALLS);
        let warmup = b.n(E2E_WARMUP);

        let (mut direct, _) = Peer::spawn(server_cmd(b, &home));
        let d = time_calls(&mut direct, calls, warmup);
        direct.finish();
        let (mut relayed, _) = Peer::spawn(relay_cmd(b, &home));
        let r = time_calls(&mut relayed, calls, warmup);
        let relay_rss = proc_kib(relayed.pid(), "VmHWM").unwrap_or(f64::NAN);
        let rollup = |key: &str| {
            read(&format!("/proc/{}/smaps_rollup", relayed.pid()))
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let (shared_clean, private_dirty, pss) = (
            rollup("Shared_Clean"),
            rollup("Private_Dirty"),
            rollup("Pss"),
        );
        if handoffs::countable() {
            count_handoffs(b, &home, &mut relayed, word, t18);
        }
        relayed.finish();

        rows.push(Row::latency(
            s,
            format!("tools/call direct to the server ({calls} calls)"),
            "ms",
            scale(d, 1e-3),
        ));
        rows.push(
            Row::latency(
                s,
                format!("tools/call through the relay ({calls} calls)"),
                "ms",
                scale(r, 1e-3),
            )
            .floor("the same call direct, p99", d.p99 / 1e3),
        );
        let added = Stats {
            n: calls,
            p50: (r.p50 - d.p50) / 1e3,
            p95: (r.p95 - d.p95) / 1e3,
            p99: (r.p99 - d.p99) / 1e3,
            max: f64::NAN,
            mean: (r.mean - d.mean) / 1e3,
        };
        let mut row = Row::latency(
            s,
            "added by the relay (relayed minus direct, per percentile)",
            "ms",
            added,
        );
        if durability == Durability::Process {
            row = row.target(
                format!("p50 ≤ {TARGET_ADDED_P50_MS} ms"),
                added.p50 <= TARGET_ADDED_P50_MS,
            );
            // Issue 18's floor: the call still crosses two pipes each way (client → relay →
            // server), one socket round trip, one commit and one decision.
            let floor = |d: f64, sock: f64, wal: f64, dec: f64| 2.0 * d + sock + wal + dec;
            let floor50 = floor(d.p50, f.socket_rt.p50, f.wal_normal.p50, decide10.p50) / 1e3;
            let floor99 = floor(d.p99, f.socket_rt.p99, f.wal_normal.p99, decide10.p99) / 1e3;
            let why = "2 × direct call + socket round trip + WAL NORMAL commit + decide (10 rules)";
            t18.push(
                ratio_row(
                    "added by the relay, process, p50",
                    added.p50,
                    &format!("{why}, p50s"),
                    floor50,
                    "ms",
                )
                .target(
                    format!("≤ {T18_ADDED_P50_VS_FLOOR}x its floor"),
                    added.p50 <= T18_ADDED_P50_VS_FLOOR * floor50,
                ),
            );
            t18.push(
                ratio_row(
                    "added by the relay, process, p99",
                    added.p99,
                    &format!("{why}, p99s"),
                    floor99,
                    "ms",
                )
                .target(
                    format!("≤ {T18_ADDED_P99_VS_FLOOR}x its floor"),
                    added.p99 <= T18_ADDED_P99_VS_FLOOR * floor99,
                ),
            );
        }
        rows.push(row);

        // A refused call never reaches the server and sends the daemon no outcome report:
        // the relay's and the daemon's own cost, one decision per call.
        let (mut relayed, _) = Peer::spawn(relay_cmd(b, &home));
        let refused = time_refusals(&mut relayed, calls, warmup);
        relayed.finish();
        rows.push(
            Row::latency(s, format!("tools/call refused by rule, answered by the relay ({calls} calls)"), "ms", scale(refused, 1e-3))
                .note("one daemon round trip per call and no server (an allowed call's outcome report is sent unanswered, so it delays no call)"),
        );

        let starts = b.n(RELAY_STARTS);
        let direct_start = time_start(|| server_cmd(b, &home), starts);
        let relay_start = time_start(|| relay_cmd(b, &home), starts);
        rows.push(
            Row::latency(s, "relay start to first forwarded byte (answer to initialize)", "ms", relay_start)
                .floor("the demo server started directly, p99", direct_start.p99)
                .target(format!("p50 ≤ {TARGET_RELAY_START_MS} ms"), relay_start.p50 <= TARGET_RELAY_START_MS)
                .note(format!(
                    "{starts} starts; the server alone answers in p50 {:.2} ms; includes connecting to the daemon and the session.start commit",
                    direct_start.p50
                )),
        );
        rows.push(
            Row::value(
                s,
                format!("relay peak RSS after {calls} calls"),
                "MiB",
                mib(relay_rss),
            )
            .target(
                format!("≤ {TARGET_RELAY_RSS_MIB} MiB"),
                mib(relay_rss) <= TARGET_RELAY_RSS_MIB,
            )
            .note(format!(
                "now: {:.2} MiB shared clean (the executable's pages, shared with the daemon and every relay), {:.2} MiB private dirty (the relay's own), PSS {:.2} MiB",
                mib(shared_clean),
                mib(private_dirty),
                mib(pss)
            )),
        );

        if durability == Durability::Process {
            let frames = b.n(FRAMES);
            let (up_direct, down_direct) = time_both_ways(|| server_cmd(b, &home), frames);
            let (up_cat, down_cat) = time_both_ways(|| cat_cmd(b, &home), frames);
            // The store-and-forward floor: both directions through a line-at-a-time copier.
            let (up_lines, down_lines) = if has_python3() {
                let (up, down) = time_both_ways(|| line_copier_cmd(b, &home), frames);
                (Some(up), Some(down))
            } else {
                (None, None)
            };
            let (mut relayed, _) = Peer::spawn(relay_cmd(b, &home));
            let up = time_upstream(&mut relayed, frames);
            relayed.finish();
            let (mut relayed, _) = Peer::spawn(relay_cmd(b, &home));
            relayed.send(INITIALIZE);
            relayed.recv();
            let down = time_downstream(&mut relayed, frames);
            let big_rss = proc_kib(relayed.pid(), "VmHWM").unwrap_or(f64::NAN);
            relayed.finish();
            for (way, relayed, direct, cat, lines) in [
                (
                    "client -> server, notifications",
                    up,
                    up_direct,
                    up_cat,
                    up_lines,
                ),
                (
                    "server -> client, answers",
                    down,
                    down_direct,
                    down_cat,
                    down_lines,
                ),
            ] {
                let lines = match lines {
                    Some(l) => format!(
                        "; through a line-at-a-time copier both ways (each line held whole before it is forwarded, as the relay must): {l:.0} MB/s, {:.2}x direct; the relay is {:.2}x of it",
                        l / direct,
                        relayed / l
                    ),
                    None => "; no python3 for the line-at-a-time floor".to_string(),
                };
                t18.push(
                    ratio_row(
                        format!("passthrough of 512 KiB frames, {way}"),
                        relayed,
                        "the same frames direct",
                        direct,
                        "MB/s",
                    )
                    .target(
                        format!("≥ {T18_PASSTHROUGH_VS_DIRECT}x direct"),
                        relayed >= T18_PASSTHROUGH_VS_DIRECT * direct,
                    )
                    .note(format!(
                        "through `cat` both ways (one more pipe each way, nothing decided): {cat:.0} MB/s, {:.2}x direct; the relay is {:.2}x of it{lines}",
                        cat / direct,
                        relayed / cat
                    )),
                );
            }
            let s = "passthrough, 512 KiB frames, durability=process";
            rows.push(
                Row::value(
                    s,
                    format!("client -> server, {frames} notifications"),
                    "MB/s",
                    up,
                )
                .floor("the same frames direct to the server", up_direct),
            );
            rows.push(
                Row::value(
                    s,
                    format!(
                        "server -> client, {frames} answers of the big tool (each call decided)"
                    ),
                    "MB/s",
                    down,
                )
                .floor("the same calls direct to the server", down_direct),
            );
            rows.push(
                Row::value(
                    s,
                    "relay peak RSS after the 512 KiB answers",
                    "MiB",
                    mib(big_rss),
                )
                .note("no target: buffers grow to the frame size"),
            );
        }
        b.stop(&home);
    }
}

/// Sequential requests of `method` (each answered by a listing of `LISTED_TOOLS`), each timed
/// from writing the line to reading its answer (µs); the first, untimed, is returned apart.
fn time_listings(p: &mut Peer, method: &str, listings: usize) -> (Stats, f64, usize) {
    p.send(INITIALIZE);
    p.recv();
    let mut out = Vec::with_capacity(listings);
    let mut first = f64::NAN;
    let mut bytes = 0;
    for i in 0..=listings {
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"l{i}\",\"method\":\"{method}\"}}\n");
        let t0 = Instant::now();
        p.send(line.as_bytes());
        let answer = p.recv();
        let took = ns(t0.elapsed());
        assert!(
            answer.windows(b"tool-200".len()).any(|w| w == b"tool-200")
                || answer.windows(b"tool-199".len()).any(|w| w == b"tool-199"),
            "not the listing: {}",
            String::from_utf8_lossy(&answer[..answer.len().min(300)])
        );
        bytes = answer.len();
        if i == 0 {
            first = took as f64 / 1_000.0;
        } else {
            out.push(took);
        }
    }
    (stats(&mut out, 1_000.0), first, bytes)
}

/// The cost of pinning a 200-tool `tools/list` (and of hide-denied), beside the same listing
/// direct and the same bytes passed through unread (`prompts/list`) in the same run.
fn listing(b: &Bench, rows: &mut Vec<Row>) {
    eprintln!("bench: tools/list of {LISTED_TOOLS} tools");
    let s = "tools/list of 200 tools (about 90 KiB), durability=process";
    let home = b.home_with_daemon("listing", Durability::Process, &[]);
    let listings = b.n(LISTINGS);
    let n = LISTED_TOOLS.to_string();
    let server = |home: &Path| {
        let mut c = b.cmd(home, &["demo-server", "--extra-tools", &n]);
        c.stdin(Stdio::piped());
        c
    };
    let relay = |home: &Path, connector: &str| {
        let mut c = b.cmd(
            home,
            &["serve", "--connector", connector, "--client", "bench", "--"],
        );
        c.arg(&b.holdcall)
            .args(["demo-server", "--extra-tools", &n]);
        c
    };
    let (mut p, _) = Peer::spawn(server(&home));
    let (direct, _, bytes) = time_listings(&mut p, "tools/list", listings);
    p.finish();
    let (mut p, _) = Peer::spawn(relay(&home, "plain"));
    let (passed, _, _) = time_listings(&mut p, "prompts/list", listings);
    p.finish();
    let (mut p, _) = Peer::spawn(relay(&home, "listed"));
    let (pinned, first, _) = time_listings(&mut p, "tools/list", listings);
    p.finish();
    b.ok(
        &home,
        &["policy", "deny", "tool-200", "--connector", "hidden"],
    );
    b.ok(&home, &["connector", "hide-denied", "hidden", "on"]);
    let (mut p, _) = Peer::spawn(relay(&home, "hidden"));
    let (hidden, _, _) = time_listings(&mut p, "tools/list", listings);
    p.finish();
    b.stop(&home);
    let ms = |x: Stats| scale(x, 1e-3);
    rows.push(Row::latency(
        s,
        format!("direct to the server ({listings} listings, {bytes} bytes each)"),
        "ms",
        ms(direct),
    ));
    rows.push(
        Row::latency(
            s,
            "through the relay, not a tools/list (prompts/list, the same bytes): plain passthrough",
            "ms",
            ms(passed),
        )
        .floor("the listing direct, p99", direct.p99 / 1e3),
    );
    rows.push(
        Row::latency(
            s,
            "through the relay as tools/list: read, hashed, sent to the daemon (pins unchanged)",
            "ms",
            ms(pinned),
        )
        .floor("plain passthrough, p99", passed.p99 / 1e3)
        .note(format!(
            "the first listing, which pins all 200 (200 tool.pin entries in one commit): {:.2} ms",
            first / 1e3
        )),
    );
    rows.push(
        Row::latency(
            s,
            "the same with hide-denied on (tool-200 denied: the listing re-serialised without it)",
            "ms",
            ms(hidden),
        )
        .floor("plain passthrough, p99", passed.p99 / 1e3),
    );
    let added = Stats {
        n: listings,
        p50: (pinned.p50 - passed.p50) / 1e3,
        p95: (pinned.p95 - passed.p95) / 1e3,
        p99: (pinned.p99 - passed.p99) / 1e3,
        max: f64::NAN,
        mean: (pinned.mean - passed.mean) / 1e3,
    };
    rows.push(Row::latency(
        s,
        "added by pinning (tools/list minus plain passthrough, per percentile)",
        "ms",
        added,
    ));
}

fn scale(s: Stats, k: f64) -> Stats {
    Stats {
        n: s.n,
        p50: s.p50 * k,
        p95: s.p95 * k,
        p99: s.p99 * k,
        max: s.max * k,
        mean: s.mean * k,
    }
}

// ---------------------------------------------------------------------------------------------
// daemon start with many rules
// ---------------------------------------------------------------------------------------------

/// Starts timed per home in the daemon-start group.
const STARTS: usize = 7;
/// Daemon start with 10,000 rules, ready to decide, p50 (s).
const TARGET_START_10K_S: f64 = 1.0;

/// `holdcall daemon start` until the daemon answers, `STARTS` times, the daemon stopped between.
fn time_starts(b: &Bench, home: &Path) -> Stats {
    let mut samples = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        b.stop(home);
        let t0 = Instant::now();
        b.ok(home, &["daemon", "start"]);
        // `daemon start` returns once the daemon listens; a status answers from the daemon.
        b.ok(home, &["daemon", "status"]);
        samples.push(ns(t0.elapsed()));
    }
    stats(&mut samples, 1e9)
}

fn daemon_start(b: &Bench, rows: &mut Vec<Row>) {
    let n = 10_000;
    eprintln!("bench: daemon start, no rules and {n} rules");
    let empty = b.home_with_daemon("start-0", Durability::Process, &[]);
    let floor = time_starts(b, &empty);
    b.stop(&empty);
    let home = b.home_with_daemon(&format!("start-{n}"), Durability::Process, &rules(n));
    let st = time_starts(b, &home);
    b.stop(&home);
    let s = "daemon start";
    rows.push(
        Row::latency(
            s,
            "no rules, `daemon start` until `daemon status` answers",
            "s",
            floor,
        )
        .note("the floor: two process starts, opening the journal, one round trip"),
    );
    rows.push(
        Row::latency(s, format!("{n} rules, the same"), "s", st)
            .floor("the same start with no rules, p99", floor.p99)
            .target(
                format!("p50 ≤ {TARGET_START_10K_S} s"),
                st.p50 <= TARGET_START_10K_S,
            )
            .note(format!(
                "p50 {:.2} s against {:.2} s with no rules",
                st.p50, floor.p50
            )),
    );
}

// ---------------------------------------------------------------------------------------------
// verify on a large journal
// ---------------------------------------------------------------------------------------------

fn verify(b: &Bench, rows: &mut Vec<Row>) {
    let entries = b.n(VERIFY_ENTRIES);
    eprintln!("bench: generating a journal of {entries} entries");
    let dir = b.work.path().join("verify");
    let home = Home::at(dir.clone());
    home.prepare().unwrap();
    let machine_id = journal::load_or_create_machine_id(&home.machine_id_path(), true).unwrap();
    let mut j = Journal::open(&home.db_path(), &machine_id, Durability::Process).unwrap();
    let t0 = Instant::now();
    let mut hash_secs = 0.0;
    let mut written = 0;
    while written < entries {
        let batch = VERIFY_BATCH.min(entries - written);
        let items: Vec<(Kind, Fields)> = (0..batch)
            .map(|k| (Kind::CallRequest, call_fields((written + k + 1) as i64)))
            .collect();
        let out = j.append_many(items).unwrap();
        // The floor: what verify must do at least, the encoding and SHA-256 of every entry.
        let h0 = Instant::now();
        for e in &out {
            let h = journal::entry_hash(&e.prev_hash, &journal::encode(e)).unwrap();
            assert_eq!(h, e.hash);
        }
        hash_secs += h0.elapsed().as_secs_f64();
        written += batch;
    }
    drop(j);
    let gen_secs = t0.elapsed().as_secs_f64();
    let db_mib = std::fs::metadata(home.db_path())
        .map(|m| m.len() as f64 / (1u64 << 20) as f64)
        .unwrap_or(0.0);

    eprintln!("bench: holdcall verify");
    let t0 = Instant::now();
    let out = b.ok(&dir, &["verify", "--json"]);
    let secs = t0.elapsed().as_secs_f64();
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["state"], "intact", "{report}");
    assert_eq!(report["entries"].as_u64(), Some(entries as u64));
    let rate = entries as f64 / secs;
    let s = "holdcall verify";
    rows.push(
        Row::value(s, format!("verify, {entries} entries ({db_mib:.0} MiB database, in the page cache)"), "entries/s", rate)
            .floor("encode + SHA-256 of the same entries in memory", entries as f64 / hash_secs)
            .target(format!("≥ {:.0} entries/s", TARGET_VERIFY_PER_S), rate >= TARGET_VERIFY_PER_S)
            .note(format!(
                "{secs:.2} s for the whole command; generating the journal through the journal API took {gen_secs:.1} s"
            )),
    );
}

// ---------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------

fn targets_summary(rows: &[Row]) -> (usize, usize) {
    let met = rows.iter().filter(|r| r.met == Some(true)).count();
    let missed = rows.iter().filter(|r| r.met == Some(false)).count();
    (met, missed)
}

fn main() {
    let mut quick = false;
    let mut build_seconds: Option<f64> = None;
    let mut command = "tools/bench".to_string();
    let mut rustc = String::new();
    let mut args = std::env::args().skip(1);
    let mut bench_mode = false;
    // `--only listing`, `leak`, `verify`, `start`, `framing`, `decide` or `e2e` (decide, then
    // end to end): that group alone (with the floors), to try it; the full run is what
    // docs/benchmarks.md quotes.
    let mut only: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => bench_mode = true,
            "--only" => only = args.next(),
            "--quick" => quick = true,
            "--build-seconds" => build_seconds = args.next().and_then(|s| s.parse().ok()),
            "--command" => command = args.next().unwrap_or(command),
            "--rustc" => rustc = args.next().unwrap_or_default(),
            _ => {}
        }
    }
    if !bench_mode {
        // `cargo test --all-targets` runs bench targets without `--bench`: measure nothing.
        eprintln!("benches/bench.rs measures only under `tools/bench` or `cargo bench`");
        return;
    }

    let holdcall = PathBuf::from(env!("CARGO_BIN_EXE_holdcall"));
    // <target dir>/<profile>/holdcall → <target dir>/bench/
    let out_dir = holdcall
        .parent()
        .and_then(Path::parent)
        .map(|t| t.join("bench"))
        .unwrap();
    std::fs::create_dir_all(&out_dir).unwrap();
    let work = tempfile::Builder::new()
        .prefix("work-")
        .tempdir_in(&out_dir)
        .unwrap();
    let run = tempfile::Builder::new().prefix("hcb").tempdir().unwrap();
    let b = Bench {
        holdcall,
        work,
        run,
        quick,
        homes: std::cell::RefCell::new(Vec::new()),
    };
    let started = Instant::now();
    let date = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let machine = machine(b.work.path(), build_seconds, &rustc);

    let mut rows = Vec::new();
    let mut t18 = Vec::new();
    let load_before = read("/proc/loadavg").trim().to_string();
    let f = floors(&b, &mut rows);
    match only.as_deref() {
        Some("listing") => listing(&b, &mut rows),
        Some("verify") => verify(&b, &mut rows),
        Some("decide") => {
            policy_eval(&b, &mut rows, &mut t18);
        }
        Some("e2e") => {
            let decide10 = policy_eval(&b, &mut rows, &mut t18);
            end_to_end(&b, &f, decide10, &mut rows, &mut t18);
        }
        Some("start") => daemon_start(&b, &mut rows),
        Some("leak") => leak::leak_check(&b, &mut rows),
        Some("framing") => framing(&b, &mut rows),
        _ => {
            journal_append(&b, &f, &mut rows);
            let decide10 = policy_eval(&b, &mut rows, &mut t18);
            framing(&b, &mut rows);
            decisions(&b, &f, &mut rows, &mut t18);
            end_to_end(&b, &f, decide10, &mut rows, &mut t18);
            listing(&b, &mut rows);
            leak::leak_check(&b, &mut rows);
            daemon_start(&b, &mut rows);
            verify(&b, &mut rows);
            holdmap_ports::list_ports(&b, &mut rows);
        }
    }
    rows.append(&mut t18);
    let run_seconds = started.elapsed().as_secs_f64();
    let load_after = read("/proc/loadavg").trim().to_string();

    println!();
    println!(
        "Holdcall benchmarks, {date}{}",
        if quick {
            " (QUICK: reduced counts, not for quoting)"
        } else {
            ""
        }
    );
    println!(
        "machine: {} x {}, kernel {}, {:.1} GiB; disk {}",
        machine["nproc"],
        machine["cpu"].as_str().unwrap_or(""),
        machine["kernel"].as_str().unwrap_or(""),
        machine["memory_gib"].as_f64().unwrap_or(0.0),
        machine["disk"].as_str().unwrap_or("")
    );
    println!();
    println!("load average (1, 5, 15 min) before: {load_before}; after: {load_after}");
    println!();
    print_table(&rows);
    let (met, missed) = targets_summary(&rows);
    println!();
    match build_seconds {
        Some(bs) => println!(
            "targets: {met} met, {missed} missed; build {bs:.0} s + run {run_seconds:.0} s = {:.0} s",
            bs + run_seconds
        ),
        None => println!("targets: {met} met, {missed} missed; run {run_seconds:.0} s"),
    }

    let results = json!({
        "date": date,
        "command": command,
        "quick": quick,
        "machine": machine,
        "run_seconds": run_seconds,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "targets_met": met,
        "targets_missed": missed,
        "floors": {
            "unix_socket_round_trip_us": f.socket_rt,
            "sqlite_wal_commit_normal_us": f.wal_normal,
            "sqlite_wal_commit_full_us": f.wal_full,
            "append_4k_fdatasync_us": f.fdatasync,
        },
        "rows": rows,
    });
    let path = out_dir.join("results.json");
    let mut file = File::create(&path).unwrap();
    serde_json::to_writer_pretty(&mut file, &results).unwrap();
    writeln!(file).unwrap();
    println!("results: {}", path.display());
}
