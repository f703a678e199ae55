//! Programmable Secrets end to end: the api binary against a real anvil
//! with the protocol's contracts deployed. A provider encrypts a file,
//! prepares, sends the chain transactions from its wallet and confirms; a
//! buyer purchases on chain, asks for a nonce, has the node sign the
//! challenge, requests the key with an RSA key made by the openssl
//! command, and decrypts the key with openssl and the file with it: the
//! exact bytes. Then each refusal, and the indexer across a
//! reorganisation and a restart.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use api::broker::secrets::Clock;
use base64::Engine as _;
use clap::Parser as _;
use programmable_secrets::contracts::{PaymentModule, PolicyVault};
use programmable_secrets::{hashes, Address, Bytes, B256, U256};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use serde_json::{json, Value};
use sha2::Digest as _;
use tests::evm::{deploy_protocol, Anvil, Chain, Receipt};
use tests::live::Broker;
use tests::TempDir;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// Where `make run` serves.
const MAKE_RUN: &str = "http://127.0.0.1:4000";
const PROVIDER_UAID: &str = "uaid:did:pkh:eip155:31337:0x70997970c51812dc3a010c7d01b50e0d17dc79c8;uid=0";

/// Where the api runs.
enum Server {
    /// The api binary, on a build of the datasets.
    Binary(Broker),
    /// `api::serve` in this process, its clock the test's to move.
    Library { base: String, data: PathBuf, clock: Clock, _stop: tokio::sync::oneshot::Sender<()>, _dir: TempDir },
    /// What `make run` serves from this checkout: its api on
    /// 127.0.0.1:4000 and its chain, `data/evm/manifest.json`.
    MakeRun { data: PathBuf },
}

/// Where the fixture finds the api.
#[derive(Clone, Copy)]
enum Where {
    Binary,
    Library,
    MakeRun,
}

/// A chain with the protocol, and a broker serving it.
struct Secrets {
    /// None when the chain is `make run`'s.
    _anvil: Option<Anvil>,
    chain: Chain,
    deployment: programmable_secrets::deployment::Deployment,
    server: Server,
    client: reqwest::Client,
    /// The provider account's API key.
    key: String,
    provider: Address,
    buyer: Address,
    stranger: Address,
    _files: TempDir,
}

impl Secrets {
    async fn start(label: &str, run: Where) -> Secrets {
        if let Where::MakeRun = run {
            return Secrets::of_make_run().await;
        }
        let anvil = Anvil::start().unwrap();
        let chain = Chain::new(&anvil.url);
        let deployment = deploy_protocol(&chain, "anvil").await.unwrap();
        let files = TempDir::new(&format!("{label}-keys"));
        let manifest = files.path().join("anvil.json");
        std::fs::write(&manifest, deployment.manifest().to_string()).unwrap();
        let master = files.path().join("master-key");
        std::fs::write(&master, format!("1:{}\n", B64.encode(programmable_secrets::envelope::random::<32>()))).unwrap();
        let flags = [
            "--secrets-chain",
            manifest.to_str().unwrap(),
            "--secrets-master-key-file",
            master.to_str().unwrap(),
            "--secrets-index-every-ms",
            "50",
        ];
        let server = match run {
            Where::Binary => Server::Binary(Broker::start(label, &flags)),
            Where::Library => {
                let dir = TempDir::new(label);
                let (site, data) = (dir.path().join("site"), dir.path().join("data"));
                let dirs = ["--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
                let args = ["api", "--availability-every-s", "0"].into_iter().chain(dirs).chain(flags);
                let app = api::Config::parse_from(args).app().unwrap();
                let clock = app.secrets.as_ref().unwrap().clock.clone();
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let base = format!("http://{}", listener.local_addr().unwrap());
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(api::serve(listener, app, async {
                    let _ = stopped.await;
                }));
                Server::Library { base, data, clock, _stop: stop, _dir: dir }
            }
            Where::MakeRun => unreachable!("answered above"),
        };
        let client = tests::unpooled_client();
        let base = match &server {
            Server::Binary(broker) => broker.api.url(""),
            Server::Library { base, .. } => base.clone(),
            Server::MakeRun { .. } => unreachable!("answered above"),
        };
        let key = tests::live::sign_in(&client, &base, "0.0.1001").await;
        let accounts = chain.accounts().await.unwrap();
        Secrets {
            _anvil: Some(anvil),
            chain,
            deployment,
            server,
            client,
            key,
            provider: accounts[1],
            buyer: accounts[2],
            stranger: accounts[3],
            _files: files,
        }
    }

    /// The fixture over what `make run` serves (its chain's accounts are
    /// anvil's own, as in the other runs).
    async fn of_make_run() -> Secrets {
        let data = tests::workspace_root().join("data");
        let text = std::fs::read_to_string(data.join("evm/manifest.json")).expect("make run is serving");
        let deployment = programmable_secrets::deployment::Deployment::parse(&text).unwrap();
        let chain = Chain::new(&deployment.rpc_url);
        let client = tests::unpooled_client();
        let key = tests::live::sign_in(&client, MAKE_RUN, "0.0.1001").await;
        let accounts = chain.accounts().await.unwrap();
        Secrets {
            _anvil: None,
            chain,
            deployment,
            server: Server::MakeRun { data },
            client,
            key,
            provider: accounts[1],
            buyer: accounts[2],
            stranger: accounts[3],
            _files: TempDir::new("secrets-make-run"),
        }
    }

    fn url(&self, path: &str) -> String {
        match &self.server {
            Server::Binary(broker) => broker.api.url(path),
            Server::Library { base, .. } => format!("{base}{path}"),
            Server::MakeRun { .. } => format!("{MAKE_RUN}{path}"),
        }
    }

    async fn send(&self, method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let headers: Vec<(&str, &str)> = key.map(|k| ("x-api-key", k)).into_iter().collect();
        tests::live::call(&self.client, method, self.url(path), &headers, body).await
    }

    async fn post(&self, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        self.send("POST", &format!("/api/v1/programmable-secrets/{path}"), key, Some(body)).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", &format!("/api/v1/programmable-secrets/{path}"), None, None).await
    }

    fn with_store<T: Send>(&self, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
        let data = match &self.server {
            Server::Binary(broker) => broker.data.clone(),
            Server::Library { data, .. } | Server::MakeRun { data } => data.clone(),
        };
        tests::process::with_store(&data, f)
    }

    fn rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {table}");
        self.with_store(|s| s.query_row(&sql, [], |r| r.get(0))).unwrap()
    }

