/**
 * The gateway's transparency-log entries (service-kit/tlog/entries.ts): each receipt, and each
 * session created (a child names its parent), paused, continued, revoked or expired. They are
 * rows written with the event that records the change (sessions/events.ts), so in the change's
 * own transaction or statement.
 */
import type { RowInsert } from '../../service-kit/index.js';
import { LOGGED_SESSION_EVENTS, entryOrDigest, type TransparencyLog } from '../../service-kit/tlog/index.js';

/** What an event tells the log: its type, its session, its audited data, and the receipt a payment carries. */
export interface LoggedEvent {
  session: { id: string };
  type: string;
  actor: string;
  /** The event's data without bearer secrets (what the audit trail keeps). */
  data: Record<string, unknown>;
  /** payment.completed: the signed receipt, logged as its own entry. */
  receipt?: { receiptId: string };
}

/** The log rows of `e` at `at` (ms): none for an event that is not logged. */
export function gatewayLogRows(log: TransparencyLog | undefined, e: LoggedEvent, at: number): RowInsert[] {
  if (!log) return [];
  if (e.receipt) {
    const summary = { receiptId: e.receipt.receiptId, sessionId: e.session.id };
    return [log.row(entryOrDigest('receipt', e.receipt, summary), `receipt:${e.receipt.receiptId}`)];
  }
  if (!LOGGED_SESSION_EVENTS.has(e.type)) return [];
  const body = { ...e.data, sessionId: e.session.id, at: new Date(at).toISOString(), actor: e.actor };
  return [log.row({ type: e.type, body }, `session:${e.session.id}`)];
}

/** The log index of each receipt sequenced so far, by receipt id (GET …/receipts). */
export async function receiptLogIndex(
  log: TransparencyLog | undefined,
  receipts: readonly unknown[],
): Promise<{ logIndex?: Record<string, number> }> {
  if (!log) return {};
  const ids = receipts.map((r) => (r as { receiptId?: string }).receiptId).filter((id): id is string => !!id);
  const found = await log.indicesOf(ids.map((id) => `receipt:${id}`));
  return {
    logIndex: Object.fromEntries(
      ids.flatMap((id) => (found.has(`receipt:${id}`) ? [[id, found.get(`receipt:${id}`)!]] : [])),
    ),
  };
}

/** How long a paid answer waits for its receipt's log index before it goes without it. */
const INDEX_WAIT_MS = 5000;

/**
 * `X-Ctl-Log-Index` on a paid answer: the receipt's index in the gateway's log, once the
 * sequencer has numbered it (a pass started after the commit; usually milliseconds). Without it
 * in time the answer goes out without the header; `GET /log/proof/inclusion?receiptId=` finds it later.
 */
export async function setReceiptLogIndex(
  ctx: { set(name: string, value: string): void },
  log: TransparencyLog | undefined,
  receiptId: string,
): Promise<void> {
  if (!log) return;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const index = await Promise.race([
    log.indexOf(`receipt:${receiptId}`).catch(() => undefined),
    new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), INDEX_WAIT_MS))),
  ]);
  clearTimeout(timer);
  if (index !== undefined) ctx.set('X-Ctl-Log-Index', String(index));
}
