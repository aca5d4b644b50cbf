//! The bounded HTTP probe of `explain_port` / `inspect_port`: one `GET / HTTP/1.0` to a port on
//! loopback (127.0.0.1 or ::1), one deadline for connecting and reading, a capped read, and what
//! the answer says (status, `Server` header, page title), control characters stripped.
//!
//! Must never: connect to any address but 127.0.0.1 or ::1 (`Target` cannot hold another), send
//! more than the one request, read past `HOLDMAP_PROBE_BYTES_MAX`, or wait past
//! `HOLDMAP_PROBE_TIMEOUT` (it runs inside a `Reply::Later`, off the request loop).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::limits::{HOLDMAP_PROBE_BYTES_MAX, HOLDMAP_PROBE_TEXT_CHARS_MAX, HOLDMAP_PROBE_TIMEOUT};

/// A loopback address to probe: the only kind of address the probe connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    V4(u16),
    V6(u16),
}

impl Target {
    /// The loopback address a listener bound to `ip:port` answers on, if any: 127.0.0.1 for
    /// 127.0.0.1 and 0.0.0.0 (and their v4-mapped forms), ::1 for ::1 and ::. Any other
    /// address (another loopback number, a network address) is not probed.
    pub(crate) fn for_listener(ip: IpAddr, port: u16) -> Option<Target> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(v4) if v4 == Ipv4Addr::LOCALHOST || v4.is_unspecified() => {
                Some(Target::V4(port))
            }
            IpAddr::V6(v6) if v6 == Ipv6Addr::LOCALHOST || v6.is_unspecified() => {
                Some(Target::V6(port))
            }
            _ => None,
        }
    }

    fn addr(self) -> SocketAddr {
        match self {
            Target::V4(port) => SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            Target::V6(port) => SocketAddr::from((Ipv6Addr::LOCALHOST, port)),
        }
    }

    pub(crate) fn url(self) -> String {
        match self {
            Target::V4(port) => format!("http://127.0.0.1:{port}/"),
            Target::V6(port) => format!("http://[::1]:{port}/"),
        }
    }
}

/// What the probe found. Every string has had its control characters removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) url: String,
    pub(crate) status: Option<u16>,
    pub(crate) server: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) error: Option<String>,
}

impl Probe {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "url": self.url,
            "status": self.status,
            "server": self.server,
            "title": self.title,
            "error": self.error,
        })
    }
}

/// The schema of `Probe::to_json`.
pub(crate) fn probe_schema() -> Value {
    let text_or_null =
        |what: &str| json!({"anyOf": [{"type": "string"}, {"type": "null"}], "description": what});
    json!({
        "type": "object",
        "description": "One GET / to the port on loopback, with a short deadline and a capped read.",
        "properties": {
            "url": {"type": "string", "description": "What was requested (loopback only)."},
            "status": {
                "anyOf": [{"type": "integer", "minimum": 100, "maximum": 999}, {"type": "null"}],
                "description": "The HTTP status code; null when no HTTP answer came."
            },
            "server": text_or_null("The Server header, if any."),
            "title": text_or_null("The HTML page title, if any."),
            "error": text_or_null("Why no complete answer came (refused, timed out, not HTTP)."),
        },
        "required": ["url", "status", "server", "title", "error"],
        "additionalProperties": false,
    })
}

/// The request: HTTP/1.0 so the server closes after answering, and `Host: localhost` so a dev
/// server's host check accepts it.
const REQUEST: &[u8] =
    b"GET / HTTP/1.0\r\nHost: localhost\r\nUser-Agent: holdmap\r\nAccept: */*\r\n\r\n";

/// Probes `target` once, within `HOLDMAP_PROBE_TIMEOUT` in all.
pub(crate) async fn probe(target: Target) -> Probe {
    probe_within(target, HOLDMAP_PROBE_TIMEOUT).await
}

/// `probe` with its deadline given (tests use a short one).
async fn probe_within(target: Target, deadline: Duration) -> Probe {
    let mut got = Vec::new();
    let outcome = tokio::time::timeout(deadline, exchange(target, &mut got)).await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some(format!(
            "no complete answer within {} ms",
            deadline.as_millis()
        )),
    };
    let mut probe = read_answer(target.url(), &got);
    // An answer whose head arrived counts even if the body was cut short by the deadline.
    if probe.status.is_none() {
        probe.error = failure.or(probe.error).map(|e| clean(&e));
    }
    probe
}

async fn exchange(target: Target, got: &mut Vec<u8>) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(target.addr())
        .await
        .map_err(|e| format!("could not connect: {}", e.kind()))?;
    stream
        .write_all(REQUEST)
        .await
        .map_err(|e| format!("could not send the request: {}", e.kind()))?;
    let mut buf = [0u8; 4096];
    while got.len() < HOLDMAP_PROBE_BYTES_MAX {
        let want = buf.len().min(HOLDMAP_PROBE_BYTES_MAX - got.len());
        let Some(chunk) = buf.get_mut(..want) else {
            break;
        };
        let n = stream
            .read(chunk)
            .await
            .map_err(|e| format!("reading the answer failed: {}", e.kind()))?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    Ok(())
}

