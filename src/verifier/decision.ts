/**
 * `verifySignedSessionBudgetAuthorizationForDecision` (spec §4.4): the SBA verifies as in
 * `verifyCtl`, and also agrees with an ALLOW decision taken for this session: same session,
 * grant and policy, decision not expired, and the decision's price plus what the session already
 * spent fits the authorization (a `TRIP` SBA covers several payments).
 *
 * Stateful last (PROTOCOL.md §7): the decision's own checks need no signature and no ledger, so
 * they run on the verifier's copy of the SBA before `verifyCtl`, whose spend reservation is its
 * last step. A payment the decision refuses records nothing: the SBA stays usable.
 */
import type { VerifyCtl, VerifyCtlOptions } from './verify.js';
import type { Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import { checkSba } from '../artifacts/sba.js';
import { artifactData, ownData } from '../encoding/frozen-copy.js';
import { toErrorInfo, type CtlErrorInfo, malformed, fail } from '../errors.js';
import { parseAmount, parseCurrency, parsePaymentAmount, parseTimestamp, timeOption } from '../values.js';
import { readFlooredTime } from './time-floor.js';
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
  | {
      ok: true;
      grant: PolicyGrant;
      sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
      decisionId: string;
      /** A hold accepted with spend tracked: its name for `captureCtl` (PROTOCOL.md §15), as `verifyCtl`'s. */
      holdId?: string;
    }
  | { ok: false; error: CtlErrorInfo };

export async function verifyDecisionWith(
  verify: VerifyCtl,
  input: unknown,
  options: DecisionOptions,
): Promise<DecisionResult> {
  let clockSeen: number | undefined;
  try {
    const { sessionId, decision: given, cumulativeSpentMinor = '0', ...rest } = options ?? ({} as DecisionOptions);
    if (!given || typeof given !== 'object') malformed('decision is required');
    // Read once into data of our own (PROTOCOL.md §12): the checks below and the price handed to
    // verifyCtl see the same members.
    const decision = ownData(given) as Decision;
    if (decision.action !== 'ALLOW') malformed(`decision ${String(decision.decisionId)} is not ALLOW`);
    const price = decision.priceFiat;
    if (!price || typeof price !== 'object') malformed('decision.priceFiat is required');
    const priceMinor = parsePaymentAmount(price.amountMinor, 'decision.priceFiat.amountMinor');
    parseCurrency(price.currency, 'decision.priceFiat.currency');
    const spent = parseAmount(cumulativeSpentMinor, 'cumulativeSpentMinor');
    // Time is a number or nothing (PROTOCOL.md §12): a tolerance of NaN would pass every expiry.
    const tol = timeOption(rest.clockToleranceMs, 'options.clockToleranceMs', 0);
    // The decision's expiry is a time check like every other: against max(clock, floor).
    const time = await readFlooredTime(rest.now ?? hostNow, rest.timeFloor);
    clockSeen = time.clock;
    if (time.now >= parseTimestamp(decision.expiresAtISO, 'decision.expiresAtISO') + tol) {
      fail('sba_expired', `the decision expired at ${decision.expiresAtISO}`);
    }

    // The SBA against the decision, on the copy verifyCtl then verifies: what matched here is what
    // gets its signatures checked. A mismatch is refused before any signature (§5 step 0).
    const sba = artifactData(input);
    checkSba(sba);
    const a = sba.authorization;
    if (a.sessionId !== sessionId) malformed('the SBA belongs to another session');
    if (decision.sessionGrantId !== a.grantId) malformed('the decision is for another grant');
    if (decision.policyHash !== a.policyHash)
      fail('policy_hash_mismatch', 'the decision was taken under another policy');
    if (spent + priceMinor > BigInt(a.maxAmountMinor)) {
      fail('budget_exceeded', 'spent so far plus this price exceeds the authorization');
    }

    // Last: verifyCtl, whose own last step is the spend reservation.
    const r = await verify(sba, { ...rest, amount: price.amountMinor, currency: price.currency });
    if (!r.valid) return { ok: false, error: r.error };
    const held = r.holdId !== undefined ? { holdId: r.holdId } : {};
    return { ok: true, grant: r.grant, sba: r.sba, decisionId: decision.decisionId, ...held };
  } catch (e) {
    const error = toErrorInfo(e);
    // As verifyCtl: a refusal by time keeps its clock reading at once, so a clock set back cannot
    // revive the decision (PROTOCOL.md §12).
    if (error.code === 'sba_expired' && options?.timeFloor && clockSeen !== undefined) {
      try {
        await options.timeFloor.raise(clockSeen);
      } catch {
        // the refusal stands either way
      }
    }
    return { ok: false, error };
  }
}
