/**
 * Money moves here. The budget check and the reservation are one transaction in which the
 * session row is locked (FOR UPDATE on PostgreSQL, BEGIN IMMEDIATE on SQLite), and the final
 * UPDATE repeats the ceiling test in its WHERE clause: no check-then-set (PROTOCOL.md §7), so 50
 * parallel payments on a budget for 10 reserve exactly 10, across processes too.
 */
import { randomBytes } from 'node:crypto';
import {
  Rollback,
  allEffects,
  changeWith,
  insertSelectSql,
  type RowInsert,
  type SqlDatabase,
  type SqlExecutor,
  type Row,
  type TxEffect,
} from '../../../service-kit/index.js';
import { forUpdate } from '../../../service-kit/row-lock.js';
import { formatMinor } from '../../../service-kit/money.js';
import {
  ensureWindowRows,
  type ChainWindow,
  reserveOnCounters,
  settleCounters,
  velocityUsed,
  type PaymentCounters,
} from './counters.js';
import { CHAIN_REFUSED, counterCtes, moveCounters, type GuardInput } from './guard.js';

export type PaymentState = 'reserved' | 'paying' | 'paid' | 'released';

export interface PaymentRecord {
  id: string;
  sessionId: string;
  state: PaymentState;
  amount: bigint;
  currency: string;
  merchant: string;
  address: string;
  purpose: string;
  rail: string;
  txRef: string | null;
  sba: string | null;
  createdAt: number;
  updatedAt: number;
}

export function toPayment(r: Row): PaymentRecord {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    state: r.state as PaymentState,
    amount: BigInt(r.amount as string),
    currency: r.currency as string,
    merchant: r.merchant as string,
    address: r.address as string,
    purpose: r.purpose as string,
    rail: r.rail as string,
    txRef: (r.tx_ref as string | null) ?? null,
    sba: (r.sba as string | null) ?? null,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export type ReserveRefusal =
  | 'session_revoked'
  | 'session_expired'
  | 'session_paused'
  | 'velocity_exceeded'
  | 'budget_exceeded'
  | 'window_exceeded';

export type ReserveResult =
  { ok: true } | { ok: false; code: ReserveRefusal; message: string; pausedNow?: boolean; resetsAt?: string };

/**
 * Checks state, expiry, velocity and remaining budget and reserves `amount`, all in one
 * transaction. With a soft limit, the payment that would cross the ceiling pauses
 * the session instead (spec §3 "budget exhausted" row) and is not made.
 */
export type ReserveInput = Pick<
  PaymentRecord,
  'sessionId' | 'amount' | 'currency' | 'merchant' | 'address' | 'purpose' | 'rail'
> & {
  paymentId: string;
  now: number;
  /** The session has velocity limits: they need the transaction path. */
  velocity: boolean;
  /**
   * The paying session first, then its ancestors, when it counts on more than its own lifetime
   * total (windows, or a parent): the multi-counter path (counters.ts). Absent: the session alone.
   */
  chain?: string[];
  /**
   * With `chain` and no velocity limits: the window of every window of the chain at `now`
   * (counters.ts chainWindowKeys), which lets the budget guard (guard.ts) reserve, or reserve and
   * pay, without reading the counters first.
   */
  chainWindows?: ChainWindow[];
};

/** A payment row as it is first written: reserved (paid later), or paid in the change that reserves it. */
type NewPayment = Pick<ReserveInput, 'paymentId' | 'sessionId' | 'amount' | 'currency' | 'merchant' | 'address'> &
  Pick<ReserveInput, 'purpose' | 'rail' | 'now'> & {
    /** Paid in this change (the ledger): its transaction reference and when it was paid. */
    paid?: { txRef: string; paidAt: number };
    /** Where it was counted, when on more than the session's own lifetime total (counters.ts). */
    counters?: PaymentCounters;
  };

/**
 * The one payment insert, for both engines: VALUES, or (PostgreSQL) `SELECT … FROM from`, one
 * row when that CTE moved the budget and none when it refused, `RETURNING returning`.
 */
function paymentInsert(
  p: NewPayment,
  pg: boolean,
  from?: { cte: string; returning: string },
): { sql: string; params: unknown[] } {
  const big = pg ? '?::bigint' : '?';
  const values = `?, ?, '${p.paid ? 'paid' : 'reserved'}', ${big}, ?, ?, ?, ?, ?, ?, ${big}, ${big}, ?`;
  return {
    sql:
      `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, tx_ref, ` +
      `created_at, updated_at, counters) ` +
      (from ? `SELECT ${values} FROM ${from.cte} RETURNING ${from.returning}` : `VALUES (${values})`),
    params: [
      p.paymentId,
      p.sessionId,
      p.amount,
      p.currency,
      p.merchant,
      p.address,
      p.purpose,
      p.rail,
      p.paid?.txRef ?? null,
      p.now,
      p.paid?.paidAt ?? p.now,
      p.counters ? JSON.stringify(p.counters) : null,
    ],
  };
}

/** `paused`: recorded in the transaction that pauses the session (its audit entry and event). */
export async function reserve(q: SqlDatabase, p: ReserveInput, paused?: TxEffect<void>): Promise<ReserveResult> {
  if (p.chain) return reserveChain(q, p, p.chain, paused);
  if (q.dialect === 'postgres' && !p.velocity) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const r = await reserveOneStatement(q, p, paused);
      if (r) return r;
    }
    return { ok: false, code: 'budget_exceeded', message: 'the payment does not fit in the remaining budget' };
  }
  return reserveInTx(q, p, paused);
}

