//! Publication: `provider/prepare`, `provider/confirm`, `provider/import`.
//!
//! **Prepare** checks what a provider account sends, computes the
//! commitments (SHA-256 of the ciphertext and of the key, SHA-256 of the
//! metadata's canonical JSON, keccak-256 of the provider's UAID) and the
//! conditions' ABI-encoded configs, checks each evaluator is registered
//! and active on chain, keeps the ciphertext (content-addressed) and the
//! key (wrapped, bound to the staging), and answers the inputs the
//! provider's wallet sends to the vault. **Confirm** reads the
//! transaction's receipt and its `PolicyCreated` log, then the policy and
//! its conditions from the chain, and publishes only when every field is
//! what was staged; a mismatch marks the staging `failed`, naming the
//! field. **Import** takes a policy made without the broker, its key and
//! ciphertext checked against the chain's commitments (SHA-256 or
//! keccak-256).

use alloy_sol_types::SolEvent;
use base64::Engine;
use programmable_secrets::conditions::{self, Descriptor, Prepared};
use programmable_secrets::contracts::PolicyVault;
use programmable_secrets::envelope::{self, ContentKey, MasterKeys};
use programmable_secrets::hashes::{self, Commitment};
use programmable_secrets::{canonical, Address, B256, U256};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use warp::http::StatusCode;

use super::chain::{self, OnChain};
use super::rpc::RpcError;
use super::{address, enabled, policy_view, Chain, Settings};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::secrets::{self as stored, Policy, PolicyRecord, PolicyStatus, Publish};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// 503 while a chain's node cannot be asked.
pub fn chain_unavailable(error: &RpcError) -> Error {
    tracing::warn!(%error, "programmable secrets: the chain's node");
    Error::new(StatusCode::SERVICE_UNAVAILABLE, "chain_unavailable", format!("{error}; try again"))
}

/// The master keys, or 503.
pub fn master(settings: &Settings) -> Result<&MasterKeys, Error> {
    settings.master.as_ref().ok_or_else(|| {
        Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "krs_not_configured",
            "key release is not configured on this broker (no master key)",
        )
    })
}

fn field(name: &'static str, problem: impl std::fmt::Display) -> Error {
    Error::invalid_body(format!("{name}: {problem}")).naming(name)
}

fn parse_address(name: &'static str, text: &str) -> Result<Address, Error> {
    conditions::address(name, text).map_err(|e| field(name, e.problem))
}

/// A price in wei: a decimal integer above 0 that fits the vault's uint96.
fn price(text: &str) -> Result<U256, Error> {
    let digits = text.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(field("priceWei", "must be a decimal integer of wei"));
    }
    let value = U256::from_str_radix(digits, 10).map_err(|_| field("priceWei", "is too large"))?;
    if value.is_zero() {
        return Err(field("priceWei", "must be above 0"));
    }
    if value.bit_len() > 96 {
        return Err(field("priceWei", "is above the vault's largest price (2^96 - 1 wei)"));
    }
    Ok(value)
}

/// `provider/prepare`'s body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrepareInput {
    chain_id: Option<u64>,
    provider_address: String,
    provider_uaid: String,
    payout_address: Option<String>,
    payment_token: Option<String>,
    price_wei: String,
    metadata: Map<String, Value>,
    ciphertext_base64: String,
    #[serde(rename = "contentKeyB64")]
    content_key_b64: String,
    /// Sent by older clients: a time range ending then, unless the
    /// metadata declares one.
    expires_at_unix: Option<u64>,
    /// The account to act as; `x-account-id` says it, as on every route.
    #[serde(rename = "accountId")]
    _account_id: Option<String>,
}

/// The purchase requirements a provider's metadata declares.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Requirements {
    #[serde(default)]
    receipt_transferable: bool,
    #[serde(default)]
    conditions: Vec<Descriptor>,
}

