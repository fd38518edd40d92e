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
 *
 * The multi-counter reserve (PROTOCOL.md §13: lifetime, windows, offline allowance in one step)
 * keeps every counter it touches in one record (`manyKey`), so one compare-and-set changes all
 * of them or none: the ABI has no transaction over several keys. A counter's own record is first
 * marked `moved` (its total and ids carried into the shared record); single-counter calls on a
 * moved counter are refused, never split. The shared record is a working set: the live
 * reservations (at most `maxEntriesPerKey`), the windows until a day after they end, and the
 * counters those use; a counter no live reservation uses goes back to its own record (spilled),
 * so a write stays bounded in bytes whatever the history (PROTOCOL.md §12).
 * Where a counter's total is: the shared record when it is there, else its own record. A spill
 * writes the own record stamped with the shared record's version `n` it read (a stamp only ever
 * rises), then removes the counter only if the shared record is still at that version: a
 * spiller that read an older version can never overwrite the truth.
 */
import type { ByteStorage, MonotonicCounter } from './abi.js';
import type {
  CommitManyResult,
  ReserveManyResult,
  ReserveOptions,
  ReserveResult,
  SpendCounter,
  SpendStorage,
} from '../src/index.js';
import { capturedAmounts, checkCounters, checkTimes, utf8Decode, utf8Encode } from '../src/index.js';

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
  /** Where the counters of the multi-counter reserve live (default `ctl/spend-many`). */
  manyKey?: string;
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
  /** Kept by the multi-counter record since (its total and ids were carried there). */
  moved?: 1;
  /** The version of the multi-counter record this total was spilled from. */
  n?: number;
}

/** [counter's short id, amount, count]: one counter a reservation counts in; count 1 for a payment count. */
type Part = [number, string, 0 | 1];
/**
 * [id, parts, state, expiresAt or null, hold, releaseAt or null]. State 0 reserved, 1 committed,
 * 2 a hold released at its `releaseAt` (given back, its id kept until `expiresAt`). `releaseAt`
 * only for a hold, null when only a capture or a release settles it; a record written before
 * it existed (five members) released its hold at `expiresAt`, and still does.
 */
type Reservation = [string, Part[], 0 | 1 | 2, number | null, 0 | 1, (number | null)?];

/** When an uncaptured hold goes back by itself, if ever. */
const releaseAtOf = (r: Reservation): number | null => (r[4] !== 1 ? null : r.length > 5 ? (r[5] ?? null) : r[3]);

/**
 * The multi-counter record: each counter's [total, ends or null, short id] and the live
 * reservations, oldest first, naming counters by short id (keys are long; a record is written per payment).
 */
