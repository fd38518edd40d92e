// The wallet at the edges of PROTOCOL.md §12 and §13: a clock or a time option that is not a
// finite number is refused (a string clock once made every SBA live as long as its grant), and a
// grant's budget windows are counted at each SBA's issuedAt, refused with resetsAt.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSession, createSignedSessionBudgetAuthorization, CtlError, formatTimestamp } from '../../src/index.js';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'signed';
  } catch (e) {
    return e instanceof CtlError ? e.code : `${(e as Error).name}: ${(e as Error).message}`;
  }
};

test('a wallet clock or time option that is not a finite number refuses; an SBA never outlives its TTL', async () => {
  const g = await grant(k);
  const session = (o: Record<string, unknown>) =>
    createSession(g, {
      actorId: 'v',
      signingKey: k.actor.privateKeyPem,
      fetch: fakeAuthority(k).fetch,
      now: () => T0,
      ...o,
    });
  const pay = (o: Record<string, unknown>) =>
    codeOf(() => session(o).createSba({ amount: '1', currency: 'USD', rail: 'x402' }));
  for (const now of [() => NaN, () => undefined, () => String(T0), () => Infinity])
    assert.is(await pay({ now }), 'malformed', `now() → ${String(now())}`);
  for (const o of [
    { sbaTtlMs: '300000' },
    { sbaTtlMs: NaN },
    { revocationTtl: Infinity },
    { revocationTimeoutMs: -1 },
    { sbaTtlMs: 1e300 },
  ]) {
    assert.is(await codeOf(async () => session(o)), 'malformed', JSON.stringify(o));
  }
  const sba = await session({}).createSba({ amount: '1', currency: 'USD', rail: 'x402' });
  assert.is(Date.parse(sba.authorization.expiresAt) - Date.parse(sba.authorization.issuedAt), 5 * 60_000);
  // The one-shot signer too.
  const oneShot = (now: () => unknown) =>
    codeOf(() =>
      createSignedSessionBudgetAuthorization(
        {
          grant: g,
          sessionId: 's',
          actorId: 'v',
          maxAmountMinor: '1',
          budgetScope: 'TRIP',
          budgetId: 'b1',
        },
        { signingKey: k.actor.privateKeyPem, now: now as () => number },
      ),
    );
  assert.is(await oneShot(() => String(T0)), 'malformed');
  assert.is(await oneShot(() => T0), 'signed');
});

test("the wallet counts every budget window at the SBA's issuedAt and refuses with resetsAt", async () => {
  let t = T0;
  const g = await grant(k, {
    maxAmountMinor: '5000',
    expiresAt: formatTimestamp(T0 + 10 * 24 * HOUR),
    windowsStart: formatTimestamp(T0),
    windows: [
      { every: 'P1D', maxAmountMinor: '1000' },
      { every: 'PT1H', maxAmountMinor: '5000', maxPayments: 3 },
    ],
  });
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => t,
  });
  const pay = (amount: string) => s.createSba({ amount, currency: 'USD', rail: 'x402' });
  await pay('600');
  await pay('400');
  let refused: unknown;
  try {
    await pay('1');
  } catch (e) {
    refused = e;
  }
  assert.ok(refused instanceof CtlError && refused.code === 'window_exceeded', String(refused));
  assert.is((refused as CtlError).resetsAt, formatTimestamp(T0 + 24 * HOUR));
  t = T0 + 24 * HOUR; // the next day
  await pay('1');
  await pay('1');
  await pay('1');
  assert.is(await codeOf(() => pay('1')), 'window_exceeded', 'the fourth payment in one hour');
  t = T0 + 25 * HOUR;
  await pay('1');
  assert.is((await s.remaining()).remainingMinor, '3996', 'the lifetime total counts every window');
});

test.run();
