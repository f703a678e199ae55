//! A policy's purchase conditions: the descriptors a provider writes in
//! its metadata (`purchaseRequirements.conditions`), the `(evaluator,
//! configData)` pairs the chain stores, and the runtime witness a buyer
//! must supply for each at purchase.
//!
//! Built-in descriptors are ABI-encoded here exactly as their evaluators
//! decode them; a `custom-static` one passes its config through. Reading
//! a policy back, [`describe`] turns a built-in evaluator's config into
//! its descriptor again, so a policy made without the broker shows its
//! conditions too.

use alloy_primitives::{Address, Bytes, B256, U256};
use alloy_sol_types::{SolType, SolValue};
use serde::{Deserialize, Serialize};

use crate::contracts::{ConditionEntry, TimeRangeConfig, UaidOwnershipConfig};
use crate::deployment::{BuiltIns, Deployment};
use crate::hashes;

/// The most conditions a policy may have (the vault's
/// `MAX_POLICY_CONDITIONS`).
pub const MAX_CONDITIONS: usize = 16;
/// The most addresses an allowlist may hold.
pub const MAX_ALLOWLIST: usize = 512;

/// A condition as a provider declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum Descriptor {
    /// Purchases from `notBeforeUnix` until `notAfterUnix` (either open).
    TimeRange {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before_unix: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_after_unix: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evaluator_address: Option<String>,
    },
    /// The buyer owns the ERC-8004 agent this UAID names.
    UaidOwnership {
        required_buyer_uaid: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evaluator_address: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity_registry_address: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_id: Option<u64>,
    },
    /// The buyer is one of these addresses.
    EvmAllowlist {
        allowlisted_buyer_addresses: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evaluator_address: Option<String>,
    },
    /// Any registered evaluator, its config given as hex.
    CustomStatic {
        evaluator_address: String,
        config_data_hex: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime_witness: Option<Witness>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

/// What a buyer supplies for a condition at purchase, and how it is
/// encoded into the runtime input: `none` is empty, `hex` is passed
/// through, `buyer-uaid` and `utf8` are `abi.encode(string)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Witness {
    None,
    BuyerUaid {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    Utf8 {
        label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
    },
    Hex {
        label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
    },
}

impl Witness {
    /// The runtime input for `value` (ignored for `none`).
    pub fn encode(&self, value: &str) -> Result<Bytes, ConditionError> {
        match self {
            Witness::None => Ok(Bytes::new()),
            Witness::BuyerUaid { .. } | Witness::Utf8 { .. } => Ok(value.to_string().abi_encode().into()),
            Witness::Hex { .. } => hex_bytes("runtime input", value),
        }
    }
}

/// A condition ready for the chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prepared {
    pub evaluator_address: String,
    pub config_data_hex: String,
    pub config_hash: String,
    pub runtime_witness: Witness,
    pub descriptor: Descriptor,
}

impl Prepared {
    pub fn evaluator(&self) -> Address {
        self.evaluator_address.parse().expect("prepared from a checked address")
    }

    pub fn config_data(&self) -> Bytes {
        hex_bytes("configData", &self.config_data_hex).expect("prepared from checked hex")
    }
}

/// Why a descriptor cannot be prepared: the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ConditionError {
    pub field: String,
    pub problem: String,
}

fn refuse(field: impl Into<String>, problem: impl Into<String>) -> ConditionError {
    ConditionError { field: field.into(), problem: problem.into() }
}

/// An EVM address as the wire writes them (`0x` and 40 hex digits, either
/// case), or a refusal naming `field`.
pub fn address(field: &str, text: &str) -> Result<Address, ConditionError> {
    let digits = text.strip_prefix("0x").filter(|d| d.len() == 40 && d.bytes().all(|b| b.is_ascii_hexdigit()));
    digits.and_then(|d| d.parse().ok()).ok_or_else(|| refuse(field, "must be 0x and 40 hex digits"))
}

/// `0x`-prefixed hex of an even length, as bytes.
pub fn hex_bytes(field: &str, text: &str) -> Result<Bytes, ConditionError> {
    let digits = text.trim().strip_prefix("0x").ok_or_else(|| refuse(field, "must start with 0x"))?;
    alloy_primitives::hex::decode(digits)
        .map(Bytes::from)
        .map_err(|_| refuse(field, "must be hex digits of an even length"))
}

