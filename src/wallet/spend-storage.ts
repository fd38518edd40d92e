/**
 * Spend is reserved atomically before anything is signed or paid (PROTOCOL.md §7): one `reserve`
 * that adds the amount only if the running total stays within the ceiling, keyed by an idempotency
 * id, then `commit` or `release`. There is no "read the total, then write it" anywhere.
 */

/**
 * When a reserved id may be forgotten (PROTOCOL.md §12): once `now` reaches `expiresAt` the SBA
 * it came from is expired, so a replay is refused by its expiry and the ledger need not remember
 * the id. The total is kept forever. Both in ms since the epoch; `now` is the caller's time
 * read against its time floor, so a clock set back does not make a forgotten id acceptable.
 */
export interface ReserveOptions {
  expiresAt?: number;
  now?: number;
  /** The whole ledger (a velocity window) means nothing once `now` reaches this: it may be dropped. */
  ledgerExpiresAt?: number;
}

/** `reserved`: added; `duplicate`: this id is already recorded (nothing added); `exceeded`: would pass the ceiling. */
export type ReserveResult = 'reserved' | 'duplicate' | 'exceeded';

/**
 * Where spend lives. Implement it over flash, SQLite, Redis… and run
 * `spendStorageConformance` (entry `ctl/testing`) against it.
 */
export interface SpendStorage {
  /**
   * Atomic: adds `amount` to `key`'s total iff total + amount ≤ ceiling. The same `id` twice is one
   * reservation. With `options`, an implementation may drop ids whose `expiresAt` ≤ `options.now`
   * (never earlier: a remembered id is what refuses a replay).
   */
  reserve(
    key: string,
    id: string,
    amount: bigint,
    ceiling: bigint,
    options?: ReserveOptions,
  ): Promise<ReserveResult> | ReserveResult;
  /** Makes a reservation final. Unknown ids are ignored (idempotent). */
  commit(key: string, id: string): Promise<void> | void;
  /** Gives a reservation back. Committed or unknown ids are left as they are (idempotent). */
  release(key: string, id: string): Promise<void> | void;
  /** Reserved + committed, in minor units. */
  total(key: string): Promise<bigint> | bigint;
  /**
   * Atomic over every counter (PROTOCOL.md §13): adds each counter's `amount` to its key's total
   * iff every total stays within its ceiling, else changes nothing and names the first key that
   * would pass. Ids are one namespace per storage, apart from the single-counter `reserve`: the
   * same `id` twice is one reservation (`duplicate`, nothing added), whatever the counters.
   * Optional: a storage without it cannot hold a grant with windows or a hold (refused, `unsupported_feature`).
   */
  reserveMany?(
    id: string,
    counters: readonly SpendCounter[],
    options?: ReserveManyOptions,
  ): Promise<ReserveManyResult> | ReserveManyResult;
  /**
   * Makes reservation `id` final, atomically. With `captured` (a hold's capture, PROTOCOL.md §15),
   * every amount counter keeps `captured` and gets the rest back; count counters stay as reserved.
   * `committed`: done now; `duplicate`: already committed (nothing changed: a second capture);
   * `unknown`: no such live reservation (released, or a hold released at its expiry by `now`);
   * `exceeded`: `captured` is above the reserved amount (nothing changed).
   */
  commitMany?(id: string, captured?: bigint, options?: { now?: number }): Promise<CommitManyResult> | CommitManyResult;
  /**
   * Gives reservation `id` back to every counter it was counted in, even a window that has since
   * ended (PROTOCOL.md §13), unless it is committed or unknown (then nothing changes: idempotent).
   */
  releaseMany?(id: string): Promise<void> | void;
}

/** One running total a reservation counts in (PROTOCOL.md §13: lifetime, each window, each ancestor). */
export interface SpendCounter {
  key: string;
  amount: bigint;
  ceiling: bigint;
  /** Counts payments, not money: a capture (PROTOCOL.md §15) leaves it as reserved. */
  count?: boolean;
  /** The whole counter (a window) means nothing once `now` reaches this: it may be dropped. */
  ledgerExpiresAt?: number;
}

