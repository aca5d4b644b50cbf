//! The small, strict HTTP/1.1 both ends of activity recording speak, written here so holdmap
//! links no HTTP crate: the collector's reading of one request head (`parse_head`), its
//! answers (`response`), the loopback endpoint both ends name (`Endpoint`), and the client's one
//! exchange (`exchange`: one request per connection, `Connection: close`).
//!
//! Must never: read a head, a header count or a body past its limit; accept a chunked body, an
//! obsolete folded header or a repeated Host, Content-Length or Authorization; connect to an
//! address that is not loopback (`Endpoint` cannot hold one); wait past the deadline it is given.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::limits::{
    HOLDMAP_ACTIVITY_BODY_BYTES_MAX, HOLDMAP_ACTIVITY_HEAD_BYTES_MAX, HOLDMAP_ACTIVITY_HEADERS_MAX,
    HOLDMAP_ACTIVITY_PATH_BYTES_MAX,
};

/// A refused request: the status to answer with and why, in words (never echoing the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

fn bad(message: &str) -> Refusal {
    Refusal::new(400, message)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
}

/// A request head that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) method: Method,
    pub(crate) path: String,
    /// The Authorization header's value, if sent.
    pub(crate) authorization: Option<String>,
    /// The body's length (0 when no Content-Length was sent).
    pub(crate) content_length: usize,
}

/// Where the head ends: the index just past its blank line, if it is in `bytes`.
pub(crate) fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// Reads one request head (`bytes`, up to and including its blank line) for a collector on
/// 127.0.0.1:`port`. The Host must name loopback (a page elsewhere that got its name resolved
/// to 127.0.0.1 sends its own name: the DNS-rebinding guard) and, if it has a port, ours.
pub(crate) fn parse_head(bytes: &[u8], port: u16) -> Result<Head, Refusal> {
    if bytes.len() > HOLDMAP_ACTIVITY_HEAD_BYTES_MAX {
        return Err(Refusal::new(431, "the request head is too long"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad("the request head is not ASCII"))?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or_else(|| bad("the request head does not end with a blank line"))?;
    if text
        .bytes()
        .any(|b| !(b == b'\r' || b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b)))
    {
        return Err(bad(
            "the request head holds a byte that is not printable ASCII",
        ));
    }
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not `METHOD /path HTTP/1.1`"));
    };
    if version != "HTTP/1.1" {
        return Err(Refusal::new(505, "the collector speaks HTTP/1.1 only"));
    }
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        _ => return Err(Refusal::new(405, "the collector answers GET and POST only")),
    };
    if !path.starts_with('/') || path.len() > HOLDMAP_ACTIVITY_PATH_BYTES_MAX {
        return Err(bad("the request target must be a short absolute path"));
    }
    let mut host = None;
    let mut authorization = None;
    let mut content_length = None;
    let mut count = 0usize;
    for line in lines {
        count += 1;
        if count > HOLDMAP_ACTIVITY_HEADERS_MAX {
            return Err(Refusal::new(431, "the request has too many headers"));
        }
        if line.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad("a header line has no colon"))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad("a header name is not a token"));
        }
        let value = value.trim_matches([' ', '\t']);
        let slot = match name.to_ascii_lowercase().as_str() {
            "host" => &mut host,
            "authorization" => &mut authorization,
            "content-length" => &mut content_length,
            "transfer-encoding" => {
                return Err(bad(
                    "Transfer-Encoding is not accepted: send the body with a Content-Length",
                ));
            }
            _ => continue,
        };
        if slot.replace(value.to_owned()).is_some() {
            return Err(bad(
                "Host, Authorization and Content-Length may appear once each",
            ));
        }
    }
    let host = host.ok_or_else(|| bad("the request has no Host header"))?;
    if !host_is_loopback(&host, port) {
        return Err(Refusal::new(
            403,
            "the Host header does not name this loopback collector",
        ));
    }
    let content_length = match content_length {
        None => 0,
        Some(v) => {
            if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad("Content-Length must be a number"));
            }
            let n: u64 = v
                .parse()
                .map_err(|_| bad("Content-Length must be a number"))?;
            usize::try_from(n)
                .ok()
                .filter(|n| *n <= HOLDMAP_ACTIVITY_BODY_BYTES_MAX)
                .ok_or_else(|| Refusal::new(413, "the body is larger than one record"))?
        }
    };
    if method == Method::Get && content_length > 0 {
        return Err(bad("a GET has no body"));
    }
    Ok(Head {
        method,
        path: path.to_owned(),
        authorization,
        content_length,
    })
}

