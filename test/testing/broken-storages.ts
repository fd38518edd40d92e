/**
 * A plain reference SpendStorage (full passes, no cleverness) and one deliberately broken copy of
 * it per rule of PROTOCOL.md §7, §12, §13 and §15, for the conformance suite's own test: each
 * broken one must fail the suite, so no rule goes unchecked.
 */
import type { SpendCounter, SpendStorage } from '../../src/wallet/spend-storage.js';
import { capturedAmounts, checkCounters, checkTimes } from '../../src/wallet/spend-storage.js';

/** Each fault, and the rule it breaks. */
export const FAULTS = {
  'many-not-atomic': '§13: counters taken one by one, given back on a refusal',
  'many-partial': '§13: the counters that fit are added, the full one refused',
  'many-id-per-counters': '§7: an id is a duplicate only with the same counters',
  'many-check-then-add': '§7: the ceilings checked, a yield, then the amounts added',
  'many-releases-unsettled-at-expiry': '§7: a reservation never committed goes back at its expiry',
  'many-racy-id': '§7: the id looked up, a yield, then the amounts added',
  'many-records-refused': '§7: a refused id is recorded',
  'many-number-math': '§7: totals in floating point',
  'many-forgets-committed-early': '§12: a committed id forgotten at any later call with a time',
  'many-forgets-totals': '§12: forgetting an id takes its amount out of the totals',
  'many-accepts-nan': '§12: a time that is not a number is taken for no time',
  'many-drops-window-early': '§13: a window dropped a second before its ledgerExpiresAt',
  'many-release-skips-windows': '§13: a release gives nothing back to a window',
  'many-releases-committed': '§7: a committed reservation can be given back',
  'hold-captures-above': '§15: a capture above the hold is kept',
  'hold-captures-twice': '§15: a second capture is applied',
  'hold-captures-plain': '§15: a capture settles a reservation that is not a hold',
  'hold-capture-moves-count': '§15: a capture changes payment counts',
  'hold-racy-capture': '§15: the state read, a yield, then the capture applied',
  'hold-released-late': '§15: a hold with releaseAt goes back at its expiresAt',
  'hold-release-stops-at-live': '§15: holds go back from the front only, until a live reservation',
  'hold-captured-after-release': '§15: a hold captured at or after its releaseAt',
  'hold-released-forgets-id': '§7, §15: a hold given back at its releaseAt forgets its id',
  'hold-wallet-released-at-expiry': '§15: a hold without releaseAt goes back at its expiresAt',
} as const;
export type Fault = keyof typeof FAULTS;

interface Part {
  key: string;
  amount: bigint;
  count: boolean;
  /** The generation of the counter it was counted in: a window dropped and made again is another. */
  gen: number;
}
interface Res {
  id: string;
  parts: Part[];
  state: 'reserved' | 'committed' | 'released';
  expiresAt?: number;
  hold: boolean;
  releaseAt?: number;
}

const tick = () => new Promise((r) => setTimeout(r, 1));

