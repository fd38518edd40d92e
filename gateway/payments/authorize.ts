/**
 * Everything before money moves (spec §3 rows 2–4): the session's checks that never change while
 * it lives, in memory (purpose, merchant globs, currency); one atomic reservation in the store
 * (state, expiry, velocity, budget); then the SBA, and under a person's grant that grant's own
 * checks. A refusal is recorded (`payment.denied`) and thrown as a CtlError with its code.
 */
import { CtlError, type SignedBudgetAuthorization } from '../../src/index.js';
import { idleCache, timeOrderedId, type SqlDatabase } from '../../service-kit/index.js';
import { reserve, release } from './store/payments.js';
import type { SessionRecord } from '../sessions/store.js';
import type { PaymentTerms } from './schemes/x-payment/terms.js';
import type { PaymentFields, PaymentSigning } from './signing.js';
import type { GatewayEvents } from '../sessions/events.js';
import { createMerchantMatcher, purposeIsAllowed } from '../sessions/config.js';
import { humanChainRefusal, type HumanTrust } from '../sessions/human.js';
import type { CommitRecords } from './commit-records.js';
import type { ChainWindows } from './windows.js';

export interface AuthorizerDeps {
  db: SqlDatabase;
  events: GatewayEvents;
  signing: PaymentSigning;
  records: CommitRecords;
  windows: ChainWindows;
  now: () => number;
  paymentId?: () => string | undefined;
  humans?: HumanTrust;
  onRefused?: (code: string, rail: string) => void;
}

/** What the payment names before anything is reserved, and what a refusal of it records. */
export interface PaymentRequest {
  session: SessionRecord;
  terms: PaymentTerms;
  host: string;
  purpose: string | undefined;
  rail: string;
}

export function createAuthorizer(deps: AuthorizerDeps) {
  const { db, events, now } = deps;
  // Per session, bounded by the sessions in use (service-kit/idle-cache.ts): made again on demand.
  const matchers = idleCache<string, (host: string) => boolean>();

  function merchantAllowed(session: SessionRecord, host: string): boolean {
    let m = matchers.get(session.id);
    if (!m) {
      m = createMerchantMatcher(session.config);
      matchers.set(session.id, m);
    }
    return m(host);
  }

  const detailsOf = (r: PaymentRequest) => ({
    merchant: r.host,
    amountMinor: r.terms.amount.toString(),
    currency: r.terms.currency,
    purpose: r.purpose ?? null,
  });

  /** Records the refusal (`payment.denied`, metrics) and throws it. */
  async function refuse(
    rail: string,
    session: SessionRecord,
    code: CtlError['code'],
    message: string,
    details: Record<string, unknown>,
    resetsAt?: string,
  ): Promise<never> {
    deps.onRefused?.(code, rail);
    await events.emit(session, 'payment.denied', { code, message, ...details, ...(resetsAt ? { resetsAt } : {}) });
    throw new CtlError(code, message, resetsAt ? { resetsAt } : undefined);
  }

  /** The session's checks that never change while it lives (spec §3 row 3), in memory; the payment's fields. */
  async function checkFixed(r: PaymentRequest): Promise<PaymentFields> {
    const { session, terms, host, purpose, rail } = r;
    const no = (code: CtlError['code'], message: string) => refuse(rail, session, code, message, detailsOf(r));
    if (!purpose || !purposeIsAllowed(purpose, session.config.purposes))
      await no(
        'purpose_not_allowed',
        purpose
          ? `the purpose '${purpose}' is not allowed for this session`
          : 'X-Ctl-Purpose is required for a paid request',
      );
    if (!merchantAllowed(session, host))
      await no('destination_not_allowed', `the merchant '${host}' is not allowed for this session`);
    if (terms.currency !== session.currency)
      await no(
        'currency_mismatch',
        `the merchant asks for ${terms.currency}; the session budget is in ${session.currency}`,
      );
    const id = deps.paymentId?.() ?? `pay_${timeOrderedId()}`;
    return { id, amount: terms.amount, currency: terms.currency, merchant: host, purpose: purpose!, rail };
  }

  /** Under a person's grant, nothing is paid that a merchant would refuse (PROTOCOL.md §10). */
  async function personRefusal(
    r: PaymentRequest,
    sba: SignedBudgetAuthorization,
    p: PaymentFields,
    giveBack: () => Promise<unknown> = async () => {},
  ): Promise<void> {
    const denied = await humanChainRefusal(
      r.session,
      sba,
      { amount: p.amount.toString(), currency: p.currency, merchantId: p.merchant, rail: p.rail, purpose: p.purpose },
      now,
      deps.humans,
    );
    if (!denied) return;
    await giveBack();
    const message = `the person's grant refuses this payment: ${denied.message}`;
    await refuse(p.rail, r.session, denied.code, message, detailsOf(r));
  }

  /**
   * Reserves and signs for `r`: throws CtlError with the refusal code having reserved nothing; on
   * success the amount is reserved under the returned payment's id, with its SBA.
   */
  async function authorize(r: PaymentRequest): Promise<{ p: PaymentFields; sba: SignedBudgetAuthorization }> {
    const p = await checkFixed(r);
    const at = now();
    const reserved = await reserve(
      db,
      {
        paymentId: p.id,
        sessionId: r.session.id,
        amount: p.amount,
        currency: p.currency,
        merchant: r.host,
        address: r.terms.address,
        purpose: p.purpose,
        rail: r.rail,
        now: at,
        ...(await deps.windows.counters(r.session, at)),
      },
      deps.records.pausedRecord(r.session),
    );
    if (!reserved.ok) await refuse(r.rail, r.session, reserved.code, reserved.message, detailsOf(r), reserved.resetsAt);

    // Signed only now: the reservation above re-read the revocation state (spec §3 rule 1).
    let sba: SignedBudgetAuthorization;
    try {
      sba = await deps.signing.sba(r.session, p);
    } catch (e) {
      await release(db, p.id, now());
      throw e;
    }
    await personRefusal(r, sba, p, () => release(db, p.id, now()));
    return { p, sba };
  }

  return { authorize, checkFixed, personRefusal, refuse, detailsOf };
}

export type Authorizer = ReturnType<typeof createAuthorizer>;
