/**
 * The spec's own 402 protocol (spec §2.6, §4.2 steps 2–3): terms in `X-Payment`, paid through
 * the configured Rail (the ledger by default), the retry carries `X-Payment-Receipt` (and
 * `X-Ctl-Sba` at trust level 1).
 */
import { base64Encode, utf8Encode, type SignedBudgetAuthorization } from '../../../src/index.js';
import type { SessionRecord } from '../../store/sessions.js';
import type { PaymentService } from '../service.js';
import { parsePaymentTerms, type PaymentTerms } from '../terms/x-payment.js';
import { paidResponseLost, type PaymentProtocol } from './protocol.js';

/** spec §1 trust level 1: the SBA rides along on the paid retry for merchants that can check it. */
export function sbaHeaders(session: SessionRecord, sba: SignedBudgetAuthorization): Record<string, string> {
  return session.config.trustLevel === 1 ? { 'x-ctl-sba': base64Encode(utf8Encode(JSON.stringify(sba))) } : {};
}

export function createXPaymentProtocol(payments: PaymentService): PaymentProtocol<PaymentTerms> {
  return {
    name: 'ctl',
    detect(res) {
      if (res.status !== 402 || res.headers['x-payment'] === undefined) return undefined;
      return parsePaymentTerms(res.headers['x-payment']);
    },
    async pay(terms, x) {
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