/**
 * PostgreSQL without velocity limits: the guard, the reservation and the payment row are one
 * statement (a data-modifying CTE), so the session row is locked for one statement, not for a
 * transaction of round trips. Concurrent updates re-check the WHERE on the newest row version
 * (READ COMMITTED), so the ceiling holds. On a miss the reason is read afterwards; the only
 * write it may make (pausing) is itself conditional. Undefined: nothing was wrong on re-read
 * (a reservation was released meanwhile), try again.
 */
async function reserveOneStatement(
  q: SqlDatabase,
  p: ReserveInput,
  paused?: TxEffect<void>,
): Promise<ReserveResult | undefined> {
  const pay = paymentInsert(p, true, { cte: 's', returning: 'id' });
  // Group commit (database.ts): concurrent reservations share one transaction and WAL flush.
  const row = await q.getGrouped(
    p.sessionId,
    `WITH s AS (
       UPDATE gw_sessions SET reserved = reserved + ?::bigint
       WHERE id = ? AND state = 'active' AND expires_at > ?::bigint AND spent + reserved + ?::bigint <= ceiling
       RETURNING id)
     ${pay.sql}`,
    [p.amount, p.sessionId, p.now, p.amount, ...pay.params],
  );
  if (row) return { ok: true };
  const s = await q.get(
    `SELECT state, expires_at, ceiling, spent, reserved, soft_limit FROM gw_sessions WHERE id = ?`,
    [p.sessionId],
  );
  if (!s || s.state === 'revoked')
    return { ok: false, code: 'session_revoked', message: 'the session has been revoked' };
  if (s.state === 'expired' || Number(s.expires_at) <= p.now)
    return { ok: false, code: 'session_expired', message: 'the session has expired' };
  if (s.state === 'paused')
    return {
      ok: false,
      code: 'session_paused',
      message: 'the session is paused at its soft ceiling; continue it with the continuation token',
    };
  const remaining = BigInt(s.ceiling as string) - BigInt(s.spent as string) - BigInt(s.reserved as string);
  if (p.amount <= remaining) return undefined;
  if (s.soft_limit != null) {
    const update = (t: SqlExecutor) =>
      t.run(
        `UPDATE gw_sessions SET state = 'paused', continuation_nonce = ? WHERE id = ? AND ` +
          `state = 'active' AND spent + reserved + ?::bigint > ceiling`,
        [randomBytes(16).toString('base64url'), p.sessionId, p.amount],
      );
    const r = paused
      ? await changeWith(q, update, async (t, u) => (u.changes === 1 ? paused(t) : undefined))
      : await update(q);
    if (r.changes === 1)
      return {
        ok: false,
        code: 'session_paused',
        message: 'the payment would cross the soft ceiling: the session is paused',
        pausedNow: true,
      };
    return undefined;
  }
  return {
    ok: false,
    code: 'budget_exceeded',
    message:
      `the payment of ${formatMinor(p.amount, p.currency)} exceeds the remaining budget of ` +
      formatMinor(remaining, p.currency),
  };
}

/**
 * Every counter of the chain, the payment row written with them: on PostgreSQL without velocity
 * limits one statement (the budget guard's CTEs, guard.ts); otherwise, or when that refuses, one
 * transaction (counters.ts reserveOnCounters) that also says why and pauses at a soft limit.
 */
async function reserveChain(
  q: SqlDatabase,
  p: ReserveInput,
  chain: string[],
  paused?: TxEffect<void>,
): Promise<ReserveResult> {
  if (q.dialect === 'postgres' && p.chainWindows && (await reserveChainInOneStatement(q, p, chain, p.chainWindows)))
    return { ok: true };
  return changeWith(
    q,
    async (t): Promise<ReserveResult> => {
      const r = await reserveOnCounters(t, {
        paymentId: p.paymentId,
        chain,
        amount: p.amount,
        currency: p.currency,
        merchant: p.merchant,
        now: p.now,
      });
      if (!r.ok) return r;
      const pay = paymentInsert({ ...p, counters: r.counters }, t.dialect === 'postgres');
      await t.run(pay.sql, pay.params);
      return { ok: true };
    },
    paused && (async (t, r) => (!r.ok && r.pausedNow ? paused(t) : undefined)),
  );
}

/** PostgreSQL: the chain's counters reserved and the payment row written in one statement; false when refused. */
async function reserveChainInOneStatement(
  q: SqlDatabase,
  p: ReserveInput,
  chain: string[],
  windows: ChainWindow[],
): Promise<boolean> {
  await ensureWindowRows(q, windows);
  const g = counterCtes({ chain, windows, amount: p.amount, now: p.now, column: 'reserved' });
  const counters: PaymentCounters = { s: chain, w: windows.map((w) => [w.sessionId, w.every, w.startsAt]) };
  const pay = paymentInsert({ ...p, counters }, true, { cte: g.last, returning: 'id' });
  try {
    const row = await q.getGrouped(p.sessionId, `WITH ${g.sql},\n       pay AS (${pay.sql})\n       ${g.select}`, [
      ...g.params,
      ...pay.params,
    ]);
    return row !== undefined;
  } catch (e) {
    if ((e as { code?: unknown })?.code === CHAIN_REFUSED) return false;
    throw e;
  }
}

