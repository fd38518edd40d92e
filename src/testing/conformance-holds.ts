/**
 * The hold rules (PROTOCOL.md §15) of `reserveMany` / `commitMany` / `releaseMany`: a capture keeps
 * at most the hold, once; a merchant's hold (with `releaseAt`) goes back at that instant, whatever
 * else the storage holds, its id still refusing a replay; a wallet's hold (without) stays whole
 * until it is captured or voided, also long past its expiry.
 */
import type { SpendCounter } from '../wallet/spend-storage.js';
import { expect, manyOf, res, type ConformanceCase, type Factory } from './conformance-kit.js';

export function holdCases(factory: Factory, k: () => string): ConformanceCase[] {
  return [
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
        await hold('h4');
        expect((await s.commit('h4', 0n)) === 'committed', 'a void: a capture of 0');
        expect((await s.total(a)) === 24n && (await s.total(n)) === 4n, 'nothing kept but the count');
        expect((await s.commit('nothing', 1n)) === 'unknown', 'an unknown id');
        // A capture settles only a hold: a plain payment's id is public in its SBA, and one
        // captured between its reserve and its commit would be counted at less than was accepted.
        await s.reserve('p1', [{ key: a, amount: 10n, ceiling: 100n }]);
        expect((await s.commit('p1', 0n)) === 'unknown', 'a capture of a reservation that is not a hold');
        expect((await s.total(a)) === 34n, 'the plain payment still counts whole');
        expect((await s.commit('p1')) === 'committed', 'and is committed whole');
      },
    },
    {
      name: 'multi: 30 concurrent captures of one hold: exactly one committed',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        await s.reserve('h', [{ key: a, amount: 100n, ceiling: 1000n }], { hold: true });
        const results = await Promise.all(Array.from({ length: 30 }, (_, i) => s.commit('h', BigInt(i + 1))));
        expect(results.filter((r) => r === 'committed').length === 1, `one committed, got ${results.join(',')}`);
        expect(
          results.every((r) => r === 'committed' || r === 'duplicate'),
          'the others are duplicate',
        );
        const won = BigInt(results.indexOf('committed') + 1);
        expect((await s.total(a)) === won, `the total is the one capture ${won}, got ${await s.total(a)}`);
      },
    },
    {
      // A merchant's ledger (PROTOCOL.md §15): an uncaptured hold stops counting at its releaseAt,
      // however many reservations came before it and live longer, and is captured no later.
      name: 'multi: a hold with releaseAt goes back at that instant, even behind longer-lived reservations',
      async run() {
        const s = await manyOf(factory);
        const [a, other] = [k(), k()];
        const c = (n: bigint): SpendCounter[] => [{ key: a, amount: n, ceiling: 100n }];
        await s.reserve('long', c(5n), { now: 0, expiresAt: 100_000 }); // lives long, comes first
        await s.commit('long');
        await s.reserve('held', c(40n), { now: 1, expiresAt: 90_000, hold: true, releaseAt: 1000 });
        await s.reserve('late', c(20n), { now: 2, expiresAt: 90_000, hold: true, releaseAt: 5000 });
        await s.reserve('probe', [{ key: other, amount: 1n, ceiling: 9n }], { now: 999, expiresAt: 90_000 });
        expect(res(await s.reserve('more', c(36n), { now: 999 })) === `exceeded:${a}`, 'held until 999');
        expect(res(await s.reserve('more', c(35n), { now: 1000, expiresAt: 90_000 })) === 'reserved', 'room at 1000');
        expect((await s.total(a)) === 60n, `5 + 20 + 35, got ${await s.total(a)}`);
        expect((await s.commit('held', 1n, 1000)) === 'unknown', 'captured at its releaseAt: too late');
        expect((await s.commit('late', 7n, 4999)) === 'committed', 'the other hold is captured in time');
        expect((await s.total(a)) === 47n, 'and counted at its capture');
      },
    },
    {
      name: 'multi: a hold released at its releaseAt keeps its id until expiresAt; release after it changes nothing',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        const c: SpendCounter[] = [{ key: a, amount: 10n, ceiling: 100n }];
        await s.reserve('h', c, { now: 0, expiresAt: 5000, hold: true, releaseAt: 1000 });
        expect(res(await s.reserve('h', c, { now: 1000 })) === 'duplicate', 'released, still a replay at 1000');
        expect((await s.total(a)) === 0n, 'given back');
        await s.release('h');
        expect((await s.total(a)) === 0n, 'a release after it gives nothing back twice');
        expect(res(await s.reserve('h', c, { now: 4999 })) === 'duplicate', 'still a replay at 4999');
        expect((await s.commit('h', 1n, 4999)) === 'unknown', 'never captured once released');
        expect(res(await s.reserve('h', c, { now: 5000, expiresAt: 9000 })) === 'reserved', 'forgotten at 5000');
      },
    },
    {
      // A wallet's hold (PROTOCOL.md §15): the merchant may have captured all of it, so it stays
      // counted, whole, until the capture is learned, however long that takes.
      name: 'multi: a hold without releaseAt stays whole past its expiresAt until captured or voided',
      async run() {
        const s = await manyOf(factory);
        const [a, b] = [k(), k()];
        const c = (n: bigint): SpendCounter[] => [{ key: a, amount: n, ceiling: 100n }];
        await s.reserve('w1', c(60n), { now: 0, expiresAt: 1000, hold: true });
        await s.reserve('w2', c(30n), { now: 1, expiresAt: 1000, hold: true });
        for (const now of [1000, 86_400_000, 10 * 86_400_000]) {
          await s.reserve(`x${now}`, [{ key: b, amount: 1n, ceiling: 100n }], { now, expiresAt: now + 1 });
          expect((await s.total(a)) === 90n, `both holds still counted at ${now}, got ${await s.total(a)}`);
          expect(res(await s.reserve('w1', c(1n), { now })) === 'duplicate', `w1's id kept at ${now}`);
        }
        const late = 10 * 86_400_000 + 5;
        expect((await s.commit('w1', 59n, late)) === 'committed', 'a capture learned late');
        expect((await s.commit('w2', 0n, late)) === 'committed', 'a void learned late');
        expect((await s.total(a)) === 59n, `59 kept, got ${await s.total(a)}`);
        expect(
          res(await s.reserve('w1', c(1n), { now: late + 1, expiresAt: late + 2 })) === 'reserved',
          'then forgotten',
        );
      },
    },
    {
      name: 'multi: a plain reservation never committed stays counted past its expiry',
      async run() {
        const s = await manyOf(factory);
        const a = k();
        await s.reserve('plain', [{ key: a, amount: 2n, ceiling: 100n }], { expiresAt: 1000, now: 0 });
        await s.reserve('later', [{ key: a, amount: 1n, ceiling: 100n }], { now: 2001 });
        expect((await s.total(a)) === 3n, `the plain reservation stays counted, total ${await s.total(a)}`);
      },
    },
  ];
}
