/**
 * The x402 rail: the settling half of an x402 payment (the paid exchange is
 * protocols/x402.ts). The money moves when the merchant's facilitator settles the signed
 * EIP-3009 authorization; this rail only answers, after the fact, whether it did.
 */
import type { SqlDatabase } from '../../../../service-kit/index.js';
import { RailError, type Rail } from '../rail.js';
import type { NormalisedRequirement } from '../../terms/x402.js';
import { recordOutcome, x402ById } from './store.js';

export const X402_RAIL = 'x402';

/**
 * Clock skew allowed between the gateway and the chain before an authorization past its
 * `validBefore` counts as dead (a block at `validBefore - 1` may carry a timestamp ahead of ours).
 * A chain on the gateway's own clock (a local ledger) may be given a smaller one.
 */
export const DEFAULT_EXPIRY_MARGIN_MS = 60_000;

/** Read access to the chains the gateway pays on (optional): a viem PublicClient fits. */
export interface X402ChainReader {
  readContract(args: {
    address: `0x${string}`;
    abi: readonly unknown[];
    functionName: string;
    args?: readonly unknown[];
  }): Promise<unknown>;
}

const AUTHORIZATION_STATE_ABI = [
  {
    type: 'function',
    name: 'authorizationState',
    stateMutability: 'view',
    inputs: [
      { name: 'authorizer', type: 'address' },
      { name: 'nonce', type: 'bytes32' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
] as const;

/**
 * The settling half (payments/reconcile.ts): an x402 payment that never got its
 * signature recorded was never sent (void: the record is written before `paying`, and the header
 * only leaves after `paying`). One the merchant confirmed with a transaction is paid (a crash
 * between that answer and the commit is completed here). Any other was sent and is alive until
 * its authorization expires, whatever the merchant said (a 402, a failure, a transaction that
 * never confirmed). After `validBefore` + margin, with a chain reader, EIP-3009
 * `authorizationState` says whether it was cashed: unused is the only proof of death (released);
 * used is committed. Without a reader (no `CTL_X402_RPC_URL` for that network) it is counted
 * spent: the side that never overspends.
 */
export function createX402Rail(
  db: SqlDatabase,
  now: () => number,
  chain?: (network: string) => X402ChainReader | undefined,
  expiryMarginMs = DEFAULT_EXPIRY_MARGIN_MS,
): Rail {
  return {
    name: X402_RAIL,
    async pay() {
      throw new RailError("x402 payments are settled by the merchant's facilitator on the paid retry");
    },
    async outcome(paymentId) {
      const r = await x402ById(db, paymentId);
      if (!r) return undefined;
      const rail = receiptRail(r);
      if (r.outcome === 'paid' && r.tx) return { txRef: `txid:${r.tx}`, rail };
      if (now() < r.validBefore + expiryMarginMs) return 'pending';
      // A transaction hash names the payment when the merchant gave one; else the authorization.
      const txRef = r.tx ? `txid:${r.tx}` : `txid:${r.network}/${r.asset}/${r.nonce}`;
      const reader = chain?.(r.network);
      if (!reader) {
        await recordOutcome(db, paymentId, 'expired-unverified');
        return { txRef, rail };
      }
      const used = await reader.readContract({
        address: r.asset as `0x${string}`,
        abi: AUTHORIZATION_STATE_ABI,
        functionName: 'authorizationState',
        args: [r.payer, r.nonce],
      });
      if (used === false) return undefined;
      if (used !== true) throw new Error(`x402: authorizationState answered ${String(used)}`);
      await recordOutcome(db, paymentId, 'paid');
      return { txRef, rail };
    },
  };
}

/** The receipt's `rail`: x402, network and asset (PROTOCOL.md §4 Receipt has no members of its own for them yet). */
export function receiptRail(r: Pick<NormalisedRequirement, 'network' | 'asset'>): string {
  return `${X402_RAIL}:${r.network}:${r.asset}`;
}
