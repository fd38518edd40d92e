/**
 * The settling half of a payment whose signed authorization the merchant cashes (x402, MPP;
 * payments/reconcile.ts asks it): the rail pays nothing itself, it only answers, after the fact,
 * whether the authorization was cashed (PROTOCOL.md §7, §15).
 *
 * A payment whose authorization was never recorded was never sent (void: the record is written
 * before `paying`, and the header leaves only after `paying`). One the merchant confirmed with a
 * transaction the chain agreed with is paid (a crash between that answer and the commit is
 * completed here). Any other was sent and is alive until it expires, whatever the merchant said (a
 * 402, a failure, a transaction that never confirmed). After `validBefore` + margin, with a chain
 * reader, EIP-3009 `authorizationState` says whether it was cashed: unused is the only proof of
 * death (released); used is committed. Without a reader (no `CTL_X402_RPC_URL` for that network)
 * it is counted spent: the side that never overspends.
 */
import type { SqlDatabase } from '../../../service-kit/index.js';
import { RailError, type Rail } from '../rail.js';
import { authorizationById, recordAuthorizationOutcome, type AuthorizationRecord } from './authorizations.js';
import { uptoMoved } from './permit2.js';
import { DEFAULT_EXPIRY_MARGIN_MS, type EvmChainReader } from './chain.js';
import { authorizationUsed } from './settled.js';

/** The receipt's `rail` of an authorization: the scheme, network and asset (at most 64 characters). */
export function authorizationRail(scheme: string, r: { network: string; asset: string }): string {
  return `${scheme}:${r.network}:${r.asset}`;
}

/** The rail named `name` over the authorizations in `table` (evm/authorizations.ts). */
export function createAuthorizationRail(o: {
  name: string;
  table: string;
  db: SqlDatabase;
  now: () => number;
  chain?: (network: string) => EvmChainReader | undefined;
  expiryMarginMs?: number;
}): Rail {
  const { db, now, table } = o;
  const margin = o.expiryMarginMs ?? DEFAULT_EXPIRY_MARGIN_MS;
  const record = (id: string, outcome: string, tx?: string, settled?: bigint) =>
    recordAuthorizationOutcome(db, table, id, outcome, tx, settled);
  return {
    name: o.name,
    async pay() {
      throw new RailError(`${o.name} payments are settled by the merchant on the paid retry`);
    },
    async outcome(paymentId) {
      const r = (await authorizationById(db, table, paymentId))?.record;
      if (!r) return undefined;
      if (r.scheme === 'upto') return uptoOutcome(r);
      const rail = authorizationRail(o.name, r);
      if (r.outcome === 'paid' && r.tx) return { txRef: `txid:${r.tx}`, rail };
      if (now() < r.validBefore + margin) return 'pending';
      // A transaction hash names the payment when the merchant gave one; else the authorization.
      const txRef = r.tx ? `txid:${r.tx}` : `txid:${r.network}/${r.asset}/${r.nonce}`;
      const reader = o.chain?.(r.network);
      if (!reader) {
        await record(paymentId, 'expired-unverified');
        return { txRef, rail };
      }
      if (!(await authorizationUsed(reader, r))) return undefined;
      await record(paymentId, 'paid');
      return { txRef, rail };
    },
  };

  /**
   * An `upto` permit (PROTOCOL.md §15): a settlement already read from the chain (or counted whole
   * for want of a reader) is captured at that amount. Otherwise the permit stays cashable, up to
   * the hold, by the named facilitator until its deadline, even after a 0 settle or a failed
   * handler: with a reader, a used Permit2 nonce is captured at what the chain shows moved
   * (permit2.ts uptoMoved: the transaction the merchant named, else the proxy's settles; the whole
   * hold when neither shows the amount), before the deadline too; an unused one is released only
   * past the deadline + margin. Without a reader, past the deadline the whole hold is counted spent.
   */
  async function uptoOutcome(r: AuthorizationRecord) {
    const rail = authorizationRail(o.name, r);
    if (r.outcome === 'paid' && r.tx && r.settled !== null)
      return { txRef: `txid:${r.tx}`, rail, hold: true as const, captured: BigInt(r.settled) };
    const reader = o.chain?.(r.network);
    const expired = now() >= r.validBefore + margin;
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
        await record(r.paymentId, 'paid', moved.tx, moved.amount);
        // Used, but no settle found: the whole hold, never less.
        return { txRef: `txid:${moved.tx ?? authorization}`, rail, hold: true as const, captured: moved.amount };
      }
      // Unused in a confirmed block but used at the head: a settle not yet deep enough, whatever
      // the deadline says (it was mined before it). Kept until it is final or reorganised away.
      if (expired && !moved.atHead) return undefined;
      return 'pending' as const;
    }
    if (!expired) return 'pending' as const;
    await record(r.paymentId, 'expired-unverified');
    return { txRef: `txid:${r.tx ?? authorization}`, rail, hold: true as const };
  }
}
