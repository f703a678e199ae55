// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./Errors.sol";
import "./Events.sol";
import "./Interfaces.sol";
import "./Owned.sol";
import "./PolicyVault.sol";

/// Sells access under a vault's policies: checks each condition with the
/// buyer's runtime input, takes the exact price in the native currency,
/// pays the provider (less a 3% protocol fee to the owner) and mints the
/// buyer a receipt. Entitlement is a receipt held while the policy and
/// its dataset stay active.
contract PaymentModule is Owned, PaymentModuleEvents {
    uint256 public constant PROTOCOL_FEE_BPS = 300;

    PolicyVault public policyVault;
    IAccessReceipt public accessReceipt;
    bool private entered;

    constructor(address initialOwner, address policyVaultAddress, address accessReceiptAddress) Owned(initialOwner) {
        _setPolicyVault(policyVaultAddress);
        _setAccessReceipt(accessReceiptAddress);
    }

    modifier nonReentrant() {
        if (entered) revert NotAuthorized();
        entered = true;
        _;
        entered = false;
    }

    function setPolicyVault(address policyVaultAddress) external onlyOwner {
        _setPolicyVault(policyVaultAddress);
    }

    function setAccessReceipt(address accessReceiptAddress) external onlyOwner {
        _setAccessReceipt(accessReceiptAddress);
    }

    /// Buys access under `policyId` for exactly its price, one runtime
    /// input per condition. The receipt goes to the buyer; `recipient`
    /// (the buyer when zero) is recorded only.
    function purchase(uint256 policyId, address recipient, bytes[] calldata conditionRuntimeInputs)
        external
        payable
        nonReentrant
        returns (uint256 receiptTokenId)
    {
        PolicyVault.Policy memory policy = policyVault.getPolicy(policyId);
        if (!policy.active) revert PolicyInactive();
        PolicyVault.Dataset memory dataset = policyVault.getDataset(policy.datasetId);
        if (!dataset.active) revert DatasetInactive();
        if (policy.paymentToken != address(0)) revert InvalidPaymentToken();
        if (
            accessReceipt.receiptOfPolicyAndHolder(policyId, msg.sender) != 0
                || accessReceipt.receiptOfDatasetAndHolder(policy.datasetId, msg.sender) != 0
        ) revert AlreadyHasReceipt();
        if (msg.value != policy.price) revert InvalidPrice();
        address to = recipient == address(0) ? msg.sender : recipient;
        _checkConditions(policyId, policy.conditionCount, to, conditionRuntimeInputs);
        _settle(policy.payout, policy.price);
        uint64 purchasedAt = uint64(block.timestamp);
        receiptTokenId = accessReceipt.mintReceipt(
            msg.sender,
            to,
            policyId,
            policy.datasetId,
            policy.paymentToken,
            policy.price,
            purchasedAt,
            policy.receiptTransferable,
            policy.ciphertextHash,
            policy.keyCommitment
        );
        emit AccessGranted(
            policyId,
            policy.datasetId,
            receiptTokenId,
            msg.sender,
            to,
            policy.paymentToken,
            policy.price,
            purchasedAt,
            policy.receiptTransferable,
            policy.ciphertextHash,
            policy.keyCommitment
        );
    }

    /// A receipt for the policy is held by `buyer`, and the policy and its
    /// dataset are active.
    function hasAccess(uint256 policyId, address buyer) external view returns (bool) {
        if (policyId == 0 || policyId > policyVault.policyCount()) return false;
        if (accessReceipt.receiptOfPolicyAndHolder(policyId, buyer) == 0) return false;
        PolicyVault.Policy memory policy = policyVault.getPolicy(policyId);
        return policy.active && policyVault.getDataset(policy.datasetId).active;
    }

    function hasDatasetAccess(uint256 datasetId, address buyer) external view returns (bool) {
        if (datasetId == 0 || datasetId > policyVault.datasetCount()) return false;
        if (accessReceipt.receiptOfDatasetAndHolder(datasetId, buyer) == 0) return false;
        return policyVault.getDataset(datasetId).active;
    }

    function receiptOfPolicyAndBuyer(uint256 policyId, address buyer) external view returns (uint256) {
        return accessReceipt.receiptOfPolicyAndHolder(policyId, buyer);
    }

    function _checkConditions(uint256 policyId, uint32 count, address recipient, bytes[] calldata inputs) private view {
        if (inputs.length != count) revert InvalidConditionInputCount();
        for (uint256 i = 0; i < count; i++) {
            (address evaluator, bytes memory configData,) = policyVault.getPolicyCondition(policyId, i);
            bool allowed = IPolicyCondition(evaluator).isPurchaseAllowed(
                address(policyVault), policyId, msg.sender, recipient, configData, inputs[i]
            );
            if (!allowed) revert PolicyConditionFailed(i);
        }
    }

    /// 3% to the owner, the rest to the payout; all of it to the payout
    /// when the owner is the payout or the fee rounds to nothing.
    function _settle(address payout, uint96 price) private {
        uint256 fee = (uint256(price) * PROTOCOL_FEE_BPS) / 10_000;
        if (payout == owner) fee = 0;
        if (fee > 0) {
            (bool feePaid,) = owner.call{value: fee}("");
            if (!feePaid) revert PaymentFailed();
        }
        (bool paid,) = payout.call{value: uint256(price) - fee}("");
        if (!paid) revert PaymentFailed();
    }

    function _setPolicyVault(address policyVaultAddress) private {
        if (policyVaultAddress.code.length == 0) revert InvalidModuleAddress();
        policyVault = PolicyVault(policyVaultAddress);
        emit PolicyVaultUpdated(policyVaultAddress);
    }

    function _setAccessReceipt(address accessReceiptAddress) private {
        if (accessReceiptAddress.code.length == 0) revert InvalidModuleAddress();
        accessReceipt = IAccessReceipt(accessReceiptAddress);
        emit AccessReceiptUpdated(accessReceiptAddress);
    }
}