/// RFC 9110's token characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `127.0.0.1`, `localhost` or `[::1]`, with no port or with `port`.
pub(crate) fn host_is_loopback(host: &str, port: u16) -> bool {
    let (name, rest) = if host.starts_with('[') {
        match host.find(']') {
            Some(at) => host.split_at(at + 1),
            None => return false,
        }
    } else {
        match host.find(':') {
            Some(at) => host.split_at(at),
            None => (host, ""),
        }
    };
    let port_ok = match rest.strip_prefix(':') {
        None => rest.is_empty(),
        Some(p) => {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().ok() == Some(port)
        }
    };
    let name_ok = name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost") || name == "[::1]";
    name_ok && port_ok
}

/// A whole answer: status line, a JSON body and `Connection: close`.
pub(crate) fn response(status: u16, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    if status == 401 {
        out.extend_from_slice(b"WWW-Authenticate: Bearer\r\n");
    }
    if !body.is_empty() {
        out.extend_from_slice(b"Content-Type: application/json\r\n");
    }
    out.extend_from_slice(
        format!(
            "Content-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(body);
    out
}

/// A collector's address: loopback only, a port, and a path. The only kind of place recording
/// and snapshot connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    addr: SocketAddr,
    path: String,
}

impl Endpoint {
    pub(crate) fn new(ip: IpAddr, port: u16, path: &str) -> Endpoint {
        Endpoint {
            addr: SocketAddr::new(ip, port),
            path: path.to_owned(),
        }
    }

    /// `http://127.0.0.1:PORT/path` (or any 127.x.y.z, or `[::1]`). Names are refused, even
    /// `localhost`: what a name resolves to is not this process's to check.
    pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url.strip_prefix("http://").ok_or(
            "it must start with http:// (the collector speaks plain HTTP on loopback)".to_owned(),
        )?;
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, "/"),
        };
        if path.len() > HOLDMAP_ACTIVITY_PATH_BYTES_MAX
            || !path.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
        {
            return Err("its path must be short, printable and without spaces".to_owned());
        }
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or("it must name a port, as http://127.0.0.1:PORT/ does".to_owned())?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or("its port must be a number from 1 to 65535".to_owned())?;
        let ip: IpAddr = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<Ipv6Addr>().map(IpAddr::V6),
            None => host.parse::<Ipv4Addr>().map(IpAddr::V4),
        }
        .map_err(|_| {
            "its host must be a loopback address such as 127.0.0.1 (names are not accepted)"
                .to_owned()
        })?;
        if !ip.is_loopback() {
            return Err(format!(
                "{ip} is not a loopback address: activity is only ever sent to this machine"
            ));
        }
        Ok(Endpoint::new(ip, port, path))
    }

    #[cfg(test)]
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.path)
    }
}

/// Why an exchange with the collector gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    #[error("could not connect to {0}: is `holdmap activity serve` still running?")]
    Connect(String),
    #[error("the connection to the collector failed: {0}")]
    Io(std::io::ErrorKind),
    #[error("the collector did not answer within {0} ms")]
    Timeout(u128),
    #[error("the collector's answer is not HTTP or is larger than {0} bytes")]
    NotHttp(usize),
}

