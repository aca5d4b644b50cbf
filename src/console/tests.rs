//! The console's unit tests: catching up on the journal, cut pages, the HTTP rules, strict
//! queries, read-only daemon requests.

use super::api::*;
use super::daemon::*;
use super::http::*;
use super::query::*;
use super::view::*;
use super::*;
use crate::ipc::ManageRequest;
use crate::journal::LogFilter;
use crate::limits;
use crate::policy::{Effect, Scope};
use crate::projection::Projection;
use axum::http::{HeaderMap, HeaderValue, header};

/// A journal of `sessions` sessions of `calls` allowed calls each (start, requests with
/// outcomes, end): `sessions * (2 + 2 * calls)` entries.
fn journal_of(db: &std::path::Path, name: &str, sessions: usize, calls: usize) {
    use crate::config::Durability;
    use crate::journal::{Fields, Journal, Kind};
    let mut j = Journal::open(db, "m", Durability::Process).unwrap();
    for s in 0..sessions {
        let sid = format!("{name}-{s}");
        let on = |seq: Option<i64>| Fields {
            session_id: Some(sid.clone()),
            seq,
            ..Fields::default()
        };
        let mut items = vec![(Kind::SessionStart, on(None))];
        for c in 0..calls {
            let seq = Some(i64::try_from(c).unwrap() + 1);
            items.push((
                Kind::CallRequest,
                Fields {
                    decision: Some("allow".into()),
                    tool: Some("echo".into()),
                    ..on(seq)
                },
            ));
            items.push((
                Kind::CallOutcome,
                Fields {
                    ok: Some(true),
                    duration_ms: Some(1),
                    ..on(seq)
                },
            ));
        }
        items.push((Kind::SessionEnd, on(None)));
        j.append_many(items).unwrap();
    }
}

/// What the page does on each poll: every page of events after its cursor, then the
/// overview when something was new. Returns the cursor.
fn poll(reader: &Reader, view: &mut View, mut cursor: i64) -> i64 {
    let mut fresh = false;
    loop {
        let page = events_json(reader, view, cursor, limits::CONSOLE_EVENTS_MAX).unwrap();
        let n = page["events"].as_array().unwrap().len();
        for e in page["events"].as_array().unwrap() {
            if e["kind"] == "call.request" {
                assert_eq!(e["state"], "allowed", "{e}");
            }
        }
        cursor = page["cursor"].as_i64().unwrap();
        fresh |= n > 0;
        if n < limits::CONSOLE_EVENTS_MAX {
            break;
        }
    }
    if fresh {
        snapshot_json(reader, String::new(), Some("m"), view).unwrap();
    }
    cursor
}

#[test]
fn catching_up_on_a_large_journal_reads_each_entry_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    // 50 sessions of 49 calls: 5,000 entries.
    journal_of(&db, "a", 50, 49);
    let reader = Reader::open(&db).unwrap();
    let total = usize::try_from(reader.count().unwrap()).unwrap();
    assert_eq!(total, 5000);
    let mut view = View::default();
    let cursor = poll(&reader, &mut view, 0);
    assert_eq!(cursor, 5000);
    // Each entry once for its page, once into the projection, once for the chain check.
    eprintln!(
        "catching up on {total} entries read {} rows",
        view.rows_read
    );
    assert!(view.rows_read <= 3 * total, "{} rows read", view.rows_read);
    assert_eq!(view.verify_runs, 1);
    let after_catch_up = view.rows_read;
    // Polls with nothing new read nothing more and check the chain no more.
    for _ in 0..10 {
        assert_eq!(poll(&reader, &mut view, cursor), cursor);
    }
    assert_eq!(view.rows_read, after_catch_up);
    // New entries are read once for the page and once into the projection; the chain is
    // not checked again within CONSOLE_VERIFY_INTERVAL.
    journal_of(&db, "b", 1, 4);
    let cursor = poll(&reader, &mut view, cursor);
    assert_eq!(cursor, 5010);
    assert_eq!(view.rows_read, after_catch_up + 2 * 10);
    assert_eq!(view.verify_runs, 1);
    let overview = snapshot_json(&reader, String::new(), Some("m"), &mut view).unwrap();
    assert_eq!(overview["journal"]["chain"], "intact");
    assert_eq!(overview["journal"]["cursor"], 5010);
    assert!(overview["journal"]["verified_at"].is_string());
    assert_eq!(overview["counts"]["allowed"], 50 * 49 + 4);
    assert_eq!(overview["sessions"].as_array().unwrap().len(), 51);
}