fn lower(address: &Address) -> String {
    format!("{address:#x}")
}

/// Prepares the `index`th descriptor for `deployment`'s chain.
pub fn prepare(index: usize, descriptor: &Descriptor, deployment: &Deployment) -> Result<Prepared, ConditionError> {
    let field = |name: &str| format!("metadata.purchaseRequirements.conditions[{index}].{name}");
    let evaluator = |given: &Option<String>, builtin: Address| match given {
        Some(text) => address(&field("evaluatorAddress"), text),
        None => Ok(builtin),
    };
    let (evaluator, config, witness): (Address, Bytes, Witness) = match descriptor {
        Descriptor::TimeRange { not_before_unix, not_after_unix, evaluator_address } => {
            let (not_before, not_after) = (not_before_unix.unwrap_or(0), not_after_unix.unwrap_or(0));
            if not_after != 0 && not_after <= not_before {
                return Err(refuse(field("notAfterUnix"), "must be after notBeforeUnix"));
            }
            let config = TimeRangeConfig { notBefore: not_before, notAfter: not_after };
            let evaluator = evaluator(evaluator_address, deployment.builtins.time_range)?;
            (evaluator, <TimeRangeConfig as SolType>::abi_encode(&config).into(), Witness::None)
        }
        Descriptor::UaidOwnership { required_buyer_uaid, evaluator_address, identity_registry_address, agent_id } => {
            let agent = erc8004_agent(required_buyer_uaid, deployment.chain_id)
                .map_err(|problem| refuse(field("requiredBuyerUaid"), problem))?;
            let agent_id = agent_id.or(agent).ok_or_else(|| refuse(field("agentId"), "is required"))?;
            if agent_id == 0 {
                return Err(refuse(field("agentId"), "must be above 0"));
            }
            let registry = match identity_registry_address {
                Some(text) => address(&field("identityRegistryAddress"), text)?,
                None => deployment
                    .identity_registry
                    .ok_or_else(|| refuse(field("identityRegistryAddress"), "is required: this chain has none"))?,
            };
            let config = UaidOwnershipConfig {
                requiredBuyerUaidHash: hashes::keccak(required_buyer_uaid.as_bytes()),
                identityRegistry: registry,
                agentId: U256::from(agent_id),
            };
            let evaluator = evaluator(evaluator_address, deployment.builtins.uaid_ownership)?;
            (
                evaluator,
                <UaidOwnershipConfig as SolType>::abi_encode(&config).into(),
                Witness::BuyerUaid { label: None },
            )
        }
        Descriptor::EvmAllowlist { allowlisted_buyer_addresses, evaluator_address } => {
            let list = allowlisted_buyer_addresses;
            if list.is_empty() || list.len() > MAX_ALLOWLIST {
                return Err(refuse(
                    field("allowlistedBuyerAddresses"),
                    format!("must hold 1 to {MAX_ALLOWLIST} addresses"),
                ));
            }
            let addresses = list
                .iter()
                .enumerate()
                .map(|(i, a)| address(&field(&format!("allowlistedBuyerAddresses[{i}]")), a))
                .collect::<Result<Vec<_>, _>>()?;
            let evaluator = evaluator(evaluator_address, deployment.builtins.address_allowlist)?;
            (evaluator, addresses.abi_encode_params().into(), Witness::None)
        }
        Descriptor::CustomStatic { evaluator_address, config_data_hex, runtime_witness, .. } => (
            address(&field("evaluatorAddress"), evaluator_address)?,
            hex_bytes(&field("configDataHex"), config_data_hex)?,
            runtime_witness.clone().unwrap_or(Witness::None),
        ),
    };
    Ok(Prepared {
        evaluator_address: lower(&evaluator),
        config_data_hex: format!("{config}"),
        config_hash: hashes::hex(&hashes::keccak(&config)),
        runtime_witness: witness,
        descriptor: normalized(descriptor, &evaluator),
    })
}

