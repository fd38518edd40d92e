/**
 * A SpendStorage (PROTOCOL.md §7) over the host ABI's byte storage, so an offline terminal's
 * counters (`offline-count:<grantId>`, `offline-amount:<grantId>`, `grant:<grantId>`) and a
 * vehicle wallet's spend survive a reboot. Each ledger is one record updated with
 * compare-and-set in a read-modify-CAS loop: there is no check-then-set, so two callers (two
 * QuickJS contexts, an interrupt, a second process on the same flash) cannot both take the
 * last unit of an allowance.
 *
 * Bounded on purpose: a ledger keeps at most `maxEntriesPerKey` ids (replay detection needs
 * them); a full ledger refuses further reservations (`exceeded`: fail closed, never forget an id).
 * A reservation never committed (power lost between reserve and commit) stays counted: the
 * safe direction for an exposure bound.
 */
import type { ByteStorage } from './abi.js';
import type { ReserveResult, SpendStorage } from '../src/wallet/spend-storage.js';
import { utf8Decode, utf8Encode } from '../src/encoding/utf8.js';

export interface KvSpendStorageOptions {
  /** Key prefix in the byte storage (default `spend/`). */
  prefix?: string;
  /** Ids a ledger keeps before it refuses more (default 1024). */
  maxEntriesPerKey?: number;
  /** CAS attempts before giving up under contention (default 64); then the call throws. */
  maxAttempts?: number;
}

/** One ledger as stored: total and [id, amount, committed] entries; amounts as decimal strings. */
interface Record_ {
  v: 1;
  total: string;
  entries: Array<[string, string, 0 | 1]>;
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

  /** Applies `change` to the ledger with CAS until it sticks; `change` returns undefined for "no write". */
  function update<T>(key: string, change: (r: Record_) => { next?: Record_; result: T }): T {
    const k = keyBytes(key);
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const raw = storage.get(k);
      const { next, result } = change(decode(raw));
      if (!next) return result;
      if (storage.compareAndSet(k, raw, encode(next))) return result;
    }
    throw new Error(`spend storage: compare-and-set on ${prefix + key} lost ${maxAttempts} times`);
  }

  return {
    reserve(key, id, amount, ceiling): ReserveResult {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      return update<ReserveResult>(key, (r) => {
        if (r.entries.some((e) => e[0] === id)) return { result: 'duplicate' };
        const total = BigInt(r.total) + amount;
        if (total > ceiling || r.entries.length >= maxEntries) return { result: 'exceeded' };
        return { next: { v: 1, total: total.toString(), entries: [...r.entries, [id, amount.toString(), 0]] }, result: 'reserved' };
      });
    },
    commit(key, id) {
      update(key, (r) => {
        const i = r.entries.findIndex((e) => e[0] === id);
        if (i < 0 || r.entries[i]![2] === 1) return { result: undefined };
        const entries = r.entries.slice();
        entries[i] = [id, entries[i]![1], 1];
        return { next: { ...r, entries }, result: undefined };
      });
    },
    release(key, id) {
      update(key, (r) => {
        const e = r.entries.find((x) => x[0] === id);
        if (!e || e[2] === 1) return { result: undefined };
        return {
          next: { v: 1, total: (BigInt(r.total) - BigInt(e[1])).toString(), entries: r.entries.filter((x) => x[0] !== id) },
          result: undefined,
        };
      });
    },
    total(key) {
      return BigInt(decode(storage.get(keyBytes(key))).total);
    },
  };
}