#[test]
fn the_projection_grown_entry_by_entry_says_what_one_built_at_once_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    journal_of(&db, "a", 3, 5);
    let reader = Reader::open(&db).unwrap();
    let mut view = View::default();
    events_json(&reader, &mut view, 0, 10).unwrap();
    journal_of(&db, "b", 2, 2);
    events_json(&reader, &mut view, 10, 1000).unwrap();
    let all = reader.entries(&LogFilter::default()).unwrap();
    let whole = Projection::build(&all);
    assert_eq!(
        serde_json::to_value(&view.projection).unwrap(),
        serde_json::to_value(&whole).unwrap()
    );
}

#[test]
fn a_long_session_and_a_long_policy_history_are_cut_and_say_how_many_more() {
    use crate::config::Durability;
    use crate::journal::{Fields, Journal, Kind};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("journal.db");
    // One session of 600 calls: 1,202 entries.
    journal_of(&db, "long", 1, 600);
    let mut j = Journal::open(&db, "m", Durability::Process).unwrap();
    let changes = (0..limits::CONSOLE_POLICY_HISTORY_MAX + 7)
        .map(|i| {
            (
                Kind::PolicyChange,
                Fields {
                    reason: Some(format!("change {i}")),
                    ..Fields::default()
                },
            )
        })
        .collect();
    j.append_many(changes).unwrap();
    let reader = Reader::open(&db).unwrap();
    let page = session_page(&reader, "long-0").unwrap().unwrap();
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), limits::CONSOLE_SESSION_EVENTS_MAX);
    assert_eq!(
        page["earlier_not_shown"],
        1202 - limits::CONSOLE_SESSION_EVENTS_MAX
    );
    // The newest are shown, ending with the session's end.
    assert_eq!(events.last().unwrap()["kind"], "session.end");
    assert_eq!(page["session"]["calls"], 600);
    let (history, older) = policy_history(&reader).unwrap();
    assert_eq!(history.len(), limits::CONSOLE_POLICY_HISTORY_MAX);
    assert_eq!(older, 7);
    let newest = format!("change {}", limits::CONSOLE_POLICY_HISTORY_MAX + 6);
    assert_eq!(history[0]["reason"], newest.as_str());
}

#[test]
fn same_bytes_is_true_only_for_equal_strings_of_equal_length() {
    assert!(same_bytes(b"abc", b"abc"));
    assert!(same_bytes(b"", b""));
    assert!(!same_bytes(b"abc", b"abd"));
    assert!(!same_bytes(b"abc", b"ab"));
    assert!(!same_bytes(b"xbc", b"abc"));
}

fn host(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
    h
}

#[test]
fn only_loopback_names_with_or_without_a_port_are_loopback_hosts() {
    for ok in [
        "127.0.0.1",
        "127.0.0.1:7717",
        "localhost",
        "LOCALHOST:1",
        "[::1]",
        "[::1]:80",
    ] {
        assert!(loopback_host(&host(ok)), "{ok}");
    }
    for bad in [
        "evil.example",
        "evil.example:7717",
        "127.0.0.1.evil.example",
        "localhost.",
        "127.0.0.2",
        "::1",
        "[::1]:x",
        "localhost:",
        "0.0.0.0",
        "",
    ] {
        assert!(!loopback_host(&host(bad)), "{bad}");
    }
    assert!(!loopback_host(&HeaderMap::new()));
    let mut two = host("localhost");
    two.append(header::HOST, HeaderValue::from_static("localhost"));
    assert!(!loopback_host(&two));
}