/// What the bytes of an answer say. Pure, for tests.
pub(crate) fn read_answer(url: String, bytes: &[u8]) -> Probe {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = match text.find("\r\n\r\n") {
        Some(at) => (
            text.get(..at).unwrap_or(""),
            text.get(at + 4..).unwrap_or(""),
        ),
        None => match text.find("\n\n") {
            Some(at) => (
                text.get(..at).unwrap_or(""),
                text.get(at + 2..).unwrap_or(""),
            ),
            None => (text.as_ref(), ""),
        },
    };
    let mut lines = head.lines();
    let status = lines.next().and_then(status_of);
    let server = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("server"))
        .map(|(_, v)| short(v))
        .filter(|v| !v.is_empty());
    let error = if status.is_some() {
        None
    } else if bytes.is_empty() {
        Some("the connection closed without an answer".to_owned())
    } else {
        Some("the answer is not HTTP".to_owned())
    };
    Probe {
        url: clean(&url),
        status,
        server,
        title: status.and_then(|_| title_of(body)),
        error,
    }
}

/// `HTTP/1.1 200 OK` → 200.
fn status_of(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse::<u16>().ok().filter(|c| (100..=999).contains(c))
}

/// The text of the first `<title>…</title>`, tags matched without regard to case.
fn title_of(body: &str) -> Option<String> {
    let lower = body.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower.get(open..)?.find('>')? + 1;
    let len = lower.get(start..)?.find("</title")?;
    let title = short(body.get(start..start + len)?);
    (!title.is_empty()).then_some(title)
}

/// Trimmed, whitespace runs folded to one space, control characters removed, at most
/// `HOLDMAP_PROBE_TEXT_CHARS_MAX` characters.
fn short(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    clean(&folded)
        .chars()
        .take(HOLDMAP_PROBE_TEXT_CHARS_MAX)
        .collect()
}

/// `text` without control characters (C0, DEL, C1): nothing a terminal would act on.
pub(crate) fn clean(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_answer_gives_its_status_server_and_title() {
        let p = read_answer(
            "http://127.0.0.1:3000/".into(),
            b"HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6 Python/3.12\r\nContent-Type: text/html\r\n\r\n<html><head><TITLE>\n  Shop \x1b[31m web </title></head></html>",
        );
        assert_eq!(p.status, Some(200));
        assert_eq!(p.server.as_deref(), Some("SimpleHTTP/0.6 Python/3.12"));
        assert_eq!(p.title.as_deref(), Some("Shop [31m web"));
        assert_eq!(p.error, None);
    }

    #[test]
    fn bytes_that_are_not_http_give_an_error_and_no_status() {
        let p = read_answer("u".into(), b"SSH-2.0-OpenSSH_9.6\r\n");
        assert_eq!(p.status, None);
        assert_eq!(p.title, None);
        assert_eq!(p.error.as_deref(), Some("the answer is not HTTP"));
        let p = read_answer("u".into(), b"");
        assert_eq!(
            p.error.as_deref(),
            Some("the connection closed without an answer")
        );
    }

    #[test]
    fn only_loopback_and_wildcard_listeners_are_probed_and_only_on_loopback() {
        let t = |s: &str| Target::for_listener(s.parse().unwrap(), 3000);
        assert_eq!(t("127.0.0.1"), Some(Target::V4(3000)));
        assert_eq!(t("0.0.0.0"), Some(Target::V4(3000)));
        assert_eq!(t("::ffff:127.0.0.1"), Some(Target::V4(3000)));
        assert_eq!(t("::1"), Some(Target::V6(3000)));
        assert_eq!(t("::"), Some(Target::V6(3000)));
        assert_eq!(t("192.168.1.5"), None);
        assert_eq!(t("127.0.0.2"), None);
        assert_eq!(Target::V6(3000).url(), "http://[::1]:3000/");
        assert_eq!(Target::V4(3000).addr().ip(), Ipv4Addr::LOCALHOST);
    }

    #[tokio::test]
    async fn a_probe_reads_a_real_answer_on_loopback_and_sends_one_get() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = vec![0u8; 1024];
            let n = s.read(&mut req).await.unwrap();
            s.write_all(b"HTTP/1.1 404 Not Found\r\nServer: t\r\n\r\n")
                .await
                .unwrap();
            String::from_utf8_lossy(&req[..n]).into_owned()
        });
        let p = probe(Target::V4(port)).await;
        assert_eq!(p.status, Some(404));
        assert_eq!(p.server.as_deref(), Some("t"));
        let req = server.await.unwrap();
        assert!(
            req.starts_with("GET / HTTP/1.0\r\nHost: localhost\r\n"),
            "{req}"
        );
    }

    #[tokio::test]
    async fn a_probe_of_a_closed_port_says_it_could_not_connect() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let p = probe(Target::V4(port)).await;
        assert_eq!(p.status, None);
        assert!(p.error.unwrap().starts_with("could not connect"));
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_given_up_at_the_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let _hold = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
            drop(s);
        });
        let p = probe_within(Target::V4(port), Duration::from_millis(50)).await;
        assert_eq!(p.status, None);
        assert_eq!(p.error.as_deref(), Some("no complete answer within 50 ms"));
    }

    #[test]
    fn the_probe_json_has_every_key_of_its_schema() {
        let p = read_answer("u".into(), b"HTTP/1.0 200 OK\r\n\r\n");
        let v = p.to_json();
        let schema = probe_schema();
        for key in schema["required"].as_array().unwrap() {
            assert!(v.get(key.as_str().unwrap()).is_some(), "{key}");
        }
        crate::holdmap::schema::validate(&schema, &v, "http").unwrap();
    }
}
