/**
 * Several budget counters moved as one (PROTOCOL.md §13, §14): a payment of a session with
 * windows, or of a child session, counts in the lifetime total of the session and of every
 * ancestor, and in the current window of each of their windows. The reservation over all of them
 * is one transaction: the session rows of the chain are locked first, always in id order (FOR
 * UPDATE on PostgreSQL; SQLite's BEGIN IMMEDIATE holds its only write lock), then their window
 * rows, and every UPDATE repeats its own limit in its WHERE clause, so two instances racing never
 * pass any limit, and a refusal leaves nothing written. Commit and release take the same locks in
 * the same order and find the window rows a payment was counted in on the payment itself, so a
 * release returns the amount to a window that has since ended.
 */
import { randomBytes } from 'node:crypto';
import { formatTimestamp, windowAt } from '../../../src/index.js';
import type { SqlExecutor, Row } from '../../../service-kit/index.js';
import type { PausedWindow, SessionConfig, SessionWindow, WindowStanding } from '../../sessions/store.js';
import { forUpdate } from '../../../service-kit/row-lock.js';
import { formatMinor } from '../../../service-kit/money.js';
import { moveCounters } from './guard.js';

/** Where a payment was counted: the sessions of its chain and the window rows (session, every, start). */
export interface PaymentCounters {
  s: string[];
  w: [string, SessionWindow['every'], number][];
}

export type CounterRefusal =
  | 'session_revoked'
  | 'session_expired'
  | 'session_paused'
  | 'velocity_exceeded'
  | 'budget_exceeded'
  | 'window_exceeded';

export type CounterResult =
  | { ok: true; counters: PaymentCounters; spent: bigint; ceiling: bigint }
  | { ok: false; code: CounterRefusal; message: string; pausedNow?: boolean; resetsAt?: string };

export interface CounterReservation {
  paymentId: string;
  /** The paying session first, then each ancestor up to the root. */
  chain: string[];
  amount: bigint;
  /** The session's currency, for the amounts a refusal names. */
  currency: string;
  merchant: string;
  now: number;
  /** Spent at once instead of reserved: a payment made in the change that reserves it (the ledger). */
  spend?: boolean;
}

const HOUR = 3_600_000;

// Window rows known to exist (rows are never deleted; only committed inserts are added): made
// once per process, not per payment.
const made = new Set<string>();
const windowKey = (id: string, every: string, startsAt: number) => `${id}\u0000${every}\u0000${startsAt}`;
const DAY = 86_400_000;

interface ChainRow {
  id: string;
  state: string;
  expiresAt: number;
  ceiling: bigint;
  spent: bigint;
  reserved: bigint;
  softLimit: boolean;
  maxPerHour: number | null;
  maxPerMerchantDay: bigint | null;
  windows: SessionWindow[];
  windowsStart: number;
  pausedWindow: PausedWindow | null;
}

function chainRow(r: Row): ChainRow {
  const config = JSON.parse(r.config as string) as SessionConfig;
  return {
    id: r.id as string,
    state: r.state as string,
    expiresAt: Number(r.expires_at),
    ceiling: BigInt(r.ceiling as string),
    spent: BigInt(r.spent as string),
    reserved: BigInt(r.reserved as string),
    softLimit: r.soft_limit != null,
    maxPerHour: r.max_per_hour == null ? null : Number(r.max_per_hour),
    maxPerMerchantDay: r.max_per_merchant_day == null ? null : BigInt(r.max_per_merchant_day as string),
    windows: config.windows ?? [],
    windowsStart: r.windows_start == null ? Number(r.created_at) : Number(r.windows_start),
    pausedWindow: r.paused_window ? (JSON.parse(r.paused_window as string) as PausedWindow) : null,
  };
}

/**
 * PostgreSQL orders text by the database's collation (en_US, ICU: `_` and case are not code-point
 * order) while settleCounters and lockWindows lock in JavaScript's order: byte order ("C") here
 * keeps every path on the one order, so no lock cycle forms between them.
 */
const byteOrder = (t: SqlExecutor) => (t.dialect === 'postgres' ? ' COLLATE "C"' : '');

/** Locks the session rows of `ids` in id order (the one order every path takes) and reads them. */
async function lockSessions(t: SqlExecutor, ids: string[]): Promise<Map<string, ChainRow>> {
  const sorted = [...new Set(ids)].sort();
  const rows = await t.all(
    `SELECT id, state, expires_at, ceiling, spent, reserved, soft_limit, max_per_hour, max_per_merchant_day,
       config, windows_start, paused_window, created_at
     FROM gw_sessions WHERE id IN (${sorted.map(() => '?').join(', ')}) ORDER BY id${byteOrder(t)}${forUpdate(t)}`,
    sorted,
  );
  return new Map(rows.map((r) => [r.id as string, chainRow(r)]));
}

