//! The collector of `holdmap activity serve`: a listener on 127.0.0.1 that keeps posted records
//! in memory (`Store`, bounded: the oldest dropped and counted) and gives them back to a GET,
//! each request only with the collector's bearer token.
//!
//! Must never: listen on any address but 127.0.0.1 (`bind` takes only a port); wait for or parse
//! a request's body, store a record or return one before the token has been checked (body bytes
//! that came in the same reads as the head are only buffered); spin on a failing accept; keep a record that
//! `Record::parse` refused; keep more than `HOLDMAP_ACTIVITY_RECORDS_MAX` records; write to disk.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::holdmap::activity::http::{self, Head, Method, Refusal};
use crate::holdmap::activity::record::Record;
use crate::limits::{
    HOLDMAP_ACTIVITY_ACCEPT_RETRY, HOLDMAP_ACTIVITY_CONNECTIONS_MAX,
    HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT, HOLDMAP_ACTIVITY_HEAD_BYTES_MAX,
    HOLDMAP_ACTIVITY_RECORDS_MAX,
};

/// The one path the collector serves: POST a record, GET the snapshot.
pub(crate) const RECORDS_PATH: &str = "/v1/records";

/// The records received, oldest first, and how many were dropped to keep within the bound.
#[derive(Debug)]
pub(crate) struct Store {
    records: VecDeque<(u64, Record)>,
    capacity: usize,
    received: u64,
    dropped_oldest: u64,
}

impl Store {
    pub(crate) fn new(capacity: usize) -> Store {
        Store {
            records: VecDeque::new(),
            capacity,
            received: 0,
            dropped_oldest: 0,
        }
    }

    pub(crate) fn push(&mut self, record: Record) {
        self.received = self.received.saturating_add(1);
        while self.records.len() >= self.capacity.max(1) {
            self.records.pop_front();
            self.dropped_oldest = self.dropped_oldest.saturating_add(1);
        }
        self.records.push_back((self.received, record));
    }

    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// The snapshot a GET returns: each record with its receipt number (`seq`).
    pub(crate) fn snapshot(&self) -> Value {
        let records: Vec<Value> = self
            .records
            .iter()
            .map(|(seq, record)| {
                let mut v = record.to_json();
                if let Some(map) = v.as_object_mut() {
                    map.insert("seq".to_owned(), json!(seq));
                }
                v
            })
            .collect();
        json!({
            "records": records,
            "received": self.received,
            "dropped_oldest": self.dropped_oldest,
            "records_max": self.capacity,
        })
    }
}

/// A running collector's state: its token, its port (for the Host check) and its store.
pub(crate) struct Collector {
    token: String,
    port: u16,
    pub(crate) store: Mutex<Store>,
}

