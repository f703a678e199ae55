//! A policy as the chain holds it: `getPolicy`, each condition, and its
//! dataset's status, read through the chain's node; and the same made
//! into the record a policy view shows.

use programmable_secrets::conditions::{self, Prepared};
use programmable_secrets::contracts::PolicyVault;
use programmable_secrets::{hashes, Address, Bytes, B256, U256};

use super::rpc::{Rpc, RpcError};
use super::{address, Chain};
use crate::store::secrets::PolicyRecord;

/// One condition as stored on chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCondition {
    pub evaluator: Address,
    pub config: Bytes,
    pub config_hash: B256,
}

/// A policy read from the chain.
#[derive(Clone, Debug)]
pub struct OnChain {
    pub policy_id: u64,
    pub policy: PolicyVault::Policy,
    pub conditions: Vec<StoredCondition>,
    pub dataset_active: bool,
}

/// The policy `policy_id` on `chain`, or `None` when the vault has no
/// such policy.
pub async fn read(rpc: &Rpc, vault: Address, policy_id: u64) -> Result<Option<OnChain>, RpcError> {
    let count = rpc.view(vault, &PolicyVault::policyCountCall {}).await?;
    if policy_id == 0 || U256::from(policy_id) > count {
        return Ok(None);
    }
    let id = U256::from(policy_id);
    let policy = rpc.view(vault, &PolicyVault::getPolicyCall { policyId: id }).await?;
    let mut conditions = Vec::with_capacity(policy.conditionCount as usize);
    for index in 0..policy.conditionCount {
        let call = PolicyVault::getPolicyConditionCall { policyId: id, index: U256::from(index) };
        let c = rpc.view(vault, &call).await?;
        conditions.push(StoredCondition { evaluator: c.evaluator, config: c.configData, config_hash: c.configHash });
    }
    let dataset = rpc.view(vault, &PolicyVault::getDatasetCall { datasetId: policy.datasetId }).await?;
    Ok(Some(OnChain { policy_id, policy, conditions, dataset_active: dataset.active }))
}

impl OnChain {
    /// The record of a policy only the chain describes: its conditions
    /// read back into descriptors, no metadata or UAID (only their hashes
    /// are on chain).
    pub fn record(&self, chain: &Chain) -> PolicyRecord {
        let p = &self.policy;
        let prepared: Vec<Prepared> = self
            .conditions
            .iter()
            .map(|c| {
                let (descriptor, witness) = conditions::describe(c.evaluator, &c.config, &chain.deployment.builtins);
                Prepared {
                    evaluator_address: address(&c.evaluator),
                    config_data_hex: format!("{}", c.config),
                    config_hash: hashes::hex(&c.config_hash),
                    runtime_witness: witness,
                    descriptor,
                }
            })
            .collect();
        PolicyRecord {
            dataset_id: Some(p.datasetId.saturating_to()),
            dataset_active: Some(self.dataset_active),
            provider_address: address(&p.provider),
            payout_address: address(&p.payout),
            payment_token: address(&p.paymentToken),
            price_wei: p.price.to_string(),
            receipt_transferable: p.receiptTransferable,
            active: p.active,
            ciphertext_hash: hashes::hex(&p.ciphertextHash),
            key_commitment: hashes::hex(&p.keyCommitment),
            metadata_hash: hashes::hex(&p.metadataHash),
            provider_uaid: None,
            provider_uaid_hash: hashes::hex(&p.providerUaidHash),
            conditions_hash: Some(hashes::hex(&p.conditionsHash)),
            condition_count: Some(p.conditionCount),
            declared_conditions: prepared.iter().map(|c| c.descriptor.clone()).collect(),
            conditions: prepared,
            metadata: None,
            ciphertext_bytes: None,
            created_tx_hash: None,
            created_block_number: None,
            created_log_index: None,
            policy_created_at: Some(p.createdAt),
            confirmed_at: None,
            indexed_at: None,
        }
    }
}