/// The descriptor as stored: its evaluator named, its addresses lower-case.
fn normalized(descriptor: &Descriptor, evaluator: &Address) -> Descriptor {
    let mut descriptor = descriptor.clone();
    let lowered = |a: &String| a.to_ascii_lowercase();
    match &mut descriptor {
        Descriptor::TimeRange { evaluator_address, .. } | Descriptor::UaidOwnership { evaluator_address, .. } => {
            *evaluator_address = Some(lower(evaluator))
        }
        Descriptor::EvmAllowlist { allowlisted_buyer_addresses, evaluator_address } => {
            *allowlisted_buyer_addresses = allowlisted_buyer_addresses.iter().map(lowered).collect();
            *evaluator_address = Some(lower(evaluator));
        }
        Descriptor::CustomStatic { evaluator_address, config_data_hex, .. } => {
            *evaluator_address = lower(evaluator);
            *config_data_hex = config_data_hex.trim().to_ascii_lowercase();
        }
    }
    if let Descriptor::UaidOwnership { identity_registry_address: Some(a), .. } = &mut descriptor {
        *a = a.to_ascii_lowercase();
    }
    descriptor
}

/// The ERC-8004 agent id an HCS-14 UAID names for `chain_id`: the UAID
/// must say `registry=erc-8004`, `proto` empty or `erc-8004`, and a
/// `nativeId` of `<chain>:<agentId>` on this chain. `Ok(None)` when the
/// UAID names no agent id (one must then be given).
pub fn erc8004_agent(uaid: &str, chain_id: u64) -> Result<Option<u64>, String> {
    let parsed: shared::uaid::Uaid = uaid.parse().map_err(|e| format!("is not a UAID: {e}"))?;
    if parsed.param("registry") != Some("erc-8004") {
        return Err("must name registry=erc-8004".into());
    }
    if !matches!(parsed.param("proto"), None | Some("") | Some("erc-8004")) {
        return Err("must name proto=erc-8004 or none".into());
    }
    let Some(native) = parsed.param("nativeId") else { return Ok(None) };
    let (chain, agent) = native.rsplit_once(':').ok_or("nativeId must be <chain>:<agentId>")?;
    let chain = chain.rsplit(':').next().unwrap_or(chain);
    if chain.parse::<u64>().ok() != Some(chain_id) {
        return Err(format!("nativeId names chain {chain}, not {chain_id}"));
    }
    agent.parse::<u64>().map(Some).map_err(|_| format!("nativeId's agent id {agent:?} is not a number"))
}

/// `conditionsHash`: keccak-256 of the ABI encoding of the `bytes32[]` of
/// `keccak256(abi.encode(evaluator, configHash))`, one per condition in
/// order (what the vault computes).
pub fn conditions_hash(conditions: &[(Address, B256)]) -> B256 {
    let entries: Vec<B256> = conditions
        .iter()
        .map(|(evaluator, config_hash)| {
            let entry = ConditionEntry { evaluator: *evaluator, configHash: *config_hash };
            hashes::keccak(&<ConditionEntry as SolType>::abi_encode(&entry))
        })
        .collect();
    hashes::keccak(&entries.abi_encode_params())
}

/// A stored condition read back: the descriptor and witness its built-in
/// evaluator's config means, or `custom-static` with the config as hex.
pub fn describe(evaluator: Address, config: &[u8], builtins: &BuiltIns) -> (Descriptor, Witness) {
    let custom = || {
        let descriptor = Descriptor::CustomStatic {
            evaluator_address: lower(&evaluator),
            config_data_hex: format!("{}", Bytes::copy_from_slice(config)),
            runtime_witness: None,
            label: None,
            description: None,
        };
        (descriptor, Witness::None)
    };
    let unbounded = |t: u64| (t != 0).then_some(t);
    if evaluator == builtins.time_range {
        match <TimeRangeConfig as SolType>::abi_decode(config) {
            Ok(c) => (
                Descriptor::TimeRange {
                    not_before_unix: unbounded(c.notBefore),
                    not_after_unix: unbounded(c.notAfter),
                    evaluator_address: Some(lower(&evaluator)),
                },
                Witness::None,
            ),
            Err(_) => custom(),
        }
    } else if evaluator == builtins.address_allowlist {
        match <alloy_sol_types::sol_data::Array<alloy_sol_types::sol_data::Address>>::abi_decode_params(config) {
            Ok(list) => (
                Descriptor::EvmAllowlist {
                    allowlisted_buyer_addresses: list.iter().map(lower).collect(),
                    evaluator_address: Some(lower(&evaluator)),
                },
                Witness::None,
            ),
            Err(_) => custom(),
        }
    } else if evaluator == builtins.uaid_ownership {
        match <UaidOwnershipConfig as SolType>::abi_decode(config) {
            // Only the UAID's hash is on chain: the descriptor names it so.
            Ok(c) => (
                Descriptor::UaidOwnership {
                    required_buyer_uaid: hashes::hex(&c.requiredBuyerUaidHash),
                    evaluator_address: Some(lower(&evaluator)),
                    identity_registry_address: Some(lower(&c.identityRegistry)),
                    agent_id: u64::try_from(c.agentId).ok(),
                },
                Witness::BuyerUaid { label: None },
            ),
            Err(_) => custom(),
        }
    } else {
        custom()
    }
}

