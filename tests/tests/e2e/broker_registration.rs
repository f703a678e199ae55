//! Registration against the real api binary on loopback: the three
//! outcomes with local additional registries that succeed, refuse, fail
//! for a while and stall; progress polling; billing, refunds and 402;
//! retries that change nothing; the live overlay (search, detail, resolve,
//! status) and the next build taking the changes over from the journal.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tests::live::Broker;
use tests::process::{build, Api};
use tests::{workspace_root, TempDir};
use warp::Filter;

/// Additional registries on one loopback server: `/ok` takes every
/// registration, `/refuse` answers 400, `/flaky` answers 503 to its first
/// call, `/stall` never answers in time, `/once` stalls its first call
/// only.
struct Registries {
    base: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn registries() -> Registries {
    let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let flaky_calls = Arc::new(Mutex::new(0));
    let once_calls = Arc::new(Mutex::new(0));
    let log = received.clone();
    let route = warp::post().and(warp::path::param::<String>()).and(warp::body::json()).then(move |kind: String, body: Value| {
        let (log, flaky_calls, once_calls) = (log.clone(), flaky_calls.clone(), once_calls.clone());
        async move {
            log.lock().unwrap().push((kind.clone(), body.clone()));
            let (status, reply) = match kind.as_str() {
                "ok" => (200, json!({"agentId": "remote-7", "agentUri": format!("https://ok.example/{}", body["uaid"].as_str().unwrap())})),
                "refuse" => (400, json!({"error": "profile rejected by this registry"})),
                "flaky" => {
                    let mut calls = flaky_calls.lock().unwrap();
                    *calls += 1;
                    if *calls == 1 { (503, json!({"error": "busy"})) } else { (201, json!({"agentId": "flaky-1"})) }
                }
                "once" if std::mem::replace(&mut *once_calls.lock().unwrap(), 1) == 1 => {
                    (200, json!({"agentId": "once-1"}))
                }
                _ => {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    (200, json!({}))
                }
            };
            warp::reply::with_status(warp::reply::json(&reply), warp::http::StatusCode::from_u16(status).unwrap())
        }
    });
    let (addr, stop) = tests::serve_on_loopback(route).await;
    Registries { base: format!("http://{addr}"), received, _stop: stop }
}

/// `encodeURIComponent`, as the reference client encodes path parameters.
fn encode(uaid: &str) -> String {
    broker_site::render::segment(uaid)
}

fn profile(name: &str) -> Value {
    json!({
        "version": "1.0", "type": 1, "display_name": name, "bio": format!("{name} reads the tides of the harbour"),
        "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": [0, 7]},
    })
}

fn request(name: &str, additional: &[&str]) -> Value {
    json!({
        "profile": profile(name),
        "endpoint": format!("https://{}.example/a2a", name.to_lowercase().replace(' ', "-")),
        "communicationProtocol": "a2a",
        "additionalRegistries": additional,
        "metadata": {"category": "maritime"},
    })
}

/// A built site, the local registries and the api serving them; every
/// registration costs 300 credits (the dev accounts have 1,000).
struct Setup {
    registries: Registries,
    broker: Broker,
    sources: Vec<String>,
}

/// `extra` flags go to both the generator and the api (the embedding
/// provider's, which both take).
async fn setup(label: &str, extra: &[&str]) -> Setup {
    let registries = registries().await;
    let dir = TempDir::new(label);
    let (site, data) = (dir.path().join("site"), dir.path().join("data"));
    let sources: Vec<String> = Broker::sources().into_iter().chain(extra.iter().map(|a| a.to_string())).collect();
    build(&site, &data, &tests::strs(&sources));
    let endpoints = dir.path().join("registries.json");
    let at = |path: &str| format!("{}/{path}", registries.base);
    std::fs::write(
        &endpoints,
        json!({"nanda:public": at("ok"), "erc-8004:base-mainnet": at("refuse"),
               "hashgraph-online:testnet": at("flaky"), "erc-8004:ethereum-sepolia": at("stall"),
               "erc-8004:ethereum-mainnet": at("once")})
        .to_string(),
    )
    .unwrap();
    let pricing = dir.path().join("pricing.json");
    std::fs::write(
        &pricing,
        json!({"registration": {"base": 300}, "update": {"base": 5}, "creditsPerHbar": 100, "centsPerHbar": 17})
            .to_string(),
    )
    .unwrap();
    let mut flags = vec![
        "--registry-endpoints",
        endpoints.to_str().unwrap(),
        "--pricing",
        pricing.to_str().unwrap(),
        "--registry-timeout-ms",
        "1000",
        "--registry-tries",
        "2",
        "--registry-backoff-ms",
        "50",
        "--registration-wait-ms",
        "1500",
    ];
    flags.extend(extra);
    let api = Api::start_with(&site, &data, &flags);
    let flags = flags.iter().map(|f| f.to_string()).collect();
    let broker = Broker { api, client: tests::unpooled_client(), dir, site: site.clone(), data: data.clone(), flags };
    Setup { registries, broker, sources }
}