async function reserveInTx(q: SqlDatabase, p: ReserveInput, paused?: TxEffect<void>): Promise<ReserveResult> {
  return changeWith(
    q,
    async (t): Promise<ReserveResult> => {
      const s = await t.get(
        `SELECT state, expires_at, ceiling, spent, reserved, soft_limit, max_per_hour, max_per_merchant_day
       FROM gw_sessions WHERE id = ?${forUpdate(t)}`,
        [p.sessionId],
      );
      if (!s) return { ok: false, code: 'session_revoked', message: 'no such session' } as const;
      const state = s.state as string;
      if (state === 'revoked')
        return { ok: false, code: 'session_revoked', message: 'the session has been revoked' } as const;
      if (state === 'expired' || Number(s.expires_at) <= p.now)
        return { ok: false, code: 'session_expired', message: 'the session has expired' } as const;
      if (state === 'paused')
        return {
          ok: false,
          code: 'session_paused',
          message: 'the session is paused at its soft ceiling; continue it with the continuation token',
        } as const;
      if (s.max_per_hour != null || s.max_per_merchant_day != null) {
        // Its children's payments count too (counters.ts velocityUsed, PROTOCOL.md §14).
        const v = await velocityUsed(t, p.sessionId, p.merchant, p.now);
        if (s.max_per_hour != null && v.hourCount >= Number(s.max_per_hour))
          return {
            ok: false,
            code: 'velocity_exceeded',
            message: `at most ${s.max_per_hour} payments per hour`,
          } as const;
        if (s.max_per_merchant_day != null && v.merchantDay + p.amount > BigInt(s.max_per_merchant_day as string))
          return {
            ok: false,
            code: 'velocity_exceeded',
            message: `at most ${formatMinor(String(s.max_per_merchant_day), p.currency)} per merchant per day`,
          } as const;
      }
      const ceiling = BigInt(s.ceiling as string);
      const spent = BigInt(s.spent as string);
      const reserved = BigInt(s.reserved as string);
      if (spent + reserved + p.amount > ceiling) {
        if (s.soft_limit != null) {
          const r = await t.run(
            `UPDATE gw_sessions SET state = 'paused', continuation_nonce = ? WHERE id = ? AND state = 'active'`,
            [randomBytes(16).toString('base64url'), p.sessionId],
          );
          return {
            ok: false,
            code: 'session_paused',
            message: 'the payment would cross the soft ceiling: the session is paused',
            pausedNow: r.changes === 1,
          } as const;
        }
        return {
          ok: false,
          code: 'budget_exceeded',
          message:
            `the payment of ${formatMinor(p.amount, p.currency)} exceeds the remaining budget of ` +
            formatMinor(ceiling - spent - reserved, p.currency),
        } as const;
      }
      const pay = paymentInsert(p, t.dialect === 'postgres');
      await t.run(pay.sql, pay.params);
      // The guard is repeated in the WHERE clause: the reservation can never pass the ceiling,
      // whatever happened above.
      const u = await t.run(
        `UPDATE gw_sessions SET reserved = reserved + ? WHERE id = ? AND state = 'active' ` +
          'AND expires_at > ? AND spent + reserved + ? <= ceiling',
        [p.amount, p.sessionId, p.now, p.amount],
      );
      if (u.changes !== 1) throw new Error('reservation guard failed inside the transaction');
      return { ok: true } as const;
    },
    paused && (async (t, r) => (!r.ok && r.pausedNow ? paused(t) : undefined)),
  );
}

/**
 * reserved → paying, with the SBA the payment is made under (reconcile's, until the payment is paid); written before
 * the rail is called.
 */
export async function markPaying(q: SqlExecutor, paymentId: string, sba: string, now: number): Promise<boolean> {
  const r = await q.run(
    `UPDATE gw_payments SET state = 'paying', sba = ?, updated_at = ? WHERE id = ? AND state = 'reserved'`,
    [sba, now, paymentId],
  );
  return r.changes === 1;
}

export interface CommitResult {
  /** False when another path (reconcile on another instance) already settled it. */
  committed: boolean;
  spentBefore: bigint;
  spentAfter: bigint;
  ceiling: bigint;
}

const NOT_COMMITTED: CommitResult = { committed: false, spentBefore: 0n, spentAfter: 0n, ceiling: 0n };

/**
 * How a commit records itself (spec §6 events, in the commit's own change). `known` is what is
 * known before the commit (payment.completed), in two forms; `effect` what only the result tells
 * (thresholds crossed). Which form runs is the store's choice: on PostgreSQL, with no `effect`,
 * the known rows ride in the commit's own statement (written only if it commits), which keeps the
 * hot session row locked for one statement instead of a transaction of round trips; otherwise a
 * transaction runs `known.effect` before the session row is locked and `effect` after.
 */
export interface CommitRecord {
  known?: { effect: TxEffect<void>; rows: () => { rows: RowInsert[]; after: () => void } };
  effect?: TxEffect<CommitResult>;
  /**
   * What a commit that fills a budget window records (window.exhausted): run in the commit's
   * transaction. A one-statement path cannot run it, so its statement refuses a payment that would
   * fill a window, which then takes the transaction path (at most once per window).
   */
  filled?: TxEffect<CommitResult>;
}

