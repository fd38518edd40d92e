// Variable amounts (PROTOCOL.md §15) and budget windows (§13) at the wallet and the verifier: a
// hold reserves its maximum, a capture keeps what was used (below, at, never above the hold;
// once; before expiry), a hold never captured goes back at its expiry; `remaining()` shows each
// window; a storage without the atomic reserve refuses windows and holds instead of half-enforcing.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  captureCtl,
  createMemorySpendStorage,
  createSession,
  CtlError,
  formatTimestamp,
  verifyCtl,
  ctl,
  encodeSbaHeader,
  type SpendStorage,
} from '../../src/index.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof CtlError ? e.code : `${(e as Error).name}: ${(e as Error).message}`;
  }
};

async function walletWith(over: Record<string, unknown> = {}, storage: SpendStorage = createMemorySpendStorage()) {
  const clock = { t: T0 };
  const g = await grant(k, { maxAmountMinor: '5000', ...over });
  const s = createSession(g, {
    actorId: 'charger-user',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => clock.t,
    spendStorage: storage,
  });
  const hold = (amount: string) => s.createSba({ amount, currency: 'USD', rail: 'x402', hold: true });
  return { s, g, clock, hold, storage };
}

test('a wallet hold: signed as a hold, captured below, at, above, twice, late, never', async () => {
  const { s, clock, hold } = await walletWith();
  const h1 = await hold('3000');
  assert.is(h1.authorization.capture, 'hold');
  assert.is(h1.authorization.maxAmountMinor, '3000');
  assert.is((await s.remaining()).remainingMinor, '2000', 'the maximum is reserved before anything is paid');
  assert.is(await codeOf(() => s.capture(h1.authorization.budgetId, '3001')), 'capture_exceeds_hold');
  assert.is((await s.remaining()).remainingMinor, '2000', 'a capture above the hold changes nothing');
  assert.is(await codeOf(() => s.capture(h1.authorization.budgetId, '1234')), 'ok', 'below');
  assert.is((await s.remaining()).remainingMinor, '3766', 'the rest went back');
  assert.is(await codeOf(() => s.capture(h1.authorization.budgetId, '1234')), 'replay', 'captured twice');
  const h2 = await hold('1000');
  assert.is(await codeOf(() => s.capture(h2.authorization.budgetId, '1000')), 'ok', 'at the hold');
  assert.is((await s.remaining()).remainingMinor, '2766');
  const h3 = await hold('2000');
  clock.t = Date.parse(h3.authorization.expiresAt) + HOUR;
  assert.is((await s.remaining()).remainingMinor, '766', 'an hour past its expiry the hold is still counted whole');
  assert.is(await codeOf(() => s.capture(h3.authorization.budgetId, '1')), 'ok', 'a capture learned late settles it');
  assert.is((await s.remaining()).remainingMinor, '2765');
  const h4 = await hold('2000'); // never captured, never learned
  clock.t = Date.parse(h4.authorization.expiresAt) + 2 * HOUR;
  await s.createSba({ amount: '1', currency: 'USD', rail: 'x402' }); // a reservation that sweeps
  assert.is((await s.remaining()).remainingMinor, '764', 'an outcome never learned stays counted (PROTOCOL.md §15)');
  assert.is(await codeOf(() => s.capture(h4.authorization.budgetId, '0')), 'ok', 'a void (capture of 0) releases it');
  assert.is((await s.remaining()).remainingMinor, '2764');
  assert.is(await codeOf(() => s.capture('bud_unknown', '1')), 'hold_expired');
  assert.is(await codeOf(() => s.capture('not an id', '1')), 'malformed');
});

test(
  'a merchant whose clock runs behind captures at its expiry: the wallet still holds ' + 'it, never re-spends it',
  async () => {
    const { s, clock, hold } = await walletWith();
    const h = await hold('3000');
    // The merchant's clock is 5 minutes behind: it captures at what is, for the wallet, expiry + 5 min.
    clock.t = Date.parse(h.authorization.expiresAt) + 5 * 60_000;
    assert.is((await s.remaining()).remainingMinor, '2000', 'the hold is still reserved');
    assert.is(await codeOf(() => s.createSba({ amount: '2001', currency: 'USD', rail: 'x402' })), 'budget_exceeded');
    assert.is(await codeOf(() => s.capture(h.authorization.budgetId, '3000')), 'ok', 'the capture is learned');
    assert.is((await s.remaining()).remainingMinor, '2000', 'spent once, at the captured amount');
  },
);

