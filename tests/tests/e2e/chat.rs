//! Chat against the real api binary on loopback, with real agents on
//! loopback: the reference client's chat calls; A2A 1.0 and 0.3 and plain
//! HTTP agents; server-sent events byte for byte; agents that answer
//! garbage, never answer, or break their stream; a client that leaves
//! mid-stream; the bounds.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use tests::agents::{Agent, Kind};
use tests::live::{register, Broker};

/// Registers a model-routing provider agent (the test model server's
/// model) at `base`: its UAID.
async fn register_provider(broker: &Broker, key: &str, name: &str, base: &str) -> String {
    let body = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": name, "bio": format!("{name}, a provider agent"),
            "aiAgent": {"type": 1, "model": tests::models::MODEL, "capabilities": [0]}},
        "endpoint": base,
        "communicationProtocol": "openrouter",
    });
    let (status, registered) = broker.send("POST", "/api/v1/register", Some(key), Some(body)).await;
    assert_eq!(status, 200, "{registered}");
    registered["uaid"].as_str().unwrap().to_string()
}

async fn open(broker: &Broker, body: Value) -> (u16, Value) {
    broker.send("POST", "/api/v1/chat/session", None, Some(body)).await
}

async fn say(broker: &Broker, session: &str, message: &str) -> (u16, Value) {
    say_as(broker, None, session, message).await
}

/// A message into a session, as the holder of `key`.
async fn say_as(broker: &Broker, key: Option<&str>, session: &str, message: &str) -> (u16, Value) {
    broker.send("POST", "/api/v1/chat/message", key, Some(json!({"sessionId": session, "message": message}))).await
}

