//! A small Hedera network on loopback: consensus nodes that take signed
//! transactions as a real node does (HAPI over gRPC, plaintext HTTP/2:
//! `proto.ConsensusService/createTopic`, `…/submitMessage`,
//! `proto.CryptoService/cryptoTransfer`), check them as a node's precheck
//! does, bring those that pass to consensus at once, and record them on a
//! [`MirrorServer`] the way the mirror node shows them. A wallet's signed
//! `TransactionList` may also be handed over directly ([`submit`]).
//!
//! The checks, by the network's status names:
//! - any transaction: `INVALID_TRANSACTION_BODY` (no id or node, or not
//!   a transaction), `TRANSACTION_OVERSIZE` (above 6,144 bytes),
//!   `INVALID_NODE_ACCOUNT` (not the node it was sent to), `MEMO_TOO_LONG`
//!   (above 100 bytes), `INVALID_TRANSACTION_DURATION` (outside 15 to
//!   180 s), `INVALID_TRANSACTION_START` (starts in the future),
//!   `TRANSACTION_EXPIRED` (its window has passed),
//!   `PAYER_ACCOUNT_NOT_FOUND`, `INVALID_SIGNATURE` (no signature by the
//!   payer's key over the body bytes: ed25519 over the bytes, ECDSA
//!   secp256k1 over their keccak256), `DUPLICATE_TRANSACTION` (the id was
//!   taken), `INSUFFICIENT_TX_FEE` (a maximum fee below the fee),
//!   `INSUFFICIENT_PAYER_BALANCE`, `NOT_SUPPORTED` (another kind);
//! - a transfer: `INVALID_ACCOUNT_AMOUNTS` (not summing to zero);
//! - a topic: `MEMO_TOO_LONG` (its memo above 100 bytes),
//!   `AUTORENEW_DURATION_NOT_IN_RANGE` (outside 6,999,999 to 8,000,001 s),
//!   `INVALID_SIGNATURE` (an admin key that did not sign);
//! - a message: `INVALID_TOPIC_ID`, `INVALID_TOPIC_MESSAGE` (empty),
//!   `MESSAGE_SIZE_TOO_LARGE` (above 1,024 bytes), `INVALID_SIGNATURE` (a
//!   submit key that did not sign).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use api::auth::signature::{PublicKey, SigningKey};
use api::broker::hapi::{self, node, Opened};
use base64::Engine as _;
use bytes::Bytes;
use generator::message_sources::MirrorMessage;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use prost::Message as _;
use serde_json::json;
use sha2::{Digest, Sha384};
use shared::entity::EntityId;

use crate::mirror::MirrorServer;

/// What a transfer costs in fees, in tinybars (about what one costs).
pub const FEE: i64 = 100_000;
/// What creating a topic costs, in tinybars (about $0.01).
pub const TOPIC_FEE: i64 = 5_000_000;
/// What one message costs, in tinybars (about $0.0001).
pub const MESSAGE_FEE: i64 = 50_000;
/// The most bytes of a transaction, signatures included.
const TRANSACTION_MAX: usize = 6144;
/// The most bytes of one message.
const MESSAGE_MAX: usize = 1024;

/// Submits `bytes` (a signed `TransactionList`, as a wallet hands it
/// over) at `now` (seconds) to the first node: `SUCCESS` once recorded, or
/// the precheck status that refused it.
pub fn submit(mirror: &MirrorServer, nodes: &[&str], bytes: &[u8], now: i64) -> Result<(), &'static str> {
    let opened = hapi::open(bytes).map_err(|_| "INVALID_TRANSACTION_BODY")?;
    let first = opened.first().ok_or("INVALID_TRANSACTION_BODY")?;
    let node = first.body.node_account_id.and_then(|n| n.entity()).ok_or("INVALID_TRANSACTION_BODY")?;
    if !nodes.iter().any(|n| *n == node.to_string()) {
        return Err("INVALID_NODE_ACCOUNT");
    }
    let mut ledger = Ledger::default();
    ledger.consensus(mirror, node, first, bytes.len(), now, Balances::Unbounded)
}

