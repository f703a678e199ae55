//! Content inscription against the real api binary on loopback, with a
//! small Hedera network ([`local_peers::network`]) whose consensus nodes take
//! the broker's signed transactions over gRPC and whose mirror node shows
//! what reached consensus: a file written as HCS-1, read back as the same
//! bytes, billed once at its quote; a job the network refuses refunded; a
//! job resumed after a restart; refusals that change nothing.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tests::live::Broker;
use tests::mirror::MirrorServer;
use tests::network::{self, Network};

/// The broker's paying account on the network.
pub(crate) const BROKER_ACCOUNT: &str = "0.0.1003";
const ACCOUNTS: [&str; 4] = ["0.0.1001", "0.0.1002", "0.0.1003", "0.0.1004"];

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A manifest of about 6 KB: a few messages once compressed.
fn manifest() -> Vec<u8> {
    (0..120)
        .map(|i| format!("- step {i}: fetch, check, answer ({})\n", i * 7919 % 1000))
        .collect::<String>()
        .into_bytes()
}

/// A network of two nodes over a mirror node that knows the dev
/// accounts, and a broker that inscribes through it paying with
/// [`BROKER_ACCOUNT`]; 0.0.1001 signed in, with credits it bought with
/// HBAR on the same network.
pub(crate) struct Inscribing {
    pub(crate) network: Network,
    pub(crate) broker: Broker,
    pub(crate) key: String,
}

impl Inscribing {
    pub(crate) async fn start(label: &str, flags: &[&str]) -> Inscribing {
        let mirror = Arc::new(MirrorServer::start(Default::default(), Duration::ZERO).await);
        for account in ACCOUNTS {
            network::known(&mirror, account);
        }
        let network = Network::start(mirror.clone(), &["0.0.3", "0.0.4"], &ACCOUNTS).await;
        let (url, nodes, key) = (mirror.url(), network.hapi_nodes(), network::private_key(BROKER_ACCOUNT));
        let mut all = vec!["--mirror-url", &url, "--hapi-node", &nodes, "--inscription-account", BROKER_ACCOUNT];
        all.extend_from_slice(&["--inscription-key", &key, "--inscription-retry-ms", "50"]);
        all.extend_from_slice(&["--treasury-account", "0.0.98765", "--purchase-watch-ms", "50"]);
        all.extend_from_slice(flags);
        let broker = Broker::start(label, &all);
        let key = broker.sign_in("0.0.1001").await;
        let s = Inscribing { network, broker, key };
        s.buy(100).await;
        s
    }

    /// Buys `credits` for 0.0.1001 with HBAR: the intent signed by its
    /// key and handed to the network, then credited once the api sees it.
    async fn buy(&self, credits: i64) {
        let before = self.broker.balance(&self.key).await;
        let (status, intent) =
            self.post("/api/v1/credits/payments/hbar/intent", json!({"credits": credits}), &[]).await;
        assert_eq!(status, 200, "{intent}");
        let bytes = base64::engine::general_purpose::STANDARD.decode(intent["transaction"].as_str().unwrap()).unwrap();
        let key = api::auth::login::key_for(api::auth::login::DEV_KEYS, "0.0.1001").unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        network::submit(&self.network.mirror, &["0.0.3"], &network::sign(&bytes, &key), now).unwrap();
        tests::wait::until("credits bought", 600, Duration::from_millis(20), async || {
            self.broker.balance(&self.key).await == before + credits
        })
        .await;
    }

    pub(crate) async fn post(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut all = vec![("x-api-key", self.key.as_str())];
        all.extend_from_slice(headers);
        tests::live::call(&self.broker.client, "POST", self.broker.api.url(path), &all, Some(body)).await
    }

    async fn job(&self, id: &str) -> Value {
        let (status, job) =
            self.broker.send("GET", &format!("/api/v1/inscribe/content/{id}"), Some(&self.key), None).await;
        assert_eq!(status, 200, "{job}");
        job
    }

    /// Waits until job `id` is `completed` or `failed`: the job.
    async fn ended(&self, id: &str) -> Value {
        let mut last = Value::Null;
        tests::wait::until("an inscription job ending", 600, Duration::from_millis(50), async || {
            last = self.job(id).await;
            last["status"] == "completed" || last["status"] == "failed"
        })
        .await;
        last
    }

