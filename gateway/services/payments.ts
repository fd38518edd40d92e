/**
 * One payment, from a merchant's 402 to a signed receipt (spec §3 second row, §4.2 steps 2–3):
 * checks that never change during a session (purpose, merchant globs, currency) in memory, then
 * one atomic reservation in the store (state, expiry, velocity, budget), an SBA signed under
 * the session's internal grant, `paying` written, the rail paid (idempotent by payment id), the
 * receipt signed and committed with the spend. A failure after `paying` is settled with the
 * rail, never guessed: reconcile() does the same for payments a crash left open.
 */
import { createHash } from 'node:crypto';
import { CtlError, formatTimestamp, parseStrictJson, isAmount, isCurrency } from '../../src/index.js';
// Prepared signing, as a signing service imports it (ctl/wallet): the grant checked and canonicalised once per session.
import { createSbaSigner, type SbaSigner } from '../../src/entries/wallet.js';
// A receipt per payment, each embedding an SBA over the signer's frozen grant: that grant checked
// and canonicalised once (kept out of the `ctl` barrel's size budget, so imported from its module).
import { signReceiptPrepared } from '../../src/entries/server.js';
import { HttpError, idleCache, timeOrderedId, type SqlDatabase } from '../../service-kit/index.js';
import {
  reserve,
  markPaying,
  commit,
  release,
  openPayments,
  touchOpen,
  payLedgerAndCommit,
  reserveAndPayLedger,
  type PaymentRecord,
  type CommitResult,
  type CommitRecord,
  type ReceiptRow,
} from '../store/payments.js';
import { sessionById, type SessionRecord } from '../store/sessions.js';
import type { Rail } from '../rails/rail.js';
import type { KeyRing } from './keys.js';
import type { SessionKeys } from './session-keys.js';
import type { GatewayEvents } from './events.js';
import { createMerchantMatcher, purposeIsAllowed, MAX_AMOUNT, type SessionConfig } from './session-config.js';
import { continuationToken } from './continuation.js';
import { humanChainRefusal, type HumanTrust } from './human-sessions.js';

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
  for (const k of Object.keys(t))
    if (!['amount', 'currency', 'address'].includes(k)) throw refuse(`unknown field '${k}'`);
  if (!isAmount(t.amount) || t.amount === '0') throw refuse('amount must be a positive decimal string of minor units');
  if (BigInt(t.amount) > MAX_AMOUNT) throw refuse('amount is too large');
  if (!isCurrency(t.currency)) throw refuse('currency must be a currency code');
  if (typeof t.address !== 'string' || !/^[\x21-\x7e]{1,256}$/.test(t.address))
    throw refuse('address must be printable ASCII, 1–256 characters');
  return { amount: t.amount, currency: t.currency, address: t.address };
}

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
  /** Counts for /metrics. */
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

/**
 * A session's SBA signer, and the grant every SBA it signs embeds as its receipts store it: apart,
 * once (store/payments.ts ReceiptRow), its canonical text and that text's SHA-256 the key.
 * `stored` turns true once a change that wrote it has committed; until then each receipt's change
 * writes it again (which changes nothing once one has).
 */
interface SessionSigning {
  signer: SbaSigner;
  grant: { hash: string; text: string; stored: boolean };
}

