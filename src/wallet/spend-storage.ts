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
   * same `id` twice is one reservation (`duplicate`, nothing added), whatever the counters, as long
   * as the id is remembered (see `ReserveManyOptions`).
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
   * A capture of 0 is a void. `committed`: done now; `duplicate`: already committed (nothing
   * changed: a second capture); `unknown`: no such live reservation (never reserved, released, or
   * a hold released at its `releaseAt` by `now`; with `captured`, any reservation not a hold, whose
   * id anyone can name from its SBA); `exceeded`: `captured` is above the reserved
   * amount (nothing changed).
   */
  commitMany?(id: string, captured?: bigint, options?: { now?: number }): Promise<CommitManyResult> | CommitManyResult;
  /**
   * Gives reservation `id` back to every counter it was counted in, even a window that has since
   * ended (PROTOCOL.md §13), and forgets the id (a payment that provably did not happen may be
   * made again), unless it is committed, released already or unknown (then nothing changes).
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

/**
 * When a reservation's id may be forgotten and what a hold does over time (PROTOCOL.md §12, §15).
 * Times in ms since the epoch, judged against the `now` of later calls.
 */
export interface ReserveManyOptions {
  /**
   * When the id may be forgotten: a reservation committed (or never committed, or a hold
   * released) is dropped once `now` reaches it; its amounts stay in the totals. Never earlier:
   * a remembered id is what refuses a replay. An uncaptured hold is never forgotten.
   */
  expiresAt?: number;
  now?: number;
  /**
   * A hold (PROTOCOL.md §15): captured later with `commitMany(id, captured)`. Until then it is
   * counted at its whole amount and its id is kept, whatever `expiresAt` says.
   */
  hold?: boolean;
  /**
   * For a hold: once `now` reaches it still uncaptured, it goes back to every counter it was
   * counted in (a merchant's ledger knows it captured nothing) and can no longer be captured
   * (`commitMany` answers `unknown`); its id is still kept until `expiresAt`. Without it, a hold
   * is settled only by `commitMany` or `releaseMany` (a wallet, which never knows the capture it
   * did not learn).
   */
  releaseAt?: number;
}

export type ReserveManyResult = { result: 'reserved' | 'duplicate' } | { result: 'exceeded'; key: string };
export type CommitManyResult = 'committed' | 'duplicate' | 'unknown' | 'exceeded';

export { capturedAmounts, checkCounters, checkTimes } from './spend-checks.js';
export { createMemorySpendStorage } from './memory-spend-storage.js';
