/**
 * The multi-counter rules (PROTOCOL.md §7, §12, §13) for `reserveMany` / `commitMany` /
 * `releaseMany`, each as the single-counter path has it: one reservation per id, ids kept until
 * their expiry, totals forever, exact amounts, all counters or none, and windows.
 */
import type { SpendCounter } from '../wallet/spend-storage.js';
import { expect, manyOf, res, throwsRange, type ConformanceCase, type Factory } from './conformance-kit.js';

export function manyCases(factory: Factory, k: () => string): ConformanceCase[] {
  return [...atomicCases(factory, k), ...memoryCases(factory, k)];
}

function atomicCases(factory: Factory, k: () => string): ConformanceCase[] {
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
      },
    },
    {
      // The race a store that looks the id up, yields, then adds lets through: two verifiers
      // sharing it would both accept one SBA (PROTOCOL.md §7: one id, one reservation).
      name: 'multi: 50 concurrent reserves of one id: exactly one reserved, counted once',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        const same = await Promise.all(
          Array.from({ length: 50 }, () => s.reserve('w', [{ key: a, amount: 3n, ceiling: 1000n }])),
        );
        const reserved = same.filter((r) => r.result === 'reserved').length;
        expect(reserved === 1, `one of 50 racing copies reserved, got ${reserved}`);
        expect(
          same.every((r) => r.result === 'reserved' || r.result === 'duplicate'),
          'the others are duplicate',
        );
        expect((await s.total(a)) === 3n, `counted once, total ${await s.total(a)}`);
      },
    },
    {
      name: 'multi: 20 concurrent reserves of one id past a ceiling: all exceeded, nothing recorded',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const c = (n: bigint): SpendCounter[] => [
          { key: a, amount: n, ceiling: 100n },
          { key: b, amount: n, ceiling: 10n },
        ];
        const results = await Promise.all(Array.from({ length: 20 }, () => s.reserve('big', c(11n))));
        expect(
          results.every((r) => res(r) === `exceeded:${b}`),
          `all exceeded on ${b}, got ${results.map(res).join(',')}`,
        );
        expect((await s.total(a)) === 0n && (await s.total(b)) === 0n, 'nothing counted');
        expect(res(await s.reserve('big', c(10n))) === 'reserved', 'the id was never recorded');
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
      name: 'multi: amounts beyond 2^53 stay exact',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const big = 2n ** 80n + 1n;
        const c = (n: bigint): SpendCounter[] => [
          { key: a, amount: n, ceiling: big },
          { key: b, amount: n, ceiling: big * 2n },
        ];
        expect(res(await s.reserve('x', c(big))) === 'reserved', 'reserve 2^80+1');
        expect(res(await s.reserve('y', c(1n))) === `exceeded:${a}`, 'one more is over');
        expect((await s.total(a)) === big && (await s.total(b)) === big, 'exact totals');
        await s.reserve('h', [{ key: b, amount: big - 1n, ceiling: big * 2n }], { hold: true });
        expect((await s.commit('h', 2n ** 60n + 3n)) === 'committed', 'a capture');
        expect((await s.total(b)) === big + 2n ** 60n + 3n, 'exact after a capture');
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
        expect(res(await s.reserve('y', c(1n))) === 'duplicate', 'a committed id stays recorded');
      },
    },
  ];
}

