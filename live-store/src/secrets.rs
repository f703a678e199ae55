//! Programmable Secrets: policies and their wrapped keys, key requests and
//! the record of every release and refusal, and what the indexer read
//! from the chains (purchases, receipt moves, the blocks it has read).
//!
//! A policy is one row from staging on: its id is the staging id, or
//! `onchain-<chain>-<policy>` for a policy the indexer found first. At
//! most one row per (chain, policy) is published (`finalized` or
//! `indexed`), by a unique index; confirming or importing a policy the
//! indexer listed first takes that row's place.

use crate::params;
use crate::sql::{Conn, Dialect, Optional, Row};
use serde::{Deserialize, Serialize};

use super::{closed, outbox, Failure};
use broker_model::catalog::SecretPolicy;
use broker_model::journal::Event;
use programmable_secrets::conditions::{Descriptor, Prepared};
use programmable_secrets::envelope::WrappedKey;

shared::vocabulary! {
    /// Where a policy stands.
    PolicyStatus, POLICY_STATUSES {
        Staged = "staged",
        Prepared = "prepared",
        Finalized = "finalized",
        Indexed = "indexed",
        Failed = "failed",
    }
}

shared::vocabulary! {
    /// Where a key request stands.
    RequestStatus, REQUEST_STATUSES {
        NonceIssued = "nonce-issued",
        Pending = "pending",
        Issued = "issued",
        Denied = "denied",
        Expired = "expired",
    }
}

/// What a policy view shows besides its row's own columns, kept as JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRecord {
    pub dataset_id: Option<u64>,
    /// The dataset's status on chain, when read (access needs it active).
    #[serde(default)]
    pub dataset_active: Option<bool>,
    pub provider_address: String,
    pub payout_address: String,
    pub payment_token: String,
    pub price_wei: String,
    pub receipt_transferable: bool,
    pub active: bool,
    pub ciphertext_hash: String,
    pub key_commitment: String,
    pub metadata_hash: String,
    pub provider_uaid: Option<String>,
    pub provider_uaid_hash: String,
    pub conditions_hash: Option<String>,
    pub condition_count: Option<u32>,
    pub conditions: Vec<Prepared>,
    pub declared_conditions: Vec<Descriptor>,
    pub metadata: Option<serde_json::Value>,
    /// The ciphertext's size in bytes, once held.
    pub ciphertext_bytes: Option<u64>,
    pub created_tx_hash: Option<String>,
    pub created_block_number: Option<u64>,
    pub created_log_index: Option<u64>,
    /// The policy's `createdAt` on chain, Unix seconds.
    pub policy_created_at: Option<u64>,
    pub confirmed_at: Option<i64>,
    pub indexed_at: Option<i64>,
}

/// A policy row.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub id: String,
    /// The provider account that staged it; none for one found on chain.
    pub account: Option<String>,
    pub chain_id: u64,
    pub policy_id: Option<u64>,
    pub status: PolicyStatus,
    pub record: PolicyRecord,
    pub wrapped_key: Option<WrappedKey>,
    /// Relative to the ciphertext folder.
    pub ciphertext_path: Option<String>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Policy {
    /// The key can be released: wrapped key, ciphertext and metadata held.
    pub fn key_release_ready(&self) -> bool {
        self.wrapped_key.is_some() && self.ciphertext_path.is_some() && self.record.metadata.is_some()
    }
}

const POLICY_COLUMNS: &str = "id, account_id, chain_id, policy_id, status, record, wrapped_key, ciphertext_path, \
                              last_error, created_at, updated_at";

fn json_column<T: for<'de> Deserialize<'de>>(r: &Row<'_>, column: usize) -> Result<T, Failure> {
    let text: String = r.get(column)?;
    serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("column {column}: {e}")))
}

