/**
 * Paying on the gateway's own rail (the X-Payment scheme's; spec §4.2 steps 2–3). Two ways: a rail
 * in this database (the ledger) pays in the change that commits; a rail elsewhere pays before the
 * commit, `paying` written first, and a failure after it is settled with the rail, never guessed.
 * A hold (PROTOCOL.md §15) is captured on the rail the same way.
 */
import type { SignedBudgetAuthorization } from '../../src/index.js';
import { HttpError, timeOrderedId, type SqlDatabase } from '../../service-kit/index.js';
import { markPaying, payLedgerInCommit, release } from './store/payments.js';
import type { SessionRecord } from '../sessions/store.js';
import type { PaymentOrder, Rail } from './rail.js';
import type { PaymentFields, PaymentSigning } from './signing.js';
import type { Authorizer, PaymentRequest } from './authorize.js';
import type { CommitRecords } from './commit-records.js';
import type { Commits } from './commit.js';
import type { ChainWindows } from './windows.js';

export function createOwnRail(deps: {
  db: SqlDatabase;
  rail: Rail;
  now: () => number;
  authorizer: Authorizer;
  signing: PaymentSigning;
  records: CommitRecords;
  windows: ChainWindows;
  commits: Commits;
  onRefused?: (code: string, rail: string) => void;
}) {
  const { db, rail, now, authorizer, signing, records, windows, commits } = deps;
  const settledFirst = () =>
    new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was made');

  /**
   * The ledger pays in the change that commits: SBA and receipt signed first, then reservation,
   * payment, spend and receipt (store/payments.ts payLedgerInCommit), whose guard re-reads the
   * revocation state, expiry and budget. The revocation state was also read from the database for
   * this request (routes/proxy.ts) before the SBA was signed (spec §3 rule 1); a revocation
   * committed after that read makes the guard refuse, and the SBA and receipt signed for it are
   * dropped unseen.
   */
  async function payInCommit(r: PaymentRequest) {
    const p = await authorizer.checkFixed(r);
    const sba = await signing.sba(r.session, p);
    await authorizer.personRefusal(r, sba, p);
    const txRef = `txid:${timeOrderedId()}`;
    const paidAt = now();
    const { receipt, row, committed } = await signing.receipt(r.session, p, txRef, paidAt, sba);
    const c = await payLedgerInCommit(
      db,
      {
        ...row,
        sessionId: r.session.id,
        amount: p.amount,
        currency: p.currency,
        merchant: r.host,
        address: r.terms.address,
        purpose: p.purpose,
        rail: rail.name,
        now: paidAt,
        ...(await windows.counters(r.session, paidAt)),
        txRef,
      },
      records.commitRecord(r.session, p, receipt, txRef, undefined, await windows.windowed(r.session, paidAt)),
      records.pausedRecord(r.session),
    );
    if ('ok' in c)
      return authorizer.refuse(rail.name, r.session, c.code, c.message, authorizer.detailsOf(r), c.resetsAt);
    if (!c.committed) throw settledFirst();
    committed();
    return { paymentId: p.id, txRef, sba, receipt };
  }

  /** A rail elsewhere: reserved and signed, `paying` written, the rail paid, then committed. */
  async function payBeforeCommit(r: PaymentRequest) {
    const { p, sba } = await authorizer.authorize(r);
    if (!(await markPaying(db, p.id, JSON.stringify(sba), now()))) throw settledFirst();
    const order = {
      paymentId: p.id,
      amount: p.amount,
      currency: p.currency,
      address: r.terms.address,
      merchant: r.host,
    };
    const { txRef } = await payOnRail(order);
    const { receipt } = await commits.commitAnswered(r.session, p, txRef, sba);
    return { paymentId: p.id, txRef, sba, receipt };
  }

  /**
   * The rail paid for a payment marked `paying`; an answer that never came is asked of the rail,
   * never guessed. `moved`: what the rail says it paid, when its outcome had to be asked.
   */
  async function payOnRail(order: PaymentOrder): Promise<{ txRef: string; moved?: bigint }> {
    try {
      return { txRef: (await rail.pay(order)).txRef };
    } catch (e) {
      // Paid or not? Ask the rail, which also voids the id if it was not (rail.ts). An outcome
      // that throws answers nothing: the payment may have been made, so it is held as pending
      // (reconcile asks again), never taken as void.
      const found = await rail.outcome(order.paymentId).catch(() => 'pending' as const);
      if (!found) {
        await release(db, order.paymentId, now());
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

  /**
   * A hold `p` captured at `captured` (PROTOCOL.md §15), 0 < captured ≤ the hold: `paying`
   * written, the rail pays `captured` (idempotent by payment id), the capture committed with the
   * rest released.
   */
  async function capture(
    session: SessionRecord,
    p: PaymentFields,
    sba: SignedBudgetAuthorization,
    address: string,
    captured: bigint,
  ) {
    if (!(await markPaying(db, p.id, JSON.stringify(sba), now())))
      throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was captured');
    const order = { paymentId: p.id, amount: captured, currency: p.currency, address, merchant: p.merchant };
    const { txRef, moved } = await payOnRail(order);
    // The rail's own record of what it paid, when it had to be asked, over the merchant's figure
    // (at most the hold: the counters reserved no more).
    const spent = moved === undefined ? captured : moved < p.amount ? moved : p.amount;
    const { receipt } = await commits.commitAnswered(session, p, txRef, sba, spent);
    return { paymentId: p.id, txRef, sba, receipt };
  }

  return { payInCommit, payBeforeCommit, capture };
}
