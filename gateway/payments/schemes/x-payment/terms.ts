/**
 * The spec's own 402 terms (spec §2.6): the merchant's `X-Payment` header, exactly
 * `{ amount, currency, address }`; or a variable amount (PROTOCOL.md §15), exactly
 * `{ maxAmount, currency, address }`: a hold of `maxAmount`, of which the merchant's paid answer
 * names what it captured (`X-Payment-Captured`).
 */
import { CtlError, parseStrictJson, isAmount, isCurrency } from '../../../../src/index.js';
import { MAX_AMOUNT } from '../../../../service-kit/amount.js';

export interface PaymentTerms {
  /** Minor units (PROTOCOL.md §1), at most MAX_AMOUNT; with `hold`, the maximum. */
  amount: bigint;
  currency: string;
  address: string;
  /** `maxAmount` terms: `amount` is held, then captured at most once (PROTOCOL.md §15). */
  hold?: true;
}

/**
 * Anything but exactly `{ amount, currency, address }` or `{ maxAmount, currency, address }` is
 * `payment_terms_refused` (PROTOCOL.md §9): the gateway signs nothing it does not fully understand.
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
    if (!['amount', 'maxAmount', 'currency', 'address'].includes(k)) throw refuse(`unknown field '${k}'`);
  const hold = 'maxAmount' in t;
  if (hold && 'amount' in t) throw refuse('amount and maxAmount together');
  const name = hold ? 'maxAmount' : 'amount';
  const given = t[name];
  if (!isAmount(given) || given === '0') throw refuse(`${name} must be a positive decimal string of minor units`);
  const amount = BigInt(given);
  if (amount > MAX_AMOUNT) throw refuse(`${name} is too large`);
  if (!isCurrency(t.currency)) throw refuse('currency must be a currency code');
  if (typeof t.address !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(t.address))
    throw refuse('address must be printable ASCII, 1–256 characters');
  return { amount, currency: t.currency, address: t.address, ...(hold ? { hold: true as const } : {}) };
}

/**
 * The merchant's `X-Payment-Captured` on its answer to a held payment: minor units, 0 to
 * MAX_AMOUNT (above the hold is the payment service's `capture_exceeds_hold`). Absent: undefined.
 * Anything else is `payment_terms_refused`.
 */
export function parseCaptured(header: string | string[] | undefined): bigint | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !isAmount(header) || BigInt(header) > MAX_AMOUNT)
    throw new CtlError('payment_terms_refused', 'X-Payment-Captured: must be one decimal string of minor units');
  return BigInt(header);
}
