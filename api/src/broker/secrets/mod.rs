//! Programmable Secrets (`/api/v1/programmable-secrets/...`): encrypted
//! content sold under on-chain policies, its key released to whoever holds
//! access.
//!
//! A provider account stages its ciphertext and content key
//! ([`publication`]: `provider/prepare`), sends the chain transactions
//! itself, and confirms (`provider/confirm`): the broker reads the policy
//! back from the chain and publishes it only if every field is what was
//! staged. A buyer purchases on chain, then asks for a nonce and proves
//! control of the wallet with a signed challenge ([`release`]); the key
//! goes to it encrypted to a key only it has. The [`indexer`] follows
//! the contracts' events so that policies made without the broker are
//! listed, and purchases are known without asking the chain.
//!
//! The group is on when the operator names at least one chain
//! (`--secrets-chain`); key release also needs the master key
//! (`--secrets-master-key-file` or `ALMANAC_SECRETS_MASTER_KEY`). Off, the
//! routes answer 503 `not_configured`, and `health` says so.

pub mod chain;
pub mod indexer;
pub mod pages;
pub mod publication;
pub mod release;
pub mod rpc;
pub mod settings;

use programmable_secrets::conditions;
use programmable_secrets::deployment::Deployment;
use serde_json::{json, Value};
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::Request;
use crate::store::rfc3339;
use crate::store::secrets::{self as stored, Policy};

pub use settings::{Chain, Clock, IndexSettings, Settings};

/// The group's settings, or 503.
pub fn enabled(request: &Request) -> Result<&Settings, Error> {
    request.app.secrets.as_deref().ok_or_else(|| {
        Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_configured",
            "programmable secrets are not configured on this broker (no --secrets-chain)",
        )
    })
}

/// `GET /programmable-secrets/health`.
pub async fn health(request: Request) -> Answer {
    let Some(settings) = request.app.secrets.as_deref() else {
        return Ok(reply::json(&json!({"enabled": false, "krsConfigured": false, "chains": []})));
    };
    let first = &settings.chains[0].deployment;
    let chain = |d: &Deployment| {
        json!({
            "network": d.network,
            "chainId": d.chain_id,
            "paymentModuleAddress": address(&d.payment_module),
            "policyVaultAddress": address(&d.policy_vault),
            "accessReceiptAddress": address(&d.access_receipt),
            "identityRegistryAddress": d.identity_registry.as_ref().map(address),
        })
    };
    Ok(reply::json(&json!({
        "enabled": true,
        "network": first.network,
        "chainId": first.chain_id,
        // The node the broker reads is the operator's, and not disclosed.
        "rpcUrl": null,
        "paymentModuleAddress": address(&first.payment_module),
        "policyVaultAddress": address(&first.policy_vault),
        "accessReceiptAddress": address(&first.access_receipt),
        "krsConfigured": settings.master.is_some(),
        "chains": settings.chains.iter().map(|c| chain(&c.deployment)).collect::<Vec<_>>(),
    })))
}

pub fn address(address: &programmable_secrets::Address) -> String {
    format!("{address:#x}")
}

/// The most policies one page lists.
pub const MAX_PAGE: usize = 200;

/// `GET /programmable-secrets/policies`: the published policies, newest on
/// chain first; `limit` (1 to 200, 50) and `page` (from 1), `chainId` to
/// keep one chain.
pub async fn list(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let limit = request.query_number("limit", 1, MAX_PAGE)?.unwrap_or(50);
    let page = request.query_number("page", 1, 1_000_000)?.unwrap_or(1);
    let chain_id = request.query_number("chainId", 1, u64::MAX as usize)?.map(|c| c as u64);
    if let Some(id) = chain_id {
        settings.chain(Some(id))?;
    }
    let offset = (page - 1).saturating_mul(limit);
    let (policies, total) = request.app.store.read(move |conn| stored::list(conn, chain_id, limit, offset)).await?;
    let views: Vec<Value> =
        policies.iter().filter_map(|p| Some(policy_view(&settings.chain_of(p)?.deployment, p))).collect();
    Ok(reply::json(&json!({"policies": views, "total": total, "page": page, "limit": limit})))
}

/// The on-chain policy id of a path, or 400.
fn policy_id(request: &Request) -> Result<u64, Error> {
    let raw = request.params.get("id");
    raw.parse::<u64>().ok().filter(|id| *id > 0).ok_or_else(|| {
        Error::parameter("id", format!("{}: a policy id is a positive integer", crate::reply::excerpt(raw)))
    })
}