/// Whether payers' balances are kept (the network's), or every payer can
/// pay (a wallet's transfer handed over directly).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Balances {
    Kept,
    Unbounded,
}

/// A topic as the network holds it.
struct Topic {
    admin_key: Option<hapi::Key>,
    submit_key: Option<hapi::Key>,
    sequence: u64,
    running_hash: Vec<u8>,
}

/// The network's state besides what the mirror node shows.
#[derive(Default)]
struct Ledger {
    balances: HashMap<EntityId, i64>,
    topics: HashMap<EntityId, Topic>,
    next_entity: u64,
    /// The last consensus time given (nanoseconds since the epoch).
    last: i128,
}

/// Checks `one` (sent to `node`, `size` bytes) at `now` and brings it to
/// consensus.
impl Ledger {
    fn consensus(
        &mut self,
        mirror: &MirrorServer,
        node: EntityId,
        one: &Opened,
        size: usize,
        now: i64,
        balances: Balances,
    ) -> Result<(), &'static str> {
        let body = &one.body;
        let (Some(id), Some(sent_to)) = (&body.transaction_id, body.node_account_id) else {
            return Err("INVALID_TRANSACTION_BODY");
        };
        if size > TRANSACTION_MAX {
            return Err("TRANSACTION_OVERSIZE");
        }
        if sent_to.entity() != Some(node) {
            return Err("INVALID_NODE_ACCOUNT");
        }
        if body.memo.len() > 100 {
            return Err("MEMO_TOO_LONG");
        }
        let duration = body.transaction_valid_duration.map_or(0, |d| d.seconds);
        if !(15..=180).contains(&duration) {
            return Err("INVALID_TRANSACTION_DURATION");
        }
        let start = id.transaction_valid_start.ok_or("INVALID_TRANSACTION_BODY")?;
        if start.seconds > now {
            return Err("INVALID_TRANSACTION_START");
        }
        if now > start.seconds + duration {
            return Err("TRANSACTION_EXPIRED");
        }
        let payer = id.account_id.and_then(|a| a.entity()).ok_or("INVALID_TRANSACTION_BODY")?;
        let (kind, key) = mirror.account_key(payer).ok_or("PAYER_ACCOUNT_NOT_FOUND")?;
        let payer_key = PublicKey::from_raw(&kind, &key).map_err(|_| "INVALID_SIGNATURE")?;
        if !signed_by(one, &payer_key) {
            return Err("INVALID_SIGNATURE");
        }
        let (name, fee) = match (&body.crypto_transfer, &body.consensus_create_topic, &body.consensus_submit_message) {
            (Some(_), None, None) => ("CRYPTOTRANSFER", FEE),
            (None, Some(_), None) => ("CONSENSUSCREATETOPIC", TOPIC_FEE),
            (None, None, Some(_)) => ("CONSENSUSSUBMITMESSAGE", MESSAGE_FEE),
            _ => return Err("NOT_SUPPORTED"),
        };
        let transaction_id = format!("{payer}-{}-{:09}", start.seconds, start.nanos);
        if mirror.has_transaction(&transaction_id) {
            return Err("DUPLICATE_TRANSACTION");
        }
        if body.transaction_fee < fee as u64 {
            return Err("INSUFFICIENT_TX_FEE");
        }
        let balance = self.balances.get(&payer).copied().unwrap_or(0);
        if balances == Balances::Kept && balance < fee {
            return Err("INSUFFICIENT_PAYER_BALANCE");
        }
        // The kind's own checks, then its effect.
        let mut entity = None;
        let mut transfers = Vec::new();
        if let Some(transfer) = &body.crypto_transfer {
            let legs = transfer.transfers.as_ref().map(|t| t.account_amounts.as_slice()).unwrap_or_default();
            if legs.iter().map(|l| l.amount).sum::<i64>() != 0 || legs.iter().any(|l| l.account_id.is_none()) {
                return Err("INVALID_ACCOUNT_AMOUNTS");
            }
            for leg in legs {
                let account = leg.account_id.unwrap().entity().ok_or("INVALID_ACCOUNT_AMOUNTS")?;
                transfers.push(json!({"account": account.to_string(), "amount": leg.amount, "is_approval": false}));
            }
        }
        let consensus = self.next_time(now);
        if let Some(create) = &body.consensus_create_topic {
            if create.memo.len() > 100 {
                return Err("MEMO_TOO_LONG");
            }
            let renew = create.auto_renew_period.map_or(0, |d| d.seconds);
            if !(6_999_999..=8_000_001).contains(&renew) {
                return Err("AUTORENEW_DURATION_NOT_IN_RANGE");
            }
            if let Some(admin) = &create.admin_key {
                if !key_signed(one, admin) {
                    return Err("INVALID_SIGNATURE");
                }
            }
            self.next_entity += 1;
            let topic = EntityId { shard: 0, realm: 0, num: 5_000_000 + self.next_entity };
            let key_json = |key: &Option<hapi::Key>| key.as_ref().map(key_json);
            mirror.record_topic(
                topic,
                json!({"topic_id": topic.to_string(), "memo": create.memo, "admin_key": key_json(&create.admin_key),
                       "submit_key": key_json(&create.submit_key), "deleted": false,
                       "created_timestamp": consensus, "auto_renew_period": renew}),
            );
            self.topics.insert(
                topic,
                Topic {
                    admin_key: create.admin_key.clone(),
                    submit_key: create.submit_key.clone(),
                    sequence: 0,
                    running_hash: vec![0; 48],
                },
            );
            entity = Some(topic);
        }
        if let Some(submit) = &body.consensus_submit_message {
            let topic_id = submit.topic_id.and_then(|t| t.entity()).ok_or("INVALID_TOPIC_ID")?;
            let topic = self.topics.get_mut(&topic_id).ok_or("INVALID_TOPIC_ID")?;
            if submit.message.is_empty() {
                return Err("INVALID_TOPIC_MESSAGE");
            }
            if submit.message.len() > MESSAGE_MAX {
                return Err("MESSAGE_SIZE_TOO_LARGE");
            }
            if topic.submit_key.as_ref().is_some_and(|k| !key_signed(one, k)) {
                return Err("INVALID_SIGNATURE");
            }
            debug_assert!(topic.admin_key.is_none() || topic.sequence < u64::MAX);
            topic.sequence += 1;
            topic.running_hash = Sha384::new()
                .chain_update(&topic.running_hash)
                .chain_update(topic.sequence.to_be_bytes())
                .chain_update(&submit.message)
                .finalize()
                .to_vec();
            let encode = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
            mirror.record_message(MirrorMessage {
                consensus_timestamp: consensus.clone(),
                message: encode(&submit.message),
                payer_account_id: payer.to_string(),
                running_hash: encode(&topic.running_hash),
                running_hash_version: 3,
                sequence_number: topic.sequence,
                topic_id: topic_id.to_string(),
                chunk_info: None,
            });
            entity = Some(topic_id);
        }
        transfers.push(json!({"account": payer.to_string(), "amount": -fee, "is_approval": false}));
        transfers.push(json!({"account": node.to_string(), "amount": fee, "is_approval": false}));
        if balances == Balances::Kept {
            *self.balances.entry(payer).or_default() -= fee;
        }
        let recorded = mirror.record_transaction(json!({
            "transaction_id": transaction_id,
            "consensus_timestamp": consensus,
            "valid_start_timestamp": format!("{}.{:09}", start.seconds, start.nanos),
            "valid_duration_seconds": duration.to_string(),
            "charged_tx_fee": fee,
            "max_fee": body.transaction_fee.to_string(),
            "memo_base64": base64::engine::general_purpose::STANDARD.encode(body.memo.as_bytes()),
            "name": name,
            "node": node.to_string(),
            "nonce": 0,
            "result": "SUCCESS",
            "scheduled": false,
            "entity_id": entity.map(|e| e.to_string()),
            "transfers": transfers,
        }));
        debug_assert!(recorded, "a duplicate was refused above");
        Ok(())
    }

    /// A consensus time after every one given, at or after `now`.
    fn next_time(&mut self, now: i64) -> String {
        self.last = (self.last + 1).max(now as i128 * 1_000_000_000);
        format!("{}.{:09}", self.last / 1_000_000_000, self.last % 1_000_000_000)
    }
}

