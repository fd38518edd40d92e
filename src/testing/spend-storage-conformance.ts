/**
 * The checks every SpendStorage must pass (PROTOCOL.md §7), as plain async functions that throw on
 * failure, so any test runner can run them:
 *
 *   for (const c of spendStorageConformance(() => myStorage())) test(c.name, c.run)
 */
import type { SpendStorage } from '../wallet/spend-storage.js';

export interface ConformanceCase {
  name: string;
  run(): Promise<void>;
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(`SpendStorage conformance: ${what}`);
}

/** @example spendStorageConformance(() => createMemorySpendStorage()) */
export function spendStorageConformance(factory: () => SpendStorage | Promise<SpendStorage>): ConformanceCase[] {
  const k = () => 'k_' + Math.random().toString(36).slice(2);
  return [
    {
      name: 'reserve adds within the ceiling and refuses past it',
      async run() {
        const s = await factory();
        const key = k();
        expect((await s.reserve(key, 'a', 6n, 10n)) === 'reserved', 'first reserve');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'exceeded', '6 + 5 > 10 must be exceeded');
        expect((await s.reserve(key, 'c', 4n, 10n)) === 'reserved', '6 + 4 = 10 fits exactly');
        expect((await s.total(key)) === 10n, 'total 10');
      },
    },
    {
      name: 'the same id reserved twice is one reservation',
      async run() {
        const s = await factory();
        const key = k();
        expect((await s.reserve(key, 'a', 3n, 10n)) === 'reserved', 'first');
        expect((await s.reserve(key, 'a', 3n, 10n)) === 'duplicate', 'second is duplicate');
        expect((await s.total(key)) === 3n, 'counted once');
      },
    },
    {
      name: 'release gives back a reservation, commit makes it final',
      async run() {
        const s = await factory();
        const key = k();
        await s.reserve(key, 'a', 4n, 10n);
        await s.reserve(key, 'b', 5n, 10n);
        await s.release(key, 'a');
        expect((await s.total(key)) === 5n, 'released a');
        await s.commit(key, 'b');
        await s.release(key, 'b');
        expect((await s.total(key)) === 5n, 'a committed reservation cannot be released');
        await s.release(key, 'unknown');
        await s.commit(key, 'unknown');
        expect((await s.total(key)) === 5n, 'unknown ids are ignored');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'duplicate', 'a committed id stays recorded');
      },
    },
    {
      name: 'an id is never forgotten before its expiry, and totals are never forgotten (PROTOCOL.md §12)',
      async run() {
        const s = await factory();
        const key = k();
        expect((await s.reserve(key, 'a', 2n, 10n, { expiresAt: 1000, now: 0 })) === 'reserved', 'first');
        await s.commit(key, 'a');
        expect((await s.reserve(key, 'a', 2n, 10n, { expiresAt: 1000, now: 999 })) === 'duplicate', 'a live id is still known');
        expect((await s.reserve(key, 'b', 2n, 10n, { expiresAt: 3000, now: 2000 })) === 'reserved', 'after the expiry');
        expect((await s.total(key)) === 4n, 'forgetting an id keeps its amount in the total');
      },
    },
    {
      name: 'keys are independent',
      async run() {
        const s = await factory();
        const [a, b] = [k(), k()];
        await s.reserve(a, 'x', 10n, 10n);
        expect((await s.reserve(b, 'x', 10n, 10n)) === 'reserved', 'same id under another key');
        expect((await s.total(a)) === 10n && (await s.total(b)) === 10n, 'totals per key');
      },
    },
    {
      name: 'amounts beyond 2^53 stay exact',
      async run() {
        const s = await factory();
        const key = k();
        const big = 2n ** 80n + 1n;
        expect((await s.reserve(key, 'a', big, big)) === 'reserved', 'reserve 2^80+1');
        expect((await s.reserve(key, 'b', 1n, big)) === 'exceeded', 'one more is over');
        expect((await s.total(key)) === big, 'exact total');
      },
    },
    {
      name: '200 concurrent reserves against a ceiling for 10: exactly 10 succeed',
      async run() {
        const s = await factory();
        const key = k();
        const results = await Promise.all(Array.from({ length: 200 }, (_, i) => s.reserve(key, 'id' + i, 1n, 10n)));
        expect(results.filter((r) => r === 'reserved').length === 10, `10 reserved, got ${results.filter((r) => r === 'reserved').length}`);
        expect((await s.total(key)) === 10n, 'total is the ceiling');
      },
    },
  ];
}