/// The published policy `id` (on `chainId`, or the default chain), or 404.
async fn published(request: &Request, settings: &Settings) -> Result<Policy, Error> {
    let id = policy_id(request)?;
    let chain_id = request.query_number("chainId", 1, u64::MAX as usize)?.map(|c| c as u64);
    let chain_id = settings.chain(chain_id)?.deployment.chain_id;
    let found = request.app.store.read(move |conn| stored::published(conn, chain_id, id)).await?;
    found.ok_or_else(|| policy_not_found(id))
}

pub fn policy_not_found(id: u64) -> Error {
    Error::new(StatusCode::NOT_FOUND, "policy_not_found", format!("policy {id} is not published here"))
}

/// `GET /programmable-secrets/policies/{id}`.
pub async fn policy(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let policy = published(&request, settings).await?;
    let chain = settings.chain_of(&policy).ok_or_else(|| policy_not_found(policy.policy_id.unwrap_or(0)))?;
    Ok(reply::json(&json!({"policy": policy_view(&chain.deployment, &policy)})))
}

/// `GET /programmable-secrets/policies/{id}/ciphertext`: the bytes as
/// stored (public: confidentiality rests on the key).
pub async fn ciphertext(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let policy = published(&request, settings).await?;
    let Some(path) = &policy.ciphertext_path else {
        return Err(Error::new(
            StatusCode::NOT_FOUND,
            "ciphertext_not_found",
            "this policy's ciphertext is not held here",
        ));
    };
    let bytes = tokio::fs::read(settings.ciphertexts.join(path)).await.map_err(|e| {
        tracing::error!(error = %e, path, "a held ciphertext cannot be read");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "ciphertext_unreadable", "the ciphertext cannot be read")
    })?;
    let mut answer = reply::bytes(bytes);
    answer
        .headers_mut()
        .insert(warp::http::header::CONTENT_TYPE, warp::http::HeaderValue::from_static("application/octet-stream"));
    Ok(answer)
}

/// A policy as the protocol's clients read it (`PolicyView`).
pub fn policy_view(d: &Deployment, policy: &Policy) -> Value {
    let r = &policy.record;
    let expires = conditions::expires_at(&r.declared_conditions);
    let conditions: Vec<Value> = r
        .conditions
        .iter()
        .enumerate()
        .map(|(index, c)| {
            json!({
                "index": index,
                "evaluatorAddress": c.evaluator_address,
                "configHash": c.config_hash,
                "configDataHex": c.config_data_hex,
                "descriptor": c.descriptor,
                "runtimeWitness": c.runtime_witness,
            })
        })
        .collect();
    let seconds = |s: u64| rfc3339(s as i64 * 1000);
    with_contracts(
        d,
        json!({
            "id": policy.id,
            "network": d.network,
            "chainId": d.chain_id,
            "policyId": policy.policy_id,
            "datasetId": r.dataset_id,
            "conditionsHash": r.conditions_hash,
            "conditionCount": r.condition_count,
            "conditions": conditions,
            "declaredConditions": r.declared_conditions,
            "status": policy.status,
            "providerAddress": r.provider_address,
            "payoutAddress": r.payout_address,
            "paymentToken": r.payment_token,
            "priceWei": r.price_wei,
            "expiresAt": expires.map(seconds),
            "expiresAtUnix": expires,
            "active": r.active && r.dataset_active.unwrap_or(true),
            "allowlistEnabled": false,
            "receiptTransferable": r.receipt_transferable,
            "ciphertextHash": r.ciphertext_hash,
            "keyCommitment": r.key_commitment,
            "metadataHash": r.metadata_hash,
            "providerUaid": r.provider_uaid,
            "providerUaidHash": r.provider_uaid_hash,
            "metadataJson": r.metadata,
            "keyReleaseReady": policy.key_release_ready(),
            "createdTxHash": r.created_tx_hash,
            "createdBlockNumber": r.created_block_number,
            "policyCreatedAt": r.policy_created_at.map(seconds),
            "confirmedAt": r.confirmed_at.map(rfc3339),
            "indexedAt": r.indexed_at.map(rfc3339),
            "createdAt": rfc3339(policy.created_at),
            "updatedAt": rfc3339(policy.updated_at),
            "lastError": policy.last_error,
        }),
    )
}