fn read_policy(r: &Row<'_>) -> Result<Policy, Failure> {
    let wrapped: Option<String> = r.get(6)?;
    Ok(Policy {
        id: r.get(0)?,
        account: r.get(1)?,
        chain_id: r.get::<i64>(2)? as u64,
        policy_id: r.get::<Option<i64>>(3)?.map(|p| p as u64),
        status: closed(r, 4)?,
        record: json_column(r, 5)?,
        wrapped_key: match wrapped {
            None => None,
            Some(_) => Some(json_column(r, 6)?),
        },
        ciphertext_path: r.get(7)?,
        last_error: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a record serialises")
}

/// Stores a new staged policy.
pub fn insert(conn: &Conn, policy: &Policy) -> Result<(), Failure> {
    conn.execute(
        &format!("INSERT INTO secret_policies ({POLICY_COLUMNS}, listed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
        params![
            policy.id,
            policy.account,
            policy.chain_id as i64,
            policy.policy_id.map(|p| p as i64),
            policy.status.as_str(),
            to_json(&policy.record),
            policy.wrapped_key.as_ref().map(to_json),
            policy.ciphertext_path,
            policy.last_error,
            policy.created_at,
            policy.updated_at,
            listed_at(policy),
        ],
    )?;
    Ok(())
}

fn listed_at(policy: &Policy) -> Option<i64> {
    matches!(policy.status, PolicyStatus::Finalized | PolicyStatus::Indexed)
        .then(|| policy.record.policy_created_at.unwrap_or(0) as i64)
}

pub fn policy(conn: &Conn, id: &str) -> Result<Option<Policy>, Failure> {
    let sql = format!("SELECT {POLICY_COLUMNS} FROM secret_policies WHERE id = ?1");
    conn.query_row(&sql, params![id], read_policy).optional()
}

/// The published row of an on-chain policy.
pub fn published(conn: &Conn, chain_id: u64, policy_id: u64) -> Result<Option<Policy>, Failure> {
    let sql = format!(
        "SELECT {POLICY_COLUMNS} FROM secret_policies
         WHERE chain_id = ?1 AND policy_id = ?2 AND status IN ('finalized', 'indexed')"
    );
    conn.query_row(&sql, params![chain_id as i64, policy_id as i64], read_policy).optional()
}

/// A page of the published policies, newest on chain first, and how many
/// there are. O(offset + limit) rows read, by the listing's index.
pub fn list(conn: &Conn, chain_id: Option<u64>, limit: usize, offset: usize) -> Result<(Vec<Policy>, u64), Failure> {
    let chain = chain_id.map(|c| c as i64);
    let filter = "status IN ('finalized', 'indexed') AND (CAST(?1 AS BIGINT) IS NULL OR chain_id = ?1)";
    let total: i64 =
        conn.query_row(&format!("SELECT count(*) FROM secret_policies WHERE {filter}"), params![chain], |r| r.get(0))?;
    let sql = format!(
        "SELECT {POLICY_COLUMNS} FROM secret_policies WHERE {filter}
         ORDER BY listed_at DESC, chain_id, policy_id DESC LIMIT ?2 OFFSET ?3"
    );
    let rows = conn.query_map(&sql, params![chain, limit as i64, offset as i64], read_policy)?;
    Ok((rows, total as u64))
}

/// Every published policy of a chain (the build's catalog). O(n).
pub fn all_published(conn: &Conn) -> Result<Vec<Policy>, Failure> {
    let sql = format!(
        "SELECT {POLICY_COLUMNS} FROM secret_policies WHERE status IN ('finalized', 'indexed')
         ORDER BY chain_id, policy_id"
    );
    let rows = conn.query_map(&sql, [], read_policy)?;
    Ok(rows)
}

/// The staged policy marked failed, with why.
pub fn fail(conn: &Conn, id: &str, why: &str, now: i64) -> Result<(), Failure> {
    conn.execute(
        "UPDATE secret_policies SET status = 'failed', last_error = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, why, now],
    )?;
    Ok(())
}

/// Why a policy cannot be published in a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Publish {
    /// Published, its catalog change journaled as `seq`.
    Published(Box<Policy>, i64),
    /// Another row holds this on-chain policy with its key.
    AlreadyPublished { by: String },
}

/// Publishes `policy` (finalized from staging, or imported): a key-less row
/// the indexer made for the same on-chain policy gives way to it (or takes
/// it, under the same id); a published row that holds a key refuses it.
pub fn publish(conn: &Conn, policy: &Policy, entry: SecretPolicy) -> Result<Publish, Failure> {
    let (chain_id, policy_id) = (policy.chain_id, policy.policy_id.expect("a published policy is on chain"));
    if let Some(held) = published(conn, chain_id, policy_id)? {
        if held.wrapped_key.is_some() {
            return Ok(Publish::AlreadyPublished { by: held.id });
        }
        if held.id != policy.id {
            conn.execute("DELETE FROM secret_policies WHERE id = ?1", params![held.id])?;
        }
    }
    conn.execute(
        "INSERT INTO secret_policies (id, account_id, chain_id, policy_id, status, record, wrapped_key,
             ciphertext_path, last_error, created_at, updated_at, listed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10, ?11)
         ON CONFLICT (id) DO UPDATE SET account_id = ?2, policy_id = ?4, status = ?5, record = ?6, wrapped_key = ?7,
             ciphertext_path = ?8, last_error = NULL, updated_at = ?10, listed_at = ?11",
        params![
            policy.id,
            policy.account,
            chain_id as i64,
            policy_id as i64,
            policy.status.as_str(),
            to_json(&policy.record),
            policy.wrapped_key.as_ref().map(to_json),
            policy.ciphertext_path,
            policy.created_at,
            policy.updated_at,
            listed_at(policy),
        ],
    )?;
    let seq = journal(conn, policy.updated_at, Event::SecretPolicy { policy: Box::new(entry) })?;
    Ok(Publish::Published(Box::new(policy.clone()), seq))
}

/// Journals a change of the catalog (`secretPolicy`, `secretPolicyGone`)
/// for the next build, and notes its `seq` as the catalog's newest.
pub fn journal(conn: &Conn, at: i64, event: Event) -> Result<i64, Failure> {
    debug_assert!(matches!(event, Event::SecretPolicy { .. } | Event::SecretPolicyGone { .. }));
    let seq = outbox::push(conn, at, &event)?;
    conn.execute(
        "INSERT INTO secret_catalog_changes (id, seq) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
        params![seq],
    )?;
    Ok(seq)
}

/// The `seq` of the catalog's newest journaled change (0: none).
pub fn catalog_newest(conn: &Conn) -> Result<i64, Failure> {
    conn.query_row("SELECT coalesce(max(seq), 0) FROM secret_catalog_changes", [], |r| r.get(0))
}

/// What the indexer read of an on-chain policy: a new row (`indexed`,
/// without key) or the chain's current state on the published row.
/// Returns whether a row was added.
pub fn index_policy(
    conn: &Conn,
    chain_id: u64,
    policy_id: u64,
    chain: &PolicyRecord,
    now: i64,
) -> Result<bool, Failure> {
    match published(conn, chain_id, policy_id)? {
        Some(mut held) => {
            let record = &mut held.record;
            record.active = chain.active;
            record.dataset_active = chain.dataset_active;
            record.price_wei = chain.price_wei.clone();
            record.metadata_hash = chain.metadata_hash.clone();
            if record.created_block_number.is_none() {
                record.created_block_number = chain.created_block_number;
                record.created_tx_hash = chain.created_tx_hash.clone();
            }
            record.indexed_at = Some(now);
            conn.execute(
                "UPDATE secret_policies SET record = ?2, updated_at = ?3 WHERE id = ?1",
                params![held.id, to_json(&held.record), now],
            )?;
            Ok(false)
        }
        None => {
            let mut record = chain.clone();
            record.indexed_at = Some(now);
            let policy = Policy {
                id: format!("onchain-{chain_id}-{policy_id}"),
                account: None,
                chain_id,
                policy_id: Some(policy_id),
                status: PolicyStatus::Indexed,
                record,
                wrapped_key: None,
                ciphertext_path: None,
                last_error: None,
                created_at: now,
                updated_at: now,
            };
            insert(conn, &policy)?;
            Ok(true)
        }
    }
}

/// A dataset's status changed on chain: every published policy of it shows
/// the dataset's `active` through its own (access needs both).
pub fn set_dataset_active(
    conn: &Conn,
    chain_id: u64,
    dataset_id: u64,
    active: bool,
    now: i64,
) -> Result<Vec<u64>, Failure> {
    let (dataset, set_active) = match conn.dialect() {
        Dialect::Sqlite => ("json_extract(record, '$.datasetId')", "json_set(record, '$.datasetActive', json(?3))"),
        Dialect::Postgres => (
            "CAST(record::jsonb ->> 'datasetId' AS BIGINT)",
            "jsonb_set(record::jsonb, '{datasetActive}', CAST(?3 AS jsonb))::text",
        ),
    };
    let of_dataset =
        format!("FROM secret_policies WHERE chain_id = ?1 AND {dataset} = ?2 AND status IN ('finalized', 'indexed')");
    let policies =
        conn.query_map(&format!("SELECT policy_id {of_dataset}"), params![chain_id as i64, dataset_id as i64], |r| {
            r.get::<u64>(0)
        })?;
    conn.execute(
        &format!(
            "UPDATE secret_policies SET record = {set_active}, updated_at = ?4
             WHERE policy_id IN (SELECT policy_id {of_dataset}) AND chain_id = ?1"
        ),
        params![chain_id as i64, dataset_id as i64, if active { "true" } else { "false" }, now],
    )?;
    Ok(policies)
}

// Key requests.

/// A key request as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRequest {
    pub id: String,
    pub chain_id: u64,
    /// The policy row the nonce was issued for.
    pub policy_row: String,
    pub policy_id: u64,
    pub buyer: String,
    pub nonce: String,
    pub challenge: String,
    pub status: RequestStatus,
    pub nonce_issued_at: i64,
    pub nonce_expires_at: i64,
    pub nonce_consumed_at: Option<i64>,
    pub fingerprint: Option<String>,
    pub encrypted_key: Option<String>,
    pub receipt_token_id: Option<u64>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub completed_at: Option<i64>,
}

