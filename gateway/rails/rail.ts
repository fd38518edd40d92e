/**
 * Payment rails are pluggable (spec §4.2). A rail must be idempotent by payment id: paying the
 * same id twice pays once, and `settle` after a crash either finds the payment or makes sure
 * it can never happen (so a late `pay` of a settled-unpaid id is refused). That pair is what
 * lets reconcile() promise "nothing paid twice, nothing paid and forgotten".
 */
import { HttpError } from '../../service-kit/http-error.js';
import { DEFAULT_STATUS_BY_CODE } from '../../service-kit/error-middleware.js';

export interface PaymentOrder {
  paymentId: string;
  amount: bigint;
  currency: string;
  /** The merchant's pay-to address from its X-Payment terms (spec §2.6). */
  address: string;
  /** The merchant host, for the rail's own records. */
  merchant: string;
}

export interface Rail {
  readonly name: string;
  /** Pays once per paymentId and returns `txid:<reference>`; throws RailError when refused. */
  pay(order: PaymentOrder): Promise<{ txRef: string }>;
  /**
   * After a crash or an unknown outcome: the txRef if the payment was made; undefined when it
   * provably never will be (the id is voided); `'pending'` when it may still happen (an x402
   * authorization signed and sent, not yet expired), so the reservation stays. `rail` is the
   * receipt's `rail` when it is not the rail's name (x402: network and asset).
   */
  settle(paymentId: string): Promise<{ txRef: string; rail?: string } | undefined | 'pending'>;
}

/**
 * One 402 dialect the gateway can pay (spec §4.2 "payment rails are pluggable"):
 * `detect` reads a merchant's 402 into terms (undefined when the 402 is not this dialect; throws
 * `payment_terms_refused` when it is but cannot be read), `pay` runs the whole paid exchange
 * (policy and reservation before any signature, the retry, the confirmation) and answers the
 * merchant's final response; once a payment is committed, a failed retry is `paidResponseLost`
 * (below), never a bare upstream error. The spec's `X-Payment` dialect pays through a `Rail`; x402 pays
 * through the merchant's own facilitator (rails/x402/).
 */
export interface PaymentDialect<Terms = unknown> {
  readonly name: string;
  detect(res: { status: number; headers: import('node:http').IncomingHttpHeaders; body: Buffer }): Terms | undefined;
  pay(terms: Terms, exchange: PaidExchangeContext): Promise<PaidExchange>;
}

export interface PaidExchangeContext {
  /** The session paying (store/sessions.ts SessionRecord). */
  session: import('../store/sessions.js').SessionRecord;
  /** The merchant host (what merchant globs and receipts name). */
  host: string;
  purpose: string | undefined;
  /** Sends the agent's request again to the URL that asked for payment, with these headers added. */
  retry(headers: Record<string, string>): Promise<import('../services/forwarder.js').ForwardResponse>;
}

export interface PaidExchange {
  response: import('../services/forwarder.js').ForwardResponse;
  /** Set when the payment is committed with a signed receipt. */
  receiptId?: string;
}

export class RailError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RailError';
  }
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