    fn broker(&mut self) -> &mut Broker {
        match &mut self.server {
            Server::Binary(broker) => broker,
            Server::Library { .. } | Server::MakeRun { .. } => panic!("the api is not this fixture's to restart"),
        }
    }

    fn clock(&self) -> &Clock {
        match &self.server {
            Server::Library { clock, .. } => clock,
            Server::Binary(_) | Server::MakeRun { .. } => panic!("the api binary's clock is its own"),
        }
    }
}

/// A file encrypted as the protocol's clients do: AES-256-GCM, a random
/// 12-byte IV, the blob `ciphertext ‖ tag`.
struct Sealed {
    plaintext: Vec<u8>,
    key: [u8; 32],
    iv: [u8; 12],
    blob: Vec<u8>,
}

fn seal(plaintext: &[u8]) -> Sealed {
    let (key, iv) = (programmable_secrets::envelope::random::<32>(), programmable_secrets::envelope::random::<12>());
    let sealing = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).unwrap());
    let mut blob = plaintext.to_vec();
    sealing.seal_in_place_append_tag(Nonce::assume_unique_for_key(iv), Aad::empty(), &mut blob).unwrap();
    Sealed { plaintext: plaintext.to_vec(), key, iv, blob }
}

fn open(key: &[u8], iv: &[u8], blob: &[u8]) -> Vec<u8> {
    let opening = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).unwrap());
    let mut data = blob.to_vec();
    let plain = opening.open_in_place(Nonce::try_assume_unique_for_key(iv).unwrap(), Aad::empty(), &mut data).unwrap();
    plain.to_vec()
}

/// A buyer's RSA key pair made by the openssl command: the private key's
/// file, the public key's SPKI PEM, and its fingerprint (SHA-256 of the
/// DER, which openssl writes too).
struct RsaKey {
    private: std::path::PathBuf,
    pem: String,
    fingerprint: String,
}

fn openssl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl").args(args).output().expect("the openssl command");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn rsa_key(dir: &Path, name: &str, bits: u32) -> RsaKey {
    let private = dir.join(format!("{name}.pem"));
    let bits = format!("rsa_keygen_bits:{bits}");
    openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", &bits, "-out", private.to_str().unwrap()]);
    let pem = String::from_utf8(openssl(&["pkey", "-in", private.to_str().unwrap(), "-pubout"])).unwrap();
    let der = openssl(&["pkey", "-in", private.to_str().unwrap(), "-pubout", "-outform", "DER"]);
    let fingerprint = sha2::Sha256::digest(&der).iter().map(|b| format!("{b:02x}")).collect();
    RsaKey { private, pem, fingerprint }
}

/// RSA-OAEP-SHA-256 (MGF1-SHA-256) decryption by openssl.
fn rsa_decrypt(key: &RsaKey, dir: &Path, sealed_b64: &str) -> Vec<u8> {
    let input = dir.join("sealed.bin");
    std::fs::write(&input, B64.decode(sealed_b64).unwrap()).unwrap();
    openssl(&[
        "pkeyutl",
        "-decrypt",
        "-inkey",
        key.private.to_str().unwrap(),
        "-in",
        input.to_str().unwrap(),
        "-pkeyopt",
        "rsa_padding_mode:oaep",
        "-pkeyopt",
        "rsa_oaep_md:sha256",
        "-pkeyopt",
        "rsa_mgf1_md:sha256",
    ])
}

/// The id announced in `topic[1]` of `receipt`'s first `topic0` log.
fn announced(receipt: &Receipt, topic0: B256) -> U256 {
    Chain::first_topic(receipt, topic0).expect("the event")
}

