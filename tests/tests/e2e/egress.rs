//! The egress gate against the real api binary on loopback: a service
//! inside the deployment (on loopback, as the metadata service or an
//! admin port would be) that no route reaches, whatever the spelling of
//! its address, through a registered endpoint, a redirect, an agent
//! card's `url`, or a name a DNS server resolves to it; and the call's
//! total deadline. The gate's table of addresses is judged without
//! connecting in `api::egress::address`'s own tests.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tests::agents::{Agent, Kind};
use tests::dns::DnsServer;
use tests::live::Broker;
use warp::http::Response;
use warp::Filter;

/// A service inside the deployment: it answers everything, and counts
/// every request that reached it.
struct Inside {
    port: u16,
    hits: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Inside {
    async fn start() -> Inside {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        // (The body filter gives the chain warp's rejection type.)
        let filter = warp::path::full().and(warp::body::bytes()).map(move |path: warp::path::FullPath, _: Bytes| {
            counted.fetch_add(1, Ordering::SeqCst);
            let card = api::demo::card("http://127.0.0.1/");
            let body = if path.as_str().ends_with("agent-card.json") { card } else { json!({"message": "secret"}) };
            json_reply(&body)
        });
        let (addr, stop) = tests::serve_on_loopback(filter).await;
        Inside { port: addr.port(), hits, _stop: stop }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn json_reply(body: &Value) -> warp::reply::Response {
    let mut response = Response::new(body.to_string().into());
    response.headers_mut().insert("content-type", "application/json".parse().unwrap());
    response
}

fn redirect(status: u16, location: String) -> warp::reply::Response {
    let mut response = Response::new(String::new().into());
    *response.status_mut() = warp::http::StatusCode::from_u16(status).unwrap();
    response.headers_mut().insert("location", location.parse().unwrap());
    response
}

/// A peer the operator allows that points elsewhere: its card's GET
/// redirects (302), or its card's `url` names another address, or its
/// POST redirects (307), each to `to`.
async fn pointing(how: &'static str, to: String) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let filter = warp::method().and(warp::path::full()).and(warp::body::bytes()).map(
        move |method: warp::http::Method, path: warp::path::FullPath, _: Bytes| {
            let card = path.as_str() == "/.well-known/agent-card.json";
            match (how, card, method == warp::http::Method::POST) {
                ("card-redirect", true, _) => redirect(302, format!("{to}/.well-known/agent-card.json")),
                ("card-url", true, _) => json_reply(&json!({"name": "Pointer", "url": to, "protocolVersion": "0.3",
                    "preferredTransport": "JSONRPC", "capabilities": {}, "skills": []})),
                ("post-redirect", _, true) => redirect(307, to.clone()),
                _ => {
                    let mut response = Response::new(String::new().into());
                    *response.status_mut() = warp::http::StatusCode::NOT_FOUND;
                    response
                }
            }
        },
    );
    tests::serve_on_loopback(filter).await
}

/// `--egress-allow` for peers on loopback.
fn allow(ports: &[u16]) -> String {
    ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
}

fn refused(status: u16, answer: &Value) -> bool {
    status == 403 && answer["code"] == json!("destination_not_allowed")
}

#[tokio::test(flavor = "multi_thread")]
async fn no_route_reaches_a_service_inside_in_any_spelling() {
    let inside = Inside::start().await;
    let echo = Agent::start(Kind::Echo).await;
    let broker = Broker::start("egress-spellings", &["--egress-allow", &allow(&[echo.addr.port()])]);
    let key = broker.sign_in("0.0.1001").await;
    let port = inside.port;
    let spellings = [
        format!("http://127.0.0.1:{port}/admin"),
        format!("http://localhost:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://0x7f000001:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0177.0.0.1:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::1]:{port}/"),
        // The allowed agent's address as userinfo: the host is still inside.
        format!("http://{}@127.0.0.1:{port}/", echo.addr),
    ];
    for url in &spellings {
        let (status, answer) = broker.send("POST", "/api/v1/chat/session", None, Some(json!({"agentUrl": url}))).await;
        assert!(refused(status, &answer), "{url}: {status} {answer}");
        // Nothing of the inside in the refusal.
        let text = answer.to_string();
        assert!(!text.contains(&port.to_string()) && !text.contains("127.0.0.1"), "{text}");
        let body = json!({"agentUrl": url, "message": "hi"});
        let (status, answer) = broker.send("POST", "/api/v1/chat/message", Some(&key), Some(body)).await;
        assert!(refused(status, &answer), "{url}: {status} {answer}");
    }
    // A registration whose endpoint is inside is refused, and costs nothing.
    let before = (broker.balance(&key).await, broker.rows("registrations"));
    for (protocol, endpoint) in [("http", format!("http://127.1:{port}/x")), ("a2a", format!("http://[::1]:{port}"))] {
        let body = json!({
            "profile": {"version": "1.0", "type": 1, "display_name": "Inside", "bio": "points inside",
                "aiAgent": {"type": 1, "model": "rule-based", "capabilities": [0]}},
            "endpoint": endpoint, "communicationProtocol": protocol,
        });
        let (status, answer) = broker.send("POST", "/api/v1/register", Some(&key), Some(body)).await;
        assert!(refused(status, &answer), "{endpoint}: {status} {answer}");
        assert_eq!(answer["parameter"], json!("endpoint"), "{answer}");
    }
    assert_eq!((broker.balance(&key).await, broker.rows("registrations")), before);
    assert_eq!((inside.hits(), broker.rows("chat_sessions")), (0, 0));
    // The allowed agent chats as before.
    let (status, session) =
        broker.send("POST", "/api/v1/chat/session", None, Some(json!({"agentUrl": echo.url()}))).await;
    assert_eq!(status, 200, "{session}");
    let body = json!({"sessionId": session["sessionId"], "message": "still here"});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("You said \"still here\" (2 words).")));
    assert_eq!(inside.hits(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_and_card_urls_are_judged_again() {
    let inside = Inside::start().await;
    let echo = Agent::start(Kind::Echo).await;
    let to_inside = format!("http://127.0.0.1:{}", inside.port);
    let (card_redirect, _a) = pointing("card-redirect", to_inside.clone()).await;
    let (card_url, _b) = pointing("card-url", format!("{to_inside}/rpc")).await;
    let (post_redirect, _c) = pointing("post-redirect", format!("{to_inside}/chat")).await;
    let (to_echo, _d) = pointing("card-redirect", echo.url()).await;
    let ports: Vec<u16> =
        [card_redirect, card_url, post_redirect, to_echo, echo.addr].iter().map(|a| a.port()).collect();
    let broker = Broker::start("egress-redirects", &["--egress-allow", &allow(&ports)]);
    let key = broker.sign_in("0.0.1001").await;

    for peer in [card_redirect, card_url] {
        let body = json!({"agentUrl": format!("http://{peer}")});
        let (status, answer) = broker.send("POST", "/api/v1/chat/session", None, Some(body)).await;
        assert!(refused(status, &answer), "{peer}: {status} {answer}");
    }
    assert_eq!(broker.rows("chat_sessions"), 0, "no session is left behind");

    // A registered plain agent whose POST redirects inside: routing and
    // chat by UAID are refused, and no turn is stored.
    let body = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": "Bouncer", "bio": "redirects its posts",
            "aiAgent": {"type": 1, "model": "rule-based", "capabilities": [0]}},
        "endpoint": format!("http://{post_redirect}/chat"), "communicationProtocol": "http",
    });
    let (status, registered) = broker.send("POST", "/api/v1/register", Some(&key), Some(body)).await;
    assert_eq!(status, 200, "{registered}");
    let uaid = registered["uaid"].as_str().unwrap();
    let route = format!("/api/v1/route/{}", broker_site::render::segment(uaid));
    let (status, answer) = broker.send("POST", &route, None, Some(json!({"message": "hi"}))).await;
    assert!(refused(status, &answer), "{status} {answer}");
    let body = json!({"uaid": uaid, "message": "hi"});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert!(refused(status, &answer), "{status} {answer}");
    assert_eq!((inside.hits(), broker.rows("chat_messages")), (0, 0));