impl Collector {
    pub(crate) fn new(token: String, port: u16) -> Collector {
        Collector {
            token,
            port,
            store: Mutex::new(Store::new(HOLDMAP_ACTIVITY_RECORDS_MAX)),
        }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic cannot happen while the lock is held (push and snapshot do not panic), but a
        // poisoned lock still holds a consistent store.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the head carries `Bearer <token>`. Both sides are hashed first and the digests
    /// compared byte by byte without an early exit, so the time taken says nothing about how
    /// much of a guess was right, nor about the token's length.
    pub(crate) fn authorized(&self, head: &Head) -> bool {
        let Some(sent) = head.authorization.as_deref() else {
            return false;
        };
        let expected = crate::ids::sha256_hex(format!("Bearer {}", self.token).as_bytes());
        let sent = crate::ids::sha256_hex(sent.as_bytes());
        let diff = expected
            .bytes()
            .zip(sent.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0 && expected.len() == sent.len()
    }

    /// The answer to an authorised request with its whole body.
    pub(crate) fn route(&self, head: &Head, body: &[u8]) -> (u16, Vec<u8>) {
        if head.path != RECORDS_PATH {
            return refusal(&Refusal::new(
                404,
                format!("the collector serves {RECORDS_PATH} only"),
            ));
        }
        match head.method {
            Method::Get => (200, self.store().snapshot().to_string().into_bytes()),
            Method::Post => match Record::parse(body) {
                Ok(record) => {
                    self.store().push(record);
                    (204, Vec::new())
                }
                Err(why) => refusal(&Refusal::new(400, why)),
            },
        }
    }

    /// The answer to one request head and what followed it; `read_body` gets the rest of the
    /// body once the head has passed every check, the token included.
    async fn answer(&self, stream: &mut TcpStream) -> (u16, Vec<u8>) {
        let mut got = Vec::with_capacity(1024);
        let mut buf = [0u8; 2048];
        let end = loop {
            if let Some(end) = http::head_end(&got) {
                break end;
            }
            if got.len() >= HOLDMAP_ACTIVITY_HEAD_BYTES_MAX {
                return refusal(&Refusal::new(431, "the request head is too long"));
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return refusal(&Refusal::new(400, "the request ended early")),
                Ok(n) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        };
        let (head_bytes, rest) = got.split_at(end);
        let head = match http::parse_head(head_bytes, self.port) {
            Ok(head) => head,
            Err(refused) => return refusal(&refused),
        };
        if !self.authorized(&head) {
            return refusal(&Refusal::new(
                401,
                "a missing or wrong token: send Authorization: Bearer <the token `holdmap \
                 activity serve` printed>",
            ));
        }
        if head.method == Method::Post && !head_names_length(head_bytes) {
            return refusal(&Refusal::new(411, "a POST needs a Content-Length"));
        }
        let mut body = rest.to_vec();
        if body.len() > head.content_length {
            return refusal(&Refusal::new(400, "one request per connection"));
        }
        while body.len() < head.content_length {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return refusal(&Refusal::new(400, "the body ended early")),
                Ok(n) => body.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
            if body.len() > head.content_length {
                return refusal(&Refusal::new(400, "one request per connection"));
            }
        }
        self.route(&head, &body)
    }
}

/// Whether the head has a Content-Length line (`parse_head` read its value; a POST without
/// one is refused rather than read as empty).
fn head_names_length(head: &[u8]) -> bool {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
}

fn refusal(refused: &Refusal) -> (u16, Vec<u8>) {
    (
        refused.status,
        json!({"error": refused.message}).to_string().into_bytes(),
    )
}

/// Binds 127.0.0.1 on an ephemeral port: the only address a collector ever listens on.
pub(crate) async fn bind() -> std::io::Result<(TcpListener, u16)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    Ok((listener, port))
}

/// A spell of failing accepts: said once on stderr when it starts, not once per retry.
#[derive(Debug, Default)]
pub(crate) struct AcceptTrouble {
    failing: bool,
}

impl AcceptTrouble {
    /// The words to print for this failure, the first of a spell only.
    pub(crate) fn failed(&mut self, e: &std::io::Error) -> Option<String> {
        if std::mem::replace(&mut self.failing, true) {
            return None;
        }
        Some(format!(
            "holdmap activity serve: cannot accept connections ({e}); it retries every {} ms and \
             records nothing meanwhile: if this is \"too many open files\", close other programs' \
             connections or raise `ulimit -n`",
            HOLDMAP_ACTIVITY_ACCEPT_RETRY.as_millis()
        ))
    }

    /// An accept worked: the next failure starts a new spell.
    pub(crate) fn recovered(&mut self) {
        self.failing = false;
    }
}

/// Accepts and answers connections until the future is dropped; each within
/// `HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT`, at most `HOLDMAP_ACTIVITY_CONNECTIONS_MAX` at once.
pub(crate) async fn accept_loop(listener: TcpListener, collector: Arc<Collector>) {
    let permits = Arc::new(Semaphore::new(HOLDMAP_ACTIVITY_CONNECTIONS_MAX));
    let mut trouble = AcceptTrouble::default();
    loop {
        let (mut stream, _) = match listener.accept().await {
            Ok(accepted) => {
                trouble.recovered();
                accepted
            }
            Err(e) => {
                if let Some(said) = trouble.failed(&e) {
                    eprintln!("{said}");
                }
                // The error (out of file descriptors, most often) lasts a while: retrying at
                // once would spin a core until it clears.
                tokio::time::sleep(HOLDMAP_ACTIVITY_ACCEPT_RETRY).await;
                continue;
            }
        };
        // Too many at once: close this one unanswered rather than queue without bound.
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue;
        };
        let collector = collector.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let exchange = async {
                let (status, body) = collector.answer(&mut stream).await;
                let _ = stream.write_all(&http::response(status, &body)).await;
                let _ = stream.shutdown().await;
            };
            if tokio::time::timeout(HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT, exchange)
                .await
                .is_err()
            {
                tracing::debug!("a connection to the collector timed out");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holdmap::activity::http::{Endpoint, exchange};
    use crate::holdmap::activity::record::Status;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn record(tool: &'static str) -> Record {
        Record {
            tool,
            status: Status::Ok,
            started_at_ms: 1,
            duration_ms: 2,
            request_bytes: 3,
            result_bytes: 4,
            dropped_before: 0,
        }
    }

    fn head(authorization: Option<&str>, method: Method) -> Head {
        Head {
            method,
            path: RECORDS_PATH.to_owned(),
            authorization: authorization.map(str::to_owned),
            content_length: 0,
        }
    }

    #[test]
    fn failing_accepts_are_said_once_per_spell_not_once_per_retry() {
        let mut t = AcceptTrouble::default();
        let emfile = std::io::Error::from_raw_os_error(24);
        let first = t.failed(&emfile).unwrap();
        assert!(
            first.contains("cannot accept") && first.contains("ulimit"),
            "{first}"
        );
        assert!((0..100).all(|_| t.failed(&emfile).is_none()));
        t.recovered();
        assert!(t.failed(&emfile).is_some());
    }

    #[test]
    fn the_store_keeps_at_most_its_capacity_and_counts_the_oldest_dropped() {
        let mut store = Store::new(2);
        store.push(record("list_ports"));
        store.push(record("list_ports"));
        store.push(record("get_topology"));
        let snap = store.snapshot();
        assert_eq!(snap["records"].as_array().unwrap().len(), 2);
        assert_eq!(snap["dropped_oldest"], 1);
        assert_eq!(snap["received"], 3);
        assert_eq!(snap["records"][0]["seq"], 2);
        assert_eq!(snap["records"][1]["tool"], "get_topology");
    }

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let c = Collector::new(TOKEN.to_owned(), 1);
        assert!(c.authorized(&head(Some(&format!("Bearer {TOKEN}")), Method::Get)));
        assert!(!c.authorized(&head(None, Method::Get)));
        assert!(!c.authorized(&head(Some(TOKEN), Method::Get)));
        assert!(!c.authorized(&head(Some(&format!("Bearer {TOKEN}0")), Method::Get)));
        assert!(!c.authorized(&head(Some("Bearer "), Method::Get)));
        let mut wrong = TOKEN.to_owned();
        wrong.replace_range(63.., "0");
        assert!(!c.authorized(&head(Some(&format!("Bearer {wrong}")), Method::Get)));
    }

    #[test]
    fn a_refused_post_stores_nothing_and_another_path_is_not_found() {
        let c = Collector::new(TOKEN.to_owned(), 1);
        let (status, body) = c.route(
            &head(None, Method::Post),
            br#"{"tool":"list_ports","arguments":{}}"#,
        );
        assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
        assert_eq!(c.store().received(), 0);
        let mut other = head(None, Method::Get);
        other.path = "/".to_owned();
        assert_eq!(c.route(&other, b"").0, 404);
    }

    /// A collector on a real loopback socket, for the exchanges below.
    async fn running() -> (Arc<Collector>, Endpoint, tokio::task::JoinHandle<()>) {
        let (listener, port) = bind().await.unwrap();
        let collector = Arc::new(Collector::new(TOKEN.to_owned(), port));
        let task = tokio::spawn(accept_loop(listener, collector.clone()));
        let endpoint = Endpoint::new(Ipv4Addr::LOCALHOST.into(), port, RECORDS_PATH);
        (collector, endpoint, task)
    }

    async fn send(endpoint: &Endpoint, method: Method, token: &str, body: &[u8]) -> u16 {
        exchange(
            endpoint,
            method,
            token,
            body,
            1 << 20,
            HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT,
        )
        .await
        .unwrap()
        .0
    }

    #[tokio::test]
    async fn over_a_socket_a_wrong_token_gets_401_and_stores_and_returns_nothing() {
        let (collector, endpoint, task) = running().await;
        let body = serde_json::to_vec(&record("list_ports").to_json()).unwrap();
        assert_eq!(send(&endpoint, Method::Post, "nope", &body).await, 401);
        assert_eq!(collector.store().received(), 0);
        let (status, answer) = exchange(
            &endpoint,
            Method::Get,
            "nope",
            b"",
            1 << 20,
            HOLDMAP_ACTIVITY_EXCHANGE_TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(status, 401);
        assert!(!String::from_utf8_lossy(&answer).contains("records\""));
        assert_eq!(send(&endpoint, Method::Post, TOKEN, &body).await, 204);
        assert_eq!(collector.store().received(), 1);
        task.abort();
    }

    #[tokio::test]
    async fn over_a_socket_a_raw_request_without_a_token_or_with_a_foreign_host_is_refused() {
        let (collector, endpoint, task) = running().await;
        let p = endpoint.port();
        let raw = |request: String| async move {
            let mut s = TcpStream::connect(("127.0.0.1", p)).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            http::read_response(&got).unwrap().0
        };
        assert_eq!(
            raw(format!(
                "GET /v1/records HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n\r\n"
            ))
            .await,
            401
        );
        assert_eq!(
            raw(format!(
                "GET /v1/records HTTP/1.1\r\nHost: attacker.example:{p}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            ))
            .await,
            403
        );
        assert_eq!(
            raw(format!(
                "POST /v1/records HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n"
            ))
            .await,
            413
        );
        assert_eq!(collector.store().received(), 0);
        task.abort();
    }
}