const REQUEST_COLUMNS: &str = "id, chain_id, policy_row, policy_id, buyer, nonce, challenge, status, nonce_issued_at, \
     nonce_expires_at, nonce_consumed_at, fingerprint, encrypted_key, receipt_token_id, error_code, error_message, completed_at";

fn read_request(r: &Row<'_>) -> Result<KeyRequest, Failure> {
    Ok(KeyRequest {
        id: r.get(0)?,
        chain_id: r.get::<i64>(1)? as u64,
        policy_row: r.get(2)?,
        policy_id: r.get::<i64>(3)? as u64,
        buyer: r.get(4)?,
        nonce: r.get(5)?,
        challenge: r.get(6)?,
        status: closed(r, 7)?,
        nonce_issued_at: r.get(8)?,
        nonce_expires_at: r.get(9)?,
        nonce_consumed_at: r.get(10)?,
        fingerprint: r.get(11)?,
        encrypted_key: r.get(12)?,
        receipt_token_id: r.get::<Option<i64>>(13)?.map(|t| t as u64),
        error_code: r.get(14)?,
        error_message: r.get(15)?,
        completed_at: r.get(16)?,
    })
}

pub fn insert_request(conn: &Conn, request: &KeyRequest) -> Result<(), Failure> {
    conn.execute(
        &format!(
            "INSERT INTO secret_key_requests ({REQUEST_COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
        ),
        params![
            request.id,
            request.chain_id as i64,
            request.policy_row,
            request.policy_id as i64,
            request.buyer,
            request.nonce,
            request.challenge,
            request.status.as_str(),
            request.nonce_issued_at,
            request.nonce_expires_at,
        ],
    )?;
    Ok(())
}

