/**
 * A `revocationSource` (src/revocation-source.ts) that reads revocation tokens from a chain:
 * one `eth_call` of `CtlRevocationTokens.isRevoked(tokenId)` per id (the verifier caches the
 * answers for its `revocationTtl`). The chain id is pinned: a node of another chain answers
 * nothing (the verifier then refuses with `revocation_unavailable`, as for a node that is down).
 */
import {
  parseRevocationTokenResult,
  revocationTokenCallData,
  type RevocationQuery,
  type RevocationSource,
} from '../../src/index.js';
import { createJsonRpc, redactRpcUrl } from './json-rpc.js';

export interface ChainRevocationSourceOptions {
  rpcUrl: string;
  /** The CtlRevocationTokens contract. */
  contract: string;
  /** The chain it is on (its JSON-RPC `eth_chainId`). */
  chainId: number;
  fetch?: typeof fetch;
  /** Per call (default 3000 ms). */
  timeoutMs?: number;
  /** `latest` (default) or `safe` / `finalized` on chains that have them. */
  blockTag?: 'latest' | 'safe' | 'finalized';
}

/**
 * @example verifyCtl(sba, { …, revocationSource: createChainRevocationSource({ rpcUrl, contract, chainId: 8453 }) })
 */
export function createChainRevocationSource(o: ChainRevocationSourceOptions): RevocationSource {
  if (!/^0x[0-9a-fA-F]{40}$/.test(o.contract)) throw new RangeError('contract: a 0x-prefixed 20-byte address');
  const rpc = createJsonRpc({ url: o.rpcUrl, fetch: o.fetch, timeoutMs: o.timeoutMs ?? 3000 });
  let chainChecked = false;
  return async (q: RevocationQuery) => {
    if (!chainChecked) {
      const id = Number(await rpc<string>('eth_chainId'));
      if (id !== o.chainId) throw new Error(`${redactRpcUrl(o.rpcUrl)} is chain ${id}, not ${o.chainId}`);
      chainChecked = true;
    }
    const result = await rpc<string>('eth_call', [
      { to: o.contract, data: revocationTokenCallData(q.tokenId) },
      o.blockTag ?? 'latest',
    ]);
    return { revoked: parseRevocationTokenResult(result) };
  };
}
