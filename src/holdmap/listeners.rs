//! A snapshot read as listening ports: each (protocol, port, owner) with its addresses, exposure,
//! process, redacted command, project, framework, whether it is a dev server, whether it is the
//! current account's, and whether it is protected.

use std::net::IpAddr;

use crate::holdmap::framework::Framework;
use crate::holdmap::model::Snapshot;
use crate::holdmap::project::Project;
use crate::holdmap::protect::Protection;
use crate::os::sockets::Protocol;

/// Who can reach a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exposure {
    /// Only this machine (127.0.0.0/8, ::1, v4-mapped loopback).
    Loopback,
    /// Every interface (0.0.0.0, ::).
    AllInterfaces,
    /// One or more specific non-loopback addresses.
    Specific,
}

impl Exposure {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Exposure::Loopback => "loopback",
            Exposure::AllInterfaces => "all_interfaces",
            Exposure::Specific => "specific",
        }
    }
}

/// One listening port and what owns it.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub(crate) port: u16,
    pub(crate) protocol: Protocol,
    pub(crate) addresses: Vec<IpAddr>,
    pub(crate) exposure: Exposure,
    /// The owning process (the topmost of the processes that hold the socket); `None` when the
    /// owner could not be seen (another account's process).
    pub(crate) pid: Option<i32>,
    /// Every process that holds the socket.
    pub(crate) pids: Vec<i32>,
    /// The socket's uid.
    pub(crate) uid: u32,
    /// The owner runs as holdmap's own account.
    pub(crate) is_mine: bool,
    pub(crate) process: Option<String>,
    /// The owner's command line, redacted (`redact`).
    pub(crate) command: Option<String>,
    pub(crate) framework: Option<Framework>,
    pub(crate) project: Option<Project>,
    pub(crate) is_dev: bool,
    pub(crate) protected: Option<Protection>,
}

/// Every listening TCP socket and bound UDP socket of the snapshot, grouped by (protocol,
/// port, owner), in (port, protocol) order.
pub(crate) fn listeners(_snap: &Snapshot) -> Vec<Listener> {
    Vec::new()
}
