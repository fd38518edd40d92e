/**
 * The x402 rail: the settling half of an x402 payment (the paid exchange is
 * payments/schemes/x402/protocol.ts). The money moves when the merchant's facilitator settles the signed
 * EIP-3009 authorization; this rail only answers, after the fact, whether it did.
 */
import type { SqlDatabase } from '../../../../service-kit/index.js';
import { RailError, type Rail } from '../../rail.js';
import type { NormalisedRequirement } from './terms.js';
import { recordOutcome, x402ById, type X402Record } from './store.js';
import { uptoMoved } from '../../evm/permit2.js';
import { DEFAULT_EXPIRY_MARGIN_MS, type EvmChainReader } from '../../evm/chain.js';
import { authorizationUsed } from '../../evm/settled.js';

export const X402_RAIL = 'x402';

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
  chain?: (network: string) => EvmChainReader | undefined,
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
      if (r.scheme === 'upto') return uptoOutcome(r);
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
      if (!(await authorizationUsed(reader, r))) return undefined;
      await recordOutcome(db, paymentId, 'paid');
      return { txRef, rail };
    },
  };

  /**
   * An `upto` permit (PROTOCOL.md §15): a settlement already read from the chain (or counted whole
   * for want of a reader, payments/schemes/x402/protocol.ts) is captured at that amount. Otherwise the permit
   * stays cashable, up to the hold, by the named facilitator until its deadline, even after a 0
   * settle or a failed handler: with a reader, a used Permit2 nonce is captured at what the chain
   * shows moved (permit2.ts uptoMoved: the transaction the merchant named, else the proxy's
   * settles; the whole hold when neither shows the amount), before the deadline too; an unused one
   * is released only past the deadline + margin. Without a reader, past the deadline the whole
   * hold is counted spent (the side that never overspends).
   */
  async function uptoOutcome(r: X402Record) {
    const rail = receiptRail(r);
    if (r.outcome === 'paid' && r.tx && r.settled !== null)
      return { txRef: `txid:${r.tx}`, rail, hold: true as const, captured: BigInt(r.settled) };
    const reader = chain?.(r.network);
    const expired = now() >= r.validBefore + expiryMarginMs;
    const authorization = `${r.network}/${r.asset}/${r.nonce}`;
    if (reader) {
      const moved = await uptoMoved(reader, {
        owner: r.payer,
        nonce: BigInt(r.nonce),
        token: r.asset,
        ...(r.tx ? { namedTx: r.tx } : {}),
        ...(r.fromBlock !== null ? { fromBlock: r.fromBlock } : {}),
      });
      if (moved.used) {
        await recordOutcome(db, r.paymentId, 'paid', moved.tx, moved.amount);
        // Used, but no settle found: the whole hold, never less.
        return { txRef: `txid:${moved.tx ?? authorization}`, rail, hold: true as const, captured: moved.amount };
      }
      // Unused in a confirmed block but used at the head: a settle not yet deep enough, whatever
      // the deadline says (it was mined before it). Kept until it is final or reorganised away.
      if (expired && !moved.atHead) return undefined;
      return 'pending' as const;
    }
    if (!expired) return 'pending' as const;
    await recordOutcome(db, r.paymentId, 'expired-unverified');
    return { txRef: `txid:${r.tx ?? authorization}`, rail, hold: true as const };
  }
}

/** The receipt's `rail`: x402, network and asset (PROTOCOL.md §4 Receipt has no members of its own for them yet). */
export function receiptRail(r: Pick<NormalisedRequirement, 'network' | 'asset'>): string {
  return `${X402_RAIL}:${r.network}:${r.asset}`;
}
