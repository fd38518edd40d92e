/**
 * One 402 payment protocol the gateway speaks (spec §4.2 "payment rails are pluggable"):
 * `detect` reads a merchant's 402 into terms (undefined when the 402 is not this protocol; throws
 * `payment_terms_refused` when it is but cannot be read), `pay` runs the whole paid exchange
 * (policy and reservation before any signature, the retry, the confirmation) and answers the
 * merchant's final response; once a payment is committed, a failed retry is `paidResponseLost`
 * (below), never a bare upstream error. The spec's `X-Payment` protocol pays through a `Rail`
 * (x-payment.ts); x402 pays through the merchant's own facilitator (x402.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { HttpError } from '../../../service-kit/http-error.js';
import { DEFAULT_STATUS_BY_CODE } from '../../../service-kit/error-middleware.js';
import { base64Encode, utf8Encode, type SignedBudgetAuthorization } from '../../../src/index.js';
import type { SessionRecord } from '../../sessions/store.js';
import type { ForwardResponse } from '../../net/forwarder.js';

export interface PaymentProtocol<Terms = unknown> {
  readonly name: string;
  detect(res: { status: number; headers: IncomingHttpHeaders; body: Buffer }): Terms | undefined;
  pay(terms: Terms, exchange: PaidExchangeContext): Promise<PaidExchange>;
}

export interface PaidExchangeContext {
  /** The session paying. */
  session: SessionRecord;
  /** The merchant host (what merchant globs and receipts name). */
  host: string;
  purpose: string | undefined;
  /** Sends the agent's request again to the URL that asked for payment, with these headers added. */
  retry(headers: Record<string, string>): Promise<ForwardResponse>;
}

export interface PaidExchange {
  response: ForwardResponse;
  /** Set when the payment is committed with a signed receipt. */
  receiptId?: string;
}

/**
 * The answer when a payment is committed with its receipt and the merchant's answer to the paid
 * retry then fails (a refused redirect, a timeout, a body too large, a reset): the money moved,
 * so the agent is told so, with the receipt, and that sending the request again pays again
 * (PROTOCOL.md §7: nothing paid twice for one intent). Never retried by the SDK client.
 */
export function paidResponseLost(receiptId: string, cause?: unknown): HttpError {
  // Only a refusal meant for the client (one with a protocol code, as the error middleware shows
  // them) says why; anything else (a database driver's text) is the operator's, never the agent's.
  const code = (cause as { code?: unknown } | undefined)?.code;
  const forClient =
    cause instanceof HttpError ||
    (cause instanceof Error && typeof code === 'string' && code in DEFAULT_STATUS_BY_CODE);
  const why = forClient
    ? `the merchant's answer to the paid request was lost: ${(cause as Error).message}`
    : 'the gateway failed before it could answer';
  return new HttpError(
    502,
    'paid_response_lost',
    `the payment was made (receipt ${receiptId}) but ${why}; sending the request again pays again`,
    { 'X-Ctl-Receipt-Id': receiptId },
  );
}

/** spec §1 trust level 1: the SBA rides along on the paid retry for merchants that can check it. */
export function sbaHeaders(session: SessionRecord, sba: SignedBudgetAuthorization): Record<string, string> {
  return session.config.trustLevel === 1 ? { 'x-ctl-sba': base64Encode(utf8Encode(JSON.stringify(sba))) } : {};
}