fn requirements(metadata: &Map<String, Value>) -> Result<Requirements, Error> {
    let Some(value) = metadata.get("purchaseRequirements") else { return Ok(Requirements::default()) };
    serde_json::from_value(value.clone()).map_err(|e| {
        let message = format!("metadata.purchaseRequirements: {}", crate::wording::serde_rule(&e.to_string()));
        Error::invalid_body(message).naming("metadata.purchaseRequirements")
    })
}

/// Checks that each condition's evaluator is registered and active.
async fn evaluators_active(chain: &Chain, prepared: &[Prepared]) -> Result<(), Error> {
    for (i, condition) in prepared.iter().enumerate() {
        let call = PolicyVault::getPolicyEvaluatorCall { evaluator: condition.evaluator() };
        let registration =
            chain.rpc.view(chain.deployment.policy_vault, &call).await.map_err(|e| chain_unavailable(&e))?;
        if registration.registeredAt == 0 || !registration.active {
            let name = format!("metadata.purchaseRequirements.conditions[{i}].evaluatorAddress");
            let message = format!("{name}: {} is not an active evaluator of the vault", condition.evaluator_address);
            return Err(Error::new(StatusCode::BAD_REQUEST, "evaluator_not_active", message).naming(name));
        }
    }
    Ok(())
}

/// Keeps `bytes` under their SHA-256 (`ab/cdef…`), written once by rename;
/// returns the path relative to the ciphertext folder.
async fn keep_ciphertext(settings: &Settings, bytes: Vec<u8>) -> Result<String, Error> {
    let digest = hashes::hex(&hashes::sha256(&bytes));
    let relative = format!("{}/{}", &digest[2..4], &digest[4..]);
    let path = settings.ciphertexts.join(&relative);
    let failed = |e: std::io::Error| {
        tracing::error!(error = %e, "programmable secrets: keeping a ciphertext");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "ciphertext_not_kept", "the ciphertext could not be kept")
    };
    if tokio::fs::try_exists(&path).await.map_err(failed)? {
        return Ok(relative);
    }
    let folder = path.parent().expect("a file in a folder");
    tokio::fs::create_dir_all(folder).await.map_err(failed)?;
    let temporary = folder.join(format!(".{}.{}", &digest[4..], shared::http::hex(&crate::store::random::<6>())));
    tokio::fs::write(&temporary, bytes).await.map_err(failed)?;
    tokio::fs::rename(&temporary, &path).await.map_err(failed)?;
    Ok(relative)
}

