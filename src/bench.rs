//! `holdcall bench-decisions` (hidden): the load generator `tools/bench` drives to time the
//! daemon's decision path. Peer verification lets only this binary talk to the daemon, so the
//! timing client has to live here; it connects exactly as a relay does (`ipc::connect_or_start`,
//! `session.start`, then one `call.request` at a time per connection) and times each round trip,
//! so the path measured is the real one: verification, the session checks, Cedar, the journal
//! commit, the answer.
//!
//! Owns: nothing but its own sessions. Must never: be needed by a relay or the daemon, or treat
//! an answer that is not a decision for its own call as a success (that run fails instead).

#![deny(clippy::print_stdout)]

use std::time::{Duration, Instant};

use crate::config::Home;
use crate::ipc::{self, SessionRequest, SessionResponse, Verdict, WireError};
use crate::limits;
use crate::relay::classify;

/// What `holdcall bench-decisions` was asked to do.
#[derive(Debug, Clone)]
pub(crate) struct BenchOptions {
    /// Concurrent connections, each one relay's session.
    pub relays: usize,
    /// Timed calls per relay.
    pub calls: usize,
    /// Untimed calls per relay before the timed ones.
    pub warmup: usize,
    pub connector: String,
    pub tool: String,
}

/// The timed part of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct BenchReport {
    pub relays: usize,
    pub calls_per_relay: usize,
    /// Timed decisions across all relays.
    pub decisions: usize,
    /// From the first timed call to the last answer, all relays together.
    pub wall_ns: u64,
    pub decisions_per_s: f64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub allow: usize,
    pub deny: usize,
    pub ask: usize,
    pub undecided: usize,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum BenchError {
    #[error(transparent)]
    #[diagnostic(transparent)]
    Wire(#[from] WireError),
    #[error("relay {relay}: {what}")]
    #[diagnostic(
        code(holdcall::bench::answer),
        help("the daemon did not answer as it answers a relay; read its log")
    )]
    Answer { relay: usize, what: String },
    #[error("{0}")]
    #[diagnostic(
        code(holdcall::bench::options),
        help(
            "holdcall bench-decisions --relays N --calls M [--warmup W] [--connector C] [--tool T] [--json]"
        )
    )]
    Options(String),
}

/// The value at quantile `q` (nearest rank) of sorted samples; 0 for none.
pub(crate) fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    sorted.get(i).copied().unwrap_or(0)
}

/// A session id no earlier run used: the time, the pid and the relay's number, digested.
fn session_id(relay: usize) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!("bench-{t}-{}-{relay}", std::process::id());
    crate::ids::sha256_hex(seed.as_bytes())
        .chars()
        .take(32)
        .collect()
}

/// One relay's connection with its session open.
struct Relay {
    n: usize,
    conn: ipc::SessionConn,
    session_id: String,
    seq: i64,
}

impl Relay {
    async fn open(home: &Home, n: usize, connector: &str) -> Result<Relay, BenchError> {
        let mut conn = ipc::connect_or_start(home, crate::limits::DAEMON_READY_TIMEOUT)
            .await?
            .session();
        let session_id = session_id(n);
        let started = conn
            .call(
                &SessionRequest::SessionStart {
                    session_id: session_id.clone(),
                    connector: connector.to_string(),
                    client: Some("bench".into()),
                    connector_from: None,
                },
                limits::DECISION_TIMEOUT,
            )
            .await?;
        if !matches!(started, SessionResponse::SessionOpened { launch: None }) {
            return Err(BenchError::Answer {
                relay: n,
                what: format!("session.start answered {started:?}"),
            });
        }
        Ok(Relay {
            n,
            conn,
            session_id,
            seq: 0,
        })
    }

