//! A chain the broker serves, read from a deployments manifest of the
//! protocol's shape (`chainId`, `network`, `blockNumber`, `entrypoints`
//! with each contract's address) plus `rpcUrl`, the JSON-RPC endpoint the
//! operator chose. The manifest's other fields (the contracts' ABI files
//! and checksums, the deployment transactions) are not read.

use alloy_primitives::Address;
use serde::Deserialize;

/// One chain's contracts and where to reach them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployment {
    pub chain_id: u64,
    pub network: String,
    pub rpc_url: String,
    /// The block the contracts were deployed in: where indexing starts.
    pub deployed_at_block: u64,
    pub policy_vault: Address,
    pub payment_module: Address,
    pub access_receipt: Address,
    pub builtins: BuiltIns,
    /// The ERC-8004 identity registry, when the chain has one.
    pub identity_registry: Option<Address>,
}

/// The built-in evaluators a condition descriptor without an
/// `evaluatorAddress` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltIns {
    pub time_range: Address,
    pub uaid_ownership: Address,
    pub address_allowlist: Address,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    chain_id: u64,
    network: String,
    rpc_url: String,
    #[serde(default)]
    block_number: u64,
    entrypoints: Entrypoints,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entrypoints {
    policy_vault_address: Address,
    payment_module_address: Address,
    access_receipt_address: Address,
    time_range_condition_address: Address,
    uaid_ownership_condition_address: Address,
    address_allowlist_condition_address: Address,
    #[serde(default)]
    agent_identity_registry_address: Option<Address>,
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0} is the zero address")]
    Zero(&'static str),
    #[error("rpcUrl {0:?} is not an http or https URL")]
    RpcUrl(String),
}

impl Deployment {
    pub fn parse(text: &str) -> Result<Deployment, ManifestError> {
        let manifest: Manifest = serde_json::from_str(text)?;
        let e = manifest.entrypoints;
        for (name, address) in [
            ("entrypoints.policyVaultAddress", e.policy_vault_address),
            ("entrypoints.paymentModuleAddress", e.payment_module_address),
            ("entrypoints.accessReceiptAddress", e.access_receipt_address),
        ] {
            if address.is_zero() {
                return Err(ManifestError::Zero(name));
            }
        }
        if !(manifest.rpc_url.starts_with("http://") || manifest.rpc_url.starts_with("https://")) {
            return Err(ManifestError::RpcUrl(manifest.rpc_url));
        }
        Ok(Deployment {
            chain_id: manifest.chain_id,
            network: manifest.network,
            rpc_url: manifest.rpc_url,
            deployed_at_block: manifest.block_number,
            policy_vault: e.policy_vault_address,
            payment_module: e.payment_module_address,
            access_receipt: e.access_receipt_address,
            builtins: BuiltIns {
                time_range: e.time_range_condition_address,
                uaid_ownership: e.uaid_ownership_condition_address,
                address_allowlist: e.address_allowlist_condition_address,
            },
            identity_registry: e.agent_identity_registry_address.filter(|a| !a.is_zero()),
        })
    }

    /// The manifest this deployment reads back as (what a local chain's
    /// deployer writes).
    pub fn manifest(&self) -> serde_json::Value {
        let address = |a: &Address| format!("{a:#x}");
        serde_json::json!({
            "chainId": self.chain_id,
            "network": self.network,
            "rpcUrl": self.rpc_url,
            "blockNumber": self.deployed_at_block,
            "entrypoints": {
                "policyVaultAddress": address(&self.policy_vault),
                "paymentModuleAddress": address(&self.payment_module),
                "accessReceiptAddress": address(&self.access_receipt),
                "timeRangeConditionAddress": address(&self.builtins.time_range),
                "uaidOwnershipConditionAddress": address(&self.builtins.uaid_ownership),
                "addressAllowlistConditionAddress": address(&self.builtins.address_allowlist),
                "agentIdentityRegistryAddress": address(&self.identity_registry.unwrap_or_default()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_as_written() {
        let deployment = Deployment {
            chain_id: 31337,
            network: "anvil".into(),
            rpc_url: "http://127.0.0.1:8545".into(),
            deployed_at_block: 3,
            policy_vault: Address::repeat_byte(1),
            payment_module: Address::repeat_byte(2),
            access_receipt: Address::repeat_byte(3),
            builtins: BuiltIns {
                time_range: Address::repeat_byte(4),
                uaid_ownership: Address::repeat_byte(5),
                address_allowlist: Address::repeat_byte(6),
            },
            identity_registry: None,
        };
        let text = deployment.manifest().to_string();
        assert_eq!(Deployment::parse(&text).unwrap(), deployment);
        let zero = text.replace(&format!("{:#x}", Address::repeat_byte(1)), &format!("{:#x}", Address::ZERO));
        assert!(matches!(Deployment::parse(&zero), Err(ManifestError::Zero(_))));
        let ftp = text.replace("http://127.0.0.1:8545", "ftp://x");
        assert!(matches!(Deployment::parse(&ftp), Err(ManifestError::RpcUrl(_))));
    }
}
