//! The indexer: follows each chain's vault, payment module and receipt by
//! block ranges, so that a policy made on chain without the broker is
//! listed, a policy's price and status stay current, and purchases and
//! receipt moves are known without asking the chain.
//!
//! **Ranges.** From the block after the last one read (the deployment's
//! block at first) to the head, at most `--secrets-index-block-range`
//! blocks per `eth_getLogs`. What a range changes is computed first (a
//! policy's state is read from the chain, never decoded from its log
//! alone) and stored in one transaction with the range's checkpoint: the
//! last block's number and hash. A restart resumes after the last
//! checkpoint.
//!
//! **Reorganisations.** Before each range the last checkpoint's hash is
//! compared with the chain's block at that height. When they differ, the
//! newest kept checkpoint the chain still has is where the fork began;
//! what was read after it is forgotten ([`stored::rewind`]) and read again.
//! `--secrets-index-depth` checkpoints are kept: a deeper reorganisation
//! replays from the deployment. A range whose last block changed while it
//! was read is read again.
//!
//! **Unreachable nodes.** A failed round waits `--secrets-index-every-ms`,
//! doubled after each failure up to `--secrets-index-backoff-max-ms`.

use std::future::Future;
use std::sync::Arc;

use alloy_sol_types::SolEvent;
use programmable_secrets::contracts::{AccessReceipt, PaymentModule, PolicyVault};
use programmable_secrets::{hashes, B256};

use super::chain;
use super::rpc::{Log, RpcError};
use super::{address, Chain, Settings};
use crate::app::App;
use crate::store::secrets::{self as stored, PolicyRecord, Purchase};
use crate::store::{Conn, Failure};
use broker_model::journal::Event;
use programmable_secrets::deployment::Deployment;