/// A key as the mirror node shows it.
fn key_json(key: &hapi::Key) -> serde_json::Value {
    match key.ed25519.is_empty() {
        false => json!({"_type": "ED25519", "key": shared::http::hex(&key.ed25519)}),
        true => json!({"_type": "ECDSA_SECP256K1", "key": shared::http::hex(&key.ecdsa_secp256k1)}),
    }
}

/// Whether one of `one`'s signatures is `key`'s over its body bytes.
fn signed_by(one: &Opened, key: &PublicKey) -> bool {
    let raw = key.raw();
    one.signatures.iter().any(|pair| {
        let signature = match key {
            PublicKey::Ed25519(_) => &pair.ed25519,
            PublicKey::Secp256k1(_) => &pair.ecdsa_secp256k1,
        };
        raw.starts_with(&pair.pub_key_prefix) && key.verifies(&one.body_bytes, signature)
    })
}

fn key_signed(one: &Opened, key: &hapi::Key) -> bool {
    let public = match key.ed25519.is_empty() {
        false => PublicKey::from_raw("ED25519", &shared::http::hex(&key.ed25519)),
        true => PublicKey::from_raw("ECDSA_SECP256K1", &shared::http::hex(&key.ecdsa_secp256k1)),
    };
    public.is_ok_and(|k| signed_by(one, &k))
}