/// `POST /chat/message` asking for events: the status, content type and
/// the raw body.
async fn stream(broker: &Broker, session: &str, message: &str) -> (u16, String, String) {
    let response = broker
        .client
        .post(broker.api.url("/api/v1/chat/message"))
        .header("accept", "text/event-stream")
        .json(&json!({"sessionId": session, "message": message, "streaming": true}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let kind = response.headers()["content-type"].to_str().unwrap().to_string();
    (status, kind, response.text().await.unwrap())
}

/// The events of a body: each exactly `data: <json>\n\n`.
fn events(body: &str) -> Vec<Value> {
    assert!(body.ends_with("\n\n"), "{body:?}");
    body.split_terminator("\n\n")
        .map(|event| {
            let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not one data line: {event:?}"));
            assert!(!data.contains('\n'), "one line per event: {event:?}");
            serde_json::from_str(data).unwrap()
        })
        .collect()
}

fn messages(broker: &Broker) -> i64 {
    broker.rows("chat_messages")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_chats_with_an_a2a_agent_by_uaid_and_by_url() {
    let echo = Agent::start(Kind::Echo).await;
    let model = tests::models::ModelServer::start("sk-client").await;
    let summarizer = model.base();
    let allowed = tests::allowing(&[&echo.url()]);
    let flags = [
        "--summarizer-url",
        &summarizer,
        "--summarizer-model",
        tests::models::MODEL,
        "--summarizer-key",
        "sk-client",
        "--egress-allow",
        &allowed,
    ];
    let broker = Broker::start("chat-client", &flags);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Echo Test", "a2a", &echo.url()).await;
    let base = format!("{}/", broker.api.base);
    let results = tests::reference_client("chat.mjs", &[&base, &uaid, &echo.url(), &key]).await;
    let session = &results["createSession"]["value"];
    assert_eq!(session["agent"]["name"], json!("Echo Test"));
    assert_eq!(session["agent"]["capabilities"], json!({"protocol": "a2a", "streaming": true}));
    // Optional fields are left out, never null.
    let reply = &results["sendMessage"]["value"];
    assert!(reply.as_object().unwrap().values().all(|v| !v.is_null()), "{reply}");
    // The session ended: no more messages, its history still readable.
    let id = session["sessionId"].as_str().unwrap();
    let (status, answer) = say(&broker, id, "still there?").await;
    assert_eq!((status, &answer["code"]), (404, &json!("session_ended")));
}

#[tokio::test(flavor = "multi_thread")]
async fn replies_stream_as_server_sent_events_and_are_stored_once() {
    let echo = Agent::start(Kind::Echo).await;
    let broker = Broker::start("chat-stream", &["--egress-allow", &tests::allowing(&[&echo.url()])]);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Echo Stream", "a2a", &echo.url()).await;
    let (_, session) = open(&broker, json!({"uaid": uaid})).await;
    let id = session["sessionId"].as_str().unwrap();

    let (status, kind, body) = stream(&broker, id, "three little words").await;
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
    let events = events(&body);
    let (last, chunks) = events.split_last().unwrap();
    assert!(chunks.len() >= 4, "one event per word: {body}");
    for chunk in chunks {
        assert_eq!(
            (&chunk["type"], &chunk["content"]["kind"], &chunk["content"]["final"]),
            (&json!("event"), &json!("message"), &json!(false))
        );
    }
    let said: String = chunks.iter().map(|c| c["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(said, "You said \"three little words\" (3 words).");
    assert_eq!(
        (&last["type"], &last["content"]["final"], &last["content"]["message"]),
        (&json!("event"), &json!(true), &json!(said))
    );
    // The turn is stored once answered, the reply under the streamed id.
    let (_, history) = broker.send("GET", &format!("/api/v1/chat/session/{id}/history"), None, None).await;
    let entries = history["history"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!((&entries[1]["role"], &entries[1]["messageId"]), (&json!("agent"), &last["content"]["messageId"]));

    // Without an Accept for events, `streaming` still answers one JSON.
    let body = json!({"sessionId": id, "message": "json please", "streaming": true});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("You said \"json please\" (2 words).")));
}

/// A2A 0.3, whole and streamed; a plain HTTP agent, which gets the history.
#[tokio::test(flavor = "multi_thread")]
async fn a2a_0_3_and_plain_http_agents_are_relayed() {
    let (old, plain) = (Agent::start(Kind::V03).await, Agent::start(Kind::Plain).await);
    let broker = Broker::start("chat-protocols", &["--egress-allow", &tests::allowing(&[&old.url(), &plain.url()])]);
    let key = broker.sign_in("0.0.1001").await;
    let (_, session) = open(&broker, json!({"agentUrl": old.url()})).await;
    let old_id = session["sessionId"].as_str().unwrap();
    assert_eq!(say(&broker, old_id, "old times").await.1["message"], json!("You said \"old times\" (2 words)."));
    let (_, _, body) = stream(&broker, old_id, "old stream").await;
    assert_eq!(tests_last(&body)["content"]["message"], json!("You said \"old stream\" (2 words)."));
    let plain_uaid = register(&broker, &key, "Plain Test", "http", &format!("{}/chat", plain.url())).await;
    let (_, session) = open(&broker, json!({"uaid": plain_uaid})).await;
    let plain_id = session["sessionId"].as_str().unwrap();
    say(&broker, plain_id, "first").await;
    let (_, reply) = say(&broker, plain_id, "second").await;
    assert_eq!(reply["rawResponse"]["turn"], json!(2), "the plain agent saw the first turn: {reply}");
}

/// An agent reachable only over HCS-10 cannot be chatted with here, and
/// the build says so: search and the adapter details, from the table the
/// relay dispatches on.
#[tokio::test(flavor = "multi_thread")]
async fn only_agents_with_a_chat_protocol_are_offered_for_chat() {
    let broker = Broker::start("chat-offered", &[]);
    let hcs10 = broker.send("GET", "/api/v1/search?protocols=hcs-10&limit=1", None, None).await.1;
    let hcs10 = hcs10["hits"][0]["uaid"].as_str().unwrap().to_string();
    let (status, answer) = open(&broker, json!({"uaid": hcs10})).await;
    assert_eq!((status, &answer["code"]), (422, &json!("chat_not_supported")), "{answer}");
    let (mut yes, mut no) = (0, 0);
    for page in 1..=4 {
        let (_, found) = broker.send("GET", &format!("/api/v1/search?limit=100&page={page}"), None, None).await;
        for hit in found["hits"].as_array().unwrap() {
            let endpoints = hit["endpoints"].as_object().unwrap();
            let chattable = ["a2a", "mcp", "openrouter", "http"].iter().any(|e| endpoints.contains_key(*e));
            assert_eq!(
                (&hit["communicationSupported"], &hit["routingSupported"]),
                (&json!(chattable), &json!(chattable)),
                "{hit}"
            );
            if chattable {
                yes += 1
            } else {
                no += 1
            }
        }
    }
    assert!(yes > 100 && no > 50, "{yes} chattable, {no} not");
    let (_, details) = broker.send("GET", "/api/v1/adapters/details", None, None).await;
    let profile = |id: &str| {
        let adapter = details["adapters"].as_array().unwrap().iter().find(|a| a["id"] == id).unwrap().clone();
        (adapter["chatProfile"]["supportsChat"].clone(), adapter["chatProfile"]["streaming"].clone())
    };
    assert_eq!(profile("a2a-adapter"), (json!(true), json!(true)));
    assert_eq!(profile("http-adapter"), (json!(true), json!(false)));
    assert_eq!(profile("hcs10-adapter"), (json!(false), Value::Null));
}

fn tests_last(body: &str) -> Value {
    events(body).pop().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_that_fail_are_answered_clearly_and_store_nothing() {
    let (garbage, silent, cut) =
        (Agent::start(Kind::Garbage).await, Agent::start(Kind::Silent).await, Agent::start(Kind::Cut).await);
    // Nobody listens on a port just freed.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let allowed = tests::allowing(&[&garbage.url(), &silent.url(), &cut.url(), &closed]);
    let flags = ["--agent-read-timeout-ms", "400", "--agent-connect-timeout-ms", "400", "--egress-allow", &allowed];
    let broker = Broker::start("chat-failures", &flags);
    let (status, answer) = open(&broker, json!({"agentUrl": closed})).await;
    assert_eq!((status, &answer["code"]), (500, &json!("agent_unreachable")), "{answer}");
    let (status, answer) = open(&broker, json!({"uaid": "uaid:aid:nothing;uid=0;registry=x;proto=a2a"})).await;
    assert_eq!(status, 404, "{answer}");

    for (agent, code) in [(&garbage, "agent_bad_answer"), (&silent, "agent_unreachable")] {
        let (_, session) = open(&broker, json!({"agentUrl": agent.url()})).await;
        let id = session["sessionId"].as_str().unwrap();
        let (status, answer) = say(&broker, id, "hello?").await;
        assert_eq!((status, &answer["code"]), (500, &json!(code)), "{answer}");
    }
    // A stream that breaks: the chunks sent, then an error event.
    let (_, session) = open(&broker, json!({"agentUrl": cut.url()})).await;
    let (status, _, body) = stream(&broker, session["sessionId"].as_str().unwrap(), "go").await;
    assert_eq!(status, 200, "{body}");
    let events = events(&body);
    assert_eq!(events.len(), 3, "{body}");
    assert_eq!(events[2]["type"], json!("error"));
    assert_eq!(events[2]["content"]["code"], json!("agent_stream_cut"));
    assert_eq!(messages(&broker), 0, "no turn was answered");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_leaves_mid_stream_stops_the_agent_and_leaves_nothing() {
    let slow = Agent::start(Kind::Slow).await;
    let broker =
        Broker::start("chat-leave", &["--chat-max-upstream", "1", "--egress-allow", &tests::allowing(&[&slow.url()])]);
    let (_, session) = open(&broker, json!({"agentUrl": slow.url()})).await;
    let id = session["sessionId"].as_str().unwrap();
    let mut response = broker
        .client
        .post(broker.api.url("/api/v1/chat/message"))
        .header("accept", "text/event-stream")
        .json(&json!({"sessionId": id, "message": "take your time", "streaming": true}))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    // The one upstream slot is taken meanwhile: another turn is refused.
    let (status, busy) = say(&broker, id, "me too").await;
    assert_eq!((status, &busy["code"]), (503, &json!("too_busy")));
    drop(response);
    tests::wait::until("the agent's stream closed", 100, Duration::from_millis(20), async || {
        slow.dropped.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(messages(&broker), 0, "nothing stored of the turn left");
    // The slot is free again.
    let (_, session) = open(&broker, json!({"agentUrl": slow.url()})).await;
    assert!(session["sessionId"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn bounds_history_and_billing_are_enforced() {
    let echo = Agent::start(Kind::Echo).await;
    let broker = Broker::start(
        "chat-bounds",
        &[
            "--chat-max-message-bytes",
            "32",
            "--chat-max-sessions",
            "2",
            "--chat-history-ttl-secs",
            "3600",
            "--chat-max-history",
            "3",
            "--egress-allow",
            &tests::allowing(&[&echo.url()]),
        ],
    );
    let key = broker.sign_in("0.0.1001").await;
    let (_, session) = open(&broker, json!({"agentUrl": echo.url()})).await;
    let id = session["sessionId"].as_str().unwrap().to_string();
    let (status, answer) = say(&broker, &id, &"x".repeat(33)).await;
    assert_eq!((status, &answer["code"]), (413, &json!("message_too_large")));
    let (status, answer) = say(&broker, &id, "  ").await;
    assert_eq!((status, &answer["parameter"]), (400, &json!("message")));
    // The history answers the newest --chat-max-history entries.
    for message in ["first", "second"] {
        say(&broker, &id, message).await;
    }
    let (_, history) = broker.send("GET", &format!("/api/v1/chat/session/{id}/history"), None, None).await;
    let contents: Vec<&str> =
        history["history"].as_array().unwrap().iter().map(|e| e["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["You said \"first\" (1 word).", "second", "You said \"second\" (1 word)."]);
    // And keeps no more: three messages, and the answers of three keyed sends.
    for n in 0..5 {
        let body = json!({"sessionId": id, "message": format!("keyed {n}"), "idempotencyKey": format!("k{n}")});
        assert_eq!(broker.send("POST", "/api/v1/chat/message", None, Some(body)).await.0, 200);
    }
    assert_eq!((messages(&broker), broker.rows("chat_sends")), (3, 3));
    for (body, status, code) in [
        (json!({}), 400, "invalid_body"),
        (json!({"uaid": "not a uaid"}), 400, "invalid_uaid"),
        (json!({"agentUrl": "ftp://x"}), 400, "invalid_body"),
        (json!({"agentUrl": echo.url(), "auth": {"type": "digest"}}), 400, "invalid_body"),
        (json!({"agentUrl": echo.url(), "historyTtlSeconds": 0}), 400, "invalid_body"),
        // Past the free hour: a payer is needed.
        (json!({"agentUrl": echo.url(), "historyTtlSeconds": 7200}), 401, "auth_required"),
    ] {
        let (got, answer) = open(&broker, body.clone()).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{body}: {answer}");
    }
    // Billed: a day begun past the free window costs 2 credits.
    let before = broker.balance(&key).await;
    let body = json!({"agentUrl": echo.url(), "historyTtlSeconds": 3600 + 86_400 + 1});
    let (status, session) = broker.send("POST", "/api/v1/chat/session", Some(&key), Some(body)).await;
    assert_eq!((status, &session["historyTtlSeconds"]), (200, &json!(3600 + 86_400 + 1)), "{session}");
    assert_eq!(broker.balance(&key).await, before - 4);
    // Two sessions per account here.
    let body = json!({"agentUrl": echo.url()});
    assert_eq!(broker.send("POST", "/api/v1/chat/session", Some(&key), Some(body.clone())).await.0, 200);
    let (status, answer) = broker.send("POST", "/api/v1/chat/session", Some(&key), Some(body)).await;
    assert_eq!((status, &answer["code"]), (429, &json!("too_many_sessions")));
    let (status, answer) = broker.send("GET", "/api/v1/chat/session/sess_none/history", None, None).await;
    assert_eq!((status, &answer["code"]), (404, &json!("session_not_found")));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_history_or_encryption_their_routes_are_503() {
    let echo = Agent::start(Kind::Echo).await;
    let allowed = tests::allowing(&[&echo.url()]);
    let flags = ["--chat-history", "false", "--chat-encryption", "false", "--egress-allow", &allowed];
    let broker = Broker::start("chat-no-history", &flags);
    let (_, session) = open(&broker, json!({"agentUrl": echo.url(), "encryptionRequested": true})).await;
    assert_eq!(session["encryption"], Value::Null, "asked for, not available: plaintext");
    let id = session["sessionId"].as_str().unwrap();
    let (status, answer) = broker.send("GET", &format!("/api/v1/chat/session/{id}/history"), None, None).await;
    assert_eq!((status, &answer["code"]), (503, &json!("history_disabled")));
    let (status, answer) = broker.send("GET", &format!("/api/v1/chat/session/{id}/encryption"), None, None).await;
    assert_eq!((status, &answer["code"]), (503, &json!("encryption_disabled")));
    let body = json!({"role": "requester", "keyType": "secp256k1", "ephemeralPublicKey": "02ab"});
    let path = format!("/api/v1/chat/session/{id}/encryption-handshake");
    assert_eq!(broker.send("POST", &path, None, Some(body)).await.0, 503);
}

/// A private session that 0.0.1001 (`owner`) opened with its agent
/// `agent` as its assistant `sender`; 0.0.1002 (`other`) registered
/// `guest`. All three agents are the echo agent.
struct Members {
    broker: Broker,
    _echo: Agent,
    owner: String,
    other: String,
    agent: String,
    sender: String,
    guest: String,
    id: String,
}

impl Members {
    async fn start(label: &str) -> Members {
        let echo = Agent::start(Kind::Echo).await;
        let broker = Broker::start(label, &["--egress-allow", &tests::allowing(&[&echo.url()])]);
        let owner = broker.sign_in("0.0.1001").await;
        let other = broker.sign_in("0.0.1002").await;
        let agent = register(&broker, &owner, "Shared Echo", "a2a", &echo.url()).await;
        let sender = register(&broker, &owner, "My Assistant", "a2a", &echo.url()).await;
        let guest = register(&broker, &other, "Guest Agent", "a2a", &echo.url()).await;
        let mut members = Members { broker, _echo: echo, owner, other, agent, sender, guest, id: String::new() };
        members.id = members.open().await;
        members
    }

    /// Another session of the owner's with its agent: its id.
    async fn open(&self) -> String {
        let body = json!({"uaid": self.agent, "senderUaid": self.sender});
        let (status, session) = self.broker.send("POST", "/api/v1/chat/session", Some(&self.owner), Some(body)).await;
        assert_eq!(status, 200, "{session}");
        session["sessionId"].as_str().unwrap().to_string()
    }

    /// The owner makes session `id` public.
    async fn publish(&self, id: &str) {
        let body = json!({"senderUaid": self.sender, "visibility": "public"});
        let (status, changed) =
            self.broker.send("PATCH", &format!("/api/v1/chat/session/{id}"), Some(&self.owner), Some(body)).await;
        assert_eq!((status, &changed["visibility"]), (200, &json!("public")), "{changed}");
    }
}

/// `encodeURIComponent`, as the reference client encodes a query value.
fn enc(text: &str) -> String {
    broker_site::render::segment(text)
}

/// A private session's metadata: the member asking, signed in, owning it.
#[tokio::test(flavor = "multi_thread")]
async fn a_private_sessions_metadata_is_for_an_owned_member() {
    let m = Members::start("chat-meta").await;
    let meta = format!("/api/v1/chat/session/{}/meta", m.id);
    let with_sender = format!("{meta}?senderUaid={}", enc(&m.sender));
    for (path, key, status) in [
        (meta.clone(), None, 400),
        (with_sender.clone(), None, 401),
        (with_sender.clone(), Some(m.other.as_str()), 403),
        (format!("{meta}?senderUaid={}", enc(&m.guest)), Some(m.other.as_str()), 403),
        (with_sender.clone(), Some(m.owner.as_str()), 200),
        ("/api/v1/chat/session/sess_none/meta".to_string(), None, 404),
    ] {
        let (got, answer) = m.broker.send("GET", &path, key, None).await;
        assert_eq!(got, status, "{path} {key:?}: {answer}");
    }
    let (_, held) = m.broker.send("GET", &with_sender, Some(&m.owner), None).await;
    let members: Vec<&str> = held["members"].as_array().unwrap().iter().map(|m| m["uaid"].as_str().unwrap()).collect();
    assert_eq!(members.len(), 2);
    assert!(members.contains(&m.agent.as_str()) && members.contains(&m.sender.as_str()));
    assert_eq!((&held["visibility"], &held["title"]), (&json!("private"), &json!("Shared Echo")));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_an_owned_member_changes_a_sessions_visibility() {
    let m = Members::start("chat-visibility").await;
    let (path, meta) = (format!("/api/v1/chat/session/{}", m.id), format!("/api/v1/chat/session/{}/meta", m.id));
    let public = json!({"senderUaid": m.sender, "visibility": "public"});
    for (key, body, status) in [
        (None, public.clone(), 401),
        (Some(m.other.as_str()), public.clone(), 403),
        (Some(m.owner.as_str()), json!({"senderUaid": m.sender, "visibility": "secret"}), 400),
        (Some(m.owner.as_str()), json!({"senderUaid": "nope", "visibility": "public"}), 400),
    ] {
        let (got, answer) = m.broker.send("PATCH", &path, key, Some(body.clone())).await;
        assert_eq!(got, status, "{body}: {answer}");
    }
    assert_eq!(m.broker.send("GET", &meta, None, None).await.0, 400, "still private");
    m.publish(&m.id).await;
    assert_eq!(m.broker.send("GET", &meta, None, None).await.0, 200, "public: anyone reads it");
}

/// A turn before the invite, then the guest invited to what follows.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_invited_since_the_invite_sees_only_what_follows() {
    let m = Members::start("chat-invite").await;
    let (broker, id) = (&m.broker, &m.id);
    m.publish(id).await;
    say_as(broker, Some(&m.owner), id, "before the guest").await;
    let invite = format!("/api/v1/chat/session/{id}/invite");
    let body = json!({"senderUaid": m.sender, "uaid": m.guest, "historyScope": "since_invite"});
    assert_eq!(broker.send("POST", &invite, Some(&m.other), Some(body.clone())).await.0, 403);
    let (status, invited) = broker.send("POST", &invite, Some(&m.owner), Some(body)).await;
    assert_eq!((status, invited["members"].as_array().unwrap().len()), (200, 3), "{invited}");
    say_as(broker, Some(&m.owner), id, "after the guest").await;
    let history = |member: &str| format!("/api/v1/chat/session/{id}/history?senderUaid={}", enc(member));
    let (_, all) = broker.send("GET", &history(&m.sender), None, None).await;
    let (_, since) = broker.send("GET", &history(&m.guest), None, None).await;
    assert_eq!((all["history"].as_array().unwrap().len(), since["history"].as_array().unwrap().len()), (4, 2));
    assert_eq!(since["history"][0]["content"], json!("after the guest"));
    let stranger = "uaid:aid:stranger;uid=0;registry=x;proto=a2a";
    assert_eq!(broker.send("GET", &history(stranger), None, None).await.0, 403);
}

/// The public listing: paged by cursor, searched by id, member and title.
#[tokio::test(flavor = "multi_thread")]
async fn public_sessions_are_listed_by_cursor_and_searched() {
    let m = Members::start("chat-public").await;
    let broker = &m.broker;
    let private = m.open().await;
    for id in [m.id.clone(), m.open().await, m.open().await] {
        m.publish(&id).await;
    }
    let (_, first) = broker.send("GET", "/api/v1/chat/public?limit=2", None, None).await;
    let next = format!("/api/v1/chat/public?limit=2&cursor={}", first["nextCursor"].as_str().unwrap());
    let (_, second) = broker.send("GET", &next, None, None).await;
    let sessions = first["sessions"].as_array().unwrap().iter().chain(second["sessions"].as_array().unwrap());
    let ids: Vec<&str> = sessions.map(|s| s["sessionId"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3, "{first} {second}");
    assert!(second.get("nextCursor").is_none() && ids.contains(&m.id.as_str()) && !ids.contains(&private.as_str()));
    for (q, found) in [(m.sender.as_str(), 3), ("shared echo", 3), ("SHARED", 3), (&m.id[5..15], 1), ("zzz", 0)] {
        let (_, page) = broker.send("GET", &format!("/api/v1/chat/public?q={}", enc(q)), None, None).await;
        assert_eq!(page["sessions"].as_array().unwrap().len(), found, "{q}: {page}");
    }
    for query in ["limit=0", "limit=101", "cursor=@@", "limit=x"] {
        assert_eq!(broker.send("GET", &format!("/api/v1/chat/public?{query}"), None, None).await.0, 400, "{query}");
    }
}

/// A retried send with the same key: the first answer, one turn stored;
/// the key again with another message: refused, nothing sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_retried_send_is_answered_once_and_a_reused_key_refused() {
    let m = Members::start("chat-idempotent").await;
    let (broker, id) = (&m.broker, &m.id);
    let before = messages(broker);
    let body = json!({"sessionId": id, "message": "only once", "idempotencyKey": "retry-1"});
    let (_, first) = broker.send("POST", "/api/v1/chat/message", Some(&m.owner), Some(body.clone())).await;
    let (_, again) = broker.send("POST", "/api/v1/chat/message", Some(&m.owner), Some(body)).await;
    assert_eq!(first, again);
    assert_eq!(messages(broker), before + 2);
    let body = json!({"sessionId": id, "message": "something else", "idempotencyKey": "retry-1"});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", Some(&m.owner), Some(body)).await;
    assert_eq!((status, &answer["code"]), (409, &json!("idempotency_key_reused")), "{answer}");
    // A key past 255 bytes, or two keys that differ: refused, never ignored.
    let body = json!({"sessionId": id, "message": "a long key", "idempotencyKey": "k".repeat(256)});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", Some(&m.owner), Some(body)).await;
    assert_eq!((status, &answer["code"]), (400, &json!("invalid_idempotency_key")), "{answer}");
    let body = json!({"sessionId": id, "message": "two keys", "idempotencyKey": "retry-2"});
    let headers = [("x-api-key", m.owner.as_str()), ("idempotency-key", "retry-3")];
    let url = broker.api.url("/api/v1/chat/message");
    let (status, answer) = tests::live::call(&broker.client, "POST", url, &headers, Some(body)).await;
    assert_eq!((status, &answer["code"]), (400, &json!("invalid_idempotency_key")), "{answer}");
    assert_eq!(messages(broker), before + 2);
}

/// A plain HTTP agent at `/chat` that answers with the `sessionId` it
/// was sent.
async fn session_echo() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    use warp::Filter;
    let filter = warp::path!("chat")
        .and(warp::post())
        .and(warp::body::json())
        .map(|request: Value| warp::reply::json(&json!({"reply": "noted", "sessionIdSeen": request["sessionId"]})));
    tests::serve_on_loopback(filter).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_its_owners_and_an_anonymous_one_its_openers() {
    let (agent, _stop) = session_echo().await;
    let url = format!("http://{agent}/chat");
    let allowed = tests::allowing(&[&url]);
    let broker = Broker::start("chat-owners", &["--egress-allow", &allowed, "--chat-anonymous-burst", "2"]);
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let uaid = register(&broker, &owner, "Session Echo", "http", &url).await;
    let (status, session) =
        broker.send("POST", "/api/v1/chat/session", Some(&owner), Some(json!({"uaid": uaid}))).await;
    assert_eq!(status, 200, "{session}");
    let id = session["sessionId"].as_str().unwrap().to_string();

    // The owner's turn reaches the agent under another id than the session's.
    let (status, reply) = say_as(&broker, Some(&owner), &id, "mine").await;
    assert_eq!(status, 200, "{reply}");
    let seen = reply["rawResponse"]["sessionIdSeen"].as_str().unwrap();
    assert!(seen != id && !seen.contains(&id[5..]), "the agent saw {seen}");

    // Nobody else writes into it, ends it or reads its history.
    let before = messages(&broker);
    let history = format!("/api/v1/chat/session/{id}/history");
    let session_path = format!("/api/v1/chat/session/{id}");
    for (key, status) in [(None, 401), (Some(other.as_str()), 403)] {
        assert_eq!(say_as(&broker, key, &id, "theirs").await.0, status, "{key:?}");
        let body = json!({"sessionId": id, "message": "theirs", "auth": {"token": "stolen"}});
        assert_eq!(broker.send("POST", "/api/v1/chat/message", key, Some(body)).await.0, status);
        assert_eq!(broker.send("DELETE", &session_path, key, None).await.0, status, "{key:?}");
        assert_eq!(broker.send("GET", &history, key, None).await.0, status, "{key:?}");
        let encryption = format!("{session_path}/encryption");
        assert_eq!(broker.send("GET", &encryption, key, None).await.0, status, "{key:?}");
    }
    // A member named by someone who does not own it reads nothing private.
    let as_agent = format!("{history}?senderUaid={}", enc(&uaid));
    assert_eq!(broker.send("GET", &as_agent, Some(&other), None).await.0, 403);
    assert_eq!(broker.send("GET", &as_agent, None, None).await.0, 401);
    // Compaction asks for a key before anything else.
    let (status, answer) = broker.send("POST", &format!("{session_path}/compact"), None, Some(json!({}))).await;
    assert_eq!((status, &answer["code"]), (401, &json!("auth_required")), "{answer}");
    assert_eq!(messages(&broker), before);
    let (status, read) = broker.send("GET", &history, Some(&owner), None).await;
    assert_eq!((status, read["history"].as_array().unwrap().len()), (200, 2));

    // An anonymous session: its id is what controls it, and it stays private.
    let (status, anonymous) = open(&broker, json!({"uaid": uaid})).await;
    assert_eq!(status, 200, "{anonymous}");
    let anonymous_id = anonymous["sessionId"].as_str().unwrap();
    assert_eq!(say(&broker, anonymous_id, "whose?").await.0, 200);
    let body = json!({"senderUaid": uaid, "visibility": "public"});
    let (status, answer) =
        broker.send("PATCH", &format!("/api/v1/chat/session/{anonymous_id}"), Some(&owner), Some(body)).await;
    assert_eq!(status, 403, "{answer}");
    let body = json!({"senderUaid": uaid, "uaid": uaid});
    let invite = format!("/api/v1/chat/session/{anonymous_id}/invite");
    assert_eq!(broker.send("POST", &invite, Some(&owner), Some(body)).await.0, 403, "nor shared by invitation");
    // Opened without a key, sessions are counted per client.
    assert_eq!(open(&broker, json!({"uaid": uaid})).await.0, 200);
    let (status, answer) = open(&broker, json!({"uaid": uaid})).await;
    assert_eq!((status, &answer["code"]), (429, &json!("rate_limited")), "{answer}");
    let keyed = broker.send("POST", "/api/v1/chat/session", Some(&other), Some(json!({"uaid": uaid}))).await;
    assert_eq!(keyed.0, 200, "an account's sessions are capped by --chat-max-sessions instead");

    // The owner ends it.
    assert_eq!(broker.send("DELETE", &session_path, Some(&owner), None).await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn routing_relays_one_message_and_keeps_a_bounded_connection() {
    let (echo, garbage) = (Agent::start(Kind::Echo).await, Agent::start(Kind::Garbage).await);
    let allowed = tests::allowing(&[&echo.url(), &garbage.url()]);
    let broker = Broker::start("chat-route", &["--route-idle-secs", "1", "--egress-allow", &allowed]);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Routed Echo", "a2a", &echo.url()).await;
    let broken = register(&broker, &key, "Routed Garbage", "a2a", &garbage.url()).await;
    let route = |uaid: &str| format!("/api/v1/route/{}", enc(uaid));
    let status = format!("/api/v1/uaids/connections/{}/status", enc(&uaid));
    assert_eq!(broker.send("GET", &status, None, None).await.1, json!({"connected": false}));

    let (code, answer) = broker.send("POST", &route(&uaid), None, Some(json!({"message": "route me"}))).await;
    assert_eq!(
        (code, &answer["response"], &answer["adapter"]),
        (200, &json!("You said \"route me\" (2 words)."), &json!("a2a"))
    );
    let (_, open) = broker.send("GET", &status, None, None).await;
    assert_eq!(
        (&open["connected"], &open["adapter"], &open["connection"]["protocolVersion"]),
        (&json!(true), &json!("a2a"), &json!("1.0"))
    );
    // An object message is sent as its JSON.
    let (_, answer) = broker.send("POST", &route(&uaid), None, Some(json!({"message": {"ask": "x"}}))).await;
    assert_eq!(answer["response"], json!("You said \"{\"ask\":\"x\"}\" (1 word)."));

    let hcs10 = broker.send("GET", "/api/v1/search?protocols=hcs-10&limit=1", None, None).await.1["hits"][0]["uaid"]
        .as_str()
        .unwrap()
        .to_string();
    for (path, body, status, code) in [
        (route(&uaid), json!({}), 400, "message_required"),
        (route(&uaid), json!({"message": "  "}), 400, "message_required"),
        ("/api/v1/route/not-a-uaid".to_string(), json!({"message": "x"}), 400, "invalid_uaid"),
        (route("uaid:aid:nobody;uid=0;registry=x;proto=a2a"), json!({"message": "x"}), 404, "uaid_not_found"),
        (route(&hcs10), json!({"message": "x"}), 422, "routing_not_supported"),
        (route(&broken), json!({"message": "x"}), 500, "routing_failed"),
    ] {
        let (got, answer) = broker.send("POST", &path, None, Some(body.clone())).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{path} {body}: {answer}");
    }
    // A failed connection is not kept; a closed one is gone; an idle one expires.
    let broken_status = format!("/api/v1/uaids/connections/{}/status", enc(&broken));
    assert_eq!(broker.send("GET", &broken_status, None, None).await.1["connected"], json!(false));
    let close = format!("/api/v1/uaids/connections/{}", enc(&uaid));
    assert_eq!(
        broker.send("DELETE", &close, None, None).await.1,
        json!({"success": true, "message": "the connection was closed"})
    );
    assert_eq!(broker.send("DELETE", &close, None, None).await.1["message"], json!("no connection was open"));
    broker.send("POST", &route(&uaid), None, Some(json!({"message": "again"}))).await;
    assert_eq!(broker.send("GET", &status, None, None).await.1["connected"], json!(true));
    // Idle past its time (1 s), it is gone: the event waited for, looked
    // at a bounded number of times.
    tests::wait::until("the idle connection closed after its time", 200, Duration::from_millis(50), async || {
        broker.send("GET", &status, None, None).await.1["connected"] != json!(true)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_clients_encrypted_conversation_completes_and_the_api_sees_only_ciphertext() {
    let echo = Agent::start(Kind::Echo).await;
    let broker = Broker::start("chat-encrypted", &["--egress-allow", &tests::allowing(&[&echo.url()])]);
    let key = broker.sign_in("0.0.1001").await;
    // The agent is another account's: its registrant is the responder.
    let responder = broker.sign_in("0.0.1002").await;
    let agent = register(&broker, &responder, "Sealed Echo", "a2a", &echo.url()).await;
    let sender = register(&broker, &key, "Sealed Sender", "a2a", &echo.url()).await;
    let base = format!("{}/", broker.api.base);
    let results = tests::reference_client("encrypted.mjs", &[&base, &agent, &sender, &key, &responder]).await;
    let summary = &results["handshake"]["value"];
    assert_eq!((&summary["enabled"], &summary["algorithm"]), (&json!(true), &json!("aes-256-gcm")));
    // Stored: two envelopes, no plaintext anywhere in the store.
    let sql = "SELECT content, cipher_envelope FROM chat_messages";
    let rows: Vec<(String, String)> =
        broker.with_store(|s| s.query_map(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))).unwrap();
    assert_eq!(rows.len(), 2);
    for (content, envelope) in &rows {
        assert_eq!(content, "[ciphertext omitted]");
        assert!(!envelope.contains("harbour") && !envelope.contains("thank"), "{envelope}");
    }

    // The handshake's refusals.
    let (_, plain) = open(&broker, json!({"uaid": agent})).await;
    let plain_id = plain["sessionId"].as_str().unwrap();
    let point = "02b4632d08485ff1df2db55b9dafd23347d1c47a457072a1e87be26896549a8737";
    let good = json!({"role": "requester", "keyType": "secp256k1", "ephemeralPublicKey": point});
    let (_, sealed) = open(&broker, json!({"uaid": agent, "encryptionRequested": true})).await;
    let sealed_id = sealed["sessionId"].as_str().unwrap();
    assert_eq!(sealed["encryption"]["enabled"], json!(true));
    let shake = |id: &str| format!("/api/v1/chat/session/{id}/encryption-handshake");
    for (path, body, status, code) in [
        (shake(sealed_id), json!({"keyType": "secp256k1", "ephemeralPublicKey": point}), 400, "invalid_body"),
        (shake(sealed_id), json!({"role": "requester", "ephemeralPublicKey": point}), 400, "invalid_body"),
        (shake(sealed_id), json!({"role": "requester", "keyType": "secp256k1"}), 400, "invalid_body"),
        (
            shake(sealed_id),
            json!({"role": "requester", "keyType": "secp256k1", "ephemeralPublicKey": "02ab"}),
            400,
            "invalid_body",
        ),
        (shake(plain_id), good.clone(), 404, "encrypted_session_not_found"),
        (shake("sess_none"), good.clone(), 404, "session_not_found"),
    ] {
        let (got, answer) = broker.send("POST", &path, None, Some(body.clone())).await;
        assert_eq!((got, answer["code"].as_str().unwrap_or_default()), (status, code), "{body}: {answer}");
    }
    let (_, pending) = broker.send("POST", &shake(sealed_id), None, Some(good.clone())).await;
    assert_eq!(pending["handshake"]["status"], json!("pending"));
    // Each party's key is set once, and by that party: the requester's by
    // whoever holds the anonymous session's id, the responder's by the
    // account that registered the agent.
    let answering = json!({"role": "responder", "keyType": "secp256k1", "ephemeralPublicKey": point});
    let (status, answer) = broker.send("POST", &shake(sealed_id), None, Some(good)).await;
    assert_eq!((status, &answer["code"]), (409, &json!("handshake_key_set")), "{answer}");
    assert_eq!(broker.send("POST", &shake(sealed_id), None, Some(answering.clone())).await.0, 401);
    assert_eq!(broker.send("POST", &shake(sealed_id), Some(&key), Some(answering.clone())).await.0, 403);
    let (status, done) = broker.send("POST", &shake(sealed_id), Some(&responder), Some(answering.clone())).await;
    assert_eq!((status, &done["handshake"]["status"]), (200, &json!("complete")), "{done}");
    let (status, answer) = broker.send("POST", &shake(sealed_id), Some(&responder), Some(answering)).await;
    assert_eq!((status, &answer["code"]), (409, &json!("handshake_key_set")), "{answer}");
    // Plaintext into an encrypted session is refused; a plain session's
    // status says it is not encrypted.
    let (status, answer) = say(&broker, sealed_id, "in the clear").await;
    assert_eq!((status, &answer["code"]), (400, &json!("ciphertext_required")));
    let (_, status) = broker.send("GET", &format!("/api/v1/chat/session/{plain_id}/encryption"), None, None).await;
    assert_eq!(status, json!({"sessionId": plain_id, "encryption": null}));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_history_is_compacted_by_the_summariser_billed_and_kept_as_an_agent_entry() {
    let echo = Agent::start(Kind::Echo).await;
    let model = tests::models::ModelServer::start("sk-summary").await;
    let base = model.base();
    let allowed = tests::allowing(&[&echo.url()]);
    let flags = [
        "--summarizer-url",
        &base,
        "--summarizer-model",
        tests::models::MODEL,
        "--summarizer-key",
        "sk-summary",
        "--egress-allow",
        &allowed,
    ];
    let broker = Broker::start("chat-compact", &flags);
    let key = broker.sign_in("0.0.1001").await;
    let (_, session) = open(&broker, json!({"agentUrl": echo.url()})).await;
    let id = session["sessionId"].as_str().unwrap().to_string();
    let compact = format!("/api/v1/chat/session/{id}/compact");
    // Nothing to summarise yet; no key; a bad body.
    assert_eq!(broker.send("POST", &compact, None, Some(json!({}))).await.0, 401);
    let (status, answer) = broker.send("POST", &compact, Some(&key), Some(json!({}))).await;
    assert_eq!((status, &answer["code"]), (400, &json!("nothing_to_summarize")));
    let (status, _) = broker.send("POST", &compact, Some(&key), Some(json!({"preserveEntries": -1}))).await;
    assert_eq!(status, 400);
    for message in ["one", "two", "three"] {
        say(&broker, &id, message).await;
    }
    // The provider failing is 502, nothing changed or billed.
    let before = broker.balance(&key).await;
    model.failing.store(true, Ordering::SeqCst);
    let (status, answer) = broker.send("POST", &compact, Some(&key), Some(json!({"preserveEntries": 2}))).await;
    assert_eq!((status, &answer["code"]), (502, &json!("summarization_failed")));
    assert_eq!((messages(&broker), broker.balance(&key).await), (6, before));
    model.failing.store(false, Ordering::SeqCst);

    let (status, done) = broker.send("POST", &compact, Some(&key), Some(json!({"preserveEntries": 2}))).await;
    assert_eq!(status, 200, "{done}");
    // Four entries summarised: "User: one\nAgent: …" is four lines.
    assert_eq!(done["summaryEntry"]["role"], json!("agent"));
    assert!(done["summaryEntry"]["content"].as_str().unwrap().starts_with("Read 4 lines"), "{done}");
    assert_eq!(done["preservedEntries"].as_array().unwrap().len(), 2);
    assert_eq!((&done["creditsDebited"], &done["history"].as_array().unwrap().len()), (&json!(5), &3));
    assert_eq!(broker.balance(&key).await, before - 5);
    let (_, history) = broker.send("GET", &format!("/api/v1/chat/session/{id}/history"), None, None).await;
    assert_eq!(history["history"], done["history"], "the stored history is the compacted one");

    // Without a provider: 503, once the session is the caller's.
    let plain = Broker::start("chat-compact-off", &["--egress-allow", &allowed]);
    let key = plain.sign_in("0.0.1001").await;
    let (_, session) =
        plain.send("POST", "/api/v1/chat/session", Some(&key), Some(json!({"agentUrl": echo.url()}))).await;
    let compact = format!("/api/v1/chat/session/{}/compact", session["sessionId"].as_str().unwrap());
    let (status, answer) = plain.send("POST", &compact, Some(&key), Some(json!({}))).await;
    assert_eq!((status, &answer["code"]), (503, &json!("compaction_disabled")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_routing_provider_agent_needs_a_payer_and_is_billed_from_usage() {
    let model = tests::models::ModelServer::start("sk-provider").await;
    // A provider the deployment does not pay: anyone can register an agent
    // at any OpenAI-compatible API, and it is not sent the key.
    let stranger = tests::models::ModelServer::start("sk-provider").await;
    let origin = model.base().trim_end_matches("/v1").to_string();
    let allowed = tests::allowing(&[&stranger.base()]);
    let flags = ["--provider-key", "sk-provider", "--provider-origin", &origin, "--egress-allow", &allowed];
    let broker = Broker::start("chat-provider", &flags);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = &register_provider(&broker, &key, "Routed Model", &model.base()).await;
    // No payer: 401, at the session and at a message naming the agent.
    assert_eq!(open(&broker, json!({"uaid": uaid})).await.0, 401);
    let (status, _) =
        broker.send("POST", "/api/v1/chat/message", None, Some(json!({"uaid": uaid, "message": "hi"}))).await;
    assert_eq!(status, 401);
    let (_, session) = broker.send("POST", "/api/v1/chat/session", Some(&key), Some(json!({"uaid": uaid}))).await;
    let id = session["sessionId"].as_str().unwrap();
    assert_eq!(session["agent"]["capabilities"], json!({"protocol": "openrouter", "streaming": true}));
    let before = broker.balance(&key).await;
    let send = |streaming: bool| {
        let (broker, key) = (&broker, key.clone());
        async move {
            let body = json!({"sessionId": id, "message": "what is the tide", "streaming": streaming});
            broker.send("POST", "/api/v1/chat/message", Some(&key), Some(body)).await
        }
    };
    let (status, reply) = send(false).await;
    assert_eq!((status, &reply["message"]), (200, &json!("Read 1 lines and 4 words.")), "{reply}");
    // 2 credits per thousand tokens, at least one credit a message.
    assert_eq!((&reply["creditsDebited"], broker.balance(&key).await), (&json!(1), before - 1));
    // Streamed: chunks of the provider's deltas, then the billed reply. The
    // provider was sent the history as chat messages.
    let response = broker
        .client
        .post(broker.api.url("/api/v1/chat/message"))
        .header("x-api-key", &key)
        .header("accept", "text/event-stream")
        .json(&json!({"sessionId": id, "message": "and now?", "streaming": true}))
        .send()
        .await
        .unwrap();
    let events = events(&response.text().await.unwrap());
    let last = events.last().unwrap();
    assert_eq!(
        (&last["content"]["message"], &last["content"]["creditsDebited"]),
        (&json!("Read 1 lines and 2 words."), &json!(1))
    );
    assert!(events.len() > 3, "streamed word by word");
    assert_eq!(broker.balance(&key).await, before - 2);
    // Routing does not bill, so it does not reach a metered agent.
    let path = format!("/api/v1/route/{}", enc(uaid));
    let (status, answer) = broker.send("POST", &path, Some(&key), Some(json!({"message": "x"}))).await;
    assert_eq!((status, &answer["code"]), (422, &json!("routing_not_supported")));

    // The stranger's agent is called without the key: its API refuses it.
    let collector = register_provider(&broker, &key, "Key Collector", &stranger.base()).await;
    let body = json!({"uaid": collector, "message": "the key, please"});
    let (status, answer) = broker.send("POST", "/api/v1/chat/message", Some(&key), Some(body)).await;
    assert_eq!((status, &answer["code"]), (500, &json!("agent_error")), "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("401"), "{answer}");
    assert_eq!(stranger.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_servers_are_chatted_with_as_tool_calls_in_both_dialects() {
    let adder = Agent::start(Kind::Mcp).await;
    let guard_host = Broker::start("chat-mcp-guard", &[]);
    let allowed = tests::allowing(&[&adder.url(), &guard_host.api.base]);
    let broker = Broker::start("chat-mcp", &["--egress-allow", &allowed]);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Adder", "mcp", &adder.url()).await;
    let (status, session) = open(&broker, json!({"uaid": uaid})).await;
    assert_eq!((status, &session["agent"]["capabilities"]["protocol"]), (200, &json!("mcp")), "{session}");
    let id = session["sessionId"].as_str().unwrap();
    let (_, listed) = say(&broker, id, "tools").await;
    assert_eq!(listed["message"], json!("1 tools:\nadd: adds a and b"));
    let (_, sum) = say(&broker, id, r#"add {"a": 2, "b": 3}"#).await;
    assert_eq!(sum["message"], json!("5"));
    let (status, failed) = say(&broker, id, r#"add {"a": "x"}"#).await;
    assert_eq!((status, &failed["code"]), (500, &json!("agent_error")), "{failed}");
    let (status, _) = say(&broker, id, "add [1, 2]").await;
    assert_eq!(status, 500);

    // The stateless dialect: an api's own guard MCP endpoint refuses
    // initialize, so it is spoken to without one.
    let guard = guard_host.api.url("/api/guard/public-mcp");
    let uaid = register(&broker, &key, "Guard Tools", "mcp", &guard).await;
    let (status, session) = open(&broker, json!({"uaid": uaid})).await;
    assert_eq!(status, 200, "{session}");
    let (status, listed) = say(&broker, session["sessionId"].as_str().unwrap(), "tools").await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed["message"].as_str().unwrap().starts_with("7 tools:"), "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_built_on_the_official_a2a_sdk_are_relayed_whole_and_streamed() {
    let agents: Vec<_> = ["message", "task", "compat"].map(|mode| (mode, tests::agents::SdkAgent::start(mode))).into();
    let urls: Vec<&str> = agents.iter().map(|(_, agent)| agent.url.as_str()).collect();
    let broker = Broker::start("chat-sdk", &["--egress-allow", &tests::allowing(&urls)]);
    for (mode, agent) in &agents {
        let (status, session) = open(&broker, json!({"agentUrl": agent.url})).await;
        assert_eq!(status, 200, "{mode}: {session}");
        assert_eq!(session["agent"]["name"], json!(format!("SDK {mode} agent")));
        let id = session["sessionId"].as_str().unwrap();
        let (status, reply) = say(&broker, id, "hello there").await;
        assert_eq!((status, &reply["message"]), (200, &json!("HELLO THERE!")), "{mode}: {reply}");
        let (status, _, body) = stream(&broker, id, "stream this").await;
        assert_eq!(status, 200);
        let events = events(&body);
        let last = events.last().unwrap();
        assert_eq!(last["content"]["message"], json!("STREAM THIS!"), "{mode}: {body}");
        if *mode != "message" {
            assert!(events.len() >= 3, "{mode}: the artifact's chunks relayed as they came: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_auth_reaches_the_agent_and_is_never_stored() {
    let guarded = Agent::start(Kind::Guarded).await;
    let broker = Broker::start("chat-auth", &["--egress-allow", &tests::allowing(&[&guarded.url()])]);
    let key = broker.sign_in("0.0.1001").await;
    let uaid = register(&broker, &key, "Guarded", "http", &format!("{}/chat", guarded.url())).await;
    // Without auth the agent refuses; with it, every turn gets in.
    let (_, bare) = open(&broker, json!({"uaid": uaid})).await;
    let (status, refused) = say(&broker, bare["sessionId"].as_str().unwrap(), "knock").await;
    assert_eq!((status, &refused["code"]), (500, &json!("agent_error")), "{refused}");
    let (_, session) = open(&broker, json!({"uaid": uaid, "auth": {"type": "bearer", "token": "sesame"}})).await;
    let id = session["sessionId"].as_str().unwrap();
    for _ in 0..2 {
        assert_eq!(say(&broker, id, "knock").await.1["message"], json!("welcome in"));
    }
    // Nowhere in the store's files, nor in the journal.
    broker.journaled().await;
    for entry in walk(&broker.data) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"sesame"), "the token is in {}", entry.display());
    }
    // Ended: the next session's message must bring it again.
    broker.send("DELETE", &format!("/api/v1/chat/session/{id}"), None, None).await;
    let (_, again) = open(&broker, json!({"uaid": uaid})).await;
    let again_id = again["sessionId"].as_str().unwrap();
    let body = json!({"sessionId": again_id, "message": "knock", "auth": {"type": "bearer", "token": "sesame"}});
    let (status, reply) = broker.send("POST", "/api/v1/chat/message", None, Some(body)).await;
    assert_eq!((status, &reply["message"]), (200, &json!("welcome in")));
    assert_eq!(say(&broker, again_id, "and again").await.1["message"], json!("welcome in"), "held from then on");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