/** The effects a commit's transaction runs after its change. */
const afterEffects = (record: CommitRecord) =>
  record.filled ? allEffects(record.effect, record.filled) : record.effect;

/** The CTE members inserting `rows` when `pay` has a row. */
function recordingCtes(rows: RowInsert[]): { sql: string; params: unknown[] } {
  const parts = rows.map((r) => insertSelectSql(r, 'pay'));
  return {
    sql: parts.map((p, i) => `,\n       rec${i} AS (${p.sql})`).join(''),
    params: parts.flatMap((p) => p.params),
  };
}

const NO_CTES = { sql: '', params: [] as unknown[] };

/**
 * A signed receipt as stored. Every receipt of a session's payments embeds the same grant, inside
 * its SBA: stored whole, that grant was a third of each row and pushed it past what SQLite keeps
 * several of to a 4 KB page (one page per receipt) and past PostgreSQL's TOAST threshold (every
 * body compressed). With `grant`, `receipt` is the receipt's JSON without its SBA's `grant`
 * member, and the grant's canonical text is kept once in `gw_receipt_grants` under `grant.hash`
 * (written in the same change when `grant.text` is given; a second write of it changes nothing);
 * receiptFromRow puts it back. Without `grant`, the receipt is stored whole.
 */
export interface ReceiptRow {
  receiptId: string;
  paymentId: string;
  paidAt: number;
  receipt: string;
  grant?: { hash: string; text?: string };
}

/**
 * PostgreSQL CTE members storing `p` once `pay` returned the paid row: the receipt, and its grant
 * when that text comes with it.
 */
function receiptCtes(p: ReceiptRow): { sql: string; params: unknown[] } {
  const rc = `rc AS (
         INSERT INTO gw_receipts (id, session_id, payment_id, paid_at, body, grant_hash) SELECT ?, pay.session_id, ?,
         ?::bigint, ?, ? FROM pay)`;
  const params = [p.receiptId, p.paymentId, p.paidAt, p.receipt, p.grant?.hash ?? null];
  if (p.grant?.text === undefined) return { sql: rc, params };
  return {
    sql: `${rc},
       rg AS (
         INSERT INTO gw_receipt_grants (hash, body) SELECT ?, ? FROM pay ON CONFLICT DO NOTHING)`,
    params: [...params, p.grant.hash, p.grant.text],
  };
}

/**
 * The tail both commit statements share, after a `pay` CTE that returned the paid row: the
 * session's spend moved and the receipt stored, then `extra`.
 */
function spendAndReceiptCtes(
  p: ReceiptRow,
  extra: { sql: string; params: unknown[] },
): { sql: string; params: unknown[] } {
  const rc = receiptCtes(p);
  return {
    sql: `ses AS (
         UPDATE gw_sessions SET spent = spent + pay.amount, reserved = reserved - pay.amount FROM pay
         WHERE gw_sessions.id = pay.session_id RETURNING gw_sessions.spent, gw_sessions.ceiling),
       ${rc.sql}${extra.sql}
       SELECT spent, ceiling FROM ses`,
    params: [...rc.params, ...extra.params],
  };
}

/**
 * PostgreSQL, one statement: the open payment paid, its spend moved and its receipt stored, then
 * `extra` CTEs (what is recorded with it); no row when the payment was no longer open.
 */
function commitStatement(p: ReceiptRow & { txRef: string }, extra = NO_CTES): { sql: string; params: unknown[] } {
  const tail = spendAndReceiptCtes(p, extra);
  return {
    sql: `WITH pay AS (
         UPDATE gw_payments SET state = 'paid', tx_ref = ?, updated_at = ?::bigint,
         sba = NULL WHERE id = ? AND state IN ('reserved', 'paying')
         RETURNING session_id, amount),
       ${tail.sql}`,
    params: [p.txRef, p.paidAt, p.paymentId, ...tail.params],
  };
}

/** As commitStatement, with the ledger rail's row first: nothing at all when that row already exists. */
function ledgerCommitStatement(
  p: ReceiptRow & { amount: bigint; currency: string; address: string; txRef: string },
  extra = NO_CTES,
): { sql: string; params: unknown[] } {
  const tail = spendAndReceiptCtes(p, extra);
  return {
    sql: `WITH led AS (
         INSERT INTO gw_ledger (payment_id, status, tx_ref, address, amount, currency, created_at)
         VALUES (?, 'paid', ?, ?, ?::bigint, ?, ?::bigint) ON CONFLICT DO NOTHING RETURNING payment_id),
       pay AS (
         UPDATE gw_payments SET state = 'paid', tx_ref = ?, updated_at = ?::bigint FROM led
         WHERE gw_payments.id = led.payment_id AND gw_payments.state = 'reserved' RETURNING gw_payments.session_id,
         gw_payments.amount),
       ${tail.sql}`,
    params: [p.paymentId, p.txRef, p.address, p.amount, p.currency, p.paidAt, p.txRef, p.paidAt, ...tail.params],
  };
}

/**
 * A commit statement on PostgreSQL: with only known rows to record it is one statement (they
 * ride in it as CTEs, `after` runs once it committed); otherwise its transaction carries the
 * effects (audit entry, events) and rolls back when the payment was no longer open. Payment
 * state, spend and receipt change together or not at all.
 */