/// The network: its nodes on loopback, over `mirror`.
pub struct Network {
    pub mirror: Arc<MirrorServer>,
    /// Each node's account and address.
    pub nodes: Vec<(EntityId, SocketAddr)>,
    ledger: Arc<Mutex<Ledger>>,
    knobs: Arc<Knobs>,
    /// Where accepted transactions are written, if anywhere ([`Network::keep_in`]).
    kept: Arc<Mutex<Option<std::fs::File>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// One accepted transaction as [`Network::keep_in`] writes it, a JSON
/// line: the node that took it, the time it took it at (seconds) and its
/// bytes (base64).
fn kept_line(node: EntityId, now: i64, transaction: &[u8]) -> String {
    let transaction = base64::engine::general_purpose::STANDARD.encode(transaction);
    json!({"node": node.to_string(), "now": now, "transaction": transaction}).to_string() + "\n"
}

/// What a test can do to the nodes.
#[derive(Default)]
struct Knobs {
    /// While set, every call is answered gRPC `UNAVAILABLE`.
    paused: AtomicBool,
    /// Calls answered so while paused.
    refused: AtomicUsize,
}

/// Tinybars each account the mirror node knows starts with.
pub const START_BALANCE: i64 = 10_000 * 100_000_000;

impl Network {
    /// Starts a node for each of `nodes` (account ids) on loopback; the
    /// accounts the mirror node knows now hold [`START_BALANCE`].
    pub async fn start(mirror: Arc<MirrorServer>, nodes: &[&str], accounts: &[&str]) -> Network {
        let mut listeners = Vec::new();
        for node in nodes {
            listeners.push((node.parse().unwrap(), tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()));
        }
        Network::start_on(mirror, listeners, accounts)
    }

    /// [`Network::start`] with each node on its listener.
    pub fn start_on(
        mirror: Arc<MirrorServer>,
        nodes: Vec<(EntityId, tokio::net::TcpListener)>,
        accounts: &[&str],
    ) -> Network {
        let ledger: Arc<Mutex<Ledger>> = Arc::default();
        for account in accounts {
            ledger.lock().unwrap().balances.insert(account.parse().unwrap(), START_BALANCE);
        }
        let knobs: Arc<Knobs> = Arc::default();
        let kept: Arc<Mutex<Option<std::fs::File>>> = Arc::default();
        let mut started = Vec::new();
        let mut tasks = Vec::new();
        for (account, listener) in nodes {
            started.push((account, listener.local_addr().unwrap()));
            let node = Node {
                account,
                mirror: mirror.clone(),
                ledger: ledger.clone(),
                knobs: knobs.clone(),
                kept: kept.clone(),
            };
            tasks.push(tokio::spawn(serve(listener, Arc::new(node))));
        }
        Network { mirror, nodes: started, ledger, knobs, kept, tasks }
    }

