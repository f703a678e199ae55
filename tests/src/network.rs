//! A small Hedera network for payment tests: it takes a signed transfer
//! as a wallet submits it, checks it as a consensus node's precheck does,
//! and, when it passes, records it on the [`MirrorServer`] the way the
//! mirror node shows a transfer that reached consensus.
//!
//! The checks (by the network's status names): `INVALID_TRANSACTION_BODY`
//! (no id, node or transfer), `INVALID_NODE_ACCOUNT` (not one of the
//! network's nodes), `MEMO_TOO_LONG` (over 100 bytes),
//! `INVALID_TRANSACTION_DURATION` (outside 15 to 180 s),
//! `INVALID_TRANSACTION_START` (starts in the future),
//! `TRANSACTION_EXPIRED` (its window has passed), `INVALID_ACCOUNT_AMOUNTS`
//! (the transfers do not sum to zero), `PAYER_ACCOUNT_NOT_FOUND`,
//! `INVALID_SIGNATURE` (no signature of the payer's key over the body
//! bytes: ed25519 over the bytes, ECDSA secp256k1 over their keccak256),
//! `INSUFFICIENT_TX_FEE` (a maximum fee below the fee), and
//! `DUPLICATE_TRANSACTION` (the id was taken).

use api::auth::signature::PublicKey;
use api::broker::hapi;
use base64::Engine as _;
use serde_json::json;

use crate::mirror::MirrorServer;

/// What a transfer costs in fees, in tinybars (about what one costs).
pub const FEE: i64 = 100_000;

/// Submits `bytes` (a signed `TransactionList`) at `now` (seconds):
/// `SUCCESS` once recorded, or the precheck status that refused it.
pub fn submit(mirror: &MirrorServer, nodes: &[&str], bytes: &[u8], now: i64) -> Result<(), &'static str> {
    let opened = hapi::open(bytes).map_err(|_| "INVALID_TRANSACTION_BODY")?;
    let Some(first) = opened.first() else { return Err("INVALID_TRANSACTION_BODY") };
    let body = &first.body;
    let (Some(id), Some(node), Some(transfer)) = (&body.transaction_id, body.node_account_id, &body.crypto_transfer)
    else {
        return Err("INVALID_TRANSACTION_BODY");
    };
    let node = node.entity().ok_or("INVALID_NODE_ACCOUNT")?;
    if !nodes.iter().any(|n| *n == node.to_string()) {
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
    let legs = transfer.transfers.as_ref().map(|t| t.account_amounts.as_slice()).unwrap_or_default();
    if legs.iter().map(|l| l.amount).sum::<i64>() != 0 || legs.iter().any(|l| l.account_id.is_none()) {
        return Err("INVALID_ACCOUNT_AMOUNTS");
    }
    let payer = id.account_id.and_then(|a| a.entity()).ok_or("INVALID_TRANSACTION_BODY")?;
    let (kind, key) = mirror.account_key(payer).ok_or("PAYER_ACCOUNT_NOT_FOUND")?;
    let public = PublicKey::from_raw(&kind, &key).map_err(|_| "INVALID_SIGNATURE")?;
    let raw = api::auth::signature::decode_hex(&key).unwrap_or_default();
    let signed = first.signatures.iter().any(|pair| {
        let signature = if kind == "ED25519" { &pair.ed25519 } else { &pair.ecdsa_secp256k1 };
        raw.starts_with(&pair.pub_key_prefix) && public.verifies(&first.body_bytes, signature)
    });
    if !signed {
        return Err("INVALID_SIGNATURE");
    }
    if body.transaction_fee < FEE as u64 {
        return Err("INSUFFICIENT_TX_FEE");
    }
    let mut transfers: Vec<_> = legs
        .iter()
        .map(|l| json!({"account": l.account_id.unwrap().entity().unwrap().to_string(), "amount": l.amount, "is_approval": false}))
        .collect();
    transfers.push(json!({"account": payer.to_string(), "amount": -FEE, "is_approval": false}));
    transfers.push(json!({"account": node.to_string(), "amount": FEE, "is_approval": false}));
    let recorded = mirror.record_transaction(json!({
        "transaction_id": format!("{payer}-{}-{:09}", start.seconds, start.nanos),
        "consensus_timestamp": format!("{now}.000000001"),
        "valid_start_timestamp": format!("{}.{:09}", start.seconds, start.nanos),
        "valid_duration_seconds": duration.to_string(),
        "charged_tx_fee": FEE,
        "max_fee": body.transaction_fee.to_string(),
        "memo_base64": base64::engine::general_purpose::STANDARD.encode(body.memo.as_bytes()),
        "name": "CRYPTOTRANSFER",
        "node": node.to_string(),
        "nonce": 0,
        "result": "SUCCESS",
        "scheduled": false,
        "transfers": transfers,
    }));
    if recorded {
        Ok(())
    } else {
        Err("DUPLICATE_TRANSACTION")
    }
}

/// Signs every transaction of `bytes` with `key`, as a wallet does.
pub fn sign(bytes: &[u8], key: &api::auth::signature::SigningKey) -> Vec<u8> {
    use prost::Message as _;
    let list = hapi::TransactionList::decode(bytes).unwrap();
    let transactions = list
        .transactions
        .into_iter()
        .map(|t| {
            let mut signed = hapi::SignedTransaction::decode(t.signed_transaction_bytes.as_slice()).unwrap();
            let signature = key.sign(&signed.body_bytes).to_vec();
            let public = key.public_key().to_der_hex();
            let raw = &public
                [public.len() - if matches!(key, api::auth::signature::SigningKey::Ed25519(_)) { 64 } else { 66 }..];
            let mut pair = hapi::SignaturePair {
                pub_key_prefix: api::auth::signature::decode_hex(raw).unwrap(),
                ..Default::default()
            };
            match key {
                api::auth::signature::SigningKey::Ed25519(_) => pair.ed25519 = signature,
                api::auth::signature::SigningKey::Secp256k1(_) => pair.ecdsa_secp256k1 = signature,
            }
            signed.sig_map.get_or_insert_default().sig_pair.push(pair);
            hapi::Transaction { signed_transaction_bytes: signed.encode_to_vec() }
        })
        .collect();
    hapi::TransactionList { transactions }.encode_to_vec()
}
