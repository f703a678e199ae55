//! The contracts' interface, as the broker and the tests call it: the
//! functions, structs and events of the vault, the payment module, the
//! access receipt, the built-in evaluators' configs and an ERC-8004
//! identity registry, declared in Solidity's own syntax and encoded by
//! `alloy-sol-types` (selectors, ABI encoding and decoding, event topics).
//! The declarations follow the protocol's published interface, so a
//! deployment of the public contracts decodes the same as ours
//! (`evm/contracts/`).

// The events' generated constructors take one argument per field.
#[allow(clippy::too_many_arguments)]
mod generated {
    alloy_sol_types::sol! {
        /// `PolicyVault`: datasets, policies and the evaluator registry.
        #[derive(Debug, PartialEq, Eq)]
        interface PolicyVault {
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

            struct PolicyEvaluatorRegistration {
                address registrant;
                bytes32 metadataHash;
                uint64 registeredAt;
                bool active;
                bool builtIn;
            }

            event PolicyEvaluatorRegistered(
                address indexed evaluator, address indexed registrant, bytes32 metadataHash, uint256 feePaid, bool builtIn
            );
            event PolicyEvaluatorStatusUpdated(address indexed evaluator, bool active);
            event DatasetRegistered(
                uint256 indexed datasetId,
                address indexed provider,
                bytes32 ciphertextHash,
                bytes32 keyCommitment,
                bytes32 metadataHash,
                bytes32 providerUaidHash
            );
            event DatasetStatusUpdated(uint256 indexed datasetId, bool active);
            event PolicyCreated(
                uint256 indexed policyId,
                uint256 indexed datasetId,
                address indexed provider,
                address payout,
                address paymentToken,
                uint256 price,
                bool receiptTransferable,
                bytes32 conditionsHash,
                uint32 conditionCount,
                bytes32 metadataHash,
                bytes32 datasetMetadataHash
            );
            event PolicyUpdated(
                uint256 indexed policyId, uint256 indexed datasetId, uint256 newPrice, bool active, bytes32 newMetadataHash
            );

            function registerBuiltInEvaluator(address evaluator, bytes32 metadataHash) external;
            function setPolicyEvaluatorActive(address evaluator, bool active) external;
            function registerDataset(
                bytes32 ciphertextHash, bytes32 keyCommitment, bytes32 metadataHash, bytes32 providerUaidHash
            ) external returns (uint256 datasetId);
            function setDatasetActive(uint256 datasetId, bool active) external;
            function createPolicyForDataset(
                uint256 datasetId,
                address payout,
                address paymentToken,
                uint96 price,
                bool receiptTransferable,
                bytes32 metadataHash,
                PolicyConditionInput[] conditions
            ) external returns (uint256 policyId);
            function updatePolicy(uint256 policyId, uint96 newPrice, bool active, bytes32 newMetadataHash) external;
            function policyCount() external view returns (uint256);
            function datasetCount() external view returns (uint256);
            function getPolicy(uint256 policyId) external view returns (Policy memory);
            function getDataset(uint256 datasetId) external view returns (Dataset memory);
            function getPolicyConditionCount(uint256 policyId) external view returns (uint256);
            function getPolicyCondition(uint256 policyId, uint256 index)
                external view returns (address evaluator, bytes configData, bytes32 configHash);
            function getPolicyEvaluator(address evaluator) external view returns (PolicyEvaluatorRegistration memory);
        }

        /// `PaymentModule`: purchases and entitlement.
        #[derive(Debug, PartialEq, Eq)]
        interface PaymentModule {
            event AccessGranted(
                uint256 indexed policyId,
                uint256 indexed datasetId,
                uint256 indexed receiptTokenId,
                address buyer,
                address recipient,
                address paymentToken,
                uint256 price,
                uint64 purchasedAt,
                bool receiptTransferable,
                bytes32 ciphertextHash,
                bytes32 keyCommitment
            );

            function purchase(uint256 policyId, address recipient, bytes[] conditionRuntimeInputs)
                external payable returns (uint256 receiptTokenId);
            function hasAccess(uint256 policyId, address buyer) external view returns (bool);
            function hasDatasetAccess(uint256 datasetId, address buyer) external view returns (bool);
            function receiptOfPolicyAndBuyer(uint256 policyId, address buyer) external view returns (uint256);
        }

        /// `AccessReceipt`: the ERC-721 receipts.
        #[derive(Debug, PartialEq, Eq)]
        interface AccessReceipt {
            event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

            function setPaymentModule(address newPaymentModule) external;
            function ownerOf(uint256 tokenId) external view returns (address);
            function transferFrom(address from, address to, uint256 tokenId) external;
        }

        /// An ERC-8004 identity registry, as far as the UAID condition and a
        /// local chain's agents need one.
        #[derive(Debug, PartialEq, Eq)]
        interface IdentityRegistry {
            function register(string agentUri) external returns (uint256 agentId);
            function ownerOf(uint256 agentId) external view returns (address);
        }

        /// Constructor arguments.
        #[derive(Debug)]
        struct OwnerArgument { address initialOwner; }
        #[derive(Debug)]
        struct PaymentModuleArguments { address initialOwner; address policyVault; address accessReceipt; }

        /// The built-in evaluators' configs and runtime inputs.
        #[derive(Debug, PartialEq, Eq)]
        struct TimeRangeConfig { uint64 notBefore; uint64 notAfter; }
        #[derive(Debug, PartialEq, Eq)]
        struct UaidOwnershipConfig { bytes32 requiredBuyerUaidHash; address identityRegistry; uint256 agentId; }
        /// One entry of the conditions hash: `keccak256(abi.encode(evaluator, configHash))`.
        struct ConditionEntry { address evaluator; bytes32 configHash; }
    }
}
pub use generated::*;
