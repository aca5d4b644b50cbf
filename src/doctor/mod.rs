//! `holdcall doctor`: one check per thing that must be right for calls to flow through Holdcall,
//! each OK, WARN or FAIL with a one-line remedy.
//!
//! Owns: the checks, as a list of functions of one signature (`CHECKS`), so a new check is one
//! function added to the list. Must never: start the daemon (it only probes the socket and
//! talks to a verified daemon), write anything (the journal is opened read-only, client files
//! are only read), or print an environment value.

use std::path::PathBuf;

use serde::Serialize;

mod clients;
mod connectors;
mod daemon;
mod install;
mod journal;
mod tools;

use crate::clients::Places;
use crate::config::Home;

use clients::clients;
use connectors::{connectors, credential_store};
use daemon::daemon;
use install::{binary, config_toml};
use journal::{database_files, enrolments, journal, policy};
use tools::tool_definitions;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Status::Ok => "OK  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub check: String,
    pub status: Status,
    pub message: String,
    /// What to do; none when all is well.
    pub remedy: Option<String>,
}

pub(super) fn check(name: &str, status: Status, message: String, remedy: Option<&str>) -> Check {
    Check {
        check: name.to_string(),
        status,
        message,
        remedy: remedy.map(str::to_string),
    }
}

/// What every check may look at.
pub(crate) struct Ctx {
    pub home: Result<Home, String>,
    pub places: Result<Places, String>,
    pub exe: Option<PathBuf>,
}

impl Ctx {
    pub(crate) fn from_env() -> Ctx {
        Ctx {
            home: Home::from_env().map_err(|e| e.to_string()),
            places: Places::from_env().map_err(|e| e.to_string()),
            exe: std::env::current_exe()
                .ok()
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
        }
    }
}

/// A check: what it found, as zero or more lines.
pub(crate) type CheckFn = fn(&Ctx) -> Vec<Check>;

/// The checks, in the order they print.
pub(crate) const CHECKS: &[CheckFn] = &[
    binary,
    config_toml,
    daemon,
    journal,
    database_files,
    credential_store,
    enrolments,
    policy,
    tool_definitions,
    connectors,
    clients,
];

/// Runs every check.
pub(crate) fn run(ctx: &Ctx) -> Vec<Check> {
    CHECKS.iter().flat_map(|c| c(ctx)).collect()
}

/// 1 when any check failed, else 0.
pub(crate) fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.status == Status::Fail) {
        1
    } else {
        0
    }
}
