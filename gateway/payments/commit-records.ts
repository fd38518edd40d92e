/**
 * The events a payment's changes record (spec §6), each in the change it describes: a commit's
 * `payment.completed` (with its receipt, appended to the transparency log), the thresholds it
 * crossed and the windows it filled; a reservation's `session.paused` at the soft ceiling. Which
 * form the store writes (rows in the commit statement, or a transaction's effects) is its own.
 */
import { formatTimestamp, type Receipt } from '../../src/index.js';
import { formatMinor } from '../../service-kit/money.js';
import { sessionById, type SessionRecord } from '../sessions/store.js';
import type { GatewayEvents } from '../sessions/events.js';
import { continuationToken } from '../sessions/continuation.js';
import { filledWindows } from './store/counters.js';
import type { CommitRecord, CommitResult } from './store/payments.js';
import type { PaymentFields } from './signing.js';

export function createCommitRecords(events: GatewayEvents, continuationSecret: Buffer) {
  /**
   * How a commit records its events; only the caller whose commit changed the books records them.
   * payment.completed is known beforehand; thresholds crossed only from the new total, so a
   * session with thresholds records them from the result.
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
        // Appended to the transparency log in this commit (log/entries.ts).
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
              ? continuationToken(continuationSecret, session.id, s.continuationNonce)
              : undefined,
          },
        },
      ];
    });

  return { commitRecord, pausedRecord };
}

export type CommitRecords = ReturnType<typeof createCommitRecords>;