/// Registers `name` for the account of `key`; the answer's UAID.
async fn registered(broker: &Broker, key: &str, name: &str) -> String {
    let (status, created) = broker.send("POST", "/api/v1/register", Some(key), Some(request(name, &[]))).await;
    assert_eq!((status, &created["status"]), (200, &json!("created")), "{created}");
    created["uaid"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quote_needs_no_key_and_a_refused_registration_stores_nothing() {
    let Setup { registries: _registries, broker, .. } = setup("registration-refusals", &[]).await;
    let owner = broker.sign_in("0.0.1001").await;
    let (status, quote) =
        broker.send("POST", "/api/v1/register/quote", None, Some(request("Tide Reader", &["nanda:public"]))).await;
    assert_eq!((status, &quote["requiredCredits"], &quote["accountId"]), (200, &json!(310), &Value::Null), "{quote}");
    let (_, quote) =
        broker.send("POST", "/api/v1/register/quote", Some(&owner), Some(request("Tide Reader", &[]))).await;
    assert_eq!((&quote["availableCredits"], &quote["shortfallCredits"]), (&json!(1000), &json!(0)), "{quote}");

    let (status, _) = broker.send("POST", "/api/v1/register", None, Some(request("Tide Reader", &[]))).await;
    assert_eq!(status, 401);
    let mut personal = request("Tide Reader", &[]);
    personal["profile"]["type"] = json!(0);
    for (body, field) in [
        (personal, "profile.type"),
        (json!({"endpoint": "https://x.example"}), "profile"),
        (request("Tide Reader", &["erc-8004:mars"]), "additionalRegistries[0]"),
    ] {
        let (status, refusal) = broker.send("POST", "/api/v1/register", Some(&owner), Some(body)).await;
        assert_eq!((status, refusal["parameter"].as_str()), (400, Some(field)), "{refusal}");
    }
    assert_eq!((broker.rows("registrations"), broker.rows("outbox") + broker.rows("registration_attempts")), (0, 0));
    assert_eq!(broker.balance(&owner).await, 1000);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_is_billed_once_and_visible_at_once() {
    let Setup { registries: _registries, broker, .. } = setup("registration-created", &[]).await;
    let before = broker.total("").await;
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let (status, created) =
        broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Tide Reader", &[]))).await;
    assert_eq!((status, &created["status"], &created["success"]), (200, &json!("created"), &json!(true)), "{created}");
    assert_eq!(created["credits"], json!({"base": 300, "additional": 0, "total": 300}));
    assert!(created["attemptId"].is_string());
    let uaid = created["uaid"].as_str().unwrap().to_string();
    assert_eq!(broker.balance(&owner).await, 700);
    assert_eq!(broker.total("").await, before + 1);
    let (status, detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&uaid)), None, None).await;
    assert_eq!((status, &detail["agent"]["uaid"]), (200, &json!(uaid)), "{detail}");
    let (status, resolved) = broker.send("GET", &format!("/api/v1/resolve/{}", encode(&uaid)), None, None).await;
    assert_eq!((status, &resolved["agent"]["name"]), (200, &json!("Tide Reader")));
    let (_, found) = broker.send("GET", "/api/v1/search?q=tides%20harbour&limit=5", None, None).await;
    assert_eq!(found["hits"][0]["uaid"], json!(uaid), "{found}");
    let (_, sorted) = broker.send("GET", "/api/v1/search?sortBy=most-recent&limit=1", None, None).await;
    assert_eq!(sorted["hits"][0]["uaid"], json!(uaid), "the newest agent first");
    let (status, registered) =
        broker.send("GET", &format!("/api/v1/register/status/{}", encode(&uaid)), None, None).await;
    assert_eq!((status, &registered["registered"]), (200, &json!(true)));

    // A retry is a duplicate, not billed; another account cannot take it.
    let (status, again) =
        broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Tide Reader", &[]))).await;
    assert_eq!((status, &again["status"], &again["uaid"]), (200, &json!("duplicate"), &json!(uaid)), "{again}");
    assert_eq!(broker.balance(&owner).await, 700);
    let (status, _) = broker.send("POST", "/api/v1/register", Some(&other), Some(request("Tide Reader", &[]))).await;
    assert_eq!(status, 409);
    assert_eq!(broker.balance(&other).await, 1000);
}

/// `method path` with `headers` and a JSON `body`.
async fn keyed(broker: &Broker, method: &str, path: String, headers: [(&str, String); 2], body: Value) -> (u16, Value) {
    let headers = headers.each_ref().map(|(name, value)| (*name, value.as_str()));
    tests::live::call(&broker.client, method, broker.api.url(&path), &headers, Some(body)).await
}

/// An idempotency key names one request: its retry is answered as the
/// first was, billed once; the key with another registration or update is
/// 409 and a key past 255 bytes 400, nothing stored or billed.
#[tokio::test(flavor = "multi_thread")]
async fn an_idempotency_key_names_one_registration() {
    let Setup { registries: _registries, broker, .. } = setup("registration-keys", &[]).await;
    let owner = broker.sign_in("0.0.1001").await;
    let with = |key: &str| [("x-api-key", owner.clone()), ("idempotency-key", key.to_string())];
    let register = || "/api/v1/register".to_string();
    let (status, created) = keyed(&broker, "POST", register(), with("reg-1"), request("Key Keeper", &[])).await;
    assert_eq!((status, &created["status"]), (200, &json!("created")), "{created}");
    let (status, again) = keyed(&broker, "POST", register(), with("reg-1"), request("Key Keeper", &[])).await;
    assert_eq!((status, &again["uaid"]), (200, &created["uaid"]), "{again}");
    let (status, reused) = keyed(&broker, "POST", register(), with("reg-1"), request("Other Keeper", &[])).await;
    assert_eq!((status, &reused["code"]), (409, &json!("idempotency_key_reused")), "{reused}");
    let (status, long) = keyed(&broker, "POST", register(), with(&"k".repeat(256)), request("Long Keeper", &[])).await;
    assert_eq!((status, &long["code"]), (400, &json!("invalid_idempotency_key")), "{long}");
    let path = format!("/api/v1/register/{}", encode(created["uaid"].as_str().unwrap()));
    let mut change = request("Key Keeper", &[]);
    change["profile"]["bio"] = json!("Keeps keys and tides");
    let (status, reused) = keyed(&broker, "PUT", path.clone(), with("reg-1"), change.clone()).await;
    assert_eq!((status, &reused["code"]), (409, &json!("idempotency_key_reused")), "an update is another request");
    let (status, updated) = keyed(&broker, "PUT", path.clone(), with("upd-1"), change.clone()).await;
    assert_eq!((status, &updated["status"]), (200, &json!("updated")), "{updated}");
    let (status, again) = keyed(&broker, "PUT", path, with("upd-1"), change).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(broker.rows("registrations"), 1, "one agent");
    assert_eq!(broker.balance(&owner).await, 1000 - 300 - 5, "billed once each");
}

/// 200 with registries that take it (the flaky one retried); 207 with one
/// that refuses, its credits refunded; 402 once the balance is short,
/// storing nothing.
#[tokio::test(flavor = "multi_thread")]
async fn additional_registries_are_billed_refunded_and_a_shortfall_is_402() {
    let Setup { registries, broker, .. } = setup("registration-additional", &[]).await;
    let other = broker.sign_in("0.0.1002").await;
    let (status, both) = broker
        .send(
            "POST",
            "/api/v1/register",
            Some(&other),
            Some(request("Dock Hand", &["nanda:public", "hashgraph-online:testnet"])),
        )
        .await;
    assert_eq!((status, &both["status"]), (200, &json!("created")), "{both}");
    let results = both["additionalRegistries"].as_array().unwrap();
    assert!(results.iter().all(|r| r["status"] == json!("created")), "{both}");
    assert_eq!(results[0]["agentId"], json!("remote-7"));
    let delivered = registries.received.lock().unwrap().clone();
    assert!(delivered.iter().any(|(kind, body)| kind == "ok"
        && body["uaid"] == both["uaid"]
        && body["agent"]["name"] == json!("Dock Hand")));
    assert_eq!(delivered.iter().filter(|(kind, _)| kind == "flaky").count(), 2, "one 503, then success");
    let (status, partial) = broker
        .send("POST", "/api/v1/register", Some(&other), Some(request("Net Mender", &["erc-8004:base-mainnet"])))
        .await;
    assert_eq!((status, &partial["status"], &partial["success"]), (207, &json!("partial"), &json!(false)), "{partial}");
    assert_eq!(partial["errors"][0]["registryKey"], json!("erc-8004:base-mainnet"));
    assert!(partial["errors"][0]["error"].as_str().unwrap().contains("400"));
    // 1000 - (300 + 10 + 2) - (300 + 35, the 35 refunded) = 388.
    assert_eq!(broker.balance(&other).await, 388);
    registered(&broker, &other, "Rope Coiler").await;
    // 88 left, 300 needed; nothing stored.
    let stored = broker.rows("registrations");
    let (status, short) = broker.send("POST", "/api/v1/register", Some(&other), Some(request("Sail Maker", &[]))).await;
    assert_eq!(
        (status, &short["shortfallCredits"], &short["code"]),
        (402, &json!(212), &json!("insufficient_credits")),
        "{short}"
    );
    assert_eq!((broker.rows("registrations"), broker.balance(&other).await), (stored, 88));
}

/// 202 with a stalling registry; the attempt is polled (by its owner only)
/// until it ends, and the stalled registry's credits are refunded.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalling_registry_gets_202_and_an_attempt_polled_to_its_end() {
    let Setup { registries: _registries, broker, .. } = setup("registration-pending", &[]).await;
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let (status, pending) = broker
        .send("POST", "/api/v1/register", Some(&owner), Some(request("Buoy Keeper", &["erc-8004:ethereum-sepolia"])))
        .await;
    assert_eq!((status, &pending["status"]), (202, &json!("pending")), "{pending}");
    assert_eq!(pending["credits"]["total"], json!(305));
    let attempt = pending["attemptId"].as_str().unwrap().to_string();
    let progress = format!("/api/v1/register/progress/{attempt}");
    assert_eq!(broker.send("GET", &progress, None, None).await.0, 401);
    assert_eq!(broker.send("GET", &progress, Some(&other), None).await.0, 403);
    assert_eq!(broker.send("GET", "/api/v1/register/progress/att_nothing", Some(&owner), None).await.0, 404);
    let mut last = Value::Null;
    tests::wait::until("the registration settled", 100, Duration::from_millis(100), async || {
        let (status, body) = broker.send("GET", &progress, Some(&owner), None).await;
        assert_eq!(status, 200, "{body}");
        last = body["progress"].clone();
        last["status"] != json!("pending")
    })
    .await;
    assert_eq!(last["status"], json!("partial"), "{last}");
    let entry = &last["additionalRegistries"]["erc-8004:ethereum-sepolia"];
    assert_eq!(entry["status"], json!("failed"), "{last}");
    assert!(entry["error"].as_str().unwrap().contains("no answer within 1000 ms"), "{last}");
    assert!(last["completedAt"].is_string());
    assert_eq!(broker.balance(&owner).await, 1000 - 300, "the stalled registry's 5 credits refunded");
}

