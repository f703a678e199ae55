//! Encryption keys and ERC-8004 feedback against the real api binary on
//! loopback: validation and normalisation, idempotent registration and
//! rotation, who may register a key for what (401, 403, 404); the feedback
//! rule against sessions in the store, the entry shown at once and
//! published by the next build.

use serde_json::{json, Value};
use tests::live::Broker;

fn encode(uaid: &str) -> String {
    broker_site::render::segment(uaid)
}

/// A compressed secp256k1 public key, in hex, of a fixed secret.
fn secp256k1(secret: u8) -> (String, String) {
    let key = k256::ecdsa::SigningKey::from_slice(&[secret; 32]).unwrap();
    let hex = |compress| shared::http::hex(key.verifying_key().to_encoded_point(compress).as_bytes());
    (hex(true), hex(false))
}

#[tokio::test(flavor = "multi_thread")]
async fn encryption_keys_are_normalised_idempotent_and_rotated() {
    let broker = Broker::start("encryption-keys", &[]);
    let owner = broker.sign_in("0.0.1001").await;
    let (compressed, uncompressed) = secp256k1(5);
    let body = json!({"keyType": "secp256k1", "publicKey": compressed});
    assert_eq!(post_key(&broker, None, body.clone()).await.0, 401);

    let (status, first) = post_key(&broker, Some(&owner), body.clone()).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["publicKey"], &first["ledgerAccountId"], &first["ledgerNetwork"], &first["uaid"]),
        (&json!(compressed), &json!("0.0.1001"), &json!("testnet"), &Value::Null)
    );
    assert!(first["id"].as_str().unwrap().starts_with("ek_") && first["createdAt"] == first["updatedAt"]);
    // The same key in any of its spellings is the same record, unchanged.
    for spelling in [compressed.clone(), format!("0x{}", compressed.to_uppercase()), uncompressed.clone()] {
        let (status, again) =
            post_key(&broker, Some(&owner), json!({"keyType": "secp256k1", "publicKey": spelling})).await;
        assert_eq!((status, &again), (201, &first), "{spelling}");
    }
    // Another key rotates it: same id, the new key.
    let (rotated_key, _) = secp256k1(6);
    let (_, rotated) = post_key(&broker, Some(&owner), json!({"keyType": "secp256k1", "publicKey": rotated_key})).await;
    assert_eq!((&rotated["id"], &rotated["publicKey"]), (&first["id"], &json!(rotated_key)));
    assert!(rotated["updatedAt"].as_str() >= first["updatedAt"].as_str());
    // An x25519 key is a record of its own.
    let (status, x) = post_key(&broker, Some(&owner), json!({"keyType": "x25519", "publicKey": "ab".repeat(32)})).await;
    assert_eq!(status, 201);
    assert_ne!(x["id"], first["id"]);
}

