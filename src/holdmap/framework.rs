//! What kind of server a process is, from its name and command line (vite, next, webpack,
//! python -m http.server, flask, uvicorn, rails, cargo run …).

use crate::os::procs::Proc;

/// A recognised framework or server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framework {
    pub(crate) name: &'static str,
    pub(crate) category: Category,
}

/// What the framework says about the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    /// A development server (vite, next dev, http.server …).
    Dev,
    /// An application or database server a developer runs (postgres, redis …).
    App,
    /// Part of the system (sshd, cupsd, systemd-resolved …).
    System,
}

pub(crate) fn framework_of(_p: &Proc) -> Option<Framework> {
    None
}