/// Updates billed once (the same body again changes nothing), by the
/// owner only; deletes by the owner only, gone at once; then the next
/// build takes the journal over: the agents come from its files, the
/// overlay steps aside, the totals stay.
#[tokio::test(flavor = "multi_thread")]
async fn updates_and_deletes_are_the_owners_and_the_next_build_takes_them_over() {
    let Setup { registries: _registries, broker, sources } = setup("registration-changes", &[]).await;
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let before = broker.total("").await;
    let owner = broker.sign_in("0.0.1001").await;
    let other = broker.sign_in("0.0.1002").await;
    let uaid = registered(&broker, &owner, "Tide Reader").await;
    let dock = registered(&broker, &other, "Dock Hand").await;

    let path = format!("/api/v1/register/{}", encode(&uaid));
    let mut change = request("Tide Reader", &[]);
    change["profile"]["bio"] = json!("Reads tides and currents");
    let (status, updated) = broker.send("PUT", &path, Some(&owner), Some(change.clone())).await;
    assert_eq!((status, &updated["status"], &updated["uaid"]), (200, &json!("updated"), &json!(uaid)), "{updated}");
    assert_eq!(broker.balance(&owner).await, 695);
    let (status, _) = broker.send("PUT", &path, Some(&owner), Some(change.clone())).await;
    assert_eq!((status, broker.balance(&owner).await), (200, 695));
    let (_, detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&uaid)), None, None).await;
    assert_eq!(detail["agent"]["description"], json!("Reads tides and currents"));
    assert_eq!(broker.send("PUT", &path, Some(&other), Some(change.clone())).await.0, 403);
    assert_eq!(broker.send("PUT", &path, Some(&owner), Some(json!({"metadata": {}}))).await.0, 400);
    assert_eq!(
        broker.send("PUT", "/api/v1/register/uaid%3Aaid%3Anobody%3Buid%3D0", Some(&owner), Some(change)).await.0,
        404
    );
    let (status, claim) = broker.send("PUT", &path, Some(&owner), Some(json!({"registered": false}))).await;
    assert_eq!((status, &claim["ok"], &claim["registered"]), (200, &json!(true), &json!(false)), "{claim}");

    let dock_path = format!("/api/v1/register/{}", encode(&dock));
    assert_eq!(broker.send("DELETE", &dock_path, Some(&owner), None).await.0, 403);
    assert_eq!(broker.send("DELETE", &dock_path, None, None).await.0, 401);
    let (status, deleted) = broker.send("DELETE", &dock_path, Some(&other), None).await;
    assert_eq!((status, &deleted["success"]), (200, &json!(true)), "{deleted}");
    assert_eq!(broker.send("GET", &format!("/api/v1/agents/{}", encode(&dock)), None, None).await.0, 404);
    assert_eq!(broker.total("").await, before + 1);

    broker.journaled().await;
    broker.rebuild(&sources).await;
    assert_eq!(broker.total("").await, before + 1);
    let response =
        broker.client.get(broker.api.url(&format!("/api/v1/agents/{}", encode(&uaid)))).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_ne!(response.headers()["cache-control"], "no-cache", "served from the build's file");
    let detail: Value = response.json().await.unwrap();
    assert_eq!(detail["agent"]["description"], json!("Reads tides and currents"));
    assert_eq!(detail["agent"]["verificationStatus"], json!("indexed"));
    assert_eq!(broker.send("GET", &format!("/api/v1/agents/{}", encode(&dock)), None, None).await.0, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_registers_updates_and_polls() {
    let setup = setup("registration-client", &[]).await;
    let key = setup.broker.sign_in("0.0.1003").await;
    let base = setup.broker.api.base.clone();
    let args = [base.as_str(), key.as_str(), "erc-8004:ethereum-sepolia", "erc-8004:base-mainnet"];
    let results = tests::reference_client("register.mjs", &args).await;
    let value = |call: &str| results[call]["value"].clone();
    assert_eq!(value("registered")["status"], json!("created"));
    assert_eq!(value("pending")["progress"]["status"], json!("partial"));
    assert_eq!(value("partial")["errors"][0]["registryKey"], json!("erc-8004:base-mainnet"));
    assert_eq!(value("updated")["uaid"], value("registered")["uaid"]);
    assert_eq!(value("ownership")["registered"], json!(true));
    // 1,000 - 3 × 300 (the failed registries refunded) - 5 for the update.
    assert_eq!(setup.broker.balance(&key).await, 95);
}

/// Hybrid search and similar agents see the overlay: a live agent is
/// embedded once (with the query that first needs it, again after an
/// update), ranked with the build's agents, and gone once deleted.
#[tokio::test(flavor = "multi_thread")]
async fn hybrid_search_and_similar_agents_see_live_agents() {
    use std::sync::atomic::Ordering;
    let server = tests::embeddings::EmbeddingServer::start().await;
    let base = server.base();
    let Setup { broker, .. } =
        setup("registration-hybrid", &["--embeddings-url", &base, "--embeddings-model", "bag-64"]).await;
    let texts = || server.counters.texts.load(Ordering::SeqCst);
    let (status, before) = broker.hybrid(json!({"query": "tides of the harbour", "limit": 3})).await;
    assert_eq!(status, 200, "{before}");
    let total = before["total"].as_u64().unwrap();

    let owner = broker.sign_in("0.0.1001").await;
    let (_, created) = broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Tide Reader", &[]))).await;
    let uaid = created["uaid"].as_str().unwrap().to_string();
    let (_, detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&uaid)), None, None).await;
    let agent: broker_model::Agent = serde_json::from_value(detail["agent"].clone()).unwrap();

    // The agent's own text finds it first; the query and the agent are
    // embedded in one call, and the agent only once.
    let own = embeddings::text(&agent);
    let counted = texts();
    let (status, found) = broker.hybrid(json!({"query": own, "limit": 3})).await;
    assert_eq!((status, &found["hits"][0]["agent"]["uaid"]), (200, &json!(uaid)), "{found}");
    assert_eq!(found["total"], json!(total + 1));
    assert_eq!(texts(), counted + 2);
    let (_, again) = broker.hybrid(json!({"query": own, "limit": 3})).await;
    assert_eq!((&again["hits"][0]["agent"]["uaid"], texts()), (&json!(uaid), counted + 3));
    // Filters apply to live agents as to built ones.
    let (_, other) = broker.hybrid(json!({"query": own, "filter": {"registry": "erc-8004"}, "limit": 100})).await;
    assert!(other["hits"].as_array().unwrap().iter().all(|h| h["agent"]["uaid"] != json!(uaid)), "{other}");

    // An update is embedded again; a deletion leaves the results.
    let path = format!("/api/v1/register/{}", encode(&uaid));
    let mut change = request("Tide Reader", &[]);
    change["profile"]["bio"] = json!("Charts lighthouse beacons along the coast");
    assert_eq!(broker.send("PUT", &path, Some(&owner), Some(change)).await.0, 200);
    let counted = texts();
    let (_, moved) = broker.hybrid(json!({"query": "lighthouse beacons coast", "limit": 1})).await;
    assert_eq!((&moved["hits"][0]["agent"]["uaid"], texts()), (&json!(uaid), counted + 2), "{moved}");

    // Similar agents of a live agent: ranked over the build and the
    // overlay as a build ranks them. The twin has the capabilities of the
    // build agent with the most, so it ranks in that agent's list.
    let built = generator::broker::load(&workspace_root().join("datasets/broker")).unwrap().agents;
    let most = built.iter().max_by_key(|a| (a.capabilities.len(), &a.id)).unwrap();
    let mut twin = request("Tide Twin", &[]);
    twin["profile"]["aiAgent"]["capabilities"] = json!(most.capabilities);
    let (_, twin) = broker.send("POST", "/api/v1/register", Some(&owner), Some(twin)).await;
    let twin = twin["uaid"].as_str().unwrap().to_string();
    let (status, similar) = broker.send("GET", &format!("/api/v1/agents/{}/similar", encode(&uaid)), None, None).await;
    assert_eq!(status, 200, "{similar}");
    let (_, twin_detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&twin)), None, None).await;
    let (_, detail) = broker.send("GET", &format!("/api/v1/agents/{}", encode(&uaid)), None, None).await;
    let agent: broker_model::Agent = serde_json::from_value(detail["agent"].clone()).unwrap();
    let twin_agent: broker_model::Agent = serde_json::from_value(twin_detail["agent"].clone()).unwrap();
    let ranked = |of: &broker_model::Agent| -> serde_json::Value {
        let made = broker_site::render::similar(of, built.iter().chain([&agent, &twin_agent]));
        serde_json::from_slice(&made.body).unwrap()
    };
    assert_eq!(similar, ranked(&agent));
    assert!(similar["total"].as_u64().unwrap() > 0);
    // A build agent's list ranks the live agents with the build's.
    let (status, theirs) =
        broker.send("GET", &format!("/api/v1/agents/{}/similar", encode(&most.uaid)), None, None).await;
    assert_eq!((status, &theirs), (200, &ranked(most)));
    assert!(theirs["hits"].as_array().unwrap().iter().any(|h| h["uaid"] == json!(twin)), "{theirs}");

    assert_eq!(broker.send("DELETE", &path, Some(&owner), None).await.0, 200);
    let (_, gone) = broker.hybrid(json!({"query": "lighthouse beacons coast", "limit": 100})).await;
    assert_eq!(gone["total"], json!(total + 1), "the twin stays, the deleted agent leaves");
    assert!(gone["hits"].as_array().unwrap().iter().all(|h| h["agent"]["uaid"] != json!(uaid)));
}