/** @example for (const c of spendStorageConformance(() => referenceStorage('hold-released-late'))) … */
export function referenceStorage(fault?: Fault): SpendStorage {
  const totals = new Map<string, bigint>();
  const gens = new Map<string, number>();
  const ends = new Map<string, number>();
  const single = new Map<string, { amount: bigint; committed: boolean; expiresAt?: number }>();
  const many: Res[] = [];
  const get = (k: string) => totals.get(k) ?? 0n;
  const add = (k: string, d: bigint) =>
    totals.set(k, fault === 'many-number-math' ? BigInt(Number(get(k)) + Number(d)) : get(k) + d);
  const giveBack = (p: Part) => {
    if ((gens.get(p.key) ?? 0) === p.gen) add(p.key, -p.amount);
  };
  const times = (o?: { now?: number; expiresAt?: number; releaseAt?: number }) => {
    if (fault !== 'many-accepts-nan') checkTimes(o);
    return o?.now !== undefined && Number.isFinite(o.now) ? o.now : undefined;
  };
  const dueAt = (r: Res): number | undefined => {
    if (!r.hold || r.state !== 'reserved') return undefined;
    if (fault === 'hold-wallet-released-at-expiry' && r.releaseAt === undefined) return r.expiresAt;
    if (r.releaseAt === undefined) return undefined;
    return fault === 'hold-released-late' ? r.expiresAt : r.releaseAt;
  };
  function sweep(now: number): void {
    for (const [k, end] of ends)
      if ((fault === 'many-drops-window-early' ? end - 1000 : end) <= now) {
        ends.delete(k);
        totals.delete(k);
        gens.set(k, (gens.get(k) ?? 0) + 1);
      }
    for (const r of many) {
      const at = dueAt(r);
      const due = at !== undefined && at <= now;
      if (fault === 'hold-release-stops-at-live' && !due && !(r.expiresAt !== undefined && r.expiresAt <= now)) break;
      if (!due) continue;
      r.parts.forEach(giveBack);
      r.state = 'released';
    }
    for (let i = many.length - 1; i >= 0; i--) {
      const r = many[i]!;
      if (
        fault === 'many-releases-unsettled-at-expiry' &&
        !r.hold &&
        r.state === 'reserved' &&
        (r.expiresAt ?? Infinity) <= now
      )
        r.parts.forEach(giveBack);
      const forget =
        (r.expiresAt !== undefined && r.expiresAt <= now && !(r.hold && r.state === 'reserved')) ||
        (fault === 'many-forgets-committed-early' && r.state === 'committed') ||
        (fault === 'hold-released-forgets-id' && r.state === 'released');
      if (!forget) continue;
      if (fault === 'many-forgets-totals' && r.state !== 'released') r.parts.forEach(giveBack);
      many.splice(i, 1);
    }
  }
  const find = (id: string, counters?: readonly SpendCounter[]) =>
    many.find(
      (r) =>
        r.id === id &&
        !(
          fault === 'many-id-per-counters' &&
          counters &&
          r.parts.map((p) => p.key).join() !== counters.map((c) => c.key).join()
        ),
    );
  const partsOf = (counters: readonly SpendCounter[]): Part[] =>
    counters.map((c) => ({ key: c.key, amount: c.amount, count: c.count === true, gen: gens.get(c.key) ?? 0 }));

  async function takeOneByOne(counters: readonly SpendCounter[]): Promise<string | undefined> {
    const taken: SpendCounter[] = [];
    for (const c of counters) {
      await tick();
      if (get(c.key) + c.amount > c.ceiling) {
        for (const t of taken) add(t.key, -t.amount);
        return c.key;
      }
      add(c.key, c.amount);
      taken.push(c);
    }
    return undefined;
  }

  return {
    reserve(key, id, amount, ceiling, o) {
      checkTimes(o);
      if (o?.now !== undefined)
        for (const [i, e] of single) if (e.expiresAt !== undefined && e.expiresAt <= o.now) single.delete(i);
      const sid = `${key}\u0000${id}`;
      if (single.has(sid)) return 'duplicate';
      if (get(key) + amount > ceiling) return 'exceeded';
      add(key, amount);
      single.set(sid, { amount, committed: false, expiresAt: o?.expiresAt });
      return 'reserved';
    },
    commit(key, id) {
      const e = single.get(`${key}\u0000${id}`);
      if (e) e.committed = true;
    },
    release(key, id) {
      const e = single.get(`${key}\u0000${id}`);
      if (e && !e.committed) {
        add(key, -e.amount);
        single.delete(`${key}\u0000${id}`);
      }
    },
    total: (key) => get(key),
    async reserveMany(id, counters, o) {
      checkCounters(counters);
      const now = times(o);
      if (now !== undefined) sweep(now);
      if (find(id, counters)) return { result: 'duplicate' };
      if (fault === 'many-racy-id') await tick();
      if (fault === 'many-not-atomic') {
        const full = await takeOneByOne(counters);
        if (full !== undefined) return { result: 'exceeded', key: full };
      } else {
        const full = counters.find((c) => get(c.key) + c.amount > c.ceiling);
        if (full && fault === 'many-partial')
          for (const c of counters.slice(0, counters.indexOf(full))) add(c.key, c.amount);
        if (fault === 'many-check-then-add') await tick();
        if (full) {
          if (fault === 'many-records-refused')
            many.push({ id, parts: [], state: 'committed', expiresAt: o?.expiresAt, hold: false });
          return { result: 'exceeded', key: full.key };
        }
        for (const c of counters) add(c.key, c.amount);
      }
      for (const c of counters) if (c.ledgerExpiresAt !== undefined) ends.set(c.key, c.ledgerExpiresAt);
      const hold = o?.hold === true;
      const releaseAt = hold ? o?.releaseAt : undefined;
      many.push({ id, parts: partsOf(counters), state: 'reserved', expiresAt: o?.expiresAt, hold, releaseAt });
      return { result: 'reserved' };
    },
    async commitMany(id, captured, o) {
      const now = times(o);
      if (now !== undefined) sweep(now);
      const r = find(id);
      if (!r) return 'unknown';
      if (r.state === 'released' && fault !== 'hold-captured-after-release') return 'unknown';
      if (captured !== undefined && !r.hold && fault !== 'hold-captures-plain') return 'unknown';
      if (r.state === 'committed' && fault !== 'hold-captures-twice') return 'duplicate';
      const before = r.state;
      if (fault === 'hold-racy-capture') await tick();
      let next = capturedAmounts(r.parts, captured);
      if (!next && fault === 'hold-captures-above') next = r.parts.map(() => captured!);
      if (!next) return 'exceeded';
      if (fault === 'hold-capture-moves-count' && captured !== undefined) next = r.parts.map(() => captured);
      r.parts.forEach((p, i) => {
        add(p.key, next![i]! - (before === 'released' ? 0n : p.amount));
        p.amount = next![i]!;
      });
      r.state = 'committed';
      return 'committed';
    },
    releaseMany(id) {
      const r = find(id);
      const releasable = r?.state === 'reserved' || (fault === 'many-releases-committed' && r?.state === 'committed');
      if (!r || !releasable) return;
      for (const p of r.parts) if (!(fault === 'many-release-skips-windows' && ends.has(p.key))) giveBack(p);
      many.splice(many.indexOf(r), 1);
    },
  };
}
