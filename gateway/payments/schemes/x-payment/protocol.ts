/**
 * The spec's own 402 protocol (spec §2.6, §4.2 steps 2–3): terms in `X-Payment`, paid through
 * the configured Rail (the ledger by default), the retry carries `X-Payment-Receipt` (and
 * `X-Ctl-Sba` at trust level 1).
 *
 * Variable amounts (PROTOCOL.md §15): terms `{ maxAmount, currency, address }` reserve the maximum
 * (checked as any payment, nothing paid yet); the retry carries `X-Payment-Hold: <payment id>`
 * (and the SBA for the maximum at trust level 1); the merchant's answer names what it used in
 * `X-Payment-Captured` (minor units). The gateway then pays that on the rail and commits it, the
 * rest released. 0 captures nothing; above the hold is `capture_exceeds_hold`, nothing paid, the
 * answer withheld; a 2xx answer without the header captures the whole hold (as an x402 `upto`
 * settle without an amount does), any other answer without it captures nothing.
 */
import type { PaymentService } from '../../service.js';
import { parseCaptured, parsePaymentTerms, type PaymentTerms } from './terms.js';
import type { PaidExchange, PaidExchangeContext } from '../scheme.js';
import { paidResponseLost, sbaHeaders, type PaymentProtocol } from '../scheme.js';

export function createXPaymentProtocol(payments: PaymentService): PaymentProtocol<PaymentTerms> {
  return {
    name: 'ctl',
    detect(res) {
      if (res.status !== 402 || res.headers['x-payment'] === undefined) return undefined;
      return parsePaymentTerms(res.headers['x-payment']);
    },
    async pay(terms, x) {
      if (terms.hold) return payHold(payments, terms, x);
      const paid = await payments.pay(x.session, terms, x.host, x.purpose);
      const receiptId = paid.receipt.receiptId;
      try {
        const response = await x.retry({ 'x-payment-receipt': paid.txRef, ...sbaHeaders(x.session, paid.sba) });
        return { response, receiptId };
      } catch (e) {
        // Paid and committed: whatever the retry's failure, the answer says so (protocol.ts).
        throw paidResponseLost(receiptId, e);
      }
    },
  };
}

/** A `maxAmount` hold: reserved, the merchant asked, its capture paid and committed (above). */
async function payHold(payments: PaymentService, terms: PaymentTerms, x: PaidExchangeContext): Promise<PaidExchange> {
  const a = await payments.authorize(x.session, terms, x.host, x.purpose, payments.railName);
  let response;
  try {
    response = await x.retry({ 'x-payment-hold': a.paymentId, ...sbaHeaders(x.session, a.sba) });
  } catch (e) {
    // Nothing is paid before the capture: a lost answer captures nothing.
    await payments.abandon(a.paymentId, payments.railName, 'upstream_error');
    throw e;
  }
  let captured: bigint | undefined;
  try {
    captured = parseCaptured(response.headers['x-payment-captured']);
  } catch (e) {
    await payments.abandon(a.paymentId, payments.railName, 'payment_terms_refused');
    throw e;
  }
  const ok = response.status >= 200 && response.status < 300;
  const paid = await payments.capture(x.session, a, terms.address, captured ?? (ok ? a.amount : 0n));
  return { response, receiptId: paid?.receipt.receiptId };
}
