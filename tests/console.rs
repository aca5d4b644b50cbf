//! `holdcall console` through the real binary over real TCP: every HTTP rule (loopback Host,
//! GET/HEAD only, the bearer token and nowhere else, strict headers, strict queries), the page
//! without the token and the API with it, a loopback-only bind, and a console that never
//! writes the database and never starts the daemon.

use crate::common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

/// A running `holdcall console --port 0`, killed when dropped.
struct Console {
    child: Child,
    /// `127.0.0.1:PORT`
    addr: String,
    token: String,
}

impl Console {
    fn start(env: &Env) -> Console {
        let mut child = env
            .cmd(&["console", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        let first = String::from_utf8(lines.recv_timeout(PATIENCE).unwrap()).unwrap();
        let rest = first
            .trim_end()
            .strip_prefix("holdcall console on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        let (addr, token) = rest.split_once("/#token=").unwrap();
        assert_eq!(token.len(), 64, "{first}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        let mut said = String::new();
        for _ in 0..3 {
            said.push_str(&String::from_utf8(lines.recv_timeout(PATIENCE).unwrap()).unwrap());
        }
        assert!(said.contains("read-only"), "{said}");
        assert!(said.contains("until this process stops"), "{said}");
        Console {
            child,
            addr: addr.to_string(),
            token: token.to_string(),
        }
    }

    fn host(&self) -> String {
        self.addr.clone()
    }

    /// Sends `method path` with these headers (a Host naming the console unless one is given).
    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.host()));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("Connection: close\r\n\r\n");
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes).unwrap();
        Answer::parse(&bytes)
    }

    fn get(&self, path: &str) -> Answer {
        self.raw("GET", path, &[])
    }

    fn api(&self, path: &str) -> Answer {
        let auth = format!("Bearer {}", self.token);
        self.raw("GET", path, &[("Authorization", &auth)])
    }

