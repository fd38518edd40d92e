/**
 * One payment, from a merchant's 402 to a signed receipt (spec §3 second row, §4.2 steps 2–3):
 * checks that never change during a session (purpose, merchant globs, currency) in memory, then
 * one atomic reservation in the store (state, expiry, velocity, budget), an SBA signed under
 * the session's internal grant (signing.ts), the rail paid (idempotent by payment id), the
 * receipt signed and committed with the spend. Two ways to pay: a rail that pays before the
 * commit (`paying` written first; a failure after it is settled with the rail, never guessed),
 * and the ledger, which pays in the change that commits (store.ts payLedgerInCommit).
 * reconcile.ts settles what a crash left open.
 */
import { CtlError, formatTimestamp, type Receipt, type SignedBudgetAuthorization } from '../../src/index.js';
import { HttpError, changeWith, timeOrderedId, type SqlDatabase, idleCache } from '../../service-kit/index.js';
import { formatMinor } from '../../service-kit/money.js';
import {
  reserve,
  markPaying,
  commit,
  release,
  payLedgerInCommit,
  receiptOfPayment,
  type PaymentRecord,
  type CommitResult,
  type CommitRecord,
} from './store/payments.js';
import { chainOf, sessionById, type SessionRecord, type SessionWindow } from '../sessions/store.js';
import { chainWindowKeys, filledWindows, windowsOfChain } from './store/counters.js';
import type { PaymentOrder, Rail } from './rail.js';
import type { PaymentTerms } from './schemes/x-payment/terms.js';
import { createPaymentSigning, type PaymentFields } from './signing.js';
import { reconcile } from './reconcile.js';
import type { KeyRing } from '../keys/ring.js';
import type { SessionKeys } from '../sessions/actor-keys.js';
import type { GatewayEvents } from '../sessions/events.js';
import { createMerchantMatcher, purposeIsAllowed } from '../sessions/config.js';
import { continuationToken } from '../sessions/continuation.js';
import { humanChainRefusal, type HumanTrust } from '../sessions/human.js';

export interface PaymentServiceDeps {
  db: SqlDatabase;
  rail: Rail;
  /** Other rails whose payments reconcile() settles, by name (the x402 rail). */
  otherRails?: Rail[];
  keys: KeyRing;
  /** Each session's actor key (derived, services/session-keys.ts). */
  sessionKeys: SessionKeys;
  events: GatewayEvents;
  continuationSecret: Buffer;
  issuer: string;
  now: () => number;
  /**
   * The id the payment of the running request must carry, when it has one (an Idempotency-Key's,
   * services/idempotency.ts): the payment table's primary key then refuses a second reservation.
   */
  paymentId?: () => string | undefined;
  /** Where people's grants come from and how their authority is reached (services/human-sessions.ts). */
  humans?: HumanTrust;
  /** A payment committed after `ms`, on the rail named `rail` (metrics). */
  onPaid?: (ms: number, rail: string) => void;
  /** A payment refused with a PROTOCOL.md §9 code, on the rail named `rail` (metrics). */
  onRefused?: (code: string, rail: string) => void;
  /** A reconcile pass ended, with the payments it settled (metrics). */
  onReconciled?: (settled: { committed: number; released: number }) => void;
  /** A payment reconcile could not settle this pass (logged; the pass goes on). */
  onReconcileError?: (paymentId: string, error: unknown) => void;
}

/** A payment reserved and signed for, not yet paid (the x402 rail pays it on the merchant's retry). */
export interface Authorization {
  paymentId: string;
  sba: SignedBudgetAuthorization;
  amount: bigint;
  currency: string;
  merchant: string;
  purpose: string;
}

export interface PaidResult {
  paymentId: string;
  txRef: string;
  sba: SignedBudgetAuthorization;
  receipt: Receipt;
}

/**
 * The chain a payment of `session` reserves on (PROTOCOL.md §13, §14): itself and its ancestors,
 * when it counts on more than its own lifetime total; undefined for the single-counter path.
 */
export function counterChain(session: SessionRecord): string[] | undefined {
  return session.parentId !== null || session.config.windows?.length ? chainOf(session) : undefined;
}

