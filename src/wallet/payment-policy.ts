/**
 * The wallet's local policy checks of one payment (spec §2.8), made before anything is asked of
 * the network or the storage: the grant's currency, rails, destinations and purposes.
 */
import type { PolicyGrant } from '../artifacts/types.js';
import { CtlError } from '../errors.js';
import { parseCurrency, parsePaymentAmount, purposeAllowed } from '../values.js';
import type { PaymentRequest } from './session.js';

/** The payment's amount in minor units, once the grant allows the payment. Throws TypeError or CtlError. */
export function checkPaymentPolicy(grant: PolicyGrant, p: PaymentRequest): bigint {
  if (!p || typeof p !== 'object') throw new TypeError('createSba: payment must be an object');
  const amount = parsePaymentAmount(p.amount, 'amount');
  if (p.hold !== undefined && typeof p.hold !== 'boolean') throw new TypeError('createSba: hold must be a boolean');
  if (parseCurrency(p.currency, 'currency') !== grant.currency) {
    throw new CtlError('currency_mismatch', `the grant is in ${grant.currency}, not ${p.currency}`);
  }
  if (typeof p.rail !== 'string' || !grant.allowedRails.includes(p.rail)) {
    throw new CtlError('rail_not_allowed', `rail "${String(p.rail)}" is not allowed by the grant`);
  }
  if (p.merchantId !== undefined && grant.destinationAllowlist && !grant.destinationAllowlist.includes(p.merchantId)) {
    throw new CtlError(
      'destination_not_allowed',
      `merchant "${p.merchantId}" is not in the grant's destination allowlist`,
    );
  }
  if (p.purpose !== undefined && grant.allowedPurposes && !purposeAllowed(p.purpose, grant.allowedPurposes)) {
    throw new CtlError('purpose_not_allowed', `purpose "${p.purpose}" is not allowed by the grant`);
  }
  return amount;
}
