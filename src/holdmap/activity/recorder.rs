//! The recorder of `holdmap mcp --record-activity`: the server notes each finished call's
//! `Record` (after its answer is written), a bounded queue holds it, and one background task
//! posts each to the collector named by `HOLDMAP_ACTIVITY_ENDPOINT` with
//! `HOLDMAP_ACTIVITY_TOKEN`, with a short deadline.
//!
//! Must never: wait for the collector on the server's behalf (`note` only tries to queue);
//! send to an endpoint that is not loopback; send anything but a `Record`; fail, panic or stop
//! the server when delivery fails (a lost record is counted in `dropped_before`, nothing more).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::holdmap::activity::http::{Endpoint, Method, exchange};
use crate::holdmap::activity::record::{Record, Status};
use crate::holdmap::activity::{ENDPOINT_VAR, TOKEN_VAR, check_token};
use crate::limits::{
    HOLDMAP_ACTIVITY_FLUSH_WAIT, HOLDMAP_ACTIVITY_QUEUE_MAX, HOLDMAP_ACTIVITY_SEND_TIMEOUT,
};

/// A call being handled: what its record needs from the start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    tool: &'static str,
    started_at_ms: u64,
    at: Instant,
    request_bytes: u64,
}

impl Started {
    /// A call of the catalog's tool `tool` that arrived as a message of `request_bytes`.
    pub(crate) fn now(tool: &'static str, request_bytes: usize) -> Started {
        let started_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Started {
            tool,
            started_at_ms,
            at: Instant::now(),
            request_bytes: u64::try_from(request_bytes).unwrap_or(u64::MAX),
        }
    }

    /// The record of the call, ended now with `status` and an answer of `result_bytes`.
    pub(crate) fn finish(self, status: Status, result_bytes: usize) -> Record {
        Record {
            tool: self.tool,
            status,
            started_at_ms: self.started_at_ms,
            duration_ms: u64::try_from(self.at.elapsed().as_millis()).unwrap_or(u64::MAX),
            request_bytes: self.request_bytes,
            result_bytes: u64::try_from(result_bytes).unwrap_or(u64::MAX),
            dropped_before: 0,
        }
    }
}

/// The server's side of recording: a bounded queue to the delivery task, and the count of
/// records lost so far (queue full, or delivery failed).
pub(crate) struct Recorder {
    queue: mpsc::Sender<Record>,
    dropped: Arc<AtomicU64>,
    task: Option<JoinHandle<()>>,
}

impl Recorder {
    /// The recorder `--record-activity` asks for, from the environment; `None` (with a warning
    /// on stderr saying why and that tools still work) when the variables are missing or name
    /// somewhere other than loopback. Must be called inside the runtime.
    pub(crate) fn from_env() -> Option<Recorder> {
        let endpoint = std::env::var(ENDPOINT_VAR).ok().filter(|v| !v.is_empty());
        let token = std::env::var(TOKEN_VAR).ok().filter(|v| !v.is_empty());
        let (Some(endpoint), Some(token)) = (endpoint, token) else {
            tracing::warn!(
                "--record-activity: {ENDPOINT_VAR} and {TOKEN_VAR} must both be set (`holdmap \
                 activity serve` prints them); nothing will be recorded, the tools work as usual"
            );
            return None;
        };
        let endpoint = match Endpoint::parse(&endpoint) {
            Ok(endpoint) => endpoint,
            Err(why) => {
                tracing::warn!(
                    "--record-activity: refusing to send to {ENDPOINT_VAR}: {why}; nothing \
                     will be recorded, the tools work as usual"
                );
                return None;
            }
        };
        if let Err(why) = check_token(&token) {
            tracing::warn!(
                "--record-activity: {TOKEN_VAR} {why}; nothing will be recorded, the tools work \
                 as usual"
            );
            return None;
        }
        tracing::info!(endpoint = %endpoint.url(), "recording tool-call metadata");
        Some(Recorder::start(endpoint, token))
    }

