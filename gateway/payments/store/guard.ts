/**
 * The budget guard, once for every counter a payment moves (PROTOCOL.md §7, §13, §14): the
 * lifetime total of the paying session and of each ancestor, and the current window row of each
 * of their windows. Each counter moves in one UPDATE that repeats its own bound in its WHERE
 * clause, so no counter ever passes its bound whatever was read before (no check-then-set); the
 * counters move in the one order every path locks them (sessions by code point, then windows
 * by session and period: counters.ts), so no lock cycle forms; and either all move or none:
 *
 * - SQLite: one UPDATE after the other in the caller's transaction (BEGIN IMMEDIATE: the only
 *   writer), a refusal rolls it back.
 * - PostgreSQL: one statement, each UPDATE a CTE that runs only once the one before it moved.
 *   A refusal of the first counter writes nothing (no row); a refusal after it makes the whole
 *   statement fail (CHAIN_REFUSED), which undoes the counters already moved.
 *
 * One UPDATE per counter and nothing else: no row is read or locked beforehand, so a payment on
 * a chain or with windows costs the database about what a plain payment does.
 */
import type { SqlExecutor, Row } from '../../../service-kit/index.js';
import type { ChainWindow } from './counters.js';

/** SQLSTATE of the statement a counter refused after an earlier one moved (a division by zero, on purpose). */
export const CHAIN_REFUSED = '22012';

export interface GuardInput {
  /** The paying session first, then each ancestor. */
  chain: string[];
  /** The window row of every window of the chain at `now` (counters.ts chainWindowKeys). */
  windows: GuardWindow[];
  amount: bigint;
  now: number;
  /** `spent`: paid in this change (the ledger); `reserved`: held until commit or release. */
  column: 'spent' | 'reserved';
  /**
   * Refuse a payment that would fill a window: its commit must record window.exhausted, which
   * the transaction path does (store/payments.ts CommitRecord.filled).
   */
  refuseFill?: boolean;
}

/** A window row by its key. */
type GuardWindow = Pick<ChainWindow, 'sessionId' | 'every' | 'startsAt'>;

type Counter = { session: string } | { window: GuardWindow };

/** The counters in lock order: sessions by code point, then windows by (session, every). */
function lockOrder(g: GuardInput): Counter[] {
  const ids = [...new Set(g.chain)].sort();
  const key = (w: GuardWindow) => `${w.sessionId}\u0000${w.every}`;
  const windows = [...g.windows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return [...ids.map((session) => ({ session })), ...windows.map((window) => ({ window }))];
}

/** One counter's guarded UPDATE; `after` is appended to its WHERE clause (PostgreSQL's chaining). */
function guardedUpdate(
  c: Counter,
  g: GuardInput,
  pg: boolean,
  after = '',
): { sql: string; params: unknown[]; returns: string } {
  const big = pg ? '?::bigint' : '?';
  const col = g.column;
  if ('session' in c)
    return {
      sql:
        `UPDATE gw_sessions SET ${col} = ${col} + ${big} WHERE id = ? AND state = 'active' AND expires_at > ${big} ` +
        `AND spent + reserved + ${big} <= ceiling${after} RETURNING id, spent, ceiling`,
      params: [g.amount, c.session, g.now, g.amount],
      returns: c.session,
    };
  const w = c.window;
  // A payment that fills a window is left to the transaction path (GuardInput.refuseFill).
  const fill = g.refuseFill
    ? ` AND NOT (reserved = 0 AND (spent + ${big} >= max_amount ` +
      `OR (max_payments IS NOT NULL AND payments + 1 >= max_payments)))`
    : '';
  return {
    sql:
      `UPDATE gw_session_windows SET ${col} = ${col} + ${big}, payments = payments + 1 ` +
      `WHERE session_id = ? AND every = ? AND starts_at = ${big} AND spent + reserved + ${big} <= max_amount ` +
      `AND (max_payments IS NULL OR payments + 1 <= max_payments)${fill}${after} RETURNING session_id`,
    params: [g.amount, w.sessionId, w.every, w.startsAt, g.amount, ...(g.refuseFill ? [g.amount] : [])],
    returns: '',
  };
}

/**
 * SQLite, inside the caller's transaction: every counter moved, or undefined when one refused
 * (the caller rolls back). Returns the paying session's row after the move (spent, ceiling).
 */
export async function moveCounters(t: SqlExecutor, g: GuardInput): Promise<Row | undefined> {
  let self: Row | undefined;
  for (const c of lockOrder(g)) {
    const u = guardedUpdate(c, g, false);
    const r = await t.get(u.sql, u.params);
    if (!r) return undefined;
    if (u.returns === g.chain[0]) self = r;
  }
  return self;
}

/**
 * PostgreSQL: the CTE members `c0 … cN` moving every counter, each running only after the one
 * before it moved (`EXISTS` on it). `last` names the member a payment row hangs on; `check` is
 * the tail of the main SELECT (`FROM first WHERE …`): one row (the paying session's spent and
 * ceiling, `self`) when all moved, none when the first refused, and a CHAIN_REFUSED failure when
 * one refused after the first moved.
 */
export function counterCtes(g: GuardInput): { sql: string; params: unknown[]; last: string; select: string } {
  const counters = lockOrder(g);
  const parts = counters.map((c, i) =>
    guardedUpdate(c, g, true, i === 0 ? '' : ` AND EXISTS (SELECT 1 FROM c${i - 1})`),
  );
  const self = `c${parts.findIndex((p) => p.returns === g.chain[0])}`;
  const last = `c${parts.length - 1}`;
  return {
    sql: parts.map((p, i) => `c${i} AS (${p.sql})`).join(',\n       '),
    params: parts.flatMap((p) => p.params),
    last,
    // Evaluated only when c0 moved: 1 / 0 when the last did not, so the statement fails whole.
    select:
      `SELECT (SELECT spent FROM ${self}) AS spent, (SELECT ceiling FROM ${self}) AS ceiling FROM c0 ` +
      `WHERE 1 / (SELECT count(*) FROM ${last})::int = 1`,
  };
}