interface ManyRecord {
  v: 1;
  /** Raised by every write. */
  n: number;
  c: Record<string, [string, number | null, number]>;
  /** The next short id. */
  s: number;
  r: Reservation[];
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

const encode = (r: Record_ | ManyRecord): Uint8Array => utf8Encode(JSON.stringify(r));

const EMPTY_MANY: ManyRecord = { v: 1, n: 0, c: {}, s: 0, r: [] };
/** Counters spilled per call at most: spilling is housekeeping, bounded like the rest of a write. */
const SPILL_PER_CALL = 4;

function decodeMany(bytes: Uint8Array | null): ManyRecord {
  if (bytes === null) return EMPTY_MANY;
  const m = JSON.parse(utf8Decode(bytes)) as ManyRecord;
  if (
    m?.v !== 1 ||
    !Number.isSafeInteger(m.n) ||
    !Number.isSafeInteger(m.s) ||
    typeof m.c !== 'object' ||
    m.c === null ||
    !Array.isArray(m.r)
  ) {
    throw new Error('spend storage: corrupt multi-counter record');
  }
  for (const k of Object.keys(m.c)) {
    const t = m.c[k]?.[0];
    if (typeof t !== 'string' || !/^(0|[1-9][0-9]*)$/.test(t)) throw new Error('spend storage: corrupt counter');
  }
  return m;
}

/** A copy to change: counters and reservations are replaced, never edited in place. */
const copyMany = (m: ManyRecord): ManyRecord => ({ v: 1, n: m.n + 1, c: { ...m.c }, s: m.s, r: m.r.slice() });

/** The key of the counter with short id `sid`, if the record still keeps it. */
function keyOf(m: ManyRecord, sid: number): string | undefined {
  for (const k in m.c) if (m.c[k]![2] === sid) return k;
  return undefined;
}

/** Adds a counter with its total, giving it the next short id. */
function keepCounter(m: ManyRecord, key: string, total: string, ends: number | undefined): void {
  m.c[key] = [total, ends ?? null, m.s++];
}

/** The counters of `m` that no reservation uses, have no end and are not in `keep`. */
function idle(m: ManyRecord, keep: ReadonlySet<string>): string[] {
  const used = new Set(keep);
  for (const r of m.r) for (const p of r[1]) used.add(keyOf(m, p[0]) ?? '');
  return Object.keys(m.c).filter((k) => m.c[k]![1] === null && !used.has(k));
}

/**
 * A reservation id as stored: `<first key>|<rest>` (the scoping `reserveAll` gives) is kept as
 * `|<rest>` when the first counter has no end (so it stays while the reservation lives): the
 * record is written per payment and keys are long.
 */
function packId(id: string, first: SpendCounter): string {
  const scope = first.key + '|';
  return first.ledgerExpiresAt === undefined && id.startsWith(scope) ? id.slice(scope.length - 1) : escapeId(id);
}

/** An id kept whole: one starting with `|` or `~` gets a `~` before it, so it never reads as packed. */
const escapeId = (id: string): string => (id.startsWith('|') || id.startsWith('~') ? '~' + id : id);

/** The full id of a stored reservation. */
function idOf(m: ManyRecord, r: Reservation): string {
  if (r[0].startsWith('~')) return r[0].slice(1);
  if (!r[0].startsWith('|')) return r[0];
  return (keyOf(m, r[1][0]![0]) ?? '') + r[0];
}

/** Adds `delta` to a counter still kept (a dropped window limits nothing any more). */
function addTo(m: ManyRecord, sid: number, delta: bigint): void {
  const key = keyOf(m, sid);
  if (key === undefined) return;
  const c = m.c[key]!;
  m.c[key] = [(BigInt(c[0]) + delta).toString(), c[1], c[2]];
}

/**
 * Drops windows that have ended and ids that can no longer be replayed (PROTOCOL.md §12); a hold
 * still uncaptured at its `releaseAt` goes back to its counters, its id kept until it expires
 * (§15); an uncaptured hold without one is kept. Every record is looked at: none waits behind
 * another. Returns whether anything changed.
 */
function sweep(m: ManyRecord, now: number): boolean {
  let changed = false;
  for (const k of Object.keys(m.c)) {
    const ends = m.c[k]![1];
    if (ends !== null && ends <= now) {
      delete m.c[k];
      changed = true;
    }
  }
  const live: Reservation[] = [];
  for (let r of m.r) {
    const releaseAt = releaseAtOf(r);
    if (r[2] === 0 && releaseAt !== null && releaseAt <= now) {
      for (const p of r[1]) addTo(m, p[0], -BigInt(p[1]));
      r = [r[0], r[1], 2, r[3], 1, releaseAt];
      changed = true;
    }
    const heldOpen = r[4] === 1 && r[2] === 0;
    if (r[3] === null || r[3] > now || heldOpen) live.push(r);
    else changed = true;
  }
  m.r = live;
  return changed;
}

/**
 * @example const spend = createKvSpendStorage(abi.storage); await verifyCtl(sba, { …, offline: true, spendStorage:
 * spend })
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

  const manyBytes = utf8Encode(options.manyKey ?? 'ctl/spend-many');

  /** Applies `change` to the ledger with CAS until it sticks; `change` returns undefined for "no write". */
  function update<T>(key: string, change: (r: Record_) => { next?: Record_; result: T }): T {
    return updateRecord(keyBytes(key), prefix + key, decode, change);
  }

  function updateRecord<R extends Record_ | ManyRecord, T>(
    k: Uint8Array,
    label: string,
    read: (b: Uint8Array | null) => R,
    change: (r: R) => { next?: R; result: T },
  ): T {
    for (let attempt = 0; attempt < maxAttempts; attempt++) {
      const raw = storage.get(k);
      const { next, result } = change(read(raw));
      if (!next) return result;
      const c = bind?.check();
      if (c !== undefined) next.mc = c + 1;
      else delete next.mc;
      if (storage.compareAndSet(k, raw, encode(next))) {
        if (c !== undefined) bind!.advance(c);
        return result;
      }
    }
    throw new Error(`spend storage: compare-and-set on ${label} lost ${maxAttempts} times`);
  }

