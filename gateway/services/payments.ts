/**
 * One payment, from a merchant's 402 to a signed receipt (spec §3 second row, §4.2 steps 2–3):
 * checks that never change during a session (purpose, merchant globs, currency) in memory, then
 * one atomic reservation in the store (state, expiry, velocity, budget), an SBA signed under
 * the session's internal grant, `paying` written, the rail paid (idempotent by payment id), the
 * receipt signed and committed with the spend. A failure after `paying` is settled with the
 * rail, never guessed: reconcile() does the same for payments a crash left open.
 */
import { randomBytes } from 'node:crypto';
import {
  CtlError,
  createSignedSessionBudgetAuthorization,
  signReceipt,
  formatTimestamp,
  importSigningKey,
  jwkThumbprint,
  parseStrictJson,
  isAmount,
  isCurrency,
  type SigningKey,
} from '../../src/index.js';
import { HttpError, type SqlDatabase } from '../../service-kit/index.js';
import { reserve, markPaying, commit, release, openPayments, touchOpen, payLedgerAndCommit, type PaymentRecord, type CommitResult } from '../store/payments.js';
import { sessionById, type SessionRecord } from '../store/sessions.js';
import type { Rail } from '../rails/rail.js';
import type { KeyRing } from './keys.js';
import type { GatewayEvents } from './events.js';
import { createMerchantMatcher, purposeIsAllowed, MAX_AMOUNT, type SessionConfig } from './session-config.js';
import { continuationToken } from './continuation.js';

export interface PaymentTerms {
  amount: string;
  currency: string;
  address: string;
}

/**
 * The merchant's X-Payment header (spec §2.6): exactly `{ amount, currency, address }`.
 * Anything else is `payment_terms_refused` (PROTOCOL.md §9): the gateway signs nothing it does
 * not fully understand.
 */
