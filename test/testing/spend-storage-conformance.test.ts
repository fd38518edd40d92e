// The SpendStorage conformance suite catches the stores it exists to catch (PROTOCOL.md §7): one
// that looks an id up, yields (a database round trip), then raises the total atomically — the
// usual SQL or Redis shape, under which two verifiers accept one SBA twice — and one that records
// an id even when it refused it, so a retry that now fits is taken for a replay. The SDK's memory
// storage passes it whole.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spendStorageConformance } from '../../src/testing/spend-storage-conformance.js';
import { createMemorySpendStorage, type SpendStorage } from '../../src/wallet/spend-storage.js';
import { FAULTS, referenceStorage, type Fault } from './broken-storages.js';

interface Ledger {
  total: bigint;
  ids: Map<string, { amount: bigint; committed: boolean }>;
}

/** A store in the shape of SQL over a pool: `lookUp` then, after a yield, an atomic conditional add. */
function shapedStore(shape: { yieldAfterLookUp: boolean; recordRefused: boolean }): SpendStorage {
  const ledgers = new Map<string, Ledger>();
  const ledger = (key: string) => {
    let l = ledgers.get(key);
    if (!l) ledgers.set(key, (l = { total: 0n, ids: new Map() }));
    return l;
  };
  return {
    async reserve(key, id, amount, ceiling) {
      const l = ledger(key);
      if (l.ids.has(id)) return 'duplicate'; // SELECT 1 FROM spend WHERE id = $1
      if (shape.yieldAfterLookUp) await new Promise((r) => setTimeout(r, 1));
      // UPDATE totals SET total = total + $2 WHERE key = $1 AND total + $2 <= $3: atomic by itself.
      if (l.total + amount > ceiling) {
        if (shape.recordRefused) l.ids.set(id, { amount: 0n, committed: false });
        return 'exceeded';
      }
      l.total += amount;
      l.ids.set(id, { amount, committed: false });
      return 'reserved';
    },
    commit(key, id) {
      const e = ledgers.get(key)?.ids.get(id);
      if (e) e.committed = true;
    },
    release(key, id) {
      const l = ledgers.get(key);
      const e = l?.ids.get(id);
      if (l && e && !e.committed) {
        l.total -= e.amount;
        l.ids.delete(id);
      }
    },
    total: (key) => ledgers.get(key)?.total ?? 0n,
  };
}

async function failures(factory: () => SpendStorage, atomicReserve = false): Promise<string[]> {
  return (await failuresWhy(factory, atomicReserve)).map(([name]) => name);
}

async function failuresWhy(factory: () => SpendStorage, atomicReserve = true): Promise<Array<[string, string]>> {
  const failed: Array<[string, string]> = [];
  for (const c of spendStorageConformance(factory, { atomicReserve })) {
    try {
      await c.run();
    } catch (e) {
      failed.push([c.name, (e as Error).message]);
    }
  }
  return failed;
}

test('a store that looks the id up, yields, then adds atomically fails the concurrent same-id case', async () => {
  const failed = await failures(() => shapedStore({ yieldAfterLookUp: true, recordRefused: false }));
  assert.equal(failed, ['50 concurrent reserves of one id: exactly one reserved, counted once']);
});

test('a store that records a refused id fails the retry cases', async () => {
  const failed = await failures(() => shapedStore({ yieldAfterLookUp: false, recordRefused: true }));
  assert.equal(failed, [
    'a refused id is not recorded: retried it is exceeded again, and reserved once there is room',
    '20 concurrent reserves of one id past the ceiling: all exceeded, nothing recorded',
  ]);
});

test('the same shapes without the faults pass: the cases fail for the fault, not the shape', async () => {
  assert.equal(await failures(() => shapedStore({ yieldAfterLookUp: false, recordRefused: false })), []);
});

/**
 * A multi-counter reserve built the old way: each counter reserved in turn (each a round trip),
 * the ones taken given back when a later one refuses. No ceiling is ever passed, yet a racer sees
 * the payment that is about to be given back and is refused for room that is free.
 */
function sequentialMany(): SpendStorage {
  const s = createMemorySpendStorage();
  const parts = new Map<string, { key: string; amount: bigint }[]>();
  return {
    ...s,
    async reserveMany(id, counters) {
      if (parts.has(id)) return { result: 'duplicate' };
      const taken: { key: string; amount: bigint }[] = [];
      for (const c of counters) {
        await new Promise((r) => setTimeout(r, 1));
        if ((await s.reserve(c.key, id, c.amount, c.ceiling)) !== 'reserved') {
          for (const t of taken) await s.release(t.key, id);
          return { result: 'exceeded', key: c.key };
        }
        taken.push(c);
      }
      parts.set(id, taken);
      return { result: 'reserved' };
    },
    async commitMany(id) {
      const p = parts.get(id);
      if (!p) return 'unknown';
      for (const c of p) await s.commit(c.key, id);
      return 'committed';
    },
    async releaseMany(id) {
      for (const c of parts.get(id) ?? []) await s.release(c.key, id);
      parts.delete(id);
    },
  };
}

