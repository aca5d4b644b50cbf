//! Who the agents are: each process recognised as an agent product (by its executable and
//! process tree, never by a name it chose for itself), the topmost process of a product as the
//! agent and the same product below it as its helper, and every other process owned by its
//! nearest agent ancestor. A nested agent (Claude Code in Cursor's terminal) is its own agent
//! with the outer one as its parent.
//!
//! Must never: recognise an agent by `comm` or `argv[0]` when its executable says otherwise;
//! treat a flag's value or inline code as an entry script.

use crate::holdmap::model::Snapshot;

/// One agent found in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) pid: i32,
    /// The product's id (`claude-code`, …): see `list` for the product table.
    pub(crate) product: &'static str,
    /// Every process it owns, itself included, sorted.
    pub(crate) members: Vec<i32>,
    /// The agent it runs inside, when nested.
    pub(crate) parent: Option<i32>,
}

/// Every agent of the snapshot, in pid order. (Skeleton: filled in by the detection work.)
pub(crate) fn agents(_snap: &Snapshot) -> Vec<Found> {
    Vec::new()
}