export function createPaymentService(deps: PaymentServiceDeps) {
  const { db, rail, keys, events, now } = deps;
  // Per session, bounded by the sessions in use (service-kit/idle-cache.ts): made again on demand.
  const prepared = idleCache<string, Promise<SessionSigning>>();
  const matchers = idleCache<string, (host: string) => boolean>();

  /** The key of a session's signing: its id and its grant's signature (sbaSigning). */
  const signingKey = (session: SessionRecord) => `${session.id} ${session.grant.signature as string}`;

  /**
   * What signing an SBA under the session's grant computes once (the grant checked and
   * canonicalised, the actor key imported and matched to it), cached by session id and the
   * grant's signature: a grant minted anew (a continued session's raised ceiling) is another key,
   * so no SBA is ever signed over stale grant bytes. Every SBA it signs embeds the signer's own
   * deep-frozen copy of the grant, which `signReceiptPrepared` therefore checks and canonicalises
   * once for all the receipts that embed these SBAs.
   */
  function sbaSigning(session: SessionRecord): Promise<SessionSigning> {
    const id = signingKey(session);
    let p = prepared.get(id);
    if (!p) {
      p = deps.sessionKeys.signingKey(session).then(async (ak) => {
        const signer = await createSbaSigner(session.grant as any, { signingKey: ak.key, keyId: ak.kid, now });
        const text = signer.grantJcs;
        return { signer, grant: { hash: createHash('sha256').update(text).digest('base64url'), text, stored: false } };
      });
      p.catch(() => prepared.delete(id));
      prepared.set(id, p);
    }
    return p;
  }

  /**
   * How `receipt` is stored: without its SBA's grant when that grant is the session signer's own
   * frozen copy (so exactly the text kept), whole otherwise (an SBA read back by reconcile).
   */
  async function receiptRow(
    session: SessionRecord,
    receiptId: string,
    paidAt: number,
    paymentId: string,
    receipt: Record<string, unknown>,
  ): Promise<{ row: ReceiptRow; committed: () => void }> {
    const sba = receipt.sba as Record<string, unknown> | undefined;
    const kept = sba && prepared.get(signingKey(session));
    const signing = kept ? await kept.catch(() => undefined) : undefined;
    if (!signing || sba!.grant !== signing.signer.grant)
      return { row: { receiptId, paymentId, paidAt, receipt: JSON.stringify(receipt) }, committed: () => {} };
    const { grant: _kept, ...sbaWithoutGrant } = sba!;
    const g = signing.grant;
    const grant = { hash: g.hash, text: g.stored ? undefined : g.text };
    return {
      row: { receiptId, paymentId, paidAt, receipt: JSON.stringify({ ...receipt, sba: sbaWithoutGrant }), grant },
      committed: () => {
        g.stored = true;
      },
    };
  }

  function merchantAllowed(session: SessionRecord, host: string): boolean {
    let m = matchers.get(session.id);
    if (!m) {
      m = createMerchantMatcher(session.config as unknown as SessionConfig);
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
  ): Promise<never> {
    deps.onRefused?.(code, railName);
    await events.emit(session, 'payment.denied', { code, message, ...details });
    throw new CtlError(code, message);
  }

  type Paid = { id: string; amount: bigint; currency: string; merchant: string; purpose: string; rail: string };

  async function signReceiptFor(
    session: SessionRecord,
    p: Paid,
    txRef: string,
    paidAt: number,
    sba: Record<string, unknown> | undefined,
  ) {
    const receiptId = `rcpt_${timeOrderedId()}`;
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
    // An SBA this process just signed embeds its signer's frozen grant, checked and canonicalised
    // once for all its receipts; one read back from the database (reconcile), whole every time.
    if (sba) fields.sba = sba;
    const receipt = (await signReceiptPrepared(fields as any, {
      signingKey: rk.signingKey,
      keyId: rk.kid,
    })) as unknown as Record<string, unknown>;
    const { row, committed } = await receiptRow(session, receiptId, paidAt, p.id, receipt);
    return { receiptId, receipt, row, committed };
  }

  /**
   * How a commit records its events (spec §6), in its own transaction; only the caller whose
   * commit changed the books records them. On PostgreSQL, for a session without thresholds
   * (the event rows are all known beforehand), the rows ride in the commit statement itself;
   * otherwise `first` (payment.completed) is written before the session row is locked and rolled
   * back with a commit that did not happen, and `effect` (thresholds crossed, known only from the
   * new total) after. `after` runs once committed.
   */
  function committedEvents(
    session: SessionRecord,
    p: Paid,
    receiptId: string,
    txRef: string,
  ): { record: CommitRecord; after: () => void } {
    const completed = [
      {
        session,
        type: 'payment.completed' as const,
        actor: 'agent',
        data: {
          paymentId: p.id,
          receiptId,
          amountMinor: p.amount.toString(),
          currency: p.currency,
          merchant: p.merchant,
          purpose: p.purpose,
          txRef,
        },
      },
    ];
    if (db.dialect === 'postgres' && session.thresholds.length === 0) {
      const { rows, after } = events.rows(completed);
      return { record: { rows }, after };
    }
    const first = events.effect(() => completed);
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
    return { record: { first, effect }, after: () => {} };
  }

  /** Commit + receipt for a payment the rail has made; safe to call from any path, commits once. */
  async function settlePaid(
    session: SessionRecord,
    p: PaymentRecord | Paid,
    txRef: string,
    sba: Record<string, unknown> | undefined,
  ) {
    const paidAt = now();
    const { receiptId, receipt, row, committed } = await signReceiptFor(session, p, txRef, paidAt, sba);
    const recorded = committedEvents(session, p, receiptId, txRef);
    const c = await commit(db, { ...row, sessionId: session.id, amount: p.amount, txRef }, recorded.record);
    if (c.committed) {
      committed();
      recorded.after();
    }
    return { committed: c.committed, receipt };
  }

  /** The ledger rail in this database: pay and commit as one change (store/payments.ts). */
  const localLedger = (rail as { local?: boolean }).local === true;

  /** The session's checks that never change while it lives (spec §3 row 3), in memory. */
  async function checkFixed(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string | undefined,
    railName: string,
    details: Record<string, unknown>,
  ) {
    if (!purpose || !purposeIsAllowed(purpose, session.config.purposes as string[])) {
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
  }

  const detailsOf = (terms: PaymentTerms, host: string, purpose: string | undefined) => ({
    merchant: host,
    amountMinor: terms.amount,
    currency: terms.currency,
    purpose: purpose ?? null,
  });

  /**
   * The SBA of one payment, signed under the session's internal grant with its actor key. A
   * session whose `expiresAt` passed since its state was read (spec §3 last row) is
   * `session_expired`: the SBA could not outlive it.
   */
  async function signSba(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string,
    paymentId: string,
    railName: string,
  ) {
    const t = now();
    if (session.expiresAt <= t)
      throw new CtlError('session_expired', 'the session expired before the payment could be signed; nothing was paid');
    return (await (
      await sbaSigning(session)
    ).signer.sign({
      sessionId: session.id,
      actorId: `gateway:${session.id}`,
      maxAmountMinor: terms.amount,
      budgetScope: 'SESSION',
      budgetId: paymentId,
      expiresAt: formatTimestamp(Math.min(session.expiresAt, t + SBA_LIFETIME_MS)),
      rail: railName,
      merchantId: host,
      purpose,
      issuer: session.grant.issuer as string,
    })) as unknown as Record<string, unknown>;
  }

  /** Under a person's grant, nothing is paid that a merchant would refuse (PROTOCOL.md §10). */
  function personRefusal(
    session: SessionRecord,
    sba: Record<string, unknown>,
    terms: PaymentTerms,
    host: string,
    purpose: string,
    railName: string,
  ) {
    return humanChainRefusal(
      session,
      sba,
      { amount: terms.amount, currency: terms.currency, merchantId: host, rail: railName, purpose },
      now,
      deps.humans,
    );
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
    const amount = BigInt(terms.amount);
    const details = detailsOf(terms, host, purpose);
    await checkFixed(session, terms, host, purpose, railName, details);

    const paymentId = deps.paymentId?.() ?? `pay_${timeOrderedId()}`;
    const r = await reserve(
      db,
      {
        paymentId,
        sessionId: session.id,
        amount,
        currency: terms.currency,
        merchant: host,
        address: terms.address,
        purpose: purpose!,
        rail: railName,
        now: now(),
        velocity: session.maxPerHour !== null || session.maxPerMerchantDay !== null,
      },
      events.effect(async (_: void, q) => {
        // Recorded in the transaction that paused the session, from the row it wrote.
        const s = await sessionById(q, session.id);
        return [
          {
            session,
            type: 'session.paused',
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
      }),
    );
    if (!r.ok) await refuse(railName, session, r.code, r.message, details);

    // Signed only now: the reservation above re-read the revocation state (spec §3 rule 1).
    let sba: Record<string, unknown>;
    try {
      sba = await signSba(session, terms, host, purpose!, paymentId, railName);
    } catch (e) {
      await release(db, paymentId, now());
      throw e;
    }
    const denied = await personRefusal(session, sba, terms, host, purpose!, railName);
    if (denied) {
      await release(db, paymentId, now());
      await refuse(
        railName,
        session,
        denied.code,
        `the person's grant refuses this payment: ${denied.message}`,
        details,
      );
    }
    return { paymentId, sba, amount, currency: terms.currency, merchant: host, purpose: purpose! };
  }

  /**
   * The ledger rail in this database, for a session without velocity limits: SBA and receipt
   * signed first, then reservation, payment, spend and receipt as one change (store/payments.ts
   * reserveAndPayLedger), whose guard re-reads the revocation state, expiry and budget. The
   * revocation state was also read from the database for this request (routes/proxy.ts) before
   * the SBA was signed (spec §3 rule 1); a revocation committed after that read makes the guard
   * refuse, and the SBA and receipt signed for it are dropped unseen. Undefined when the guard
   * refused: nothing was written, and the reservation path says why.
   */
  async function payLedgerInOneChange(
    session: SessionRecord,
    terms: PaymentTerms,
    host: string,
    purpose: string | undefined,
  ): Promise<PaidResult | undefined> {
    const details = detailsOf(terms, host, purpose);
    await checkFixed(session, terms, host, purpose, rail.name, details);
    const paymentId = deps.paymentId?.() ?? `pay_${timeOrderedId()}`;
    const sba = await signSba(session, terms, host, purpose!, paymentId, rail.name);
    const denied = await personRefusal(session, sba, terms, host, purpose!, rail.name);
    if (denied)
      await refuse(
        rail.name,
        session,
        denied.code,
        `the person's grant refuses this payment: ${denied.message}`,
        details,
      );
    const amount = BigInt(terms.amount);
    const paid: Paid = {
      id: paymentId,
      amount,
      currency: terms.currency,
      merchant: host,
      purpose: purpose!,
      rail: rail.name,
    };
    const txRef = `txid:${timeOrderedId()}`;
    const paidAt = now();
    const { receiptId, receipt, row, committed } = await signReceiptFor(session, paid, txRef, paidAt, sba);
    const recorded = committedEvents(session, paid, receiptId, txRef);
    const c = await reserveAndPayLedger(
      db,
      {
        ...row,
        sessionId: session.id,
        amount,
        currency: terms.currency,
        merchant: host,
        address: terms.address,
        purpose: purpose!,
        rail: rail.name,
        now: paidAt,
        txRef,
      },
      recorded.record,
    );
    if (!c.committed) return undefined;
    committed();
    recorded.after();
    return { paymentId, txRef, sba, receipt };
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
      const r = await settlePaid(
        session,
        {
          id: a.paymentId,
          amount: a.amount,
          currency: a.currency,
          merchant: a.merchant,
          purpose: a.purpose,
          rail: receiptRail,
        },
        txRef,
        a.sba,
      );
      if (startedAt !== undefined) deps.onPaid?.(performance.now() - startedAt, receiptRail.split(':')[0]!);
      return r;
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
      if (localLedger && session.maxPerHour === null && session.maxPerMerchantDay === null) {
        const once = await payLedgerInOneChange(session, terms, host, purpose);
        if (once) {
          deps.onPaid?.(performance.now() - started, rail.name);
          return once;
        }
        // Refused by the guard: the reservation below says why (pausing at a soft ceiling), or
        // pays after all when a reservation was given back meanwhile.
      }
      const { paymentId, sba, amount } = await authorize(session, terms, host, purpose, rail.name);
      const paid: Paid = {
        id: paymentId,
        amount,
        currency: terms.currency,
        merchant: host,
        purpose: purpose!,
        rail: rail.name,
      };
      if (localLedger) {
        const txRef = `txid:${timeOrderedId()}`;
        const paidAt = now();
        const { receiptId, receipt, row, committed } = await signReceiptFor(session, paid, txRef, paidAt, sba);
        const recorded = committedEvents(session, paid, receiptId, txRef);
        const c = await payLedgerAndCommit(
          db,
          {
            ...row,
            sessionId: session.id,
            amount,
            currency: terms.currency,
            address: terms.address,
            txRef,
          },
          recorded.record,
        );
        if (c.committed) {
          committed();
          recorded.after();
        }
        if (!c.committed)
          throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
        deps.onPaid?.(performance.now() - started, rail.name);
        return { paymentId, txRef, sba, receipt };
      }
      if (!(await markPaying(db, paymentId, JSON.stringify(sba), now()))) {
        throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');
      }

      let txRef: string;
      try {
        txRef = (
          await rail.pay({ paymentId, amount, currency: terms.currency, address: terms.address, merchant: host })
        ).txRef;
      } catch (e) {
        // Paid or not? Ask the rail, which also voids the id if it was not (rail.ts). A settle
        // that throws answers nothing: the payment may have been made, so it is held as pending
        // (reconcile asks again), never taken as void.
        const found = await rail.settle(paymentId).catch(() => 'pending' as const);
        if (!found) {
          await release(db, paymentId, now());
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
        txRef = found.txRef;
      }
      const { receipt } = await settlePaid(session, paid, txRef, sba);
      deps.onPaid?.(performance.now() - started, rail.name);
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
      deps.onReconciled?.({ committed, released });
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
      const r = await settlePaid(
        session,
        { ...p, rail: found.rail ?? p.rail },
        found.txRef,
        p.sba ? JSON.parse(p.sba) : undefined,
      );
      return r.committed ? 'committed' : undefined;
    }
    return (await release(db, p.id, now())) ? 'released' : undefined;
  }
}

export type PaymentService = ReturnType<typeof createPaymentService>;
