/**
 * A SpendStorage (PROTOCOL.md §7) over the host ABI's byte storage, so an offline terminal's
 * counters (`offline-count:<grantId>`, `offline-amount:<grantId>`, `grant:<grantId>`) and a
 * vehicle wallet's spend survive a reboot. Each ledger is one record updated with
 * compare-and-set in a read-modify-CAS loop: there is no check-then-set, so two callers (two
 * QuickJS contexts, an interrupt, a second process on the same flash) cannot both take the
 * last unit of an allowance.
 *
 * Ledgers forget what can no longer be replayed (PROTOCOL.md §12): an id reserved with an
 * `expiresAt` is dropped by the first reservation whose (time-floored) `now` has passed it; the
 * total is kept forever. So a record holds the SBAs alive at once, not the history, and a write
 * is bounded in bytes whatever the number of payments. At most `maxEntriesPerKey` live ids: more
 * SBAs alive at once than that are refused (`exceeded`: fail closed, never forget a live id).
 * A reservation never committed (power lost between reserve and commit) stays counted: the
 * safe direction for an exposure bound.
 *
 * With a hardware monotonic counter (ABI `monotonicCounter`) every ledger write is bound to it:
 * a head record holds the counter value the stored ledgers correspond to, and a write first
 * checks that the head matches the counter. A restored flash snapshot carries an older head and
 * is refused (it would give back spent allowance). README.md § The offline exposure bound.
 */
import type { ByteStorage, MonotonicCounter } from './abi.js';
import type { ReserveOptions, ReserveResult, SpendStorage } from '../src/wallet/spend-storage.js';
import { utf8Decode, utf8Encode } from '../src/encoding/utf8.js';

export interface KvSpendStorageOptions {
  /** Key prefix in the byte storage (default `spend/`). */
  prefix?: string;
  /** Live (not yet expired) ids a ledger keeps before it refuses more (default 1024). */
  maxEntriesPerKey?: number;
  /** CAS attempts before giving up under contention (default 64); then the call throws. */
  maxAttempts?: number;
  /** A hardware monotonic counter to bind every ledger write to (snapshot restore detection). */
  counter?: MonotonicCounter;
  /** Where the counter value of the stored ledgers lives (default `ctl/spend-counter`). */
  counterKey?: string;
  /**
   * No head record yet: `bind` it to the counter now (default), or `refuse` (a device that bound
   * the head when it was provisioned: a missing head is then a deleted one).
   */
  onMissingHead?: 'bind' | 'refuse';
}

/** [id, amount, committed, expiresAt?]: amounts as decimal strings, expiresAt in ms. */
type Entry = [string, string, 0 | 1, number?];

/** One ledger as stored: total and live entries; `mc` the counter value it was written under. */
interface Record_ {
  v: 1;
  total: string;
  entries: Entry[];
  mc?: number;
}

const DEFAULT_COUNTER_KEY = 'ctl/spend-counter';

/** Writes the counter head when absent (at provisioning); returns the head. */
export function bindCounterHead(
  storage: ByteStorage,
  counter: MonotonicCounter,
  counterKey = DEFAULT_COUNTER_KEY,
): number {
  const k = utf8Encode(counterKey);
  const raw = storage.get(k);
  if (raw !== null) return Number(utf8Decode(raw));
  const c = counter.read();
  storage.compareAndSet(k, null, utf8Encode(String(c)));
  return Number(utf8Decode(storage.get(k)!));
}

const EMPTY: Record_ = { v: 1, total: '0', entries: [] };

function decode(bytes: Uint8Array | null): Record_ {
  if (bytes === null) return EMPTY;
  const r = JSON.parse(utf8Decode(bytes)) as Record_;
  // A corrupt record must not read as "nothing spent": refuse instead (the caller fails closed).
  if (r?.v !== 1 || typeof r.total !== 'string' || !/^(0|[1-9][0-9]*)$/.test(r.total) || !Array.isArray(r.entries)) {
    throw new Error('spend storage: corrupt ledger record');
  }
  return r;
}

const encode = (r: Record_): Uint8Array => utf8Encode(JSON.stringify(r));

/**
 * @example const spend = createKvSpendStorage(abi.storage); await verifyCtl(sba, { …, offline: true, spendStorage: spend })
 */
