//! The operating system, read and asked through one API, shared by both binaries: who is on the
//! other end of a socket (`peer`), what a process runs and who its parent is (`process`), a
//! child process group's life: dying with its parent, being stopped (`child`), the socket tables
//! (`sockets`), the whole process table (`procs`), and signals pinned to one process
//! (`signal`).
//!
//! Owns: the kernel's facts, with the syscalls and `/proc` reads behind them. Must never: import
//! anything Holdcall-specific (only std, crates, and `crate::limits`, `crate::ids`,
//! `crate::text`), judge what a fact means (whether a peer is one of ours, whether an agent is
//! enrolled: that is `agents`), or word a refusal.
//!
//! One backend today, Linux. Elsewhere the socket-credential calls and death-with-parent are an
//! `Unsupported` error (`unsupported`) and `/proc` reads fail as "not found", so a caller
//! refuses or says "could not be established" instead of guessing.

pub(crate) mod child;
pub(crate) mod peer;
pub(crate) mod process;
pub(crate) mod procs;
pub(crate) mod signal;
pub(crate) mod sockets;

/// The error of a call this operating system has no backend for.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn unsupported(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("{what} is supported on Linux only"),
    )
}
