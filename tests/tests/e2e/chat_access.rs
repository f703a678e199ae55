//! Who may call what on a chat session, against the real api binary:
//! docs/broker.md's table walked route by route for the session's owner,
//! a member's holder, the agent's registrant, another account and an
//! anonymous caller; a member cannot widen its own scope or publish the
//! owner's session; the owner can always take it back; an ended session
//! is the owner's alone; a UAID registered again by another account
//! inherits none of the old registrant's rights.

use serde_json::{json, Value};
use tests::agents::{Agent, Kind};
use tests::live::{register, Broker};

/// `encodeURIComponent`, as the reference client encodes a query value.
fn enc(text: &str) -> String {
    broker_site::render::segment(text)
}

/// A session of the owner's (0.0.1001) with an agent registered by 0.0.1002,
/// opened with the owner's own agent as sender; a guest agent of 0.0.1003
/// invited to what follows the invite; 0.0.1004 has no part.
struct Table {
    broker: Broker,
    _echo: Agent,
    echo_url: String,
    owner: String,
    registrant: String,
    holder: String,
    other: String,
    agent: String,
    sender: String,
    guest: String,
    id: String,
}

impl Table {
    async fn start(label: &str) -> Table {
        let echo = Agent::start(Kind::Echo).await;
        let echo_url = echo.url();
        let broker = Broker::start(label, &["--egress-allow", &tests::allowing(&[&echo_url])]);
        let owner = broker.sign_in("0.0.1001").await;
        let registrant = broker.sign_in("0.0.1002").await;
        let holder = broker.sign_in("0.0.1003").await;
        let other = broker.sign_in("0.0.1004").await;
        let agent = register(&broker, &registrant, "Shared Echo", "a2a", &echo_url).await;
        let sender = register(&broker, &owner, "Owner Assistant", "a2a", &echo_url).await;
        let guest = register(&broker, &holder, "Guest Agent", "a2a", &echo_url).await;
        let mut table = Table {
            broker,
            _echo: echo,
            echo_url,
            owner,
            registrant,
            holder,
            other,
            agent,
            sender,
            guest,
            id: String::new(),
        };
        table.id = table.open(json!({"uaid": table.agent, "senderUaid": table.sender})).await;
        let first = json!({"sessionId": table.id, "message": "before the guest"});
        assert_eq!(table.call("POST", "message", Some(&table.owner.clone()), Some(first)).await.0, 200);
        let invite = json!({"senderUaid": table.sender, "uaid": table.guest, "historyScope": "since_invite"});
        assert_eq!(table.call("POST", "invite", Some(&table.owner.clone()), Some(invite)).await.0, 200);
        table
    }

    /// A session the owner opens with `body`: its id.
    async fn open(&self, body: Value) -> String {
        let (status, session) = self.broker.send("POST", "/api/v1/chat/session", Some(&self.owner), Some(body)).await;
        assert_eq!(status, 200, "{session}");
        session["sessionId"].as_str().unwrap().to_string()
    }

    /// `method` on the session's route `tail` ("" for the session itself).
    async fn call(&self, method: &str, tail: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
        self.call_on(&self.id, method, tail, key, body).await
    }

    async fn call_on(
        &self,
        id: &str,
        method: &str,
        tail: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let path = match tail {
            "" => format!("/api/v1/chat/session/{id}"),
            "message" => "/api/v1/chat/message".to_string(),
            tail if tail.starts_with('?') => format!("/api/v1/chat/session/{id}{tail}"),
            tail => format!("/api/v1/chat/session/{id}/{tail}"),
        };
        self.broker.send(method, &path, key, body).await
    }

    /// The history as the caller reads it, as `sender` when named: the
    /// status and the messages' contents.
    async fn history(&self, key: Option<&str>, sender: Option<&str>) -> (u16, Vec<String>) {
        let tail = match sender {
            Some(sender) => format!("history?senderUaid={}", enc(sender)),
            None => "history".to_string(),
        };
        let (status, answer) = self.call("GET", &tail, key, None).await;
        let contents = answer["history"].as_array().into_iter().flatten();
        (status, contents.map(|m| m["content"].as_str().unwrap_or_default().to_string()).collect())
    }
}

/// The parties of the table, each with its key and the member it names.
fn parties(t: &Table) -> Vec<(&'static str, Option<String>, String)> {
    vec![
        ("owner", Some(t.owner.clone()), t.sender.clone()),
        ("member's holder", Some(t.holder.clone()), t.guest.clone()),
        ("agent's registrant", Some(t.registrant.clone()), t.agent.clone()),
        ("other account", Some(t.other.clone()), t.guest.clone()),
        ("anonymous", None, t.guest.clone()),
    ]
}