test('a multi-counter reserve taken counter by counter fails the atomic case', async () => {
  const failed = await failures(sequentialMany, true);
  assert.ok(failed.includes('multi: a reservation refused on one counter never holds another, even for a moment'));
});

/** The case each broken storage must fail: its rule is checked there (PROTOCOL.md §7, §12, §13, §15). */
const CAUGHT_BY: Record<Fault, string> = {
  'many-not-atomic': 'multi: a reservation refused on one counter never holds another, even for a moment',
  'many-partial': 'multi: all counters or none, naming the counter that is full',
  'many-id-per-counters': 'multi: the same id twice is one reservation; a refused id is not recorded',
  'many-check-then-add': 'multi: 200 ids racing over overlapping counters never pass a ceiling, all or none each',
  'many-releases-unsettled-at-expiry': 'multi: a plain reservation never committed stays counted past its expiry',
  'many-racy-id': 'multi: 50 concurrent reserves of one id: exactly one reserved, counted once',
  'many-records-refused': 'multi: 20 concurrent reserves of one id past a ceiling: all exceeded, nothing recorded',
  'many-number-math': 'multi: amounts beyond 2^53 stay exact',
  'many-forgets-committed-early':
    'multi: an id is never forgotten before its expiry, committed or not; totals are never forgotten',
  'many-forgets-totals':
    'multi: an id is never forgotten before its expiry, committed or not; totals are never forgotten',
  'many-accepts-nan': 'multi: a time that is not a finite number is refused, forgetting nothing and releasing nothing',
  'many-drops-window-early': 'multi: a window is kept until its ledgerExpiresAt and dropped from then on',
  'many-release-skips-windows':
    'multi: a release goes back into a window that has ended, and a dropped window stays dropped',
  'many-releases-committed': 'multi: release gives back every counter; committed or unknown ids stay as they are',
  'hold-captures-above': 'multi: capture below, at and above the hold; a second capture changes nothing',
  'hold-captures-twice': 'multi: capture below, at and above the hold; a second capture changes nothing',
  'hold-captures-plain': 'multi: capture below, at and above the hold; a second capture changes nothing',
  'hold-capture-moves-count': 'multi: capture below, at and above the hold; a second capture changes nothing',
  'hold-racy-capture': 'multi: 30 concurrent captures of one hold: exactly one committed',
  'hold-released-late': 'multi: a hold with releaseAt goes back at that instant, even behind longer-lived reservations',
  'hold-release-stops-at-live':
    'multi: a hold with releaseAt goes back at that instant, even behind longer-lived reservations',
  'hold-captured-after-release':
    'multi: a hold released at its releaseAt keeps its id until expiresAt; release after it changes nothing',
  'hold-released-forgets-id':
    'multi: a hold released at its releaseAt keeps its id until expiresAt; release after it changes nothing',
  'hold-wallet-released-at-expiry':
    'multi: a hold without releaseAt stays whole past its expiresAt until captured or voided',
};

test('the reference storage the broken ones are made from passes the whole suite', async () => {
  assert.equal(await failuresWhy(() => referenceStorage()), []);
});

for (const fault of Object.keys(FAULTS) as Fault[]) {
  test(`a storage broken so (${fault}: ${FAULTS[fault]}) fails the suite where its rule is checked`, async () => {
    const failed = await failuresWhy(() => referenceStorage(fault));
    const names = failed.map(([name]) => name);
    assert.ok(names.includes(CAUGHT_BY[fault]), `${fault} failed only: ${JSON.stringify(failed, null, 1)}`);
  });
}

test('every case of the multi-counter path is shown to catch at least one broken storage', async () => {
  const caught = new Set(Object.values(CAUGHT_BY));
  const multi = spendStorageConformance(() => createMemorySpendStorage()).filter((c) => c.name.startsWith('multi:'));
  assert.equal(
    multi.map((c) => c.name).filter((n) => !caught.has(n)),
    [],
  );
});

for (const c of spendStorageConformance(() => createMemorySpendStorage()))
  test(`memory SpendStorage: ${c.name}`, c.run);

test.run();