    /// The content of `topic` read back from the mirror node.
    pub(crate) async fn read_back(&self, topic: &str) -> (Vec<u8>, String) {
        let (_, info) = tests::live::call(
            &self.broker.client,
            "GET",
            format!("{}/api/v1/topics/{topic}", self.network.mirror.url()),
            &[],
            None,
        )
        .await;
        assert_eq!(info["admin_key"], Value::Null, "an HCS-1 topic has no admin key");
        assert!(info["submit_key"].is_object(), "an HCS-1 topic has a submit key");
        let messages: Vec<Vec<u8>> = self
            .network
            .mirror
            .messages(topic.parse().unwrap())
            .iter()
            .map(|m| base64::engine::general_purpose::STANDARD.decode(&m.message).unwrap())
            .collect();
        api::broker::inscription::hcs1::decode(info["memo"].as_str().unwrap(), &messages, 1 << 20).unwrap()
    }
}

/// Quoted, created twice under one key (charged once), written as HCS-1
/// and read back from the mirror node as the same bytes.
#[tokio::test(flavor = "multi_thread")]
async fn an_inscription_is_written_read_back_and_billed_once_at_its_quote() {
    let s = Inscribing::start("inscribe-once", &[]).await;
    let (status, config) = s.broker.send("GET", "/api/v1/inscribe/content/config", None, None).await;
    assert_eq!((status, &config["enabled"]), (200, &json!(true)));
    let content = manifest();
    let input =
        json!({"inputType": "base64", "base64": b64(&content), "fileName": "manifest.md", "mimeType": "text/markdown"});
    let (status, quote) = s.post("/api/v1/inscribe/content/quote", input.clone(), &[]).await;
    assert_eq!(status, 200, "{quote}");
    assert_eq!(quote["contentHash"], api::broker::inscription::hcs1::hash(&content));
    let before = s.broker.balance(&s.key).await;
    let broker_hbar = s.network.balance(BROKER_ACCOUNT);
    let mut create = input.clone();
    create["quoteId"] = quote["quoteId"].clone();
    let (status, job) = s.post("/api/v1/inscribe/content", create.clone(), &[("idempotency-key", "k-1")]).await;
    assert_eq!((status, &job["status"]), (202, &json!("pending")), "{job}");
    let (status, again) = s.post("/api/v1/inscribe/content", create, &[("idempotency-key", "k-1")]).await;
    assert_eq!((status, &again["jobId"]), (202, &job["jobId"]), "a retry answers the same job");
    // The key with other content, or a key past 255 bytes: refused, no job.
    let other = json!({"inputType": "base64", "base64": b64(b"other content"), "mimeType": "text/plain"});
    let (status, answer) = s.post("/api/v1/inscribe/content", other.clone(), &[("idempotency-key", "k-1")]).await;
    assert_eq!((status, &answer["code"]), (409, &json!("idempotency_key_reused")), "{answer}");
    let long = "k".repeat(256);
    let (status, answer) = s.post("/api/v1/inscribe/content", other, &[("idempotency-key", &long)]).await;
    assert_eq!((status, &answer["code"]), (400, &json!("invalid_idempotency_key")), "{answer}");
    assert_eq!(s.broker.rows("inscription_jobs"), 1, "one job");
    let done = s.ended(job["jobId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    let topic = done["topicId"].as_str().unwrap();
    assert_eq!(done["hrl"], format!("hcs://1/{topic}"));
    assert_eq!(s.read_back(topic).await, (content, "text/markdown".to_string()));
    assert_eq!(s.broker.balance(&s.key).await, before - quote["credits"].as_i64().unwrap(), "charged once");
    let messages = s.network.mirror.messages(topic.parse().unwrap()).len() as i64;
    let fees = network::TOPIC_FEE + messages * network::MESSAGE_FEE;
    assert_eq!(s.network.balance(BROKER_ACCOUNT), broker_hbar - fees, "the broker's account paid the network");
    let (_, listed) = s.broker.send("GET", "/api/v1/inscribe/content?limit=5", Some(&s.key), None).await;
    assert_eq!((&listed["total"], &listed["inscriptions"][0]["jobId"]), (&json!(1), &job["jobId"]), "{listed}");
    // Another account sees none of it.
    let other = s.broker.sign_in("0.0.1002").await;
    let path = format!("/api/v1/inscribe/content/{}", job["jobId"].as_str().unwrap());
    assert_eq!(s.broker.send("GET", &path, Some(&other), None).await.0, 404);
    let (_, theirs) = s.broker.send("GET", "/api/v1/inscribe/content", Some(&other), None).await;
    assert_eq!(theirs["total"], 0);
}

/// A job the network refuses (the broker's account cannot pay) fails
/// and is refunded.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_the_network_refuses_fails_and_is_refunded() {
    let s = Inscribing::start("inscribe-refused", &[]).await;
    s.network.set_balance(BROKER_ACCOUNT, 0);
    let before = s.broker.balance(&s.key).await;
    let input = json!({"inputType": "base64", "base64": b64(b"a short note"), "mimeType": "text/plain"});
    let (status, job) = s.post("/api/v1/inscribe/content", input, &[]).await;
    assert_eq!(status, 202, "{job}");
    let id = job["jobId"].as_str().unwrap();
    let failed = s.ended(id).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["failureReason"].as_str().unwrap().contains("INSUFFICIENT_PAYER_BALANCE"), "{failed}");
    assert_eq!(s.broker.balance(&s.key).await, before, "refunded");
    let postings: Vec<(String, i64)> = {
        let sql = "SELECT kind, amount FROM credit_transactions WHERE reference = ?1 ORDER BY id";
        s.broker.with_store(|store| store.query_map(sql, [id], |r| Ok((r.get(0)?, r.get(1)?)))).unwrap()
    };
    let credits = failed["quoteCredits"].as_i64().unwrap();
    assert_eq!(postings, [("debit".to_string(), -credits), ("refund".to_string(), credits)], "charged, then refunded");
}