const pausedMessage = 'the session is paused at its soft ceiling; continue it with the continuation token';

/**
 * Reserves `amount` on every counter of the chain, inside the caller's transaction; nothing is
 * written when it refuses, except pausing the paying session at a soft limit (`pausedNow`).
 */
export async function reserveOnCounters(t: SqlExecutor, p: CounterReservation): Promise<CounterResult> {
  const money = (minor: bigint) => formatMinor(minor, p.currency);
  const rows = await lockSessions(t, p.chain);
  const self = rows.get(p.chain[0]!);
  if (!self) return { ok: false, code: 'session_revoked', message: 'no such session' };
  for (const id of p.chain) {
    const s = rows.get(id);
    const whose = id === self.id ? 'the session' : `its parent session ${id}`;
    if (!s || s.state === 'revoked')
      return { ok: false, code: 'session_revoked', message: `${whose} has been revoked` };
    if (s.state === 'expired' || s.expiresAt <= p.now)
      return { ok: false, code: 'session_expired', message: `${whose} has expired` };
    if (s.state === 'paused') {
      // A window's pause ends with the window (PROTOCOL.md §13): the next payment finds it active.
      if (s.pausedWindow && p.now >= s.pausedWindow.endsAt) {
        await t.run(
          `UPDATE gw_sessions SET state = 'active', paused_window = NULL, continuation_nonce = NULL
           WHERE id = ? AND state = 'paused'`,
          [id],
        );
        s.state = 'active';
      } else
        return { ok: false, code: 'session_paused', message: id === self.id ? pausedMessage : `${whose} is paused` };
    }
  }
  const velocity = await velocityRefusal(t, p.chain, rows, p);
  if (velocity) return velocity;

  for (const id of p.chain) {
    const s = rows.get(id)!;
    if (s.spent + s.reserved + p.amount <= s.ceiling) continue;
    if (id === self.id && s.softLimit) return pause(t, self.id, null);
    const [asked, left] = [money(p.amount), money(s.ceiling - s.spent - s.reserved)];
    return {
      ok: false,
      code: 'budget_exceeded',
      message:
        id === self.id
          ? `the payment of ${asked} exceeds the remaining budget of ${left}`
          : `the payment of ${asked} exceeds what its parent session ${id} has left (${left})`,
    };
  }

  const windows = await lockWindows(t, p.chain, rows, p.now);
  for (const w of windows) {
    const amountFull = w.spent + w.reserved + p.amount > w.maxAmount;
    const countFull = w.maxPayments !== null && w.payments + 1n > w.maxPayments;
    if (!amountFull && !countFull) continue;
    if (w.sessionId === self.id && self.softLimit)
      return pause(t, self.id, { every: w.every, startsAt: w.startsAt, endsAt: w.endsAt }, self.expiresAt);
    const whose = w.sessionId === self.id ? 'this session' : `its parent session ${w.sessionId}`;
    const full = amountFull
      ? `the payment of ${money(p.amount)} exceeds what the ${w.every} window of ${whose} has left ` +
        `(${money(w.maxAmount - w.spent - w.reserved)})`
      : `the ${w.every} window of ${whose} allows ${w.maxPayments} payments`;
    // A reset after the paying session's end (the earliest of its chain) is no time to come back.
    if (w.endsAt >= self.expiresAt)
      return {
        ok: false,
        code: 'window_exceeded',
        message:
          `${full}; it resets at ${formatTimestamp(w.endsAt)}, ` +
          `after this session ends at ${formatTimestamp(self.expiresAt)}`,
      };
    return { ok: false, code: 'window_exceeded', message: full, resetsAt: formatTimestamp(w.endsAt) };
  }

  // The one budget guard (guard.ts): every bound repeated in the WHERE clause of its counter's
  // UPDATE, so whatever was read above, no counter can pass its bound; a guard that fails
  // throws, and the transaction rolls back.
  const moved = await moveCounters(t, {
    chain: p.chain,
    windows,
    amount: p.amount,
    now: p.now,
    column: p.spend ? 'spent' : 'reserved',
  });
  if (!moved) throw new Error(`reservation guard failed for the chain of session ${self.id}`);
  return {
    ok: true,
    counters: { s: p.chain, w: windows.map((w) => [w.sessionId, w.every, w.startsAt]) },
    spent: self.spent + (p.spend ? p.amount : 0n),
    ceiling: self.ceiling,
  };
}