    /// Keeps the network's state in `path`, one accepted transaction a
    /// line: those already there are taken again first, in order and at
    /// their times (the same topics, messages, balances and consensus
    /// times), then each one accepted is added. Answers how many were
    /// taken again. A line that does not read or is not accepted again is
    /// an error naming it.
    pub fn keep_in(&self, path: &std::path::Path) -> anyhow::Result<usize> {
        use anyhow::Context as _;
        use std::io::BufRead as _;
        let mut taken = 0;
        // Held throughout: a transaction sent meanwhile waits, then is kept.
        let mut ledger = self.ledger.lock().unwrap();
        if path.exists() {
            let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
                let at = || format!("{} line {}", path.display(), n + 1);
                let kept: serde_json::Value = serde_json::from_str(&line.with_context(at)?).with_context(at)?;
                let (Some(node), Some(now), Some(transaction)) =
                    (kept["node"].as_str(), kept["now"].as_i64(), kept["transaction"].as_str())
                else {
                    anyhow::bail!("{}: expected node, now and transaction", at());
                };
                let bytes = base64::engine::general_purpose::STANDARD.decode(transaction).with_context(at)?;
                let node: EntityId = node.parse().map_err(|_| anyhow::anyhow!("{}: a node id", at()))?;
                let one = hapi::Transaction::decode(&bytes[..])
                    .ok()
                    .and_then(|t| hapi::open_one(&t).ok())
                    .with_context(|| format!("{}: not a transaction", at()))?;
                ledger
                    .consensus(&self.mirror, node, &one, bytes.len(), now, Balances::Kept)
                    .map_err(|status| anyhow::anyhow!("{}: refused again: {status}", at()))?;
                taken += 1;
            }
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        *self.kept.lock().unwrap() = Some(file);
        drop(ledger);
        Ok(taken)
    }

    /// Makes every node answer `UNAVAILABLE` (down for maintenance), or
    /// take calls again.
    pub fn pause(&self, paused: bool) {
        self.knobs.paused.store(paused, Ordering::SeqCst);
    }

    /// Calls answered `UNAVAILABLE` so far.
    pub fn refused(&self) -> usize {
        self.knobs.refused.load(Ordering::SeqCst)
    }

    /// `--hapi-node`'s value for the nodes.
    pub fn hapi_nodes(&self) -> String {
        self.nodes.iter().map(|(account, addr)| format!("{account}={addr}")).collect::<Vec<_>>().join(",")
    }

    /// What `account` holds, in tinybars.
    pub fn balance(&self, account: &str) -> i64 {
        self.ledger.lock().unwrap().balances.get(&account.parse().unwrap()).copied().unwrap_or(0)
    }

