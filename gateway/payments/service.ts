/**
 * The payment service: what a paid exchange (exchange.ts) asks of the books, for one payment
 * from a merchant's 402 to a signed receipt (spec §3 second row, §4.2 steps 2–3). Its parts, each
 * its own module: the checks, the reservation and the SBA (authorize.ts); the commit with its
 * receipt (commit.ts) and events (commit-records.ts); paying on the gateway's own rail
 * (own-rail.ts); settling what a crash left open (reconcile.ts).
 */
import type { SignedBudgetAuthorization, Receipt } from '../../src/index.js';
import { changeWith, type SqlDatabase } from '../../service-kit/index.js';
import { markPaying, release, type PaymentRecord } from './store/payments.js';
import type { SessionRecord } from '../sessions/store.js';
import type { Rail } from './rail.js';
import type { PaymentTerms } from './schemes/x-payment/terms.js';
import { createPaymentSigning, type PaymentFields } from './signing.js';
import { reconcile } from './reconcile.js';
import type { KeyRing } from '../keys/ring.js';
import type { SessionKeys } from '../sessions/actor-keys.js';
import type { GatewayEvents } from '../sessions/events.js';
import type { HumanTrust } from '../sessions/human.js';
import { createChainWindows } from './windows.js';
import { createCommitRecords } from './commit-records.js';
import { createAuthorizer } from './authorize.js';
import { createCommits } from './commit.js';
import { createOwnRail } from './own-rail.js';

export interface PaymentServiceDeps {
  db: SqlDatabase;
  rail: Rail;
  /** Other rails whose payments reconcile() settles, by name (the x402 rail). */
  otherRails?: Rail[];
  keys: KeyRing;
  /** Each session's actor key (derived, sessions/actor-keys.ts). */
  sessionKeys: SessionKeys;
  events: GatewayEvents;
  continuationSecret: Buffer;
  issuer: string;
  now: () => number;
  /**
   * The id the payment of the running request must carry, when it has one (an Idempotency-Key's,
   * idempotency/service.ts): the payment table's primary key then refuses a second reservation.
   */
  paymentId?: () => string | undefined;
  /** Where people's grants come from and how their authority is reached (sessions/human.ts). */
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

/** A payment reserved and signed for, not yet paid (the merchant cashes what is signed under it, exchange.ts). */
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

export function createPaymentService(deps: PaymentServiceDeps) {
  const { db, rail, events, now } = deps;
  const signing = createPaymentSigning(deps);
  const windows = createChainWindows(db);
  const records = createCommitRecords(events, deps.continuationSecret);
  const authorizer = createAuthorizer({ ...deps, signing, records, windows });
  const commits = createCommits({ db, signing, records, windows, now });
  const own = createOwnRail({
    db,
    rail,
    now,
    authorizer,
    signing,
    records,
    windows,
    commits,
    onRefused: deps.onRefused,
  });
  const rails = new Map<string, Rail>([rail, ...(deps.otherRails ?? [])].map((r) => [r.name, r]));
  const fields = (a: Authorization, railName: string): PaymentFields => ({
    id: a.paymentId,
    amount: a.amount,
    currency: a.currency,
    merchant: a.merchant,
    purpose: a.purpose,
    rail: railName,
  });

  return {
    /**
     * Everything before money moves (authorize.ts): throws CtlError with the refusal code having
     * reserved nothing; on success the amount is reserved under the returned payment id.
     */
    async authorize(
      session: SessionRecord,
      terms: PaymentTerms,
      host: string,
      purpose: string | undefined,
      railName: string,
    ): Promise<Authorization> {
      const { p, sba } = await authorizer.authorize({ session, terms, host, purpose, rail: railName });
      return { paymentId: p.id, sba, amount: p.amount, currency: p.currency, merchant: host, purpose: p.purpose };
    },

    /** The rail this service pays on (the X-Payment scheme's). */
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
      const r = await commits.commitAnswered(session, fields(a, receiptRail), txRef, a.sba, captured);
      if (startedAt !== undefined) deps.onPaid?.(performance.now() - startedAt, receiptRail.split(':')[0]!);
      return r;
    },

    /**
     * A hold authorized on this service's rail (the X-Payment scheme's `maxAmount`) captured at
     * `captured` (PROTOCOL.md §15): 0 releases it, nothing paid; above the hold it is released and
     * refused (`capture_exceeds_hold`), nothing paid; else the rail pays `captured` and the capture
     * commits with the rest released (own-rail.ts). Undefined when nothing was captured.
     */
    async capture(
      session: SessionRecord,
      a: Authorization,
      address: string,
      captured: bigint,
    ): Promise<PaidResult | undefined> {
      const started = performance.now();
      if (captured === 0n || captured > a.amount) await release(db, a.paymentId, now());
      if (captured === 0n) return undefined;
      if (captured > a.amount)
        return authorizer.refuse(
          rail.name,
          session,
          'capture_exceeds_hold',
          `the merchant captured ${captured}, above the hold of ${a.amount}; nothing was paid`,
          { merchant: a.merchant, amountMinor: captured.toString(), currency: a.currency, purpose: a.purpose },
        );
      const paid = await own.capture(session, fields(a, rail.name), a.sba, address, captured);
      deps.onPaid?.(performance.now() - started, rail.name);
      return paid;
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
     * Pays `terms` for `session` to the merchant at `host` on this service's rail. Throws CtlError
     * with the refusal code (spec §3 third and fourth rows) having paid nothing, or resolves once
     * paid and committed.
     */
    async pay(
      session: SessionRecord,
      terms: PaymentTerms,
      host: string,
      purpose: string | undefined,
    ): Promise<PaidResult> {
      const started = performance.now();
      const r = { session, terms, host, purpose, rail: rail.name };
      const paid = rail.local ? await own.payInCommit(r) : await own.payBeforeCommit(r);
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
            (await commits.commitPaid(session, p, txRef, sba, captured)).committed,
          onReconciled: deps.onReconciled,
          onReconcileError: deps.onReconcileError,
        },
        staleMs,
      );
    },
  };
}

export type PaymentService = ReturnType<typeof createPaymentService>;
