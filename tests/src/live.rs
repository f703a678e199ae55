//! Calling the broker's live routes from a test: one JSON call, the
//! sign-in proof of a dev account's Hedera key, and a running api with
//! what its tests do to it ([`Broker`]).

use std::time::Duration;

use api::auth::login::{key_for, DEV_KEYS};
use api::auth::signature::SigningKey;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::process::{build, Api};
use crate::TempDir;

/// `method url` with `headers` and a JSON `body`: the status and the body
/// (as a JSON string when it is not JSON).
pub async fn call(
    client: &reqwest::Client,
    method: &str,
    url: String,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method.parse().unwrap(), url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The verify body answering `challenge` for a Hedera `account` with its
/// `key`: the raw signature of the message, base64, and the DER public key.
pub fn hedera_proof(challenge: &Value, account: &str, key: &SigningKey) -> Value {
    let message = challenge["message"].as_str().unwrap();
    json!({
        "challengeId": challenge["challengeId"],
        "accountId": account,
        "network": "testnet",
        "signature": base64::engine::general_purpose::STANDARD.encode(key.sign(message.as_bytes())),
        "signatureKind": "raw",
        "publicKey": key.public_key().to_der_hex(),
    })
}

/// Registers an agent (a rule-based model, capability 0) reachable at
/// `endpoint` by `protocol`, paid by the holder of `key`: its UAID.
pub async fn register(broker: &Broker, key: &str, name: &str, protocol: &str, endpoint: &str) -> String {
    let body = json!({
        "profile": {"version": "1.0", "type": 1, "display_name": name, "bio": format!("{name}, a test agent"),
            "aiAgent": {"type": 1, "model": "rule-based", "capabilities": [0]}},
        "endpoint": endpoint,
        "communicationProtocol": protocol,
    });
    let (status, answer) = broker.send("POST", "/api/v1/register", Some(key), Some(body)).await;
    assert_eq!(status, 200, "{answer}");
    answer["uaid"].as_str().unwrap().to_string()
}

/// Signs `account` in with its dev key at the api at `base`: its API key.
pub async fn sign_in(client: &reqwest::Client, base: &str, account: &str) -> String {
    let key = key_for(DEV_KEYS, account).unwrap();
    let url = |path: &str| format!("{}{path}", base.trim_end_matches('/'));
    let body = json!({"accountId": account, "network": "testnet"});
    let (_, challenge) = call(client, "POST", url("/api/v1/auth/ledger/challenge"), &[], Some(body)).await;
    let proof = hedera_proof(&challenge, account, &key);
    let (status, verified) = call(client, "POST", url("/api/v1/auth/ledger/verify"), &[], Some(proof)).await;
    assert_eq!(status, 200, "{verified}");
    verified["key"].as_str().unwrap().to_string()
}

/// A running api on a built site, with its own client and folder.
pub struct Broker {
    pub api: Api,
    pub client: reqwest::Client,
    pub dir: TempDir,
    /// What the api was started with, to start it again.
    pub site: std::path::PathBuf,
    pub data: std::path::PathBuf,
    pub flags: Vec<String>,
}

impl Broker {
    /// Builds the checked-in datasets into a new folder and starts the api
    /// on them with `flags`.
    pub fn start(label: &str, flags: &[&str]) -> Broker {
        let dir = TempDir::new(label);
        let (site, data) = (dir.path().join("site"), dir.path().join("data"));
        build(&site, &data, &crate::strs(&Broker::sources()));
        let api = Api::start_with(&site, &data, flags);
        let flags = flags.iter().map(|f| f.to_string()).collect();
        Broker { api, client: crate::unpooled_client(), dir, site, data, flags }
    }

    /// The generator's source flags for the checked-in datasets.
    pub fn sources() -> Vec<String> {
        let root = crate::workspace_root();
        let dataset = |name: &str| root.join("datasets").join(name).to_string_lossy().into_owned();
        vec!["--ledger-dir".into(), dataset("ledger"), "--broker-dir".into(), dataset("broker")]
    }

    /// `f` with a connection to the api's live store, opened beside the
    /// api (both engines take both; see `process::with_store`).
    pub fn with_store<T: Send>(&self, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
        crate::process::with_store(&self.data, f)
    }
    /// Ends the api as `kill -9` would and starts another on the same
    /// site, data and flags, with `env` (its log in `api.log`).
    pub fn restart(&mut self, env: &[(&str, &str)]) {
        self.api.kill();
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        let log = self.dir.path().join("api.log");
        self.api = Api::start_logged_with_env(&self.site, &self.data, &flags, &log, env);
    }

    /// Runs the generator on the api's site and data, and waits until the
    /// api serves the new build.
    pub async fn rebuild(&self, sources: &[&str]) {
        build(&self.site, &self.data, sources);
        let current = std::fs::read_link(self.site.join("current")).unwrap();
        let id = json!(current.file_name().unwrap().to_string_lossy());
        crate::wait::until(&format!("the api serving build {id}"), 200, Duration::from_millis(50), async || {
            self.send("GET", "/health", None, None).await.1["build"] == id
        })
        .await;
    }

    /// Waits until the journal writer has emptied the outbox.
    pub async fn journaled(&self) {
        crate::wait::until("the journal writer draining the outbox", 100, Duration::from_millis(50), async || {
            self.rows("outbox") == 0
        })
        .await;
    }

    pub async fn send(&self, method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = key.map(|k| ("x-api-key", k)).into_iter().collect();
        call(&self.client, method, self.api.url(path), &headers, body).await
    }

    pub async fn sign_in(&self, account: &str) -> String {
        sign_in(&self.client, &self.api.url(""), account).await
    }

    pub async fn balance(&self, key: &str) -> i64 {
        self.send("GET", "/api/v1/credits/balance", Some(key), None).await.1["balance"].as_i64().unwrap()
    }

    pub async fn total(&self, query: &str) -> u64 {
        let (status, body) = self.send("GET", &format!("/api/v1/search?{query}"), None, None).await;
        assert_eq!(status, 200, "{body}");
        body["total"].as_u64().unwrap()
    }

    pub async fn hybrid(&self, query: Value) -> (u16, Value) {
        self.send("POST", "/api/v1/search", None, Some(query)).await
    }

    pub fn rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        self.with_store(|s| s.query_row(&sql, [], |r| r.get(0))).unwrap()
    }
}