  /** A single-counter call on a counter the multi-counter record keeps would split it: refused. */
  const single = (r: Record_, key: string): Record_ => {
    if (r.moved)
      throw new Error(`spend storage: ${key} is kept by reserveMany; single-counter calls on it are refused`);
    return r;
  };

  /**
   * Marks the own record of each counter not yet in the shared record `moved`, so no
   * single-counter call changes it any more. Idempotent.
   */
  function moveIn(keys: readonly string[]): void {
    const held = decodeMany(storage.get(manyBytes)).c;
    for (const key of keys) {
      if (held[key]) continue;
      update(key, (r) => (r.moved ? { result: undefined } : { next: { ...r, moved: 1 as const }, result: undefined }));
    }
  }

  /**
   * Carries a moved record's total and ids into the shared record (ids keep refusing replays).
   * Called only for a counter absent from the shared record, so an id is never carried twice.
   * Read inside the shared record's compare-and-set: a spill of this counter in the meantime
   * changes the shared record too, so this one fails and is done again from the new values.
   */
  function carry(m: ManyRecord, key: string, ends: number | undefined): void {
    const r = decode(storage.get(keyBytes(key)));
    keepCounter(m, key, r.total, ends);
    const sid = m.c[key]![2];
    // A single-counter id was scoped by its key; so is the id `reserveAll` gives (`<key>|<id>`).
    for (const e of r.entries) m.r.push([escapeId(`${key}|${e[0]}`), [[sid, e[1], 0]], e[2], e[3] ?? null, 0]);
  }

  /** Writes idle counters' totals to their own records, stamped with the version they were read at. */
  function spillOut(keep: ReadonlySet<string>, now: number): { version: number; keys: string[] } {
    const m = decodeMany(storage.get(manyBytes));
    const probe = { ...m, c: { ...m.c }, r: m.r.slice() };
    sweep(probe, now);
    const keys = idle(probe, keep).slice(0, SPILL_PER_CALL);
    for (const key of keys) {
      const total = probe.c[key]![0];
      update(key, (r) =>
        (r.n ?? -1) >= m.n
          ? { result: undefined }
          : { next: { v: 1, total, entries: [], moved: 1, n: m.n }, result: undefined },
      );
    }
    return { version: m.n, keys };
  }

  /** Drops the spilled counters from `m` when it is still the version they were read at. */
  function dropSpilled(
    m0: ManyRecord,
    m: ManyRecord,
    spilled: { version: number; keys: string[] },
    keep: ReadonlySet<string>,
  ): void {
    if (m0.n !== spilled.version) return;
    const idleNow = new Set(idle(m, keep));
    for (const key of spilled.keys) {
      const own = decode(storage.get(keyBytes(key)));
      if (idleNow.has(key) && own.n === spilled.version && own.total === m.c[key]?.[0]) delete m.c[key];
    }
  }

  const updateMany = <T>(change: (m: ManyRecord) => { next?: ManyRecord; result: T }): T =>
    updateRecord(manyBytes, 'the multi-counter record', decodeMany, change);

