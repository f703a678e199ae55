//! The broker's live side against the real api binary on loopback: ledger
//! sign-in with real signatures (ed25519, secp256k1, EVM), the API keys it
//! issues, the auth rules of spec section 5, and credits.

use api::auth::login::{key_for, DEV_KEYS};
use api::auth::signature::{evm_address, evm_sign};
use base64::Engine as _;
use serde_json::{json, Value};
use shared::http::hex;
use tests::live::hedera_proof;
use tests::mirror::MirrorServer;
use tests::process::Api;
use tests::TempDir;

struct Live {
    api: Api,
    client: reqwest::Client,
    dir: TempDir,
}

impl Live {
    fn start(label: &str, extra: &[&str]) -> Live {
        let dir = TempDir::new(label);
        let api = Api::start_with(&dir.path().join("site"), &dir.path().join("data"), extra);
        Live { api, client: tests::unpooled_client(), dir }
    }

    fn with_store<T: Send>(&self, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
        tests::process::with_store(&self.dir.path().join("data"), f)
    }

    /// Rows in a table of the live store.
    fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        self.with_store(|s| s.query_row(&sql, [], |r| r.get(0))).unwrap()
    }

    /// Everything the live store holds, as bytes to search: the SQLite
    /// file and its log, or every row of every table as PostgreSQL spells
    /// it.
    fn stored_bytes(&self) -> Vec<u8> {
        match tests::process::store_location(&self.dir.path().join("data")) {
            live_store::Location::File(path) => {
                let mut bytes = std::fs::read(&path).unwrap_or_default();
                bytes.extend(std::fs::read(path.with_extension("sqlite-wal")).unwrap_or_default());
                bytes
            }
            live_store::Location::Postgres(_) => self.with_store(|s| {
                let tables = "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'";
                let mut bytes = Vec::new();
                for table in s.query_map(tables, [], |r| r.get::<String>(0)).unwrap() {
                    let rows = format!("SELECT CAST(t AS text) FROM \"{table}\" t");
                    for row in s.query_map(&rows, [], |r| r.get::<String>(0)).unwrap() {
                        bytes.extend(row.into_bytes());
                    }
                }
                bytes
            }),
        }
    }

    async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> (u16, Value) {
        tests::live::call(&self.client, method, self.api.url(path), headers, body).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("POST", path, &[], Some(body)).await
    }

    async fn challenge(&self, account: &str, network: &str) -> Value {
        let (status, body) =
            self.post("/api/v1/auth/ledger/challenge", json!({"accountId": account, "network": network})).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Signs in as a dev account with its Hedera key; the verify answer.
    async fn sign_in(&self, account: &str) -> Value {
        let key = key_for(DEV_KEYS, account).unwrap();
        let challenge = self.challenge(account, "testnet").await;
        let (status, body) = self.post("/api/v1/auth/ledger/verify", hedera_proof(&challenge, account, &key)).await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

fn evm_key() -> (k256::ecdsa::SigningKey, String) {
    let key = k256::ecdsa::SigningKey::from_bytes(&[7u8; 32].into()).unwrap();
    let address = format!("0x{}", hex(&evm_address(key.verifying_key())));
    (key, address)
}

/// The verify answer holds what the reference client's schema requires.
fn check_verify_shape(body: &Value, account: &str, network: &str) {
    assert_eq!(body["accountId"], json!(account), "{body}");
    assert_eq!(body["network"], json!(network), "{body}");
    assert!(body["key"].as_str().is_some_and(|k| k.len() > 20), "{body}");
    let key = &body["apiKey"];
    for field in ["id", "prefix", "lastFour", "createdAt", "ledgerAccountId", "ledgerNetwork"] {
        assert!(key[field].is_string(), "apiKey.{field}: {body}");
    }
    assert_eq!(key["ownerType"], json!("ledger"));
    // Optional means omitted, never null.
    assert!(key.as_object().unwrap().values().all(|v| !v.is_null()), "{body}");
    assert!(body["key"].as_str().unwrap().starts_with(key["prefix"].as_str().unwrap()));
    assert!(body["key"].as_str().unwrap().ends_with(key["lastFour"].as_str().unwrap()));
}

#[tokio::test(flavor = "multi_thread")]
async fn each_kind_of_ledger_key_signs_in_and_its_api_key_works() {
    let live = Live::start("live-sign-in", &[]);
    for account in ["0.0.1001", "0.0.1004"] {
        let body = live.sign_in(account).await;
        check_verify_shape(&body, account, "testnet");
        assert_eq!(body["networkCanonical"], json!("hedera:testnet"));
        let key = body["key"].as_str().unwrap();
        // In any of the three headers; the dev accounts' first sign-in grant.
        for header in ["x-api-key", "x-ledger-api-key", "authorization"] {
            let value = if header == "authorization" { format!("Bearer {key}") } else { key.to_string() };
            let (status, balance) = live.send("GET", "/api/v1/credits/balance", &[(header, &value)], None).await;
            assert_eq!((status, &balance["accountId"], &balance["balance"]), (200, &json!(account), &json!(1000)));
        }
    }
    // A second sign-in grants nothing more.
    let again = live.sign_in("0.0.1001").await;
    let key = again["key"].as_str().unwrap();
    let (_, balance) = live.send("GET", "/api/v1/credits/balance", &[("x-api-key", key)], None).await;
    assert_eq!(balance["balance"], json!(1000));

    // EVM: EIP-191 personal_sign, the address recovered.
    let (evm, address) = evm_key();
    let challenge = live.challenge(&address.to_uppercase().replace("0X", "0x"), "eip155:84532").await;
    let signature = evm_sign(&evm, challenge["message"].as_str().unwrap().as_bytes());
    let public = evm.verifying_key().to_encoded_point(false);
    let proof = json!({
        "challengeId": challenge["challengeId"],
        "accountId": address,
        "network": "eip155:84532",
        "signature": format!("0x{}", hex(&signature)),
        "signatureKind": "evm",
        "publicKey": format!("0x{}", hex(public.as_bytes())),
    });
    let (status, body) = live.post("/api/v1/auth/ledger/verify", proof).await;
    assert_eq!(status, 200, "{body}");
    check_verify_shape(&body, &address, "eip155:84532");
    // Only hashes are stored: no issued key appears in the store file.
    let stored = live.stored_bytes();
    let issued = body["key"].as_str().unwrap().as_bytes();
    assert!(!stored.windows(issued.len()).any(|w| w == issued), "an API key was stored in plain text");
}

/// One refused verification: the status and code, and nothing issued.
async fn check_refused(live: &Live, label: &str, proof: Value, status: u16, code: &str) {
    let keys = live.count("api_keys");
    let (got, body) = live.post("/api/v1/auth/ledger/verify", proof).await;
    assert_eq!((got, body["code"].as_str().unwrap_or_default()), (status, code), "{label}: {body}");
    assert!(body["error"].is_string(), "{label}: {body}");
    assert_eq!(live.count("api_keys"), keys, "{label}: a key was issued");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_proofs_are_refused_and_each_challenge_is_used_once() {
    let live = Live::start("live-refusals", &[]);
    let key = key_for(DEV_KEYS, "0.0.1001").unwrap();
    let other = key_for(DEV_KEYS, "0.0.1002").unwrap();
    let proof = |challenge: &Value, change: &dyn Fn(&mut Value)| {
        let mut proof = hedera_proof(challenge, "0.0.1001", &key);
        change(&mut proof);
        proof
    };
    // Each case gets a fresh challenge.
    type Case = (&'static str, Box<dyn Fn(&mut Value)>, u16, &'static str);
    let other_signature = {
        let other = key_for(DEV_KEYS, "0.0.1002").unwrap();
        move |p: &mut Value| {
            let signature = other.sign(b"anything");
            p["signature"] = json!(base64::engine::general_purpose::STANDARD.encode(signature));
        }
    };
    let cases: Vec<Case> = vec![
        ("signed by another key", Box::new(other_signature), 401, "signature_invalid"),
        (
            "another account's public key",
            Box::new(move |p: &mut Value| p["publicKey"] = json!(other.public_key().to_der_hex())),
            401,
            "public_key_mismatch",
        ),
        ("signature not base64", Box::new(|p: &mut Value| p["signature"] = json!("%%%")), 400, "invalid_body"),
        ("signature too short", Box::new(|p: &mut Value| p["signature"] = json!("AAAA")), 400, "invalid_body"),
        (
            "map signatures",
            Box::new(|p: &mut Value| p["signatureKind"] = json!("map")),
            400,
            "signature_kind_unsupported",
        ),
        ("evm kind on Hedera", Box::new(|p: &mut Value| p["signatureKind"] = json!("evm")), 400, "invalid_body"),
        ("another account", Box::new(|p: &mut Value| p["accountId"] = json!("0.0.1002")), 401, "challenge_mismatch"),
        ("unknown challenge", Box::new(|p: &mut Value| p["challengeId"] = json!("nope")), 401, "challenge_invalid"),
        ("no signature", Box::new(|p: &mut Value| p["signature"] = json!("")), 400, "invalid_body"),
        (
            "a missing field",
            Box::new(|p: &mut Value| drop(p.as_object_mut().unwrap().remove("accountId"))),
            400,
            "invalid_body",
        ),
        ("an unknown field", Box::new(|p: &mut Value| p["payerKey"] = json!("x")), 400, "invalid_body"),
        ("a bad lifetime", Box::new(|p: &mut Value| p["expiresInMinutes"] = json!(0)), 400, "invalid_body"),
        ("a mainnet account", Box::new(|p: &mut Value| p["network"] = json!("mainnet")), 400, "invalid_body"),
    ];
    for (label, change, status, code) in cases {
        let challenge = live.challenge("0.0.1001", "testnet").await;
        check_refused(&live, label, proof(&challenge, &*change), status, code).await;
    }
    // Used once, even when the first use succeeded.
    let challenge = live.challenge("0.0.1001", "testnet").await;
    let good = proof(&challenge, &|_| {});
    assert_eq!(live.post("/api/v1/auth/ledger/verify", good.clone()).await.0, 200);
    check_refused(&live, "replayed", good, 401, "challenge_invalid").await;
    // An account the key source does not know.
    let challenge = live.challenge("0.0.999999", "testnet").await;
    let unknown = json!({"challengeId": challenge["challengeId"], "accountId": "0.0.999999", "network": "testnet",
        "signature": base64::engine::general_purpose::STANDARD.encode([1u8; 64])});
    check_refused(&live, "unknown account", unknown, 401, "account_not_found").await;
    // Expired: its lifetime ended an hour ago (the stored time is what
    // the api compares with its clock).
    let challenge = live.challenge("0.0.1001", "testnet").await;
    let id = challenge["challengeId"].as_str().unwrap();
    let expire = "UPDATE challenges SET expires_at = expires_at - 3600000 WHERE id = ?1";
    live.with_store(|s| s.execute(expire, [id])).unwrap();
    check_refused(&live, "expired", proof(&challenge, &|_| {}), 401, "challenge_expired").await;
    // Challenges for what cannot sign in.
    for (body, field) in [
        (json!({"accountId": "0.0.1001", "network": "devnet"}), "network"),
        (json!({"accountId": "alice", "network": "testnet"}), "accountId"),
        (json!({"accountId": "0.0.1001", "network": "eip155:1"}), "accountId"),
        (json!({"accountId": "0.0.1001"}), "network"),
    ] {
        let (status, answer) = live.post("/api/v1/auth/ledger/challenge", body.clone()).await;
        assert_eq!((status, answer["parameter"].as_str()), (400, Some(field)), "{body}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_auth_rules_of_section_5() {
    let live = Live::start("live-auth-matrix", &["--operator-key", "operator-secret-1"]);
    let own = live.sign_in("0.0.1001").await["key"].as_str().unwrap().to_string();
    live.sign_in("0.0.1002").await;
    /// Method, path, headers, status, code.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u16, &'a str);
    let cases: &[Case] = &[
        ("GET", "/api/v1/credits/transactions", &[], 401, "auth_required"),
        ("GET", "/api/v1/credits/transactions", &[("x-api-key", "almk_not-a-key")], 401, "invalid_api_key"),
        ("GET", "/api/v1/credits/transactions", &[("x-api-key", &own)], 200, ""),
        ("GET", "/api/v1/credits/transactions?accountId=0.0.1001", &[("x-api-key", &own)], 200, ""),
        ("GET", "/api/v1/credits/transactions?accountId=0.0.1002", &[("x-api-key", &own)], 403, "forbidden"),
        ("GET", "/api/v1/credits/transactions", &[("x-api-key", &own), ("x-account-id", "0.0.1002")], 403, "forbidden"),
        ("GET", "/api/v1/credits/transactions", &[("x-api-key", &own), ("x-account-id", "0.0.1001")], 200, ""),
        ("GET", "/api/v1/credits/transactions?accountId=0.0.1002", &[("x-api-key", "operator-secret-1")], 200, ""),
        ("GET", "/api/v1/credits/transactions", &[("x-api-key", "operator-secret-1")], 400, "account_id_required"),
        ("GET", "/api/v1/credits/transactions?limit=201", &[("x-api-key", &own)], 400, "invalid_parameter"),
        ("GET", "/api/v1/credits/transactions?type=gift", &[("x-api-key", &own)], 400, "invalid_parameter"),
        ("GET", "/api/v1/credits/transactions?startDate=yesterday", &[("x-api-key", &own)], 400, "invalid_parameter"),
        ("GET", "/api/v1/credits/balance", &[], 400, "account_id_required"),
        ("GET", "/api/v1/credits/balance?accountId=0.0.x", &[], 400, "invalid_parameter"),
        ("GET", "/api/v1/credits/balance?accountId=0.0.1002", &[], 200, ""),
        ("GET", "/api/v1/credits/balance", &[("x-api-key", "almk_not-a-key")], 401, "invalid_api_key"),
        ("POST", "/api/v1/credits/payments/native/intent", &[], 401, "auth_required"),
        ("POST", "/api/v1/credits/payments/native/intent", &[("x-api-key", &own)], 503, "not_configured"),
        ("POST", "/api/v1/credits/payments/hbar/intent", &[], 401, "auth_required"),
        ("POST", "/api/v1/credits/payments/hbar/intent", &[("x-api-key", &own)], 503, "not_configured"),
        ("POST", "/api/v1/credits/purchase", &[], 400, "private_key_not_accepted"),
    ];
    for (method, path, headers, status, code) in cases {
        let body = (*method == "POST").then(|| json!({"accountId": "0.0.1001"}));
        let (got, answer) = live.send(method, path, headers, body).await;
        assert_eq!(got, *status, "{method} {path} {headers:?}: {answer}");
        if !code.is_empty() {
            assert_eq!(answer["code"], json!(code), "{method} {path} {headers:?}: {answer}");
        }
    }
    // The transaction list: the grant, and the filters.
    let (_, list) = live.send("GET", "/api/v1/credits/transactions", &[("x-api-key", &own)], None).await;
    assert_eq!(list["transactions"][0]["amount"], json!(1000));
    assert_eq!(list["transactions"][0]["type"], json!("credit"));
    for (query, expected) in [
        ("type=debit", 0),
        ("type=credit", 1),
        ("type=grant", 1),
        ("status=failed", 0),
        ("startDate=2000-01-01", 1),
        ("endDate=2000-01-01", 0),
    ] {
        let path = format!("/api/v1/credits/transactions?{query}");
        let (_, list) = live.send("GET", &path, &[("x-api-key", &own)], None).await;
        assert_eq!(list["transactions"].as_array().unwrap().len(), expected, "{query}: {list}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_come_from_the_mirror_node_when_one_is_configured() {
    let mirror = MirrorServer::start(Default::default(), std::time::Duration::ZERO).await;
    let key = key_for(DEV_KEYS, "0.0.1003").unwrap();
    let raw = key.public_key().to_der_hex()["302a300506032b6570032100".len()..].to_string();
    mirror.set_account("0.0.1003".parse().unwrap(), "ED25519", &raw);
    let live = Live::start("live-mirror", &["--mirror-url", &mirror.url()]);
    let verify = live.sign_in("0.0.1003").await;
    check_verify_shape(&verify, "0.0.1003", "testnet");
    // A dev account the mirror does not know cannot sign in; no grant
    // comes from a mirror-backed sign-in.
    let (_, balance) = live.send("GET", "/api/v1/credits/balance?accountId=0.0.1003", &[], None).await;
    assert_eq!(balance["balance"], json!(0));
    let dev = key_for(DEV_KEYS, "0.0.1001").unwrap();
    let challenge = live.challenge("0.0.1001", "testnet").await;
    check_refused(&live, "not on the mirror", hedera_proof(&challenge, "0.0.1001", &dev), 401, "account_not_found")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_client_signs_in_with_each_key_kind() {
    let live = Live::start("live-client", &[]);
    let keys: Value = serde_json::from_str(DEV_KEYS).unwrap();
    let (_, address) = evm_key();
    let base = format!("{}/", live.api.base);
    let evm = format!("0x{}", "07".repeat(32));
    let args = [
        base.as_str(),
        keys["keys"]["0.0.1001"]["privateKey"].as_str().unwrap(),
        keys["keys"]["0.0.1004"]["privateKey"].as_str().unwrap(),
        evm.as_str(),
    ];
    let results = tests::reference_client("live.mjs", &args).await;
    assert_eq!(results["ed25519"]["value"]["accountId"], json!("0.0.1001"));
    assert_eq!(results["ecdsa"]["value"]["accountId"], json!("0.0.1004"));
    assert_eq!(results["evm"]["value"]["accountId"], json!(address));
}

/// Sign-in is rate-limited per client (429 with `Retry-After`, other
/// routes untouched); a key found once is believed for the cache's time,
/// so a key revoked in the store stops working within it.
#[tokio::test(flavor = "multi_thread")]
async fn sign_in_is_rate_limited_and_a_revoked_key_stops_within_the_cache_time() {
    let live = Live::start("live-limits", &["--sign-in-rate", "1", "--sign-in-burst", "4", "--key-cache-secs", "2"]);
    // A sign-in is two requests: two fit in the burst.
    let first = live.sign_in("0.0.1001").await["key"].as_str().unwrap().to_string();
    let second = live.sign_in("0.0.1002").await["key"].as_str().unwrap().to_string();
    let url = live.api.url("/api/v1/auth/ledger/challenge");
    let response = http_client::client()
        .post(url)
        .json(&json!({"accountId": "0.0.1003", "network": "testnet"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    let (status, balance) = live.send("GET", "/api/v1/credits/balance", &[("x-api-key", &first)], None).await;
    assert_eq!(status, 200, "{balance}");

    // Revoked in the store: still believed from the cache, then refused.
    live.with_store(|s| s.execute("UPDATE api_keys SET revoked_at = 1", [])).unwrap();
    assert_eq!(live.send("GET", "/api/v1/credits/balance", &[("x-api-key", &first)], None).await.0, 200);
    // A key never looked up is not in the cache: refused at once.
    let (status, _) = live.send("GET", "/api/v1/credits/balance", &[("x-api-key", &second)], None).await;
    assert_eq!(status, 401);
    // The cached key's time runs out (2 s): the event waited for, looked
    // at a bounded number of times.
    let revoked = async || live.send("GET", "/api/v1/credits/balance", &[("x-api-key", &first)], None).await.0 != 200;
    tests::wait::until(
        "the revoked key refused after its cache time",
        200,
        std::time::Duration::from_millis(50),
        revoked,
    )
    .await;
    for key in [&first, &second] {
        let (status, body) = live.send("GET", "/api/v1/credits/balance", &[("x-api-key", key)], None).await;
        assert_eq!((status, &body["code"]), (401, &json!("invalid_api_key")));
    }
}