async function commitOnPostgres(
  q: SqlDatabase,
  sessionId: string,
  statement: (extra?: { sql: string; params: unknown[] }) => { sql: string; params: unknown[] },
  amount: bigint,
  record: CommitRecord,
): Promise<CommitResult> {
  if (!record.effect) {
    const known = record.known?.rows() ?? { rows: [], after: () => {} };
    const st = statement(recordingCtes(known.rows));
    const row = await q.getGrouped(sessionId, st.sql, st.params);
    if (!row) return NOT_COMMITTED;
    known.after();
    return committed(row, amount);
  }
  return changeWith(
    q,
    async (t) => {
      const st = statement();
      const row = await t.get(st.sql, st.params);
      if (!row) throw new Rollback(NOT_COMMITTED);
      return committed(row, amount);
    },
    afterEffects(record),
    { first: record.known?.effect },
  );
}

/** The result of a commit from the session row it updated (`spent`, `ceiling`). */
function committed(row: Record<string, unknown>, amount: bigint): CommitResult {
  const after = BigInt(row['spent'] as string);
  return { committed: true, spentBefore: after - amount, spentAfter: after, ceiling: BigInt(row['ceiling'] as string) };
}

/** SQLite, inside the commit's transaction: the session's spend and the receipt, once the payment row moved to paid. */
async function bookSpendAndReceipt(
  t: SqlExecutor,
  p: ReceiptRow & { amount: bigint; sessionId: string; captured?: bigint },
  counters?: string | null,
): Promise<CommitResult> {
  const spend = p.captured ?? p.amount;
  await insertReceipt(t, p);
  if (counters) {
    const c = await settleCounters(t, JSON.parse(counters) as PaymentCounters, p.amount, spend);
    return committed({ spent: c.spent.toString(), ceiling: c.ceiling.toString() }, spend);
  }
  const s = await t.get(
    `UPDATE gw_sessions SET spent = spent + ?, reserved = reserved - ? WHERE id = ? RETURNING spent, ceiling`,
    [spend, p.amount, p.sessionId],
  );
  return committed(s!, spend);
}

/** SQLite: the signed receipt of a payment, and its grant when that text comes with it (ReceiptRow). */
async function insertReceipt(t: SqlExecutor, p: ReceiptRow & { sessionId: string }) {
  if (p.grant?.text !== undefined) {
    await t.run(`INSERT INTO gw_receipt_grants (hash, body) VALUES (?, ?) ON CONFLICT DO NOTHING`, [
      p.grant.hash,
      p.grant.text,
    ]);
  }
  await t.run(
    `INSERT INTO gw_receipts (id, session_id, payment_id, paid_at, body, grant_hash) VALUES (?, ?, ?, ?, ?, ?)`,
    [p.receiptId, p.sessionId, p.paymentId, p.paidAt, p.receipt, p.grant?.hash ?? null],
  );
}

/**
 * paying → paid: moves the amount from reserved to spent and stores the signed receipt, in one
 * transaction; conditional on the payment state, so it happens once whoever calls it. The SBA
 * held for reconcile (markPaying) is dropped: from here the receipt carries it, its grant stored
 * once per grant, instead of a second whole copy per payment.
 */
export async function commit(
  q: SqlDatabase,
  p: ReceiptRow & {
    sessionId: string;
    amount: bigint;
    txRef: string;
    /** A hold captured below its maximum (PROTOCOL.md §15): the rest goes back to every counter. */
    captured?: bigint;
    /** The payment was reserved on several counters (ReserveInput.chain). */
    multi?: boolean;
  },
  record: CommitRecord = {},
): Promise<CommitResult> {
  if (p.captured !== undefined && (p.captured < 0n || p.captured > p.amount))
    throw new Error(`a capture of ${p.captured} is outside the hold of ${p.amount}`);
  if (q.dialect === 'postgres' && !p.multi && (p.captured === undefined || p.captured === p.amount))
    return commitOnPostgres(q, p.sessionId, (extra) => commitStatement(p, extra), p.amount, record);
  const spend = p.captured ?? p.amount;
  return changeWith(
    q,
    async (t) => {
      // The payment row first, then the session rows in the reservation's order (counters.ts).
      const u = await t.get<{ counters: string | null }>(
        `UPDATE gw_payments SET state = 'paid', tx_ref = ?, updated_at = ?, sba = NULL, amount = ?
         WHERE id = ? AND state IN ('reserved', 'paying') RETURNING counters`,
        [p.txRef, p.paidAt, spend, p.paymentId],
      );
      if (!u) throw new Rollback(NOT_COMMITTED);
      return bookSpendAndReceipt(t, p, u.counters);
    },
    afterEffects(record),
    { first: record.known?.effect },
  );
}

/**
 * reserved|paying → released: gives the reservation back; only for payments the rail never made.
 * `states` narrows it: reconcile releases a stale row only while it is still `reserved` (nothing
 * reaches a rail before `paying`), so a row another instance has just marked `paying` stays.
 */