/**
 * PROTOCOL.md §8 velocity of every session of the chain: a session's limits count the payments of
 * its descendants too (paymentsOf), so sub-agents never widen them (§14). Every ancestor's row is
 * locked by any payment below it, so the counts cannot race.
 */
async function velocityRefusal(
  t: SqlExecutor,
  chain: string[],
  rows: Map<string, ChainRow>,
  p: CounterReservation,
): Promise<Extract<CounterResult, { ok: false }> | undefined> {
  for (const id of chain) {
    const s = rows.get(id)!;
    if (s.maxPerHour === null && s.maxPerMerchantDay === null) continue;
    const whose = id === chain[0] ? '' : ` (its parent session ${id})`;
    const v = await velocityUsed(t, id, p.merchant, p.now);
    if (s.maxPerHour !== null && v.hourCount >= s.maxPerHour)
      return { ok: false, code: 'velocity_exceeded', message: `at most ${s.maxPerHour} payments per hour${whose}` };
    if (s.maxPerMerchantDay !== null && v.merchantDay + p.amount > s.maxPerMerchantDay)
      return {
        ok: false,
        code: 'velocity_exceeded',
        message: `at most ${formatMinor(s.maxPerMerchantDay, p.currency)} per merchant per day${whose}`,
      };
  }
  return undefined;
}

/**
 * What a session's velocity limits have used (PROTOCOL.md §8): payments in the last hour, and
 * to `merchant` in the last day, of the session and of every session below it (§14).
 */
export async function velocityUsed(
  t: SqlExecutor,
  id: string,
  merchant: string,
  now: number,
): Promise<{ hourCount: number; merchantDay: bigint }> {
  const of = await paymentsOf(t, id);
  const c = await t.get<{ n: unknown }>(
    `SELECT COUNT(*) AS n FROM gw_payments WHERE ${of.sql} AND created_at > ? AND state <> 'released'`,
    [...of.params, now - HOUR],
  );
  const m = await t.get<{ total: unknown }>(
    `SELECT COALESCE(SUM(amount), 0) AS total FROM gw_payments
     WHERE ${of.sql} AND merchant = ? AND created_at > ? AND state <> 'released'`,
    [...of.params, merchant, now - DAY],
  );
  return { hourCount: Number(c?.n ?? 0), merchantDay: BigInt(String(m?.total ?? 0)) };
}

/** The payments of a session and its descendants: only its own while it has no child session. */
async function paymentsOf(t: SqlExecutor, id: string): Promise<{ sql: string; params: unknown[] }> {
  const child = await t.get(`SELECT 1 AS x FROM gw_sessions WHERE parent_id = ? LIMIT 1`, [id]);
  if (!child) return { sql: 'session_id = ?', params: [id] };
  const contains = t.dialect === 'postgres' ? 'strpos' : 'instr';
  return {
    sql: `session_id IN (SELECT id FROM gw_sessions
      WHERE owner_id = (SELECT owner_id FROM gw_sessions WHERE id = ?) AND (id = ? OR ${contains}(path, ?) > 0))`,
    params: [id, id, `/${id}/`],
  };
}

/**
 * Pauses the paying session at a soft limit: its ceiling, or (with `window`) one window until it
 * ends; a window that ends after the session (`endsAt`) resumes nothing by itself.
 */
async function pause(
  t: SqlExecutor,
  id: string,
  window: PausedWindow | null,
  endsAt = Infinity,
): Promise<CounterResult> {
  const r = await t.run(
    `UPDATE gw_sessions SET state = 'paused', continuation_nonce = ?, paused_window = ?
     WHERE id = ? AND state = 'active'`,
    [randomBytes(16).toString('base64url'), window ? JSON.stringify(window) : null, id],
  );
  return {
    ok: false,
    code: 'session_paused',
    message: !window
      ? 'the payment would cross the soft ceiling: the session is paused'
      : window.endsAt < endsAt
        ? `the payment would cross the soft limit of the ${window.every} window: ` +
          `the session is paused until ${formatTimestamp(window.endsAt)}`
        : `the payment would cross the soft limit of the ${window.every} window: the session is paused, and ` +
          `the window resets only after the session ends at ${formatTimestamp(endsAt)}`,
    pausedNow: r.changes === 1,
    // Kept after the session's end too: it says the pause is the window's (the SDK's pauseKind).
    ...(window ? { resetsAt: formatTimestamp(window.endsAt) } : {}),
  };
}