/// What a provider's wallet sends for a prepared policy: the dataset,
/// then the policy. `price` overrides the staged price (a mismatch).
async fn send_policy(s: &Secrets, inputs: &Value, price: Option<U256>) -> (U256, Receipt) {
    let word = |name: &str| inputs[name].as_str().unwrap().parse::<B256>().unwrap();
    let dataset = PolicyVault::registerDatasetCall {
        ciphertextHash: word("ciphertextHash"),
        keyCommitment: word("keyCommitment"),
        metadataHash: word("metadataHash"),
        providerUaidHash: word("providerUaidHash"),
    };
    let registered = s.chain.transact(s.provider, s.deployment.policy_vault, dataset, U256::ZERO).await.unwrap();
    let dataset_id = announced(&registered, alloy_sol_event::DATASET_REGISTERED);
    let conditions = inputs["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| PolicyVault::PolicyConditionInput {
            evaluator: c["evaluator"].as_str().unwrap().parse().unwrap(),
            configData: c["configData"].as_str().unwrap().parse::<Bytes>().unwrap(),
        })
        .collect();
    let staged_price = U256::from_str_radix(inputs["priceWei"].as_str().unwrap(), 10).unwrap();
    let create = PolicyVault::createPolicyForDatasetCall {
        datasetId: dataset_id,
        payout: inputs["payoutAddress"].as_str().unwrap().parse().unwrap(),
        paymentToken: Address::ZERO,
        price: price.unwrap_or(staged_price).to(),
        receiptTransferable: inputs["receiptTransferable"].as_bool().unwrap(),
        metadataHash: word("metadataHash"),
        conditions,
    };
    let created = s.chain.transact(s.provider, s.deployment.policy_vault, create, U256::ZERO).await.unwrap();
    (announced(&created, alloy_sol_event::POLICY_CREATED), created)
}

mod alloy_sol_event {
    use alloy_sol_types::SolEvent;
    use programmable_secrets::contracts::PolicyVault;
    use programmable_secrets::B256;
    pub const DATASET_REGISTERED: B256 = PolicyVault::DatasetRegistered::SIGNATURE_HASH;
    pub const POLICY_CREATED: B256 = PolicyVault::PolicyCreated::SIGNATURE_HASH;
}

/// A prepare body for `sealed`, its metadata saying how to open it and
/// one condition: the buyer on an allowlist.
fn prepare_body(s: &Secrets, sealed: &Sealed, allowlist: &[Address]) -> Value {
    json!({
        "providerAddress": format!("{:#x}", s.provider),
        "providerUaid": PROVIDER_UAID,
        "payoutAddress": format!("{:#x}", s.provider),
        "priceWei": "1000000000000000",
        "ciphertextBase64": B64.encode(&sealed.blob),
        "contentKeyB64": B64.encode(sealed.key),
        "metadata": {
            "title": "Field notes",
            "mimeType": "text/plain",
            "sizeBytes": sealed.plaintext.len(),
            "plaintextHash": hashes::hex(&hashes::sha256(&sealed.plaintext)),
            "cipher": {"algorithm": "AES-GCM", "ivBase64": B64.encode(sealed.iv), "version": 1},
            "purchaseRequirements": {
                "receiptTransferable": false,
                "conditions": [{
                    "kind": "evm-allowlist",
                    "allowlistedBuyerAddresses": allowlist.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>(),
                }],
            },
        },
    })
}

/// Publishes `sealed` through the broker: prepare, the wallet's two
/// transactions, confirm. Returns the on-chain policy id.
async fn publish(s: &Secrets, sealed: &Sealed, allowlist: &[Address]) -> u64 {
    let (status, staged) = s.post("provider/prepare", Some(&s.key), prepare_body(s, sealed, allowlist)).await;
    assert_eq!(status, 200, "{staged}");
    let (policy_id, created) = send_policy(s, &staged["onchainInputs"], None).await;
    let body = json!({
        "stagedPolicyId": staged["stagedPolicyId"],
        "policyId": policy_id.to::<u64>(),
        "createdTxHash": created.hash,
        "createdBlockNumber": created.block_number,
    });
    let (status, confirmed) = s.post("provider/confirm", Some(&s.key), body).await;
    assert_eq!(status, 200, "{confirmed}");
    assert_eq!(confirmed["policy"]["status"], "finalized");
    assert_eq!(confirmed["policy"]["keyReleaseReady"], true);
    policy_id.to()
}

/// Buys access to a policy of `conditions` conditions, none of which
/// needs a runtime input.
async fn purchase(s: &Secrets, buyer: Address, policy_id: u64, conditions: usize) -> Receipt {
    let call = PaymentModule::purchaseCall {
        policyId: U256::from(policy_id),
        recipient: Address::ZERO,
        conditionRuntimeInputs: vec![Bytes::new(); conditions],
    };
    s.chain.transact(buyer, s.deployment.payment_module, call, U256::from(1_000_000_000_000_000u64)).await.unwrap()
}