export interface ReserveManyOptions {
  /** When the id may be forgotten (ms; PROTOCOL.md §12), judged against `now` of later calls. */
  expiresAt?: number;
  now?: number;
  /**
   * A hold (PROTOCOL.md §15): still uncommitted when `now` reaches `expiresAt`, it is released,
   * not kept (a plain reservation never committed stays counted: the safe direction).
   */
  hold?: boolean;
}

export type ReserveManyResult = { result: 'reserved' | 'duplicate' } | { result: 'exceeded'; key: string };
export type CommitManyResult = 'committed' | 'duplicate' | 'unknown' | 'exceeded';

/** Checks a counter list before a reserve touches anything. Throws RangeError. */
export function checkCounters(counters: readonly SpendCounter[]): void {
  if (!Array.isArray(counters) || counters.length === 0) throw new RangeError('reserveMany: counters must be a list');
  const seen = new Set<string>();
  for (const c of counters) {
    if (typeof c.key !== 'string' || seen.has(c.key)) throw new RangeError('reserveMany: each key at most once');
    seen.add(c.key);
    if (typeof c.amount !== 'bigint' || c.amount < 0n || typeof c.ceiling !== 'bigint')
      throw new RangeError('reserveMany: amount and ceiling must be bigints, amount ≥ 0');
    checkTime(c.ledgerExpiresAt, 'ledgerExpiresAt');
  }
}

/**
 * Time is a number or nothing (PROTOCOL.md §12): a `now` of NaN reads every id as expired (each
 * `expiresAt > now` is false), so it would forget every id and release every hold. Throws RangeError.
 */
export function checkTimes(options: { now?: number; expiresAt?: number } | undefined): void {
  checkTime(options?.now, 'now');
  checkTime(options?.expiresAt, 'expiresAt');
}

function checkTime(t: unknown, name: string): void {
  if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t)))
    throw new RangeError(`spend storage: ${name} must be a finite number of ms`);
}

/**
 * The capture of a reservation's amount counters at `captured`: the new amounts, or undefined
 * when `captured` is above one of them. Shared by the storages so they agree to the unit.
 */
export function capturedAmounts(
  parts: readonly { amount: bigint; count?: boolean }[],
  captured: bigint | undefined,
): bigint[] | undefined {
  if (captured === undefined) return parts.map((p) => p.amount);
  if (typeof captured !== 'bigint' || captured < 0n) throw new RangeError('commitMany: captured must be a bigint ≥ 0');
  if (parts.some((p) => !p.count && captured > p.amount)) return undefined;
  return parts.map((p) => (p.count ? p.amount : captured));
}

interface Ledger {
  total: bigint;
  entries: Map<string, { amount: bigint; committed: boolean; expiresAt?: number }>;
  /** Its size after the last full pass over it. */
  swept: number;
}

/**
 * Forgets the ids that can no longer be replayed, in amortized O(1) per call: ids mostly expire in
 * the order they came (one TTL per wallet or verifier), so expired ones are dropped from the front
 * until a live one; a full pass, whenever the ledger has doubled since the last, catches those out
 * of order (kept a little longer meanwhile, which only refuses a replay that expiry refuses anyway).
 */
function forgetExpired(l: Ledger, now: number): void {
  for (const [k, e] of l.entries) {
    if (e.expiresAt === undefined || e.expiresAt > now) break;
    l.entries.delete(k);
  }
  if (l.entries.size > 2 * l.swept + 64) {
    for (const [k, e] of l.entries) if (e.expiresAt !== undefined && e.expiresAt <= now) l.entries.delete(k);
    l.swept = l.entries.size;
  }
}

/**
 * The in-memory default: atomic because each call runs to completion on one JS thread.
 * @example const storage = createMemorySpendStorage(); await storage.reserve('g1', 'b1', 5n, 10n) // 'reserved'
 */
