/**
 * The contracts of contracts/ as the services call them: their ABIs here, typed for viem (a test
 * compares them with the compiled artifacts), and the committed artifacts (bytecode) for
 * deploying them (`ctl anchor deploy`, tests). The artifacts ship with the repository, not with
 * the service packages: deploy from a clone.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Abi, Hex } from 'viem';

export const CTL_ANCHOR_ABI = [
  {
    type: 'constructor',
    inputs: [{ name: 'anchorer_', type: 'address', internalType: 'address' }],
    stateMutability: 'nonpayable',
  },
  {
    type: 'function',
    name: 'anchor',
    inputs: [
      { name: 'origin', type: 'string', internalType: 'string' },
      { name: 'size', type: 'uint64', internalType: 'uint64' },
      { name: 'root', type: 'bytes32', internalType: 'bytes32' },
    ],
    outputs: [],
    stateMutability: 'nonpayable',
  },
  {
    type: 'function',
    name: 'anchorer',
    inputs: [],
    outputs: [{ name: '', type: 'address', internalType: 'address' }],
    stateMutability: 'view',
  },
  {
    type: 'event',
    name: 'Anchored',
    inputs: [
      { name: 'originHash', type: 'bytes32', indexed: true, internalType: 'bytes32' },
      { name: 'size', type: 'uint64', indexed: true, internalType: 'uint64' },
      { name: 'root', type: 'bytes32', indexed: false, internalType: 'bytes32' },
      { name: 'origin', type: 'string', indexed: false, internalType: 'string' },
    ],
    anonymous: false,
  },
  { type: 'error', name: 'EmptyOrigin', inputs: [] },
  {
    type: 'error',
    name: 'NotAnchorer',
    inputs: [{ name: 'sender', type: 'address', internalType: 'address' }],
  },
] as const;

export const CTL_REVOCATION_TOKENS_ABI = [
  {
    type: 'constructor',
    inputs: [
      { name: 'authority_', type: 'address', internalType: 'address' },
      { name: 'burnGrace_', type: 'uint64', internalType: 'uint64' },
    ],
    stateMutability: 'nonpayable',
  },
  {
    type: 'function',
    name: 'authority',
    inputs: [],
    outputs: [{ name: '', type: 'address', internalType: 'address' }],
    stateMutability: 'view',
  },
  {
    type: 'function',
    name: 'burn',
    inputs: [{ name: 'id', type: 'bytes32', internalType: 'bytes32' }],
    outputs: [],
    stateMutability: 'nonpayable',
  },
  {
    type: 'function',
    name: 'burnGrace',
    inputs: [],
    outputs: [{ name: '', type: 'uint64', internalType: 'uint64' }],
    stateMutability: 'view',
  },
  {
    type: 'function',
    name: 'isRevoked',
    inputs: [{ name: 'id', type: 'bytes32', internalType: 'bytes32' }],
    outputs: [{ name: '', type: 'bool', internalType: 'bool' }],
    stateMutability: 'view',
  },
  {
    type: 'function',
    name: 'mint',
    inputs: [
      { name: 'id', type: 'bytes32', internalType: 'bytes32' },
      { name: 'expiresAt', type: 'uint64', internalType: 'uint64' },
    ],
    outputs: [],
    stateMutability: 'nonpayable',
  },
  {
    type: 'function',
    name: 'tokenOf',
    inputs: [{ name: 'id', type: 'bytes32', internalType: 'bytes32' }],
    outputs: [
      { name: 'revokedAt', type: 'uint64', internalType: 'uint64' },
      { name: 'expiresAt', type: 'uint64', internalType: 'uint64' },
    ],
    stateMutability: 'view',
  },
  {
    type: 'event',
    name: 'Burned',
    inputs: [{ name: 'id', type: 'bytes32', indexed: true, internalType: 'bytes32' }],
    anonymous: false,
  },
  {
    type: 'event',
    name: 'Minted',
    inputs: [
      { name: 'id', type: 'bytes32', indexed: true, internalType: 'bytes32' },
      { name: 'expiresAt', type: 'uint64', indexed: false, internalType: 'uint64' },
    ],
    anonymous: false,
  },
  {
    type: 'error',
    name: 'NotAuthority',
    inputs: [{ name: 'sender', type: 'address', internalType: 'address' }],
  },
  {
    type: 'error',
    name: 'NotExpired',
    inputs: [
      { name: 'id', type: 'bytes32', internalType: 'bytes32' },
      { name: 'burnableAt', type: 'uint64', internalType: 'uint64' },
    ],
  },
  {
    type: 'error',
    name: 'NotMinted',
    inputs: [{ name: 'id', type: 'bytes32', internalType: 'bytes32' }],
  },
] as const;

/** The `Anchored` event (what a verifier filters the contract's logs on). */
export const ANCHORED_EVENT = CTL_ANCHOR_ABI[3];

export interface ContractArtifact {
  contractName: string;
  source: string;
  sourceSha256: string;
  compiler: { solc: string; settings: unknown };
  abi: Abi;
  bytecode: Hex;
  deployedBytecode: Hex;
}

/**
 * The committed artifact `contracts/<path>.json` (e.g. `CtlAnchor`, `x402/Token`), found from
 * this module up (the source tree and build/ alike). Throws when this copy has no contracts/.
 * @example const { abi, bytecode } = contractArtifact('CtlAnchor')
 */
export function contractArtifact(path: string): ContractArtifact {
  if (!/^[A-Za-z0-9_/-]+$/.test(path) || path.includes('..')) throw new RangeError(`contract: bad name '${path}'`);
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'contracts', `${path}.json`);
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as ContractArtifact;
    const up = dirname(dir);
    if (up === dir)
      throw new Error(
        `no contracts/${path}.json here: the contract artifacts ship with the repository (deploy from a clone)`,
      );
    dir = up;
  }
}
