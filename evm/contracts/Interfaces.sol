// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// A purchase condition: the vault asks it to check a policy's config when
/// the policy is made, and the payment module asks it whether a buyer may
/// buy, with the buyer's runtime input.
interface IPolicyCondition {
    /// Reverts when `configData` is not a config this evaluator accepts.
    function validateCondition(address policyVault, address provider, uint256 datasetId, bytes calldata configData)
        external
        view;

    function isPurchaseAllowed(
        address policyVault,
        uint256 policyId,
        address buyer,
        address recipient,
        bytes calldata configData,
        bytes calldata runtimeData
    ) external view returns (bool);
}

/// What the UAID ownership condition asks of an ERC-8004 identity registry.
interface IIdentityRegistry {
    function ownerOf(uint256 agentId) external view returns (address);
}

/// What the payment module and the receipt ask of each other and the vault.
interface IAccessReceipt {
    function mintReceipt(
        address buyer,
        address recipient,
        uint256 policyId,
        uint256 datasetId,
        address paymentToken,
        uint96 price,
        uint64 purchasedAt,
        bool receiptTransferable,
        bytes32 ciphertextHash,
        bytes32 keyCommitment
    ) external returns (uint256 receiptTokenId);
    function receiptOfPolicyAndHolder(uint256 policyId, address holder) external view returns (uint256);
    function receiptOfDatasetAndHolder(uint256 datasetId, address holder) external view returns (uint256);
}

interface IPaymentModule {
    function hasDatasetAccess(uint256 datasetId, address buyer) external view returns (bool);
}