    pub fn set_balance(&self, account: &str, tinybars: i64) {
        self.ledger.lock().unwrap().balances.insert(account.parse().unwrap(), tinybars);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

/// One node: its account, and the network it is part of.
struct Node {
    account: EntityId,
    mirror: Arc<MirrorServer>,
    ledger: Arc<Mutex<Ledger>>,
    knobs: Arc<Knobs>,
    kept: Arc<Mutex<Option<std::fs::File>>>,
}

/// Serves gRPC calls to `node` on `listener` (HTTP/2 without TLS).
async fn serve(listener: tokio::net::TcpListener, node: Arc<Node>) {
    while let Ok((stream, _)) = listener.accept().await {
        let node = node.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let node = node.clone();
                async move { Ok::<_, Infallible>(call(request, &node).await) }
            });
            let builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
        });
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// One gRPC call: a transaction in, its precheck out.
async fn call(request: hyper::Request<hyper::body::Incoming>, node: &Node) -> hyper::Response<Body> {
    let method = request.uri().path().trim_start_matches('/').to_string();
    let grpc = request.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return status_only(13, "the request body broke off");
    };
    if !grpc {
        return status_only(3, "not a gRPC request");
    }
    if node.knobs.paused.load(Ordering::SeqCst) {
        node.knobs.refused.fetch_add(1, Ordering::SeqCst);
        return status_only(14, "the node is unavailable");
    }
    if !matches!(
        method.as_str(),
        "proto.ConsensusService/createTopic"
            | "proto.ConsensusService/submitMessage"
            | "proto.CryptoService/cryptoTransfer"
    ) {
        return status_only(12, "unimplemented");
    }
    let Some(message) = node::unframe(&body) else { return status_only(3, "not one gRPC message") };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let precheck = match hapi::Transaction::decode(message).ok().and_then(|t| hapi::open_one(&t).ok()) {
        None => Err("INVALID_TRANSACTION_BODY"),
        Some(one) => {
            // Kept under the ledger's lock: the file holds them in the order taken.
            let mut ledger = node.ledger.lock().unwrap();
            let taken = ledger.consensus(&node.mirror, node.account, &one, message.len(), now, Balances::Kept);
            if let (Ok(()), Some(file)) = (&taken, node.kept.lock().unwrap().as_mut()) {
                let line = kept_line(node.account, now, message);
                if let Err(e) = std::io::Write::write_all(file, line.as_bytes()) {
                    eprintln!("network: a transaction could not be kept: {e}");
                }
            }
            taken
        }
    };
    let code = match precheck {
        Ok(()) => 0,
        Err(status) => hapi::status_code(status).expect("a known status"),
    };
    let answer = hapi::TransactionResponse { node_transaction_precheck_code: code, cost: 0 }.encode_to_vec();
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let frames = futures_util::stream::iter([
        Ok::<_, Infallible>(Frame::data(Bytes::from(node::frame(&answer)))),
        Ok(Frame::trailers(trailers)),
    ]);
    hyper::Response::builder()
        .header("content-type", "application/grpc")
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .unwrap()
}

/// A gRPC error: a head with its status and no body ("trailers only").
fn status_only(status: u32, message: &str) -> hyper::Response<Body> {
    hyper::Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", status.to_string())
        .header("grpc-message", message)
        .body(BodyExt::boxed(Full::new(Bytes::new())))
        .unwrap()
}

/// Makes dev `account` known to the mirror node with its dev key.
pub fn known(mirror: &MirrorServer, account: &str) {
    let key = api::auth::login::key_for(api::auth::login::DEV_KEYS, account).unwrap();
    let kind = match key {
        SigningKey::Ed25519(_) => "ED25519",
        SigningKey::Secp256k1(_) => "ECDSA_SECP256K1",
    };
    mirror.set_account(account.parse().unwrap(), kind, &shared::http::hex(&key.public_key().raw()));
}

/// The private key of a dev account, as DER hex.
pub fn private_key(account: &str) -> String {
    let keys: serde_json::Value = serde_json::from_str(api::auth::login::DEV_KEYS).unwrap();
    keys["keys"][account]["privateKey"].as_str().unwrap().to_string()
}

/// Signs every transaction of `bytes` with `key`, as a wallet does: over
/// the body bytes as given.
pub fn sign(bytes: &[u8], key: &SigningKey) -> Vec<u8> {
    let list = hapi::TransactionList::decode(bytes).unwrap();
    let transactions = list
        .transactions
        .into_iter()
        .map(|t| {
            let mut signed = hapi::SignedTransaction::decode(t.signed_transaction_bytes.as_slice()).unwrap();
            let pair = hapi::signature_pair(key, &signed.body_bytes);
            signed.sig_map.get_or_insert_default().sig_pair.push(pair);
            hapi::Transaction { signed_transaction_bytes: signed.encode_to_vec() }
        })
        .collect();
    hapi::TransactionList { transactions }.encode_to_vec()
}
