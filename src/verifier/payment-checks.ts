/**
 * PROTOCOL.md §5 steps 4 and 5, their stateless part: the payment in front of the merchant
 * against what the SBA authorizes and what its grant (the leaf's, under a chain) allows; and the
 * `intentHash` of §4 where a profile asks for it. Spend is recorded after all of them (spend-record.ts).
 */
import type { CtlCrypto } from '../crypto/types.js';
import type { VerifyCtlOptions } from './options.js';
import type { PresentedSba } from './presented-sba.js';
import { intentHashWith } from '../artifacts/sba.js';
import { fail } from '../errors.js';
import { purposeAllowed } from '../values.js';

/** The payment's merchant, rail and purpose: the options', else the SBA's. */
export interface PaymentTarget {
  merchantId: string | undefined;
  rail: string | undefined;
  purpose: string | undefined;
}

/**
 * Step 4: the amount within the authorization (`amount_exceeds_authorization`), the currency its
 * own (`currency_mismatch`).
 */
export function checkAmounts(p: PresentedSba, o: VerifyCtlOptions): void {
  const a = p.sba.authorization;
  if (p.amount > BigInt(a.maxAmountMinor))
    fail(
      'amount_exceeds_authorization',
      `${o.amount} minor units of ${p.currency} is more than the ${a.maxAmountMinor} authorized`,
    );
  if (p.currency !== a.currency) fail('currency_mismatch', `the SBA is in ${a.currency}, the payment in ${p.currency}`);
}

/**
 * Step 5: destination, rail, asset and purpose, each as the SBA names it and as the grant allows
 * (a grant without `destinationAllowlist` or `allowedPurposes` does not restrict them).
 */
export function checkDestination(p: PresentedSba, o: VerifyCtlOptions): PaymentTarget {
  const a = p.sba.authorization;
  const eff = p.eff;
  const merchantId = o.merchantId ?? a.merchantId;
  const rail = o.rail ?? a.rail;
  const purpose = o.purpose ?? a.purpose;
  if (o.merchantId !== undefined && a.merchantId !== undefined && o.merchantId !== a.merchantId) {
    fail('destination_not_allowed', `the SBA is for merchant ${a.merchantId}, not ${o.merchantId}`);
  }
  if (merchantId !== undefined && eff.destinationAllowlist && !eff.destinationAllowlist.includes(merchantId)) {
    fail('destination_not_allowed', `merchant ${merchantId} is not in the grant's destination allowlist`);
  }
  if (
    (o.rail !== undefined && a.rail !== undefined && o.rail !== a.rail) ||
    (rail !== undefined && !eff.allowedRails.includes(rail))
  ) {
    fail('rail_not_allowed', `rail ${rail} is not allowed`);
  }
  if (o.asset && !eff.allowedAssets.some((x) => x.standard === o.asset!.standard && x.code === o.asset!.code)) {
    fail('asset_not_allowed', `asset ${o.asset.standard}:${o.asset.code} is not allowed`);
  }
  if (
    (o.purpose !== undefined && a.purpose !== undefined && o.purpose !== a.purpose) ||
    (purpose !== undefined && eff.allowedPurposes && !purposeAllowed(purpose, eff.allowedPurposes))
  ) {
    fail('purpose_not_allowed', `purpose ${purpose} is not allowed`);
  }
  return { merchantId, rail, purpose };
}

/**
 * PROTOCOL.md §4 `intentHash`, recomputed from the payment in front of the merchant with
 * `requireIntentHash` (the spec's Full profile) and always under a human-agent grant (§10).
 */
export async function checkIntent(
  c: CtlCrypto,
  p: PresentedSba,
  o: VerifyCtlOptions,
  to: PaymentTarget,
): Promise<void> {
  const a = p.sba.authorization;
  if (!o.requireIntentHash && p.chain.root.profile !== 'human-agent') return;
  if (!a.intentHash) fail('malformed', 'intentHash is required (Full and Human-Agent profiles) and absent');
  if (to.merchantId === undefined || to.rail === undefined)
    fail('malformed', 'intentHash needs the merchantId and rail of the payment');
  const intent = { currency: p.currency, merchantId: to.merchantId!, rail: to.rail!, purpose: to.purpose };
  if ((await intentHashWith(c, { ...intent, amount: o.amount })) === a.intentHash) return;
  // The SBA was made for another payment: say which part differs where the hash can tell.
  if ((await intentHashWith(c, { ...intent, amount: a.maxAmountMinor })) === a.intentHash) {
    fail(
      'amount_exceeds_authorization',
      `the SBA authorizes a payment of exactly ${a.maxAmountMinor} minor units of ${a.currency}, not ${o.amount}`,
    );
  }
  fail('destination_not_allowed', "the SBA's intentHash is for another payment (merchant, rail or purpose differ)");
}
