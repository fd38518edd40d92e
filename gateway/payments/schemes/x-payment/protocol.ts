/**
 * The spec's own 402 scheme (spec §2.6, §4.2 steps 2–3): terms in `X-Payment`, paid on the
 * gateway's own rail (the ledger by default) before the retry, which carries `X-Payment-Receipt`
 * (and `X-Ctl-Sba` at trust level 1, payments/exchange.ts). Nothing the merchant can cash is
 * signed: the rail moves the money.
 *
 * Variable amounts (PROTOCOL.md §15): terms `{ maxAmount, currency, address }` reserve the maximum
 * (checked as any payment, nothing paid yet); the retry carries `X-Payment-Hold: <payment id>`
 * (and the SBA for the maximum at trust level 1); the merchant's answer names what it used in
 * `X-Payment-Captured` (minor units). The gateway then pays that on the rail and commits it, the
 * rest released. 0 captures nothing; above the hold is `capture_exceeds_hold`, nothing paid, the
 * answer withheld; a 2xx answer without the header captures the whole hold (as an x402 `upto`
 * settle without an amount does), any other answer without it captures nothing.
 */
import type { Authorization } from '../../service.js';
import { parseCaptured, parsePaymentTerms, type PaymentTerms } from './terms.js';
import type { PaymentScheme, SchemeDeps, SchemeModule } from '../scheme.js';

/** The reservations of X-Payment terms name the gateway's own rail (`railName`). */
function createXPaymentScheme(d: SchemeDeps): PaymentScheme<PaymentTerms, PaymentTerms> {
  return {
    name: d.railName,
    title: 'X-Payment',
    detect(res) {
      if (res.status !== 402 || res.headers['x-payment'] === undefined) return undefined;
      return parsePaymentTerms(res.headers['x-payment']);
    },
    async choose(terms) {
      return {
        amount: terms.amount,
        currency: terms.currency,
        address: terms.address,
        chosen: terms,
        ...(terms.hold ? {} : { payFirst: true as const }),
      };
    },
    paidHeaders: (paid) => ({ 'x-payment-receipt': paid.txRef }),
    // A hold: the SBA for the maximum, nothing else signed; the merchant answers what it used.
    async sign(_, authorize: () => Promise<Authorization>) {
      const a = await authorize();
      return { headers: { 'x-payment-hold': a.paymentId } };
    },
    async read(res, _, c) {
      const captured = parseCaptured(res.headers['x-payment-captured']);
      const ok = res.status >= 200 && res.status < 300;
      return { kind: 'capture', amount: captured ?? (ok ? c.amount : 0n) };
    },
  };
}

/** The X-Payment scheme, as payments/registry.ts lists it: it pays on the gateway's own rail. */
export const xPaymentScheme: SchemeModule = { name: 'ctl', create: createXPaymentScheme };