/// docs/broker.md's table of who may call what on a private session,
/// route by route: each party's status, in the order of [`parties`].
#[tokio::test(flavor = "multi_thread")]
async fn each_party_may_do_what_the_table_says_and_no_more() {
    let t = Table::start("chat-access-table").await;
    let invite_all = |sender: &str| json!({"senderUaid": sender, "uaid": t.guest, "historyScope": "all"});
    let public = |sender: &str| json!({"senderUaid": sender, "visibility": "public"});
    // (route, expected statuses for owner, holder, registrant, other, anonymous)
    type Route<'a> = (&'a str, &'a str, Box<dyn Fn(&str) -> Option<Value> + 'a>, [u16; 5]);
    let routes: Vec<Route> = vec![
        (
            "POST",
            "message",
            Box::new(|_| Some(json!({"sessionId": t.id, "message": "hello"}))),
            [200, 403, 403, 403, 401],
        ),
        ("GET", "history", Box::new(|_| None), [200, 403, 403, 403, 401]),
        ("GET", "meta", Box::new(|_| None), [200, 400, 400, 400, 400]),
        ("GET", "encryption", Box::new(|_| None), [200, 403, 403, 403, 401]),
        ("PATCH", "", Box::new(|sender| Some(public(sender))), [200, 403, 403, 403, 401]),
        ("POST", "invite", Box::new(|sender| Some(invite_all(sender))), [200, 403, 403, 403, 401]),
        ("POST", "compact", Box::new(|_| Some(json!({}))), [503, 403, 403, 403, 401]),
    ];
    for (method, tail, body, expected) in &routes {
        for ((who, key, sender), status) in parties(&t).into_iter().zip(expected) {
            let (got, answer) = t.call(method, tail, key.as_deref(), body(&sender)).await;
            assert_eq!(got, *status, "{method} {tail} as the {who}: {answer}");
            if got < 300 && *method != "GET" {
                // The owner's change undone, so every party meets the same session.
                let private = json!({"senderUaid": t.sender, "visibility": "private"});
                assert_eq!(t.call("PATCH", "", Some(&t.owner), Some(private)).await.0, 200);
                let scoped = json!({"senderUaid": t.sender, "uaid": t.guest, "historyScope": "since_invite"});
                assert_eq!(t.call("POST", "invite", Some(&t.owner), Some(scoped)).await.0, 200);
            }
        }
    }
    // Naming the member it holds: each reads within its member's scope;
    // naming another's, nothing.
    let since_invite: Vec<String> = vec!["hello".into(), "You said \"hello\" (1 word).".into()];
    for ((who, key, sender), expected) in parties(&t).into_iter().zip([
        (200, None),
        (200, Some(since_invite.clone())),
        (200, None),
        (403, Some(vec![])),
        (401, Some(vec![])),
    ]) {
        let (status, history) = t.history(key.as_deref(), Some(&sender)).await;
        assert_eq!(status, expected.0, "history as the {who} naming {sender}");
        if let Some(contents) = expected.1 {
            assert_eq!(history, contents, "the {who}'s history");
        }
        let (status, _) = t.call("GET", &format!("meta?senderUaid={}", enc(&sender)), key.as_deref(), None).await;
        assert_eq!(status, expected.0, "metadata as the {who}");
    }
    assert_eq!(t.history(Some(&t.owner), None).await.1.len(), 4, "the owner reads it all");
    // Ended: the owner's alone.
    for (who, key, _) in parties(&t).into_iter().skip(1) {
        assert_eq!(t.call("DELETE", "", key.as_deref(), None).await.0, if key.is_some() { 403 } else { 401 }, "{who}");
    }
    assert_eq!(t.call("DELETE", "", Some(&t.owner), None).await.0, 200);
    for (who, key, sender) in parties(&t).into_iter().skip(1) {
        let (status, answer) = t.history(key.as_deref(), Some(&sender)).await;
        assert_eq!(status, 404, "an ended session's history as the {who}: {answer:?}");
        let (status, answer) = t.call("GET", &format!("meta?senderUaid={}", enc(&sender)), key.as_deref(), None).await;
        assert_eq!((status, &answer["code"]), (404, &json!("session_ended")), "as the {who}");
    }
    assert_eq!(t.history(Some(&t.owner), None).await.0, 200, "the owner still reads its ended session");
}

/// A member invited to see only what follows cannot invite itself again
/// to see it all, nor can its holder change the session in any other way.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_cannot_widen_its_own_scope() {
    let t = Table::start("chat-access-scope").await;
    let body = json!({"senderUaid": t.guest, "uaid": t.guest, "historyScope": "all"});
    let (status, answer) = t.call("POST", "invite", Some(&t.holder), Some(body)).await;
    assert_eq!(status, 403, "{answer}");
    let (_, meta) = t.call("GET", &format!("meta?senderUaid={}", enc(&t.guest)), Some(&t.holder), None).await;
    let scope = meta["members"].as_array().unwrap().iter().find(|m| m["uaid"] == json!(t.guest)).unwrap();
    assert_eq!(scope["historyScope"], json!("since_invite"));
}