    fn json(&self, path: &str) -> serde_json::Value {
        let a = self.api(path);
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        serde_json::from_str(&a.body).unwrap()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn parse(bytes: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(bytes).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        Answer {
            status,
            headers,
            body: body.to_string(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn assert_strict_headers(&self) {
        assert_eq!(self.header("cache-control"), Some("no-store"));
        assert_eq!(self.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(self.header("referrer-policy"), Some("no-referrer"));
        let csp = self.header("content-security-policy").unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
    }
}

/// A home with a journal: one rule, one denied and one allowed call, the daemon still running.
fn home_with_calls() -> Env {
    let env = Env::fast();
    env.ok(&["policy", "deny", "add"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "add", r#"{"a":1,"b":2}"#));
    assert!(is_refusal(&r.recv_json()));
    r.send(&call("2", "echo", r#"{"text":"hi"}"#));
    r.recv_json();
    r.finish();
    env
}

#[test]
fn a_request_naming_a_foreign_host_gets_421_even_with_the_token() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let auth = format!("Bearer {}", c.token);
    for host in [
        "evil.example",
        "evil.example:7717",
        "127.0.0.1.nip.io",
        "0.0.0.0",
    ] {
        let a = c.raw(
            "GET",
            "/api/snapshot",
            &[("Host", host), ("Authorization", &auth)],
        );
        assert_eq!(a.status, 421, "{host}");
        a.assert_strict_headers();
        let a = c.raw("GET", "/", &[("Host", host)]);
        assert_eq!(a.status, 421, "{host}");
    }
    // An absolute-form request line naming another host is refused too.
    let a = c.raw(
        "GET",
        "http://evil.example/api/snapshot",
        &[("Authorization", &auth)],
    );
    assert_eq!(a.status, 421);
    for host in ["localhost", &c.addr.replace("127.0.0.1", "localhost")] {
        assert_eq!(c.raw("GET", "/", &[("Host", host)]).status, 200, "{host}");
    }
}

#[test]
fn an_api_path_without_the_token_gets_401_and_says_how_to_send_it() {
    let env = home_with_calls();
    let c = Console::start(&env);
    for path in [
        "/api/snapshot",
        "/api/events",
        "/api/held",
        "/api/policy",
        "/api/explain?tool=add",
        "/api/session?id=x",
    ] {
        let a = c.get(path);
        assert_eq!(a.status, 401, "{path}");
        assert_eq!(
            a.header("www-authenticate"),
            Some("Bearer realm=\"holdcall console\"")
        );
        a.assert_strict_headers();
        assert!(!a.body.contains("call.request"), "{}", a.body);
    }
    let wrong = format!("Bearer {}", "0".repeat(64));
    assert_eq!(
        c.raw("GET", "/api/snapshot", &[("Authorization", &wrong)])
            .status,
        401
    );
    let lower = format!("bearer {}", c.token);
    assert_eq!(
        c.raw("GET", "/api/snapshot", &[("Authorization", &lower)])
            .status,
        401
    );
}

#[test]
fn a_token_in_the_query_a_cookie_or_another_header_is_ignored_with_401() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let t = c.token.clone();
    assert_eq!(c.get(&format!("/api/snapshot?token={t}")).status, 401);
    assert_eq!(
        c.get(&format!("/api/snapshot?access_token={t}")).status,
        401
    );
    let cookie = format!("token={t}");
    assert_eq!(
        c.raw("GET", "/api/snapshot", &[("Cookie", &cookie)]).status,
        401
    );
    assert_eq!(
        c.raw("GET", "/api/snapshot", &[("X-Token", &t)]).status,
        401
    );
    let bearer = format!("Bearer {t}");
    assert_eq!(
        c.raw("GET", "/api/snapshot", &[("Proxy-Authorization", &bearer)])
            .status,
        401
    );
}

#[test]
fn every_method_but_get_and_head_gets_405_with_allow() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let auth = format!("Bearer {}", c.token);
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"] {
        for path in ["/", "/api/held", "/api/explain?tool=add"] {
            let a = c.raw(
                method,
                path,
                &[("Authorization", &auth), ("Content-Length", "0")],
            );
            assert_eq!(a.status, 405, "{method} {path}");
            assert_eq!(a.header("allow"), Some("GET, HEAD"));
            a.assert_strict_headers();
        }
    }
    let head = c.raw("HEAD", "/", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

#[test]
fn an_unknown_path_gets_404_with_the_token_and_401_without() {
    let env = home_with_calls();
    let c = Console::start(&env);
    for path in ["/nope", "/api/nope", "/api/approve", "/index.html", "/api/"] {
        let a = c.api(path);
        assert_eq!(a.status, 404, "{path}");
        a.assert_strict_headers();
        assert_eq!(c.get(path).status, 401, "{path}");
    }
}

#[test]
fn an_oversized_or_malformed_query_gets_400_with_a_plain_message() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let long_tool = format!("/api/explain?tool={}", "a".repeat(300));
    let long_query = format!("/api/events?after={}", "1".repeat(40 * 1024));
    let long_args = format!(
        "/api/explain?tool=add&arguments=%7B%22a%22%3A%22{}%22%7D",
        "x".repeat(9000)
    );
    for path in [
        "/api/events?after=abc",
        "/api/events?after=-1",
        "/api/events?after=%zz",
        "/api/events?limit=1e3",
        "/api/events?after=1&after=2",
        "/api/events?nope=1",
        "/api/explain",
        "/api/explain?tool=%ff",
        "/api/explain?tool=a%01b",
        "/api/explain?tool=add&arguments=%5B1%5D",
        "/api/explain?tool=add&arguments=nope",
        "/api/session?id=../x",
        "/api/session",
        long_tool.as_str(),
        long_args.as_str(),
    ] {
        let a = c.api(path);
        assert_eq!(a.status, 400, "{path}: {}", a.body);
        assert!(
            a.header("content-type").unwrap().starts_with("text/plain"),
            "{path}"
        );
        assert!(!a.body.trim().is_empty(), "{path}");
        a.assert_strict_headers();
    }
    // A request line this long is refused before any route (by the HTTP layer or by the rule).
    let a = c.api(&long_query);
    assert!(
        a.status == 400 || a.status == 414 || a.status == 431,
        "{}",
        a.status
    );
}

#[test]
fn the_page_and_its_assets_load_without_the_token_and_name_no_other_origin() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let page = c.get("/");
    assert_eq!(page.status, 200);
    page.assert_strict_headers();
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        page.body.contains("<script src=\"/app.js\""),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<script>"), "no inline script");
    assert!(!page.body.contains("http://") && !page.body.contains("https://"));
    for (path, kind) in [
        ("/app.js", "text/javascript"),
        ("/style.css", "text/css"),
        ("/icon.svg", "image/svg+xml"),
    ] {
        let a = c.get(path);
        assert_eq!(a.status, 200, "{path}");
        assert!(
            a.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        a.assert_strict_headers();
        assert!(!a.body.contains("https://"), "{path} names another origin");
    }
    // The page holds nothing recorded: the journal is only behind the token.
    assert!(!page.body.contains("echo"));
}

#[test]
fn the_api_with_the_token_shows_the_denied_and_the_allowed_call_as_log_does() {
    let env = home_with_calls();
    let c = Console::start(&env);
    let events = c.json("/api/events?after=0");
    let calls: Vec<&serde_json::Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "call.request")
        .collect();
    assert_eq!(calls.len(), 2, "{events}");
    assert_eq!(calls[0]["tool"], "add");
    assert_eq!(calls[0]["state"], "denied");
    assert_eq!(calls[1]["state"], "allowed");
    assert_eq!(calls[0]["hash"].as_str().unwrap().len(), 64);
    assert_eq!(calls[0]["prev_hash"].as_str().unwrap().len(), 64);
    // The console and `holdcall log` say the same words about each call.
    let log = env.ok(&["log"]);
    for c in &calls {
        let why = c["why"].as_str().unwrap();
        assert!(log.contains(why), "{why:?} not in\n{log}");
    }
    assert!(
        calls[1]["why"]
            .as_str()
            .unwrap()
            .contains("→ forwarded, answered ok"),
        "{}",
        calls[1]["why"]
    );

    let after = calls[0]["chain_seq"].as_i64().unwrap();
    let later = c.json(&format!("/api/events?after={after}&limit=1"));
    assert_eq!(later["events"].as_array().unwrap().len(), 1);
    assert_eq!(later["cursor"], after + 1);

    let snap = c.json("/api/snapshot");
    assert_eq!(snap["journal"]["chain"], "intact", "{snap}");
    assert_eq!(snap["counts"]["denied"], 1);
    assert_eq!(snap["counts"]["allowed"], 1);
    assert_eq!(snap["sessions"][0]["state"], "ended");
    assert_eq!(snap["held"]["available"], true, "{snap}");

    let sid = snap["sessions"][0]["id"].as_str().unwrap();
    let session = c.json(&format!("/api/session?id={sid}"));
    let kinds: Vec<&str> = session["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"session.start"));
    assert_eq!(kinds.last(), Some(&"session.end"));
    assert_eq!(c.api("/api/session?id=nosuchsession").status, 404);

    let policy = c.json("/api/policy");
    assert_eq!(policy["rules"].as_array().unwrap().len(), 1, "{policy}");
    assert!(
        policy["rules"][0]["text"]
            .as_str()
            .unwrap()
            .contains("forbid")
    );
    assert_eq!(policy["history"].as_array().unwrap().len(), 1);
    assert!(policy["history"][0]["diff"].as_str().unwrap().contains("+"));
    assert_eq!(policy["connectors"].as_array().unwrap().len(), 0);

    let explain = c.json("/api/explain?tool=add&connector=demo");
    assert_eq!(explain["available"], true, "{explain}");
    assert_eq!(explain["explanation"]["decision"]["effect"], "deny");
    assert!(explain["explanation"]["cedar"]["forbid_decision"].is_string());
}

#[test]
fn a_held_call_is_shown_with_its_arguments_made_visible_and_the_lines_to_decide_it() {
    let env = Env::fast();
    env.ok(&["policy", "ask", "echo"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "echo", "{\"text\":\"pay\u{202e}evil\"}"));
    r.barrier(1);
    let c = Console::start(&env);
    let held = c.json("/api/held");
    assert_eq!(held["available"], true, "{held}");
    let h = &held["held"][0];
    let args = h["arguments"].as_str().unwrap();
    assert!(args.contains("pay\\u{202e}evil"), "{args}");
    assert!(!c.api("/api/held").body.contains('\u{202e}'));
    let id = h["id"].as_str().unwrap();
    assert_eq!(h["approve"], format!("holdcall approve {id}"));
    assert_eq!(h["reject"], format!("holdcall reject {id}"));
    let snap = c.json("/api/snapshot");
    assert_eq!(snap["held"]["count"], 1);
    assert_eq!(snap["counts"]["held"], 1);
    // Still held: the console decided nothing.
    assert!(env.ok(&["approve"]).contains(id));
    env.ok(&["reject", id]);
    drop(r);
}

#[test]
fn the_console_refuses_to_bind_anything_but_loopback() {
    let env = home_with_calls();
    for addr in ["0.0.0.0", "::", "192.168.1.10", "example.com"] {
        let err = env.fails(&["console", "--port", "0", "--bind", addr], 1);
        assert!(err.contains("loopback only"), "{err}");
    }
}

#[test]
fn the_console_without_a_journal_refuses_to_serve() {
    let env = Env::new();
    let err = env.fails(&["console", "--port", "0"], 1);
    assert!(err.to_lowercase().contains("journal"), "{err}");
}

#[test]
fn the_console_never_writes_the_database_and_never_starts_the_daemon() {
    let env = home_with_calls();
    env.ok(&["daemon", "stop"]);
    let before = std::fs::read(env.db()).unwrap();
    let mtime = std::fs::metadata(env.db()).unwrap().modified().unwrap();
    {
        let c = Console::start(&env);
        let held = c.json("/api/held");
        assert_eq!(held["available"], false);
        assert!(
            held["reason"].as_str().unwrap().contains("not running"),
            "{held}"
        );
        let explain = c.json("/api/explain?tool=add");
        assert_eq!(explain["available"], false);
        let policy = c.json("/api/policy");
        assert!(
            policy["agents_note"]
                .as_str()
                .unwrap()
                .contains("not running")
        );
        for path in ["/api/snapshot", "/api/events?after=0", "/api/policy"] {
            assert_eq!(c.api(path).status, 200, "{path}");
        }
        let snap = c.json("/api/snapshot");
        assert_eq!(snap["held"]["available"], false);
    }
    let out = env.run(&["daemon", "status"]);
    assert_eq!(out.status.code(), Some(3), "the console started a daemon");
    assert_eq!(std::fs::read(env.db()).unwrap(), before);
    assert_eq!(
        std::fs::metadata(env.db()).unwrap().modified().unwrap(),
        mtime
    );
}

#[test]
fn a_connectors_secret_appears_in_no_console_response() {
    // A real connector with a canary secret in the real Secret Service (a private one), used by
    // a real session, then every view of the console read: the canary is in none of them.
    let ss = SecretService::start();
    let env = Env::fast();
    env.attach(&ss);
    let canary = format!("hc-canary-{}", holdcall::ids::random_hex(12).unwrap());
    let bin = Env::bin();
    let mut set = env
        .cmd(&[
            "connector",
            "set",
            "demo",
            "--env",
            "DEMO_TOKEN",
            "--",
            bin.to_str().unwrap(),
            "demo-server",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(format!("{canary}\n").as_bytes())
        .unwrap();
    let out = set.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    env.ok(&["policy", "deny", "add"]);
    env.ok(&["policy", "ask", "echo"]);
    let mut r = env.relay("demo");
    r.handshake();
    r.send(&call("1", "add", r#"{"a":1,"b":2}"#));
    assert!(is_refusal(&r.recv_json()));
    r.send(&call("2", "echo", r#"{"text":"held"}"#));
    let session = journal_rows(&env.db())
        .into_iter()
        .find(|e| e["kind"] == "session.start")
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();

    let c = Console::start(&env);
    let policy = c.json("/api/policy");
    let list = policy["connectors"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{policy}");
    assert_eq!(list[0]["name"], "demo");
    assert_eq!(list[0]["env_key"], "DEMO_TOKEN");
    let mut bodies = vec![policy.to_string()];
    for path in [
        "/api/snapshot".to_string(),
        "/api/events?after=0".to_string(),
        "/api/held".to_string(),
        format!("/api/session?id={session}"),
        "/api/explain?tool=echo&connector=demo".to_string(),
    ] {
        let a = c.api(&path);
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        bodies.push(a.body);
    }
    for path in ["/", "/app.js", "/style.css"] {
        bodies.push(c.get(path).body);
    }
    assert!(
        bodies.iter().any(|b| b.contains("DEMO_TOKEN")),
        "the views were read"
    );
    for b in &bodies {
        assert!(
            !b.contains(&canary),
            "a console response carries the secret"
        );
    }
    drop(c);
    r.finish();
}

/// A home with a journal and nothing else the test needs.
fn home_with_a_journal() -> Env {
    let env = Env::fast();
    env.ok(&["policy", "deny", "add"]);
    env
}

/// Sends `bytes` on a new connection and reads until the console closes it.
fn send_raw(addr: &str, bytes: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    Answer::parse(&out)
}

/// Reads until the console closes `s`; fails if it is still open after PATIENCE.
fn closed_by_the_console(mut s: TcpStream) {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut out = Vec::new();
    if let Err(e) = s.read_to_end(&mut out) {
        assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the console kept the connection open: {e}"
        );
    }
}

#[test]
fn an_http10_request_without_host_and_one_with_two_hosts_get_421() {
    let env = home_with_a_journal();
    let c = Console::start(&env);
    let host = c.host();
    let two =
        format!("GET / HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let auth = format!("Authorization: Bearer {}\r\n", c.token);
    for req in [
        "GET / HTTP/1.0\r\n\r\n".to_string(),
        format!("GET /api/snapshot HTTP/1.0\r\n{auth}\r\n"),
        "GET / HTTP/1.1\r\nConnection: close\r\n\r\n".to_string(),
        two,
    ] {
        let a = send_raw(&c.addr, req.as_bytes());
        assert_eq!(a.status, 421, "{req:?}: {}", a.body);
        a.assert_strict_headers();
    }
    // The same requests with one loopback Host are answered.
    let one = format!("GET / HTTP/1.0\r\nHost: {host}\r\n\r\n");
    assert_eq!(send_raw(&c.addr, one.as_bytes()).status, 200);
}

#[test]
fn a_connection_that_never_finishes_its_headers_is_closed() {
    let env = home_with_a_journal();
    let c = Console::start(&env);
    let mut s = TcpStream::connect(&c.addr).unwrap();
    // Headers begun and never ended: the blank line never comes.
    s.write_all(format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: 1", c.host()).as_bytes())
        .unwrap();
    closed_by_the_console(s);
    // A connection that sends nothing at all is closed too.
    closed_by_the_console(TcpStream::connect(&c.addr).unwrap());
    assert_eq!(c.get("/").status, 200);
}

#[test]
fn more_connections_than_the_limit_shed_the_longest_waiting_without_stopping_the_console() {
    let env = home_with_a_journal();
    let c = Console::start(&env);
    let partial = format!("GET / HTTP/1.1\r\nHost: {}\r\n", c.host());
    let over = 4;
    let held: Vec<TcpStream> = (0..holdcall::limits::CONSOLE_CONNECTIONS_MAX + over)
        .map(|_| {
            let mut s = TcpStream::connect(&c.addr).unwrap();
            s.write_all(partial.as_bytes()).unwrap();
            s
        })
        .collect();
    // Every slot is taken by a connection that never finishes its head; a real request is
    // accepted at once (the kernel hands connections over in order, so all the held ones were
    // accepted before it), and answered.
    let a = c.get("/");
    assert_eq!(a.status, 200);
    a.assert_strict_headers();
    // The oldest were shed to make room as the newer ones came, before the answer was written.
    for s in &held[..over] {
        s.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        match (&*s).read(&mut byte) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a connection that should have been shed is still open: {other:?}"),
        }
    }
    // The rest are closed when their head deadline passes.
    for s in held {
        s.set_nonblocking(false).unwrap();
        closed_by_the_console(s);
    }
    let api = c.json("/api/snapshot");
    assert_eq!(api["journal"]["chain"], "intact");
}

/// What issue 12 promises: a request with the token is answered within this while the
/// console's port is flooded with idle or dribbling loopback connections.
const PROMISE: std::time::Duration = std::time::Duration::from_secs(1);

/// Lets this test process hold the sockets of the flood tests, which run beside the others in
/// one process: the soft RLIMIT_NOFILE is raised to 4,096 (or the hard limit, if lower); a
/// console started afterwards inherits it. Fails, naming the limit, below 2,048.
fn allow_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        setrlimit(Resource::RLIMIT_NOFILE, hard.min(4096), hard).unwrap();
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        soft >= 2048,
        "the flood tests hold over a thousand sockets; RLIMIT_NOFILE's hard limit is {hard}"
    );
}

impl Console {
    /// Sends one request with the token on a new connection and returns how long it took from
    /// before the connect to the end of the answer; the answer must be 200.
    fn timed_api(&self, path: &str) -> std::time::Duration {
        let started = std::time::Instant::now();
        let a = self.api(path);
        let took = started.elapsed();
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        a.assert_strict_headers();
        took
    }
}

#[test]
fn a_thousand_idle_loopback_connections_do_not_delay_a_request_with_the_token() {
    allow_open_files();
    let env = home_with_calls();
    let c = Console::start(&env);
    // The console's first read of the journal is not what is measured.
    c.json("/api/snapshot");
    let mut idle = Vec::new();
    for n in [0, 100, 1000] {
        // Connections that send nothing, left open by this test.
        while idle.len() < n {
            idle.push(TcpStream::connect(&c.addr).unwrap());
        }
        let took = c.timed_api("/api/snapshot");
        eprintln!("with {n} idle loopback connections, a request with the token took {took:?}");
        assert!(
            took < PROMISE,
            "with {n} idle connections a request with the token took {took:?}"
        );
    }
    // The oldest idle connection was closed by the console (shed, or past its head deadline).
    closed_by_the_console(idle.swap_remove(0));
}

/// What the dribbling attacker saw.
struct Dribbled {
    /// Header lines written.
    lines: usize,
    /// Connections the console closed (each replaced by a new one).
    cut: usize,
    /// The longest a dribbling connection lived before the console closed it.
    longest: std::time::Duration,
}

/// Keeps `n` connections dribbling a request head to `addr`: a request line, then one header
/// line per connection every `pace`, never the blank line that ends the head. A connection the
/// console closes is replaced at once. Says on `ready` once all `n` are open; stops as soon as
/// `stop` says so (or is dropped).
fn dribble(
    addr: String,
    host: String,
    n: usize,
    pace: std::time::Duration,
    ready: std::sync::mpsc::Sender<()>,
    stop: std::sync::mpsc::Receiver<()>,
) -> Dribbled {
    use std::time::Instant;
    let open = || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(format!("GET /api/snapshot HTTP/1.1\r\nHost: {host}\r\n").as_bytes())
            .unwrap();
        s.set_nonblocking(true).unwrap();
        (s, Instant::now())
    };
    let mut conns: Vec<(TcpStream, Instant)> = (0..n).map(|_| open()).collect();
    let _ = ready.send(());
    let mut out = Dribbled {
        lines: 0,
        cut: 0,
        longest: std::time::Duration::ZERO,
    };
    loop {
        for (i, slot) in conns.iter_mut().enumerate() {
            let mut byte = [0u8; 1];
            let closed = match slot.0.read(&mut byte) {
                Ok(_) => true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                Err(_) => true,
            } || slot
                .0
                .write_all(format!("X-Dribble-{i}: {}\r\n", out.lines).as_bytes())
                .is_err();
            if closed {
                out.cut += 1;
                out.longest = out.longest.max(slot.1.elapsed());
                *slot = open();
            } else {
                out.lines += 1;
            }
        }
        // The attacker's pace: each connection sends a line per `pace`, until told to stop.
        match stop.recv_timeout(pace) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return out,
        }
    }
}

#[test]
fn two_hundred_dribbling_connections_do_not_delay_a_request_with_the_token() {
    allow_open_files();
    let env = home_with_calls();
    let c = Console::start(&env);
    c.json("/api/snapshot");
    let baseline = c.timed_api("/api/snapshot");
    let (stop, stopped) = std::sync::mpsc::channel();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let attacker = {
        let (addr, host) = (c.addr.clone(), c.host());
        let pace = std::time::Duration::from_millis(500);
        std::thread::spawn(move || dribble(addr, host, 200, pace, ready_tx, stopped))
    };
    ready.recv_timeout(PATIENCE).unwrap();
    // Requests back to back for longer than two head deadlines, so dribblers are cut and come
    // back while they are sent.
    let window = 2 * holdcall::limits::CONSOLE_HEAD_TIMEOUT + std::time::Duration::from_secs(1);
    let started = std::time::Instant::now();
    let (mut requests, mut worst) = (0, std::time::Duration::ZERO);
    while started.elapsed() < window {
        worst = worst.max(c.timed_api("/api/snapshot"));
        requests += 1;
    }
    stop.send(()).unwrap();
    let seen = attacker.join().unwrap();
    eprintln!(
        "with 200 dribbling loopback connections ({} header lines, {} cut by the console, the \
         longest-lived {:?}), the slowest of {requests} requests with the token took {worst:?} \
         (alone: {baseline:?})",
        seen.lines, seen.cut, seen.longest
    );
    assert!(
        worst < PROMISE,
        "with 200 dribbling connections a request with the token took {worst:?}"
    );
    // The head deadline is not extended by dribbling: dribblers were cut, each well before the
    // console's idle timeout (which only a written answer would restart).
    assert!(seen.cut > 0, "the console cut no dribbling connection");
    assert!(
        seen.longest < holdcall::limits::CONSOLE_IDLE_TIMEOUT,
        "a dribbling connection lived {:?}",
        seen.longest
    );
}