/// `POST /encryption/keys` as the holder of `key`.
async fn post_key(broker: &Broker, key: Option<&str>, body: Value) -> (u16, Value) {
    broker.send("POST", "/api/v1/encryption/keys", key, Some(body)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_encryption_key_refused_names_its_field_and_stores_nothing() {
    let broker = Broker::start("encryption-refusals", &[]);
    let owner = broker.sign_in("0.0.1001").await;
    let (compressed, _) = secp256k1(5);
    let stored = broker.rows("encryption_keys");
    for (body, field) in [
        (json!({"keyType": "rsa", "publicKey": compressed}), "keyType"),
        (json!({"keyType": "secp256k1", "publicKey": "zz"}), "publicKey"),
        (json!({"keyType": "ed25519", "publicKey": compressed}), "publicKey"),
        (json!({"keyType": "secp256k1"}), "publicKey"),
        (json!({"keyType": "secp256k1", "publicKey": compressed, "email": "nobody"}), "email"),
        (json!({"keyType": "secp256k1", "publicKey": compressed, "uaid": "not-a-uaid"}), "uaid"),
        (json!({"keyType": "secp256k1", "publicKey": compressed, "colour": "red"}), "colour"),
    ] {
        let (status, refusal) = post_key(&broker, Some(&owner), body.clone()).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{body}: {refusal}");
    }
    assert_eq!(broker.rows("encryption_keys"), stored);
}

/// Another account's key, an agent someone else registered, an agent
/// nobody registered here: 403, 403, 404; an agent's own key is its own.
#[tokio::test(flavor = "multi_thread")]
async fn an_encryption_key_is_bound_to_its_account_or_its_agent() {
    let broker = Broker::start("encryption-owners", &[]);
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let (compressed, _) = secp256k1(5);
    let body = json!({"keyType": "secp256k1", "publicKey": compressed});
    let (_, first) = post_key(&broker, Some(&owner), body.clone()).await;
    let foreign = json!({"keyType": "secp256k1", "publicKey": compressed, "ledgerAccountId": "0.0.1001"});
    assert_eq!(post_key(&broker, Some(&other), foreign).await.0, 403);
    let registration = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": "Key Keeper", "bio": "keeps keys",
                    "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": [0]}},
        "endpoint": "https://key-keeper.example/a2a", "communicationProtocol": "a2a",
    });
    let (status, created) = broker.send("POST", "/api/v1/register", Some(&owner), Some(registration)).await;
    assert_eq!(status, 200, "{created}");
    let uaid = created["uaid"].as_str().unwrap();
    let for_agent = json!({"keyType": "secp256k1", "publicKey": compressed, "uaid": uaid});
    let (status, agent_key) = post_key(&broker, Some(&owner), for_agent.clone()).await;
    assert_eq!((status, &agent_key["uaid"], &agent_key["ledgerAccountId"]), (201, &json!(uaid), &Value::Null));
    assert_ne!(agent_key["id"], first["id"], "an agent's key is not its owner's");
    assert_eq!(post_key(&broker, Some(&other), for_agent).await.0, 403);
    let built = generator::broker::load(&tests::workspace_root().join("datasets/broker")).unwrap();
    let unregistered = json!({"keyType": "secp256k1", "publicKey": compressed, "uaid": built.agents[0].uaid});
    assert_eq!(post_key(&broker, Some(&owner), unregistered).await.0, 404);
    // x-account-id naming an account the key does not control: 403.
    let (status, _) = tests::live::call(
        &broker.client,
        "POST",
        broker.api.url("/api/v1/encryption/keys"),
        &[("x-api-key", &owner), ("x-account-id", "0.0.1002")],
        Some(body),
    )
    .await;
    assert_eq!(status, 403);
}

/// The reference client registers keys (its own and an agent's) and gives
/// feedback; it parses every answer.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_registers_keys_and_gives_feedback() {
    let broker = Broker::start("keys-client", &[]);
    let key = broker.sign_in("0.0.1003").await;
    let registration = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": "Cipher Clerk", "bio": "files keys",
                    "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": [0]}},
        "endpoint": "https://cipher-clerk.example/a2a", "communicationProtocol": "a2a",
    });
    let (_, created) = broker.send("POST", "/api/v1/register", Some(&key), Some(registration)).await;
    let agent = created["uaid"].as_str().unwrap();
    let built = generator::broker::load(&tests::workspace_root().join("datasets/broker")).unwrap();
    let erc = built.feedback[0].uaid.clone();
    session(&broker, "s-client", &erc, Some("0.0.1003"), 4);
    let results = tests::reference_client("keys.mjs", &[&broker.api.base, &key, agent, &erc, "s-client"]).await;
    assert_eq!(results["registerKey"]["value"]["ledgerAccountId"], json!("0.0.1003"));
    assert_eq!(results["submit"]["value"]["feedbackIndex"], json!(1));
    let sql = "SELECT uaid, public_key FROM encryption_keys WHERE uaid IS NOT NULL";
    let (uaid, public): (String, String) =
        broker.with_store(|s| s.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))).unwrap();
    assert_eq!(
        (uaid.as_str(), public.as_str()),
        (agent, results["ensureAgentKey"]["value"]["publicKey"].as_str().unwrap())
    );
}

