/**
 * Spend is reserved atomically before anything is signed or paid (PROTOCOL.md §7): one `reserve`
 * that adds the amount only if the running total stays within the ceiling, keyed by an idempotency
 * id, then `commit` or `release`. There is no "read the total, then write it" anywhere.
 */

/** `reserved`: added; `duplicate`: this id is already recorded (nothing added); `exceeded`: would pass the ceiling. */
export type ReserveResult = 'reserved' | 'duplicate' | 'exceeded';

/**
 * Where spend lives. Implement it over flash, SQLite, Redis… and run
 * `spendStorageConformance` (entry `ctl/testing`) against it.
 */
export interface SpendStorage {
  /** Atomic: adds `amount` to `key`'s total iff total + amount ≤ ceiling. The same `id` twice is one reservation. */
  reserve(key: string, id: string, amount: bigint, ceiling: bigint): Promise<ReserveResult> | ReserveResult;
  /** Makes a reservation final. Unknown ids are ignored (idempotent). */
  commit(key: string, id: string): Promise<void> | void;
  /** Gives a reservation back. Committed or unknown ids are left as they are (idempotent). */
  release(key: string, id: string): Promise<void> | void;
  /** Reserved + committed, in minor units. */
  total(key: string): Promise<bigint> | bigint;
}

interface Ledger {
  total: bigint;
  entries: Map<string, { amount: bigint; committed: boolean }>;
}

/**
 * The in-memory default: atomic because each call runs to completion on one JS thread.
 * @example const storage = createMemorySpendStorage(); await storage.reserve('g1', 'b1', 5n, 10n) // 'reserved'
 */
export function createMemorySpendStorage(): SpendStorage {
  const ledgers = new Map<string, Ledger>();
  const ledger = (key: string) => {
    let l = ledgers.get(key);
    if (!l) ledgers.set(key, (l = { total: 0n, entries: new Map() }));
    return l;
  };
  return {
    reserve(key, id, amount, ceiling) {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      const l = ledger(key);
      if (l.entries.has(id)) return 'duplicate';
      if (l.total + amount > ceiling) return 'exceeded';
      l.total += amount;
      l.entries.set(id, { amount, committed: false });
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