export function createKvSpendStorage(storage: ByteStorage, options: KvSpendStorageOptions = {}): SpendStorage {
  const prefix = options.prefix ?? 'spend/';
  const maxEntries = options.maxEntriesPerKey ?? 1024;
  const maxAttempts = options.maxAttempts ?? 64;
  const keyBytes = (key: string) => utf8Encode(prefix + key);
  const bind = options.counter
    ? counterBinding(
        storage,
        options.counter,
        options.counterKey ?? DEFAULT_COUNTER_KEY,
        options.onMissingHead ?? 'bind',
      )
    : undefined;

  /** Applies `change` to the ledger with CAS until it sticks; `change` returns undefined for "no write". */
  function update<T>(key: string, change: (r: Record_) => { next?: Record_; result: T }): T {
    const k = keyBytes(key);
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const raw = storage.get(k);
      const { next, result } = change(decode(raw));
      if (!next) return result;
      const c = bind?.check();
      if (c !== undefined) next.mc = c + 1;
      else delete next.mc;
      if (storage.compareAndSet(k, raw, encode(next))) {
        if (c !== undefined) bind!.advance(c);
        return result;
      }
    }
    throw new Error(`spend storage: compare-and-set on ${prefix + key} lost ${maxAttempts} times`);
  }

  return {
    reserve(key, id, amount, ceiling, o?: ReserveOptions): ReserveResult {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      const now = o?.now;
      const expiresAt = o?.expiresAt !== undefined && Number.isFinite(o.expiresAt) ? Math.ceil(o.expiresAt) : undefined;
      return update<ReserveResult>(key, (r) => {
        // Forgetting is only ever written together with a reservation: a refusal writes nothing.
        const live = now === undefined ? r.entries : r.entries.filter((e) => e[3] === undefined || e[3] > now);
        if (live.some((e) => e[0] === id)) return { result: 'duplicate' };
        const total = BigInt(r.total) + amount;
        if (total > ceiling || live.length >= maxEntries) return { result: 'exceeded' };
        const entry: Entry =
          expiresAt === undefined ? [id, amount.toString(), 0] : [id, amount.toString(), 0, expiresAt];
        return { next: { v: 1, total: total.toString(), entries: [...live, entry] }, result: 'reserved' };
      });
    },
    commit(key, id) {
      update(key, (r) => {
        const i = r.entries.findIndex((e) => e[0] === id);
        if (i < 0 || r.entries[i]![2] === 1) return { result: undefined };
        const entries = r.entries.slice();
        const e = entries[i]!;
        entries[i] = e[3] === undefined ? [id, e[1], 1] : [id, e[1], 1, e[3]];
        return { next: { ...r, entries }, result: undefined };
      });
    },
    release(key, id) {
      update(key, (r) => {
        const e = r.entries.find((x) => x[0] === id);
        if (!e || e[2] === 1) return { result: undefined };
        return {
          next: {
            v: 1,
            total: (BigInt(r.total) - BigInt(e[1])).toString(),
            entries: r.entries.filter((x) => x[0] !== id),
          },
          result: undefined,
        };
      });
    },
    total(key) {
      return BigInt(decode(storage.get(keyBytes(key))).total);
    },
  };
}

/**
 * The head record `counterKey` holds the counter value the stored ledgers were last written
 * under. Write order: ledger record, then head = c + 1, then the counter to c + 1. A power cut
 * after the ledger leaves head = counter (consistent); after the head, head = counter + 1, which
 * the next write completes. Anything else (an older head: a restored snapshot) is refused.
 * One writer at a time (the firmware serializes its requests). A missing head is bound on first
 * use, or refused when the owner bound it at provisioning (`onMissingHead: 'refuse'`).
 */
function counterBinding(
  storage: ByteStorage,
  counter: MonotonicCounter,
  counterKey: string,
  onMissing: 'bind' | 'refuse',
) {
  const k = utf8Encode(counterKey);
  const readHead = (): number | null => {
    const raw = storage.get(k);
    if (raw === null) return null;
    const n = Number(utf8Decode(raw));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error('spend storage: corrupt counter head');
    return n;
  };
  const readCounter = (): number => {
    const c = counter.read();
    if (!Number.isSafeInteger(c) || c < 0)
      throw new Error('spend storage: the monotonic counter returned no usable value');
    return c;
  };
  return {
    /** The counter value the next write builds on; throws when flash is older than the counter. */
    check(): number {
      let c = readCounter();
      let head = readHead();
      if (head === null) {
        if (onMissing === 'refuse')
          throw new Error('spend storage: the counter head record is missing: a restored or altered flash is refused');
        storage.put(k, utf8Encode(String(c)));
        head = c;
      }
      if (head === c + 1) c = counter.increment(); // finish a write cut short after its head
      if (head !== c) {
        throw new Error(
          `spend storage: flash ledgers are at counter ${head}, the hardware counter at ${c}: a restored or altered flash is refused`,
        );
      }
      return c;
    },
    advance(c: number): void {
      storage.put(k, utf8Encode(String(c + 1)));
      const after = counter.increment();
      if (after !== c + 1) throw new Error(`spend storage: the monotonic counter moved to ${after}, expected ${c + 1}`);
    },
  };
}