    /// One decision round trip, as the relay makes it; the verdict and how long it took.
    async fn call(
        &mut self,
        tool: &str,
        digest: &str,
        args: &str,
    ) -> Result<(Verdict, Duration), BenchError> {
        self.seq += 1;
        let req = SessionRequest::CallRequest {
            session_id: self.session_id.clone(),
            seq: self.seq,
            tool: tool.to_string(),
            args_digest: digest.to_string(),
            arguments: Some(args.to_string()),
            arguments_omitted: false,
            retry_of: None,
        };
        let t0 = Instant::now();
        let answer = self.conn.call(&req, limits::DECISION_TIMEOUT).await?;
        let took = t0.elapsed();
        match answer {
            SessionResponse::Decision {
                session_id,
                seq,
                decision,
                ..
            } if session_id == self.session_id && seq == self.seq => Ok((decision, took)),
            other => Err(BenchError::Answer {
                relay: self.n,
                what: format!("call {} answered {other:?}", self.seq),
            }),
        }
    }

    async fn close(mut self) {
        let _ = self
            .conn
            .call(
                &SessionRequest::SessionEnd {
                    session_id: self.session_id.clone(),
                    protocol_version: None,
                    ended: None,
                },
                limits::DECISION_TIMEOUT,
            )
            .await;
    }
}

/// Opens every relay's session, runs the warmup, then times `calls` decisions per relay with
/// every relay running at once (one call in flight per relay, as a relay does).
pub(crate) async fn run(home: Home, opts: BenchOptions) -> Result<BenchReport, BenchError> {
    if opts.relays == 0 || opts.calls == 0 {
        return Err(BenchError::Options(
            "--relays and --calls must be at least 1".into(),
        ));
    }
    let args = r#"{"text":"hello from the benchmark"}"#;
    let digest = classify::args_digest(Some(args.as_bytes()));
    let mut relays = Vec::with_capacity(opts.relays);
    for n in 0..opts.relays {
        let mut r = Relay::open(&home, n, &opts.connector).await?;
        for _ in 0..opts.warmup {
            r.call(&opts.tool, &digest, args).await?;
        }
        relays.push(r);
    }
    let start = Instant::now();
    let tasks: Vec<_> = relays
        .into_iter()
        .map(|mut r| {
            let (tool, digest) = (opts.tool.clone(), digest.clone());
            let calls = opts.calls;
            tokio::spawn(async move {
                let mut out = Vec::with_capacity(calls);
                for _ in 0..calls {
                    out.push(r.call(&tool, &digest, args).await?);
                }
                Ok::<_, BenchError>((r, out))
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(opts.relays * opts.calls);
    let mut open = Vec::with_capacity(opts.relays);
    for (n, t) in tasks.into_iter().enumerate() {
        let (r, out) = t.await.map_err(|e| BenchError::Answer {
            relay: n,
            what: e.to_string(),
        })??;
        samples.extend(out);
        open.push(r);
    }
    let wall = start.elapsed();
    for r in open {
        r.close().await;
    }
    Ok(report(&opts, &samples, wall))
}

fn report(opts: &BenchOptions, samples: &[(Verdict, Duration)], wall: Duration) -> BenchReport {
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut sorted: Vec<u64> = samples.iter().map(|(_, d)| nanos(*d)).collect();
    sorted.sort_unstable();
    let count = |v: Verdict| samples.iter().filter(|(x, _)| *x == v).count();
    let total: u64 = sorted.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let n = sorted.len().max(1) as u64;
    BenchReport {
        relays: opts.relays,
        calls_per_relay: opts.calls,
        decisions: samples.len(),
        wall_ns: nanos(wall),
        decisions_per_s: samples.len() as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        mean_ns: total / n,
        p50_ns: percentile(&sorted, 0.50),
        p95_ns: percentile(&sorted, 0.95),
        p99_ns: percentile(&sorted, 0.99),
        max_ns: sorted.last().copied().unwrap_or(0),
        allow: count(Verdict::Allow),
        deny: count(Verdict::Deny),
        ask: count(Verdict::Held),
        undecided: count(Verdict::Undecided),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.50), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn session_ids_are_32_hex_characters_and_differ_per_relay() {
        let (a, b) = (session_id(0), session_id(1));
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