/// The latest purchase time the conditions allow (a time range's
/// `notAfterUnix`), the policy's `expiresAtUnix`.
pub fn expires_at(descriptors: &[Descriptor]) -> Option<u64> {
    descriptors
        .iter()
        .filter_map(|d| match d {
            Descriptor::TimeRange { not_after_unix: Some(t), .. } if *t != 0 => Some(*t),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Deployment {
        Deployment::parse(
            &serde_json::json!({
                "chainId": 31337, "network": "anvil", "rpcUrl": "http://127.0.0.1:8545",
                "entrypoints": {
                    "policyVaultAddress": "0x1111111111111111111111111111111111111111",
                    "paymentModuleAddress": "0x2222222222222222222222222222222222222222",
                    "accessReceiptAddress": "0x3333333333333333333333333333333333333333",
                    "timeRangeConditionAddress": "0x4444444444444444444444444444444444444444",
                    "uaidOwnershipConditionAddress": "0x5555555555555555555555555555555555555555",
                    "addressAllowlistConditionAddress": "0x6666666666666666666666666666666666666666",
                    "agentIdentityRegistryAddress": "0x7777777777777777777777777777777777777777"
                }
            })
            .to_string(),
        )
        .unwrap()
    }

    /// Each descriptor, and the configData its evaluator decodes (the
    /// encodings written out by hand from the ABI specification).
    #[test]
    fn builtin_configs_are_abi_encoded() {
        let word = |n: u64| format!("{n:064x}");
        let cases: Vec<(serde_json::Value, String, &str)> = vec![
            (
                serde_json::json!({"kind": "time-range", "notBeforeUnix": 10, "notAfterUnix": 4000000000u64}),
                format!("0x{}{}", word(10), word(4_000_000_000)),
                "0x4444444444444444444444444444444444444444",
            ),
            (
                serde_json::json!({"kind": "evm-allowlist", "allowlistedBuyerAddresses": ["0xAbCdEf0000000000000000000000000000000001"]}),
                format!("0x{}{}{:0>64}", word(32), word(1), "abcdef0000000000000000000000000000000001"),
                "0x6666666666666666666666666666666666666666",
            ),
            (
                serde_json::json!({"kind": "custom-static", "evaluatorAddress": "0x8888888888888888888888888888888888888888", "configDataHex": "0xDEAD"}),
                "0xdead".to_string(),
                "0x8888888888888888888888888888888888888888",
            ),
        ];
        for (descriptor, config, evaluator) in cases {
            let descriptor: Descriptor = serde_json::from_value(descriptor).unwrap();
            let prepared = prepare(0, &descriptor, &deployment()).unwrap();
            assert_eq!(prepared.config_data_hex, config, "{descriptor:?}");
            assert_eq!(prepared.evaluator_address, evaluator);
            assert_eq!(prepared.config_hash, hashes::hex(&hashes::keccak(&prepared.config_data())));
            let (back, _) = describe(prepared.evaluator(), &prepared.config_data(), &deployment().builtins);
            assert_eq!(back, prepared.descriptor);
        }
    }

    #[test]
    fn uaid_ownership_reads_the_agent_from_the_uaid() {
        let uaid = "uaid:aid:helper;uid=31337:7;registry=erc-8004;proto=erc-8004;nativeId=31337:7";
        let descriptor = Descriptor::UaidOwnership {
            required_buyer_uaid: uaid.into(),
            evaluator_address: None,
            identity_registry_address: None,
            agent_id: None,
        };
        let prepared = prepare(0, &descriptor, &deployment()).unwrap();
        let expected =
            format!("0x{}{:0>64}{:064x}", hex::encode_hash(uaid), "7777777777777777777777777777777777777777", 7);
        assert_eq!(prepared.config_data_hex, expected);
        assert_eq!(prepared.runtime_witness, Witness::BuyerUaid { label: None });
        let other_chain = uaid.replace("nativeId=31337:7", "nativeId=1:7");
        let refused = prepare(
            0,
            &Descriptor::UaidOwnership {
                required_buyer_uaid: other_chain,
                evaluator_address: None,
                identity_registry_address: None,
                agent_id: None,
            },
            &deployment(),
        );
        assert_eq!(refused.unwrap_err().field, "metadata.purchaseRequirements.conditions[0].requiredBuyerUaid");
    }

    mod hex {
        pub fn encode_hash(text: &str) -> String {
            crate::hashes::hex(&crate::hashes::keccak(text.as_bytes()))[2..].to_string()
        }
    }

    /// Each bad descriptor and the field its refusal names.
    #[test]
    fn refusals_name_the_field() {
        let cases = [
            (serde_json::json!({"kind": "time-range", "notBeforeUnix": 5, "notAfterUnix": 5}), "notAfterUnix"),
            (
                serde_json::json!({"kind": "evm-allowlist", "allowlistedBuyerAddresses": []}),
                "allowlistedBuyerAddresses",
            ),
            (
                serde_json::json!({"kind": "evm-allowlist", "allowlistedBuyerAddresses": ["0x12"]}),
                "allowlistedBuyerAddresses[0]",
            ),
            (serde_json::json!({"kind": "time-range", "evaluatorAddress": "nope"}), "evaluatorAddress"),
            (
                serde_json::json!({"kind": "custom-static", "evaluatorAddress": "0x8888888888888888888888888888888888888888", "configDataHex": "0xabc"}),
                "configDataHex",
            ),
            (
                serde_json::json!({"kind": "uaid-ownership", "requiredBuyerUaid": "uaid:aid:x;uid=0;registry=hol"}),
                "requiredBuyerUaid",
            ),
        ];
        for (descriptor, field) in cases {
            let descriptor: Descriptor = serde_json::from_value(descriptor.clone()).unwrap();
            let error = prepare(3, &descriptor, &deployment()).unwrap_err();
            assert_eq!(error.field, format!("metadata.purchaseRequirements.conditions[3].{field}"), "{descriptor:?}");
        }
    }

    /// The conditions hash, computed from the definition step by step.
    #[test]
    fn conditions_hash_follows_the_vault() {
        let (a, b) = (Address::repeat_byte(0xaa), Address::repeat_byte(0xbb));
        let (ha, hb) = (hashes::keccak(b"one"), hashes::keccak(b"two"));
        let entry = |e: &Address, h: &B256| {
            let mut bytes = [0u8; 64];
            bytes[12..32].copy_from_slice(e.as_slice());
            bytes[32..].copy_from_slice(h.as_slice());
            hashes::keccak(&bytes)
        };
        let mut encoded = Vec::new();
        encoded.extend_from_slice(&U256::from(32).to_be_bytes::<32>());
        encoded.extend_from_slice(&U256::from(2).to_be_bytes::<32>());
        encoded.extend_from_slice(entry(&a, &ha).as_slice());
        encoded.extend_from_slice(entry(&b, &hb).as_slice());
        assert_eq!(conditions_hash(&[(a, ha), (b, hb)]), hashes::keccak(&encoded));
        assert_eq!(
            hashes::hex(&conditions_hash(&[])),
            hashes::hex(&hashes::keccak(&[&U256::from(32).to_be_bytes::<32>()[..], &[0u8; 32][..]].concat()))
        );
    }
}