/// A nonce for `buyer`, and the node's signature of its challenge by
/// `signer`.
async fn challenge(s: &Secrets, policy_id: u64, buyer: Address, signer: Address) -> (Value, String) {
    let (status, nonce) =
        s.post("nonces", None, json!({"policyId": policy_id, "buyerAddress": format!("{buyer:#x}")})).await;
    assert_eq!(status, 200, "{nonce}");
    let signature = s.chain.personal_sign(signer, nonce["challengeMessage"].as_str().unwrap()).await.unwrap();
    (nonce, signature)
}

fn key_body(nonce: &Value, signature: &str, key: &RsaKey) -> Value {
    json!({
        "requestId": nonce["requestId"],
        "policyId": nonce["policyId"],
        "buyerAddress": nonce["buyerAddress"],
        "nonce": nonce["nonce"],
        "signature": signature,
        "buyerRsaPublicKeyPem": key.pem,
        "buyerPublicKeyFingerprint": key.fingerprint,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_is_published_bought_and_unlocked_and_every_refusal_changes_nothing() {
    let s = Secrets::start("secrets-flow", Where::Binary).await;
    let dir = TempDir::new("secrets-buyer");
    let (status, health) = s.get("health").await;
    assert_eq!((status, &health["enabled"], &health["krsConfigured"]), (200, &json!(true), &json!(true)), "{health}");

    let sealed = seal(b"The tide tables for the whole of next year, to the minute.\n");
    let policy_id = publish(&s, &sealed, &[s.buyer, s.stranger]).await;
    let (status, listed) = s.get("policies").await;
    assert_eq!(status, 200);
    assert_eq!(listed["policies"][0]["policyId"], policy_id, "{listed}");
    let (_, one) = s.get(&format!("policies/{policy_id}")).await;
    assert_eq!(one["policy"]["conditions"][0]["descriptor"]["kind"], "evm-allowlist");
    assert_eq!(one["policy"]["priceWei"], "1000000000000000");

    // The buyer purchases on chain, then proves the wallet and unlocks.
    purchase(&s, s.buyer, policy_id, 1).await;
    let key = rsa_key(dir.path(), "buyer", 3072);
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    assert!(nonce["challengeMessage"]
        .as_str()
        .unwrap()
        .starts_with("Programmable Secrets Access Request\nnetwork: anvil\n"));

    // Refused, each changing nothing: another wallet's signature, a
    // fingerprint of another key, a body naming another policy.
    let stranger_signature =
        s.chain.personal_sign(s.stranger, nonce["challengeMessage"].as_str().unwrap()).await.unwrap();
    let (status, refused) = s.post("keys/request", None, key_body(&nonce, &stranger_signature, &key)).await;
    assert_eq!((status, refused["code"].as_str()), (401, Some("invalid_signature")), "{refused}");
    let other = rsa_key(dir.path(), "other", 3072);
    let mut mismatched = key_body(&nonce, &signature, &key);
    mismatched["buyerPublicKeyFingerprint"] = json!(other.fingerprint);
    let (status, refused) = s.post("keys/request", None, mismatched).await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("fingerprint_mismatch")), "{refused}");
    let mut elsewhere = key_body(&nonce, &signature, &key);
    elsewhere["policyId"] = json!(policy_id + 1);
    let (status, refused) = s.post("keys/request", None, elsewhere).await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("request_mismatch")), "{refused}");
    let small = rsa_key(dir.path(), "small", 2048);
    let mut short = key_body(&nonce, &signature, &small);
    short["buyerPublicKeyFingerprint"] = json!(small.fingerprint);
    let (status, refused) = s.post("keys/request", None, short).await;
    assert_eq!((status, refused["parameter"].as_str()), (400, Some("buyerRsaPublicKeyPem")), "{refused}");
    let (_, pending) = s.get(&format!("keys/{}", nonce["requestId"].as_str().unwrap())).await;
    assert_eq!(pending["status"], "nonce-issued", "{pending}");

    // Released: the key decrypts with openssl, the file with the key.
    let started = std::time::Instant::now();
    let (status, issued) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{issued}");
    assert_eq!((issued["status"].as_str(), issued["algorithm"].as_str()), (Some("issued"), Some("rsa-oaep-sha256")));
    let content_key = rsa_decrypt(&key, dir.path(), issued["encryptedKey"].as_str().unwrap());
    assert_eq!(content_key, sealed.key);
    let url = s.url(issued["ciphertextUrl"].as_str().unwrap());
    let response = s.client.get(url).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/octet-stream");
    let blob = response.bytes().await.unwrap();
    let iv = B64.decode(issued["metadataJson"]["cipher"]["ivBase64"].as_str().unwrap()).unwrap();
    let plaintext = open(&content_key, &iv, &blob);
    assert_eq!(plaintext, sealed.plaintext);
    assert_eq!(hashes::hex(&hashes::sha256(&plaintext)), issued["metadataJson"]["plaintextHash"]);
    println!("a key release took {took:?} (signature recovery, access on chain, RSA-OAEP to 3072 bits)");

    // The same request again: the same answer; with another key: refused.
    let (status, again) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!((status, &again["encryptedKey"]), (200, &issued["encryptedKey"]));
    let mut other_body = key_body(&nonce, &signature, &other);
    other_body["buyerPublicKeyFingerprint"] = json!(other.fingerprint);
    let (status, refused) = s.post("keys/request", None, other_body).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("nonce_consumed")), "{refused}");

    // One nonce, two requests at once with two keys: one release.
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    let (first, second) = tokio::join!(
        s.post("keys/request", None, key_body(&nonce, &signature, &key)),
        s.post("keys/request", None, {
            let mut b = key_body(&nonce, &signature, &other);
            b["buyerPublicKeyFingerprint"] = json!(other.fingerprint);
            b
        }),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{} {}", first.1, second.1);

    // Never purchased: denied, recorded.
    let (nonce, signature) = challenge(&s, policy_id, s.stranger, s.stranger).await;
    let (status, refused) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(
        (status, refused["code"].as_str(), refused["status"].as_str()),
        (403, Some("access_not_found"), Some("denied"))
    );
    assert!(refused["encryptedKey"].is_null());

    // The dataset deactivated: the buyer's access ends.
    let dataset_id = U256::from(one["policy"]["datasetId"].as_u64().unwrap());
    let off = PolicyVault::setDatasetActiveCall { datasetId: dataset_id, active: false };
    s.chain.transact(s.provider, s.deployment.policy_vault, off, U256::ZERO).await.unwrap();
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    let (status, refused) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("access_not_found")), "{refused}");

    // Every release and refusal was recorded with who, which policy, why.
    let issued = "SELECT count(*) FROM secret_key_events WHERE outcome = 'issued'";
    let issued_count: i64 = s.with_store(|store| store.query_row(issued, [], |r| r.get(0))).unwrap();
    assert_eq!(issued_count, 2);
    let refused = "SELECT code FROM secret_key_events WHERE code IS NOT NULL ORDER BY seq";
    let codes: Vec<String> = s.with_store(|store| store.query_map(refused, [], |r| r.get(0))).unwrap();
    for code in ["invalid_signature", "fingerprint_mismatch", "invalid_body", "nonce_consumed", "access_not_found"] {
        assert!(codes.iter().any(|c| c == code), "{code} not recorded: {codes:?}");
    }
    // The master key and the content key are nowhere in the store.
    let sql = "SELECT coalesce(record, '') || coalesce(wrapped_key, '') FROM secret_policies";
    let dump: String = s.with_store(|store| store.query_map(sql, [], |r| r.get::<String>(0))).unwrap().concat();
    assert!(!dump.contains(&B64.encode(sealed.key)) && !dump.contains(&shared::http::hex(&sealed.key)));
}