function memoryCases(factory: Factory, k: () => string): ConformanceCase[] {
  return [
    {
      // PROTOCOL.md §12: a remembered id is what refuses a replay; a store that forgets one early
      // lets a verifier on it accept one SBA twice. Other ids' later `now` must not forget it either.
      name: 'multi: an id is never forgotten before its expiry, committed or not; totals are never forgotten',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const c = (n: bigint): SpendCounter[] => [
          { key: a, amount: n, ceiling: 100n },
          { key: b, amount: n, ceiling: 100n },
        ];
        expect(res(await s.reserve('done', c(2n), { expiresAt: 1000, now: 0 })) === 'reserved', 'first');
        await s.commit('done');
        expect(res(await s.reserve('open', c(3n), { expiresAt: 1000, now: 1 })) === 'reserved', 'never committed');
        expect(res(await s.reserve('short', c(1n), { expiresAt: 10, now: 2 })) === 'reserved', 'a short one');
        await s.commit('short');
        for (const now of [11, 500, 999]) {
          await s.reserve(`other${now}`, [{ key: k(), amount: 1n, ceiling: 10n }], { expiresAt: 5000, now });
          expect(res(await s.reserve('done', c(2n), { now })) === 'duplicate', `a committed id is kept at ${now}`);
          expect(res(await s.reserve('open', c(3n), { now })) === 'duplicate', `an open id is kept at ${now}`);
        }
        expect(res(await s.reserve('later', c(1n), { expiresAt: 5000, now: 1000 })) === 'reserved', 'at 1000');
        expect(res(await s.reserve('done', c(2n), { expiresAt: 5000, now: 1001 })) === 'reserved', 'then forgotten');
        expect((await s.total(a)) === 9n && (await s.total(b)) === 9n, 'forgetting an id keeps every amount');
      },
    },
    {
      name: 'multi: a time that is not a finite number is refused, forgetting nothing and releasing nothing',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        const c = [{ key: a, amount: 10n, ceiling: 100n }];
        await s.reserve('h', c, { now: 0, expiresAt: 1000, hold: true, releaseAt: 1000 });
        for (const bad of [NaN, Infinity, -Infinity, '1' as unknown as number]) {
          expect(await throwsRange(() => s.reserve('x', c, { now: bad })), `reserveMany refuses now=${String(bad)}`);
          expect(await throwsRange(() => s.commit('h', 1n, bad)), `commitMany refuses now=${String(bad)}`);
          expect(
            await throwsRange(() => s.reserve('y', c, { now: 0, expiresAt: bad })),
            `reserveMany refuses expiresAt=${String(bad)}`,
          );
          expect(
            await throwsRange(() => s.reserve('z', c, { now: 0, hold: true, releaseAt: bad })),
            `reserveMany refuses releaseAt=${String(bad)}`,
          );
          expect(
            await throwsRange(() => s.reserve('w', [{ ...c[0]!, ledgerExpiresAt: bad }], { now: 0 })),
            `reserveMany refuses ledgerExpiresAt=${String(bad)}`,
          );
        }
        expect((await s.total(a)) === 10n, 'the hold is still counted');
        expect(res(await s.reserve('h', c, { now: 1 })) === 'duplicate', 'its id still refuses');
      },
    },
    {
      name: 'multi: a window is kept until its ledgerExpiresAt and dropped from then on',
      async run() {
        const s = await manyOf(factory);
        const [life, w] = [k(), k()];
        const inW = (n: bigint): SpendCounter[] => [
          { key: life, amount: n, ceiling: 100n },
          { key: w, amount: n, ceiling: 10n, ledgerExpiresAt: 2000 },
        ];
        expect(res(await s.reserve('a', inW(8n), { now: 0, expiresAt: 5000 })) === 'reserved', 'in the window');
        await s.commit('a');
        await s.reserve('b', [{ key: life, amount: 1n, ceiling: 100n }], { now: 1999, expiresAt: 5000 });
        expect(
          res(await s.reserve('c', inW(3n), { now: 1999 })) === `exceeded:${w}`,
          'the window still counts at 1999',
        );
        await s.reserve('d', [{ key: life, amount: 1n, ceiling: 100n }], { now: 2000, expiresAt: 5000 });
        expect((await s.total(w)) === 0n, `dropped at its ledgerExpiresAt, reads ${await s.total(w)}`);
        expect((await s.total(life)) === 10n, 'the lifetime total stays');
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
        const inW2 = [
          { key: life, amount: 1n, ceiling: 100n },
          { key: w2, amount: 1n, ceiling: 10n },
        ];
        await s.reserve('c', inW2, { now: 1500, expiresAt: 5000 });
        await s.release('a'); // the payment in w1 did not happen, learned after w1 ended
        expect((await s.total(w1)) === 5n, `w1 gets its 5 back, total ${await s.total(w1)}`);
        expect((await s.total(life)) === 6n, 'and the lifetime total');
        await s.reserve('d', [{ key: life, amount: 1n, ceiling: 100n }], { now: 2500, expiresAt: 5000 });
        await s.release('b'); // w1 has been dropped: nothing to give back there, nothing resurrected
        expect((await s.total(life)) === 2n, 'lifetime gets it back');
        expect((await s.total(w1)) === 0n, `a dropped window reads 0, got ${await s.total(w1)}`);
      },
    },
  ];
}