pub fn request(conn: &Conn, id: &str) -> Result<Option<KeyRequest>, Failure> {
    let sql = format!("SELECT {REQUEST_COLUMNS} FROM secret_key_requests WHERE id = ?1");
    conn.query_row(&sql, params![id], read_request).optional()
}

/// Consumes the nonce: `nonce-issued` becomes `pending`, once. `false`
/// when the request is no longer `nonce-issued` (another request took it
/// first): the writer runs one claim at a time, so of two concurrent
/// requests exactly one wins.
pub fn claim(conn: &Conn, id: &str, fingerprint: &str, now: i64) -> Result<bool, Failure> {
    let changed = conn.execute(
        "UPDATE secret_key_requests SET status = 'pending', nonce_consumed_at = ?2, fingerprint = ?3
         WHERE id = ?1 AND status = 'nonce-issued' AND nonce_expires_at > ?2",
        params![id, now, fingerprint],
    )?;
    Ok(changed == 1)
}

/// A claimed request given back unconsumed (the chain could not be asked).
pub fn unclaim(conn: &Conn, id: &str) -> Result<(), Failure> {
    conn.execute(
        "UPDATE secret_key_requests SET status = 'nonce-issued', nonce_consumed_at = NULL, fingerprint = NULL
         WHERE id = ?1 AND status = 'pending'",
        params![id],
    )?;
    Ok(())
}

