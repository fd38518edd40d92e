// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title CTL revocation tokens
/// @notice A token per revoked grant or delegation link, minted by the authority when it revokes:
/// the id is the grant's hash or the link's revocation id (SHA-256 of the JCS of the artifact
/// without its signature, PROTOCOL.md §14). A verifier reads `isRevoked(id)`. Nothing un-revokes:
/// there is no transfer, and a token can be burnt (storage cleared) only once the artifact it
/// revokes has expired by at least `burnGrace` seconds, by the expiry recorded when it was minted.
contract CtlRevocationTokens {
    struct Token {
        uint64 revokedAt;
        uint64 expiresAt;
    }

    /// @notice The only address that mints and burns (the authority's signer).
    address public immutable authority;
    /// @notice Seconds after an artifact's expiry before its token may be burnt (clock skew of verifiers).
    uint64 public immutable burnGrace;

    mapping(bytes32 => Token) private tokens;

    event Minted(bytes32 indexed id, uint64 expiresAt);
    event Burned(bytes32 indexed id);

    error NotAuthority(address sender);
    error NotMinted(bytes32 id);
    error NotExpired(bytes32 id, uint64 burnableAt);

    constructor(address authority_, uint64 burnGrace_) {
        authority = authority_;
        burnGrace = burnGrace_;
    }

    modifier onlyAuthority() {
        if (msg.sender != authority) revert NotAuthority(msg.sender);
        _;
    }

    /// @notice Revokes `id` until `expiresAt` (unix seconds). Minting an id that is already
    /// revoked changes nothing (the first mint's times stay), so a retried mint is harmless.
    function mint(bytes32 id, uint64 expiresAt) external onlyAuthority {
        if (tokens[id].revokedAt != 0) return;
        tokens[id] = Token(uint64(block.timestamp), expiresAt);
        emit Minted(id, expiresAt);
    }

    /// @notice Clears the token of an artifact that expired `burnGrace` seconds ago or more.
    function burn(bytes32 id) external onlyAuthority {
        Token memory t = tokens[id];
        if (t.revokedAt == 0) revert NotMinted(id);
        uint64 burnableAt = t.expiresAt + burnGrace;
        if (block.timestamp < burnableAt) revert NotExpired(id, burnableAt);
        delete tokens[id];
        emit Burned(id);
    }

    /// @notice Whether `id` is revoked (a token exists for it).
    function isRevoked(bytes32 id) external view returns (bool) {
        return tokens[id].revokedAt != 0;
    }

    /// @notice When `id` was revoked and the expiry recorded with it (zeros when there is no token).
    function tokenOf(bytes32 id) external view returns (uint64 revokedAt, uint64 expiresAt) {
        Token memory t = tokens[id];
        return (t.revokedAt, t.expiresAt);
    }
}