    // A redirect to an allowed agent is followed.
    let body = json!({"agentUrl": format!("http://{to_echo}"), "message": "around"});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("You said \"around\" (1 word).")), "{reply}");
}

/// A model provider the operator configured is called as configured, but
/// where it redirects is judged like a destination a client chose.
#[tokio::test(flavor = "multi_thread")]
async fn a_configured_providers_redirect_is_judged() {
    let inside = Inside::start().await;
    let to_inside = format!("http://127.0.0.1:{}/v1/chat/completions", inside.port);
    let (provider, _stop) = pointing("post-redirect", to_inside).await;
    let origin = format!("http://{provider}");
    let broker = Broker::start("egress-provider", &["--provider-key", "sk-provider", "--provider-origin", &origin]);
    let key = broker.sign_in("0.0.1001").await;
    let body = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": "Pointing Model", "bio": "a provider that points inside",
            "aiAgent": {"type": 1, "model": "tide-1", "capabilities": [0]}},
        "endpoint": format!("{origin}/v1"), "communicationProtocol": "openrouter",
    });
    let (status, registered) = broker.send("POST", "/api/v1/register", Some(&key), Some(body)).await;
    assert_eq!(status, 200, "{registered}");
    let uaid = registered["uaid"].as_str().unwrap();
    let (status, session) = broker.send("POST", "/api/v1/chat/session", Some(&key), Some(json!({"uaid": uaid}))).await;
    assert_eq!(status, 200, "{session}");
    let body = json!({"sessionId": session["sessionId"], "message": "hi"});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", Some(&key), Some(body)).await;
    assert!(refused(status, &answer), "{status} {answer}");
    assert_eq!((inside.hits(), broker.rows("chat_messages")), (0, 0));
}