/** A window row: the standing the session views show, with its session. */
interface WindowRow extends WindowStanding {
  sessionId: string;
}

/**
 * The current window row of every window of the chain, made when missing (its limits copied from
 * the session's configuration) and locked, in (session, every) order. The session rows are
 * already locked, so no other payment of these sessions is between the insert and the read.
 */
async function lockWindows(
  t: SqlExecutor,
  chain: string[],
  rows: Map<string, ChainRow>,
  now: number,
): Promise<WindowRow[]> {
  const out: WindowRow[] = [];
  for (const id of [...chain].sort()) {
    const s = rows.get(id)!;
    for (const w of [...s.windows].sort((a, b) => (a.every < b.every ? -1 : 1))) {
      const span = windowAt(w.every, s.windowsStart, now);
      const read = () =>
        t.get(`SELECT * FROM gw_session_windows WHERE session_id = ? AND every = ? AND starts_at = ?${forUpdate(t)}`, [
          id,
          w.every,
          span.startsAt,
        ]);
      // A row known to exist is only read; otherwise made first (the session rows are locked).
      let r = made.has(windowKey(id, w.every, span.startsAt)) ? await read() : undefined;
      if (!r) {
        await t.run(
          `INSERT INTO gw_session_windows (session_id, every, starts_at, ends_at, max_amount, max_payments)
           VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
          [id, w.every, span.startsAt, span.endsAt, BigInt(w.maxAmountMinor), w.maxPayments ?? null],
        );
        r = await read();
      }
      out.push(toWindowRow(r!));
    }
  }
  return out;
}

export function toWindowRow(r: Row): WindowRow {
  return {
    sessionId: r.session_id as string,
    every: r.every as SessionWindow['every'],
    startsAt: Number(r.starts_at),
    endsAt: Number(r.ends_at),
    maxAmount: BigInt(r.max_amount as string),
    maxPayments: r.max_payments == null ? null : BigInt(r.max_payments as string),
    spent: BigInt(r.spent as string),
    reserved: BigInt(r.reserved as string),
    payments: BigInt(r.payments as string),
  };
}

/**
 * Settles a payment on every counter it reserved, inside the caller's transaction (after its
 * payment row moved): `captured` spent (a capture below the hold gives the rest back; PROTOCOL.md
 * §15) and `held` no longer reserved; a release is a capture of nothing that also takes the
 * payment out of its windows' counts. Same lock order as the reservation. Returns the paying
 * session's new spent total and ceiling.
 */
export async function settleCounters(
  t: SqlExecutor,
  counters: PaymentCounters,
  held: bigint,
  captured: bigint | 'released',
): Promise<{ spent: bigint; ceiling: bigint }> {
  const spend = captured === 'released' ? 0n : captured;
  let self = { spent: 0n, ceiling: 0n };
  for (const id of [...counters.s].sort()) {
    const r = await t.get(
      `UPDATE gw_sessions SET spent = spent + ?, reserved = reserved - ? WHERE id = ? RETURNING spent, ceiling`,
      [spend, held, id],
    );
    if (id === counters.s[0] && r) self = { spent: BigInt(r.spent as string), ceiling: BigInt(r.ceiling as string) };
  }
  const key = (w: PaymentCounters['w'][number]) => `${w[0]}\u0000${w[1]}`;
  const keys = [...counters.w].sort((a, b) => (key(a) < key(b) ? -1 : 1));
  for (const [id, every, startsAt] of keys) {
    await t.run(
      `UPDATE gw_session_windows SET spent = spent + ?, reserved = reserved - ?, payments = payments - ?
       WHERE session_id = ? AND every = ? AND starts_at = ?`,
      [spend, held, captured === 'released' ? 1 : 0, id, every, startsAt],
    );
  }
  return self;
}

/**
 * The windows a committed payment counted in that are now full (PROTOCOL.md §13): no amount or no
 * payment left, and no other payment still reserved in them, so of the payments that filled a
 * window only the commit that settles the last one finds it (a release after a fill makes room).
 * Inside the commit's transaction, after its counters moved.
 */
export async function filledWindows(
  q: SqlExecutor,
  paymentId: string,
): Promise<(WindowRow & { webhookUrl: string | null })[]> {
  const pay = await q.get<{ counters: string | null }>(`SELECT counters FROM gw_payments WHERE id = ?`, [paymentId]);
  const out = [];
  for (const [id, every, startsAt] of pay?.counters ? (JSON.parse(pay.counters) as PaymentCounters).w : []) {
    const r = await q.get(
      `SELECT w.*, s.webhook_url FROM gw_session_windows w JOIN gw_sessions s ON s.id = w.session_id
       WHERE w.session_id = ? AND w.every = ? AND w.starts_at = ?`,
      [id, every, startsAt],
    );
    if (!r) continue;
    const w = toWindowRow(r);
    const full = w.spent >= w.maxAmount || (w.maxPayments !== null && w.payments >= w.maxPayments);
    if (full && w.reserved === 0n) out.push({ ...w, webhookUrl: (r.webhook_url as string | null) ?? null });
  }
  return out;
}

/** The current window of each of a session's windows, as it stands (zero when no payment opened it). */
export async function currentWindows(
  q: SqlExecutor,
  s: { id: string; windows: SessionWindow[]; windowsStart: number },
  now: number,
): Promise<(WindowRow & { maxAmountConfigured: bigint })[]> {
  const out = [];
  for (const w of s.windows) {
    const span = windowAt(w.every, s.windowsStart, now);
    const r = await q.get(`SELECT * FROM gw_session_windows WHERE session_id = ? AND every = ? AND starts_at = ?`, [
      s.id,
      w.every,
      span.startsAt,
    ]);
    const row: WindowRow = r
      ? toWindowRow(r)
      : {
          sessionId: s.id,
          every: w.every,
          startsAt: span.startsAt,
          endsAt: span.endsAt,
          maxAmount: BigInt(w.maxAmountMinor),
          maxPayments: w.maxPayments === undefined ? null : BigInt(w.maxPayments),
          spent: 0n,
          reserved: 0n,
          payments: 0n,
        };
    out.push({ ...row, maxAmountConfigured: BigInt(w.maxAmountMinor) });
  }
  return out;
}

/** One window row a payment at some time counts in, with the limits a new row starts with. */
export interface ChainWindow {
  sessionId: string;
  every: SessionWindow['every'];
  startsAt: number;
  endsAt: number;
  maxAmount: bigint;
  maxPayments: number | null;
}

/** The windows of every session of `chain` and where they start (they never change once made). */
export async function windowsOfChain(
  q: SqlExecutor,
  chain: string[],
): Promise<{ id: string; windows: SessionWindow[]; windowsStart: number | null }[]> {
  const rows = await q.all<{ id: string; config: string; windows_start: unknown }>(
    `SELECT id, config, windows_start FROM gw_sessions WHERE id IN (${chain.map(() => '?').join(', ')})`,
    chain,
  );
  return rows.map((r) => ({
    id: r.id,
    windows: (JSON.parse(r.config) as SessionConfig).windows ?? [],
    windowsStart: r.windows_start == null ? null : Number(r.windows_start),
  }));
}

/** The current window of every window of `sessions` (a chain) at `now`. */
export function chainWindowKeys(
  sessions: { id: string; windows: SessionWindow[]; windowsStart: number | null }[],
  now: number,
): ChainWindow[] {
  const out: ChainWindow[] = [];
  for (const s of sessions)
    for (const w of s.windows) {
      const span = windowAt(w.every, s.windowsStart ?? 0, now);
      out.push({
        sessionId: s.id,
        every: w.every,
        startsAt: span.startsAt,
        endsAt: span.endsAt,
        maxAmount: BigInt(w.maxAmountMinor),
        maxPayments: w.maxPayments ?? null,
      });
    }
  return out;
}

/**
 * Makes the window rows a payment will count in, zero and with their configured limits, when
 * missing: a statement of its own, before any lock is taken; it moves no money.
 */
export async function ensureWindowRows(q: SqlExecutor, rows: ChainWindow[]): Promise<void> {
  const missing = rows.filter((r) => !made.has(windowKey(r.sessionId, r.every, r.startsAt)));
  if (missing.length === 0) return;
  await q.run(
    `INSERT INTO gw_session_windows (session_id, every, starts_at, ends_at, max_amount, max_payments)
     VALUES ${missing.map(() => '(?, ?, ?, ?, ?, ?)').join(', ')} ON CONFLICT DO NOTHING`,
    missing.flatMap((r) => [r.sessionId, r.every, r.startsAt, r.endsAt, r.maxAmount, r.maxPayments]),
  );
  if (made.size > 100_000) made.clear();
  for (const r of missing) made.add(windowKey(r.sessionId, r.every, r.startsAt));
}