test('a verifier captures a hold before the SBA expiry, not in its clock tolerance', async () => {
  const { hold } = await walletWith();
  const h = await hold('3000');
  const expiry = Date.parse(h.authorization.expiresAt);
  const storage = createMemorySpendStorage();
  const r = await verifyCtl(h, {
    amount: '3000',
    currency: 'USD',
    signingKeyPem: k.authority.publicKeyPem,
    offline: true,
    spendStorage: storage,
    clockToleranceMs: 60_000,
    now: () => expiry - 1000,
  });
  assert.ok(r.valid, JSON.stringify(r));
  const late = await captureCtl(r.valid ? r.holdId! : '', '100', { now: () => expiry + 30_000, spendStorage: storage });
  assert.is(late.captured ? 'ok' : late.error.code, 'hold_expired');
});

test('a hold is counted in every window at its maximum, and its capture gives the windows the rest', async () => {
  const { s, hold } = await walletWith({
    windowsStart: formatTimestamp(T0 - HOUR),
    windows: [
      { every: 'P1D', maxAmountMinor: '3000', maxPayments: 2 },
      { every: 'PT1H', maxAmountMinor: '3000' },
    ],
  });
  const h = await hold('3000');
  const before = await s.remaining();
  assert.equal(before.windows, [
    { every: 'P1D', remainingMinor: '0', remainingPayments: 1, resetsAt: formatTimestamp(T0 + 23 * HOUR) },
    { every: 'PT1H', remainingMinor: '0', resetsAt: formatTimestamp(T0 + HOUR) },
  ]);
  assert.is(await codeOf(() => s.createSba({ amount: '1', currency: 'USD', rail: 'x402' })), 'window_exceeded');
  await s.capture(h.authorization.budgetId, '1234');
  const after = await s.remaining();
  assert.is(after.windows![0]!.remainingMinor, '1766');
  assert.is(after.windows![0]!.remainingPayments, 1, 'the capture keeps the payment counted');
  assert.is(after.remainingMinor, '3766');
});

test('a window refuses its maxAmountMinor+1-th unit and its maxPayments+1-th payment; the next accepts', async () => {
  const { s, clock } = await walletWith({
    expiresAt: formatTimestamp(T0 + 5 * 24 * HOUR),
    windowsStart: formatTimestamp(T0),
    windows: [{ every: 'P1D', maxAmountMinor: '100', maxPayments: 3 }],
  });
  const pay = (amount: string) => codeOf(() => s.createSba({ amount, currency: 'USD', rail: 'x402' }));
  assert.is(await pay('100'), 'ok');
  assert.is(await pay('1'), 'window_exceeded', 'the 101st minor unit');
  clock.t = T0 + 24 * HOUR;
  assert.is(await pay('1'), 'ok', 'the next window');
  assert.is(await pay('1'), 'ok');
  assert.is(await pay('1'), 'ok');
  assert.is(await pay('1'), 'window_exceeded', 'the 4th payment');
  clock.t = T0 + 48 * HOUR;
  assert.is(await pay('1'), 'ok');
});

test('a month window from the 31st: the next window starts on the last day of a shorter month', async () => {
  const jan31 = Date.UTC(2026, 0, 31, 12);
  const g = await grant(
    k,
    {
      maxAmountMinor: '5000',
      expiresAt: formatTimestamp(Date.UTC(2026, 3, 30)),
      windowsStart: formatTimestamp(jan31),
      windows: [{ every: 'P1M', maxAmountMinor: '100' }],
    },
    jan31,
  );
  let t = jan31;
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => t,
  });
  const pay = (amount: string) => codeOf(() => s.createSba({ amount, currency: 'USD', rail: 'x402' }));
  assert.is(await pay('100'), 'ok');
  t = Date.UTC(2026, 1, 28, 11, 59);
  const refused = await s.createSba({ amount: '1', currency: 'USD', rail: 'x402' }).catch((e) => e);
  assert.is((refused as CtlError).code, 'window_exceeded');
  assert.is((refused as CtlError).resetsAt, '2026-02-28T12:00:00Z');
  t = Date.UTC(2026, 1, 28, 12);
  assert.is(await pay('100'), 'ok', 'February 28th 12:00 starts the next window');
  t = Date.UTC(2026, 2, 30, 12);
  assert.is(await pay('1'), 'window_exceeded', 'March 30th is still the February window');
  t = Date.UTC(2026, 2, 31, 12);
  assert.is(await pay('1'), 'ok', 'March 31st: back to the 31st');
});