    /// A recorder delivering to `endpoint`.
    fn start(endpoint: Endpoint, token: String) -> Recorder {
        let (queue, mut records) = mpsc::channel::<Record>(HOLDMAP_ACTIVITY_QUEUE_MAX);
        let dropped = Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        let task = tokio::spawn(async move {
            let mut warned = false;
            while let Some(mut record) = records.recv().await {
                record.dropped_before = lost.load(Ordering::Relaxed);
                let Ok(body) = serde_json::to_vec(&record.to_json()) else {
                    continue;
                };
                let sent = exchange(
                    &endpoint,
                    Method::Post,
                    &token,
                    &body,
                    4096,
                    HOLDMAP_ACTIVITY_SEND_TIMEOUT,
                )
                .await;
                let failure = match sent {
                    Ok((status, _)) if (200..300).contains(&status) => None,
                    Ok((401, _)) => Some("the collector refused the token".to_owned()),
                    Ok((status, _)) => Some(format!("the collector answered {status}")),
                    Err(e) => Some(e.to_string()),
                };
                if let Some(why) = failure {
                    lost.fetch_add(1, Ordering::Relaxed);
                    // Said once, so a collector that has gone does not fill the log.
                    if !warned {
                        warned = true;
                        tracing::warn!(
                            "--record-activity: a record could not be delivered ({why}); \
                             later failures are counted, not logged; the tools work as usual"
                        );
                    }
                }
            }
        });
        Recorder {
            queue,
            dropped,
            task: Some(task),
        }
    }

    /// A recorder whose queue the test reads itself (no delivery task).
    #[cfg(test)]
    pub(crate) fn detached() -> (Recorder, mpsc::Receiver<Record>) {
        let (queue, records) = mpsc::channel(HOLDMAP_ACTIVITY_QUEUE_MAX);
        let recorder = Recorder {
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
            task: None,
        };
        (recorder, records)
    }

    /// Queues `record` for delivery without waiting; a full queue drops it and counts it.
    pub(crate) fn note(&self, record: Record) {
        if self.queue.try_send(record).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many records have been lost so far.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// At the end of the session: gives queued records `HOLDMAP_ACTIVITY_FLUSH_WAIT` to be
    /// delivered, then gives up on them.
    pub(crate) async fn close(self) {
        self.close_within(HOLDMAP_ACTIVITY_FLUSH_WAIT).await;
    }

    /// `close` with its wait given (tests give a long one: a loaded machine is slow).
    async fn close_within(mut self, wait: std::time::Duration) {
        let task = self.task.take();
        drop(self);
        if let Some(task) = task {
            let abort = task.abort_handle();
            if tokio::time::timeout(wait, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::holdmap::activity::collector::{self, Collector, RECORDS_PATH};

    const TOKEN: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    fn record() -> Record {
        Started::now("list_ports", 100).finish(Status::Ok, 2000)
    }

    #[tokio::test]
    async fn a_full_queue_drops_new_records_and_counts_them_without_waiting() {
        let (recorder, mut records) = Recorder::detached();
        for _ in 0..HOLDMAP_ACTIVITY_QUEUE_MAX + 3 {
            recorder.note(record());
        }
        assert_eq!(recorder.dropped(), 3);
        let mut queued = 0;
        while records.try_recv().is_ok() {
            queued += 1;
        }
        assert_eq!(queued, HOLDMAP_ACTIVITY_QUEUE_MAX);
    }

    #[tokio::test]
    async fn records_reach_a_collector_and_a_later_one_counts_the_lost() {
        let (listener, port) = collector::bind().await.unwrap();
        let c = Arc::new(Collector::new(TOKEN.to_owned(), port));
        let serving = tokio::spawn(collector::accept_loop(listener, c.clone()));
        let endpoint = Endpoint::new(Ipv4Addr::LOCALHOST.into(), port, RECORDS_PATH);
        let recorder = Recorder::start(endpoint, TOKEN.to_owned());
        recorder.note(record());
        recorder.close_within(crate::limits::HOLDMAP_WAIT_MAX).await;
        let snap = c.store.lock().unwrap().snapshot();
        assert_eq!(snap["records"][0]["tool"], "list_ports");
        assert_eq!(snap["records"][0]["dropped_before"], 0);
        serving.abort();
    }

    #[tokio::test]
    async fn a_collector_that_is_gone_loses_the_record_and_counts_it() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let endpoint = Endpoint::new(Ipv4Addr::LOCALHOST.into(), port, RECORDS_PATH);
        let recorder = Recorder::start(endpoint, TOKEN.to_owned());
        let dropped = recorder.dropped.clone();
        recorder.note(record());
        recorder.close_within(crate::limits::HOLDMAP_WAIT_MAX).await;
        assert_eq!(dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_finished_call_keeps_the_catalog_name_and_its_sizes_only() {
        let r = Started::now("list_ports", 120).finish(Status::Cancelled, 0);
        assert_eq!(r.tool, "list_ports");
        assert_eq!(r.request_bytes, 120);
        assert_eq!(r.result_bytes, 0);
        assert_eq!(r.status, Status::Cancelled);
    }
}
