// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./Errors.sol";
import "./Events.sol";
import "./Interfaces.sol";
import "./Owned.sol";

interface IERC721Receiver {
    function onERC721Received(address operator, address from, uint256 tokenId, bytes calldata data)
        external
        returns (bytes4);
}

/// The access receipt: an ERC-721 only the payment module mints, one per
/// purchase. It is indexed by policy and holder and by dataset and holder,
/// and both indexes follow a transfer; a non-transferable receipt cannot
/// move, and a transferable one cannot go to a wallet that already has
/// access to its dataset.
contract AccessReceipt is Owned, AccessReceiptEvents {
    string public constant name = "Programmable Secrets Access Receipt";
    string public constant symbol = "PSAR";
    string private constant TOKEN_URI = "ipfs://bafkreibw3osbcrk7w522tcjuz5a4ihffd3bfbjkwmfso5esxyfml2cfal4";

    struct Receipt {
        uint256 policyId;
        uint256 datasetId;
        address buyer;
        address recipient;
        address paymentToken;
        uint96 price;
        uint64 purchasedAt;
        bool receiptTransferable;
        bytes32 ciphertextHash;
        bytes32 keyCommitment;
    }

    uint256 public receiptCount;
    address public paymentModule;

    mapping(uint256 => Receipt) private receipts;
    mapping(uint256 => address) private owners;
    mapping(address => uint256) private balances;
    mapping(uint256 => address) private approvals;
    mapping(address => mapping(address => bool)) private operators;
    mapping(uint256 => mapping(address => uint256)) private byPolicyAndHolder;
    mapping(uint256 => mapping(address => uint256)) private byDatasetAndHolder;

    constructor(address initialOwner) Owned(initialOwner) {}

    function setPaymentModule(address newPaymentModule) external onlyOwner {
        if (newPaymentModule.code.length == 0) revert InvalidModuleAddress();
        paymentModule = newPaymentModule;
        emit PaymentModuleUpdated(newPaymentModule);
    }

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
    ) external returns (uint256 receiptTokenId) {
        if (msg.sender != paymentModule) revert NotPaymentModule();
        if (byPolicyAndHolder[policyId][buyer] != 0 || byDatasetAndHolder[datasetId][buyer] != 0) {
            revert AlreadyHasReceipt();
        }
        receiptTokenId = ++receiptCount;
        receipts[receiptTokenId] = Receipt(
            policyId,
            datasetId,
            buyer,
            recipient,
            paymentToken,
            price,
            purchasedAt,
            receiptTransferable,
            ciphertextHash,
            keyCommitment
        );
        owners[receiptTokenId] = buyer;
        balances[buyer] += 1;
        byPolicyAndHolder[policyId][buyer] = receiptTokenId;
        byDatasetAndHolder[datasetId][buyer] = receiptTokenId;
        emit Transfer(address(0), buyer, receiptTokenId);
        emit ReceiptMinted(
            receiptTokenId,
            policyId,
            datasetId,
            buyer,
            recipient,
            paymentToken,
            price,
            purchasedAt,
            receiptTransferable,
            ciphertextHash,
            keyCommitment
        );
    }

    // Entitlement views.

    /// The holder has a receipt for the policy (whether the policy is
    /// still active is the payment module's question).
    function hasAccess(uint256 policyId, address buyer) external view returns (bool) {
        return byPolicyAndHolder[policyId][buyer] != 0;
    }

    function receiptOfPolicyAndBuyer(uint256 policyId, address buyer) external view returns (uint256) {
        return byPolicyAndHolder[policyId][buyer];
    }

    function receiptOfDatasetAndBuyer(uint256 datasetId, address buyer) external view returns (uint256) {
        return byDatasetAndHolder[datasetId][buyer];
    }

    function receiptOfPolicyAndHolder(uint256 policyId, address holder) external view returns (uint256) {
        return byPolicyAndHolder[policyId][holder];
    }

    function receiptOfDatasetAndHolder(uint256 datasetId, address holder) external view returns (uint256) {
        return byDatasetAndHolder[datasetId][holder];
    }

    function getReceipt(uint256 receiptTokenId) external view returns (Receipt memory) {
        if (owners[receiptTokenId] == address(0)) revert TokenNotFound();
        return receipts[receiptTokenId];
    }

    // ERC-721.

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x01ffc9a7 || interfaceId == 0x80ac58cd || interfaceId == 0x5b5e139f;
    }

    function tokenURI(uint256 receiptTokenId) external view returns (string memory) {
        if (owners[receiptTokenId] == address(0)) revert TokenNotFound();
        return TOKEN_URI;
    }

    function balanceOf(address holder) external view returns (uint256) {
        if (holder == address(0)) revert InvalidReceiver();
        return balances[holder];
    }

    function ownerOf(uint256 tokenId) public view returns (address holder) {
        holder = owners[tokenId];
        if (holder == address(0)) revert TokenNotFound();
    }

    function approve(address to, uint256 tokenId) external {
        address holder = ownerOf(tokenId);
        if (msg.sender != holder && !operators[holder][msg.sender]) revert NotAuthorized();
        approvals[tokenId] = to;
        emit Approval(holder, to, tokenId);
    }

    function getApproved(uint256 tokenId) external view returns (address) {
        ownerOf(tokenId);
        return approvals[tokenId];
    }

    function setApprovalForAll(address operator, bool approved) external {
        operators[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function isApprovedForAll(address holder, address operator) external view returns (bool) {
        return operators[holder][operator];
    }

    function transferFrom(address from, address to, uint256 tokenId) public {
        address holder = ownerOf(tokenId);
        if (holder != from) revert NotAuthorized();
        if (msg.sender != holder && approvals[tokenId] != msg.sender && !operators[holder][msg.sender]) {
            revert NotAuthorized();
        }
        if (to == address(0)) revert InvalidReceiver();
        Receipt storage receipt = receipts[tokenId];
        if (!receipt.receiptTransferable) revert ReceiptNonTransferable();
        if (byDatasetAndHolder[receipt.datasetId][to] != 0 || byPolicyAndHolder[receipt.policyId][to] != 0) {
            revert ReceiptHolderAlreadyHasAccess();
        }
        delete approvals[tokenId];
        balances[from] -= 1;
        balances[to] += 1;
        owners[tokenId] = to;
        delete byPolicyAndHolder[receipt.policyId][from];
        delete byDatasetAndHolder[receipt.datasetId][from];
        byPolicyAndHolder[receipt.policyId][to] = tokenId;
        byDatasetAndHolder[receipt.datasetId][to] = tokenId;
        emit Transfer(from, to, tokenId);
    }

    function safeTransferFrom(address from, address to, uint256 tokenId) external {
        safeTransferFrom(from, to, tokenId, "");
    }

    function safeTransferFrom(address from, address to, uint256 tokenId, bytes memory data) public {
        transferFrom(from, to, tokenId);
        if (to.code.length > 0) {
            bytes4 answer = IERC721Receiver(to).onERC721Received(msg.sender, from, tokenId, data);
            if (answer != IERC721Receiver.onERC721Received.selector) revert InvalidReceiver();
        }
    }
}
