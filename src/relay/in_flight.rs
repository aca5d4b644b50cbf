//! Calls forwarded to the server and awaiting its answer, and the `requestState`s that make a
//! client's retry the same call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::limits;

/// Calls allowed and forwarded, keyed by the raw bytes of their JSON-RPC id, awaiting the
/// server's answer so the outcome can be recorded.
pub(super) type InFlight = Arc<Mutex<HashMap<Vec<u8>, Forwarded>>>;

/// One call forwarded to the server and not yet answered.
#[derive(Debug, Clone)]
pub(super) struct Forwarded {
    pub(super) seq: i64,
    pub(super) started: Instant,
    /// What a retry must match to be the same call: the original call's seq (a retry's own
    /// answer can ask for input again), its tool, and the digest of its arguments.
    pub(super) call: RetryOf,
}

/// The call a `requestState` belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RetryOf {
    pub(super) origin: i64,
    pub(super) tool: String,
    pub(super) digest: String,
}

/// The `requestState`s of `input_required` answers, each waiting for the client's retry, oldest
/// first. Bounded (`limits::RETRY_STATES_MAX`): a forgotten state only makes its retry count as
/// a new call.
#[derive(Debug, Default)]
pub(super) struct RetryStates {
    pub(super) by_state: HashMap<Vec<u8>, RetryOf>,
    pub(super) order: std::collections::VecDeque<Vec<u8>>,
}

impl RetryStates {
    pub(super) fn remember(&mut self, state: Vec<u8>, call: RetryOf) {
        if state.len() > limits::REQUEST_STATE_BYTES_MAX {
            return;
        }
        if self.by_state.insert(state.clone(), call).is_none() {
            self.order.push_back(state);
        }
        while self.order.len() > limits::RETRY_STATES_MAX {
            if let Some(old) = self.order.pop_front() {
                self.by_state.remove(&old);
            }
        }
    }

    /// The original call, if `state` was given for a call of `tool` with these same arguments;
    /// the state is used up. Anything else is a new call (and the state stays for its retry).
    pub(super) fn take(&mut self, state: &[u8], tool: &str, digest: &str) -> Option<i64> {
        let call = self.by_state.get(state)?;
        if call.tool != tool || call.digest != digest {
            return None;
        }
        let origin = call.origin;
        self.by_state.remove(state);
        self.order.retain(|s| s.as_slice() != state);
        Some(origin)
    }
}

pub(super) type Retries = Arc<Mutex<RetryStates>>;