/// `view` with the addresses every answer of the group names: the payment
/// module (also as `contractAddress`, the contract a buyer calls), the
/// vault and the receipt.
pub fn with_contracts(d: &Deployment, mut view: Value) -> Value {
    view["contractAddress"] = json!(address(&d.payment_module));
    view["paymentModuleAddress"] = json!(address(&d.payment_module));
    view["policyVaultAddress"] = json!(address(&d.policy_vault));
    view["accessReceiptAddress"] = json!(address(&d.access_receipt));
    view
}

/// A published policy as the catalog holds it (and the journal carries it).
pub fn catalog_entry(deployment: &Deployment, policy: &Policy) -> broker_model::catalog::SecretPolicy {
    broker_model::catalog::SecretPolicy {
        chain_id: policy.chain_id,
        policy_id: policy.policy_id.unwrap_or(0),
        listed_at: policy.record.policy_created_at.unwrap_or(0) as i64,
        view: policy_view(deployment, policy),
    }
}

/// `GET /programmable-secrets/catalog`: every published policy, newest on
/// chain first. The build's file while it holds every change of the
/// catalog; made from the store when a change is newer (revalidated each
/// time, as the overlay's answers are).
pub async fn catalog(request: Request) -> Answer {
    let Some(settings) = changed_since_build(&request)? else {
        return crate::service::published(&request, broker_site::render::SECRET_POLICIES)
            .await
            .ok_or_else(|| Error::not_found(&request.path));
    };
    let policies = request.app.store.read(stored::all_published).await?;
    // One row per chain and policy (the store's unique index): ordered once.
    let mut entries = catalog_entries(settings, &policies);
    broker_model::catalog::SecretPolicy::order(&mut entries);
    Ok(super::live(reply::json(&broker_site::render::secret_policies(&entries))))
}

/// The group's settings when the catalog changed since the build (its
/// answers are then made from the store); `None` while the build holds
/// every change. 404 for a build without the broker.
pub fn changed_since_build(request: &Request) -> Result<Option<&Settings>, Error> {
    let build = request.build()?;
    let broker = build.broker.as_deref().ok_or_else(|| Error::not_found(&request.path))?;
    Ok(request.app.secrets.as_deref().filter(|_| request.app.secrets_changes.get() > broker.journal_seq))
}

/// `policies` as the catalog holds them, those of chains no longer
/// configured left out.
pub fn catalog_entries(settings: &Settings, policies: &[Policy]) -> Vec<broker_model::catalog::SecretPolicy> {
    policies.iter().filter_map(|policy| Some(catalog_entry(&settings.chain_of(policy)?.deployment, policy))).collect()
}

/// `GET /programmable-secrets/provider-identity?providerAddress&chainId`:
/// the UAID of the agent a provider's wallet is, from this broker's own
/// agent index (the policy's UAID when given, else the agents whose
/// metadata names the address as owner or wallet on that chain).
pub async fn provider_identity(request: Request) -> Answer {
    enabled(&request)?;
    let raw =
        request.query_value("providerAddress")?.ok_or_else(|| Error::parameter("providerAddress", "is required"))?;
    let provider =
        conditions::address("providerAddress", &raw).map_err(|e| Error::parameter("providerAddress", e.problem))?;
    let chain_id = request
        .query_number("chainId", 1, u64::MAX as usize)?
        .ok_or_else(|| Error::parameter("chainId", "is required (a positive integer)"))? as u64;
    if let Some(uaid) = request.query_value("policyProviderUaid")?.filter(|u| !u.trim().is_empty()) {
        let parsed: shared::uaid::Uaid =
            uaid.parse().map_err(|e| Error::parameter("policyProviderUaid", format!("is not a UAID: {e}")))?;
        return Ok(reply::json(&json!({"uaid": parsed.as_str(), "source": "policy-uaid"})));
    }
    match crate::broker::identity_by_wallet(&request, &address(&provider), chain_id)? {
        Some(agent) => Ok(reply::json(&json!({"uaid": agent["uaid"], "source": "registry-search", "agent": agent}))),
        None => Ok(reply::json(&json!({
            "uaid": null,
            "source": "none",
            "reason": "no agent of this broker names this address on this chain",
        }))),
    }
}
