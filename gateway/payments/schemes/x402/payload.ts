/**
 * The x402 wire read back: the authorization inside the payload the stock client signed (so the
 * exchange can check it against the gateway's choice before it leaves), and the merchant's
 * settlement answer (`PAYMENT-RESPONSE` v2, `X-PAYMENT-RESPONSE` v1) and refusal reason.
 */
import { decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentPayloadV1, SettleResponse } from '@x402/core/types';
import type { SignedAuthorization } from '../../evm/authorizations.js';
import { UPTO_PROXY_ADDRESS } from '../../evm/permit2.js';
import type { MerchantAnswer } from '../scheme.js';
import type { NormalisedRequirement } from './terms.js';

/** The EIP-3009 authorization inside a v2 or v1 `exact` payload (same place in both). */
export function signedAuthorization(p: PaymentPayload | PaymentPayloadV1): SignedAuthorization | undefined {
  const a = (p.payload as { authorization?: Record<string, unknown> } | undefined)?.authorization;
  if (!a) return undefined;
  for (const k of ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'])
    if (typeof a[k] !== 'string') return undefined;
  if (!/^[0-9]{1,20}$/.test(a.validBefore as string) || !/^[0-9]{1,78}$/.test(a.value as string)) return undefined;
  return a as unknown as SignedAuthorization;
}

/**
 * The `upto` Permit2 witness transfer inside a v2 payload, in the EIP-3009 shape the exchange
 * checks (`to`, `value` the maximum, `validBefore` the deadline, `nonce` a decimal uint256), once
 * its own members match the chosen terms: the token, the upto proxy as spender, the facilitator named.
 */
export function signedPermit(
  p: PaymentPayload | PaymentPayloadV1,
  chosen: NormalisedRequirement,
): SignedAuthorization | undefined {
  const a = (p.payload as { permit2Authorization?: any } | undefined)?.permit2Authorization;
  const dec = (v: unknown) => typeof v === 'string' && /^[0-9]{1,78}$/.test(v);
  if (!a || typeof a !== 'object' || typeof a.from !== 'string' || !dec(a.nonce) || !dec(a.deadline)) return undefined;
  if (!a.permitted || !dec(a.permitted.amount) || typeof a.permitted.token !== 'string') return undefined;
  if (!a.witness || typeof a.witness.to !== 'string' || typeof a.witness.facilitator !== 'string') return undefined;
  if (
    a.permitted.token.toLowerCase() !== chosen.asset ||
    String(a.spender).toLowerCase() !== UPTO_PROXY_ADDRESS.toLowerCase() ||
    a.witness.facilitator.toLowerCase() !== chosen.facilitator ||
    a.deadline.length > 20
  )
    return undefined;
  return { from: a.from, to: a.witness.to, value: a.permitted.amount, validBefore: a.deadline, nonce: a.nonce };
}

/** The merchant's settlement answer, v2 or v1 header; undefined when absent or unreadable. */
export function settlement(res: MerchantAnswer): SettleResponse | undefined {
  for (const name of ['payment-response', 'x-payment-response']) {
    const v = res.headers[name];
    if (typeof v !== 'string' || v.length > 16 * 1024) continue;
    try {
      const s = decodePaymentResponseHeader(v) as SettleResponse;
      if (typeof s === 'object' && s !== null) return s;
    } catch {
      // unreadable: treated as absent
    }
  }
  return undefined;
}

export const isTransaction = (t: unknown): t is string => typeof t === 'string' && /^[\x21-\x7e]{1,250}$/.test(t);

/** The merchant's reason for a refusal: its PAYMENT-REQUIRED `error`, else its body's, bounded. */
export function refusalReason(res: MerchantAnswer): string {
  const h = res.headers['payment-required'];
  if (typeof h === 'string') {
    try {
      const pr = JSON.parse(Buffer.from(h, 'base64').toString('utf8')) as { error?: unknown };
      if (typeof pr.error === 'string') return pr.error.slice(0, 200);
    } catch {
      // fall through to the body
    }
  }
  try {
    const b = JSON.parse(res.body.toString('utf8')) as { error?: unknown };
    if (typeof b.error === 'string') return b.error.slice(0, 200);
  } catch {
    // not JSON
  }
  return 'HTTP 402';
}
