//! `tools/list` answers: the relay notes each `tools/list` request it forwards (by raw id), and
//! when the server answers one, reads the tool definitions from the answer's bytes
//! (`mcp::tools`), sends them to the daemon to pin (`tools.listed`) and forwards the line as it
//! came, unless the daemon names tools to hide (the connector's hide-denied is on): then, and
//! only then, the listing is forwarded re-serialised without them (`mcp::tools::without_tools`,
//! every other byte kept). The daemon has journaled `tools.hidden` before it says so.
//!
//! Must never: rewrite a line the daemon did not name tools to hide for, hold an answer longer
//! than `limits::DECISION_TIMEOUT` (no answer in time forwards the original), or note more than
//! `LISTINGS_MAX` requests. Batches are left out: a `tools/list` inside a batch is not pinned.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::link::Link;
use crate::ipc::{SessionRequest, SessionResponse};
use crate::limits;
use crate::mcp::envelope::{Message, same_id};
use crate::mcp::tools::{read_listing, without_tools};

/// Most `tools/list` requests awaiting their answer that the relay remembers; past it the
/// oldest is forgotten (its answer is forwarded unpinned).
const LISTINGS_MAX: usize = 64;

/// The raw ids of forwarded `tools/list` requests not yet answered.
pub(super) type Listings = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// Notes a client request if it is a `tools/list` with an id.
pub(super) fn note_request(listings: &Listings, msg: &Message<'_>) {
    if let (Some(id), Some("tools/list")) = (msg.id, msg.method.as_deref())
        && let Ok(mut l) = listings.lock()
    {
        if l.len() >= LISTINGS_MAX {
            l.pop_front();
        }
        l.push_back(id.to_vec());
    }
}

/// The line to forward instead of `line` when it answers a noted `tools/list` and the daemon
/// named tools to hide; `None` forwards `line` as it came.
pub(super) async fn on_answer(
    listings: &Listings,
    link: &Link,
    session_id: &str,
    msg: &Message<'_>,
    line: &[u8],
) -> Option<Vec<u8>> {
    if msg.method.is_some() {
        return None;
    }
    let id = msg.id?;
    {
        let mut l = listings.lock().ok()?;
        let at = l.iter().position(|noted| same_id(noted, id))?;
        l.remove(at);
    }
    let listing = read_listing(msg.result?)?;
    let size: usize = listing
        .tools
        .iter()
        .map(|t| t.canonical.len() + t.name.len() + t.hash.len())
        .sum();
    let too_large = size > limits::TOOLS_LISTING_BYTES_MAX;
    let req = SessionRequest::ToolsListed {
        session_id: session_id.to_string(),
        tools: if too_large { Vec::new() } else { listing.tools },
        unreadable: listing.unreadable,
        complete: listing.complete,
        too_large,
    };
    match link.decide(req).await {
        Ok(SessionResponse::ToolsSeen { hide }) if !hide.is_empty() => without_tools(line, &hide),
        Ok(SessionResponse::ToolsSeen { .. }) => None,
        Ok(other) => {
            eprintln!(
                "holdcall: the daemon did not pin this tools/list answer ({}); it is forwarded as it came",
                match other {
                    SessionResponse::Error { message } => crate::text::visible(&message),
                    _ => "an unexpected answer".into(),
                }
            );
            None
        }
        Err(_) => None,
    }
}