/// `POST /programmable-secrets/provider/prepare`.
pub async fn prepare(request: Request) -> Answer {
    let input: PrepareInput = parse_body(&request.body)?;
    let settings = enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let keys = master(settings)?;
    let chain = settings.chain(input.chain_id)?;
    let deployment = &chain.deployment;

    let provider = parse_address("providerAddress", &input.provider_address)?;
    let uaid: shared::uaid::Uaid =
        input.provider_uaid.trim().parse().map_err(|e| field("providerUaid", format!("is not a UAID: {e}")))?;
    let payout = match input.payout_address.as_deref() {
        Some(text) => parse_address("payoutAddress", text)?,
        None => provider,
    };
    // The vault pays a zero payout to the provider: stage what it stores.
    let payout = if payout.is_zero() { provider } else { payout };
    if let Some(token) = &input.payment_token {
        if !parse_address("paymentToken", token)?.is_zero() {
            return Err(Error::new(
                StatusCode::BAD_REQUEST,
                "unsupported_payment_token",
                "paymentToken: only the native currency (the zero address) is supported",
            )
            .naming("paymentToken"));
        }
    }
    let price = price(&input.price_wei)?;
    let ciphertext =
        B64.decode(input.ciphertext_base64.trim()).map_err(|_| field("ciphertextBase64", "is not base64"))?;
    if ciphertext.is_empty() || ciphertext.len() > settings.max_ciphertext_bytes {
        let bound = settings.max_ciphertext_bytes;
        return Err(field("ciphertextBase64", format!("must hold 1 to {bound} bytes")));
    }
    let key: ContentKey = B64
        .decode(input.content_key_b64.trim())
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| field("contentKeyB64", "must be 32 bytes in base64 (an AES-256 key)"))?;
    let mut requirements = requirements(&input.metadata)?;
    if let Some(expires) = input.expires_at_unix {
        if !requirements.conditions.iter().any(|d| matches!(d, Descriptor::TimeRange { .. })) {
            let bound =
                Descriptor::TimeRange { not_before_unix: None, not_after_unix: Some(expires), evaluator_address: None };
            requirements.conditions.push(bound);
        }
    }
    if requirements.conditions.len() > conditions::MAX_CONDITIONS {
        let max = conditions::MAX_CONDITIONS;
        return Err(field(
            "metadata.purchaseRequirements.conditions",
            format!("a policy has at most {max} conditions"),
        ));
    }
    let prepared = requirements
        .conditions
        .iter()
        .enumerate()
        .map(|(i, d)| conditions::prepare(i, d, deployment))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::invalid_body(e.to_string()).naming(e.field))?;
    evaluators_active(chain, &prepared).await?;

    let metadata = Value::Object(input.metadata);
    let metadata_hash = hashes::sha256(canonical::to_string(&metadata).as_bytes());
    let ciphertext_hash = hashes::hex(&hashes::sha256(&ciphertext));
    let key_commitment = hashes::hex(&hashes::sha256(&key));
    let uaid_hash = hashes::hex(&hashes::keccak(uaid.as_str().as_bytes()));
    let pairs: Vec<(Address, B256)> =
        prepared.iter().map(|p| (p.evaluator(), hashes::keccak(&p.config_data()))).collect();
    let conditions_hash = hashes::hex(&conditions::conditions_hash(&pairs));
    let ciphertext_bytes = ciphertext.len() as u64;
    let path = keep_ciphertext(settings, ciphertext).await?;
    let wrapped = keys.wrap(&key, &envelope::stage_aad(deployment.chain_id, &ciphertext_hash, &uaid_hash));
    let now = settings.clock.now_ms();
    let record = PolicyRecord {
        dataset_id: None,
        dataset_active: None,
        provider_address: address(&provider),
        payout_address: address(&payout),
        payment_token: address(&Address::ZERO),
        price_wei: price.to_string(),
        receipt_transferable: requirements.receipt_transferable,
        active: false,
        ciphertext_hash: ciphertext_hash.clone(),
        key_commitment: key_commitment.clone(),
        metadata_hash: hashes::hex(&metadata_hash),
        provider_uaid: Some(uaid.as_str().to_string()),
        provider_uaid_hash: uaid_hash.clone(),
        conditions_hash: Some(conditions_hash),
        condition_count: Some(prepared.len() as u32),
        declared_conditions: prepared.iter().map(|p| p.descriptor.clone()).collect(),
        conditions: prepared.clone(),
        metadata: Some(metadata),
        ciphertext_bytes: Some(ciphertext_bytes),
        ..PolicyRecord::default()
    };
    let policy = Policy {
        id: uuid_v4(),
        account: Some(account),
        chain_id: deployment.chain_id,
        policy_id: None,
        status: PolicyStatus::Prepared,
        record,
        wrapped_key: Some(wrapped),
        ciphertext_path: Some(path),
        last_error: None,
        created_at: now,
        updated_at: now,
    };
    let row = policy.clone();
    request.app.store.write(move |conn| stored::insert(conn, &row)).await?;
    let r = &policy.record;
    Ok(reply::json(&super::with_contracts(
        deployment,
        json!({
            "stagedPolicyId": policy.id,
            "policyId": null,
            "chainId": deployment.chain_id,
            "network": deployment.network,
            "onchainInputs": {
                "payoutAddress": r.payout_address,
                "paymentToken": r.payment_token,
                "priceWei": r.price_wei,
                "receiptTransferable": r.receipt_transferable,
                "conditions": prepared.iter().map(|p| json!({
                    "evaluator": p.evaluator_address,
                    "configData": p.config_data_hex,
                    "configHash": p.config_hash,
                })).collect::<Vec<_>>(),
                "ciphertextHash": ciphertext_hash,
                "keyCommitment": key_commitment,
                "metadataHash": r.metadata_hash,
                "providerUaidHash": uaid_hash,
                "conditionsHash": r.conditions_hash,
                "declaredConditions": prepared.iter().map(|p| json!({
                    "evaluatorAddress": p.evaluator_address,
                    "configDataHex": p.config_data_hex,
                    "configHash": p.config_hash,
                    "runtimeWitness": p.runtime_witness,
                    "descriptor": p.descriptor,
                })).collect::<Vec<_>>(),
            },
        }),
    )))
}