#[tokio::test(flavor = "multi_thread")]
async fn publication_refuses_bad_input_and_a_chain_that_differs() {
    let s = Secrets::start("secrets-refusals", Where::Binary).await;
    let sealed = seal(b"refusals");
    let good = prepare_body(&s, &sealed, &[s.buyer]);
    let before = s.rows("secret_policies");
    // Each change to a good body, and the field its 400 names.
    let cases: Vec<(&str, Value, &str)> = vec![
        ("providerAddress", json!("0x1234"), "providerAddress"),
        ("priceWei", json!("12.5"), "priceWei"),
        ("priceWei", json!("0"), "priceWei"),
        ("priceWei", json!("79228162514264337593543950336"), "priceWei"),
        ("contentKeyB64", json!(B64.encode([1u8; 16])), "contentKeyB64"),
        ("ciphertextBase64", json!("not base64!"), "ciphertextBase64"),
        ("ciphertextBase64", json!(""), "ciphertextBase64"),
        ("providerUaid", json!("not a uaid"), "providerUaid"),
        ("paymentToken", json!(format!("{:#x}", s.stranger)), "paymentToken"),
        ("chainId", json!(1), "chainId"),
        ("unexpected", json!(true), "unexpected"),
    ];
    for (name, value, field) in cases {
        let mut body = good.clone();
        body[name] = value;
        let (status, refused) = s.post("provider/prepare", Some(&s.key), body).await;
        assert_eq!((status, refused["parameter"].as_str()), (400, Some(field)), "{name}: {refused}");
        assert!(refused["error"].is_string() && refused["code"].is_string());
    }
    let mut body = good.clone();
    body["metadata"]["purchaseRequirements"]["conditions"][0]["allowlistedBuyerAddresses"] = json!(["0xnope"]);
    let (status, refused) = s.post("provider/prepare", Some(&s.key), body).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["parameter"], "metadata.purchaseRequirements.conditions[0].allowlistedBuyerAddresses[0]");
    let mut body = good.clone();
    body["metadata"]["purchaseRequirements"]["conditions"][0] =
        json!({"kind": "custom-static", "evaluatorAddress": format!("{:#x}", s.stranger), "configDataHex": "0x"});
    let (status, refused) = s.post("provider/prepare", Some(&s.key), body).await;
    assert_eq!((status, refused["code"].as_str()), (400, Some("evaluator_not_active")), "{refused}");
    // Without a key: 401.
    let (status, _) = s.post("provider/prepare", None, good.clone()).await;
    assert_eq!(status, 401);
    assert_eq!(s.rows("secret_policies"), before, "refusals stored nothing");

    // Staged, then created on chain at another price: confirm refuses,
    // names the field, and the staging is failed, nothing published.
    let (status, staged) = s.post("provider/prepare", Some(&s.key), good.clone()).await;
    assert_eq!(status, 200, "{staged}");
    let (policy_id, created) = send_policy(&s, &staged["onchainInputs"], Some(U256::from(7))).await;
    let confirm = json!({
        "stagedPolicyId": staged["stagedPolicyId"],
        "policyId": policy_id.to::<u64>(),
        "createdTxHash": created.hash,
    });
    let other = tests::live::sign_in(&s.client, &s.url(""), "0.0.1002").await;
    let (status, _) = s.post("provider/confirm", Some(&other), confirm.clone()).await;
    assert_eq!(status, 403, "another account's staging");
    let (status, refused) = s.post("provider/confirm", Some(&s.key), confirm).await;
    assert_eq!(
        (status, refused["code"].as_str(), refused["parameter"].as_str()),
        (409, Some("chain_mismatch"), Some("priceWei"))
    );
    let staged_id = staged["stagedPolicyId"].as_str().unwrap();
    let sql = "SELECT status FROM secret_policies WHERE id = ?1";
    let failed: String = s.with_store(|store| store.query_row(sql, [staged_id], |r| r.get(0))).unwrap();
    assert_eq!(failed, "failed");
    // The indexer lists it, from the chain, with no key to release.
    tests::wait::until("the indexer listing the policy", 200, Duration::from_millis(50), async || {
        s.get(&format!("policies/{}", policy_id.to::<u64>())).await.0 == 200
    })
    .await;
    let (_, listed) = s.get(&format!("policies/{}", policy_id.to::<u64>())).await;
    assert_eq!(
        (listed["policy"]["status"].as_str(), listed["policy"]["keyReleaseReady"].as_bool()),
        (Some("indexed"), Some(false))
    );
    let (status, refused) = s
        .post("nonces", None, json!({"policyId": policy_id.to::<u64>(), "buyerAddress": format!("{:#x}", s.buyer)}))
        .await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("policy_not_ready")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nonce_expires_on_the_clock_and_changes_nothing_else() {
    let s = Secrets::start("secrets-clock", Where::Library).await;
    let dir = TempDir::new("secrets-clock-buyer");
    let sealed = seal(b"expiry");
    let policy_id = publish(&s, &sealed, &[s.buyer]).await;
    purchase(&s, s.buyer, policy_id, 1).await;
    let key = rsa_key(dir.path(), "buyer", 3072);
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    // The nonce's five minutes pass on the api's clock.
    s.clock().advance(Duration::from_secs(301));
    let (status, refused) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(
        (status, refused["code"].as_str(), refused["status"].as_str()),
        (410, Some("nonce_expired"), Some("expired"))
    );
    assert!(refused["encryptedKey"].is_null());
    let (_, stored) = s.get(&format!("keys/{}", nonce["requestId"].as_str().unwrap())).await;
    assert_eq!((stored["status"].as_str(), stored["errorCode"].as_str()), (Some("expired"), Some("nonce_expired")));
    // Expired stays expired; a new nonce is released.
    let (status, _) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(status, 410);
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    let (status, issued) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(status, 200, "{issued}");
    assert_eq!(rsa_decrypt(&key, dir.path(), issued["encryptedKey"].as_str().unwrap()), sealed.key);
}