#[test]
fn the_token_is_read_only_from_one_bearer_authorization_header() {
    let t = "ab".repeat(32);
    let mut h = HeaderMap::new();
    assert!(!bearer_ok(&h, &t));
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    assert!(bearer_ok(&h, &t));
    h.append(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    assert!(!bearer_ok(&h, &t));
    let mut basic = HeaderMap::new();
    basic.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Basic {t}")).unwrap(),
    );
    assert!(!bearer_ok(&basic, &t));
}

#[test]
fn a_query_is_read_strictly() {
    let q = parse_query(Some("tool=a%20b&agent=x+y"), &["tool", "agent"]).unwrap();
    assert_eq!(q["tool"], "a b");
    assert_eq!(q["agent"], "x y");
    for bad in [
        "tool=%zz",
        "tool=%4",
        "tool=%ff",
        "tool=a&tool=b",
        "nope=1",
        "tool=%01",
    ] {
        assert!(parse_query(Some(bad), &["tool"]).is_err(), "{bad}");
    }
    let long = format!("tool={}", "a".repeat(limits::CONSOLE_QUERY_BYTES_MAX));
    assert!(parse_query(Some(&long), &["tool"]).is_err());
}

#[test]
fn a_bind_address_other_than_loopback_is_refused() {
    assert!(bind_addr(None).unwrap().is_loopback());
    assert!(bind_addr(Some("::1")).unwrap().is_loopback());
    for bad in ["0.0.0.0", "::", "192.168.1.2", "example.com", "127.0.0.2"] {
        assert!(matches!(
            bind_addr(Some(bad)),
            Err(ConsoleError::NotLoopback(_))
        ));
    }
}

#[test]
fn the_console_sends_the_daemon_only_read_requests() {
    let scope = Scope {
        tool: Some("t".into()),
        agent: None,
        connector: None,
    };
    let reads = [
        ManageRequest::ApprovalList,
        ManageRequest::PolicyList,
        ManageRequest::AgentList,
        ManageRequest::Status,
        ManageRequest::PolicyExplain {
            agent: None,
            connector: None,
            tool: "t".into(),
            arguments: None,
        },
    ];
    let writes = [
        ManageRequest::ApprovalDecide {
            id: "abcdefabcdef".into(),
            approve: true,
            reason: None,
        },
        ManageRequest::ApprovalWatch,
        ManageRequest::Shutdown,
        ManageRequest::PolicySet {
            effect: Effect::Allow,
            scope: scope.clone(),
        },
        ManageRequest::PolicyRemove { scope },
        ManageRequest::PolicyImport {
            file: "f".into(),
            text: String::new(),
            dry_run: true,
        },
        ManageRequest::PolicyExport,
        ManageRequest::AgentAdd {
            name: "a".into(),
            path: "/bin/true".into(),
        },
        ManageRequest::AgentRemove { name: "a".into() },
    ];
    assert!(reads.iter().all(is_read_request));
    assert!(!writes.iter().any(is_read_request));
}

#[tokio::test]
async fn a_request_that_is_not_a_read_is_refused_before_any_connection() {
    // A home with no daemon: were a connection tried, the answer would be NotRunning.
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().to_path_buf());
    let decide = ManageRequest::ApprovalDecide {
        id: "abcdefabcdef".into(),
        approve: true,
        reason: None,
    };
    assert!(matches!(
        ask_daemon(&home, &decide).await,
        Err(ConsoleDaemon::Refused(_))
    ));
    assert!(matches!(
        ask_daemon(&home, &ManageRequest::Status).await,
        Err(ConsoleDaemon::NotRunning) | Err(ConsoleDaemon::Failed(_))
    ));
}
