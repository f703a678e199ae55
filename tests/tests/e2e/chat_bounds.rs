//! What one client can make the api hold for a chat session is bounded,
//! against the real api binary: a session's authentication in headers
//! and bytes (replaced by each send, never added to), all sessions'
//! together, nothing held from a failed turn, no panic however many
//! header names a body lists, and relays to agents rate-limited per
//! client. The api's memory is read from `/proc` and its own count of
//! what it holds (`/health`'s `chatAuth`).

use serde_json::{json, Value};
use tests::agents::{Agent, Kind};
use tests::live::{register, Broker};

/// The process's resident memory, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    kib / 1024
}

/// `/health`'s count of the authentication held: (sessions, bytes).
async fn held(broker: &Broker) -> (u64, u64) {
    let (_, health) = broker.send("GET", "/health", None, None).await;
    (health["chatAuth"]["sessions"].as_u64().unwrap(), health["chatAuth"]["bytes"].as_u64().unwrap())
}

/// `count` custom headers of about `size` bytes each, named apart.
fn headers(count: usize, size: usize) -> Value {
    let list: serde_json::Map<String, Value> =
        (0..count).map(|i| (format!("x-h{i:05}"), json!("v".repeat(size.saturating_sub(7))))).collect();
    json!({ "headers": list })
}

/// `count` headers with the shortest names (hex) and empty values: the
/// most a body under the live bound (256 KiB) can list.
fn names(count: usize) -> Value {
    let list: serde_json::Map<String, Value> = (0..count).map(|i| (format!("{i:x}"), json!(""))).collect();
    json!({ "headers": list })
}

async fn open(broker: &Broker, body: Value) -> (u16, Value) {
    broker.send("POST", "/api/v1/chat/session", None, Some(body)).await
}

async fn say(broker: &Broker, session: &str, auth: Option<Value>) -> (u16, Value) {
    let mut body = json!({"sessionId": session, "message": "hello"});
    if let Some(auth) = auth {
        body["auth"] = auth;
    }
    broker.send("POST", "/api/v1/chat/message", None, Some(body)).await
}

/// One anonymous client sends 200 messages into its session, each with
/// 240 KB of headers named anew (refused), then 200 within the bound
/// (each replacing the last): the held authentication stays one
/// session's, and the api's memory stays flat.
#[tokio::test(flavor = "multi_thread")]
async fn one_client_cannot_grow_a_sessions_authentication() {
    let echo = Agent::start(Kind::Echo).await;
    let allowed = tests::allowing(&[&echo.url()]);
    let broker = Broker::start("chat-bounds-memory", &["--egress-allow", &allowed, "--relay-burst", "1000"]);
    let (status, session) = open(&broker, json!({"agentUrl": echo.url()})).await;
    assert_eq!(status, 200, "{session}");
    let id = session["sessionId"].as_str().unwrap();
    assert_eq!(say(&broker, id, None).await.0, 200);
    let before = rss_mib(broker.api.pid());
    for n in 0..200 {
        let big: serde_json::Map<String, Value> =
            (0..24).map(|j| (format!("x-m{n:03}-{j:02}"), json!("v".repeat(10_000)))).collect();
        let (status, answer) = say(&broker, id, Some(json!({ "headers": big }))).await;
        assert_eq!((status, &answer["code"]), (400, &json!("auth_too_large")), "{answer}");
    }
    assert_eq!(held(&broker).await, (0, 0), "nothing held from a refused send");
    for i in 0..200 {
        let mut within = headers(31, 250);
        within["headers"]["x-turn"] = json!(i.to_string());
        let (status, answer) = say(&broker, id, Some(within)).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (sessions, bytes) = held(&broker).await;
    assert_eq!(sessions, 1);
    assert!(bytes <= 8_192, "one session's authentication, within its bound: {bytes} bytes");
    let after = rss_mib(broker.api.pid());
    println!("chat auth traffic: the api's resident memory {before} MiB before, {after} MiB after");
    assert!(after < before + 32, "the api grew from {before} to {after} MiB");
}

/// Header names far past what `http::HeaderMap` takes (it panics past
/// 32,768) are refused with a 400, on opening and on a message, and the
/// api answers on.
#[tokio::test(flavor = "multi_thread")]
async fn any_number_of_header_names_is_refused_not_a_panic() {
    let echo = Agent::start(Kind::Echo).await;
    let broker = Broker::start("chat-bounds-panic", &["--egress-allow", &tests::allowing(&[&echo.url()])]);
    let many = names(26_000);
    let (status, answer) = open(&broker, json!({"agentUrl": echo.url(), "auth": many.clone()})).await;
    assert_eq!((status, &answer["code"], &answer["parameter"]), (400, &json!("auth_too_large"), &json!("auth")));
    let body = json!({"agentUrl": echo.url(), "message": "hello", "auth": many.clone()});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &answer["code"]), (400, &json!("auth_too_large")), "{answer}");
    let (_, session) = open(&broker, json!({"agentUrl": echo.url(), "auth": headers(20, 8)})).await;
    let id = session["sessionId"].as_str().unwrap();
    let (status, answer) = say(&broker, id, Some(names(20_000))).await;
    assert_eq!((status, &answer["code"]), (400, &json!("auth_too_large")), "{answer}");
    assert_eq!(broker.send("GET", "/health/live", None, None).await.0, 200);
    assert_eq!(say(&broker, id, None).await.0, 200, "the session goes on with what it held");
}