export async function release(
  q: SqlDatabase,
  paymentId: string,
  now: number,
  states: readonly ('reserved' | 'paying')[] = ['reserved', 'paying'],
): Promise<boolean> {
  const inStates = `state IN (${states.map(() => '?').join(', ')})`;
  return q.tx(async (t) => {
    const p = await t.get(
      `SELECT session_id, amount, counters FROM gw_payments WHERE id = ? AND ${inStates}${forUpdate(t)}`,
      [paymentId, ...states],
    );
    if (!p) return false;
    const u = await t.run(`UPDATE gw_payments SET state = 'released', updated_at = ? WHERE id = ? AND ${inStates}`, [
      now,
      paymentId,
      ...states,
    ]);
    if (u.changes !== 1) return false;
    // Back to every counter it was counted in, a window that has ended too (PROTOCOL.md §13).
    if (p.counters) {
      await settleCounters(
        t,
        JSON.parse(p.counters as string) as PaymentCounters,
        BigInt(p.amount as string),
        'released',
      );
      return true;
    }
    await t.run(`UPDATE gw_sessions SET reserved = reserved - ? WHERE id = ?`, [
      BigInt(p.amount as string),
      p.session_id as string,
    ]);
    return true;
  });
}

export async function paymentById(q: SqlExecutor, id: string): Promise<PaymentRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_payments WHERE id = ?`, [id]);
  return r ? toPayment(r) : undefined;
}

/**
 * The page of open payments reconcile reads: its WHERE names the states of the partial index
 * `gw_payments_open_only` (store/schema.ts) literally, which is what lets a planner use it.
 */
export const OPEN_PAYMENTS_SQL = `SELECT * FROM gw_payments WHERE state IN ('reserved', 'paying')
  AND updated_at <= ? AND (updated_at > ? OR (updated_at = ? AND id > ?))
     ORDER BY updated_at, id LIMIT ?`;

/**
 * Payments left open (reserved or paying) and untouched since `before`: what reconcile() settles,
 * a page at a time in (updated_at, id) order after `after`, so one pass reaches every row.
 */
export async function openPayments(
  q: SqlExecutor,
  before: number,
  limit = 200,
  after?: { updatedAt: number; id: string },
): Promise<PaymentRecord[]> {
  const a = after ?? { updatedAt: -1, id: '' };
  const rows = await q.all(OPEN_PAYMENTS_SQL, [before, a.updatedAt, a.updatedAt, a.id, limit]);
  return rows.map(toPayment);
}

/** A row reconcile left open (still pending at the rail) goes to the back of the queue. */
export async function touchOpen(q: SqlExecutor, paymentId: string, now: number): Promise<void> {
  await q.run(`UPDATE gw_payments SET updated_at = ? WHERE id = ? AND state IN ('reserved', 'paying')`, [
    now,
    paymentId,
  ]);
}

/** The receipt columns, with the grant a receipt keeps apart (ReceiptRow), of `gw_receipts r`. */
const RECEIPT_SELECT =
  'SELECT r.body, r.grant_hash, g.body AS grant_body FROM gw_receipts r LEFT JOIN gw_receipt_grants ' +
  'g ON g.hash = r.grant_hash';
type ReceiptSelected = { body: string; grant_hash: string | null; grant_body: string | null };

/** A stored receipt whole: its SBA's grant put back when it was kept apart (ReceiptRow). */
function receiptFromRow(r: ReceiptSelected, grants = new Map<string, unknown>()): unknown {
  const receipt = JSON.parse(r.body) as { receiptId?: string; sba?: Record<string, unknown> };
  if (r.grant_hash === null) return receipt;
  // Only ever written in the receipt's own change: a receipt without it is a damaged database.
  if (r.grant_body === null)
    throw new Error(`receipt ${receipt.receiptId}: its grant ${r.grant_hash} is not in gw_receipt_grants`);
  let grant = grants.get(r.grant_hash);
  if (grant === undefined) grants.set(r.grant_hash, (grant = JSON.parse(r.grant_body)));
  receipt.sba = { ...receipt.sba, grant };
  return receipt;
}

/**
 * The receipts of a session, oldest first; with `below` (its owner), also those of every session
 * below it (PROTOCOL.md §14: the payments its spend counts).
 */
export async function receiptsOf(q: SqlExecutor, sessionId: string, below?: { ownerId: string }): Promise<unknown[]> {
  const contains = q.dialect === 'postgres' ? 'strpos' : 'instr';
  const [where, params] = below
    ? [
        `r.session_id IN (SELECT id FROM gw_sessions WHERE owner_id = ? AND (id = ? OR ${contains}(path, ?) > 0))`,
        [below.ownerId, sessionId, `/${sessionId}/`],
      ]
    : ['r.session_id = ?', [sessionId]];
  const rows = await q.all<ReceiptSelected>(`${RECEIPT_SELECT} WHERE ${where} ORDER BY r.paid_at, r.id`, params);
  const grants = new Map<string, unknown>();
  return rows.map((r) => receiptFromRow(r, grants));
}

/** The receipt stored for a payment, or undefined (not paid, or not yet). */
export async function receiptOfPayment(q: SqlExecutor, paymentId: string): Promise<unknown | undefined> {
  const r = await q.get<ReceiptSelected>(`${RECEIPT_SELECT} WHERE r.payment_id = ?`, [paymentId]);
  return r ? receiptFromRow(r) : undefined;
}

/** One receipt of a session by its id, or undefined (another session's receipt is not found either). */
export async function receiptOf(q: SqlExecutor, sessionId: string, receiptId: string): Promise<unknown | undefined> {
  const r = await q.get<ReceiptSelected>(`${RECEIPT_SELECT} WHERE r.id = ? AND r.session_id = ?`, [
    receiptId,
    sessionId,
  ]);
  return r ? receiptFromRow(r) : undefined;
}

/**
 * The ledger rail lives in this database, so paying it and committing the payment can be one
 * atomic change (one statement on PostgreSQL, one transaction on SQLite): there is no moment
 * where the money moved and the books do not say so. The ledger row is inserted only if the
 * id was never paid or voided (reconcile voids before it releases), and everything else hangs
 * on that insert. `committed: false` means reconcile settled this payment first.
 */
export async function payLedgerAndCommit(
  q: SqlDatabase,
  p: ReceiptRow & {
    sessionId: string;
    amount: bigint;
    currency: string;
    address: string;
    txRef: string;
    multi?: boolean;
  },
  record: CommitRecord = {},
): Promise<CommitResult> {
  // The SBA is not stored on the payment row here: the receipt, written in the same change, carries it.
  if (q.dialect === 'postgres' && !p.multi)
    return commitOnPostgres(q, p.sessionId, (extra) => ledgerCommitStatement(p, extra), p.amount, record);
  return changeWith(
    q,
    async (t) => {
      const u = await t.get<{ counters: string | null }>(
        `UPDATE gw_payments SET state = 'paid', tx_ref = ?, updated_at = ?
         WHERE id = ? AND state = 'reserved' RETURNING counters`,
        [p.txRef, p.paidAt, p.paymentId],
      );
      if (!u) throw new Rollback(NOT_COMMITTED);
      const l = await t.run(
        'INSERT INTO gw_ledger (payment_id, status, tx_ref, address, amount, currency, created_at) ' +
          `VALUES (?, 'paid', ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
        [p.paymentId, p.txRef, p.address, p.amount, p.currency, p.paidAt],
      );
      if (l.changes !== 1) throw new Error(`ledger id ${p.paymentId} already settled`); // rolls the payment back
      return bookSpendAndReceipt(t, p, u.counters);
    },
    afterEffects(record),
    { first: record.known?.effect },
  );
}

