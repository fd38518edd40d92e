/**
 * The checks every SpendStorage must pass (PROTOCOL.md §7, §12), as plain async functions that
 * throw on failure, so any test runner can run them (entry `ctl/testing`):
 *
 *   for (const c of spendStorageConformance(() => myStorage())) test(c.name, c.run)
 *
 * The concurrent cases start many calls at once on one storage; a store that reaches a database or
 * another process through async I/O is raced for real, so give each case a storage that is shared
 * the way production shares it (one pool, one file) when that is what is to be proved.
 */
import type { SpendCounter, SpendStorage } from '../wallet/spend-storage.js';

export interface ConformanceCase {
  name: string;
  run(): Promise<void>;
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(`SpendStorage conformance: ${what}`);
}

export interface ConformanceOptions {
  /**
   * Check the atomic multi-counter reserve (`reserveMany`, `commitMany`, `releaseMany`; PROTOCOL.md
   * §13, §15). Default true: a storage without it can hold no grant with windows and no hold, so
   * pass false only for such a storage.
   */
  atomicReserve?: boolean;
}

/** @example spendStorageConformance(() => createMemorySpendStorage()) */
export function spendStorageConformance(
  factory: () => SpendStorage | Promise<SpendStorage>,
  options: ConformanceOptions = {},
): ConformanceCase[] {
  const k = () => 'k_' + Math.random().toString(36).slice(2);
  const single = singleCases(factory, k);
  return options.atomicReserve === false ? single : [...single, ...manyCases(factory, k)];
}

/** The storage's multi-counter calls, or a failure saying they are missing. */
async function manyOf(factory: () => SpendStorage | Promise<SpendStorage>) {
  const s = await factory();
  expect(
    typeof s.reserveMany === 'function' && typeof s.commitMany === 'function' && typeof s.releaseMany === 'function',
    'reserveMany, commitMany and releaseMany are required (or pass { atomicReserve: false })',
  );
  return {
    total: (key: string) => s.total(key),
    reserve: (id: string, c: SpendCounter[], o?: Parameters<NonNullable<SpendStorage['reserveMany']>>[2]) =>
      s.reserveMany!(id, c, o),
    commit: (id: string, captured?: bigint, now?: number) =>
      s.commitMany!(id, captured, now === undefined ? undefined : { now }),
    release: (id: string) => s.releaseMany!(id),
  };
}

const res = (r: { result: string; key?: string }) => (r.key === undefined ? r.result : `${r.result}:${r.key}`);

