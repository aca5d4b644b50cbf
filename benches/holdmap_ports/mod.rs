//! `list_ports` at the issue's scale (issue 14's "Done when"): 200 listening sockets and at
//! least 2,000 processes on the machine, each `tools/call list_ports` to the perf-built
//! `holdmap mcp` timed from writing the line to reading its answer, beside `ss -ltnup` (the same
//! table, with the same walk of every process's fds for `-p`) as the floor, run in the same run
//! and timed the same way, process start included.
//!
//! Everything it starts — the listener processes and the `sleep` processes that bring the
//! machine to 2,000 processes — it stops by pid when the section ends, however it ends. It is a
//! folder module, not `benches/holdmap_ports.rs`, because Cargo would take a file beside
//! bench.rs for a bench target of its own.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::{Bench, Peer, Row, ns, stats};

/// Listening sockets on the machine while list_ports is timed (the issue: 200).
const LISTENERS: usize = 200;
/// Processes the listeners are spread over (so the owners are not one process).
const LISTENER_PROCS: usize = 10;
/// Processes on the machine while list_ports is timed, at least (the issue: 2,000).
const PROCESSES: usize = 2_000;
/// Timed list_ports calls, and timed `ss -ltnup` runs.
const CALLS: usize = 200;
/// Untimed calls first, so the server's and the kernel's caches are warm.
const WARMUP: usize = 5;

/// Holds `n` listening TCP sockets on loopback ports the kernel picks, prints their ports on
/// one line once every one listens, then waits to be stopped.
const HOLDER: &str = r#"
import signal, socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held), flush=True)
signal.pause()
"#;

/// The processes this section started; stopped by their pid when it ends.
struct Started(Vec<Child>);

impl Drop for Started {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

fn processes_now() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .count()
}

/// Starts the listeners (`listeners` sockets over `LISTENER_PROCS` processes, in a project
/// folder with a package.json, as a developer's servers would be); returns their ports.
fn start_listeners(started: &mut Started, dir: &std::path::Path, listeners: usize) -> Vec<u16> {
    let procs = LISTENER_PROCS.min(listeners).max(1);
    let mut ports = Vec::with_capacity(listeners);
    for k in 0..procs {
        let n = listeners / procs + usize::from(k < listeners % procs);
        let mut child = Command::new("python3")
            .args(["-c", HOLDER, &n.to_string()])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 starts (the listeners need it)");
        let out = child.stdout.take().unwrap();
        started.0.push(child);
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        ports.extend(line.split_whitespace().map(|p| p.parse::<u16>().unwrap()));
    }
    assert_eq!(ports.len(), listeners, "the listeners did not all start");
    ports
}

/// Starts `sleep 600` processes until the machine has at least `target` processes.
fn fill_processes(started: &mut Started, target: usize) -> usize {
    let mut now = processes_now();
    while now < target {
        for _ in 0..target - now {
            let child = Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sleep starts");
            started.0.push(child);
        }
        // Count again: other processes may have exited meanwhile.
        now = processes_now();
    }
    now
}

fn call(id: usize) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"list_ports\",\"arguments\":{{}}}}}}\n"
    )
    .into_bytes()
}

/// `calls` list_ports round trips after `warmup` untimed ones (ms). Each answer must be a
/// result, not an error, and must name one of our ports (nanoseconds).
fn time_list_ports(calls: usize, warmup: usize, ports: &[u16]) -> Vec<u64> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_holdmap"));
    c.arg("mcp");
    let (mut p, _) = Peer::spawn(c);
    p.send(super::INITIALIZE);
    p.recv();
    p.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    let ours: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut out = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let line = call(i + 1);
        let t0 = Instant::now();
        p.send(&line);
        let answer = p.recv();
        let took = ns(t0.elapsed());
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.contains("\"result\"")
                && !text.contains("\"isError\":true")
                && ours.iter().any(|p| text.contains(p.as_str())),
            "list_ports did not list the listeners: {}",
            text.chars().take(400).collect::<String>()
        );
        if i >= warmup {
            out.push(took);
        }
    }
    p.finish();
    out
}

/// `runs` runs of `ss -ltnup`, output discarded (nanoseconds); `None` if ss cannot be run.
fn time_ss(runs: usize, warmup: usize) -> Option<Vec<u64>> {
    let mut out = Vec::with_capacity(runs);
    for i in 0..warmup + runs {
        let t0 = Instant::now();
        let status = Command::new("ss")
            .arg("-ltnup")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        let took = ns(t0.elapsed());
        assert!(status.success(), "ss -ltnup failed: {status}");
        if i >= warmup {
            out.push(took);
        }
    }
    Some(out)
}

pub(super) fn list_ports(b: &Bench, rows: &mut Vec<Row>) {
    eprintln!("bench: holdmap list_ports");
    let listeners = b.n(LISTENERS);
    let target = b.n(PROCESSES);
    let calls = b.n(CALLS);
    let warmup = b.n(WARMUP);
    let dir = b.work.path().join("holdmap-project");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("package.json"),
        r#"{"name":"bench-servers","private":true}"#,
    )
    .unwrap();

    let mut started = Started(Vec::new());
    let ports = start_listeners(&mut started, &dir, listeners);
    let processes = fill_processes(&mut started, target);
    let s = "holdmap: list_ports through holdmap mcp";

    // Interleaved halves, so a change in the machine's load during the section moves both.
    let half = (calls / 2).max(1);
    let mut ss = time_ss(half, warmup);
    let mut hm = time_list_ports(half, warmup, &ports);
    if let (Some(all), Some(more)) = (ss.as_mut(), time_ss(half, 0)) {
        all.extend(more);
    }
    hm.extend(time_list_ports(half, warmup, &ports));
    let still = processes_now();
    drop(started);

    let hm = stats(&mut hm, 1e6);
    let ss = ss.map(|mut v| stats(&mut v, 1e6));
    let scale_note = format!(
        "{listeners} listening TCP sockets over {} python3 processes; {processes} processes on \
         the machine when timing began, {still} when it ended",
        LISTENER_PROCS.min(listeners).max(1)
    );
    let name = format!("tools/call list_ports ({} calls)", hm.n);
    let mut row = Row::latency(s, name, "ms", hm).note(scale_note.clone());
    if let Some(f) = ss {
        rows.push(
            Row::latency(
                s,
                format!("floor: ss -ltnup, process start included ({} runs)", f.n),
                "ms",
                f,
            )
            .note(scale_note),
        );
        row = row.floor("ss -ltnup p99, same run", f.p99);
    } else {
        row = row.note("no floor: ss could not be run here");
    }
    rows.push(row);
    rows.push(Row::value(
        s,
        "listening sockets started",
        "count",
        listeners as f64,
    ));
    rows.push(Row::value(
        s,
        "processes on the machine",
        "count",
        processes as f64,
    ));
}