/// Runs until `stop` resolves: every chain indexed in turn each round.
pub async fn run(app: Arc<App>, stop: impl Future<Output = ()>) {
    let Some(settings) = app.secrets.clone() else { return };
    tokio::pin!(stop);
    let mut backoff = vec![settings.index.every; settings.chains.len()];
    loop {
        let mut wait = settings.index.every;
        for (i, chain) in settings.chains.iter().enumerate() {
            match round(&app, &settings, chain).await {
                Ok(()) => backoff[i] = settings.index.every,
                Err(e) => {
                    tracing::warn!(chain = chain.deployment.chain_id, error = %e, "programmable secrets: indexing");
                    wait = wait.max(backoff[i]);
                    backoff[i] = (backoff[i] * 2).min(settings.index.backoff_max.max(settings.index.every));
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Why a round stopped.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error("{0}")]
    Rpc(#[from] RpcError),
    #[error("{0}")]
    Store(#[from] Failure),
    #[error("the node has no block {0}")]
    NoBlock(u64),
}

/// One change a range makes.
enum Change {
    Policy { policy_id: u64, record: Box<PolicyRecord> },
    DatasetStatus { dataset_id: u64, active: bool },
    Purchase(Purchase),
    Move { token: u64, block: u64, log_index: u64, receiver: String },
}

/// Reads the chain up to its head, a range at a time; one range per call
/// at most `block_range` blocks, so that a long catch-up stores as it goes.
async fn round(app: &App, settings: &Settings, chain: &Chain) -> Result<(), RoundError> {
    let store = &app.store;
    let chain_id = chain.deployment.chain_id;
    let depth = settings.index.depth;
    let head = chain.rpc.block_number().await?;
    let kept = store.read(move |conn| stored::read_blocks(conn, chain_id, depth)).await?;
    let mut next = match kept.first() {
        Some((number, hash)) => {
            let now = chain.rpc.header(*number).await?.map(|h| hashes::hex(&h.hash));
            if now.as_deref() == Some(hash.as_str()) {
                number + 1
            } else {
                fork(app, chain, &kept).await? + 1
            }
        }
        None => chain.deployment.deployed_at_block,
    };
    while next <= head {
        let to = head.min(next + settings.index.block_range.max(1) - 1);
        let before = chain.rpc.header(to).await?.ok_or(RoundError::NoBlock(to))?;
        let d = &chain.deployment;
        let logs = chain.rpc.logs(&[d.policy_vault, d.payment_module, d.access_receipt], next, to).await?;
        let mut changes = Vec::new();
        for log in logs.iter().filter(|l| !l.removed) {
            if let Some(change) = change(chain, log).await? {
                changes.push(change);
            }
        }
        let after = chain.rpc.header(to).await?.ok_or(RoundError::NoBlock(to))?;
        if after.hash != before.hash {
            // The range's end moved while it was read: read it again.
            continue;
        }
        let hash = hashes::hex(&after.hash);
        let now = settings.clock.now_ms();
        let deployment = chain.deployment.clone();
        let journaled = store
            .write(move |conn| {
                let mut newest = None;
                for change in &changes {
                    newest = apply(conn, &deployment, change, now)?.or(newest);
                }
                stored::checkpoint(conn, chain_id, to, &hash, depth)?;
                Ok(newest)
            })
            .await?;
        catalog_changed(app, journaled);
        next = to + 1;
    }
    Ok(())
}

/// Finds where the chain forked from what was read, forgets what was read
/// after, and returns the last block still held.
async fn fork(app: &App, chain: &Chain, kept: &[(u64, String)]) -> Result<u64, RoundError> {
    let mut held = chain.deployment.deployed_at_block.saturating_sub(1);
    for (number, hash) in kept {
        let now = chain.rpc.header(*number).await?.map(|h| hashes::hex(&h.hash));
        if now.as_deref() == Some(hash.as_str()) {
            held = *number;
            break;
        }
    }
    let chain_id = chain.deployment.chain_id;
    tracing::info!(chain = chain_id, from = held + 1, "programmable secrets: a reorganisation; reading again");
    let now = app.secrets.as_ref().map_or(0, |s| s.clock.now_ms());
    let journaled = app
        .store
        .write(move |conn| {
            let mut newest = None;
            for policy_id in stored::rewind(conn, chain_id, held)? {
                let gone = Event::SecretPolicyGone { chain_id, policy_id };
                newest = Some(stored::journal(conn, now, gone)?);
            }
            Ok(newest)
        })
        .await?;
    catalog_changed(app, journaled);
    Ok(held)
}

/// The catalog changed in the journal as `seq`: answers made from the
/// store until a build holds it, and the journal writer woken.
fn catalog_changed(app: &App, seq: Option<i64>) {
    if let Some(seq) = seq {
        app.secrets_changes.saw(seq);
        app.journal.wake.notify_one();
    }
}

/// Journals the published row of `policy_id` as the catalog now shows it.
fn journal_policy(conn: &Conn, deployment: &Deployment, policy_id: u64, now: i64) -> Result<Option<i64>, Failure> {
    let Some(policy) = stored::published(conn, deployment.chain_id, policy_id)? else { return Ok(None) };
    let entry = super::catalog_entry(deployment, &policy);
    stored::journal(conn, now, Event::SecretPolicy { policy: Box::new(entry) }).map(Some)
}

fn topic_u64(log: &Log, index: usize) -> u64 {
    log.topics.get(index).map(|t| programmable_secrets::U256::from_be_bytes(t.0).saturating_to()).unwrap_or(0)
}

/// What one log changes, reading the chain where the log alone does not say.
async fn change(chain: &Chain, log: &Log) -> Result<Option<Change>, RpcError> {
    let d = &chain.deployment;
    let Some(topic) = log.topics.first() else { return Ok(None) };
    let block = log.block_number.saturating_to::<u64>();
    if log.address == d.policy_vault
        && (*topic == PolicyVault::PolicyCreated::SIGNATURE_HASH
            || *topic == PolicyVault::PolicyUpdated::SIGNATURE_HASH)
    {
        let policy_id = topic_u64(log, 1);
        let Some(on_chain) = chain::read(&chain.rpc, d.policy_vault, policy_id).await? else { return Ok(None) };
        let mut record = on_chain.record(chain);
        if *topic == PolicyVault::PolicyCreated::SIGNATURE_HASH {
            record.created_tx_hash = Some(hashes::hex(&log.transaction_hash));
            record.created_block_number = Some(block);
            record.created_log_index = Some(log.log_index.saturating_to());
        }
        return Ok(Some(Change::Policy { policy_id, record: Box::new(record) }));
    }
    if log.address == d.policy_vault && *topic == PolicyVault::DatasetStatusUpdated::SIGNATURE_HASH {
        let event = decode::<PolicyVault::DatasetStatusUpdated>(log)?;
        return Ok(Some(Change::DatasetStatus { dataset_id: event.datasetId.saturating_to(), active: event.active }));
    }
    if log.address == d.payment_module && *topic == PaymentModule::AccessGranted::SIGNATURE_HASH {
        let e = decode::<PaymentModule::AccessGranted>(log)?;
        return Ok(Some(Change::Purchase(Purchase {
            chain_id: d.chain_id,
            payment_module: address(&d.payment_module),
            receipt_token_id: e.receiptTokenId.saturating_to(),
            policy_id: e.policyId.saturating_to(),
            dataset_id: e.datasetId.saturating_to(),
            buyer: address(&e.buyer),
            recipient: address(&e.recipient),
            price_wei: e.price.to_string(),
            purchased_at: e.purchasedAt,
            tx_hash: hashes::hex(&log.transaction_hash),
            block_number: block,
        })));
    }
    if log.address == d.access_receipt && *topic == AccessReceipt::Transfer::SIGNATURE_HASH {
        let e = decode::<AccessReceipt::Transfer>(log)?;
        return Ok(Some(Change::Move {
            token: e.tokenId.saturating_to(),
            block,
            log_index: log.log_index.saturating_to(),
            receiver: address(&e.to),
        }));
    }
    Ok(None)
}

fn decode<E: SolEvent>(log: &Log) -> Result<E, RpcError> {
    let topics: Vec<B256> = log.topics.clone();
    E::decode_raw_log(topics, &log.data)
        .map_err(|e| RpcError::Garbage { method: "eth_getLogs", problem: format!("{}: {e}", E::SIGNATURE) })
}

/// Stores one change; a change of the catalog is journaled, its `seq`
/// returned.
fn apply(conn: &Conn, deployment: &Deployment, change: &Change, now: i64) -> Result<Option<i64>, Failure> {
    let chain_id = deployment.chain_id;
    match change {
        Change::Policy { policy_id, record } => {
            stored::index_policy(conn, chain_id, *policy_id, record, now)?;
            journal_policy(conn, deployment, *policy_id, now)
        }
        Change::DatasetStatus { dataset_id, active } => {
            let mut newest = None;
            for policy_id in stored::set_dataset_active(conn, chain_id, *dataset_id, *active, now)? {
                newest = journal_policy(conn, deployment, policy_id, now)?.or(newest);
            }
            Ok(newest)
        }
        Change::Purchase(purchase) => stored::upsert_purchase(conn, purchase).map(|_| None),
        Change::Move { token, block, log_index, receiver } => {
            stored::add_move(conn, chain_id, *token, *block, *log_index, receiver).map(|_| None)
        }
    }
}