/// A random (version 4) UUID.
pub fn uuid_v4() -> String {
    let mut b = crate::store::random::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = shared::http::hex(&b);
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// `provider/confirm`'s body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfirmInput {
    staged_policy_id: String,
    policy_id: u64,
    created_tx_hash: B256,
    created_block_number: Option<u64>,
    created_block_hash: Option<B256>,
    created_log_index: Option<u64>,
    #[serde(rename = "accountId")]
    _account_id: Option<String>,
}

/// Where the transaction and the staging disagree: the first field that
/// differs, as the chain has it and as staged.
fn compare(policy: &Policy, on_chain: &OnChain, deployment_vault: Address, log_vault: Address) -> Result<(), String> {
    let r = &policy.record;
    let p = &on_chain.policy;
    let hex = |h: &B256| hashes::hex(h);
    let checks: [(&str, String, String); 12] = [
        ("policyVaultAddress", address(&log_vault), address(&deployment_vault)),
        ("providerAddress", address(&p.provider), r.provider_address.clone()),
        ("payoutAddress", address(&p.payout), r.payout_address.clone()),
        ("paymentToken", address(&p.paymentToken), r.payment_token.clone()),
        ("priceWei", p.price.to_string(), r.price_wei.clone()),
        ("receiptTransferable", p.receiptTransferable.to_string(), r.receipt_transferable.to_string()),
        ("ciphertextHash", hex(&p.ciphertextHash), r.ciphertext_hash.clone()),
        ("keyCommitment", hex(&p.keyCommitment), r.key_commitment.clone()),
        ("metadataHash", hex(&p.metadataHash), r.metadata_hash.clone()),
        ("providerUaidHash", hex(&p.providerUaidHash), r.provider_uaid_hash.clone()),
        ("conditionCount", p.conditionCount.to_string(), r.condition_count.unwrap_or(0).to_string()),
        ("conditionsHash", hex(&p.conditionsHash), r.conditions_hash.clone().unwrap_or_default()),
    ];
    for (name, chain, staged) in checks {
        if chain != staged {
            return Err(format!("{name}: the chain has {chain}, {staged} was staged"));
        }
    }
    for (i, (stored, staged)) in on_chain.conditions.iter().zip(&r.conditions).enumerate() {
        if address(&stored.evaluator) != staged.evaluator_address {
            return Err(format!("conditions[{i}].evaluatorAddress: the chain has {}", address(&stored.evaluator)));
        }
        if hex(&stored.config_hash) != staged.config_hash {
            return Err(format!("conditions[{i}].configHash: the chain has {}", hex(&stored.config_hash)));
        }
    }
    Ok(())
}