/**
 * The ledger rail's row of a payment paid in the change that writes it: VALUES, or (PostgreSQL)
 * one row per row of the `pay` CTE. A second row for the same payment id is a unique violation.
 */
function ledgerInsert(
  p: { paymentId: string; txRef: string; address: string; amount: bigint; currency: string; paidAt: number },
  form: 'values' | 'pay',
): { sql: string; params: unknown[] } {
  const big = form === 'pay' ? '?::bigint' : '?';
  const values = `?, 'paid', ?, ?, ${big}, ?, ${big}`;
  return {
    sql:
      'INSERT INTO gw_ledger (payment_id, status, tx_ref, address, amount, currency, created_at) ' +
      (form === 'pay' ? `SELECT ${values} FROM pay` : `VALUES (${values})`),
    params: [p.paymentId, p.txRef, p.address, p.amount, p.currency, p.paidAt],
  };
}

/** A ledger payment made in the change that commits it (payLedgerInCommit). */
export type LedgerPaymentInput = ReserveInput & ReceiptRow & { txRef: string };

/**
 * PostgreSQL, one statement: the budget guard of reserveOneStatement moving `amount` straight to
 * spent, the payment row written as paid, the ledger row (a second payment of the same id is a
 * unique violation: nothing at all is written) and the receipt, then `extra` CTEs.
 */
function reserveAndPayStatement(p: LedgerPaymentInput, extra = NO_CTES): { sql: string; params: unknown[] } {
  const pay = paymentInsert({ ...p, paid: p }, true, { cte: 'ses', returning: 'session_id, amount' });
  const led = ledgerInsert(p, 'pay');
  const rc = receiptCtes(p);
  return {
    sql: `WITH ses AS (
         UPDATE gw_sessions SET spent = spent + ?::bigint
         WHERE id = ? AND state = 'active' AND expires_at > ?::bigint AND spent + reserved + ?::bigint <= ceiling
         RETURNING id, spent, ceiling),
       pay AS (${pay.sql}),
       led AS (${led.sql}),
       ${rc.sql}${extra.sql}
       SELECT spent, ceiling FROM ses`,
    params: [p.amount, p.sessionId, p.now, p.amount, ...pay.params, ...led.params, ...rc.params, ...extra.params],
  };
}

/** A ledger payment refused before anything was written (reserve()'s refusal). */
export type LedgerRefusal = Extract<ReserveResult, { ok: false }>;

/**
 * The ledger rail lives in this database: its payment is paid in the change that commits it,
 * receipt signed beforehand. For a session without velocity limits, reservation, payment, spend
 * and receipt are one change (reserveAndPayLedger); when its guard refuses, or the session has
 * velocity limits (they need the transaction's reads), reserve() decides, and tells why it
 * refuses (pausing the session at a soft ceiling, recorded by `paused`), then payLedgerAndCommit.
 * The guards are reserve()'s and the commit's own. `committed: false` means reconcile settled the
 * reservation before the payment was made.
 */
export async function payLedgerInCommit(
  q: SqlDatabase,
  p: LedgerPaymentInput,
  record: CommitRecord = {},
  paused?: TxEffect<void>,
): Promise<CommitResult | LedgerRefusal> {
  if (p.chain) {
    const once = await reserveAndPayChain(q, p, p.chain, record);
    if (once.committed) return once;
  } else if (!p.velocity) {
    const once = await reserveAndPayLedger(q, p, record);
    // Refused by the guard: the reservation below says why, or pays after all when a
    // reservation was given back meanwhile.
    if (once.committed) return once;
  }
  const r = await reserve(q, p, paused);
  if (!r.ok) return r;
  return payLedgerAndCommit(q, { ...p, multi: p.chain !== undefined }, record);
}