/// Clients asking for GET URLs without pause, each counting its answers
/// (200) and failures (anything else, or no answer), until [`Askers::stop`]:
/// what a swap or a failover must not fail.
pub struct Askers {
    asking: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<(u64, u64)>>,
}

impl Askers {
    /// One client per URL of `urls`, each with a connection of its own.
    pub fn start(urls: impl IntoIterator<Item = String>) -> Askers {
        let asking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let tasks = urls
            .into_iter()
            .map(|url| {
                let (asking, client) = (asking.clone(), crate::unpooled_client());
                tokio::spawn(async move {
                    let (mut answered, mut failed) = (0, 0);
                    while asking.load(std::sync::atomic::Ordering::Relaxed) {
                        match client.get(&url).send().await {
                            Ok(response) if response.status() == 200 => answered += 1,
                            _ => failed += 1,
                        }
                    }
                    (answered, failed)
                })
            })
            .collect();
        Askers { asking, tasks }
    }

    /// Stops asking: the answers and failures of all the clients.
    pub async fn stop(self) -> (u64, u64) {
        self.asking.store(false, std::sync::atomic::Ordering::Relaxed);
        let mut totals = (0, 0);
        for task in self.tasks {
            let (answered, failed) = task.await.expect("an asker ends");
            totals = (totals.0 + answered, totals.1 + failed);
        }
        totals
    }
}