/// One request to `endpoint` with the bearer `token` and `body`, within `deadline`; the status
/// and the body of the answer (read up to `cap` bytes).
pub(crate) async fn exchange(
    endpoint: &Endpoint,
    method: Method,
    token: &str,
    body: &[u8],
    cap: usize,
    deadline: Duration,
) -> Result<(u16, Vec<u8>), ExchangeError> {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(endpoint.addr)
            .await
            .map_err(|_| ExchangeError::Connect(endpoint.url()))?;
        let verb = match method {
            Method::Get => "GET",
            Method::Post => "POST",
        };
        let mut request = format!(
            "{verb} {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n",
            endpoint.path, endpoint.addr
        )
        .into_bytes();
        if method == Method::Post {
            request.extend_from_slice(
                format!(
                    "Content-Type: application/json\r\nContent-Length: {}\r\n",
                    body.len()
                )
                .as_bytes(),
            );
        }
        request.extend_from_slice(b"Connection: close\r\n\r\n");
        request.extend_from_slice(body);
        stream
            .write_all(&request)
            .await
            .map_err(|e| ExchangeError::Io(e.kind()))?;
        let mut got = Vec::new();
        let mut limited = (&mut stream).take(u64::try_from(cap).unwrap_or(u64::MAX) + 1);
        limited
            .read_to_end(&mut got)
            .await
            .map_err(|e| ExchangeError::Io(e.kind()))?;
        if got.len() > cap {
            return Err(ExchangeError::NotHttp(cap));
        }
        read_response(&got).ok_or(ExchangeError::NotHttp(cap))
    };
    tokio::time::timeout(deadline, attempt)
        .await
        .unwrap_or(Err(ExchangeError::Timeout(deadline.as_millis())))
}

