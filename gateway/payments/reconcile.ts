/**
 * Settles payments left open longer than `staleMs` (a crash between reserve and commit):
 * `reserved` never reached the rail and is released (only while still `reserved`); `paying`
 * is settled with the rail, committed with its receipt when it was paid, released (and voided
 * at the rail) when not. Every open row is visited, a page at a time; one still pending goes
 * to the back of the queue, and one whose rail throws is logged and left for the next pass.
 */
import type { SqlDatabase } from '../../service-kit/index.js';
import type { SignedBudgetAuthorization } from '../../src/index.js';
import { sessionById, type SessionRecord } from '../sessions/store.js';
import type { Rail } from './rail.js';
import { openPayments, release, touchOpen, type PaymentRecord } from './store/payments.js';

/** Reconcile reads open payments 200 at a time, up to 10 000 a pass (the rest rotate to later passes). */
const RECONCILE_PAGE = 200;
const RECONCILE_MAX_PAGES = 50;

export interface ReconcileDeps {
  db: SqlDatabase;
  now: () => number;
  /** The rails this instance runs, by name; a payment on another rail is left to an instance that runs it. */
  rails: Map<string, Rail>;
  /** Commits a payment the rail made, with its signed receipt (service.ts); false when already settled. */
  commitPaid(
    session: SessionRecord,
    p: PaymentRecord,
    txRef: string,
    sba: SignedBudgetAuthorization | undefined,
    captured?: bigint,
  ): Promise<boolean>;
  /** A reconcile pass ended, with the payments it settled (metrics). */
  onReconciled?: (settled: { committed: number; released: number }) => void;
  /** A payment reconcile could not settle this pass (logged; the pass goes on). */
  onReconcileError?: (paymentId: string, error: unknown) => void;
}

export async function reconcile(
  deps: ReconcileDeps,
  staleMs: number,
): Promise<{ committed: number; released: number }> {
  const { db, now } = deps;
  let committed = 0;
  let released = 0;
  const before = now() - staleMs;
  let after: { updatedAt: number; id: string } | undefined;
  for (let page = 0; page < RECONCILE_MAX_PAGES; page++) {
    const open = await openPayments(db, before, RECONCILE_PAGE, after);
    for (const p of open) {
      try {
        const r = await reconcileOne(deps, p);
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
}

async function reconcileOne(deps: ReconcileDeps, p: PaymentRecord): Promise<'committed' | 'released' | undefined> {
  const { db, now } = deps;
  const rail = deps.rails.get(p.rail);
  if (!rail) return undefined; // a rail this instance does not run: left to one that does
  if (p.state === 'reserved') {
    // Nothing reaches a rail before `paying` is written, and markPaying is itself conditional
    // on `reserved`: a release conditional on `reserved` and markPaying cannot both win. If
    // another instance marked it `paying` meanwhile, the release does nothing and that
    // instance settles it (or a later pass, once it is stale).
    return (await release(db, p.id, now(), ['reserved'])) ? 'released' : undefined;
  }
  const found = await rail.outcome(p.id);
  // Still cashable and not yet seen paid (a signed x402 authorization before its expiry): keep it reserved.
  if (found === 'pending') {
    await touchOpen(db, p.id, now());
    return undefined;
  }
  const session = await sessionById(db, p.sessionId);
  if (!session) return undefined;
  if (found) {
    const sba = p.sba ? (JSON.parse(p.sba) as SignedBudgetAuthorization) : undefined;
    const captured = found.hold ? (found.captured ?? p.amount) : undefined;
    const done = await deps.commitPaid(session, { ...p, rail: found.rail ?? p.rail }, found.txRef, sba, captured);
    return done ? 'committed' : undefined;
  }
  return (await release(db, p.id, now())) ? 'released' : undefined;
}
