// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import "./Errors.sol";
import "./Interfaces.sol";

/// Purchases allowed from `notBefore` (inclusive) until `notAfter`
/// (exclusive), each zero for unbounded. A policy cannot be made already
/// closed. Checked at purchase only: not a lease.
contract TimeRangeCondition is IPolicyCondition {
    function validateCondition(address, address, uint256, bytes calldata configData) external view {
        (uint64 notBefore, uint64 notAfter) = abi.decode(configData, (uint64, uint64));
        if (notAfter != 0 && (notAfter <= block.timestamp || notAfter <= notBefore)) revert InvalidExpiry();
    }

    function isPurchaseAllowed(address, uint256, address, address, bytes calldata configData, bytes calldata)
        external
        view
        returns (bool)
    {
        (uint64 notBefore, uint64 notAfter) = abi.decode(configData, (uint64, uint64));
        return (notBefore == 0 || block.timestamp >= notBefore) && (notAfter == 0 || block.timestamp < notAfter);
    }
}

/// The buyer names a UAID (runtime input: abi.encode(string)) whose
/// keccak-256 is the configured hash, and owns the configured agent in
/// the ERC-8004 identity registry.
contract UaidOwnershipCondition is IPolicyCondition {
    function validateCondition(address, address, uint256, bytes calldata configData) external view {
        (bytes32 uaidHash, address registry, uint256 agentId) = abi.decode(configData, (bytes32, address, uint256));
        if (uaidHash == bytes32(0)) revert InvalidRequiredBuyerUaid();
        if (registry == address(0) || registry.code.length == 0) revert InvalidIdentityRegistry();
        if (agentId == 0) revert InvalidAgentId();
        if (_owner(registry, agentId) == address(0)) revert AgentIdentityNotFound();
    }

    function isPurchaseAllowed(address, uint256, address buyer, address, bytes calldata configData, bytes calldata runtime)
        external
        view
        returns (bool)
    {
        (bytes32 uaidHash, address registry, uint256 agentId) = abi.decode(configData, (bytes32, address, uint256));
        if (runtime.length == 0) return false;
        string memory uaid = abi.decode(runtime, (string));
        return keccak256(bytes(uaid)) == uaidHash && _owner(registry, agentId) == buyer;
    }

    function _owner(address registry, uint256 agentId) private view returns (address) {
        try IIdentityRegistry(registry).ownerOf(agentId) returns (address holder) {
            return holder;
        } catch {
            return address(0);
        }
    }
}

/// The buyer is one of 1 to 512 configured addresses.
contract AddressAllowlistCondition is IPolicyCondition {
    uint256 public constant MAX_ALLOWLIST = 512;

    function validateCondition(address, address, uint256, bytes calldata configData) external pure {
        address[] memory allowed = abi.decode(configData, (address[]));
        if (allowed.length == 0) revert EmptyAllowlist();
        if (allowed.length > MAX_ALLOWLIST) revert AllowlistTooLarge(allowed.length, MAX_ALLOWLIST);
    }

    function isPurchaseAllowed(address, uint256, address buyer, address, bytes calldata configData, bytes calldata)
        external
        pure
        returns (bool)
    {
        address[] memory allowed = abi.decode(configData, (address[]));
        for (uint256 i = 0; i < allowed.length; i++) {
            if (allowed[i] == buyer) return true;
        }
        return false;
    }
}