/// A send whose turn fails holds none of its authentication; one whose
/// turn is stored holds it in place of the session's.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_holds_nothing() {
    let (garbage, guarded) = (Agent::start(Kind::Garbage).await, Agent::start(Kind::Guarded).await);
    let allowed = tests::allowing(&[&garbage.url(), &guarded.url()]);
    let broker = Broker::start("chat-bounds-failed", &["--egress-allow", &allowed]);
    let key = broker.sign_in("0.0.1001").await;
    let broken = register(&broker, &key, "Broken", "a2a", &garbage.url()).await;
    let (_, session) = open(&broker, json!({"uaid": broken})).await;
    let id = session["sessionId"].as_str().unwrap();
    let (status, answer) = say(&broker, id, Some(json!({"type": "bearer", "token": "sesame"}))).await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(held(&broker).await, (0, 0));

    let uaid = register(&broker, &key, "Guarded", "http", &format!("{}/chat", guarded.url())).await;
    let (_, session) = open(&broker, json!({"uaid": uaid, "auth": {"type": "bearer", "token": "sesame"}})).await;
    let id = session["sessionId"].as_str().unwrap();
    let (status, _) = say(&broker, id, Some(json!({"type": "bearer", "token": "wrong"}))).await;
    assert_eq!(status, 500, "the agent refuses the wrong token");
    assert_eq!(say(&broker, id, None).await.1["message"], json!("welcome in"), "the session keeps what it held");
    assert_eq!(held(&broker).await.0, 1);
}

/// All sessions' authentication together is bounded: past it, a session
/// bringing more is refused until another ends.
#[tokio::test(flavor = "multi_thread")]
async fn all_sessions_authentication_is_bounded_together() {
    let echo = Agent::start(Kind::Echo).await;
    let flags = ["--egress-allow", &tests::allowing(&[&echo.url()]), "--chat-max-held-auth-bytes", "12000"];
    let broker = Broker::start("chat-bounds-held", &flags);
    let auth = headers(30, 250);
    let (status, first) = open(&broker, json!({"agentUrl": echo.url(), "auth": auth.clone()})).await;
    assert_eq!(status, 200, "{first}");
    let (status, answer) = open(&broker, json!({"agentUrl": echo.url(), "auth": auth.clone()})).await;
    assert_eq!((status, &answer["code"]), (503, &json!("auth_store_full")), "{answer}");
    assert_eq!(open(&broker, json!({"agentUrl": echo.url()})).await.0, 200, "a session without auth is taken");
    let path = format!("/api/v1/chat/session/{}", first["sessionId"].as_str().unwrap());
    assert_eq!(broker.send("DELETE", &path, None, None).await.0, 200);
    assert_eq!(held(&broker).await, (0, 0));
    assert_eq!(open(&broker, json!({"agentUrl": echo.url(), "auth": auth})).await.0, 200);
}

/// Chat messages and routing by UAID spend one relay quota per client,
/// signed in or not.
#[tokio::test(flavor = "multi_thread")]
async fn relays_to_agents_are_rate_limited_per_client() {
    let echo = Agent::start(Kind::Echo).await;
    let flags = ["--egress-allow", &tests::allowing(&[&echo.url()]), "--relay-rate", "1", "--relay-burst", "3"];
    let broker = Broker::start("chat-bounds-relay", &flags);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Routed Echo", "a2a", &echo.url()).await;
    let route = format!("/api/v1/route/{}", broker_site::render::segment(&uaid));
    for _ in 0..2 {
        assert_eq!(broker.send("POST", &route, None, Some(json!({"message": "hi"}))).await.0, 200);
    }
    let (_, session) = open(&broker, json!({"uaid": uaid})).await;
    assert_eq!(say(&broker, session["sessionId"].as_str().unwrap(), None).await.0, 200);
    let (status, answer) = broker.send("POST", &route, Some(&key), Some(json!({"message": "hi"}))).await;
    assert_eq!((status, &answer["code"]), (429, &json!("rate_limited")), "{answer}");
    let (status, _) = say(&broker, session["sessionId"].as_str().unwrap(), None).await;
    assert_eq!(status, 429);
}
