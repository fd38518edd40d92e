// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title CTL log anchors
/// @notice One event per anchor of a log's head: its origin (the log's name), its size (entries)
/// and its root hash (the head hash of a hash chain, or a checkpoint's Merkle root). Only the
/// anchoring address fixed at deployment may anchor, so a verifier that pins this contract's
/// address reads only anchors the service made; nothing is stored (the events are the record).
contract CtlAnchor {
    /// @notice The only address allowed to anchor (the service's signer).
    address public immutable anchorer;

    /// @param originHash keccak256 of the origin's UTF-8 bytes (a topic to filter on)
    event Anchored(bytes32 indexed originHash, uint64 indexed size, bytes32 root, string origin);

    error NotAnchorer(address sender);
    error EmptyOrigin();

    constructor(address anchorer_) {
        anchorer = anchorer_;
    }

    /// @notice Records the head `(origin, size, root)` of a log.
    function anchor(string calldata origin, uint64 size, bytes32 root) external {
        if (msg.sender != anchorer) revert NotAnchorer(msg.sender);
        if (bytes(origin).length == 0) revert EmptyOrigin();
        emit Anchored(keccak256(bytes(origin)), size, root, origin);
    }
}