/// Made on chain without the broker, as the contracts' command-line tools
/// make a bundle: keccak-256 commitments, no conditions.
async fn policy_made_elsewhere(s: &Secrets, sealed: &Sealed, metadata: &str) -> u64 {
    let dataset = PolicyVault::registerDatasetCall {
        ciphertextHash: hashes::keccak(&sealed.blob),
        keyCommitment: hashes::keccak(&sealed.key),
        metadataHash: hashes::keccak(metadata.as_bytes()),
        providerUaidHash: hashes::keccak(PROVIDER_UAID.as_bytes()),
    };
    let registered = s.chain.transact(s.provider, s.deployment.policy_vault, dataset, U256::ZERO).await.unwrap();
    let create = PolicyVault::createPolicyForDatasetCall {
        datasetId: announced(&registered, alloy_sol_event::DATASET_REGISTERED),
        payout: Address::ZERO,
        paymentToken: Address::ZERO,
        price: 1_000_000_000_000_000u64.try_into().unwrap(),
        receiptTransferable: false,
        metadataHash: hashes::keccak(metadata.as_bytes()),
        conditions: Vec::new(),
    };
    let created = s.chain.transact(s.provider, s.deployment.policy_vault, create, U256::ZERO).await.unwrap();
    announced(&created, alloy_sol_event::POLICY_CREATED).to()
}

