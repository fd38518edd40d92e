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
  const windows = new Map<string, number>(); // ledgers that end (velocity windows) → their end
  const ledger = (key: string) => {
    let l = ledgers.get(key);
    if (!l) ledgers.set(key, (l = { total: 0n, entries: new Map(), swept: 0 }));
    return l;
  };
  return {
    reserve(key, id, amount, ceiling, options) {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      const now = options?.now;
      // Windows that have ended are dropped whole: their totals no longer limit anything.
      if (now !== undefined)
        for (const [k, end] of windows)
          if (end <= now) {
            windows.delete(k);
            ledgers.delete(k);
          }
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
  };
}
