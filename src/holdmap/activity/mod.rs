//! Opt-in activity recording. `holdmap activity serve --duration 10m` runs a collector on
//! loopback (`collector`) and prints its endpoint and a private token; `holdmap mcp
//! --record-activity`, given `HOLDMAP_ACTIVITY_ENDPOINT` and `HOLDMAP_ACTIVITY_TOKEN`, reports
//! each known tool called on it (`recorder`): the tool's name, status, timing and request and
//! result byte counts (`record`); `holdmap activity snapshot --json` reads the collector. Both
//! ends speak the strict HTTP/1.1 of `http`, so holdmap links no HTTP crate.
//!
//! Must never: record anything when not asked to; send an argument, a result, a raw request id
//! or error text; make a tool unavailable or slower to answer because delivery failed; listen
//! beyond loopback; answer a request without the token.

mod collector;
mod http;
mod record;
mod recorder;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::limits::{HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT, HOLDMAP_ACTIVITY_SNAPSHOT_BYTES_MAX};

pub(crate) use record::{Record, Status};
pub(crate) use recorder::{Recorder, Started};

/// The environment variable naming the collector's endpoint.
pub(crate) const ENDPOINT_VAR: &str = "HOLDMAP_ACTIVITY_ENDPOINT";
/// The environment variable holding the collector's token.
pub(crate) const TOKEN_VAR: &str = "HOLDMAP_ACTIVITY_TOKEN";

/// Random bytes in a token (printed as twice as many hex digits).
const TOKEN_BYTES: usize = 32;

/// A token as `serve` makes them: 64 lowercase hex digits. Anything else is refused before it
/// is put in a header (it could not be right, and a line break in it would forge headers).
pub(crate) fn check_token(token: &str) -> Result<(), String> {
    let ok = token.len() == TOKEN_BYTES * 2
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "is not a token `holdmap activity serve` printed ({} lowercase hex digits)",
            TOKEN_BYTES * 2
        ))
    }
}

/// `holdmap activity serve`: the exit code.
pub(crate) fn serve_cli(duration: Duration) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("holdmap activity serve: could not start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(serve(duration));
    runtime.shutdown_background();
    code
}

async fn serve(duration: Duration) -> i32 {
    use tokio::signal::unix::{SignalKind, signal};

    // Refuse to start rather than hand out a token from a predictable source.
    let token = match crate::ids::random_hex(TOKEN_BYTES) {
        Ok(token) => token,
        Err(e) => {
            eprintln!(
                "holdmap activity serve: could not read random bytes for the token ({e}); \
                 nothing was started"
            );
            return 1;
        }
    };
    let (listener, port) = match collector::bind().await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("holdmap activity serve: could not listen on 127.0.0.1: {e}");
            return 1;
        }
    };
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(term), Ok(int)) => (term, int),
        _ => {
            eprintln!("holdmap activity serve: could not watch for SIGTERM and SIGINT");
            return 1;
        }
    };
    let url = format!("http://127.0.0.1:{port}{}", collector::RECORDS_PATH);
    let minutes = duration.as_secs().div_ceil(60);
    println!(
        "Collecting holdmap tool-call metadata at {url} for {} (keep the token private):",
        if duration.as_secs().is_multiple_of(60) {
            format!("{minutes} min")
        } else {
            format!("{} s", duration.as_secs())
        }
    );
    println!("{ENDPOINT_VAR}={url}");
    println!("{TOKEN_VAR}={token}");
    println!(
        "Pass both to the MCP client's environment for holdmap, and add --record-activity to \
         its arguments:"
    );
    println!(r#"{{"command":"holdmap","args":["mcp","--record-activity"]}}"#);
    println!(
        "Read the records with `holdmap activity snapshot --json` (with the same two variables \
         set). They are kept in memory only and are gone when this stops (Ctrl-C to stop early)."
    );
    // The endpoint lines are what a script or test waits for; stdout may be a pipe.
    {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
    let state = Arc::new(collector::Collector::new(token, port));
    let accepting = collector::accept_loop(listener, state.clone());
    let why = tokio::select! {
        () = accepting => "the listener stopped",
        () = tokio::time::sleep(duration) => "its time is up",
        _ = term.recv() => "it was asked to stop (SIGTERM)",
        _ = int.recv() => "it was interrupted (SIGINT)",
    };
    let received = state.store.lock().map(|s| s.received()).unwrap_or(0);
    eprintln!(
        "holdmap activity serve: stopped because {why}; it received {received} records, which \
         are now discarded"
    );
    0
}

/// `holdmap activity snapshot`: the exit code.
pub(crate) fn snapshot_cli(json: bool) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("holdmap activity snapshot: could not start the async runtime: {e}");
            return 1;
        }
    };
    let got = runtime.block_on(snapshot());
    runtime.shutdown_background();
    match got {
        Ok(snapshot) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&snapshot).unwrap_or_default()
                );
            } else {
                print!("{}", table(&snapshot));
            }
            0
        }
        Err(why) => {
            eprintln!("holdmap activity snapshot: {why}");
            1
        }
    }
}