/// Every `seq` in the journal with the UAID its event names.
fn journal(data: &std::path::Path) -> Vec<(u64, String)> {
    use broker_model::journal::{read, Event};
    let records = read(&data.join("journal")).unwrap();
    let uaid = |event: &Event| match event {
        Event::Register { agent } | Event::Update { agent } => agent.uaid.to_string(),
        Event::Delete { uaid } => uaid.clone(),
        other => panic!("unexpected event {other:?}"),
    };
    records.iter().map(|(_, record)| (record.seq, uaid(&record.event))).collect()
}

/// The api dies (as `kill -9`) between appending a registration to the
/// journal and clearing it from the outbox: the next start appends
/// nothing twice, later changes follow, and a build takes each once.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_reaches_the_journal_once_when_the_api_dies_between_its_writes() {
    let Setup { mut broker, sources, .. } = setup("registration-journal-kill", &[]).await;
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let before = broker.total("").await;
    broker.restart(&[(tests::process::FAULT, "journal-appended")]);
    let owner = broker.sign_in("0.0.1001").await;
    // Stored, then journaled; the api ends before its answer may leave.
    let _ = broker
        .client
        .post(broker.api.url("/api/v1/register"))
        .header("x-api-key", &owner)
        .json(&request("Tide Reader", &[]))
        .send()
        .await;
    assert!(broker.api.exit_within(Duration::from_secs(10)).is_some(), "the fault point ended the api");
    let appended = journal(&broker.data);
    assert_eq!((appended.len(), broker.rows("outbox")), (1, 1), "appended, never cleared: {appended:?}");

    broker.restart(&[]);
    broker.journaled().await;
    assert_eq!(journal(&broker.data), appended, "nothing appended twice");
    let (status, again) =
        broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Tide Reader", &[]))).await;
    assert_eq!((status, &again["status"]), (200, &json!("duplicate")), "the change survived: {again}");
    assert_eq!(again["uaid"], json!(appended[0].1));
    let (status, _) = broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Dock Hand", &[]))).await;
    assert_eq!(status, 200);
    broker.journaled().await;
    let journal = journal(&broker.data);
    assert_eq!(journal.len(), 2, "{journal:?}");
    assert!(journal[0].0 < journal[1].0 && journal[0] == appended[0], "{journal:?}");

    broker.rebuild(&sources).await;
    assert_eq!(broker.total("").await, before + 2);
    let response =
        broker.client.get(broker.api.url(&format!("/api/v1/agents/{}", encode(&appended[0].1)))).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_ne!(response.headers()["cache-control"], "no-cache", "served from the build's file");
}

