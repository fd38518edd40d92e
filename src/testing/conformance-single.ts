/** The single-counter rules (PROTOCOL.md §7, §12): `reserve`, `commit`, `release`, `total`. */
import { expect, type ConformanceCase, type Factory } from './conformance-kit.js';

export function singleCases(factory: Factory, k: () => string): ConformanceCase[] {
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
        expect(
          (await s.reserve(key, 'a', 2n, 10n, { expiresAt: 1000, now: 999 })) === 'duplicate',
          'a live id is still known',
        );
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
      // The race a store that looks the id up, yields, then adds to the total lets through: two
      // verifiers sharing it would both accept one SBA (PROTOCOL.md §7: one id, one reservation).
      name: '50 concurrent reserves of one id: exactly one reserved, counted once',
      async run() {
        const s = await factory();
        const key = k();
        const results = await Promise.all(Array.from({ length: 50 }, () => s.reserve(key, 'same', 3n, 1000n)));
        const reserved = results.filter((r) => r === 'reserved').length;
        expect(reserved === 1, `one reserved, got ${reserved}`);
        expect(
          results.every((r) => r === 'reserved' || r === 'duplicate'),
          `the others are duplicate, got ${results.join(',')}`,
        );
        expect((await s.total(key)) === 3n, `counted once, total ${await s.total(key)}`);
      },
    },
    {
      name: 'a refused id is not recorded: retried it is exceeded again, and reserved once there is room',
      async run() {
        const s = await factory();
        const key = k();
        expect((await s.reserve(key, 'a', 6n, 10n)) === 'reserved', 'first');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'exceeded', '6 + 5 > 10');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'exceeded', 'the retry is exceeded again, not duplicate');
        await s.release(key, 'a');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'reserved', 'once there is room the refused id reserves');
        expect((await s.reserve(key, 'b', 5n, 10n)) === 'duplicate', 'and then it is recorded');
        expect((await s.total(key)) === 5n, 'total 5');
      },
    },
    {
      name: '20 concurrent reserves of one id past the ceiling: all exceeded, nothing recorded',
      async run() {
        const s = await factory();
        const key = k();
        const results = await Promise.all(Array.from({ length: 20 }, () => s.reserve(key, 'big', 11n, 10n)));
        expect(
          results.every((r) => r === 'exceeded'),
          `all exceeded, got ${results.join(',')}`,
        );
        expect((await s.total(key)) === 0n, 'nothing counted');
        expect((await s.reserve(key, 'big', 10n, 10n)) === 'reserved', 'the id was never recorded');
      },
    },
    {
      name: '200 concurrent reserves against a ceiling for 10: exactly 10 succeed',
      async run() {
        const s = await factory();
        const key = k();
        const results = await Promise.all(Array.from({ length: 200 }, (_, i) => s.reserve(key, 'id' + i, 1n, 10n)));
        expect(
          results.filter((r) => r === 'reserved').length === 10,
          `10 reserved, got ${results.filter((r) => r === 'reserved').length}`,
        );
        expect((await s.total(key)) === 10n, 'total is the ceiling');
      },
    },
  ];
}