/// An answer's status and body (as long as its Content-Length says, or to the end).
pub(crate) fn read_response(bytes: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = head_end(bytes)?;
    let head = std::str::from_utf8(bytes.get(..end)?).ok()?;
    let mut lines = head.split("\r\n");
    let mut status_line = lines.next()?.split(' ');
    if status_line.next()? != "HTTP/1.1" {
        return None;
    }
    let code = status_line.next()?;
    if code.len() != 3 {
        return None;
    }
    let status: u16 = code.parse().ok()?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok());
    let body = bytes.get(end..)?;
    let body = match length {
        Some(n) => body.get(..n)?,
        None => body,
    };
    Some((status, body.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: u16 = 41000;

    fn head(lines: &[&str]) -> Vec<u8> {
        let mut s = lines.join("\r\n");
        s.push_str("\r\n\r\n");
        s.into_bytes()
    }

    fn refused(lines: &[&str]) -> u16 {
        parse_head(&head(lines), PORT).unwrap_err().status
    }

    #[test]
    fn a_well_formed_post_head_is_read() {
        let h = parse_head(
            &head(&[
                "POST /v1/records HTTP/1.1",
                "Host: 127.0.0.1:41000",
                "Authorization: Bearer abc",
                "Content-Length: 12",
                "User-Agent: t",
            ]),
            PORT,
        )
        .unwrap();
        assert_eq!(h.method, Method::Post);
        assert_eq!(h.path, "/v1/records");
        assert_eq!(h.authorization.as_deref(), Some("Bearer abc"));
        assert_eq!(h.content_length, 12);
    }

    #[test]
    fn a_host_that_is_not_loopback_is_refused_as_a_rebinding_guard() {
        for host in [
            "Host: evil.example:41000",
            "Host: 127.0.0.1.evil.example",
            "Host: 192.168.1.5:41000",
            "Host: 127.0.0.1:41001",
            "Host: localhost:x",
        ] {
            assert_eq!(refused(&["GET /v1/records HTTP/1.1", host]), 403, "{host}");
        }
        assert_eq!(refused(&["GET /v1/records HTTP/1.1"]), 400);
        for ok in ["127.0.0.1", "localhost:41000", "LOCALHOST", "[::1]:41000"] {
            assert!(host_is_loopback(ok, PORT), "{ok}");
        }
    }

    #[test]
    fn an_oversize_body_or_head_is_refused_before_it_is_read() {
        let too_big = format!("Content-Length: {}", HOLDMAP_ACTIVITY_BODY_BYTES_MAX + 1);
        assert_eq!(
            refused(&["POST /v1/records HTTP/1.1", "Host: 127.0.0.1", &too_big]),
            413
        );
        assert_eq!(
            refused(&[
                "POST /v1/records HTTP/1.1",
                "Host: 127.0.0.1",
                "Content-Length: 99999999999999999999999"
            ]),
            400
        );
        let long = format!("X-Pad: {}", "a".repeat(HOLDMAP_ACTIVITY_HEAD_BYTES_MAX));
        assert_eq!(
            refused(&["GET /v1/records HTTP/1.1", "Host: 127.0.0.1", &long]),
            431
        );
        let many: Vec<String> = (0..=HOLDMAP_ACTIVITY_HEADERS_MAX)
            .map(|i| format!("X-{i}: 1"))
            .collect();
        let mut lines = vec!["GET /v1/records HTTP/1.1", "Host: 127.0.0.1"];
        lines.extend(many.iter().map(String::as_str));
        assert_eq!(refused(&lines), 431);
    }

    #[test]
    fn chunked_folded_repeated_and_malformed_heads_are_refused() {
        let base = ["POST /v1/records HTTP/1.1", "Host: 127.0.0.1"];
        for extra in [
            vec!["Transfer-Encoding: chunked"],
            vec!["Content-Length: 5", "Content-Length: 5"],
            vec!["Authorization: Bearer a", "authorization: Bearer b"],
            vec!["Host: 127.0.0.1"],
            vec!["X-A: 1", " folded"],
            vec!["Content-Length: +5"],
            vec!["Bad Name: 1"],
            vec!["NoColon"],
        ] {
            let mut lines = base.to_vec();
            lines.extend(extra.iter().copied());
            assert_eq!(refused(&lines), 400, "{extra:?}");
        }
        assert_eq!(
            refused(&["GET /v1/records HTTP/1.0", "Host: 127.0.0.1"]),
            505
        );
        assert_eq!(
            refused(&["DELETE /v1/records HTTP/1.1", "Host: 127.0.0.1"]),
            405
        );
        assert_eq!(
            refused(&["GET  /v1/records HTTP/1.1", "Host: 127.0.0.1"]),
            400
        );
        assert_eq!(refused(&["GET v1 HTTP/1.1", "Host: 127.0.0.1"]), 400);
        assert_eq!(
            refused(&[
                "GET /v1/records HTTP/1.1",
                "Host: 127.0.0.1",
                "Content-Length: 3"
            ]),
            400
        );
        assert_eq!(
            parse_head(
                b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: \x01\r\n\r\n",
                PORT
            )
            .unwrap_err()
            .status,
            400
        );
    }

    #[test]
    fn only_loopback_endpoints_are_accepted() {
        let e = Endpoint::parse("http://127.0.0.1:41000/v1/records").unwrap();
        assert_eq!(e.url(), "http://127.0.0.1:41000/v1/records");
        assert!(Endpoint::parse("http://[::1]:41000/").is_ok());
        for bad in [
            "https://127.0.0.1:41000/",
            "http://localhost:41000/",
            "http://192.0.2.1:41000/",
            "http://10.0.0.1:41000/v1/records",
            "http://user@127.0.0.1:41000/",
            "http://127.0.0.1/",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:41000/a b",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
        let err = Endpoint::parse("http://192.0.2.1:9/").unwrap_err();
        assert!(err.contains("not a loopback"), "{err}");
    }

    #[test]
    fn a_response_carries_its_length_and_closes_and_reads_back() {
        let r = response(401, b"{}");
        let text = String::from_utf8(r.clone()).unwrap();
        assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{text}");
        assert!(text.contains("Content-Length: 2\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert_eq!(read_response(&r), Some((401, b"{}".to_vec())));
        assert_eq!(read_response(b"SSH-2.0\r\n\r\n"), None);
    }
}