/// A build that is a layer over changed agents keeps its base's search
/// index: the api searches it with the live overlay, which holds every
/// change after the index's journal point, from the store, across
/// restarts; the agents' own files are the layer's; a whole build takes
/// the changes over.
#[tokio::test(flavor = "multi_thread")]
async fn over_a_layer_of_changed_agents_the_overlay_still_holds_them() {
    let Setup { mut broker, sources, .. } = setup("registration-layer", &[]).await;
    let whole: Vec<&str> = sources.iter().map(String::as_str).collect();
    let mut layered = whole.clone();
    layered.extend(["--layer-min-routes", "0"]);
    let before = broker.total("").await;
    let owner = broker.sign_in("0.0.1001").await;
    let (status, created) =
        broker.send("POST", "/api/v1/register", Some(&owner), Some(request("Tide Reader", &[]))).await;
    assert_eq!(status, 200, "{created}");
    let uaid = created["uaid"].as_str().unwrap().to_string();
    let detail_path = format!("/api/v1/agents/{}", encode(&uaid));
    broker.journaled().await;
    broker.rebuild(&layered).await;
    let live = shared::manifest::Manifest::load(&broker.site.join("current")).unwrap();
    assert!(live.base.is_some(), "a layer over the first build");
    assert!(live.routes.iter().any(|e| e.route() == detail_path), "the layer holds the new agent's file");
    assert_eq!(broker.total("").await, before + 1);
    assert_eq!(broker.total("q=tide").await, 1);
    assert_eq!(broker.send("GET", &detail_path, None, None).await.0, 200);

    // Restarted, the api loads the overlay from its store after the
    // search index's journal point, not the layer's.
    broker.restart(&[]);
    tests::wait::until("the restarted api serving the live build", 200, Duration::from_millis(50), async || {
        broker.send("GET", "/health", None, None).await.1["build"] == json!(live.build)
    })
    .await;
    assert_eq!(broker.total("").await, before + 1);
    assert_eq!(broker.total("q=tide").await, 1);

    // Deleted: the next layer removes its files, search no longer finds it.
    let path = format!("/api/v1/register/{}", encode(&uaid));
    assert_eq!(broker.send("DELETE", &path, Some(&owner), None).await.0, 200);
    broker.journaled().await;
    broker.rebuild(&layered).await;
    let live = shared::manifest::Manifest::load(&broker.site.join("current")).unwrap();
    assert!(live.base.is_some() && !live.routes.iter().any(|e| e.route() == detail_path));
    assert_eq!((broker.total("").await, broker.total("q=tide").await), (before, 0));
    assert_eq!(broker.send("GET", &detail_path, None, None).await.0, 404);

    // A whole build holds the changes itself.
    broker.rebuild(&whole).await;
    let live = shared::manifest::Manifest::load(&broker.site.join("current")).unwrap();
    assert!(live.base.is_none());
    assert_eq!((broker.total("").await, broker.total("q=tide").await), (before, 0));
}

