/**
 * What moved, read from the chain, against what a merchant's answer says moved (PROTOCOL.md §15,
 * ARCHITECTURE.md rule 13: a counter moves by what moved on a rail, never by what a counterparty
 * says moved). A merchant writes its own `PAYMENT-RESPONSE` or `Payment-Receipt`: its amount and
 * transaction are a claim. The gateway commits what the chain shows, or, where it cannot read the
 * chain, the most the signed authorization lets move; a claim the chain contradicts is returned as
 * a disagreement for the caller to record (`payment.settlement_mismatch`, naming the merchant).
 *
 * - x402 `upto` (a Permit2 permit for a maximum): the amount is the settle's, found from the chain
 *   (permit2.ts uptoMoved); no reader: the whole hold.
 * - x402 `exact` and MPP `evm` charge (an EIP-3009 authorization of one value): only that value can
 *   move, so it is what is committed; the chain is asked whether it did (`authorizationState`,
 *   and the named transaction's `AuthorizationUsed` log) to catch a merchant's false report.
 */
import { decodeEventLog, getAddress, parseAbi } from 'viem';
import type { EvmChainReader } from './chain.js';
import { uptoMoved } from './permit2.js';

/** A merchant's report that the chain contradicts: what it said, what the chain shows (null: nothing moved). */
export interface ChainDisagreement {
  reportedAmountMinor: string | null;
  reportedTx: string;
  settledAmountMinor: string | null;
  settledTx: string | null;
}

/** What an `upto` settlement report commits: an amount that moved, or nothing yet (the hold kept). */
export type UptoCapture =
  | { captured: bigint; tx: string; disagreement?: ChainDisagreement }
  | { captured?: undefined; disagreement?: ChainDisagreement };

const sameTx = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * An `upto` merchant reported a settlement (`success`, a transaction, perhaps an amount): what
 * moved under the permit. No reader: the whole hold (`hold`), never less than could have moved.
 * With one: the chain's amount and transaction, read `confirmations` deep (chain.ts); nothing yet
 * while the settle is not that deep, or when the permit's nonce is unused
 * (the merchant's report is false, or ahead of the chain) or the chain cannot be read (the hold
 * is kept for reconcile, which asks again).
 */
export async function uptoCapture(
  reader: EvmChainReader | undefined,
  p: {
    hold: bigint;
    owner: string;
    nonce: bigint;
    token: string;
    reportedTx: string;
    reportedAmount?: bigint;
    fromBlock?: bigint;
  },
): Promise<UptoCapture> {
  if (!reader) return { captured: p.hold, tx: p.reportedTx };
  let moved: Awaited<ReturnType<typeof uptoMoved>>;
  try {
    moved = await uptoMoved(reader, {
      owner: p.owner,
      nonce: p.nonce,
      token: p.token,
      namedTx: p.reportedTx,
      fromBlock: p.fromBlock,
    });
    // Used at the head, not yet in a confirmed block: no disagreement, the hold kept for reconcile.
    if (!moved.used && moved.atHead) return {};
  } catch {
    return {};
  }
  const reported = { reportedAmountMinor: p.reportedAmount?.toString() ?? null, reportedTx: p.reportedTx };
  if (!moved.used) return { disagreement: { ...reported, settledAmountMinor: null, settledTx: null } };
  // Used, but the settle is not found: the whole hold (nothing says less moved).
  const captured = moved.amount ?? p.hold;
  const tx = moved.tx ?? p.reportedTx;
  const agrees = p.reportedAmount === captured && (moved.tx === undefined || sameTx(moved.tx, p.reportedTx));
  if (agrees || moved.amount === undefined) return { captured, tx };
  return { captured, tx, disagreement: { ...reported, settledAmountMinor: captured.toString(), settledTx: tx } };
}

const AUTHORIZATION_ABI = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);

/** EIP-3009 `authorizationState(payer, nonce)`: whether the authorization was used. */
export async function authorizationUsed(
  reader: EvmChainReader,
  p: { asset: string; payer: string; nonce: string },
): Promise<boolean> {
  const used = await reader.readContract({
    address: p.asset as `0x${string}`,
    abi: AUTHORIZATION_ABI,
    functionName: 'authorizationState',
    args: [p.payer, p.nonce],
  });
  if (typeof used !== 'boolean') throw new Error(`authorizationState answered ${String(used)}`);
  return used;
}

/**
 * A merchant reported an EIP-3009 authorization of `value` cashed in transaction `reportedTx`
 * (x402 `exact`, MPP `evm` charge). Only `value` can move, so it is committed whatever the
 * answer; with a reader the claim is checked: the authorization used, and used in that
 * transaction (its `AuthorizationUsed` log, when the reader gives receipts). `tx` is the
 * reference the receipt may name (undefined: the chain contradicts the merchant's).
 */
export async function eip3009Check(
  reader: EvmChainReader | undefined,
  p: { asset: string; payer: string; nonce: string; value: bigint; reportedTx: string },
): Promise<{ tx?: string; disagreement?: ChainDisagreement }> {
  if (!reader) return { tx: p.reportedTx };
  const reported = { reportedAmountMinor: p.value.toString(), reportedTx: p.reportedTx };
  let used: boolean;
  try {
    used = await authorizationUsed(reader, p);
  } catch {
    return { tx: p.reportedTx }; // the chain cannot say now: the claim stands unchecked
  }
  if (!used) return { disagreement: { ...reported, settledAmountMinor: null, settledTx: null } };
  // A receipt that cannot be read (a reader without receipts, a node behind the merchant's) says
  // nothing: only a transaction the chain shows without this authorization contradicts the claim.
  const named = reader.getTransactionReceipt ? await usedIn(reader, p).catch(() => undefined) : undefined;
  if (named !== false) return { tx: p.reportedTx };
  return { disagreement: { ...reported, settledAmountMinor: p.value.toString(), settledTx: null } };
}

/**
 * Whether transaction `reportedTx` succeeded with the token's AuthorizationUsed(payer, nonce) log
 * (false: it did not, or it is no transaction hash); throws when the receipt cannot be read.
 */
async function usedIn(
  reader: EvmChainReader,
  p: { asset: string; payer: string; nonce: string; reportedTx: string },
): Promise<boolean> {
  if (!/^0x[0-9a-fA-F]{64}$/.test(p.reportedTx)) return false;
  const r = await reader.getTransactionReceipt!({ hash: p.reportedTx as `0x${string}` });
  if (r.status !== 'success') return false;
  return r.logs.some((l) => {
    if (getAddress(l.address) !== getAddress(p.asset)) return false;
    try {
      const e = decodeEventLog({ abi: AUTHORIZATION_ABI, data: l.data, topics: l.topics as any });
      return (
        e.eventName === 'AuthorizationUsed' &&
        getAddress(e.args.authorizer) === getAddress(p.payer) &&
        e.args.nonce.toLowerCase() === p.nonce.toLowerCase()
      );
    } catch {
      return false;
    }
  });
}