test(
  'a storage with only the single-counter reserve refuses windows and holds, and still ' + 'pays plain grants',
  async () => {
    const full = createMemorySpendStorage();
    const old: SpendStorage = {
      reserve: full.reserve,
      commit: full.commit,
      release: full.release,
      total: full.total,
    };
    const plain = await walletWith({}, old);
    assert.is(await codeOf(() => plain.s.createSba({ amount: '5', currency: 'USD', rail: 'x402' })), 'ok');
    assert.is(await codeOf(() => plain.hold('5')), 'unsupported_feature');
    const windowed = await walletWith({ windows: [{ every: 'P1D', maxAmountMinor: '10' }] }, old);
    assert.is(
      await codeOf(() => windowed.s.createSba({ amount: '5', currency: 'USD', rail: 'x402' })),
      'unsupported_feature',
    );
    assert.is(await full.total(`grant:${windowed.g.grantId}`), 0n, 'nothing half counted');
  },
);

test('the verifier records a hold at its maximum and captures it once, at most the hold, before expiry', async () => {
  const { hold } = await walletWith({ maxAmountMinor: '10000', offline: { maxAmountMinor: '4000', maxPayments: 10 } });
  const storage = createMemorySpendStorage();
  let t = T0;
  const verify = (sba: unknown, amount: string) =>
    verifyCtl(sba, {
      amount,
      currency: 'USD',
      signingKeyPem: k.authority.publicKeyPem,
      offline: true,
      spendStorage: storage,
      now: () => t,
    });
  const capture = (sba: object, amount: string) => captureCtl(sba, amount, { now: () => t, spendStorage: storage });
  const codeOfCapture = async (sba: object, amount: string) => {
    const r = await capture(sba, amount);
    return r.captured ? `captured ${r.amountMinor}` : r.error.code;
  };
  const h1 = await hold('3000');
  const r1 = await verify(h1, '3000');
  assert.ok(r1.valid, JSON.stringify(r1));
  assert.is(r1.valid && r1.holdId, `grant:${h1.grant.grantId}|${h1.authorization.budgetId}`, 'the hold is named');
  const h2 = await hold('1001');
  const r2 = await verify(h2, '1001');
  assert.is(!r2.valid && r2.error.code, 'offline_limit_exceeded', 'the offline allowance holds the maximum');
  const replay = await verify(h1, '3000');
  assert.is(!replay.valid && replay.error.code, 'replay', 'a hold presented twice');
  assert.is(await codeOfCapture(h1, '3001'), 'capture_exceeds_hold');
  assert.is(await codeOfCapture(h1, '1234'), 'captured 1234', 'below');
  assert.is(await codeOfCapture(h1, '1234'), 'replay', 'twice');
  const r3 = await verify(h2, '1001');
  assert.ok(r3.valid, 'the offline allowance counts the captured amount: 1234 + 1001 ≤ 4000');
  assert.is(await codeOfCapture(h2, '1001'), 'captured 1001', 'at the hold');
  const h3 = await hold('1765');
  assert.ok((await verify(h3, '1765')).valid);
  assert.is(await storage.total(`offline-amount:${h3.grant.grantId}@0`), 4000n, 'held at its maximum');
  t = Date.parse(h3.authorization.expiresAt);
  assert.is(await codeOfCapture(h3, '1'), 'hold_expired', 'at its expiry');
  assert.is(
    await storage.total(`offline-amount:${h3.grant.grantId}@0`),
    2235n,
    'the merchant gives an uncaptured hold back at its expiry (PROTOCOL.md §15), not a day later',
  );
});

test('the middleware gives a hold req.ctl.capture: at most the hold, once', async () => {
  const { hold } = await walletWith();
  const h = await hold('3000');
  const mw = ctl({
    amount: '3000',
    currency: 'USD',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    spendStorage: createMemorySpendStorage(),
    now: () => T0,
  });
  const server = http.createServer((req: any, res) =>
    mw(req, res, async () => {
      const above = await req.ctl.capture('3001');
      const used = await req.ctl.capture('1234');
      const again = await req.ctl.capture('1234');
      res.end(JSON.stringify([above.error?.code, used.amountMinor, again.error?.code]));
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const r = await fetch(url, { method: 'POST', headers: { authorization: encodeSbaHeader(h) } });
    assert.equal(await r.json(), ['capture_exceeds_hold', '1234', 'replay']);
  } finally {
    server.close();
  }
});

test.run();
