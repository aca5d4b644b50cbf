//! Confirmation handles: one per permitted preview, one use, `HOLDMAP_HANDLE_TTL`, one session,
//! at most `HOLDMAP_HANDLES_MAX` kept (the oldest evicted). A handle is `<16 hex>-<n>`: a random
//! namespace drawn per session and a counter.
//!
//! Not authentication and not proof that a person approved: a handle binds an execution to the
//! request and effects a preview showed. Owns: the retained previews and their lifetimes. Must
//! never: hand back a retained preview twice, or after its lifetime, or to another session; issue
//! a handle without a random namespace (no predictable fallback); retain a preview over the
//! target or byte limits.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use crate::holdmap::plan::{PlanOptions, StopPlan, to_json};
use crate::limits::{
    HOLDMAP_HANDLE_TTL, HOLDMAP_HANDLES_MAX, HOLDMAP_PREVIEW_BYTES_MAX, HOLDMAP_PREVIEW_TARGETS_MAX,
};

/// What a stop was asked for, normalised: an execution must ask for exactly the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    Port {
        port: u16,
        options: PlanOptions,
    },
    /// `query` trimmed and lowercased.
    Agents {
        query: String,
        force: bool,
    },
}

/// What a permitted preview keeps for its execution: the request, the plans it showed (these,
/// never fresh replacements, are what runs) and, for agents, the selected agents by identity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetainedPreview {
    pub(crate) request: Request,
    pub(crate) plans: Vec<StopPlan>,
    /// (pid, start ticks) of each selected agent, sorted.
    pub(crate) agents: Vec<(i32, u64)>,
}

impl RetainedPreview {
    fn to_json(&self) -> Value {
        let request = match &self.request {
            Request::Port { port, options } => json!({
                "port": port, "force": options.force, "allow_non_dev": options.allow_non_dev,
            }),
            Request::Agents { query, force } => json!({"agent": query, "force": force}),
        };
        json!({
            "request": request,
            "plans": self.plans.iter().map(to_json).collect::<Vec<_>>(),
            "agents": self.agents,
        })
    }
}

/// Why no handle was issued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoHandle {
    #[error("the preview has nothing to stop")]
    Empty,
    #[error(
        "the preview covers {0} ports or agents, more than {HOLDMAP_PREVIEW_TARGETS_MAX}; use a narrower filter"
    )]
    TooManyTargets(usize),
    #[error(
        "the preview is larger than {HOLDMAP_PREVIEW_BYTES_MAX} bytes to retain; use a narrower filter"
    )]
    TooLarge,
    #[error("holdmap could not draw a random handle namespace for this session")]
    NoRandom,
}

/// Why a handle was not accepted. One reason for every case, so a caller learns nothing about
/// other sessions' handles.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Why {
    #[error(
        "no such handle in this session: expired, used, from another session, or never issued. Nothing was stopped; review a new preview."
    )]
    NoSuchHandle,
}

/// Where handles read the time; tests substitute their own.
pub(crate) type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

struct Entry {
    id: String,
    issued: Instant,
    retained: RetainedPreview,
}

/// The session's handles.
pub(crate) struct Handles {
    namespace: Option<String>,
    next: u64,
    live: VecDeque<Entry>,
    clock: Clock,
}

impl std::fmt::Debug for Handles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the namespace: it is what makes handles unguessable.
        f.debug_struct("Handles")
            .field("live", &self.live.len())
            .finish_non_exhaustive()
    }
}

impl Default for Handles {
    fn default() -> Handles {
        Handles::new()
    }
}

impl Handles {
    pub(crate) fn new() -> Handles {
        Handles::with_clock(Arc::new(Instant::now))
    }

    pub(crate) fn with_clock(clock: Clock) -> Handles {
        Handles {
            namespace: crate::ids::random_hex(8).ok(),
            next: 0,
            live: VecDeque::new(),
            clock,
        }
    }

    /// Forgets every handle (a re-`initialize`).
    pub(crate) fn clear(&mut self) {
        self.live.clear();
    }

    /// How many previews are retained now.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// Retains a permitted preview and returns its handle. The oldest preview goes when the
    /// session already keeps `HOLDMAP_HANDLES_MAX`.
    pub(crate) fn issue(&mut self, retained: RetainedPreview) -> Result<String, NoHandle> {
        let targets = retained.plans.len().max(retained.agents.len());
        if retained.plans.is_empty() {
            return Err(NoHandle::Empty);
        }
        if targets > HOLDMAP_PREVIEW_TARGETS_MAX {
            return Err(NoHandle::TooManyTargets(targets));
        }
        if !fits(&retained.to_json(), HOLDMAP_PREVIEW_BYTES_MAX) {
            return Err(NoHandle::TooLarge);
        }
        let namespace = self.namespace.as_deref().ok_or(NoHandle::NoRandom)?;
        self.next = self.next.saturating_add(1);
        let id = format!("{namespace}-{}", self.next);
        let now = (self.clock)();
        self.live
            .retain(|e| now.saturating_duration_since(e.issued) < HOLDMAP_HANDLE_TTL);
        while self.live.len() >= HOLDMAP_HANDLES_MAX {
            self.live.pop_front();
        }
        self.live.push_back(Entry {
            id: id.clone(),
            issued: now,
            retained,
        });
        Ok(id)
    }

    /// Consumes the handle: the retained preview, once, within its lifetime.
    pub(crate) fn take(&mut self, id: &str) -> Result<RetainedPreview, Why> {
        let at = self
            .live
            .iter()
            .position(|e| e.id == id)
            .ok_or(Why::NoSuchHandle)?;
        let entry = self.live.remove(at).ok_or(Why::NoSuchHandle)?;
        let now = (self.clock)();
        if now.saturating_duration_since(entry.issued) >= HOLDMAP_HANDLE_TTL {
            return Err(Why::NoSuchHandle);
        }
        Ok(entry.retained)
    }
}

/// Whether `value` serialises in at most `limit` bytes; stops writing once over.
fn fits(value: &Value, limit: usize) -> bool {
    struct Capped {
        left: usize,
    }
    impl Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.left = self
                .left
                .checked_sub(buf.len())
                .ok_or_else(|| std::io::Error::other("over the limit"))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Capped { left: limit }, value).is_ok()
}

#[cfg(test)]
mod tests;