/// `POST /programmable-secrets/provider/confirm`.
pub async fn confirm(request: Request) -> Answer {
    let input: ConfirmInput = parse_body(&request.body)?;
    let settings = enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let keys = master(settings)?;
    let id = input.staged_policy_id.clone();
    let staged = request.app.store.read(move |conn| stored::policy(conn, &id)).await?;
    let not_found = || Error::new(StatusCode::NOT_FOUND, "staged_policy_not_found", "staged policy not found");
    let mut policy = staged.ok_or_else(not_found)?;
    if policy.account.as_deref() != Some(account.as_str()) {
        return Err(Error::forbidden("this staged policy belongs to another account"));
    }
    let chain = settings.chain(Some(policy.chain_id))?;
    match policy.status {
        PolicyStatus::Finalized if policy.policy_id == Some(input.policy_id) => {
            return Ok(reply::json(&json!({"policy": policy_view(&chain.deployment, &policy)})));
        }
        PolicyStatus::Prepared | PolicyStatus::Staged => {}
        status => {
            let message = format!("the staged policy is {}, not prepared", status.as_str());
            return Err(Error::new(StatusCode::CONFLICT, "policy_not_prepared", message));
        }
    }
    let receipt = chain.rpc.receipt(&input.created_tx_hash).await.map_err(|e| chain_unavailable(&e))?;
    let Some(receipt) = receipt else {
        let message = "createdTxHash: the chain has no receipt for this transaction (not mined yet?)";
        return Err(Error::new(StatusCode::CONFLICT, "transaction_not_found", message).naming("createdTxHash"));
    };
    let block = receipt.block_number.saturating_to::<u64>();
    let log = receipt.logs.iter().find(|log| {
        log.topics.first() == Some(&PolicyVault::PolicyCreated::SIGNATURE_HASH)
            && log.topics.get(1) == Some(&B256::from(U256::from(input.policy_id)))
    });
    let mismatch = if receipt.status != Some(U256::from(1)) {
        Some("createdTxHash: the transaction reverted".to_string())
    } else if input.created_block_number.is_some_and(|n| n != block) {
        Some(format!("createdBlockNumber: the transaction is in block {block}"))
    } else if input.created_block_hash.is_some_and(|h| h != receipt.block_hash) {
        Some(format!("createdBlockHash: the transaction is in block {}", hashes::hex(&receipt.block_hash)))
    } else if log.is_none() {
        Some(format!("policyId: the transaction created no policy {}", input.policy_id))
    } else if input.created_log_index.is_some_and(|i| Some(i) != log.map(|l| l.log_index.saturating_to::<u64>())) {
        Some("createdLogIndex: the PolicyCreated log is at another index".to_string())
    } else {
        None
    };
    let on_chain = match mismatch {
        Some(_) => None,
        None => chain::read(&chain.rpc, chain.deployment.policy_vault, input.policy_id)
            .await
            .map_err(|e| chain_unavailable(&e))?,
    };
    let compared = match (&mismatch, &on_chain, log) {
        (Some(why), _, _) => Err(why.clone()),
        (None, None, _) => Err(format!("policyId: the vault has no policy {}", input.policy_id)),
        (None, Some(on_chain), Some(log)) => compare(&policy, on_chain, chain.deployment.policy_vault, log.address),
        (None, Some(_), None) => unreachable!("a mismatch when no log"),
    };
    let now = settings.clock.now_ms();
    if let Err(why) = compared {
        let (id, stored_why) = (policy.id.clone(), why.clone());
        request.app.store.write(move |conn| stored::fail(conn, &id, &stored_why, now)).await?;
        let name = why.split(':').next().unwrap_or("policyId").to_string();
        return Err(Error::new(
            StatusCode::CONFLICT,
            "chain_mismatch",
            format!("the chain differs from the staging: {why}"),
        )
        .naming(name));
    }
    let on_chain = on_chain.expect("compared");
    let log = log.expect("compared");
    let r = &policy.record;
    let stage = envelope::stage_aad(policy.chain_id, &r.ciphertext_hash, &r.provider_uaid_hash);
    let wrapped = policy.wrapped_key.as_ref().ok_or_else(|| Error::bad_answer("a prepared policy without its key"))?;
    let key = keys.unwrap(wrapped, &stage).map_err(|e| {
        tracing::error!(error = %e, policy = policy.id, "programmable secrets: a staged key does not open");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "key_unreadable", "the staged key cannot be opened")
    })?;
    policy.wrapped_key =
        Some(keys.wrap(&key, &envelope::policy_aad(input.policy_id, policy.chain_id, &r.ciphertext_hash)));
    let read = on_chain.record(chain);
    let record = &mut policy.record;
    record.dataset_id = read.dataset_id;
    record.dataset_active = read.dataset_active;
    record.active = read.active;
    record.policy_created_at = read.policy_created_at;
    record.created_tx_hash = Some(hashes::hex(&input.created_tx_hash));
    record.created_block_number = Some(block);
    record.created_log_index = Some(log.log_index.saturating_to());
    record.confirmed_at = Some(now);
    policy.policy_id = Some(input.policy_id);
    policy.status = PolicyStatus::Finalized;
    policy.updated_at = now;
    publish(&request, chain, policy).await
}

