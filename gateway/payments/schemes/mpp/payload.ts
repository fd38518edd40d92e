/**
 * The MPP wire read back: whether a 402 names the `Payment` scheme at all, the EIP-3009
 * authorization inside a credential the stock client signed (so the exchange can check it against
 * the gateway's choice before it leaves), the merchant's `Payment-Receipt`, and its refusal reason.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Receipt } from 'mppx';
import type { SignedAuthorization } from '../../evm/authorizations.js';
import type { MerchantAnswer } from '../scheme.js';

/** Cheap and synchronous: does the 402 name the `Payment` scheme at all? */
export function hasPaymentScheme(headers: IncomingHttpHeaders): boolean {
  const raw = headers['www-authenticate'];
  const h = Array.isArray(raw) ? raw.join(', ') : raw;
  return h !== undefined && /(^|,)\s*payment\s/i.test(h);
}

/** The EIP-3009 authorization inside an `evm` charge credential. */
export function signedAuthorization(
  Credential: typeof import('mppx').Credential,
  credential: string,
): SignedAuthorization | undefined {
  let p: Record<string, unknown>;
  try {
    p = Credential.deserialize(credential).payload as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof p !== 'object' || p === null || p.type !== 'authorization') return undefined;
  for (const k of ['from', 'to', 'value', 'validBefore', 'nonce']) if (typeof p[k] !== 'string') return undefined;
  if (!/^[0-9]{1,20}$/.test(p.validBefore as string) || !/^[0-9]{1,78}$/.test(p.value as string)) return undefined;
  if (!/^0x[0-9a-fA-F]{64}$/.test(p.nonce as string)) return undefined;
  return p as unknown as SignedAuthorization;
}

/** A `Payment-Receipt` of a successful settlement naming a transaction, or undefined. */
export function paymentReceipt(
  Receipt: typeof import('mppx').Receipt,
  res: MerchantAnswer,
): Receipt.Receipt | undefined {
  const v = res.headers['payment-receipt'];
  if (typeof v !== 'string' || v.length > 16 * 1024) return undefined;
  try {
    const r = Receipt.deserialize(v);
    return r.status === 'success' && /^[\x21-\x7e]{1,250}$/.test(r.reference) ? r : undefined;
  } catch {
    return undefined;
  }
}

/** The merchant's reason, from its Problem Details body (RFC 9457), bounded. */
export function problem(res: MerchantAnswer): string {
  try {
    const b = JSON.parse(res.body.toString('utf8')) as { detail?: unknown; title?: unknown };
    const d = typeof b.detail === 'string' ? b.detail : typeof b.title === 'string' ? b.title : undefined;
    if (d) return d.slice(0, 200);
  } catch {
    // not JSON
  }
  return 'HTTP 402';
}
