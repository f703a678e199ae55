//! Key release: `nonces`, `keys/request`, `keys/{requestId}`.
//!
//! A buyer asks for a nonce for a published policy; the answer is a
//! challenge naming the chain, the contracts, the policy, the buyer, the
//! nonce and its expiry (`--secrets-nonce-ttl-secs`, five minutes). The
//! buyer signs it with the wallet (EIP-191) and sends the signature with a
//! fresh RSA public key and its fingerprint. The key is released when the
//! signature recovers to the buyer, the fingerprint is the key's, and the
//! buyer has access at that moment: the payment module's `hasAccess` on
//! chain (or, while the node cannot be reached, a purchase the indexer
//! holds for a policy and dataset it last saw active). The content key is
//! then unwrapped and encrypted to the buyer's key with RSA-OAEP-SHA-256.
//!
//! **Once.** The nonce is consumed by the release alone, in one step of
//! the store's single writer (`nonce-issued` to `pending`), so of two
//! concurrent requests one is released and the other refused. A request
//! that is refused before that step (a signature by another wallet, a
//! fingerprint that is not the key's, a body that names another policy)
//! changes nothing: a stranger who learns a request id cannot spend the
//! buyer's nonce. A buyer whose authenticated request finds no access, or
//! a policy no longer ready, is `denied`, as the protocol says; a nonce
//! past its life is `expired`. Every release and refusal is recorded
//! (`secret_key_events`) with the buyer, the policy and the reason.

use programmable_secrets::challenge::{self, Challenge};
use programmable_secrets::contracts::PaymentModule;
use programmable_secrets::envelope::{self, BuyerKey};
use programmable_secrets::{conditions, U256};
use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use super::publication::{chain_unavailable, master, uuid_v4};
use super::{address, enabled, policy_not_found, Chain};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::rfc3339;
use crate::store::secrets::{self as stored, KeyEvent, KeyRequest, Outcome, Policy, RequestStatus};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NonceInput {
    policy_id: u64,
    buyer_address: String,
    chain_id: Option<u64>,
}

fn buyer(text: &str) -> Result<String, Error> {
    let parsed = conditions::address("buyerAddress", text)
        .map_err(|e| Error::invalid_body(format!("buyerAddress: {}", e.problem)).naming("buyerAddress"))?;
    Ok(address(&parsed))
}

/// The published policy, ready to release its key, or 404 / 409.
async fn ready_policy(request: &Request, chain: &Chain, policy_id: u64) -> Result<Policy, Error> {
    let chain_id = chain.deployment.chain_id;
    let found = request.app.store.read(move |conn| stored::published(conn, chain_id, policy_id)).await?;
    let policy = found.ok_or_else(|| policy_not_found(policy_id))?;
    if !policy.key_release_ready() {
        return Err(not_ready(policy_id));
    }
    Ok(policy)
}

fn not_ready(policy_id: u64) -> Error {
    let message = format!("policy {policy_id} has no key held here yet (publish or import it)");
    Error::new(StatusCode::CONFLICT, "policy_not_ready", message)
}

