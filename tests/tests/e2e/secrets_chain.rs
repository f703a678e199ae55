//! The Programmable Secrets contracts written here (`evm/contracts/`),
//! compiled by the pinned solc and run on a real anvil: the rules the
//! broker relies on, and the hashes it computes off chain agreeing with
//! the ones the vault computes on chain.

use alloy_sol_types::SolEvent;
use programmable_secrets::conditions::{self, Descriptor};
use programmable_secrets::contracts::{PaymentModule, PolicyVault};
use programmable_secrets::{hashes, Address, Bytes, B256, U256};
use tests::evm::{deploy_protocol, Anvil, Chain};

fn word(n: u8) -> B256 {
    B256::repeat_byte(n)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_is_created_bought_and_gated_as_the_protocol_says() {
    let anvil = Anvil::start().unwrap();
    let chain = Chain::new(&anvil.url);
    let deployment = deploy_protocol(&chain, "anvil").await.unwrap();
    let accounts = chain.accounts().await.unwrap();
    let (provider, buyer, stranger) = (accounts[1], accounts[2], accounts[3]);

    let dataset = PolicyVault::registerDatasetCall {
        ciphertextHash: word(1),
        keyCommitment: word(2),
        metadataHash: word(3),
        providerUaidHash: word(4),
    };
    let registered = chain.transact(provider, deployment.policy_vault, dataset, U256::ZERO).await.unwrap();
    let dataset_id = Chain::first_topic(&registered, PolicyVault::DatasetRegistered::SIGNATURE_HASH).unwrap();
    assert_eq!(dataset_id, U256::from(1));

    // Two conditions prepared off chain: the buyer on an allowlist, and
    // purchases open until far in the future.
    let descriptors = [
        Descriptor::EvmAllowlist { allowlisted_buyer_addresses: vec![format!("{buyer:#x}")], evaluator_address: None },
        Descriptor::TimeRange { not_before_unix: None, not_after_unix: Some(4_000_000_000), evaluator_address: None },
    ];
    let prepared: Vec<_> =
        descriptors.iter().enumerate().map(|(i, d)| conditions::prepare(i, d, &deployment).unwrap()).collect();
    let inputs = prepared
        .iter()
        .map(|p| PolicyVault::PolicyConditionInput { evaluator: p.evaluator(), configData: p.config_data() })
        .collect();
    let price = U256::from(1_000_000_000_000_000u64);
    let create = PolicyVault::createPolicyForDatasetCall {
        datasetId: dataset_id,
        payout: Address::ZERO,
        paymentToken: Address::ZERO,
        price: price.to(),
        receiptTransferable: false,
        metadataHash: word(5),
        conditions: inputs,
    };
    let created = chain.transact(provider, deployment.policy_vault, create, U256::ZERO).await.unwrap();
    let policy_id = Chain::first_topic(&created, PolicyVault::PolicyCreated::SIGNATURE_HASH).unwrap();
    let policy = chain.view(deployment.policy_vault, PolicyVault::getPolicyCall { policyId: policy_id }).await.unwrap();
    let pairs: Vec<(Address, B256)> =
        prepared.iter().map(|p| (p.evaluator(), hashes::keccak(&p.config_data()))).collect();
    assert_eq!(policy.conditionsHash, conditions::conditions_hash(&pairs), "the vault and the broker hash alike");
    assert_eq!((policy.payout, policy.conditionCount, policy.ciphertextHash), (provider, 2, word(1)));
    let stored = chain
        .view(deployment.policy_vault, PolicyVault::getPolicyConditionCall { policyId: policy_id, index: U256::ZERO })
        .await
        .unwrap();
    let (described, _) = conditions::describe(stored.evaluator, &stored.configData, &deployment.builtins);
    assert_eq!(described, prepared[0].descriptor);

    let purchase = |runtime: Vec<Bytes>| PaymentModule::purchaseCall {
        policyId: policy_id,
        recipient: Address::ZERO,
        conditionRuntimeInputs: runtime,
    };
    let two_inputs = || vec![Bytes::new(), Bytes::new()];
    // Refusals: a buyer off the list, a wrong price, a wrong input count.
    assert!(chain.transact(stranger, deployment.payment_module, purchase(two_inputs()), price).await.is_err());
    assert!(chain
        .transact(buyer, deployment.payment_module, purchase(two_inputs()), price - U256::from(1))
        .await
        .is_err());
    assert!(chain.transact(buyer, deployment.payment_module, purchase(vec![Bytes::new()]), price).await.is_err());
    let access = |who: Address| PaymentModule::hasAccessCall { policyId: policy_id, buyer: who };
    assert!(!chain.view(deployment.payment_module, access(buyer)).await.unwrap());

    let bought = chain.transact(buyer, deployment.payment_module, purchase(two_inputs()), price).await.unwrap();
    assert!(bought
        .logs
        .iter()
        .any(|log| log["topics"][0] == serde_json::json!(PaymentModule::AccessGranted::SIGNATURE_HASH)));
    assert!(chain.view(deployment.payment_module, access(buyer)).await.unwrap());
    assert!(!chain.view(deployment.payment_module, access(stranger)).await.unwrap());
    // Bought once only.
    assert!(chain.transact(buyer, deployment.payment_module, purchase(two_inputs()), price).await.is_err());
    // Access ends with the dataset.
    let off = PolicyVault::setDatasetActiveCall { datasetId: dataset_id, active: false };
    assert!(
        chain.transact(buyer, deployment.policy_vault, off.clone(), U256::ZERO).await.is_err(),
        "only its provider"
    );
    chain.transact(provider, deployment.policy_vault, off, U256::ZERO).await.unwrap();
    assert!(!chain.view(deployment.payment_module, access(buyer)).await.unwrap());
}