/// Publishes `policy` and answers its view, or 409 when another row holds
/// the on-chain policy with a key.
async fn publish(request: &Request, chain: &Chain, policy: Policy) -> Answer {
    let entry = super::catalog_entry(&chain.deployment, &policy);
    let published = request.app.store.write(move |conn| stored::publish(conn, &policy, entry.clone())).await?;
    match published {
        Publish::Published(policy, seq) => {
            request.app.secrets_changes.saw(seq);
            request.app.journal.wake.notify_one();
            Ok(reply::json(&json!({"policy": policy_view(&chain.deployment, &policy)})))
        }
        Publish::AlreadyPublished { by } => Err(Error::new(
            StatusCode::CONFLICT,
            "policy_already_published",
            format!("this on-chain policy is already published here with its key ({by})"),
        )),
    }
}

/// `provider/import`'s bundle.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Bundle {
    content_key_hex: String,
    ciphertext_hex: String,
    provider_uaid: String,
    ciphertext_hash: Option<String>,
    key_commitment: Option<String>,
    provider_uaid_hash: Option<String>,
    metadata: Option<Map<String, Value>>,
    title: Option<String>,
    description: Option<String>,
    plaintext_hash: Option<String>,
    plaintext_preview: Option<String>,
    iv_hex: Option<String>,
    version: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImportInput {
    chain_id: Option<u64>,
    policy_id: u64,
    bundle: Bundle,
    created_tx_hash: Option<B256>,
    created_block_number: Option<u64>,
    #[serde(rename = "createdBlockHash")]
    _created_block_hash: Option<B256>,
    created_log_index: Option<u64>,
    #[serde(rename = "accountId")]
    _account_id: Option<String>,
}

fn hex_field(name: &'static str, text: &str) -> Result<Vec<u8>, Error> {
    let text = text.trim();
    let prefixed = if text.starts_with("0x") { text.to_string() } else { format!("0x{text}") };
    conditions::hex_bytes(name, &prefixed).map(|b| b.to_vec()).map_err(|e| field(name, e.problem))
}

