// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./Errors.sol";
import "./Events.sol";
import "./Interfaces.sol";
import "./Owned.sol";

/// The shared registry of datasets (the hashes of encrypted content), the
/// policies that sell access to them, and the evaluators a policy's
/// conditions may name. Only hashes are on chain; the ciphertext and its
/// key are held off chain.
contract PolicyVault is Owned, PolicyVaultEvents {
    uint32 public constant MAX_POLICY_CONDITIONS = 16;

    struct PolicyConditionInput {
        address evaluator;
        bytes configData;
    }

    struct Policy {
        address provider;
        address payout;
        address paymentToken;
        uint96 price;
        uint64 createdAt;
        bool active;
        bool receiptTransferable;
        bool allowlistEnabled;
        bytes32 ciphertextHash;
        bytes32 keyCommitment;
        bytes32 metadataHash;
        bytes32 providerUaidHash;
        uint256 datasetId;
        bytes32 conditionsHash;
        uint32 conditionCount;
    }

    struct Dataset {
        address provider;
        uint64 createdAt;
        bool active;
        bytes32 ciphertextHash;
        bytes32 keyCommitment;
        bytes32 metadataHash;
        bytes32 providerUaidHash;
    }

    struct StoredPolicyCondition {
        address evaluator;
        bytes configData;
        bytes32 configHash;
    }

    struct PolicyEvaluatorRegistration {
        address registrant;
        bytes32 metadataHash;
        uint64 registeredAt;
        bool active;
        bool builtIn;
    }

    uint256 public evaluatorRegistrationFee = 0.05 ether;
    address public evaluatorFeeRecipient;
    uint256 public policyCount;
    uint256 public datasetCount;

    mapping(uint256 => Policy) private policies;
    mapping(uint256 => StoredPolicyCondition[]) private policyConditions;
    mapping(uint256 => Dataset) private datasets;
    mapping(uint256 => uint256[]) private datasetPolicyIds;
    mapping(address => PolicyEvaluatorRegistration) private evaluators;
    address[] private evaluatorIndex;

    constructor(address initialOwner) Owned(initialOwner) {
        evaluatorFeeRecipient = initialOwner;
    }

    // Evaluators.

    /// Anyone may register an evaluator for exactly the registration fee,
    /// which goes to the fee recipient.
    function registerPolicyEvaluator(address evaluator, bytes32 metadataHash) external payable {
        if (msg.value != evaluatorRegistrationFee) {
            revert InvalidEvaluatorRegistrationFee(evaluatorRegistrationFee, msg.value);
        }
        _registerEvaluator(evaluator, msg.sender, metadataHash, msg.value, false);
        if (msg.value > 0) {
            (bool paid,) = evaluatorFeeRecipient.call{value: msg.value}("");
            if (!paid) revert EvaluatorRegistrationPayoutFailed();
        }
    }

    function registerBuiltInEvaluator(address evaluator, bytes32 metadataHash) external onlyOwner {
        _registerEvaluator(evaluator, msg.sender, metadataHash, 0, true);
    }

    function setPolicyEvaluatorActive(address evaluator, bool active) external onlyOwner {
        if (evaluators[evaluator].registeredAt == 0) revert EvaluatorNotRegistered();
        evaluators[evaluator].active = active;
        emit PolicyEvaluatorStatusUpdated(evaluator, active);
    }

    function setEvaluatorRegistrationFee(uint256 newFee) external onlyOwner {
        evaluatorRegistrationFee = newFee;
        emit PolicyEvaluatorFeeUpdated(newFee);
    }

    function setEvaluatorFeeRecipient(address newFeeRecipient) external onlyOwner {
        if (newFeeRecipient == address(0)) revert InvalidFeeRecipient();
        evaluatorFeeRecipient = newFeeRecipient;
        emit PolicyEvaluatorFeeRecipientUpdated(newFeeRecipient);
    }

    function _registerEvaluator(
        address evaluator,
        address registrant,
        bytes32 metadataHash,
        uint256 feePaid,
        bool builtIn
    ) private {
        if (evaluator == address(0) || evaluator.code.length == 0) revert InvalidConditionEvaluator();
        if (metadataHash == bytes32(0)) revert InvalidEvaluatorMetadataHash();
        if (evaluators[evaluator].registeredAt != 0) revert EvaluatorAlreadyRegistered();
        evaluators[evaluator] = PolicyEvaluatorRegistration({
            registrant: registrant,
            metadataHash: metadataHash,
            registeredAt: uint64(block.timestamp),
            active: true,
            builtIn: builtIn
        });
        evaluatorIndex.push(evaluator);
        emit PolicyEvaluatorRegistered(evaluator, registrant, metadataHash, feePaid, builtIn);
    }

    // Datasets.

    function registerDataset(bytes32 ciphertextHash, bytes32 keyCommitment, bytes32 metadataHash, bytes32 providerUaidHash)
        external
        returns (uint256 datasetId)
    {
        if (
            ciphertextHash == bytes32(0) || keyCommitment == bytes32(0) || metadataHash == bytes32(0)
                || providerUaidHash == bytes32(0)
        ) revert InvalidDatasetHashes();
        datasetId = ++datasetCount;
        datasets[datasetId] = Dataset({
            provider: msg.sender,
            createdAt: uint64(block.timestamp),
            active: true,
            ciphertextHash: ciphertextHash,
            keyCommitment: keyCommitment,
            metadataHash: metadataHash,
            providerUaidHash: providerUaidHash
        });
        emit DatasetRegistered(datasetId, msg.sender, ciphertextHash, keyCommitment, metadataHash, providerUaidHash);
    }

    function setDatasetActive(uint256 datasetId, bool active) external {
        Dataset storage dataset = _dataset(datasetId);
        if (dataset.provider != msg.sender) revert NotDatasetProvider();
        dataset.active = active;
        emit DatasetStatusUpdated(datasetId, active);
    }

    // Policies.

    /// A policy selling access to the caller's active dataset for `price`
    /// wei (native currency only), under at most 16 conditions, each
    /// validated by its registered, active evaluator. Conditions and
    /// transferability never change afterwards.
    function createPolicyForDataset(
        uint256 datasetId,
        address payout,
        address paymentToken,
        uint96 price,
        bool receiptTransferable,
        bytes32 metadataHash,
        PolicyConditionInput[] calldata conditions
    ) external returns (uint256 policyId) {
        Dataset storage dataset = _dataset(datasetId);
        if (dataset.provider != msg.sender) revert NotDatasetProvider();
        if (!dataset.active) revert DatasetInactive();
        if (paymentToken != address(0)) revert InvalidPaymentToken();
        if (price == 0) revert InvalidPrice();
        if (metadataHash == bytes32(0)) revert InvalidPolicyHashes();
        if (conditions.length > MAX_POLICY_CONDITIONS) {
            revert TooManyPolicyConditions(conditions.length, MAX_POLICY_CONDITIONS);
        }
        policyId = ++policyCount;
        bytes32 conditionsHash = _storeConditions(policyId, datasetId, conditions);
        Policy storage policy = policies[policyId];
        policy.provider = msg.sender;
        policy.payout = payout == address(0) ? msg.sender : payout;
        policy.paymentToken = paymentToken;
        policy.price = price;
        policy.createdAt = uint64(block.timestamp);
        policy.active = true;
        policy.receiptTransferable = receiptTransferable;
        policy.ciphertextHash = dataset.ciphertextHash;
        policy.keyCommitment = dataset.keyCommitment;
        policy.metadataHash = metadataHash;
        policy.providerUaidHash = dataset.providerUaidHash;
        policy.datasetId = datasetId;
        policy.conditionsHash = conditionsHash;
        policy.conditionCount = uint32(conditions.length);
        datasetPolicyIds[datasetId].push(policyId);
        _emitPolicyCreated(policyId, dataset.metadataHash);
    }

    function _emitPolicyCreated(uint256 policyId, bytes32 datasetMetadataHash) private {
        Policy storage policy = policies[policyId];
        emit PolicyCreated(
            policyId,
            policy.datasetId,
            policy.provider,
            policy.payout,
            policy.paymentToken,
            policy.price,
            policy.receiptTransferable,
            policy.conditionsHash,
            policy.conditionCount,
            policy.metadataHash,
            datasetMetadataHash
        );
    }

    /// Checks and stores a new policy's conditions; returns their hash:
    /// keccak-256 of the ABI-encoded list of keccak-256(evaluator, keccak-256(configData)).
    function _storeConditions(uint256 policyId, uint256 datasetId, PolicyConditionInput[] calldata conditions)
        private
        returns (bytes32)
    {
        bytes32[] memory entries = new bytes32[](conditions.length);
        for (uint256 i = 0; i < conditions.length; i++) {
            address evaluator = conditions[i].evaluator;
            PolicyEvaluatorRegistration storage registration = evaluators[evaluator];
            if (registration.registeredAt == 0) revert EvaluatorNotRegistered();
            if (!registration.active) revert EvaluatorInactive();
            IPolicyCondition(evaluator).validateCondition(address(this), msg.sender, datasetId, conditions[i].configData);
            bytes32 configHash = keccak256(conditions[i].configData);
            policyConditions[policyId].push(StoredPolicyCondition(evaluator, conditions[i].configData, configHash));
            entries[i] = keccak256(abi.encode(evaluator, configHash));
        }
        return keccak256(abi.encode(entries));
    }

    /// Price, active and metadata are all a provider may change.
    function updatePolicy(uint256 policyId, uint96 newPrice, bool active, bytes32 newMetadataHash) external {
        Policy storage policy = _policy(policyId);
        if (policy.provider != msg.sender) revert NotPolicyProvider();
        if (newPrice == 0) revert InvalidPrice();
        if (newMetadataHash == bytes32(0)) revert InvalidPolicyHashes();
        policy.price = newPrice;
        policy.active = active;
        policy.metadataHash = newMetadataHash;
        emit PolicyUpdated(policyId, policy.datasetId, newPrice, active, newMetadataHash);
    }

    // Views.

    function getPolicy(uint256 policyId) external view returns (Policy memory) {
        return _policy(policyId);
    }

    function getDataset(uint256 datasetId) external view returns (Dataset memory) {
        return _dataset(datasetId);
    }

    function getDatasetPolicyCount(uint256 datasetId) external view returns (uint256) {
        _dataset(datasetId);
        return datasetPolicyIds[datasetId].length;
    }

    function getDatasetPolicyIdAt(uint256 datasetId, uint256 index) external view returns (uint256) {
        _dataset(datasetId);
        return datasetPolicyIds[datasetId][index];
    }

    function getDatasetPolicyIds(uint256 datasetId) external view returns (uint256[] memory) {
        _dataset(datasetId);
        return datasetPolicyIds[datasetId];
    }

    function getPolicyConditionCount(uint256 policyId) external view returns (uint256) {
        _policy(policyId);
        return policyConditions[policyId].length;
    }

    function getPolicyCondition(uint256 policyId, uint256 index)
        external
        view
        returns (address evaluator, bytes memory configData, bytes32 configHash)
    {
        _policy(policyId);
        StoredPolicyCondition storage condition = policyConditions[policyId][index];
        return (condition.evaluator, condition.configData, condition.configHash);
    }

    function getPolicyEvaluator(address evaluator) external view returns (PolicyEvaluatorRegistration memory) {
        return evaluators[evaluator];
    }

    function getPolicyEvaluatorCount() external view returns (uint256) {
        return evaluatorIndex.length;
    }

    function getPolicyEvaluatorAt(uint256 index) external view returns (address) {
        return evaluatorIndex[index];
    }

    function _policy(uint256 policyId) private view returns (Policy storage policy) {
        policy = policies[policyId];
        if (policy.provider == address(0)) revert PolicyNotFound();
    }

    function _dataset(uint256 datasetId) private view returns (Dataset storage dataset) {
        dataset = datasets[datasetId];
        if (dataset.provider == address(0)) revert DatasetNotFound();
    }
}
