//! Opt-in activity recording. `holdmap activity serve --duration 10m` runs a collector on
//! loopback (`collector`) and prints its endpoint and a private token; `holdmap mcp
//! --record-activity`, given `HOLDMAP_ACTIVITY_ENDPOINT` and `HOLDMAP_ACTIVITY_TOKEN`, reports
//! each known tool called on it (`recorder`): the tool's name, status, timing and request and
//! result byte counts; `holdmap activity snapshot --json` reads the collector.
//!
//! Must never: record anything when not asked to; send an argument, a result, a raw request id
//! or error text; make a tool unavailable or slower to answer because delivery failed; listen
//! beyond loopback; answer a request without the token.

use std::time::Duration;

/// `holdmap activity serve`: the exit code.
pub(crate) fn serve_cli(_duration: Duration) -> i32 {
    eprintln!("holdmap activity serve: not built yet");
    2
}

/// `holdmap activity snapshot`: the exit code.
pub(crate) fn snapshot_cli(_json: bool) -> i32 {
    eprintln!("holdmap activity snapshot: not built yet");
    2
}
