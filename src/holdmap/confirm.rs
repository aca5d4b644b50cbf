//! Confirmation handles: one per permitted preview, one use, 300 s, one session, at most 32 kept.
//! Not authentication and not proof that a person approved: they bind an execution to the
//! effects a preview showed.

/// The session's handles.
#[derive(Debug, Default)]
pub(crate) struct Handles {}

impl Handles {
    pub(crate) fn new() -> Handles {
        Handles {}
    }

    /// Forgets every handle (a re-`initialize`).
    pub(crate) fn clear(&mut self) {}
}
