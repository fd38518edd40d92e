/**
 * The in-memory SpendStorage, the default of the wallet and the verifier: atomic because each call
 * runs to completion on one JS thread. It keeps what PROTOCOL.md §7, §12, §13 and §15 ask of any
 * storage: one reservation per id, each id until it can no longer be replayed, every total
 * forever, all counters of a payment or none, and holds until they are captured or, on a
 * merchant's ledger, until their `releaseAt`, to the millisecond.
 */
import type { SpendStorage } from './spend-storage.js';
import { capturedAmounts, checkCounters, checkTime, checkTimes } from './spend-checks.js';

interface Ledger {
  total: bigint;
  entries: Map<string, { amount: bigint; committed: boolean; expiresAt?: number }>;
  /** Its size after the last full pass over it. */
  swept: number;
}

interface Reservation {
  /** The ledger objects, not their keys: what a release gives back goes where it was taken. */
  parts: { ledger: Ledger; amount: bigint; count?: boolean }[];
  /** `released`: a hold given back at its `releaseAt`, its id still kept (a replay of it is refused). */
  state: 'reserved' | 'committed' | 'released';
  expiresAt?: number;
  hold: boolean;
  releaseAt?: number;
}

/**
 * Forgets the ids that can no longer be replayed, in amortized O(1) per call: ids mostly expire in
 * the order they came (one TTL per wallet or verifier), so expired ones are dropped from the front
 * until a live one; a full pass, whenever the map has doubled since the last, catches those out
 * of order (kept a little longer meanwhile, which only refuses a replay that expiry refuses anyway).
 * Only ids: what counts in a total never waits on this order (holds go back by `releaseDue`).
 */
function forgetFromFront<E>(
  entries: Map<string, E>,
  swept: number,
  forgettable: (e: E) => boolean,
): number | undefined {
  for (const [k, e] of entries) {
    if (!forgettable(e)) break;
    entries.delete(k);
  }
  if (entries.size <= 2 * swept + 64) return undefined;
  for (const [k, e] of entries) if (forgettable(e)) entries.delete(k);
  return entries.size;
}

/** A binary min-heap of holds by `releaseAt`: each is given back at its own time, whatever came before it. */
interface Due {
  at: number;
  id: string;
  r: Reservation;
}
function push(heap: Due[], d: Due): void {
  heap.push(d);
  for (let i = heap.length - 1; i > 0;) {
    const p = (i - 1) >> 1;
    if (heap[p]!.at <= heap[i]!.at) break;
    [heap[p], heap[i]] = [heap[i]!, heap[p]!];
    i = p;
  }
}
function pop(heap: Due[]): Due {
  const top = heap[0]!;
  const last = heap.pop()!;
  if (heap.length > 0) {
    heap[0] = last;
    for (let i = 0; ;) {
      const [l, r] = [2 * i + 1, 2 * i + 2];
      let m = i;
      if (l < heap.length && heap[l]!.at < heap[m]!.at) m = l;
      if (r < heap.length && heap[r]!.at < heap[m]!.at) m = r;
      if (m === i) break;
      [heap[m], heap[i]] = [heap[i]!, heap[m]!];
      i = m;
    }
  }
  return top;
}

/**
 * @example const storage = createMemorySpendStorage(); await storage.reserve('g1', 'b1', 5n, 10n) // 'reserved'
 */
export function createMemorySpendStorage(): SpendStorage {
  const ledgers = new Map<string, Ledger>();
  const many = new Map<string, Reservation>(); // reserveMany's ids, in the order they came
  let manySwept = 0;
  const due: Due[] = []; // holds with a releaseAt, soonest first
  const windows = new Map<string, number>(); // ledgers that end (velocity and budget windows) → their end
  const ledger = (key: string) => {
    let l = ledgers.get(key);
    if (!l) ledgers.set(key, (l = { total: 0n, entries: new Map(), swept: 0 }));
    return l;
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
  function giveBack(r: Reservation): void {
    for (const p of r.parts) p.ledger.total -= p.amount;
  }
  /** Gives back every hold whose `releaseAt` has come, uncaptured (PROTOCOL.md §15); their ids stay. */
  function releaseDue(now: number): void {
    while (due.length > 0 && due[0]!.at <= now) {
      const { id, r } = pop(due);
      if (many.get(id) !== r || r.state !== 'reserved') continue; // captured, released or forgotten since
      giveBack(r);
      r.state = 'released';
    }
  }
  /** An id that can no longer be replayed and holds nothing back (PROTOCOL.md §12, §15). */
  const forgettable = (now: number) => (r: Reservation) =>
    r.expiresAt !== undefined && r.expiresAt <= now && !(r.hold && r.state === 'reserved');
  function sweepMany(now: number): void {
    releaseDue(now);
    manySwept = forgetFromFront(many, manySwept, forgettable(now)) ?? manySwept;
  }

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
      if (now !== undefined)
        l.swept =
          forgetFromFront(l.entries, l.swept, (e) => e.expiresAt !== undefined && e.expiresAt <= now) ?? l.swept;
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
      const hold = options?.hold === true;
      const r: Reservation = {
        parts: counters.map((c) => ({ ledger: ledger(c.key), amount: c.amount, count: c.count })),
        state: 'reserved',
        expiresAt: options?.expiresAt,
        hold,
        releaseAt: hold ? options?.releaseAt : undefined,
      };
      many.set(id, r);
      if (r.releaseAt !== undefined) push(due, { at: r.releaseAt, id, r });
      return { result: 'reserved' };
    },
    commitMany(id, captured, options) {
      checkTimes(options);
      if (options?.now !== undefined) sweepMany(options.now);
      const r = many.get(id);
      // A capture settles only a hold: a plain payment is committed whole (PROTOCOL.md §15).
      if (!r || r.state === 'released' || (captured !== undefined && !r.hold)) return 'unknown';
      if (r.state === 'committed') return 'duplicate';
      const next = capturedAmounts(r.parts, captured);
      if (!next) return 'exceeded';
      r.parts.forEach((p, i) => {
        p.ledger.total -= p.amount - next[i]!;
        p.amount = next[i]!;
      });
      r.state = 'committed';
      return 'committed';
    },
    releaseMany(id) {
      const r = many.get(id);
      if (!r || r.state !== 'reserved') return;
      giveBack(r);
      many.delete(id);
    },
  };
}