/// A chat session in the store with `messages` messages.
fn session(broker: &Broker, id: &str, uaid: &str, account: Option<&str>, messages: usize) {
    broker.with_store(|conn| {
        conn.execute(
            "INSERT INTO chat_sessions (id, uaid, account_id, created_at) VALUES (?1, ?2, ?3, 0)",
            live_store::params![id, uaid, account],
        )
        .unwrap();
        for n in 0..messages {
            let role = if n % 2 == 0 { "user" } else { "agent" };
            conn.execute(
                "INSERT INTO chat_messages (session_id, role, content, created_at) VALUES (?1, ?2, 'hello', ?3)",
                live_store::params![id, role, n as i64],
            )
            .unwrap();
        }
    });
}

/// An api with two signed-in accounts and chat sessions with an
/// ERC-8004 agent: `s-ready` (0.0.1001, 4 messages, enough), `s-short`
/// (3), `s-anonymous` (6, nobody signed in) and `s-elsewhere` (with an
/// agent of another registry).
struct Feedback {
    broker: Broker,
    owner: String,
    other: String,
    built: broker_model::Sources,
    erc: String,
    plain: String,
    /// The ERC-8004 agent's feedback route.
    path: String,
}

async fn feedback(label: &str) -> Feedback {
    let broker = Broker::start(label, &[]);
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let built = generator::broker::load(&tests::workspace_root().join("datasets/broker")).unwrap();
    let erc = built.feedback[0].uaid.clone();
    let plain = built.agents.iter().find(|a| a.registry != "erc-8004").unwrap().uaid.to_string();
    session(&broker, "s-ready", &erc, Some("0.0.1001"), 4);
    session(&broker, "s-short", &erc, Some("0.0.1001"), 3);
    session(&broker, "s-anonymous", &erc, None, 6);
    session(&broker, "s-elsewhere", &plain, Some("0.0.1001"), 6);
    let path = format!("/api/v1/agents/{}/feedback", encode(&erc));
    Feedback { broker, owner, other, built, erc, plain, path }
}

