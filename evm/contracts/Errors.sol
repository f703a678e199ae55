// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

// The protocol's custom errors: clients and the broker's confirm step
// decode reverts by these names.

error InvalidPrice();
error InvalidExpiry();
error InvalidPaymentToken();
error InvalidPayoutAddress();
error InvalidConditionEvaluator();
error InvalidEvaluatorMetadataHash();
error InvalidEvaluatorRegistrationFee(uint256 expectedFee, uint256 actualFee);
error InvalidConditionInputCount();
error PolicyConditionFailed(uint256 conditionIndex);
error InvalidIdentityRegistry();
error InvalidAgentId();
error AgentIdentityNotFound();
error InvalidRequiredBuyerUaid();
error PaymentFailed();
error NotOwner();
error NotPolicyProvider();
error NotDatasetProvider();
error PolicyNotFound();
error DatasetNotFound();
error PolicyInactive();
error InvalidPolicyHashes();
error InvalidDatasetHashes();
error InvalidModuleAddress();
error InvalidFeeRecipient();
error DatasetInactive();
error EvaluatorAlreadyRegistered();
error EvaluatorNotRegistered();
error EvaluatorInactive();
error EvaluatorRegistrationPayoutFailed();
error EmptyAllowlist();
error AllowlistTooLarge(uint256 provided, uint256 maxAllowed);
error TooManyPolicyConditions(uint256 provided, uint256 maxAllowed);
error NotPaymentModule();
error ReceiptNonTransferable();
error ReceiptHolderAlreadyHasAccess();
error AlreadyHasReceipt();
error BuyerUaidMismatch();
error BuyerDoesNotOwnRequiredAgent();
error TokenNotFound();
error NotAuthorized();
error InvalidReceiver();
