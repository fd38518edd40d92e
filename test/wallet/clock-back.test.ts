/**
 * A ledger remembers the latest time it has counted (PROTOCOL.md §12, §13): a clock set back, by
 * more than the day a window's ledger is kept past its end, never reopens a window the ledger
 * has seen close. In the wallet, which has no time floor, and in a verifier without one.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { keys, grant, fakeAuthority, HOUR, type Keys } from '../helpers/fixtures.js';

const DAY = 24 * HOUR;
const D0 = Date.UTC(2026, 10, 22); // a midnight: the days of the window start here
let k: Keys;
test.before(async () => {
  k = await keys();
});

const windowed = () =>
  grant(
    k,
    {
      maxAmountMinor: '5000',
      windows: [{ every: 'P1D', maxAmountMinor: '100' }],
      windowsStart: CTL.formatTimestamp(D0),
      issuedAt: CTL.formatTimestamp(D0),
      expiresAt: CTL.formatTimestamp(D0 + 10 * DAY),
    },
    D0,
  );

const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof CTL.CtlError ? e.code : String(e);
  }
};

const storages: Array<[string, () => CTL.SpendStorage]> = [
  ['memory', () => CTL.createMemorySpendStorage()],
  ['flash ledger', () => createKvSpendStorage(createMemoryByteStorage())],
];

for (const [name, make] of storages) {
  test(`${name}: the wallet's clock set back two days finds the day it spent still spent`, async () => {
    const g = await windowed();
    const storage = make();
    let clock = D0 + HOUR;
    const wallet = () =>
      CTL.createSession(g, {
        actorId: 'v',
        signingKey: k.actor.privateKeyPem,
        fetch: fakeAuthority(k).fetch,
        now: () => clock,
        spendStorage: storage,
      });
    const pay = (amount: string) => codeOf(() => wallet().createSba({ amount, currency: 'USD', rail: 'x402' }));
    assert.is(await pay('100'), 'ok', 'day 0');
    clock = D0 + 2 * DAY + HOUR; // day 2: day 0's ledger is dropped (kept a day past its end)
    assert.is(await pay('100'), 'ok', 'day 2');
    clock = D0 + 2 * HOUR; // set back into day 0
    assert.is(await pay('1'), 'window_exceeded', 'day 0 stays spent: the payment counts at day 2, which is spent');
    clock = D0 + 3 * DAY + HOUR;
    const next = await wallet().createSba({ amount: '100', currency: 'USD', rail: 'x402' });
    assert.is(next.authorization.issuedAt, CTL.formatTimestamp(clock));
    clock = D0 + 2 * HOUR; // and back again
    assert.is(await pay('1'), 'window_exceeded');
    const left = await wallet().remaining();
    assert.equal(left.windows, [{ every: 'P1D', remainingMinor: '0', resetsAt: CTL.formatTimestamp(D0 + 4 * DAY) }]);
    assert.is(left.remainingMinor, '4700');
  });
}

for (const [name, make] of storages) {
  test(`${name}: a refused payment two days on counts as time seen; the clock set back finds day 0 spent`, async () => {
    const g = await windowed();
    const storage = make();
    let clock = D0 + HOUR;
    const wallet = () =>
      CTL.createSession(g, {
        actorId: 'v',
        signingKey: k.actor.privateKeyPem,
        fetch: fakeAuthority(k).fetch,
        now: () => clock,
        spendStorage: storage,
      });
    const pay = (amount: string, hold = false) =>
      codeOf(() => wallet().createSba({ amount, currency: 'USD', rail: 'x402', hold }));
    assert.is(await pay('51'), 'ok', 'day 0');
    clock += 30_000; // within the minute: the ledger clock is not written for it
    assert.is(await pay('10', true), 'ok', 'a hold on day 0');
    clock = D0 + 2 * DAY + HOUR; // day 2: a refused payment drops day 0's ledger (kept a day past its end)
    assert.is(await pay('6000'), 'budget_exceeded');
    clock = D0 - 300 * DAY; // far back: counted at the latest time this ledger has seen, day 2
    const sba = await wallet().createSba({ amount: '50', currency: 'USD', rail: 'x402' });
    // Day 0 holds 61 of its 100: the 50 must count on day 2, never again on day 0.
    assert.is(sba.authorization.issuedAt, CTL.formatTimestamp(D0 + 2 * DAY + HOUR));
    assert.is(await pay('51'), 'window_exceeded', 'day 2 has 50 of 100');
  });
}

for (const [name, verify] of [
  ['ctl', CTL.verifyCtl],
  ['ctl/edge', verifyCtlEdge],
] as const) {
  test(`${name}: a verifier without a time floor, its clock set back two days, reopens no window`, async () => {
    const g = await windowed();
    const storage = CTL.createMemorySpendStorage();
    let clock = D0 + HOUR;
    let n = 0;
    const sba = (at: number, ttl = 3 * DAY) =>
      CTL.createSignedSessionBudgetAuthorization(
        {
          grant: g,
          sessionId: 'sess_1',
          actorId: 'v',
          maxAmountMinor: '100',
          budgetId: `bud_cb${++n}`,
          issuedAt: CTL.formatTimestamp(at),
          expiresAt: CTL.formatTimestamp(Math.min(at + ttl, D0 + 10 * DAY)),
          rail: 'x402',
        },
        { signingKey: k.actor.privateKeyPem, now: () => at },
      );
    const o = {
      amount: '100',
      currency: 'USD',
      trackSpend: true,
      signingKeyPem: k.authority.publicKeyPem,
      fetch: fakeAuthority(k).fetch,
      spendStorage: storage,
      now: () => clock,
    };
    const code = async (s: unknown) => {
      const r = await verify(s, o);
      return r.valid ? 'valid' : r.error.code;
    };
    const early = await sba(D0 + HOUR);
    assert.is(await code(await sba(D0 + HOUR)), 'valid', 'day 0');
    clock = D0 + 2 * DAY + HOUR;
    assert.is(await code(await sba(clock)), 'valid', 'day 2');
    clock = D0 + 2 * HOUR; // set back into day 0
    assert.is(await code(early), 'window_exceeded', 'counted at the latest time the ledger counted: day 2 is spent');
  });
}

test.run();
