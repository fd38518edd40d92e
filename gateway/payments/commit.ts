/**
 * Commit + receipt for a payment a rail made (spec §4.2 step 3): the receipt signed, then the spend
 * committed with it and its events in one change. Safe to call from any path (the answer of the
 * rail, reconcile): a payment commits once.
 */
import type { Receipt, SignedBudgetAuthorization } from '../../src/index.js';
import { HttpError, type SqlDatabase } from '../../service-kit/index.js';
import { commit, receiptOfPayment } from './store/payments.js';
import type { SessionRecord } from '../sessions/store.js';
import type { PaymentFields, PaymentSigning } from './signing.js';
import type { CommitRecords } from './commit-records.js';
import { counterChain, type ChainWindows } from './windows.js';

export function createCommits(deps: {
  db: SqlDatabase;
  signing: PaymentSigning;
  records: CommitRecords;
  windows: ChainWindows;
  now: () => number;
}) {
  const { db, signing, records, windows, now } = deps;

  /**
   * Commits `p`, paid as `txRef`, with its receipt. With `captured`, `p.amount` was a hold
   * (PROTOCOL.md §15): `captured` is spent, the rest given back to every counter.
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
    const c = await commit(
      db,
      { ...row, sessionId: session.id, amount: p.amount, txRef, captured, multi: counterChain(session) !== undefined },
      records.commitRecord(session, p, receipt, txRef, captured, await windows.windowed(session, paidAt)),
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

  return { commitPaid, commitAnswered };
}

export type Commits = ReturnType<typeof createCommits>;