export function createMemorySpendStorage(): SpendStorage {
  const ledgers = new Map<string, Ledger>();
  const many = new Map<string, Reservation>(); // reserveMany's ids, in the order they came
  let manySwept = 0;
  const windows = new Map<string, number>(); // ledgers that end (velocity windows) → their end
  const ledger = (key: string) => {
    let l = ledgers.get(key);
    if (!l) ledgers.set(key, (l = { total: 0n, entries: new Map(), swept: 0 }));
    return l;
  };
  return {
    reserve(key, id, amount, ceiling, options) {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      checkTimes(options);
      checkTime(options?.ledgerExpiresAt, 'ledgerExpiresAt');
      const now = options?.now;
      // Windows that have ended are dropped whole: their totals no longer limit anything.
      if (now !== undefined) dropEnded(now);
      if (options?.ledgerExpiresAt !== undefined && !(now !== undefined && options.ledgerExpiresAt <= now))
        windows.set(key, options.ledgerExpiresAt);
      const l = ledger(key);
      // Forget ids that can no longer be replayed, so the ledger holds the live SBAs, not the history.
      if (now !== undefined) forgetExpired(l, now);
      if (l.entries.has(id)) return 'duplicate';
      if (l.total + amount > ceiling) return 'exceeded';
      l.total += amount;
      l.entries.set(id, { amount, committed: false, expiresAt: options?.expiresAt });
      return 'reserved';
    },
    commit(key, id) {
      const e = ledgers.get(key)?.entries.get(id);
      if (e) e.committed = true;
    },
    release(key, id) {
      const l = ledgers.get(key);
      const e = l?.entries.get(id);
      if (l && e && !e.committed) {
        l.total -= e.amount;
        l.entries.delete(id);
      }
    },
    total(key) {
      return ledgers.get(key)?.total ?? 0n;
    },
    reserveMany(id, counters, options) {
      checkCounters(counters);
      checkTimes(options);
      const now = options?.now;
      if (now !== undefined) {
        dropEnded(now);
        sweepMany(now);
      }
      if (many.has(id)) return { result: 'duplicate' };
      for (const c of counters)
        if ((ledgers.get(c.key)?.total ?? 0n) + c.amount > c.ceiling) return { result: 'exceeded', key: c.key };
      for (const c of counters) {
        if (c.ledgerExpiresAt !== undefined) windows.set(c.key, c.ledgerExpiresAt);
        ledger(c.key).total += c.amount;
      }
      many.set(id, {
        parts: counters.map((c) => ({ ledger: ledger(c.key), amount: c.amount, count: c.count })),
        committed: false,
        expiresAt: options?.expiresAt,
        hold: options?.hold === true,
      });
      return { result: 'reserved' };
    },
    commitMany(id, captured, options) {
      checkTimes(options);
      if (options?.now !== undefined) sweepMany(options.now);
      const r = many.get(id);
      if (!r) return 'unknown';
      if (r.committed) return 'duplicate';
      const now = options?.now;
      if (r.hold && r.expiresAt !== undefined && now !== undefined && r.expiresAt <= now) {
        giveBack(id, r); // out of order for the sweep, but expired all the same
        return 'unknown';
      }
      const next = capturedAmounts(r.parts, captured);
      if (!next) return 'exceeded';
      r.parts.forEach((p, i) => {
        p.ledger.total -= p.amount - next[i]!;
        p.amount = next[i]!;
      });
      r.committed = true;
      return 'committed';
    },
    releaseMany(id) {
      const r = many.get(id);
      if (r && !r.committed) giveBack(id, r);
    },
  };

  function dropEnded(now: number): void {
    for (const [k, end] of windows)
      if (end <= now) {
        windows.delete(k);
        ledgers.delete(k);
      }
  }
  /**
   * Returns a reservation to the ledgers it was counted in. A dropped window limits nothing any
   * more; one made again under its key (a clock stepped back) never counted this reservation.
   */
  function giveBack(id: string, r: Reservation): void {
    for (const p of r.parts) p.ledger.total -= p.amount;
    many.delete(id);
  }
  /** Forgets expired ids (PROTOCOL.md §12) and releases the holds never captured (§15). */
  function sweepMany(now: number): void {
    // Amortized as `forgetExpired`: from the front until a live id, a full pass when doubled.
    const full = many.size > 2 * manySwept + 64;
    for (const [id, r] of many) {
      if (r.expiresAt === undefined || r.expiresAt > now) {
        if (full) continue;
        break;
      }
      if (r.hold && !r.committed) giveBack(id, r);
      else many.delete(id);
    }
    if (full) manySwept = many.size;
  }
}

interface Reservation {
  /** The ledger objects, not their keys: what a release gives back goes where it was taken. */
  parts: { ledger: Ledger; amount: bigint; count?: boolean }[];
  committed: boolean;
  expiresAt?: number;
  hold: boolean;
}
