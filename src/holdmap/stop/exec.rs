//! Executing a retained preview: a fresh observation, the same checks and the same effects for
//! every plan, then the retained plans' steps in order — each signal pinned by pid and start
//! time, each preceded by a fresh protection check — until the first failure.
//!
//! Must never: signal when the fresh observation differs from the preview in any effect; signal
//! a process that is protected, another account's or no longer the one planned; run a fresh plan
//! instead of the retained one; roll back a completed stop. Runs on a blocking thread: it waits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::holdmap::confirm::{Request, RetainedPreview};
use crate::holdmap::plan::{self, Step, StopPlan, protected_reason, same_effects};
use crate::holdmap::stop::{acceptable, agent_ids, plans_for};
use crate::holdmap::tool::Outcome;
use crate::holdmap::world::World;
use crate::limits::{HOLDMAP_STOP_KILL_WAIT, HOLDMAP_STOP_POLL};
use crate::os::signal::{Sig, SignalError};
use crate::os::sockets::Protocol;

/// Where an execution reads the time and waits; tests substitute a virtual clock.
pub(crate) trait Pacer: Send + Sync {
    /// Time since some fixed start.
    fn now(&self) -> Duration;
    fn pause(&self, d: Duration);
}

/// The real clock.
pub(crate) struct RealPacer {
    start: Instant,
}

impl RealPacer {
    pub(crate) fn new() -> RealPacer {
        RealPacer {
            start: Instant::now(),
        }
    }
}

