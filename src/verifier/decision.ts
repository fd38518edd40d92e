/**
 * `verifySignedSessionBudgetAuthorizationForDecision` (spec §4.4): the SBA verifies as in
 * `verifyCtl`, and also agrees with an ALLOW decision taken for this session: same session,
 * grant and policy, decision not expired, and the decision's price plus what the session already
 * spent fits the authorization (a `TRIP` SBA covers several payments).
 */
import type { VerifyCtl, VerifyCtlOptions } from './verify.js';
import type { PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import { toErrorInfo, type CtlErrorInfo, malformed, fail } from '../errors.js';
import { parseAmount, parseTimestamp } from '../values.js';
import { hostNow } from '../host.js';

export interface Decision {
  action: 'ALLOW' | string;
  reasons?: string[];
  policyHash: string;
  expiresAtISO: string;
  decisionId: string;
  sessionGrantId: string;
  priceFiat: { amountMinor: string; currency: string };
}

export interface DecisionOptions extends Omit<VerifyCtlOptions, 'amount' | 'currency'> {
  sessionId: string;
  decision: Decision;
  /** Spent so far in this session before this payment (minor units, default "0"). */
  cumulativeSpentMinor?: string;
}

export type DecisionResult =
  | { ok: true; grant: PolicyGrant; sba: SignedBudgetAuthorization; decisionId: string }
  | { ok: false; error: CtlErrorInfo };

export async function verifyDecisionWith(verify: VerifyCtl, sba: unknown, options: DecisionOptions): Promise<DecisionResult> {
  try {
    const { sessionId, decision, cumulativeSpentMinor = '0', ...rest } = options ?? ({} as DecisionOptions);
    if (!decision || typeof decision !== 'object') malformed('decision is required');
    if (decision.action !== 'ALLOW') malformed(`decision ${String(decision.decisionId)} is not ALLOW`);
    const price = decision.priceFiat;
    const spent = parseAmount(cumulativeSpentMinor, 'cumulativeSpentMinor');
    const r = await verify(sba, { ...rest, amount: price?.amountMinor, currency: price?.currency });
    if (!r.valid) return { ok: false, error: r.error };
    const a = r.sba.authorization;
    if (a.sessionId !== sessionId) malformed('the SBA belongs to another session');
    if (decision.sessionGrantId !== a.grantId) malformed('the decision is for another grant');
    if (decision.policyHash !== a.policyHash) fail('policy_hash_mismatch', 'the decision was taken under another policy');
    const now = (options.now ?? hostNow)();
    if (now >= parseTimestamp(decision.expiresAtISO, 'decision.expiresAtISO') + (options.clockToleranceMs ?? 0)) {
      fail('sba_expired', `the decision expired at ${decision.expiresAtISO}`);
    }
    if (spent + BigInt(price.amountMinor) > BigInt(a.maxAmountMinor)) {
      fail('budget_exceeded', 'spent so far plus this price exceeds the authorization');
    }
    return { ok: true, grant: r.grant, sba: r.sba, decisionId: decision.decisionId };
  } catch (e) {
    return { ok: false, error: toErrorInfo(e) };
  }
}