/**
 * The ledger rail for a payment on several counters (ReserveInput.chain): every counter moved
 * by the one budget guard (guard.ts), the payment, the ledger row, the receipt and the spend, as
 * one change (one statement on PostgreSQL, one transaction on SQLite), so one commit per payment
 * as on a single counter. `committed: false`: a counter refused and nothing was written;
 * payLedgerInCommit then asks reserve() why (it may pause, or resume a window's pause).
 */
async function reserveAndPayChain(
  q: SqlDatabase,
  p: LedgerPaymentInput,
  chain: string[],
  record: CommitRecord,
): Promise<CommitResult> {
  const windows = p.chainWindows;
  if (!windows) {
    // Velocity limits need the transaction's reads (counters.ts reserveOnCounters).
    return changeWith(
      q,
      async (t) => {
        const r = await reserveOnCounters(t, { ...p, chain, spend: true });
        if (!r.ok) throw new Rollback(NOT_COMMITTED);
        await insertPaid(t, p, r.counters);
        return committed({ spent: r.spent.toString(), ceiling: r.ceiling.toString() }, p.amount);
      },
      afterEffects(record),
      { first: record.known?.effect },
    );
  }
  await ensureWindowRows(q, windows);
  const counters: PaymentCounters = { s: chain, w: windows.map((w) => [w.sessionId, w.every, w.startsAt]) };
  const guard: GuardInput = {
    chain,
    windows,
    amount: p.amount,
    now: p.now,
    column: 'spent',
    refuseFill: record.filled !== undefined,
  };
  if (q.dialect === 'postgres') {
    try {
      return await commitOnPostgres(
        q,
        p.sessionId,
        (extra) => reserveAndPayChainStatement(p, counters, guard, extra),
        p.amount,
        record,
      );
    } catch (e) {
      if ((e as { code?: unknown })?.code === CHAIN_REFUSED) return NOT_COMMITTED;
      throw e;
    }
  }
  return changeWith(
    q,
    async (t) => {
      const self = await moveCounters(t, guard);
      if (!self) throw new Rollback(NOT_COMMITTED);
      await insertPaid(t, p, counters);
      return committed(self, p.amount);
    },
    // The guard refused any payment that would fill a window (refuseFill): nothing for
    // `record.filled` to find, as on PostgreSQL's one statement.
    record.effect,
    { first: record.known?.effect },
  );
}

/** In a transaction: a ledger payment, paid, with its ledger row and receipt (`counters`: on a chain). */
async function insertPaid(t: SqlExecutor, p: LedgerPaymentInput, counters?: PaymentCounters) {
  const pay = paymentInsert({ ...p, paid: p, counters }, t.dialect === 'postgres');
  await t.run(pay.sql, pay.params);
  const led = ledgerInsert(p, 'values');
  await t.run(led.sql, led.params);
  await insertReceipt(t, p);
}

/**
 * PostgreSQL, one statement, for a chain without velocity limits: every counter moved by the
 * budget guard's CTEs (guard.ts counterCtes), and hanging on the last of them the payment, the
 * ledger row, the receipt, then `extra`. No row: the first counter refused and nothing was
 * written; a later refusal fails the statement (CHAIN_REFUSED), undoing the counters moved.
 */
function reserveAndPayChainStatement(
  p: LedgerPaymentInput,
  counters: PaymentCounters,
  guard: GuardInput,
  extra = NO_CTES,
): { sql: string; params: unknown[] } {
  const g = counterCtes(guard);
  const pay = paymentInsert({ ...p, paid: p, counters }, true, { cte: g.last, returning: 'session_id, amount' });
  const led = ledgerInsert(p, 'pay');
  const rc = receiptCtes(p);
  return {
    sql: `WITH ${g.sql},
       pay AS (${pay.sql}),
       led AS (${led.sql}),
       ${rc.sql}${extra.sql}
       ${g.select}`,
    params: [...g.params, ...pay.params, ...led.params, ...rc.params, ...extra.params],
  };
}

/**
 * The ledger rail for a session without velocity limits: reservation, payment, spend and receipt
 * as one change (one statement on PostgreSQL, one transaction on SQLite), with the same guard as
 * reserve() (state, expiry, ceiling) in the session row's UPDATE, so no check-then-set. One
 * change per payment instead of two: one commit, and the hot session row locked once.
 * `committed: false` means the guard refused and nothing was written.
 */
async function reserveAndPayLedger(
  q: SqlDatabase,
  p: LedgerPaymentInput,
  record: CommitRecord = {},
): Promise<CommitResult> {
  if (q.dialect === 'postgres')
    return commitOnPostgres(q, p.sessionId, (extra) => reserveAndPayStatement(p, extra), p.amount, record);
  return changeWith(
    q,
    async (t) => {
      const s = await t.get(
        `UPDATE gw_sessions SET spent = spent + ? WHERE id = ? AND state = 'active' AND expires_at ` +
          '> ? AND spent + reserved + ? <= ceiling RETURNING spent, ceiling',
        [p.amount, p.sessionId, p.now, p.amount],
      );
      if (!s) throw new Rollback(NOT_COMMITTED);
      await insertPaid(t, p);
      return committed(s, p.amount);
    },
    afterEffects(record),
    { first: record.known?.effect },
  );
}