/// How a request ended.
pub enum Outcome<'a> {
    Issued { encrypted_key: &'a str, receipt_token_id: Option<u64> },
    Refused { status: RequestStatus, code: &'static str, message: &'a str },
}

/// Ends the request as `outcome` says.
pub fn complete(conn: &Conn, id: &str, outcome: Outcome<'_>, now: i64) -> Result<(), Failure> {
    match outcome {
        Outcome::Issued { encrypted_key, receipt_token_id } => conn.execute(
            "UPDATE secret_key_requests SET status = 'issued', encrypted_key = ?2, receipt_token_id = ?3,
                 completed_at = ?4 WHERE id = ?1",
            params![id, encrypted_key, receipt_token_id.map(|t| t as i64), now],
        )?,
        Outcome::Refused { status, code, message } => conn.execute(
            "UPDATE secret_key_requests SET status = ?2, error_code = ?3, error_message = ?4, completed_at = ?5
             WHERE id = ?1",
            params![id, status.as_str(), code, message, now],
        )?,
    };
    Ok(())
}

/// Forgets the requests whose nonce expired before `cutoff` unused
/// (`nonce-issued` or `expired`): a nonce nobody spent holds nothing worth
/// keeping, and the record of what was refused stays in
/// `secret_key_events`. Returns how many were forgotten.
pub fn prune_requests(conn: &Conn, cutoff: i64) -> Result<usize, Failure> {
    conn.execute(
        "DELETE FROM secret_key_requests WHERE status IN ('nonce-issued', 'expired') AND nonce_expires_at < ?1",
        params![cutoff],
    )
}

/// One release or refusal, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    pub request_id: String,
    pub chain_id: u64,
    pub policy_id: u64,
    pub buyer: String,
    /// `issued`, or the status or refusal it ended in.
    pub outcome: String,
    pub code: Option<String>,
    pub reason: Option<String>,
    pub at: i64,
}

pub fn record_event(conn: &Conn, event: &KeyEvent) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO secret_key_events (request_id, chain_id, policy_id, buyer, outcome, code, reason, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            event.request_id,
            event.chain_id as i64,
            event.policy_id as i64,
            event.buyer,
            event.outcome,
            event.code,
            event.reason,
            event.at
        ],
    )?;
    Ok(())
}

/// The recorded events of a request, oldest first.
pub fn events(conn: &Conn, request_id: &str) -> Result<Vec<KeyEvent>, Failure> {
    let rows = conn.query_map(
        "SELECT request_id, chain_id, policy_id, buyer, outcome, code, reason, at FROM secret_key_events
         WHERE request_id = ?1 ORDER BY seq",
        params![request_id],
        |r| {
            Ok(KeyEvent {
                request_id: r.get(0)?,
                chain_id: r.get::<i64>(1)? as u64,
                policy_id: r.get::<i64>(2)? as u64,
                buyer: r.get(3)?,
                outcome: r.get(4)?,
                code: r.get(5)?,
                reason: r.get(6)?,
                at: r.get(7)?,
            })
        },
    )?;
    Ok(rows)
}

// What the indexer read.