/// An endpoint registered with an http scheme in capitals is judged as
/// one in lower case: refused by its text.
#[tokio::test(flavor = "multi_thread")]
async fn a_registered_endpoint_is_judged_whatever_the_case_of_its_scheme() {
    let broker = Broker::start("egress-scheme-case", &[]);
    let key = broker.sign_in("0.0.1001").await;
    for endpoint in ["HTTP://127.0.0.1:4000/", "Https://10.0.0.8/a2a", " http://169.254.169.254/"] {
        let body = json!({
            "profile": {"version": "1.0", "type": 1, "display_name": "Shouting Agent", "bio": "an agent in capitals",
                "aiAgent": {"type": 1, "model": "rule-based", "capabilities": [0]}},
            "endpoint": endpoint, "communicationProtocol": "http",
        });
        let (status, answer) = broker.send("POST", "/api/v1/register", Some(&key), Some(body)).await;
        assert!(refused(status, &answer), "{endpoint}: {status} {answer}");
    }
    assert_eq!(broker.rows("registrations"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_is_judged_by_the_addresses_it_resolves_to() {
    let inside = Inside::start().await;
    let echo = Agent::start(Kind::Echo).await;
    let loopback = Ipv4Addr::LOCALHOST;
    let dns = DnsServer::start(&[("inside.almanac", loopback), ("echo.test", loopback)]).await;
    let port = echo.addr.port();
    // The operator vouches for echo.test on the echo agent's port (its
    // card names it by address).
    let allowed = format!("echo.test:{port},127.0.0.1:{port}");
    let broker = Broker::start("egress-dns", &["--egress-dns", &dns.addr.to_string(), "--egress-allow", &allowed]);

    for url in [format!("http://inside.almanac:{}/", inside.port), format!("http://inside.almanac:{port}/")] {
        let (status, answer) = broker.send("POST", "/api/v1/chat/session", None, Some(json!({"agentUrl": url}))).await;
        assert!(refused(status, &answer), "{url}: {status} {answer}");
    }
    let asked = dns.queries.load(Ordering::SeqCst);
    assert!(asked > 0, "the names were looked up by the server the api was given");
    // Special-use names are refused unresolved: no question leaves.
    for url in ["http://agent.example/", "https://agents.example.com/a2a", "http://inside.test/", "http://x.invalid/"] {
        let (status, answer) = broker.send("POST", "/api/v1/chat/session", None, Some(json!({"agentUrl": url}))).await;
        assert!(refused(status, &answer), "{url}: {status} {answer}");
    }
    assert_eq!(dns.queries.load(Ordering::SeqCst), asked, "no special-use name was asked about");
    assert_eq!(inside.hits(), 0);
    // A name listed on a port it is not listed with is refused unresolved.
    let body = json!({"agentUrl": format!("http://echo.test:{}/", inside.port)});
    let (status, answer) = broker.send("POST", "/api/v1/chat/session", None, Some(body)).await;
    assert!(refused(status, &answer), "{status} {answer}");
    // The listed name on its port: resolved by the test's server, chatted with.
    let body = json!({"agentUrl": format!("http://echo.test:{port}"), "message": "by name"});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("You said \"by name\" (2 words).")), "{reply}");
    assert_eq!(inside.hits(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_trickles_is_cut_at_the_call_deadline() {
    // A plain agent: no card, and a reply of one byte every 200 ms, forever.
    let filter = warp::post().map(|| {
        let bytes = futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), ()))
        });
        let mut response = warp::Reply::into_response(warp::reply::stream(bytes));
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        response
    });
    let (agent, _stop) = tests::serve_on_loopback(filter).await;
    let flags = ["--egress-allow", &allow(&[agent.port()]), "--agent-deadline-ms", "1500"];
    let broker = Broker::start("egress-deadline", &flags);
    let body = json!({"agentUrl": format!("http://{agent}/chat"), "message": "hello?"});
    // Without a total deadline the answer never ends (each gap is short);
    // the guard only turns a hang into a failure.
    let answer =
        tokio::time::timeout(Duration::from_secs(60), broker.send("POST", "/api/v1/chat/message", None, Some(body)));
    let (status, answer) = answer.await.expect("the relay ended at its deadline");
    assert_eq!((status, &answer["code"]), (500, &json!("agent_unreachable")), "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("did not answer in time"), "{answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_credentials_go_to_its_agent_and_not_where_it_redirects() {
    // The agent moved: its POSTs are redirected (307) to another host,
    // which answers, and records the Authorization it was sent.
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Option<String>>::new()));
    let recorded = seen.clone();
    let elsewhere =
        warp::post().and(warp::header::optional::<String>("authorization")).map(move |auth: Option<String>| {
            recorded.lock().unwrap().push(auth);
            json_reply(&json!({"reply": "answered elsewhere"}))
        });
    let (elsewhere, _e) = tests::serve_on_loopback(elsewhere).await;
    let (moved, _m) = pointing("post-redirect", format!("http://{elsewhere}/chat")).await;
    let broker = Broker::start("egress-credentials", &["--egress-allow", &allow(&[moved.port(), elsewhere.port()])]);
    let body = json!({"agentUrl": format!("http://{moved}/chat"), "auth": {"token": "session-secret"}});
    let (status, session) = broker.send("POST", "/api/v1/chat/session", None, Some(body)).await;
    assert_eq!(status, 200, "{session}");
    let body = json!({"sessionId": session["sessionId"], "message": "who sees my token?"});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("answered elsewhere")), "{reply}");
    assert_eq!(*seen.lock().unwrap(), vec![None], "the token stayed with the agent's own origin");
}