impl Feedback {
    /// `POST {path}/eligibility` for session `id`.
    async fn ask(&self, key: Option<&str>, id: &str) -> (u16, Value) {
        let eligibility = format!("{}/eligibility", self.path);
        self.broker.send("POST", &eligibility, key, Some(json!({"sessionId": id}))).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn feedback_eligibility_follows_the_session_rule() {
    let f = feedback("feedback-eligibility").await;
    let (status, ready) = f.ask(Some(&f.owner), "s-ready").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        (&ready["eligible"], &ready["messageCount"], &ready["minimumMessages"]),
        (&json!(true), &json!(4), &json!(4))
    );
    assert!(ready.get("reason").is_none(), "optional means omitted: {ready}");
    // Each case: key, session, the reason's telling words.
    for (key, id, words) in [
        (None, "s-ready", "sign in"),
        (Some(&f.other), "s-ready", "sign in"),
        (Some(&f.owner), "s-short", "3 messages"),
        (Some(&f.owner), "s-anonymous", "without signing in"),
        (Some(&f.owner), "s-elsewhere", "another agent"),
    ] {
        let (status, verdict) = f.ask(key.map(String::as_str), id).await;
        assert_eq!((status, &verdict["eligible"]), (200, &json!(false)), "{id}: {verdict}");
        assert!(verdict["reason"].as_str().unwrap().contains(words), "{id}: {verdict}");
    }
    assert_eq!(f.ask(Some(&f.owner), "s-missing").await.0, 404);
    let (status, _) = f
        .broker
        .send(
            "POST",
            &format!("/api/v1/agents/{}/feedback/eligibility", encode(&f.plain)),
            None,
            Some(json!({"sessionId": "s-elsewhere"})),
        )
        .await;
    assert_eq!(status, 400, "not an ERC-8004 agent");
    let eligibility = format!("{}/eligibility", f.path);
    assert_eq!(f.broker.send("POST", &eligibility, None, Some(json!({"session": "x"}))).await.0, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_feedback_stores_nothing() {
    let f = feedback("feedback-refused").await;
    for (key, body, status) in [
        (Some(&f.owner), json!({"sessionId": "s-ready", "score": 101}), 400),
        (Some(&f.owner), json!({"sessionId": "s-ready", "score": 7.5}), 400),
        (Some(&f.owner), json!({"sessionId": "s-ready", "score": 80, "fileHash": "0x12"}), 400),
        (Some(&f.owner), json!({"sessionId": "s-ready", "score": 80, "tag1": "x".repeat(33)}), 400),
        (Some(&f.owner), json!({"sessionId": "s-short", "score": 80}), 403),
        (Some(&f.other), json!({"sessionId": "s-ready", "score": 80}), 403),
        (None, json!({"sessionId": "s-ready", "score": 80}), 403),
    ] {
        let (got, answer) = f.broker.send("POST", &f.path, key.map(String::as_str), Some(body.clone())).await;
        assert_eq!(got, status, "{body}: {answer}");
    }
    assert_eq!((f.broker.rows("agent_feedback"), f.broker.rows("outbox")), (0, 0));
}

/// One feedback a session; shown at once (not kept by shared caches) and
/// published by the next build, from its file.
#[tokio::test(flavor = "multi_thread")]
async fn feedback_is_given_once_a_session_shown_at_once_and_published() {
    let f = feedback("feedback-given").await;
    let (broker, path) = (&f.broker, &f.path);
    let (_, before) = broker.send("GET", path, None, None).await;
    let total = before["summary"]["totalFeedbacks"].as_u64().unwrap();
    let (status, given) = broker
        .send("POST", path, Some(&f.owner), Some(json!({"sessionId": "s-ready", "score": 87, "tag1": "helpful"})))
        .await;
    assert_eq!(status, 200, "{given}");
    assert_eq!(
        (&given["score"], &given["agentId"], &given["feedbackIndex"]),
        (&json!(87), &json!(f.built.feedback[0].agent_id), &json!(1))
    );
    assert_eq!(given["registry"], json!("erc-8004"));
    let (status, again) =
        broker.send("POST", path, Some(&f.owner), Some(json!({"sessionId": "s-ready", "score": 90}))).await;
    assert_eq!((status, again["code"].as_str()), (403, Some("not_eligible")), "one per session");
    let (_, verdict) = f.ask(Some(&f.owner), "s-ready").await;
    assert!(verdict["reason"].as_str().unwrap().contains("already"), "{verdict}");

    let response = broker.client.get(broker.api.url(path)).send().await.unwrap();
    assert_eq!(response.headers()["cache-control"], "no-cache");
    let now: Value = response.json().await.unwrap();
    assert_eq!(now["summary"]["totalFeedbacks"], json!(total + 1), "{now}");
    let mine = |body: &Value| {
        body["entries"].as_array().unwrap().iter().any(|e| e["client"] == json!("0.0.1001") && e["score"] == json!(87))
    };
    assert!(mine(&now), "{now}");

    broker.journaled().await;
    let sources = Broker::sources();
    broker.rebuild(&tests::strs(&sources)).await;
    let response = broker.client.get(broker.api.url(path)).send().await.unwrap();
    assert_ne!(response.headers()["cache-control"], "no-cache");
    let published: Value = response.json().await.unwrap();
    assert_eq!(published["summary"]["totalFeedbacks"], json!(total + 1));
    assert!(mine(&published), "{published}");
    let (_, detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&f.erc)), None, None).await;
    assert_eq!(detail["trust"]["feedback"]["totalFeedbacks"], json!(total + 1));
}