/// A purchase (`AccessGranted`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purchase {
    pub chain_id: u64,
    pub payment_module: String,
    pub receipt_token_id: u64,
    pub policy_id: u64,
    pub dataset_id: u64,
    pub buyer: String,
    pub recipient: String,
    pub price_wei: String,
    pub purchased_at: u64,
    pub tx_hash: String,
    pub block_number: u64,
}

pub fn upsert_purchase(conn: &Conn, purchase: &Purchase) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO secret_purchases (chain_id, payment_module, receipt_token_id, policy_id, dataset_id, buyer,
             recipient, price_wei, purchased_at, tx_hash, block_number, status)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'indexed')
         ON CONFLICT (chain_id, receipt_token_id) DO UPDATE SET policy_id = ?4, dataset_id = ?5, buyer = ?6,
             recipient = ?7, price_wei = ?8, purchased_at = ?9, tx_hash = ?10, block_number = ?11",
        params![
            purchase.chain_id as i64,
            purchase.payment_module,
            purchase.receipt_token_id as i64,
            purchase.policy_id as i64,
            purchase.dataset_id as i64,
            purchase.buyer,
            purchase.recipient,
            purchase.price_wei,
            purchase.purchased_at as i64,
            purchase.tx_hash,
            purchase.block_number as i64,
        ],
    )?;
    Ok(())
}

/// A receipt moved (minted, or transferred) to `receiver`.
pub fn add_move(
    conn: &Conn,
    chain_id: u64,
    token: u64,
    block: u64,
    log_index: u64,
    receiver: &str,
) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO secret_receipt_moves (chain_id, receipt_token_id, block_number, log_index, receiver)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (chain_id, receipt_token_id, block_number, log_index) DO UPDATE SET receiver = excluded.receiver",
        params![chain_id as i64, token as i64, block as i64, log_index as i64, receiver],
    )?;
    Ok(())
}

/// The receipt for `policy_id` that `holder` holds now, by the index.
pub fn held_receipt(conn: &Conn, chain_id: u64, policy_id: u64, holder: &str) -> Result<Option<u64>, Failure> {
    let held = conn
        .query_row(
            "SELECT p.receipt_token_id FROM secret_purchases p
             WHERE p.chain_id = ?1 AND p.policy_id = ?2 AND (
                 SELECT m.receiver FROM secret_receipt_moves m
                 WHERE m.chain_id = p.chain_id AND m.receipt_token_id = p.receipt_token_id
                 ORDER BY m.block_number DESC, m.log_index DESC LIMIT 1
             ) = ?3",
            params![chain_id as i64, policy_id as i64, holder],
            |r| r.get::<i64>(0),
        )
        .optional()?;
    Ok(held.map(|t| t as u64))
}

/// The blocks read last, newest first (at most `count`).
pub fn read_blocks(conn: &Conn, chain_id: u64, count: usize) -> Result<Vec<(u64, String)>, Failure> {
    let rows = conn.query_map(
        "SELECT block_number, block_hash FROM secret_index_blocks WHERE chain_id = ?1
         ORDER BY block_number DESC LIMIT ?2",
        params![chain_id as i64, count as i64],
        |r| Ok((r.get::<i64>(0)? as u64, r.get::<String>(1)?)),
    )?;
    Ok(rows)
}

/// Records that the blocks up to `block` (with its hash) were read,
/// keeping the last `keep` checkpoints.
pub fn checkpoint(conn: &Conn, chain_id: u64, block: u64, hash: &str, keep: usize) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO secret_index_blocks (chain_id, block_number, block_hash) VALUES (?1, ?2, ?3)
         ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash",
        params![chain_id as i64, block as i64, hash],
    )?;
    conn.execute(
        "DELETE FROM secret_index_blocks WHERE chain_id = ?1 AND block_number NOT IN (
             SELECT block_number FROM secret_index_blocks WHERE chain_id = ?1 ORDER BY block_number DESC LIMIT ?2)",
        params![chain_id as i64, keep.max(1) as i64],
    )?;
    Ok(())
}

