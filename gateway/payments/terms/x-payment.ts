/**
 * The spec's own 402 terms (spec §2.6): the merchant's `X-Payment` header, exactly
 * `{ amount, currency, address }`.
 */
import { CtlError, parseStrictJson, isAmount, isCurrency } from '../../../src/index.js';
import { MAX_AMOUNT } from '../amount.js';

export interface PaymentTerms {
  /** Minor units (PROTOCOL.md §1), at most MAX_AMOUNT. */
  amount: bigint;
  currency: string;
  address: string;
}

/**
 * Anything but exactly `{ amount, currency, address }` is `payment_terms_refused` (PROTOCOL.md §9):
 * the gateway signs nothing it does not fully understand.
 */
export function parsePaymentTerms(header: string | string[] | undefined): PaymentTerms {
  const refuse = (why: string) => new CtlError('payment_terms_refused', `X-Payment: ${why}`);
  if (typeof header !== 'string' || header.length > 4096) throw refuse('missing, repeated or too long');
  let v: unknown;
  try {
    v = parseStrictJson(header);
  } catch {
    throw refuse('not a JSON object');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw refuse('not a JSON object');
  const t = v as Record<string, unknown>;
  for (const k of Object.keys(t))
    if (!['amount', 'currency', 'address'].includes(k)) throw refuse(`unknown field '${k}'`);
  if (!isAmount(t.amount) || t.amount === '0') throw refuse('amount must be a positive decimal string of minor units');
  const amount = BigInt(t.amount);
  if (amount > MAX_AMOUNT) throw refuse('amount is too large');
  if (!isCurrency(t.currency)) throw refuse('currency must be a currency code');
  if (typeof t.address !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(t.address))
    throw refuse('address must be printable ASCII, 1–256 characters');
  return { amount, currency: t.currency, address: t.address };
}
