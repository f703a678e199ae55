// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// A minimal ERC-8004 identity registry for a local chain: an agent id per
/// registration, owned by its registrant. Enough for the UAID ownership
/// condition, which asks only `ownerOf`.
contract AgentIdentityRegistry {
    event Registered(uint256 indexed agentId, string tokenURI, address indexed owner);

    uint256 public agentCount;
    mapping(uint256 => address) private owners;
    mapping(uint256 => string) private uris;

    function register(string calldata agentUri) external returns (uint256 agentId) {
        agentId = ++agentCount;
        owners[agentId] = msg.sender;
        uris[agentId] = agentUri;
        emit Registered(agentId, agentUri, msg.sender);
    }

    function ownerOf(uint256 agentId) external view returns (address holder) {
        holder = owners[agentId];
        require(holder != address(0), "agent not found");
    }

    function tokenURI(uint256 agentId) external view returns (string memory) {
        require(owners[agentId] != address(0), "agent not found");
        return uris[agentId];
    }
}
