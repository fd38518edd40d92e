// The SpendStorage conformance suite catches the stores it exists to catch (PROTOCOL.md §7): one
// that looks an id up, yields (a database round trip), then raises the total atomically — the
// usual SQL or Redis shape, under which two verifiers accept one SBA twice — and one that records
// an id even when it refused it, so a retry that now fits is taken for a replay. The SDK's memory
// storage passes it whole.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spendStorageConformance } from '../../src/testing/spend-storage-conformance.js';
import { createMemorySpendStorage, type SpendStorage } from '../../src/wallet/spend-storage.js';

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
  const failed: string[] = [];
  for (const c of spendStorageConformance(factory, { atomicReserve })) {
    try {
      await c.run();
    } catch {
      failed.push(c.name);
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

for (const c of spendStorageConformance(() => createMemorySpendStorage()))
  test(`memory SpendStorage: ${c.name}`, c.run);

test.run();