async fn listed(s: &Secrets, policy_id: u64) -> Value {
    tests::wait::until(&format!("policy {policy_id} listed"), 400, Duration::from_millis(25), async || {
        s.get(&format!("policies/{policy_id}")).await.0 == 200
    })
    .await;
    s.get(&format!("policies/{policy_id}")).await.1["policy"].clone()
}

async fn purchases(s: &Secrets, expected: i64, why: &str) {
    tests::wait::until(why, 400, Duration::from_millis(25), async || s.rows("secret_purchases") == expected).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_indexer_lists_what_the_chain_has_through_a_reorganisation_and_a_restart() {
    let mut s = Secrets::start("secrets-index", Where::Binary).await;
    let dir = TempDir::new("secrets-index-buyer");
    let sealed = seal(b"made with the command-line tools");
    let metadata = r#"{"title": "elsewhere"}"#;
    let policy_id = policy_made_elsewhere(&s, &sealed, metadata).await;
    let policy = listed(&s, policy_id).await;
    assert_eq!((policy["status"].as_str(), policy["keyReleaseReady"].as_bool()), (Some("indexed"), Some(false)));
    assert_eq!(policy["ciphertextHash"], hashes::hex(&hashes::keccak(&sealed.blob)));

    // Imported: its key and ciphertext checked against the keccak-256
    // commitments; a wrong key is refused first, changing nothing.
    let bundle = |key: &[u8]| {
        json!({"policyId": policy_id, "bundle": {
            "contentKeyHex": shared::http::hex(key),
            "ciphertextHex": shared::http::hex(&sealed.blob),
            "providerUaid": PROVIDER_UAID,
            "ivHex": shared::http::hex(&sealed.iv),
            "title": "elsewhere",
        }})
    };
    let (status, refused) = s.post("provider/import", Some(&s.key), bundle(&[7u8; 32])).await;
    assert_eq!((status, refused["parameter"].as_str()), (409, Some("bundle.contentKeyHex")), "{refused}");
    let (status, imported) = s.post("provider/import", Some(&s.key), bundle(&sealed.key)).await;
    assert_eq!(status, 200, "{imported}");
    assert_eq!(imported["policy"]["keyReleaseReady"], true);
    let (status, again) = s.post("provider/import", Some(&s.key), bundle(&sealed.key)).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("policy_already_published")));

    // A purchase the chain then drops: indexed, then forgotten.
    let snapshot = s.chain.snapshot().await.unwrap();
    purchase(&s, s.buyer, policy_id, 0).await;
    purchases(&s, 1, "the purchase indexed").await;
    s.chain.revert(&snapshot).await.unwrap();
    s.chain.mine(3).await.unwrap();
    purchases(&s, 0, "the dropped purchase forgotten").await;
    assert_eq!(listed(&s, policy_id).await["keyReleaseReady"], true, "the policy from before the fork stays");

    // Bought again on the chain as it is: indexed, and the key released
    // with the receipt the index holds.
    purchase(&s, s.buyer, policy_id, 0).await;
    purchases(&s, 1, "the purchase indexed again").await;
    let key = rsa_key(dir.path(), "buyer", 3072);
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    let (status, issued) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(status, 200, "{issued}");
    assert_eq!(issued["receiptTokenId"], 1);
    let content_key = rsa_decrypt(&key, dir.path(), issued["encryptedKey"].as_str().unwrap());
    let blob =
        s.client.get(s.url(issued["ciphertextUrl"].as_str().unwrap())).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(open(&content_key, &sealed.iv, &blob), sealed.plaintext);

    // Killed and started again: it resumes after its checkpoint, and
    // what it read is not read twice.
    let checkpoints = s.rows("secret_index_blocks");
    assert!(checkpoints > 0);
    s.broker().restart(&[]);
    let later = policy_made_elsewhere(&s, &seal(b"after the restart"), r#"{"title": "later"}"#).await;
    listed(&s, later).await;
    assert_eq!(s.rows("secret_policies"), 2);
    assert_eq!(s.rows("secret_purchases"), 1);

    // Static-first: the next build publishes the catalog, which the api
    // serves as the build's file until a newer change, then from the store.
    let catalog = async |s: &Secrets| {
        let response = s.client.get(s.url("/api/v1/programmable-secrets/catalog")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let cache = response.headers()["cache-control"].to_str().unwrap().to_string();
        let body: Value = response.json().await.unwrap();
        let ids: Vec<u64> =
            body["policies"].as_array().unwrap().iter().map(|p| p["policyId"].as_u64().unwrap()).collect();
        (cache, ids, body)
    };
    // The pages for people follow the same rule: `/secrets` lists the
    // policies, `/secrets/{chainId}/{policyId}` is one.
    let chain_id = s.deployment.chain_id;
    let page = async |s: &Secrets, path: &str| {
        let response = s.client.get(s.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        let cache = response.headers().get("cache-control").map(|v| v.to_str().unwrap().to_string());
        (status, cache.unwrap_or_default(), response.text().await.unwrap())
    };
    let policy_page = |id: u64| format!("/secrets/{chain_id}/{id}");
    let (cache, ids, _) = catalog(&s).await;
    assert_eq!((cache.as_str(), ids.as_slice()), ("no-cache", [later, policy_id].as_slice()), "live before a build");
    let (status, cache, list) = page(&s, "/secrets").await;
    assert_eq!((status, cache.as_str()), (200, "no-cache"), "{list}");
    assert!(list.contains("made by the api when asked") && list.contains("Policies 1 to 2 of 2"), "{list}");
    let (status, _, imported_page) = page(&s, &policy_page(policy_id)).await;
    assert_eq!(status, 200, "{imported_page}");
    assert!(imported_page.contains("<h1>elsewhere</h1>") && imported_page.contains("held by this broker"));
    assert_eq!(page(&s, &policy_page(9999)).await.0, 404, "no such policy");
    assert_eq!(page(&s, &format!("/secrets/{chain_id}/one")).await.0, 400, "not a policy id");
    s.broker().journaled().await;
    let sources = Broker::sources();
    s.broker().rebuild(&tests::strs(&sources)).await;
    let (cache, ids, built) = catalog(&s).await;
    assert_ne!(cache, "no-cache", "the build's file");
    assert_eq!(ids, [later, policy_id]);
    assert_eq!(built["policies"][1]["keyReleaseReady"], true);
    let published = std::fs::read(s.broker().site.join("current/api/v1/programmable-secrets/catalog.json")).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&published).unwrap(), built);
    for (route, file) in [
        ("/secrets".to_string(), "current/secrets.html".to_string()),
        (policy_page(policy_id), format!("current/secrets/{chain_id}/{policy_id}.html")),
        (policy_page(later), format!("current/secrets/{chain_id}/{later}.html")),
    ] {
        let (status, cache, body) = page(&s, &route).await;
        assert_eq!(status, 200, "{route}");
        assert_ne!(cache, "no-cache", "{route}: the build's file");
        assert_eq!(body, std::fs::read_to_string(s.broker().site.join(&file)).unwrap(), "{route}");
        assert!(body.contains("a static file of the build"), "{route}");
    }
    // Indexed since the build: answered from the store.
    let third = policy_made_elsewhere(&s, &seal(b"after the build"), r#"{"title": "third"}"#).await;
    listed(&s, third).await;
    let (cache, ids, _) = catalog(&s).await;
    assert_eq!((cache.as_str(), ids.as_slice()), ("no-cache", [third, later, policy_id].as_slice()));
    let (status, cache, list) = page(&s, "/secrets").await;
    assert_eq!((status, cache.as_str()), (200, "no-cache"));
    assert!(list.contains(&format!(r#"href="{}""#, policy_page(third))), "{list}");
    let (status, cache, _) = page(&s, &policy_page(third)).await;
    assert_eq!((status, cache.as_str()), (200, "no-cache"));
    assert_eq!(page(&s, "/secrets/page/2").await.0, 404, "three policies fill one page");
}

/// The whole flow against what `make run` serves from this checkout:
/// published through its api on its chain, listed, indexed, purchased and
/// unlocked. Not part of `make test` (it needs `make run` serving); run it
/// with `cargo test --release --test e2e -- --ignored secrets::make_run`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs `make run` serving on 127.0.0.1:4000"]
async fn make_run_publishes_sells_and_unlocks() {
    let s = Secrets::start("secrets-make-run", Where::MakeRun).await;
    let dir = TempDir::new("secrets-make-run-buyer");
    let sealed = seal(b"Published, listed, indexed, bought and unlocked on make run.\n");
    let policy_id = publish(&s, &sealed, &[s.buyer]).await;
    let policy = listed(&s, policy_id).await;
    assert_eq!((policy["status"].as_str(), policy["keyReleaseReady"].as_bool()), (Some("finalized"), Some(true)));
    let page = format!("/secrets/{}/{policy_id}", s.deployment.chain_id);
    let response = s.client.get(s.url(&page)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{page}");
    assert!(response.text().await.unwrap().contains("held by this broker"), "{page}");
    let before = s.rows("secret_purchases");
    purchase(&s, s.buyer, policy_id, 1).await;
    purchases(&s, before + 1, "the purchase indexed").await;
    let key = rsa_key(dir.path(), "buyer", 3072);
    let (nonce, signature) = challenge(&s, policy_id, s.buyer, s.buyer).await;
    let (status, issued) = s.post("keys/request", None, key_body(&nonce, &signature, &key)).await;
    assert_eq!(status, 200, "{issued}");
    let content_key = rsa_decrypt(&key, dir.path(), issued["encryptedKey"].as_str().unwrap());
    let blob =
        s.client.get(s.url(issued["ciphertextUrl"].as_str().unwrap())).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(open(&content_key, &sealed.iv, &blob), sealed.plaintext);
    println!("make run: policy {policy_id} published, bought by {:#x} and unlocked", s.buyer);
}