/// With its nodes unavailable a job waits; the api restarted, it resumes
/// and completes, each message written once.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_waiting_for_the_network_resumes_after_a_restart() {
    let mut s = Inscribing::start("inscribe-resumed", &[]).await;
    s.network.pause(true);
    let content = manifest();
    let input = json!({"inputType": "base64", "base64": b64(&content), "mimeType": "text/markdown"});
    let (_, job) = s.post("/api/v1/inscribe/content", input, &[]).await;
    let id = job["jobId"].as_str().unwrap().to_string();
    tests::wait::until("a node refusing a call", 600, Duration::from_millis(20), async || s.network.refused() > 0)
        .await;
    s.broker.restart(&[]);
    assert_eq!(s.job(&id).await["status"], "in_progress", "still waiting after the restart");
    s.network.pause(false);
    let done = s.ended(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let topic = done["topicId"].as_str().unwrap();
    assert_eq!(s.read_back(topic).await.0, content, "each message once");
}

/// Content named by a URL is fetched through the egress gate (the peer
/// on loopback allowed) and written as it was served, with its type.
#[tokio::test(flavor = "multi_thread")]
async fn content_named_by_a_url_is_fetched_through_the_gate() {
    use warp::Filter as _;
    let route = warp::path!("card.json").map(|| {
        warp::http::Response::builder().header("content-type", "application/json").body(r#"{"name":"served"}"#)
    });
    let (addr, _stop) = tests::serve_on_loopback(route).await;
    let url = format!("http://{addr}/card.json");
    let s = Inscribing::start("inscribe-url", &["--egress-allow", &tests::allowing(&[&url])]).await;
    let (status, job) = s.post("/api/v1/inscribe/content", json!({"inputType": "url", "url": url}), &[]).await;
    assert_eq!((status, &job["mimeType"]), (202, &json!("application/json")), "{job}");
    let done = s.ended(job["jobId"].as_str().unwrap()).await;
    let topic = done["topicId"].as_str().unwrap();
    assert_eq!(s.read_back(topic).await, (br#"{"name":"served"}"#.to_vec(), "application/json".to_string()));
}

/// Refusals: no key, a bad mode, too large, another account's quote, a
/// quote for other content, a destination the gate refuses. Nothing is
/// charged.
#[tokio::test(flavor = "multi_thread")]
async fn refused_inscriptions_change_nothing() {
    let s = Inscribing::start("inscribe-refusals", &["--inscription-max-bytes", "2000"]).await;
    let other = s.broker.sign_in("0.0.1002").await;
    let input = json!({"inputType": "base64", "base64": b64(b"hello"), "mimeType": "text/plain"});
    let (_, foreign) = tests::live::call(
        &s.broker.client,
        "POST",
        s.broker.api.url("/api/v1/inscribe/content/quote"),
        &[("x-api-key", &other)],
        Some(input.clone()),
    )
    .await;
    let (_, mine) = s.post("/api/v1/inscribe/content/quote", input.clone(), &[]).await;
    let before = s.broker.balance(&s.key).await;
    let with = |changes: Value| {
        let mut body = input.clone();
        body.as_object_mut().unwrap().extend(changes.as_object().unwrap().clone());
        body
    };
    let cases = [
        (with(json!({"mode": "hashinal"})), 400, "mode_unsupported"),
        (with(json!({"base64": b64(&[7u8; 3000])})), 413, "content_too_large"),
        (with(json!({"quoteId": foreign["quoteId"]})), 400, "quote_not_found"),
        (with(json!({"quoteId": mine["quoteId"], "base64": b64(b"other")})), 400, "quote_mismatch"),
        (with(json!({"inputType": "url", "base64": null})), 400, "invalid_body"),
        (json!({"inputType": "url", "url": "http://127.0.0.2:9/file"}), 403, "destination_not_allowed"),
    ];
    for (body, status, code) in cases {
        let (got, answer) = s.post("/api/v1/inscribe/content", body.clone(), &[]).await;
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{body}: {answer}");
    }
    let (status, _) = s.broker.send("POST", "/api/v1/inscribe/content", None, Some(input)).await;
    assert_eq!(status, 401);
    assert_eq!(s.broker.balance(&s.key).await, before);
    assert_eq!(s.broker.rows("inscription_jobs"), 0);
    let plain = Broker::start("inscribe-off", &[]);
    let (_, config) = plain.send("GET", "/api/v1/inscribe/content/config", None, None).await;
    assert_eq!(config, json!({"enabled": false}));
    let key = plain.sign_in("0.0.1001").await;
    let (status, _) = plain.send("POST", "/api/v1/inscribe/content/quote", Some(&key), Some(json!({}))).await;
    assert_eq!(status, 503);
}

/// The reference client's `getRegistryBrokerQuote` and
/// `inscribeViaRegistryBroker` against the api: the file it wrote reads
/// back from the mirror node.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_inscribes_a_file() {
    let s = Inscribing::start("inscribe-client", &[]).await;
    // The SDK's inscription calls take the API's own base, unlike its client.
    let base = format!("{}/api/v1", s.broker.api.base);
    let results = tests::reference_client("inscription.mjs", &[&base, &s.key]).await;
    let topic = results["inscribe"]["value"]["topicId"].as_str().unwrap();
    assert_eq!(s.read_back(topic).await.0, b"# Agent notes\nwritten by the reference client\n".to_vec());
}

/// The local network `make run` starts keeps what it accepted: a network
/// started again on the same file shows the same topics and messages at
/// the same consensus times, and goes on from there.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_network_takes_its_kept_transactions_again() {
    use api::broker::inscription::ledger::{Fees, Ledger};
    let dir = tests::TempDir::new("localnet-state");
    let state = dir.path().join("state/localnet.jsonl");
    let start = || async {
        let mirror = Arc::new(MirrorServer::start(Default::default(), Duration::ZERO).await);
        network::known(&mirror, BROKER_ACCOUNT);
        let network = Network::start(mirror, &["0.0.3"], &[BROKER_ACCOUNT]).await;
        let taken = network.keep_in(&state).unwrap();
        let key = api::auth::login::key_for(api::auth::login::DEV_KEYS, BROKER_ACCOUNT).unwrap();
        let nodes = vec![api::broker::hapi::node::Node::parse(&network.hapi_nodes()).unwrap()];
        let fees = Fees { topic: network::TOPIC_FEE as u64, message: network::MESSAGE_FEE as u64 };
        let ledger = Ledger::new(
            "testnet".into(),
            nodes,
            BROKER_ACCOUNT.parse().unwrap(),
            key,
            fees,
            Duration::from_secs(5),
            network.mirror.url(),
        )
        .unwrap();
        (network, ledger, taken)
    };
    let (first, ledger, taken) = start().await;
    assert_eq!(taken, 0);
    ledger.create_topic(&ledger.next_id(), "kept").await.unwrap();
    let topic: shared::entity::EntityId = "0.0.5000001".parse().unwrap();
    ledger.submit_message(&ledger.next_id(), topic, b"hello", "").await.unwrap();
    let (messages, balance) = (first.mirror.messages(topic), first.balance(BROKER_ACCOUNT));
    drop(first);

    let (again, ledger, taken) = start().await;
    assert_eq!(taken, 2);
    let shown = again.mirror.messages(topic);
    assert_eq!(serde_json::to_value(&shown).unwrap(), serde_json::to_value(&messages).unwrap(), "the same messages");
    assert_eq!(again.balance(BROKER_ACCOUNT), balance, "the same balance");
    ledger.create_topic(&ledger.next_id(), "next").await.unwrap();
    let url = format!("{}/api/v1/topics/0.0.5000002", again.mirror.url());
    let (status, info) = tests::live::call(&tests::unpooled_client(), "GET", url, &[], None).await;
    assert_eq!((status, &info["memo"]), (200, &json!("next")), "numbering goes on");
    assert_eq!(std::fs::read_to_string(&state).unwrap().lines().count(), 3, "the new one kept too");
}
