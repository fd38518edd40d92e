/**
 * The merchant's answer to an x402 paid retry, read into an Outcome (schemes/scheme.ts). A
 * settlement with a transaction is paid at what the chain shows (evm/settled.ts); anything else
 * is the merchant's word alone: the signed authorization stays cashable until it expires, so the
 * reservation is held (served when the merchant served the request anyway).
 */
import type { SettleResponse } from '@x402/core/types';
import { eip3009Paid } from '../../evm/authorizations.js';
import type { EvmChainReader } from '../../evm/chain.js';
import { uptoCapture } from '../../evm/settled.js';
import type { Credential, MerchantAnswer, Outcome, Recorded } from '../scheme.js';
import { isTransaction, refusalReason, settlement } from './payload.js';
import type { Permit2Check } from './permit2-check.js';
import type { NormalisedRequirement } from './terms.js';

const held = (why: string, record: Recorded): Outcome => ({ kind: 'held', why, record });
const ok = (res: MerchantAnswer) => res.status >= 200 && res.status < 300;

export async function readSettlement(
  chain: ((network: string) => EvmChainReader | undefined) | undefined,
  permit2: Permit2Check,
  res: MerchantAnswer,
  c: Credential,
  chosen: NormalisedRequirement,
): Promise<Outcome> {
  const settle = settlement(res);
  const signed = c.authorization!.signed!;
  if (chosen.scheme === 'upto') return readUpto(chain, permit2, res, settle, signed, chosen, c);
  if (settle?.success === true && isTransaction(settle.transaction)) {
    // Only the signed value can move, so it is paid; the chain checks the merchant's claim.
    const a = { network: chosen.network, asset: chosen.asset, payer: signed.from, nonce: signed.nonce };
    return {
      kind: 'paid',
      ...(await eip3009Paid(chain?.(chosen.network), { ...a, value: chosen.amount }, settle.transaction)),
    };
  }
  if (settle && settle.success !== true && !settle.transaction)
    return held(`the merchant's facilitator did not settle the payment (${settle.errorReason ?? 'no reason given'})`, {
      outcome: 'refused',
    });
  if (settle && isTransaction(settle.transaction))
    return held(
      `settlement of transaction ${settle.transaction} is not confirmed (${settle.errorReason ?? 'pending'})`,
      { outcome: 'pending', tx: settle.transaction },
    );
  // Asked again instead of served: the merchant may still cash (or have cashed) what it was sent.
  if (res.status === 402)
    return held(`the merchant refused the payment (${refusalReason(res)})`, { outcome: 'refused' });
  // Served without a settlement answer: the agent gets what it paid for, the money stays reserved.
  if (ok(res)) return { kind: 'served', record: { outcome: 'unknown' } };
  return held(`the merchant answered the paid retry with HTTP ${res.status} and no settlement`, { outcome: 'unknown' });
}

/**
 * An `upto` permit's answer: a settlement with a transaction is captured at what the chain shows
 * moved (the whole hold without a reader, never the merchant's `amount`); a 0 settle or a failed
 * handler leaves the permit cashable until its deadline (quirk 1 of the integration).
 */
async function readUpto(
  chain: ((network: string) => EvmChainReader | undefined) | undefined,
  permit2: Permit2Check,
  res: MerchantAnswer,
  settle: SettleResponse | undefined,
  signed: NonNullable<NonNullable<Credential['authorization']>['signed']>,
  chosen: NormalisedRequirement,
  c: Credential,
): Promise<Outcome> {
  const amount = settle?.amount;
  const atomic = typeof amount === 'string' && /^(0|[1-9][0-9]{0,77})$/.test(amount) ? BigInt(amount) : undefined;
  if (settle?.success === true && isTransaction(settle.transaction)) {
    // No `amount`: a facilitator that settles the whole permit. Only the report names it.
    const reported = amount === undefined ? chosen.amount : atomic;
    const fromBlock = c.authorization!.extra.from_block;
    const got = await uptoCapture(chain?.(chosen.network), {
      hold: chosen.amount,
      owner: signed.from,
      nonce: BigInt(signed.nonce),
      token: chosen.asset,
      reportedTx: settle.transaction,
      ...(reported !== undefined ? { reportedAmount: reported } : {}),
      ...(typeof fromBlock === 'string' ? { fromBlock: BigInt(fromBlock) } : {}),
    });
    const disagreement = got.disagreement ? { disagreement: got.disagreement } : {};
    if (got.captured !== undefined) return { kind: 'paid', tx: got.tx, captured: got.captured, ...disagreement };
    // Not on the chain (yet): the merchant's word alone moves nothing; reconcile asks again.
    const record = { outcome: 'pending', tx: settle.transaction };
    if (ok(res)) return { kind: 'served', record, ...disagreement };
    return { kind: 'held', why: 'the chain does not show the settlement yet', record, ...disagreement };
  }
  const zero = settle?.success === true && atomic === 0n && !settle.transaction;
  const settled = zero ? { settled: 0n } : {};
  if (zero && ok(res)) return { kind: 'served', record: { outcome: 'zero', ...settled } };
  if (res.status === 412 && refusalReason(res) === 'permit2_allowance_required')
    return held(permit2.missing(chosen.asset), { outcome: 'refused', ...settled });
  let record: Recorded;
  if (settle?.transaction === undefined || settle.transaction === '') {
    record = zero ? { outcome: 'zero', ...settled } : { outcome: 'unknown' };
    if (ok(res) && settle === undefined) return { kind: 'served', record };
  } else record = { outcome: 'pending', tx: settle.transaction };
  const why = settle?.errorReason ?? (settle ? 'no settled amount' : `HTTP ${res.status}, no settlement`);
  return held(`the merchant's facilitator did not settle the permit (${why})`, record);
}