/// The agent's registrant cannot publish the owner's session; the owner
/// makes it public, then private again, even one it opened without a
/// sender; an ended public session is no longer listed nor readable.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_owner_publishes_and_can_always_take_it_back() {
    let t = Table::start("chat-access-publish").await;
    let public = json!({"senderUaid": t.agent, "visibility": "public"});
    assert_eq!(t.call("PATCH", "", Some(&t.registrant), Some(public)).await.0, 403, "the registrant");
    assert_eq!(t.broker.send("GET", "/api/v1/chat/public", None, None).await.1["sessions"], json!([]));

    // Opened without a sender: the owner holds no member, yet takes it back.
    let bare = t.open(json!({"uaid": t.agent})).await;
    let private = json!({"senderUaid": t.agent, "visibility": "private"});
    let (status, answer) = t.call_on(&bare, "PATCH", "", Some(&t.owner), Some(private.clone())).await;
    assert_eq!((status, &answer["visibility"]), (200, &json!("private")), "{answer}");
    // Public needs a member the owner holds (spec section 3, rule 5).
    let public = json!({"senderUaid": t.agent, "visibility": "public"});
    assert_eq!(t.call_on(&bare, "PATCH", "", Some(&t.owner), Some(public)).await.0, 403);

    let public = json!({"senderUaid": t.sender, "visibility": "public"});
    assert_eq!(t.call("PATCH", "", Some(&t.owner), Some(public.clone())).await.0, 200);
    let listed = t.broker.send("GET", "/api/v1/chat/public", None, None).await.1;
    assert_eq!(listed["sessions"][0]["sessionId"], json!(t.id), "{listed}");
    assert_eq!(t.history(None, None).await.0, 200, "public: anyone reads it");
    assert_eq!(t.history(None, Some(&t.guest)).await.1.len(), 0, "a member asking as itself keeps its scope");
    let private = json!({"senderUaid": t.sender, "visibility": "private"});
    assert_eq!(t.call("PATCH", "", Some(&t.owner), Some(private)).await.0, 200);
    assert_eq!(t.history(None, None).await.0, 401, "private again");

    assert_eq!(t.call("PATCH", "", Some(&t.owner), Some(public.clone())).await.0, 200);
    assert_eq!(t.call("DELETE", "", Some(&t.owner), None).await.0, 200);
    assert_eq!(t.broker.send("GET", "/api/v1/chat/public", None, None).await.1["sessions"], json!([]));
    let (status, answer) = t.call("GET", "history", None, None).await;
    assert_eq!((status, &answer["code"]), (404, &json!("session_ended")), "{answer}");
    assert_eq!(t.call("GET", "meta", None, None).await.0, 404);
    assert_eq!(t.call("PATCH", "", Some(&t.owner), Some(public)).await.0, 404, "nor published again");
}

/// The agent's registrant deletes it; another account registers the same
/// profile and gets the same UAID, but none of the sessions' rights.
#[tokio::test(flavor = "multi_thread")]
async fn a_uaid_registered_again_inherits_nothing() {
    let t = Table::start("chat-access-inherit").await;
    let encrypted = t.open(json!({"uaid": t.agent, "senderUaid": t.sender, "encryptionRequested": true})).await;
    let path = format!("/api/v1/register/{}", enc(&t.agent));
    let (status, answer) = t.broker.send("DELETE", &path, Some(&t.registrant), None).await;
    assert_eq!(status, 200, "{answer}");
    let again = register(&t.broker, &t.other, "Shared Echo", "a2a", &t.echo_url).await;
    assert_eq!(again, t.agent, "the same profile, the same UAID");

    let (status, _) = t.history(Some(&t.other), Some(&t.agent)).await;
    assert_eq!(status, 403, "the new registrant reads nothing as the agent");
    let (status, _) = t.call("GET", &format!("meta?senderUaid={}", enc(&t.agent)), Some(&t.other), None).await;
    assert_eq!(status, 403);
    let point = json!({"role": "responder", "keyType": "secp256k1",
        "ephemeralPublicKey": "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"});
    let (status, answer) =
        t.call_on(&encrypted, "POST", "encryption-handshake", Some(&t.other), Some(point.clone())).await;
    assert_eq!(status, 403, "not the responder: {answer}");
    let (status, _) = t.call_on(&encrypted, "GET", "encryption", Some(&t.other), None).await;
    assert_eq!(status, 403);
    // The account that held it when the session opened still does.
    let (status, answer) =
        t.call_on(&encrypted, "POST", "encryption-handshake", Some(&t.registrant), Some(point)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(t.history(Some(&t.registrant), Some(&t.agent)).await.0, 200);
}