export function parsePaymentTerms(header: string | string[] | undefined): PaymentTerms {
  const refuse = (why: string) => new CtlError('payment_terms_refused', `X-Payment: ${why}`);
  if (typeof header !== 'string' || header.length > 4096) throw refuse('missing, repeated or too long');
  let v: unknown;
  try {
    v = parseStrictJson(header);
  } catch {
    throw refuse('not a JSON object');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw refuse('not a JSON object');
  const t = v as Record<string, unknown>;
  for (const k of Object.keys(t)) if (!['amount', 'currency', 'address'].includes(k)) throw refuse(`unknown field '${k}'`);
  if (!isAmount(t.amount) || t.amount === '0') throw refuse('amount must be a positive decimal string of minor units');
  if (BigInt(t.amount) > MAX_AMOUNT) throw refuse('amount is too large');
  if (!isCurrency(t.currency)) throw refuse('currency must be a currency code');
  if (typeof t.address !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(t.address)) throw refuse('address must be printable ASCII, 1–256 characters');
  return { amount: t.amount, currency: t.currency, address: t.address };
}

export interface PaymentServiceDeps {
  db: SqlDatabase;
  rail: Rail;
  /** Other rails whose payments reconcile() settles, by name (issue 6: the x402 rail). */
  otherRails?: Rail[];
  keys: KeyRing;
  events: GatewayEvents;
  continuationSecret: Buffer;
  issuer: string;
  now: () => number;
  /** Counts for /metrics. */
  onPaid?: (ms: number) => void;
  onRefused?: (code: string) => void;
  /** A payment reconcile could not settle this pass (logged; the pass goes on). */
  onReconcileError?: (paymentId: string, error: unknown) => void;
}

/** A payment reserved and signed for, not yet paid (issue 6: the x402 rail pays it on the merchant's retry). */
export interface Authorization {
  paymentId: string;
  sba: Record<string, unknown>;
  amount: bigint;
  currency: string;
  merchant: string;
  purpose: string;
}

export interface PaidResult {
  paymentId: string;
  txRef: string;
  sba: Record<string, unknown>;
  receipt: Record<string, unknown>;
}

const SBA_LIFETIME_MS = 5 * 60_000;
/** Reconcile reads open payments 200 at a time, up to 10 000 a pass (the rest rotate to later passes). */
const RECONCILE_PAGE = 200;
const RECONCILE_MAX_PAGES = 50;

export function createPaymentService(deps: PaymentServiceDeps) {
  const { db, rail, keys, events, now } = deps;
  const actorKeys = new Map<string, Promise<{ key: SigningKey; kid: string }>>();
  const matchers = new Map<string, (host: string) => boolean>();

  function actorKey(session: SessionRecord) {
    let k = actorKeys.get(session.id);
    if (!k) {
      if (actorKeys.size > 10_000) actorKeys.clear(); // bounded: re-imported on demand
      k = importSigningKey(session.actorKeyPem).then(async (key) => ({ key, kid: await jwkThumbprint(key.publicJwk) }));
      actorKeys.set(session.id, k);
    }
    return k;
  }

  function merchantAllowed(session: SessionRecord, host: string): boolean {
    let m = matchers.get(session.id);
    if (!m) {
      if (matchers.size > 10_000) matchers.clear();
      m = createMerchantMatcher(session.config as unknown as SessionConfig);
      matchers.set(session.id, m);
    }
    return m(host);
  }

  function refuse(session: SessionRecord, code: CtlError['code'], message: string, details: Record<string, unknown>): never {
    deps.onRefused?.(code);
    events.emit(session, 'payment.denied', { code, message, ...details });
    throw new CtlError(code, message);
  }

  type Paid = { id: string; amount: bigint; currency: string; merchant: string; purpose: string; rail: string };

  async function signReceiptFor(session: SessionRecord, p: Paid, txRef: string, paidAt: number, sba: Record<string, unknown> | undefined) {
    const receiptId = `rcpt_${randomBytes(16).toString('base64url')}`;
    const rk = await keys.active('receipt');
    const fields: Record<string, unknown> = {
      receiptId,
      sessionId: session.id,
      grantId: session.grantId,
      purpose: p.purpose,
      amount: { amountMinor: p.amount.toString(), currency: p.currency },
      merchant: p.merchant,
      paidAt: formatTimestamp(paidAt),
      txRef,
      rail: p.rail,
    };
    if (sba) fields.sba = sba;
    const receipt = (await signReceipt(fields as any, { signingKey: rk.signingKey, keyId: rk.kid })) as unknown as Record<string, unknown>;
    return { receiptId, receipt };
  }

  /** Events of a committed payment (spec §6); only the caller whose commit changed the books emits. */
  function afterCommit(session: SessionRecord, p: Paid, receiptId: string, txRef: string, c: CommitResult) {
    if (!c.committed) return;
    events.emit(session, 'payment.completed', {
      paymentId: p.id, receiptId, amountMinor: p.amount.toString(), currency: p.currency, merchant: p.merchant, purpose: p.purpose, txRef,
    });
    for (const pct of session.thresholds) {
      const mark = (c.ceiling * BigInt(pct)) / 100n;
      if (c.spentBefore < mark && c.spentAfter >= mark) {
        events.emit(session, 'session.threshold_crossed', { threshold: pct, spentMinor: c.spentAfter.toString(), ceilingMinor: c.ceiling.toString() });
      }
    }
  }

  /** Commit + receipt for a payment the rail has made; safe to call from any path, commits once. */
  async function settlePaid(session: SessionRecord, p: PaymentRecord | Paid, txRef: string, sba: Record<string, unknown> | undefined) {
    const paidAt = now();
    const { receiptId, receipt } = await signReceiptFor(session, p, txRef, paidAt, sba);
    const c = await commit(db, { paymentId: p.id, sessionId: session.id, amount: p.amount, txRef, receiptId, receipt: JSON.stringify(receipt), paidAt });
    afterCommit(session, p, receiptId, txRef, c);
    return { committed: c.committed, receipt };
  }

  /** The ledger rail in this database: pay and commit as one change (store/payments.ts). */
  const localLedger = (rail as { local?: boolean }).local === true;

  /**
   * Everything before money moves (spec §3 rows 2–4): the session's fixed checks in memory, one
   * atomic reservation in the store, then the SBA. Throws CtlError with the refusal code having
   * reserved nothing; on success the amount is reserved under the returned payment id.
   */
  async function authorize(session: SessionRecord, terms: PaymentTerms, host: string, purpose: string | undefined, railName: string): Promise<Authorization> {
    const amount = BigInt(terms.amount);
    const details = { merchant: host, amountMinor: terms.amount, currency: terms.currency, purpose: purpose ?? null };
    if (!purpose || !purposeIsAllowed(purpose, session.config.purposes as string[])) {
      refuse(session, 'purpose_not_allowed', purpose ? `the purpose '${purpose}' is not allowed for this session` : 'X-Ctl-Purpose is required for a paid request', details);
    }
    if (!merchantAllowed(session, host)) refuse(session, 'destination_not_allowed', `the merchant '${host}' is not allowed for this session`, details);
    if (terms.currency !== session.currency) refuse(session, 'currency_mismatch', `the merchant asks for ${terms.currency}; the session budget is in ${session.currency}`, details);

    const paymentId = `pay_${randomBytes(16).toString('base64url')}`;
    const r = await reserve(db, {
      paymentId, sessionId: session.id, amount, currency: terms.currency, merchant: host, address: terms.address, purpose, rail: railName, now: now(),
      velocity: session.maxPerHour !== null || session.maxPerMerchantDay !== null,
    });
    if (!r.ok) {
      if (r.code === 'session_paused' && r.pausedNow) {
        const s = await sessionById(db, session.id);
        events.emit(session, 'session.paused', {
          spentMinor: s?.spent.toString(), ceilingMinor: s?.ceiling.toString(),
          continuationToken: s?.continuationNonce ? continuationToken(deps.continuationSecret, session.id, s.continuationNonce) : undefined,
        });
      }
      refuse(session, r.code, r.message, details);
    }

    // Signed only now: the reservation above re-read the revocation state (spec §3 rule 1).
    let sba: Record<string, unknown>;
    try {
      const ak = await actorKey(session);
      sba = (await createSignedSessionBudgetAuthorization(
        {
          grant: session.grant as any,
          sessionId: session.id,
          actorId: `gateway:${session.id}`,
          maxAmountMinor: terms.amount,
          budgetScope: 'SESSION',
          budgetId: paymentId,
          expiresAt: formatTimestamp(Math.min(session.expiresAt, now() + SBA_LIFETIME_MS)),
          rail: railName,
          merchantId: host,
          purpose,
          issuer: session.grant.issuer as string,
        },
        { signingKey: ak.key, keyId: ak.kid, now },
      )) as unknown as Record<string, unknown>;
    } catch (e) {
      await release(db, paymentId, now());
      throw e;
    }
    return { paymentId, sba, amount, currency: terms.currency, merchant: host, purpose };
  }

  const railsByName = new Map<string, Rail>([rail, ...(deps.otherRails ?? [])].map((r) => [r.name, r]));

  return {
    authorize,

    /** reserved → paying: from here the payment may happen, so only the rail's answer releases it. */
    async markPaying(a: Authorization): Promise<boolean> {
      return markPaying(db, a.paymentId, JSON.stringify(a.sba), now());
    },

    /** Commits an authorized payment that was paid (`txRef` = `txid:<reference>`) with its signed receipt. */
    async complete(session: SessionRecord, a: Authorization, txRef: string, receiptRail: string, startedAt?: number) {
      const r = await settlePaid(session, { id: a.paymentId, amount: a.amount, currency: a.currency, merchant: a.merchant, purpose: a.purpose, rail: receiptRail }, txRef, a.sba);
      if (startedAt !== undefined) deps.onPaid?.(performance.now() - startedAt);
      return r;
    },

    /** Gives an authorized payment's reservation back: only when it provably never happened. */
    async abandon(paymentId: string, code = 'payment_failed'): Promise<boolean> {
      deps.onRefused?.(code);
      return release(db, paymentId, now());
    },

    /**
     * Pays `terms` for `session` to the merchant at `host`. Throws CtlError with the refusal code
     * (spec §3 third and fourth rows) having paid nothing, or resolves once paid and committed.
     */
    async pay(session: SessionRecord, terms: PaymentTerms, host: string, purpose: string | undefined): Promise<PaidResult> {
      const started = performance.now();
      const { paymentId, sba, amount } = await authorize(session, terms, host, purpose, rail.name);
      const paid: Paid = { id: paymentId, amount, currency: terms.currency, merchant: host, purpose: purpose!, rail: rail.name };
      if (localLedger) {
        const txRef = `txid:${randomBytes(16).toString('base64url')}`;
        const paidAt = now();
        const { receiptId, receipt } = await signReceiptFor(session, paid, txRef, paidAt, sba);
        const c = await payLedgerAndCommit(db, {
          paymentId, sessionId: session.id, amount, currency: terms.currency, address: terms.address, txRef, receiptId, receipt: JSON.stringify(receipt), paidAt,
        });
        if (!c.committed) throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
        afterCommit(session, paid, receiptId, txRef, c);
        deps.onPaid?.(performance.now() - started);
        return { paymentId, txRef, sba, receipt };
      }
      if (!(await markPaying(db, paymentId, JSON.stringify(sba), now()))) {
        throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
      }

      let txRef: string;
      try {
        txRef = (await rail.pay({ paymentId, amount, currency: terms.currency, address: terms.address, merchant: host })).txRef;
      } catch (e) {
        // Paid or not? Ask the rail, which also voids the id if it was not (rail.ts). A settle
        // that throws answers nothing: the payment may have been made, so it is held as pending
        // (reconcile asks again), never taken as void.
        const found = await rail.settle(paymentId).catch(() => 'pending' as const);
        if (!found) {
          await release(db, paymentId, now());
          deps.onRefused?.('rail_failed');
          throw new HttpError(502, 'payment_failed', `the ${rail.name} rail did not make the payment: ${(e as Error)?.message ?? 'error'}`);
        }
        // Neither paid nor void: the reservation stays for reconcile() to settle.
        if (found === 'pending') throw new HttpError(502, 'payment_unconfirmed', `the ${rail.name} rail has not confirmed the payment yet`);
        txRef = found.txRef;
      }
      const { receipt } = await settlePaid(session, paid, txRef, sba);
      deps.onPaid?.(performance.now() - started);
      return { paymentId, txRef, sba, receipt };
    },

    /**
     * Settles payments left open longer than `staleMs` (a crash between reserve and commit):
     * `reserved` never reached the rail and is released (only while still `reserved`); `paying`
     * is settled with the rail, committed with its receipt when it was paid, released (and voided
     * at the rail) when not. Every open row is visited, a page at a time; one still pending goes
     * to the back of the queue, and one whose rail throws is logged and left for the next pass.
     */
    async reconcile(staleMs: number): Promise<{ committed: number; released: number }> {
      let committed = 0;
      let released = 0;
      const before = now() - staleMs;
      let after: { updatedAt: number; id: string } | undefined;
      for (let page = 0; page < RECONCILE_MAX_PAGES; page++) {
        const open = await openPayments(db, before, RECONCILE_PAGE, after);
        for (const p of open) {
          try {
            const r = await reconcileOne(p);
            if (r === 'committed') committed++;
            else if (r === 'released') released++;
          } catch (e) {
            deps.onReconcileError?.(p.id, e);
          }
        }
        if (open.length < RECONCILE_PAGE) break;
        const last = open[open.length - 1]!;
        after = { updatedAt: last.updatedAt, id: last.id };
      }
      return { committed, released };
    },
  };

  async function reconcileOne(p: PaymentRecord): Promise<'committed' | 'released' | undefined> {
    const rail = railsByName.get(p.rail);
    if (!rail) return undefined; // a rail this instance does not run: left to one that does
    if (p.state === 'reserved') {
      // Nothing reaches a rail before `paying` is written, and markPaying is itself conditional
      // on `reserved`: a release conditional on `reserved` and markPaying cannot both win. If
      // another instance marked it `paying` meanwhile, the release does nothing and that
      // instance settles it (or a later pass, once it is stale).
      return (await release(db, p.id, now(), ['reserved'])) ? 'released' : undefined;
    }
    const found = await rail.settle(p.id);
    // Still cashable and not yet seen paid (a signed x402 authorization before its expiry): keep it reserved.
    if (found === 'pending') {
      await touchOpen(db, p.id, now());
      return undefined;
    }
    const session = await sessionById(db, p.sessionId);
    if (!session) return undefined;
    if (found) {
      const r = await settlePaid(session, { ...p, rail: found.rail ?? p.rail }, found.txRef, p.sba ? JSON.parse(p.sba) : undefined);
      return r.committed ? 'committed' : undefined;
    }
    return (await release(db, p.id, now())) ? 'released' : undefined;
  }
}

export type PaymentService = ReturnType<typeof createPaymentService>;