async fn snapshot() -> Result<Value, String> {
    let endpoint = std::env::var(ENDPOINT_VAR).unwrap_or_default();
    let token = std::env::var(TOKEN_VAR).unwrap_or_default();
    if endpoint.is_empty() || token.is_empty() {
        return Err(format!(
            "set {ENDPOINT_VAR} and {TOKEN_VAR} to what `holdmap activity serve` printed"
        ));
    }
    let endpoint = http::Endpoint::parse(&endpoint)
        .map_err(|why| format!("{ENDPOINT_VAR} is refused: {why}"))?;
    check_token(&token).map_err(|why| format!("{TOKEN_VAR} {why}"))?;
    let (status, body) = http::exchange(
        &endpoint,
        http::Method::Get,
        &token,
        b"",
        HOLDMAP_ACTIVITY_SNAPSHOT_BYTES_MAX,
        HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT,
    )
    .await
    .map_err(|e| e.to_string())?;
    match status {
        200 => serde_json::from_slice(&body)
            .map_err(|_| "the collector's answer is not JSON".to_owned()),
        401 => Err(format!(
            "the collector refused the token: {TOKEN_VAR} must be the one this collector \
             printed (a restarted collector has a new one)"
        )),
        other => Err(format!(
            "the collector answered HTTP {other}: is {ENDPOINT_VAR} the endpoint `holdmap \
             activity serve` printed?"
        )),
    }
}

/// The snapshot as a short table, newest last.
fn table(snapshot: &Value) -> String {
    let records = snapshot
        .get("records")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = String::new();
    if records.is_empty() {
        out.push_str("No records yet.\n");
    } else {
        out.push_str(&format!(
            "{:>6}  {:<23}  {:<20}  {:<14}  {:>8}  {:>10}  {:>10}\n",
            "seq", "started (UTC)", "tool", "status", "ms", "request B", "result B"
        ));
    }
    let num = |r: &Value, k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    let text = |r: &Value, k: &str| {
        r.get(k)
            .and_then(Value::as_str)
            .map(crate::text::visible)
            .unwrap_or_default()
    };
    for r in &records {
        let started = i64::try_from(num(r, "started_at_ms"))
            .ok()
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
            .unwrap_or_default();
        out.push_str(&format!(
            "{:>6}  {:<23}  {:<20}  {:<14}  {:>8}  {:>10}  {:>10}\n",
            num(r, "seq"),
            started,
            text(r, "tool"),
            text(r, "status"),
            num(r, "duration_ms"),
            num(r, "request_bytes"),
            num(r, "result_bytes"),
        ));
    }
    let dropped = snapshot
        .get("dropped_oldest")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let lost: u64 = records
        .iter()
        .map(|r| num(r, "dropped_before"))
        .max()
        .unwrap_or(0);
    out.push_str(&format!(
        "{} records kept; {dropped} older ones dropped by the collector; at least {lost} never \
         delivered by a server.\n",
        records.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_token_serve_could_have_printed_is_accepted() {
        assert!(check_token(&"ab".repeat(32)).is_ok());
        assert!(check_token(&"AB".repeat(32)).is_err());
        assert!(check_token(&"ab".repeat(31)).is_err());
        assert!(check_token(&format!("{}\r\nX: 1", "ab".repeat(30))).is_err());
    }

    #[test]
    fn the_table_shows_each_record_and_what_was_dropped() {
        let snap = serde_json::json!({
            "records": [{"seq": 7, "tool": "list_ports", "status": "ok", "started_at_ms": 0,
                         "duration_ms": 4, "request_bytes": 90, "result_bytes": 1234,
                         "dropped_before": 2}],
            "dropped_oldest": 3,
        });
        let t = table(&snap);
        assert!(t.contains("list_ports"), "{t}");
        assert!(t.contains("1970-01-01 00:00:00.000"), "{t}");
        assert!(t.contains("3 older ones dropped"), "{t}");
        assert!(t.contains("at least 2 never delivered"), "{t}");
        assert!(table(&serde_json::json!({"records": []})).starts_with("No records yet."));
    }
}