function manyCases(factory: () => SpendStorage | Promise<SpendStorage>, k: () => string): ConformanceCase[] {
  return [
    {
      name: 'multi: all counters or none, naming the counter that is full',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const two = (n: bigint): SpendCounter[] => [
          { key: a, amount: n, ceiling: 10n },
          { key: b, amount: n, ceiling: 5n },
        ];
        expect(res(await s.reserve('x', two(4n))) === 'reserved', 'first');
        expect(res(await s.reserve('y', two(4n))) === `exceeded:${b}`, 'b would pass 5');
        expect((await s.total(a)) === 4n && (await s.total(b)) === 4n, 'a refusal changes no counter');
        expect(res(await s.reserve('y', two(1n))) === 'reserved', 'exactly at the ceiling');
        expect((await s.total(a)) === 5n && (await s.total(b)) === 5n, 'both counted');
      },
    },
    {
      name: 'multi: the same id twice is one reservation; a refused id is not recorded',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        expect(res(await s.reserve('x', [{ key: a, amount: 3n, ceiling: 10n }])) === 'reserved', 'first');
        const again = [
          { key: a, amount: 3n, ceiling: 10n },
          { key: b, amount: 3n, ceiling: 10n },
        ];
        expect(res(await s.reserve('x', again)) === 'duplicate', 'same id, other counters: duplicate');
        expect((await s.total(a)) === 3n && (await s.total(b)) === 0n, 'counted once, nowhere else');
        expect(res(await s.reserve('z', [{ key: b, amount: 11n, ceiling: 10n }])) === `exceeded:${b}`, 'over');
        expect(res(await s.reserve('z', [{ key: b, amount: 10n, ceiling: 10n }])) === 'reserved', 'not recorded');
        const same = await Promise.all(
          Array.from({ length: 30 }, () => s.reserve('w', [{ key: a, amount: 1n, ceiling: 100n }])),
        );
        expect(same.filter((r) => r.result === 'reserved').length === 1, 'one of 30 racing copies reserved');
        expect((await s.total(a)) === 4n, 'and counted once');
      },
    },
    {
      // A store that takes counters one by one and gives them back on a refusal shows a payment
      // that never happens to its racers: they are refused for room that is in fact free.
      name: 'multi: a reservation refused on one counter never holds another, even for a moment',
      async run() {
        const s = await manyOf(factory);
        const [w, full] = [k(), k()];
        const doomed = Array.from({ length: 50 }, (_, i) =>
          s.reserve('d' + i, [
            { key: w, amount: 1n, ceiling: 1n },
            { key: full, amount: 1n, ceiling: 0n },
          ]),
        );
        const fits = s.reserve('fits', [{ key: w, amount: 1n, ceiling: 1n }]);
        const results = await Promise.all([...doomed, fits]);
        expect(
          results.slice(0, 50).every((r) => res(r) === `exceeded:${full}`),
          `the doomed ones are exceeded on ${full}, got ${results.slice(0, 5).map(res).join(',')}…`,
        );
        expect(res(results[50]!) === 'reserved', `the one that fits is reserved, got ${res(results[50]!)}`);
        expect((await s.total(w)) === 1n && (await s.total(full)) === 0n, 'totals');
      },
    },
    {
      name: 'multi: 200 ids racing over overlapping counters never pass a ceiling, all or none each',
      async run() {
        const s = await manyOf(factory);
        const life = { key: k(), ceiling: 60n };
        const wins = [
          { key: k(), ceiling: 20n },
          { key: k(), ceiling: 25n },
          { key: k(), ceiling: 30n },
        ];
        const count = { key: k(), ceiling: 40n };
        const plans = Array.from({ length: 200 }, (_, i) => {
          const amount = BigInt(1 + (i % 3));
          const c: SpendCounter[] = [
            { ...life, amount },
            { ...wins[i % 3]!, amount },
          ];
          if (i % 2 === 0) c.push({ ...wins[(i + 1) % 3]!, amount });
          c.push({ ...count, amount: 1n, count: true });
          return c;
        });
        const results = await Promise.all(plans.map((c, i) => s.reserve('r' + i, c)));
        const sums = new Map<string, bigint>();
        results.forEach((r, i) => {
          if (r.result !== 'reserved') return;
          for (const c of plans[i]!) sums.set(c.key, (sums.get(c.key) ?? 0n) + c.amount);
        });
        for (const c of [life, ...wins, count]) {
          const t = await s.total(c.key);
          expect(t <= c.ceiling, `${c.key}: ${t} above its ceiling ${c.ceiling}`);
          expect(t === (sums.get(c.key) ?? 0n), `${c.key}: total ${t} is not the sum of the reserved ids`);
        }
        expect(
          results.some((r) => r.result === 'exceeded'),
          'the race reached a ceiling',
        );
      },
    },
    {
      name: 'multi: capture below, at and above the hold; a second capture changes nothing',
      async run() {
        const s = await manyOf(factory);
        const [a, n] = [k(), k()];
        const hold = (id: string) =>
          s.reserve(
            id,
            [
              { key: a, amount: 10n, ceiling: 100n },
              { key: n, amount: 1n, ceiling: 10n, count: true },
            ],
            { hold: true },
          );
        await hold('h1');
        expect((await s.commit('h1', 11n)) === 'exceeded', 'above the hold');
        expect((await s.total(a)) === 10n, 'a refused capture keeps the hold');
        expect((await s.commit('h1', 4n)) === 'committed', 'below the hold');
        expect((await s.total(a)) === 4n && (await s.total(n)) === 1n, 'the rest released, the count stays');
        expect((await s.commit('h1', 4n)) === 'duplicate', 'a second capture');
        expect((await s.commit('h1', 1n)) === 'duplicate', 'a second capture of another amount');
        await s.release('h1');
        expect((await s.total(a)) === 4n, 'a captured hold cannot be released');
        await hold('h2');
        expect((await s.commit('h2', 10n)) === 'committed', 'at the hold');
        expect((await s.total(a)) === 14n && (await s.total(n)) === 2n, 'all of it');
        await hold('h3');
        expect((await s.commit('h3')) === 'committed', 'a commit without an amount keeps all of it');
        expect((await s.total(a)) === 24n, 'all of it again');
        expect((await s.commit('nothing', 1n)) === 'unknown', 'an unknown id');
      },
    },
    {
      name: 'multi: release gives back every counter; committed or unknown ids stay as they are',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const c = (n: bigint): SpendCounter[] => [
          { key: a, amount: n, ceiling: 100n },
          { key: b, amount: n, ceiling: 100n },
        ];
        await s.reserve('x', c(5n));
        await s.reserve('y', c(7n));
        await s.release('x');
        expect((await s.total(a)) === 7n && (await s.total(b)) === 7n, 'x given back to both');
        expect(res(await s.reserve('x', c(5n))) === 'reserved', 'a released id may be reserved again');
        await s.commit('y');
        await s.release('y');
        await s.release('unknown');
        expect((await s.total(a)) === 12n, 'committed and unknown untouched');
      },
    },
    {
      name: 'multi: a release goes back into a window that has ended, and a dropped window stays dropped',
      async run() {
        const s = await manyOf(factory);
        const [life, w1, w2] = [k(), k(), k()];
        // w1 ends at 1000 and is kept until 2000 (the retention the ledgers add to a window's end).
        const inW1 = (): SpendCounter[] => [
          { key: life, amount: 5n, ceiling: 100n },
          { key: w1, amount: 5n, ceiling: 10n, ledgerExpiresAt: 2000 },
        ];
        await s.reserve('a', inW1(), { now: 0, expiresAt: 5000 });
        await s.reserve('b', inW1(), { now: 10, expiresAt: 5000 });
        await s.reserve(
          'c',
          [
            { key: life, amount: 1n, ceiling: 100n },
            { key: w2, amount: 1n, ceiling: 10n },
          ],
          {
            now: 1500,
            expiresAt: 5000,
          },
        );
        await s.release('a'); // the payment in w1 did not happen, learned after w1 ended
        expect((await s.total(w1)) === 5n, `w1 gets its 5 back, total ${await s.total(w1)}`);
        expect((await s.total(life)) === 6n, 'and the lifetime total');
        await s.reserve('d', [{ key: life, amount: 1n, ceiling: 100n }], { now: 2500, expiresAt: 5000 });
        await s.release('b'); // w1 has been dropped: nothing to give back there, nothing resurrected
        expect((await s.total(life)) === 2n, 'lifetime gets it back');
        expect((await s.total(w1)) === 0n, `a dropped window reads 0, got ${await s.total(w1)}`);
      },
    },
    {
      name: 'multi: a hold never captured is released at its expiry; a plain reservation stays counted',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        await s.reserve('hold', [{ key: a, amount: 7n, ceiling: 100n }], { hold: true, expiresAt: 1000, now: 0 });
        await s.reserve('plain', [{ key: a, amount: 2n, ceiling: 100n }], { expiresAt: 1000, now: 0 });
        expect((await s.commit('hold', 3n, 999)) === 'committed', 'captured before its expiry');
        await s.reserve('hold2', [{ key: a, amount: 7n, ceiling: 100n }], { hold: true, expiresAt: 2000, now: 1 });
        expect((await s.total(a)) === 12n, 'held');
        expect((await s.commit('hold2', 3n, 2000)) === 'unknown', 'captured at its expiry: too late');
        await s.reserve('later', [{ key: a, amount: 1n, ceiling: 100n }], { now: 2001 });
        expect((await s.total(a)) === 6n, `the uncaptured hold went back, total ${await s.total(a)}`);
      },
    },
  ];
}

function singleCases(factory: () => SpendStorage | Promise<SpendStorage>, k: () => string): ConformanceCase[] {
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