  return {
    reserve(key, id, amount, ceiling, o?: ReserveOptions): ReserveResult {
      if (typeof amount !== 'bigint' || amount < 0n) throw new RangeError('reserve: amount must be a bigint ≥ 0');
      checkTimes(o);
      const now = o?.now;
      const expiresAt = o?.expiresAt !== undefined && Number.isFinite(o.expiresAt) ? Math.ceil(o.expiresAt) : undefined;
      return update<ReserveResult>(key, (r0) => {
        const r = single(r0, key);
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
      update(key, (r0) => {
        const r = single(r0, key);
        const i = r.entries.findIndex((e) => e[0] === id);
        if (i < 0 || r.entries[i]![2] === 1) return { result: undefined };
        const entries = r.entries.slice();
        const e = entries[i]!;
        entries[i] = e[3] === undefined ? [id, e[1], 1] : [id, e[1], 1, e[3]];
        return { next: { ...r, entries }, result: undefined };
      });
    },
    release(key, id) {
      update(key, (r0) => {
        const r = single(r0, key);
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
      const kept = decodeMany(storage.get(manyBytes)).c[key];
      return BigInt(kept ? kept[0] : decode(storage.get(keyBytes(key))).total);
    },
    reserveMany(id, counters: readonly SpendCounter[], o): ReserveManyResult {
      checkCounters(counters);
      checkTimes(o);
      const now = o?.now;
      const expiresAt = o?.expiresAt !== undefined && Number.isFinite(o.expiresAt) ? Math.ceil(o.expiresAt) : null;
      const keep = new Set(counters.map((c) => c.key));
      moveIn([...keep]);
      const spilled = now === undefined ? undefined : spillOut(keep, now);
      return updateMany<ReserveManyResult>((m0) => {
        const m = copyMany(m0);
        const swept = now !== undefined && sweep(m, now);
        for (const c of counters) if (!m.c[c.key]) carry(m, c.key, c.ledgerExpiresAt);
        // A refusal records nothing; it writes what it swept (a hold given back at its releaseAt
        // stops counting in `total` too), and what it carried is carried again next time.
        const refuse = (result: ReserveManyResult) => ({ next: swept ? m : undefined, result });
        if (m.r.some((r) => idOf(m, r) === id)) return refuse({ result: 'duplicate' });
        for (const c of counters)
          if (BigInt(m.c[c.key]![0]) + c.amount > c.ceiling) return refuse({ result: 'exceeded', key: c.key });
        if (m.r.length >= maxEntries) return refuse({ result: 'exceeded', key: counters[0]!.key });
        for (const c of counters) addTo(m, m.c[c.key]![2], c.amount);
        if (spilled) dropSpilled(m0, m, spilled, keep);
        const parts: Part[] = counters.map((c) => [m.c[c.key]![2], c.amount.toString(), c.count ? 1 : 0]);
        const held: Reservation = o?.hold
          ? [packId(id, counters[0]!), parts, 0, expiresAt, 1, o.releaseAt ?? null]
          : [packId(id, counters[0]!), parts, 0, expiresAt, 0];
        m.r.push(held);
        return { next: m, result: { result: 'reserved' } };
      });
    },
    commitMany(id, captured, o): CommitManyResult {
      checkTimes(o);
      const now = o?.now;
      return updateMany<CommitManyResult>((m0) => {
        const m = copyMany(m0);
        const swept = now !== undefined && sweep(m, now);
        const i = m.r.findIndex((r) => idOf(m, r) === id);
        const r = m.r[i];
        // A hold past its releaseAt is released by the sweep, so it is unknown here: never captured late.
        // A capture settles only a hold: a plain payment is committed whole (PROTOCOL.md §15).
        if (!r || r[2] === 2 || (captured !== undefined && r[4] !== 1))
          return swept ? { next: m, result: 'unknown' } : { result: 'unknown' };
        if (r[2] === 1) return { result: 'duplicate' };
        const next = capturedAmounts(
          r[1].map((p) => ({ amount: BigInt(p[1]), count: p[2] === 1 })),
          captured,
        );
        if (!next) return { result: 'exceeded' };
        const parts: Part[] = r[1].map((p, j) => {
          addTo(m, p[0], next[j]! - BigInt(p[1]));
          return [p[0], next[j]!.toString(), p[2]];
        });
        m.r[i] = r[4] === 1 ? [r[0], parts, 1, r[3], 1, releaseAtOf(r)] : [r[0], parts, 1, r[3], 0];
        return { next: m, result: 'committed' };
      });
    },
    releaseMany(id) {
      updateMany((m0) => {
        const r = m0.r.find((x) => idOf(m0, x) === id);
        if (!r || r[2] !== 0) return { result: undefined };
        const m = copyMany(m0);
        for (const p of r[1]) addTo(m, p[0], -BigInt(p[1]));
        m.r = m.r.filter((x) => x !== r);
        return { next: m, result: undefined };
      });
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
          `spend storage: flash ledgers are at counter ${head}, the hardware counter at ${c}: ` +
            'a restored or altered flash is refused',
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
