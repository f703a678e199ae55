//! The api against clients that are slow, idle, greedy or malformed, on
//! loopback through raw sockets: what each gets, and that others are
//! served meanwhile. No build is published: `/health/live` answers and the
//! routes that read a body read it (the body comes before the build).

use std::time::Duration;

use api::{serve, Config};
use clap::Parser;
use tests::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An api serving in process with `flags`, until dropped.
struct Api {
    addr: std::net::SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    _root: TempDir,
}

async fn start(flags: &[&str]) -> Api {
    let root = TempDir::new("hostile");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let dirs = ["--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    let config =
        Config::parse_from(["api", "--availability-every-s", "0"].into_iter().chain(dirs).chain(flags.iter().copied()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, config.app().unwrap(), async {
        let _ = stopped.await;
    }));
    Api { addr, _stop: stop, _root: root }
}

const HEALTH: &[u8] = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n";

/// Reads one response head (and whatever arrived with it); `None` when
/// the connection closed first. Gives up after 10 s.
async fn response(stream: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if got.windows(4).any(|w| w == b"\r\n\r\n") {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("an answer or a close within 10 s");
    (!got.is_empty()).then(|| String::from_utf8_lossy(&got).into_owned())
}

/// The status code of a response head.
fn status(head: &str) -> u16 {
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not a response: {head:?}"))
}

/// Waits until the server closes `stream` (EOF or reset); panics after 10 s.
async fn closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    let wait = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the server closes the connection");
}

/// One request on a fresh connection; its status.
async fn get_health(api: &Api) -> u16 {
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    stream.write_all(HEALTH).await.unwrap();
    status(&response(&mut stream).await.expect("an answer"))
}

/// Without a build the api is alive but not ready: a load balancer asking
/// `/health` sends it no traffic yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_build_the_api_is_alive_but_not_ready() {
    let api = start(&[]).await;
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let answer = response(&mut stream).await.unwrap();
    assert_eq!(status(&answer), 503, "{answer}");
    assert!(answer.contains("\"status\":\"starting\""), "{answer}");
    assert_eq!(get_health(&api).await, 200, "/health/live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_sent_too_slowly_is_cut_off_while_others_are_served() {
    let api = start(&["--header-timeout-ms", "300"]).await;
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        stream.write_all(b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n").await.unwrap();
        slow.push(stream);
    }
    // Trickle a field line every 50 ms: each byte is progress, but the
    // head as a whole must be in within the timeout.
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            for stream in &mut slow {
                let _ = stream.write_all(b"X-Slow: 1\r\n").await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        slow
    });
    for _ in 0..20 {
        assert_eq!(get_health(&api).await, 200, "others are served meanwhile");
    }
    let mut slow = trickle.await.unwrap();
    for stream in &mut slow {
        closed(stream).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let api = start(&["--idle-timeout-ms", "400"]).await;
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    stream.write_all(HEALTH).await.unwrap();
    assert_eq!(status(&response(&mut stream).await.unwrap()), 200);
    // Well inside the timeout the connection is kept for the next request.
    stream.write_all(HEALTH).await.unwrap();
    assert_eq!(status(&response(&mut stream).await.unwrap()), 200);
    let idle = std::time::Instant::now();
    closed(&mut stream).await;
    assert!(idle.elapsed() >= Duration::from_millis(350), "not closed before the timeout: {:?}", idle.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stalls_is_refused_with_408() {
    let api = start(&["--body-timeout-ms", "300"]).await;
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    let head = "POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"{\"q\":").await.unwrap();
    let answer = response(&mut stream).await.expect("an answer");
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_larger_than_the_bound_is_431() {
    let api = start(&["--max-head-bytes", "8192"]).await;
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    let big = format!("GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(20_000));
    let _ = stream.write_all(big.as_bytes()).await;
    assert_eq!(status(&response(&mut stream).await.expect("an answer")), 431);
    // Just under the bound is fine.
    let fits = format!("GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(7_000));
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    stream.write_all(fits.as_bytes()).await.unwrap();
    assert_eq!(status(&response(&mut stream).await.expect("an answer")), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_connections_give_way_and_busy_ones_do_not() {
    let api = start(&["--max-connections", "4", "--header-timeout-ms", "60000"]).await;
    // Four idle keep-alive connections fill the cap...
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        stream.write_all(HEALTH).await.unwrap();
        assert_eq!(status(&response(&mut stream).await.unwrap()), 200);
        idle.push(stream);
    }
    // ...and a fifth is served all the same: the one idle longest is closed.
    assert_eq!(get_health(&api).await, 200);
    closed(&mut idle[0]).await;
    for stream in &mut idle[1..] {
        stream.write_all(HEALTH).await.unwrap();
        assert_eq!(status(&response(stream).await.unwrap()), 200, "the others are kept");
    }
    drop(idle);
    // Four connections in the middle of a head: nobody gives way, so a new
    // connection is told 503 at once and closed.
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        stream.write_all(b"GET /health/live HTTP/1.1\r\n").await.unwrap();
        busy.push(stream);
    }
    // The dropped idle connections free their places as the server sees
    // them close; until then a newcomer may evict one of them instead.
    let mut refused = String::new();
    tests::wait::until("a connection over the cap refused", 50, Duration::from_millis(20), async || {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        let _ = stream.write_all(HEALTH).await;
        refused = response(&mut stream).await.expect("an answer");
        status(&refused) == 503
    })
    .await;
    assert!(refused.contains("over_capacity") && refused.to_ascii_lowercase().contains("retry-after: 1"), "{refused}");
    // The connections holding heads finish them and are answered.
    for stream in &mut busy {
        stream.write_all(b"Host: localhost\r\n\r\n").await.unwrap();
        assert_eq!(status(&response(stream).await.unwrap()), 200);
    }
}

/// A route that reads a body takes JSON only: a cross-site form post
/// (`text/plain`, sent by browsers without a preflight) is 415, in the
/// endpoint's error form. Every answer says `nosniff`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_must_be_json_and_answers_are_not_sniffed() {
    let api = start(&[]).await;
    for (path, kind) in
        [("/api/v1/search", "\"code\":\"unsupported_media_type\""), ("/api/guard/public-mcp", "\"jsonrpc\"")]
    {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        let body = r#"{"query":"x"}"#;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = response(&mut stream).await.expect("an answer");
        // The JSON body may come after the head.
        let mut rest = vec![0u8; 4096];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut rest)).await {
            answer.push_str(&String::from_utf8_lossy(&rest[..n]));
        }
        assert_eq!(status(&answer), 415, "{path}: {answer}");
        assert!(answer.contains(kind), "{path}: {answer}");
        assert!(answer.to_ascii_lowercase().contains("x-content-type-options: nosniff"), "{path}: {answer}");
    }
}

/// A request with both a length and a chunked body is read as chunked and
/// answered, and its connection closed (RFC 9112 section 6.1): whatever
/// follows it on the connection is never taken for a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_and_chunked_together_close_the_connection_after_the_answer() {
    let api = start(&[]).await;
    let mut stream = TcpStream::connect(api.addr).await.unwrap();
    let smuggled = "POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                    Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
                    GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n";
    stream.write_all(smuggled.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut all)).await.expect("closed").unwrap();
    let all = String::from_utf8_lossy(&all);
    assert_eq!(all.matches("HTTP/1.1 ").count(), 1, "one answer, then the connection closes: {all}");
}

/// Malformed and unusual request heads, each on a fresh connection: every
/// one gets an answer (never a dropped connection, never a panic), with the
/// status here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_request_gets_an_answer() {
    let api = start(&[]).await;
    let cases: &[(&str, &[u8], u16)] = &[
        ("authority-form GET", b"GET localhost:4000 HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("CONNECT", b"CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\n", 400),
        ("asterisk-form GET", b"GET * HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("OPTIONS *", b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n", 204),
        ("absolute-form, same host", b"GET http://localhost/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n", 200),
        ("absolute-form, other host", b"GET http://evil.example/health HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("no Host in HTTP/1.1", b"GET /health/live HTTP/1.1\r\n\r\n", 400),
        ("no Host in HTTP/1.0", b"GET /health/live HTTP/1.0\r\n\r\n", 200),
        ("Host twice", b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n", 400),
        ("leading empty lines", b"\r\n\r\nGET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n", 200),
        ("not HTTP", b"HELLO\r\n\r\n", 400),
        ("unknown version", b"GET /health/live HTTP/3.7\r\nHost: localhost\r\n\r\n", 400),
        ("NUL in the target", b"GET /he\0alth HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("non-ASCII in the target", b"GET /h\xc3\xa9alth HTTP/1.1\r\nHost: localhost\r\n\r\n", 404),
        ("space in a field name", b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nBad Name: x\r\n\r\n", 400),
        ("field line without a colon", b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nnocolon\r\n\r\n", 400),
        ("control byte in a value", b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nX: a\x01b\r\n\r\n", 400),
        ("obsolete line folding", b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nX: a\r\n b\r\n\r\n", 400),
        ("negative length", b"POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n", 400),
        ("two lengths", b"POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1, 2\r\n\r\n", 400),
        ("gzip coding", b"POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (
            "bad chunk size",
            b"POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: chunked\r\n\r\nZZ\r\n",
            400,
        ),
        ("dot segments", b"GET /../../etc/passwd HTTP/1.1\r\nHost: localhost\r\n\r\n", 404),
        ("bad escape", b"GET /%ZZ HTTP/1.1\r\nHost: localhost\r\n\r\n", 404),
        ("escape that is not UTF-8", b"GET /%FF HTTP/1.1\r\nHost: localhost\r\n\r\n", 400),
        ("unknown method", b"BREW /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n", 405),
    ];
    let mut failures = Vec::new();
    for (name, request, expected) in cases {
        let mut stream = TcpStream::connect(api.addr).await.unwrap();
        let _ = stream.write_all(request).await;
        match response(&mut stream).await {
            Some(head) if status(&head) == *expected => {}
            Some(head) => failures.push(format!("{name}: {}", head.lines().next().unwrap_or_default())),
            None => failures.push(format!("{name}: closed without an answer")),
        }
    }
    assert!(failures.is_empty(), "expected other answers:\n{}", failures.join("\n"));
    assert_eq!(get_health(&api).await, 200, "the server is still up");
}

/// Clients that go away at any point of an exchange are routine, not
/// errors: the api's log (the binary's, at info level) holds no ERROR after
/// a hundred of them, and the api still answers.
#[test]
fn clients_that_go_away_are_not_errors_in_the_log() {
    use std::io::Write;
    let root = TempDir::new("hostile-log");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let log = root.path().join("api.log");
    let api = tests::process::Api::start_logged(&site, &data, &[], &log);
    let addr = api.base.trim_start_matches("http://").to_string();
    let partial: [&[u8]; 4] = [
        b"GET /health/li",
        b"GET /health/live HTTP/1.1\r\nHost: local",
        b"POST /api/v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"q",
        b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ];
    for n in 0..100 {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let _ = stream.write_all(partial[n % partial.len()]);
        // Gone at once, mid-head, mid-body or before reading the answer.
        drop(stream);
    }
    // Every one of them handled and closed: the only connection open is
    // the one asking (what would have been logged is logged by then).
    let client = http_client::blocking::client();
    assert_eq!(client.get(api.url("/health/live")).send().unwrap().status(), 200);
    let open =
        || client.get(api.url("/health")).send().unwrap().json::<serde_json::Value>().unwrap()["connections"].clone();
    tests::wait::until_blocking("the dropped connections all closed", 400, Duration::from_millis(25), || open() == 1);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("ERROR"), "{logged}");
}