/// The api dies while a delivery to an additional registry is in flight:
/// the next start delivers it again, the attempt completes, and nothing
/// is billed twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_cut_short_by_the_api_dying_is_made_at_the_next_start() {
    let Setup { registries, mut broker, .. } = setup("registration-registrar-kill", &[]).await;
    let owner = broker.sign_in("0.0.1001").await;
    let body = request("Tide Reader", &["erc-8004:ethereum-mainnet"]);
    let call = broker.client.post(broker.api.url("/api/v1/register")).header("x-api-key", &owner).json(&body).send();
    let pending = tokio::spawn(call);
    let calls = || registries.received.lock().unwrap().iter().filter(|(kind, _)| kind == "once").count();
    tests::wait::until("the registry called", 500, Duration::from_millis(5), async || calls() == 1).await;
    broker.restart(&[]);
    assert!(pending.await.unwrap().is_err(), "the answer was cut off with the api");
    let charged = broker.balance(&owner).await;
    assert!(charged < 1000, "billed when stored");

    // The retry finds the registration (no second charge) and its attempt.
    let (status, again) = broker.send("POST", "/api/v1/register", Some(&owner), Some(body)).await;
    assert_eq!((status, &again["status"]), (200, &json!("duplicate")), "{again}");
    let progress = format!("/api/v1/register/progress/{}", again["attemptId"].as_str().unwrap());
    let mut last = Value::Null;
    tests::wait::until("the retried registration settled", 100, Duration::from_millis(50), async || {
        last = broker.send("GET", &progress, Some(&owner), None).await.1["progress"].clone();
        last["status"] != json!("pending")
    })
    .await;
    assert_eq!(last["status"], json!("completed"), "{last}");
    assert_eq!(last["additionalRegistries"]["erc-8004:ethereum-mainnet"]["agentId"], json!("once-1"), "{last}");
    assert_eq!(calls(), 2, "called again after the restart, once");
    assert_eq!(broker.balance(&owner).await, charged, "nothing billed twice, nothing refunded");
}