/// `POST /programmable-secrets/nonces`.
pub async fn nonce(request: Request) -> Answer {
    let input: NonceInput = parse_body(&request.body)?;
    let settings = enabled(&request)?;
    master(settings)?;
    let buyer = buyer(&input.buyer_address)?;
    let chain = settings.chain(input.chain_id)?;
    let policy = ready_policy(&request, chain, input.policy_id).await?;
    let now = settings.clock.now_ms();
    let expires = now + settings.nonce_ttl.as_millis() as i64;
    let nonce = shared::http::hex(&crate::store::random::<16>());
    let d = &chain.deployment;
    let text = Challenge {
        network: d.network.clone(),
        chain_id: d.chain_id,
        payment_module: d.payment_module,
        policy_vault: d.policy_vault,
        policy_id: input.policy_id,
        buyer: buyer.parse().expect("a checked address"),
        nonce: nonce.clone(),
        expires_at: rfc3339(expires),
    }
    .text();
    let row = KeyRequest {
        id: uuid_v4(),
        chain_id: d.chain_id,
        policy_row: policy.id.clone(),
        policy_id: input.policy_id,
        buyer: buyer.clone(),
        nonce: nonce.clone(),
        challenge: text.clone(),
        status: RequestStatus::NonceIssued,
        nonce_issued_at: now,
        nonce_expires_at: expires,
        nonce_consumed_at: None,
        fingerprint: None,
        encrypted_key: None,
        receipt_token_id: None,
        error_code: None,
        error_message: None,
        completed_at: None,
    };
    let id = row.id.clone();
    request.app.store.write(move |conn| stored::insert_request(conn, &row)).await?;
    Ok(reply::json(&json!({
        "requestId": id,
        "policyId": input.policy_id,
        "buyerAddress": buyer,
        "nonce": nonce,
        "challengeMessage": text,
        "expiresAt": rfc3339(expires),
    })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeyInput {
    request_id: String,
    policy_id: u64,
    buyer_address: String,
    nonce: String,
    signature: String,
    buyer_rsa_public_key_pem: String,
    buyer_public_key_fingerprint: String,
}

fn request_not_found() -> Error {
    Error::new(StatusCode::NOT_FOUND, "key_request_not_found", "key request not found")
}

/// A refusal that carries the request's view (for a request that ended).
fn refusal(chain: &Chain, request: &KeyRequest, policy: Option<&Policy>) -> Error {
    let code = request.error_code.clone().unwrap_or_default();
    let (status, code): (StatusCode, &'static str) = match code.as_str() {
        "nonce_expired" => (StatusCode::GONE, "nonce_expired"),
        "access_not_found" => (StatusCode::FORBIDDEN, "access_not_found"),
        "policy_not_found" => (StatusCode::NOT_FOUND, "policy_not_found"),
        "policy_not_ready" => (StatusCode::CONFLICT, "policy_not_ready"),
        _ => (StatusCode::FORBIDDEN, "denied"),
    };
    let message = request.error_message.clone().unwrap_or_else(|| "the key request was refused".into());
    Error::new(status, code, message).with_fields(view(chain, request, policy))
}

/// What is recorded of a request's end.
fn event(request: &KeyRequest, outcome: &str, code: Option<&str>, reason: Option<&str>, at: i64) -> KeyEvent {
    KeyEvent {
        request_id: request.id.clone(),
        chain_id: request.chain_id,
        policy_id: request.policy_id,
        buyer: request.buyer.clone(),
        outcome: outcome.to_string(),
        code: code.map(str::to_string),
        reason: reason.map(str::to_string),
        at,
    }
}

/// Records a refusal that changes nothing else, and answers it.
async fn refuse(request: &Request, key_request: &KeyRequest, error: Error, at: i64) -> Answer {
    let recorded = event(key_request, "refused", Some(error.code), Some(&error.message), at);
    request.app.store.write(move |conn| stored::record_event(conn, &recorded)).await?;
    Err(error)
}

/// Ends a claimed request as `status` with `code`, recorded, and answers
/// the refusal with the request's view.
async fn end(
    request: &Request,
    chain: &Chain,
    claimed: KeyRequest,
    status: RequestStatus,
    code: &'static str,
    message: String,
) -> Answer {
    let now = request.app.secrets.as_ref().expect("enabled").clock.now_ms();
    let recorded = event(&claimed, status.as_str(), Some(code), Some(&message), now);
    let (id, stored_message) = (claimed.id.clone(), message.clone());
    request
        .app
        .store
        .write(move |conn| {
            stored::complete(conn, &id, Outcome::Refused { status, code, message: &stored_message }, now)?;
            stored::record_event(conn, &recorded)
        })
        .await?;
    let ended = KeyRequest {
        status,
        error_code: Some(code.to_string()),
        error_message: Some(message),
        completed_at: Some(now),
        ..claimed
    };
    Err(refusal(chain, &ended, None))
}

/// Whether `buyer` has access to the policy now, and its receipt when the
/// index knows it.
async fn access(request: &Request, chain: &Chain, policy: &Policy, buyer: &str) -> Result<(bool, Option<u64>), Error> {
    let (chain_id, policy_id, holder) = (policy.chain_id, policy.policy_id.unwrap_or(0), buyer.to_string());
    let receipt = request.app.store.read(move |conn| stored::held_receipt(conn, chain_id, policy_id, &holder)).await?;
    let call = PaymentModule::hasAccessCall { policyId: U256::from(policy_id), buyer: buyer.parse().expect("checked") };
    match chain.rpc.view(chain.deployment.payment_module, &call).await {
        Ok(has) => Ok((has, receipt)),
        Err(super::rpc::RpcError::Unreachable(why)) => {
            // The index decides while the node is away: a receipt held,
            // for a policy and dataset last seen active.
            tracing::warn!(why, "programmable secrets: access decided from the index");
            let r = &policy.record;
            Ok((receipt.is_some() && r.active && r.dataset_active.unwrap_or(true), receipt))
        }
        Err(error) => Err(chain_unavailable(&error)),
    }
}

/// `POST /programmable-secrets/keys/request`.
pub async fn request_key(request: Request) -> Answer {
    let input: KeyInput = parse_body(&request.body)?;
    let settings = enabled(&request)?;
    let keys = master(settings)?;
    let buyer = buyer(&input.buyer_address)?;
    let id = input.request_id.clone();
    let found = request.app.store.read(move |conn| stored::request(conn, &id)).await?;
    let key_request = found.ok_or_else(request_not_found)?;
    let chain = settings.chain(Some(key_request.chain_id))?;
    let now = settings.clock.now_ms();
    if key_request.policy_id != input.policy_id || key_request.buyer != buyer || key_request.nonce != input.nonce.trim()
    {
        let message = "policyId, buyerAddress and nonce must be the ones the nonce was issued for";
        return Err(Error::new(StatusCode::BAD_REQUEST, "request_mismatch", message));
    }
    let fingerprint = envelope::normalize_fingerprint(&input.buyer_public_key_fingerprint);
    match key_request.status {
        RequestStatus::Issued if key_request.fingerprint.as_deref() == Some(fingerprint.as_str()) => {
            let policy = policy_of(&request, &key_request).await?;
            return Ok(reply::json(&view(chain, &key_request, policy.as_ref())));
        }
        RequestStatus::Expired | RequestStatus::Denied => return Err(refusal(chain, &key_request, None)),
        RequestStatus::Issued | RequestStatus::Pending => {
            let error = Error::new(StatusCode::CONFLICT, "nonce_consumed", "this nonce has already been used");
            return refuse(&request, &key_request, error, now).await;
        }
        RequestStatus::NonceIssued => {}
    }
    if key_request.nonce_expires_at <= now {
        let message = "the nonce has expired; ask for another".to_string();
        return end(&request, chain, key_request, RequestStatus::Expired, "nonce_expired", message).await;
    }
    let buyer_key = match BuyerKey::from_pem(&input.buyer_rsa_public_key_pem) {
        Ok(key) => key,
        Err(e) => {
            let error = Error::invalid_body(format!("buyerRsaPublicKeyPem: {e}")).naming("buyerRsaPublicKeyPem");
            return refuse(&request, &key_request, error, now).await;
        }
    };
    if !buyer_key.matches(&fingerprint) {
        let message = "buyerPublicKeyFingerprint: is not SHA-256 of the public key's SPKI DER";
        let error =
            Error::new(StatusCode::BAD_REQUEST, "fingerprint_mismatch", message).naming("buyerPublicKeyFingerprint");
        return refuse(&request, &key_request, error, now).await;
    }
    let signer = match challenge::recover_personal_signer(key_request.challenge.as_bytes(), input.signature.trim()) {
        Ok(signer) => address(&signer),
        Err(e) => {
            let error = Error::invalid_body(format!("signature: {e}")).naming("signature");
            return refuse(&request, &key_request, error, now).await;
        }
    };
    if signer != buyer {
        let message = "the signature is not the buyer wallet's signature of the challenge";
        let error = Error::unauthorized("invalid_signature", message);
        return refuse(&request, &key_request, error, now).await;
    }
    // The nonce is spent here, once.
    let (id, print) = (key_request.id.clone(), buyer_key.fingerprint.clone());
    if !request.app.store.write(move |conn| stored::claim(conn, &id, &print, now)).await? {
        let error = Error::new(StatusCode::CONFLICT, "nonce_consumed", "this nonce has already been used");
        return refuse(&request, &key_request, error, now).await;
    }
    let claimed = KeyRequest {
        status: RequestStatus::Pending,
        nonce_consumed_at: Some(now),
        fingerprint: Some(buyer_key.fingerprint.clone()),
        ..key_request
    };
    let Some(policy) = policy_of(&request, &claimed).await? else {
        let message = format!("policy {} is no longer published here", claimed.policy_id);
        return end(&request, chain, claimed, RequestStatus::Denied, "policy_not_found", message).await;
    };
    if !policy.key_release_ready() {
        let message = format!("policy {} has no key held here", claimed.policy_id);
        return end(&request, chain, claimed, RequestStatus::Denied, "policy_not_ready", message).await;
    }
    let (allowed, receipt) = match access(&request, chain, &policy, &buyer).await {
        Ok(decided) => decided,
        Err(error) => {
            let id = claimed.id.clone();
            request.app.store.write(move |conn| stored::unclaim(conn, &id)).await?;
            return Err(error);
        }
    };
    if !allowed {
        let message =
            "the buyer does not hold access to this policy (no receipt, or the policy or its dataset is inactive)";
        return end(&request, chain, claimed, RequestStatus::Denied, "access_not_found", message.into()).await;
    }
    let policy_id = policy.policy_id.unwrap_or(0);
    let aad = envelope::policy_aad(policy_id, policy.chain_id, &policy.record.ciphertext_hash);
    let wrapped = policy.wrapped_key.as_ref().expect("ready");
    let content_key = match keys.unwrap(wrapped, &aad) {
        Ok(key) => key,
        Err(e) => {
            tracing::error!(error = %e, policy = policy.id, "programmable secrets: a published key does not open");
            let message = "the policy's key cannot be opened here".to_string();
            return end(&request, chain, claimed, RequestStatus::Denied, "policy_not_ready", message).await;
        }
    };
    let encrypted = buyer_key.encrypt(&content_key);
    let now = settings.clock.now_ms();
    let released = KeyRequest {
        status: RequestStatus::Issued,
        encrypted_key: Some(encrypted.clone()),
        receipt_token_id: receipt,
        completed_at: Some(now),
        ..claimed
    };
    let recorded = event(&released, "issued", None, None, now);
    let id = released.id.clone();
    request
        .app
        .store
        .write(move |conn| {
            stored::complete(conn, &id, Outcome::Issued { encrypted_key: &encrypted, receipt_token_id: receipt }, now)?;
            stored::record_event(conn, &recorded)
        })
        .await?;
    Ok(reply::json(&view(chain, &released, Some(&policy))))
}

async fn policy_of(request: &Request, key_request: &KeyRequest) -> Result<Option<Policy>, Error> {
    let (chain_id, policy_id) = (key_request.chain_id, key_request.policy_id);
    Ok(request.app.store.read(move |conn| stored::published(conn, chain_id, policy_id)).await?)
}

/// Forgets the key requests whose nonce expired unused longer ago than
/// `--secrets-request-retention-secs` (the server's cleaner calls it).
pub async fn prune(app: &crate::app::App) {
    let Some(settings) = app.secrets.as_deref() else { return };
    let cutoff = settings.clock.now_ms() - settings.request_retention.as_millis() as i64;
    match app.store.write(move |conn| stored::prune_requests(conn, cutoff)).await {
        Ok(0) => {}
        Ok(forgotten) => tracing::info!(forgotten, "programmable secrets: unused nonces forgotten"),
        Err(e) => tracing::error!(error = %e, "programmable secrets: forgetting unused nonces"),
    }
}

/// `GET /programmable-secrets/keys/{requestId}`.
pub async fn key_request(request: Request) -> Answer {
    let settings = enabled(&request)?;
    let id = request.params.get("requestId").to_string();
    let found = request.app.store.read(move |conn| stored::request(conn, &id)).await?;
    let key_request = found.ok_or_else(request_not_found)?;
    let chain = settings.chain(Some(key_request.chain_id))?;
    let policy = match key_request.status {
        RequestStatus::Issued => policy_of(&request, &key_request).await?,
        _ => None,
    };
    Ok(reply::json(&view(chain, &key_request, policy.as_ref())))
}

/// A key request as the protocol's clients read it (`KeyRequestView`);
/// the content's hashes, metadata and address once the key is issued.
pub fn view(chain: &Chain, request: &KeyRequest, policy: Option<&Policy>) -> Value {
    let d = &chain.deployment;
    let issued = request.status == RequestStatus::Issued;
    let released = policy.filter(|_| issued);
    super::with_contracts(
        d,
        json!({
            "id": request.id,
            "policyId": request.policy_id,
            "receiptTokenId": request.receipt_token_id,
            "buyerAddress": request.buyer,
            "status": request.status,
            "challengeMessage": request.challenge,
            "nonceIssuedAt": rfc3339(request.nonce_issued_at),
            "nonceExpiresAt": rfc3339(request.nonce_expires_at),
            "nonceConsumedAt": request.nonce_consumed_at.map(rfc3339),
            "buyerPublicKeyFingerprint": request.fingerprint,
            "encryptedKey": request.encrypted_key,
            "algorithm": issued.then_some("rsa-oaep-sha256"),
            "ciphertextUrl": issued.then(|| format!(
                "/api/v1/programmable-secrets/policies/{}/ciphertext?chainId={}", request.policy_id, request.chain_id
            )),
            "ciphertextHash": released.map(|p| p.record.ciphertext_hash.clone()),
            "keyCommitment": released.map(|p| p.record.key_commitment.clone()),
            "metadataJson": released.and_then(|p| p.record.metadata.clone()),
            "completedAt": request.completed_at.map(rfc3339),
            "errorCode": request.error_code,
            "errorMessage": request.error_message,
        }),
    )
}