impl Pacer for RealPacer {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
    fn pause(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

const NEW_PREVIEW: &str = "The confirmation was used; review a new preview before retrying.";

/// Runs a retained preview whose handle was consumed and whose request matched.
pub(crate) fn execute(world: &dyn World, pacer: &dyn Pacer, retained: &RetainedPreview) -> Outcome {
    let snap = match world.observe() {
        Ok(s) => s,
        Err(e) => {
            return Outcome::Failed(format!(
                "Could not read the machine to recheck the plan: {e}. Nothing was stopped. \
                 {NEW_PREVIEW}"
            ));
        }
    };
    let (found, fresh) = plans_for(&snap, &retained.request);
    if matches!(retained.request, Request::Agents { .. }) && agent_ids(&found) != retained.agents {
        return Outcome::Failed(format!(
            "The matching agents changed since the preview; nothing was stopped. {NEW_PREVIEW}"
        ));
    }
    if let Some(p) = fresh.iter().find(|p| !acceptable(&retained.request, p)) {
        let why = p.refusal.clone().unwrap_or_else(|| p.risk_reason.clone());
        return Outcome::Failed(format!(
            "The plan for port {} is no longer permitted ({why}); nothing was stopped. \
             {NEW_PREVIEW}",
            p.port
        ));
    }
    let unchanged = fresh.len() == retained.plans.len()
        && fresh
            .iter()
            .zip(&retained.plans)
            .all(|(f, r)| same_effects(f, r) && acceptable(&retained.request, r));
    if !unchanged {
        return Outcome::Failed(
            "Nothing was stopped: the owners changed since the preview; review a new preview. \
             The confirmation was used."
                .to_owned(),
        );
    }
    let mut report = Report::default();
    let mut completed = 0usize;
    for p in &retained.plans {
        match run_plan(world, pacer, p, &mut report) {
            Ok(()) => completed = completed.saturating_add(1),
            Err(failure) => {
                report.failures.push(failure);
                break;
            }
        }
    }
    report.finish(completed, retained.plans.len())
}

#[derive(Default)]
struct Report {
    stopped: Vec<Value>,
    skipped: Vec<Value>,
    ports: Vec<Value>,
    all_free: bool,
    any_port: bool,
    failures: Vec<String>,
}

impl Report {
    fn finish(self, completed: usize, total: usize) -> Outcome {
        let port_free = self.any_port && self.all_free && self.failures.is_empty();
        let summary = if self.failures.is_empty() {
            format!(
                "Stopped {} process(es); {} of {total} plan(s) completed; the port is free \
                 (a candidate to bind, not a reservation).",
                self.stopped.len(),
                completed
            )
        } else {
            format!(
                "Stop failed: {}. {completed} of {total} plan(s) completed before it; execution \
                 stopped there, and a completed stop is not rolled back. {NEW_PREVIEW}",
                self.failures.join("; ")
            )
        };
        Outcome::Done {
            summary,
            structured: json!({
                "mode": "execution",
                "dry_run": false,
                "stopped": self.stopped,
                "skipped": self.skipped,
                "ports": self.ports,
                "port_free": port_free,
                "failures": self.failures,
                "plans_completed": completed,
                "plans_total": total,
            }),
        }
    }
}

/// A process the execution signalled, and the strongest signal it sent.
struct Sent {
    pid: i32,
    start_ticks: u64,
    sig: Sig,
}

fn name_of(p: &StopPlan, pid: i32) -> String {
    p.tree
        .iter()
        .find(|m| m.pid == pid)
        .map(|m| m.name.clone())
        .unwrap_or_default()
}

/// Whether the pinned process may be signalled now: `Ok(true)` yes, `Ok(false)` it is gone,
/// `Err` it must not be (protected, another account's, or the machine cannot be read).
fn recheck(world: &dyn World, pid: i32, start_ticks: u64) -> Result<bool, String> {
    let snap = world
        .observe()
        .map_err(|e| format!("could not read the machine before signalling pid {pid}: {e}"))?;
    let Some(p) = snap
        .proc(pid)
        .filter(|p| p.start_ticks == start_ticks && !p.is_zombie())
    else {
        return Ok(false);
    };
    if let Some(why) = protected_reason(&snap, pid) {
        return Err(format!(
            "refused to signal {} (pid {pid}): it is now protected ({why})",
            p.name
        ));
    }
    if p.uid != Some(snap.me.uid) {
        return Err(format!(
            "refused to signal {} (pid {pid}): it no longer runs as your account",
            p.name
        ));
    }
    Ok(true)
}

/// Sends one pinned signal after a fresh recheck; `Ok(false)` when the process was gone or
/// replaced (said in `skipped`).
fn send(
    world: &dyn World,
    p: &StopPlan,
    pid: i32,
    start_ticks: u64,
    sig: Sig,
    report: &mut Report,
) -> Result<bool, String> {
    let skip = |report: &mut Report, reason: &str| {
        report.skipped.push(json!({
            "pid": pid, "start_ticks": start_ticks, "name": name_of(p, pid), "reason": reason,
        }));
    };
    if !recheck(world, pid, start_ticks)? {
        skip(report, "it had already exited");
        return Ok(false);
    }
    match world.signal(pid, start_ticks, sig) {
        Ok(()) => Ok(true),
        Err(SignalError::Gone { .. }) => {
            skip(report, "it had already exited");
            Ok(false)
        }
        Err(SignalError::Replaced { .. }) => {
            skip(
                report,
                "its pid now belongs to another process, which was not signalled",
            );
            Ok(false)
        }
        Err(e) => Err(format!("{} {e}", plan::sig_str(sig))),
    }
}

/// The signalled processes still alive after waiting up to `timeout`.
fn wait_exit<'a>(
    world: &dyn World,
    pacer: &dyn Pacer,
    sent: &'a [Sent],
    timeout: Duration,
) -> Vec<&'a Sent> {
    let deadline = pacer.now().saturating_add(timeout);
    loop {
        let alive: Vec<&Sent> = sent
            .iter()
            .filter(|s| world.alive(s.pid, s.start_ticks))
            .collect();
        if alive.is_empty() || pacer.now() >= deadline {
            return alive;
        }
        pacer.pause(HOLDMAP_STOP_POLL);
    }
}

fn port_free(world: &dyn World, port: u16, protocol: Option<Protocol>) -> Result<bool, String> {
    let snap = world
        .observe()
        .map_err(|e| format!("could not read the machine to verify port {port}: {e}"))?;
    Ok(!snap
        .sockets
        .iter()
        .any(|s| plan::is_listening_on(&s.row, port, protocol)))
}