export function createPaymentService(deps: PaymentServiceDeps) {
  const { db, rail, events, now } = deps;
  const signing = createPaymentSigning(deps);
  // Per session, bounded by the sessions in use (service-kit/idle-cache.ts): made again on demand.
  const matchers = idleCache<string, (host: string) => boolean>();
  // The windows of each chain in use (they never change; only a window row's limit may).
  const chainWindowsOf = idleCache<string, { id: string; windows: SessionWindow[]; windowsStart: number | null }[]>();

  /** The window rows a payment of `session`'s chain at `at` counts in (counters.ts). */
  async function chainWindows(session: SessionRecord, chain: string[], at: number) {
    let sessions = chainWindowsOf.get(session.id);
    if (!sessions) {
      sessions = await windowsOfChain(db, chain);
      chainWindowsOf.set(session.id, sessions);
    }
    return chainWindowKeys(sessions, at);
  }

  function merchantAllowed(session: SessionRecord, host: string): boolean {
    let m = matchers.get(session.id);
    if (!m) {
      m = createMerchantMatcher(session.config);
      matchers.set(session.id, m);
    }
    return m(host);
  }

  async function refuse(
    railName: string,
    session: SessionRecord,
    code: CtlError['code'],
    message: string,
    details: Record<string, unknown>,
    resetsAt?: string,
  ): Promise<never> {
    deps.onRefused?.(code, railName);
    await events.emit(session, 'payment.denied', { code, message, ...details, ...(resetsAt ? { resetsAt } : {}) });
    throw new CtlError(code, message, resetsAt ? { resetsAt } : undefined);
  }

  /**
   * How a commit records its events (spec §6), in its own change; only the caller whose commit
   * changed the books records them. payment.completed is known beforehand; thresholds crossed
   * only from the new total, so a session with thresholds records them from the result. Which
   * form the store writes (rows in the commit statement, or a transaction's effects) is its own.
   */
  function commitRecord(
    session: SessionRecord,
    p: PaymentFields,
    receipt: Receipt,
    txRef: string,
    captured?: bigint,
    windowed = false,
  ): CommitRecord {
    const completed = [
      {
        session,
        type: 'payment.completed' as const,
        actor: 'agent',
        // Appended to the transparency log in this commit (services/log-entries.ts).
        receipt,
        data: {
          paymentId: p.id,
          receiptId: receipt.receiptId,
          amountMinor: (captured ?? p.amount).toString(),
          ...(captured !== undefined ? { authorizedAmountMinor: p.amount.toString() } : {}),
          currency: p.currency,
          merchant: p.merchant,
          purpose: p.purpose,
          txRef,
        },
      },
    ];
    const known = { effect: events.effect(() => completed), rows: () => events.rows(completed) };
    const filled = windowed ? exhaustedRecord(p) : undefined;
    if (session.thresholds.length === 0) return { known, ...(filled ? { filled } : {}) };
    const effect = events.effect((c: CommitResult) => {
      if (!c.committed) return [];
      return session.thresholds
        .filter((pct) => {
          const mark = (c.ceiling * BigInt(pct)) / 100n;
          return c.spentBefore < mark && c.spentAfter >= mark;
        })
        .map((pct) => ({
          session,
          type: 'session.threshold_crossed' as const,
          actor: 'agent',
          data: { threshold: pct, spentMinor: c.spentAfter.toString(), ceilingMinor: c.ceiling.toString() },
        }));
    });
    return { known, effect, ...(filled ? { filled } : {}) };
  }

  /**
   * `window.exhausted` for each window (the session's or an ancestor's) that the commit of `p`
   * filled, told once by the commit that settles its last payment (counters.ts filledWindows).
   */
  const exhaustedRecord = (p: PaymentFields) =>
    events.effect(async (c: CommitResult, q) =>
      !c.committed
        ? []
        : (await filledWindows(q, p.id)).map((w) => {
            const resetsAt = formatTimestamp(w.endsAt);
            const spent = formatMinor(w.spent, p.currency);
            return {
              session: { id: w.sessionId, webhookUrl: w.webhookUrl },
              type: 'window.exhausted' as const,
              actor: 'agent',
              data: {
                every: w.every,
                maxAmountMinor: w.maxAmount.toString(),
                ...(w.maxPayments !== null ? { maxPayments: Number(w.maxPayments) } : {}),
                spentMinor: w.spent.toString(),
                payments: Number(w.payments),
                currency: p.currency,
                paymentId: p.id,
                resetsAt,
                message: `the ${w.every} window of this session is full (${spent}) until ${resetsAt}`,
              },
            };
          }),
    );

  /** Whether a payment of `session` counts in a window, its own or an ancestor's (PROTOCOL.md §13, §14). */
  async function windowed(session: SessionRecord, at: number): Promise<boolean> {
    const chain = counterChain(session);
    return chain !== undefined && (await chainWindows(session, chain, at)).length > 0;
  }

  /** Recorded in the transaction that pauses the session at its soft ceiling, from the row it wrote. */
  const pausedRecord = (session: SessionRecord) =>
    events.effect(async (_: void, q) => {
      const s = await sessionById(q, session.id);
      return [
        {
          session,
          type: 'session.paused' as const,
          actor: 'agent',
          data: {
            spentMinor: s?.spent.toString(),
            ceilingMinor: s?.ceiling.toString(),
            continuationToken: s?.continuationNonce
              ? continuationToken(deps.continuationSecret, session.id, s.continuationNonce)
              : undefined,
          },
        },
      ];
    });

  /**
   * Commit + receipt for a payment the rail has made; safe to call from any path, commits once.
   * With `captured`, `p.amount` was a hold (PROTOCOL.md §15): `captured` is spent, the rest released.
   */
  async function commitPaid(
    session: SessionRecord,
    p: PaymentFields,
    txRef: string,
    sba: SignedBudgetAuthorization | undefined,
    captured?: bigint,
  ) {
    const paidAt = now();
    const { receipt, row, committed } = await signing.receipt(session, p, txRef, paidAt, sba, captured);
    // A capture (PROTOCOL.md §15) spends `captured` and gives the rest of the hold back to every counter.
    const c = await commit(
      db,
      { ...row, sessionId: session.id, amount: p.amount, txRef, captured, multi: counterChain(session) !== undefined },
      commitRecord(session, p, receipt, txRef, captured, await windowed(session, paidAt)),
    );
    if (c.committed) committed();
    return { committed: c.committed, receipt };
  }

  /**
   * commitPaid for the request whose rail call paid: when reconcile settled the payment first (the
   * rail answered after `staleMs`, a database failover in between), the receipt stored then is the
   * payment's one; the receipt signed here was never stored and is dropped unseen, so a client is
   * never handed a receipt its gateway does not keep. Released meanwhile (reconcile found nothing
   * paid, then the rail said it paid): 409 conflict, and reconcile's record stands.
   */
  async function commitAnswered(
    session: SessionRecord,
    p: PaymentFields,
    txRef: string,
    sba: SignedBudgetAuthorization | undefined,
    captured?: bigint,
  ): Promise<{ committed: boolean; receipt: Receipt }> {
    const r = await commitPaid(session, p, txRef, sba, captured);
    if (r.committed) return r;
    const stored = (await receiptOfPayment(db, p.id)) as Receipt | undefined;
    if (stored === undefined)
      throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation while the rail answered');
    return { committed: false, receipt: stored };
  }

  /** The session's checks that never change while it lives (spec §3 row 3), in memory. */
  async function checkFixed(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string | undefined,
    railName: string,
    details: Record<string, unknown>,
  ): Promise<string> {
    if (!purpose || !purposeIsAllowed(purpose, session.config.purposes)) {
      await refuse(
        railName,
        session,
        'purpose_not_allowed',
        purpose
          ? `the purpose '${purpose}' is not allowed for this session`
          : 'X-Ctl-Purpose is required for a paid request',
        details,
      );
    }
    if (!merchantAllowed(session, host))
      await refuse(
        railName,
        session,
        'destination_not_allowed',
        `the merchant '${host}' is not allowed for this session`,
        details,
      );
    if (terms.currency !== session.currency)
      await refuse(
        railName,
        session,
        'currency_mismatch',
        `the merchant asks for ${terms.currency}; the session budget is in ${session.currency}`,
        details,
      );
    return purpose!;
  }

  const detailsOf = (terms: PaymentTerms, host: string, purpose: string | undefined) => ({
    merchant: host,
    amountMinor: terms.amount.toString(),
    currency: terms.currency,
    purpose: purpose ?? null,
  });

  /** Under a person's grant, nothing is paid that a merchant would refuse (PROTOCOL.md §10). */
  async function personRefusal(
    session: SessionRecord,
    sba: SignedBudgetAuthorization,
    p: PaymentFields,
    details: Record<string, unknown>,
    giveBack: () => Promise<unknown> = async () => {},
  ): Promise<void> {
    const denied = await humanChainRefusal(
      session,
      sba,
      { amount: p.amount.toString(), currency: p.currency, merchantId: p.merchant, rail: p.rail, purpose: p.purpose },
      now,
      deps.humans,
    );
    if (!denied) return;
    await giveBack();
    await refuse(p.rail, session, denied.code, `the person's grant refuses this payment: ${denied.message}`, details);
  }

  /**
   * Everything before money moves (spec §3 rows 2–4): the session's fixed checks in memory, one
   * atomic reservation in the store, then the SBA. Throws CtlError with the refusal code having
   * reserved nothing; on success the amount is reserved under the returned payment id.
   */
  async function authorize(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string | undefined,
    railName: string,
  ): Promise<Authorization> {
    const details = detailsOf(terms, host, purpose);
    const allowed = await checkFixed(session, terms, host, purpose, railName, details);
    const p: PaymentFields = {
      id: deps.paymentId?.() ?? `pay_${timeOrderedId()}`,
      amount: terms.amount,
      currency: terms.currency,
      merchant: host,
      purpose: allowed,
      rail: railName,
    };
    const at = now();
    const chain = counterChain(session);
    const velocity = session.maxPerHour !== null || session.maxPerMerchantDay !== null;
    const r = await reserve(
      db,
      {
        paymentId: p.id,
        sessionId: session.id,
        amount: p.amount,
        currency: p.currency,
        merchant: host,
        address: terms.address,
        purpose: p.purpose,
        rail: railName,
        now: at,
        velocity,
        chain,
        ...(chain && !velocity ? { chainWindows: await chainWindows(session, chain, at) } : {}),
      },
      pausedRecord(session),
    );
    if (!r.ok) await refuse(railName, session, r.code, r.message, details, r.resetsAt);

    // Signed only now: the reservation above re-read the revocation state (spec §3 rule 1).
    let sba: SignedBudgetAuthorization;
    try {
      sba = await signing.sba(session, p);
    } catch (e) {
      await release(db, p.id, now());
      throw e;
    }
    await personRefusal(session, sba, p, details, () => release(db, p.id, now()));
    return { paymentId: p.id, sba, amount: p.amount, currency: p.currency, merchant: host, purpose: p.purpose };
  }

  /**
   * A rail in this database (the ledger) pays in the change that commits: SBA and receipt signed
   * first, then reservation, payment, spend and receipt (store.ts payLedgerInCommit), whose guard
   * re-reads the revocation state, expiry and budget. The revocation state was also read from the
   * database for this request (routes/proxy.ts) before the SBA was signed (spec §3 rule 1); a
   * revocation committed after that read makes the guard refuse, and the SBA and receipt signed
   * for it are dropped unseen.
   */
  async function payInCommit(session: SessionRecord, terms: PaymentTerms, host: string, purpose: string | undefined) {
    const details = detailsOf(terms, host, purpose);
    const allowed = await checkFixed(session, terms, host, purpose, rail.name, details);
    const p: PaymentFields = {
      id: deps.paymentId?.() ?? `pay_${timeOrderedId()}`,
      amount: terms.amount,
      currency: terms.currency,
      merchant: host,
      purpose: allowed,
      rail: rail.name,
    };
    const sba = await signing.sba(session, p);
    await personRefusal(session, sba, p, details);
    const txRef = `txid:${timeOrderedId()}`;
    const paidAt = now();
    const chain = counterChain(session);
    const velocity = session.maxPerHour !== null || session.maxPerMerchantDay !== null;
    const { receipt, row, committed } = await signing.receipt(session, p, txRef, paidAt, sba);
    const c = await payLedgerInCommit(
      db,
      {
        ...row,
        sessionId: session.id,
        amount: p.amount,
        currency: p.currency,
        merchant: host,
        address: terms.address,
        purpose: p.purpose,
        rail: rail.name,
        now: paidAt,
        velocity,
        chain,
        ...(chain && !velocity ? { chainWindows: await chainWindows(session, chain, paidAt) } : {}),
        txRef,
      },
      commitRecord(session, p, receipt, txRef, undefined, await windowed(session, paidAt)),
      pausedRecord(session),
    );
    if ('ok' in c) return refuse(rail.name, session, c.code, c.message, details, c.resetsAt);
    if (!c.committed)
      throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
    committed();
    return { paymentId: p.id, txRef, sba, receipt };
  }

  /**
   * A rail elsewhere pays before the commit: reserved and signed (authorize), `paying` written,
   * the rail paid; an answer that never came is asked of the rail, never guessed.
   */
  async function payBeforeCommit(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string | undefined,
  ): Promise<PaidResult> {
    const a = await authorize(session, terms, host, purpose, rail.name);
    const p: PaymentFields = { id: a.paymentId, ...a, rail: rail.name };
    if (!(await markPaying(db, a.paymentId, JSON.stringify(a.sba), now()))) {
      throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
    }
    const { txRef } = await payOnRail({
      paymentId: p.id,
      amount: p.amount,
      currency: p.currency,
      address: terms.address,
      merchant: host,
    });
    const { receipt } = await commitAnswered(session, p, txRef, a.sba);
    return { paymentId: p.id, txRef, sba: a.sba, receipt };
  }

  /**
   * The rail paid for a payment marked `paying`; an answer that never came is asked of the rail,
   * never guessed. `moved`: what the rail says it paid, when its outcome had to be asked.
   */
  async function payOnRail(order: PaymentOrder): Promise<{ txRef: string; moved?: bigint }> {
    const p = { id: order.paymentId };
    try {
      return { txRef: (await rail.pay(order)).txRef };
    } catch (e) {
      // Paid or not? Ask the rail, which also voids the id if it was not (rail.ts). An outcome
      // that throws answers nothing: the payment may have been made, so it is held as pending
      // (reconcile asks again), never taken as void.
      const found = await rail.outcome(p.id).catch(() => 'pending' as const);
      if (!found) {
        await release(db, p.id, now());
        deps.onRefused?.('rail_failed', rail.name);
        throw new HttpError(
          502,
          'payment_failed',
          `the ${rail.name} rail did not make the payment: ${(e as Error)?.message ?? 'error'}`,
        );
      }
      // Neither paid nor void: the reservation stays for reconcile() to settle.
      if (found === 'pending')
        throw new HttpError(502, 'payment_unconfirmed', `the ${rail.name} rail has not confirmed the payment yet`);
      return { txRef: found.txRef, ...(found.captured !== undefined ? { moved: found.captured } : {}) };
    }
  }

  const rails = new Map<string, Rail>([rail, ...(deps.otherRails ?? [])].map((r) => [r.name, r]));

  return {
    authorize,

    /** The rail this service pays on (the X-Payment protocol's). */
    railName: rail.name,

    /** reserved → paying: from here the payment may happen, so only the rail's answer releases it. */
    async markPaying(a: Authorization): Promise<boolean> {
      return markPaying(db, a.paymentId, JSON.stringify(a.sba), now());
    },

    /**
     * Commits an authorized payment that was paid (`txRef` = `txid:<reference>`) with its signed
     * receipt; with `captured`, an authorized hold captured at that amount (the rest released).
     */
    async complete(
      session: SessionRecord,
      a: Authorization,
      txRef: string,
      receiptRail: string,
      startedAt?: number,
      captured?: bigint,
    ) {
      const r = await commitAnswered(session, { id: a.paymentId, ...a, rail: receiptRail }, txRef, a.sba, captured);
      if (startedAt !== undefined) deps.onPaid?.(performance.now() - startedAt, receiptRail.split(':')[0]!);
      return r;
    },

    /**
     * A hold authorized on this service's rail (the X-Payment protocol's `maxAmount`) captured at
     * `captured` (PROTOCOL.md §15): 0 releases it, nothing paid; above the hold it is released and
     * refused (`capture_exceeds_hold`), nothing paid; else `paying` is written, the rail pays
     * `captured` (idempotent by payment id), and the capture commits with the rest released.
     * Undefined when nothing was captured.
     */
    async capture(
      session: SessionRecord,
      a: Authorization,
      address: string,
      captured: bigint,
    ): Promise<PaidResult | undefined> {
      const started = performance.now();
      if (captured === 0n) {
        await release(db, a.paymentId, now());
        return undefined;
      }
      if (captured > a.amount) {
        await release(db, a.paymentId, now());
        return refuse(
          rail.name,
          session,
          'capture_exceeds_hold',
          `the merchant captured ${captured}, above the hold of ${a.amount}; nothing was paid`,
          { merchant: a.merchant, amountMinor: captured.toString(), currency: a.currency, purpose: a.purpose },
        );
      }
      if (!(await markPaying(db, a.paymentId, JSON.stringify(a.sba), now()))) {
        throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was captured');
      }
      const order = { paymentId: a.paymentId, amount: captured, currency: a.currency, address, merchant: a.merchant };
      const { txRef, moved } = await payOnRail(order);
      const p: PaymentFields = { id: a.paymentId, ...a, rail: rail.name };
      // The rail's own record of what it paid, when it had to be asked, over the merchant's figure
      // (at most the hold: the counters reserved no more).
      const spent = moved === undefined ? captured : moved < a.amount ? moved : a.amount;
      const { receipt } = await commitAnswered(session, p, txRef, a.sba, spent);
      deps.onPaid?.(performance.now() - started, rail.name);
      return { paymentId: a.paymentId, txRef, sba: a.sba, receipt };
    },

    /**
     * A merchant's report of what it settled that the chain contradicts (payments/evm/settled.ts):
     * audited, and the `payment.settlement_mismatch` webhook naming the merchant. What is counted
     * is the chain's (or the whole hold), whatever the report said.
     */
    async settlementMismatch(session: SessionRecord, data: Record<string, unknown> & { merchant: string }) {
      await changeWith(
        db,
        async () => undefined,
        events.effect(() => [{ session, type: 'payment.settlement_mismatch' as const, actor: 'system', data }]),
      );
    },

    /** Gives an authorized payment's reservation back: only when it provably never happened. */
    async abandon(paymentId: string, railName: string, code = 'payment_failed'): Promise<boolean> {
      deps.onRefused?.(code, railName);
      return release(db, paymentId, now());
    },

    /**
     * Pays `terms` for `session` to the merchant at `host`. Throws CtlError with the refusal code
     * (spec §3 third and fourth rows) having paid nothing, or resolves once paid and committed.
     */
    async pay(
      session: SessionRecord,
      terms: PaymentTerms,
      host: string,
      purpose: string | undefined,
    ): Promise<PaidResult> {
      const started = performance.now();
      const paid = rail.local
        ? await payInCommit(session, terms, host, purpose)
        : await payBeforeCommit(session, terms, host, purpose);
      deps.onPaid?.(performance.now() - started, rail.name);
      return paid;
    },

    /** Settles payments left open longer than `staleMs` (reconcile.ts). */
    reconcile(staleMs: number): Promise<{ committed: number; released: number }> {
      return reconcile(
        {
          db,
          now,
          rails,
          commitPaid: async (session, p: PaymentRecord, txRef, sba, captured) =>
            (await commitPaid(session, p, txRef, sba, captured)).committed,
          onReconciled: deps.onReconciled,
          onReconcileError: deps.onReconcileError,
        },
        staleMs,
      );
    },
  };
}

export type PaymentService = ReturnType<typeof createPaymentService>;