/// Forgets what was read after `block` (a reorganisation dropped it):
/// checkpoints, receipt moves, purchases, and policies only the indexer
/// listed (their ids returned). A policy published through the broker
/// stays; the replay reads its chain state again.
pub fn rewind(conn: &Conn, chain_id: u64, block: u64) -> Result<Vec<u64>, Failure> {
    let (chain, after) = (chain_id as i64, block as i64);
    let created = match conn.dialect() {
        Dialect::Sqlite => "json_extract(record, '$.createdBlockNumber')",
        Dialect::Postgres => "CAST(record::jsonb ->> 'createdBlockNumber' AS BIGINT)",
    };
    let dropped = format!(
        "FROM secret_policies WHERE chain_id = ?1 AND status = 'indexed' AND wrapped_key IS NULL AND {created} > ?2"
    );
    let policies =
        conn.query_map(&format!("SELECT policy_id {dropped}"), params![chain, after], |r| r.get::<u64>(0))?;
    conn.execute("DELETE FROM secret_index_blocks WHERE chain_id = ?1 AND block_number > ?2", params![chain, after])?;
    conn.execute("DELETE FROM secret_receipt_moves WHERE chain_id = ?1 AND block_number > ?2", params![chain, after])?;
    conn.execute("DELETE FROM secret_purchases WHERE chain_id = ?1 AND block_number > ?2", params![chain, after])?;
    conn.execute(&format!("DELETE {dropped}"), params![chain, after])?;
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, status: RequestStatus, expires: i64) -> KeyRequest {
        KeyRequest {
            id: id.into(),
            chain_id: 31337,
            policy_row: "p".into(),
            policy_id: 1,
            buyer: "0xb".into(),
            nonce: "00".into(),
            challenge: "c".into(),
            status,
            nonce_issued_at: expires - 300_000,
            nonce_expires_at: expires,
            nonce_consumed_at: None,
            fingerprint: None,
            encrypted_key: None,
            receipt_token_id: None,
            error_code: None,
            error_message: None,
            completed_at: None,
        }
    }

    /// Each request (status, nonce expiry) and whether a prune at 1,000
    /// forgets it: only unused nonces expired before the cutoff.
    #[test]
    fn only_unused_nonces_past_the_cutoff_are_forgotten() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            let cases = [
                ("unused-old", RequestStatus::NonceIssued, 999, true),
                ("unused-at-cutoff", RequestStatus::NonceIssued, 1_000, false),
                ("unused-live", RequestStatus::NonceIssued, 5_000, false),
                ("expired-old", RequestStatus::Expired, 10, true),
                ("issued-old", RequestStatus::Issued, 10, false),
                ("denied-old", RequestStatus::Denied, 10, false),
                ("pending-old", RequestStatus::Pending, 10, false),
            ];
            for (id, status, expires, _) in cases {
                insert_request(&conn, &request(id, RequestStatus::NonceIssued, expires)).unwrap();
                conn.execute("UPDATE secret_key_requests SET status = ?2 WHERE id = ?1", params![id, status.as_str()])
                    .unwrap();
            }
            let forgotten = prune_requests(&conn, 1_000).unwrap();
            assert_eq!(forgotten, cases.iter().filter(|c| c.3).count());
            for (id, _, _, gone) in cases {
                assert_eq!(super::request(&conn, id).unwrap().is_none(), gone, "{id}");
            }
        }
    }

    /// A claim takes a live, unused nonce once; an expired one never.
    #[test]
    fn a_nonce_is_claimed_once_and_only_while_it_lives() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            insert_request(&conn, &request("r", RequestStatus::NonceIssued, 2_000)).unwrap();
            assert!(!claim(&conn, "r", "f", 2_000).unwrap(), "not at its expiry");
            assert!(claim(&conn, "r", "f", 1_999).unwrap());
            assert!(!claim(&conn, "r", "f", 1_999).unwrap(), "not twice");
            unclaim(&conn, "r").unwrap();
            assert!(claim(&conn, "r", "g", 1_999).unwrap(), "given back, taken again");
            assert_eq!(super::request(&conn, "r").unwrap().unwrap().fingerprint.as_deref(), Some("g"));
        }
    }
}