fn run_plan(
    world: &dyn World,
    pacer: &dyn Pacer,
    p: &StopPlan,
    report: &mut Report,
) -> Result<(), String> {
    let mut sent: Vec<Sent> = Vec::new();
    let ran = run_steps(world, pacer, p, report, &mut sent);
    // A plan that failed part-way still says what it did: the processes it signalled that have
    // exited are in `stopped`, and the failure names those still running.
    ran.map_err(|why| {
        let already: Vec<i64> = report
            .stopped
            .iter()
            .filter_map(|s| s["pid"].as_i64())
            .collect();
        let fresh: Vec<Sent> = sent
            .iter()
            .filter(|s| !already.contains(&i64::from(s.pid)))
            .map(|s| Sent {
                pid: s.pid,
                start_ticks: s.start_ticks,
                sig: s.sig,
            })
            .collect();
        record_stopped(world, p, &fresh, report);
        let running: Vec<String> = sent
            .iter()
            .filter(|s| world.alive(s.pid, s.start_ticks))
            .map(|s| {
                format!(
                    "{} (pid {}, sent {})",
                    name_of(p, s.pid),
                    s.pid,
                    plan::sig_str(s.sig)
                )
            })
            .collect();
        if running.is_empty() {
            why
        } else {
            format!("{why}; signalled and still running: {}", running.join(", "))
        }
    })
}

fn run_steps(
    world: &dyn World,
    pacer: &dyn Pacer,
    p: &StopPlan,
    report: &mut Report,
    sent: &mut Vec<Sent>,
) -> Result<(), String> {
    for step in &p.steps {
        match *step {
            Step::Signal {
                pid,
                start_ticks,
                sig,
            } => {
                if send(world, p, pid, start_ticks, sig, report)? {
                    sent.push(Sent {
                        pid,
                        start_ticks,
                        sig,
                    });
                }
            }
            Step::Wait { timeout, then_kill } => {
                let survivors: Vec<(i32, u64)> = wait_exit(world, pacer, sent, timeout)
                    .iter()
                    .map(|s| (s.pid, s.start_ticks))
                    .collect();
                if !survivors.is_empty() && then_kill {
                    for &(pid, start_ticks) in &survivors {
                        if send(world, p, pid, start_ticks, Sig::Kill, report)?
                            && let Some(s) = sent.iter_mut().find(|s| s.pid == pid)
                        {
                            s.sig = Sig::Kill;
                        }
                    }
                }
                let left = if survivors.is_empty() {
                    Vec::new()
                } else {
                    wait_exit(world, pacer, sent, HOLDMAP_STOP_KILL_WAIT)
                };
                record_stopped(world, p, sent, report);
                if let Some(s) = left.first() {
                    return Err(format!(
                        "{} (pid {}) did not exit after {}",
                        name_of(p, s.pid),
                        s.pid,
                        plan::sig_str(s.sig)
                    ));
                }
            }
            Step::Verify { port, protocol } => {
                let deadline = pacer.now().saturating_add(HOLDMAP_STOP_KILL_WAIT);
                let free = loop {
                    let free = port_free(world, port, protocol)?;
                    if free || pacer.now() >= deadline {
                        break free;
                    }
                    pacer.pause(HOLDMAP_STOP_POLL);
                };
                report.any_port = true;
                report.all_free = if report.ports.is_empty() {
                    free
                } else {
                    report.all_free && free
                };
                report.ports.push(json!({
                    "port": port, "protocol": plan::protocol_str(protocol), "free": free,
                }));
                if !free {
                    return Err(format!(
                        "port {port} ({}) is still in use after the stop; look at it with \
                         explain_port",
                        plan::protocol_str(protocol)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn record_stopped(world: &dyn World, p: &StopPlan, sent: &[Sent], report: &mut Report) {
    for s in sent.iter().filter(|s| !world.alive(s.pid, s.start_ticks)) {
        report.stopped.push(json!({
            "pid": s.pid, "start_ticks": s.start_ticks, "name": name_of(p, s.pid),
            "signal": plan::sig_str(s.sig),
        }));
    }
}