/// `POST /programmable-secrets/provider/import`.
pub async fn import(request: Request) -> Answer {
    let input: ImportInput = parse_body(&request.body)?;
    let settings = enabled(&request)?;
    let account = request.principal()?.billing(&request.headers)?;
    let keys = master(settings)?;
    let chain = settings.chain(input.chain_id)?;
    let bundle = &input.bundle;
    let key: ContentKey = hex_field("bundle.contentKeyHex", &bundle.content_key_hex)?
        .try_into()
        .map_err(|_| field("bundle.contentKeyHex", "must be 32 bytes (an AES-256 key)"))?;
    let ciphertext = hex_field("bundle.ciphertextHex", &bundle.ciphertext_hex)?;
    if ciphertext.is_empty() || ciphertext.len() > settings.max_ciphertext_bytes {
        let bound = settings.max_ciphertext_bytes;
        return Err(field("bundle.ciphertextHex", format!("must hold 1 to {bound} bytes")));
    }
    let uaid: shared::uaid::Uaid =
        bundle.provider_uaid.trim().parse().map_err(|e| field("bundle.providerUaid", format!("is not a UAID: {e}")))?;
    let on_chain = chain::read(&chain.rpc, chain.deployment.policy_vault, input.policy_id)
        .await
        .map_err(|e| chain_unavailable(&e))?
        .ok_or_else(|| super::policy_not_found(input.policy_id))?;
    let p = &on_chain.policy;
    let mismatch = |name: &'static str, what: &str| {
        Error::new(StatusCode::CONFLICT, "chain_mismatch", format!("{name}: {what} the policy's on-chain commitment"))
            .naming(name)
    };
    Commitment::of(&ciphertext, &p.ciphertextHash).ok_or_else(|| mismatch("bundle.ciphertextHex", "does not match"))?;
    Commitment::of(&key, &p.keyCommitment).ok_or_else(|| mismatch("bundle.contentKeyHex", "does not match"))?;
    if hashes::keccak(uaid.as_str().as_bytes()) != p.providerUaidHash {
        return Err(mismatch("bundle.providerUaid", "its keccak-256 does not match"));
    }
    for (name, given, chain_has) in [
        ("bundle.ciphertextHash", &bundle.ciphertext_hash, &p.ciphertextHash),
        ("bundle.keyCommitment", &bundle.key_commitment, &p.keyCommitment),
        ("bundle.providerUaidHash", &bundle.provider_uaid_hash, &p.providerUaidHash),
    ] {
        if given.as_deref().is_some_and(|g| !g.trim().eq_ignore_ascii_case(&hashes::hex(chain_has))) {
            return Err(mismatch(name, "differs from"));
        }
    }
    let metadata = match &bundle.metadata {
        Some(metadata) => Value::Object(metadata.clone()),
        None => {
            let iv = match &bundle.iv_hex {
                Some(iv) => Some(B64.encode(hex_field("bundle.ivHex", iv)?)),
                None => None,
            };
            json!({
                "title": bundle.title,
                "description": bundle.description,
                "plaintextHash": bundle.plaintext_hash,
                "plaintextPreview": bundle.plaintext_preview,
                "providerUaid": uaid.as_str(),
                "priceWei": p.price.to_string(),
                "cipher": {"algorithm": "AES-GCM", "ivBase64": iv, "version": bundle.version.clone().unwrap_or(json!(1))},
            })
        }
    };
    let ciphertext_bytes = ciphertext.len() as u64;
    let path = keep_ciphertext(settings, ciphertext).await?;
    let now = settings.clock.now_ms();
    let mut record = on_chain.record(chain);
    record.provider_uaid = Some(uaid.as_str().to_string());
    record.metadata = Some(metadata);
    record.ciphertext_bytes = Some(ciphertext_bytes);
    record.created_tx_hash = input.created_tx_hash.as_ref().map(hashes::hex);
    record.created_block_number = input.created_block_number;
    record.created_log_index = input.created_log_index;
    record.indexed_at = Some(now);
    let wrapped =
        keys.wrap(&key, &envelope::policy_aad(input.policy_id, chain.deployment.chain_id, &record.ciphertext_hash));
    let existing_id = {
        let (chain_id, policy_id) = (chain.deployment.chain_id, input.policy_id);
        request.app.store.read(move |conn| stored::published(conn, chain_id, policy_id)).await?.map(|p| p.id)
    };
    let policy = Policy {
        id: existing_id.unwrap_or_else(|| format!("onchain-{}-{}", chain.deployment.chain_id, input.policy_id)),
        account: Some(account),
        chain_id: chain.deployment.chain_id,
        policy_id: Some(input.policy_id),
        status: PolicyStatus::Indexed,
        record,
        wrapped_key: Some(wrapped),
        ciphertext_path: Some(path),
        last_error: None,
        created_at: now,
        updated_at: now,
    };
    publish(&request, chain, policy).await
}
