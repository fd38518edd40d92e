/**
 * A capture under a host time floor (PROTOCOL.md §12, §15) drops what has expired by its time, a
 * replay id kept only until its SBA's expiry among it: the floor holds that time first, so a clock
 * set back after the capture revives no SBA the verifier has already forgotten.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { keys, grant, fakeAuthority, HOUR, type Keys } from '../helpers/fixtures.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 10, 22, 10);
let k: Keys;
test.before(async () => {
  k = await keys();
});

test('an SBA expired before a capture is not accepted again once the clock is set back', async () => {
  const g = await grant(k, { maxAmountMinor: '5000' }, T0);
  const storage = CTL.createMemorySpendStorage();
  const timeFloor = CTL.createMemoryTimeFloor();
  let clock = T0;
  let n = 0;
  const sba = (at: number, ttl: number, hold = false) =>
    CTL.createSignedSessionBudgetAuthorization(
      {
        grant: g,
        sessionId: 'sess_1',
        actorId: 'v',
        maxAmountMinor: '100',
        budgetId: `bud_cf${++n}`,
        issuedAt: CTL.formatTimestamp(at),
        expiresAt: CTL.formatTimestamp(at + ttl),
        rail: 'x402',
        ...(hold ? { hold: true } : {}),
      },
      { signingKey: k.actor.privateKeyPem, now: () => at },
    );
  const verify = (s: unknown) =>
    CTL.verifyCtl(s, {
      amount: '100',
      currency: 'USD',
      trackSpend: true,
      signingKeyPem: k.authority.publicKeyPem,
      fetch: fakeAuthority(k).fetch,
      spendStorage: storage,
      timeFloor,
      now: () => clock,
    });
  const expiry = T0 + 5 * MIN;
  const a = await sba(T0, 5 * MIN);
  assert.ok((await verify(a)).valid);
  clock = expiry - 20_000; // a hold accepted 20 s before A expires: the floor moves here
  const h = await verify(await sba(clock, HOUR, true));
  assert.ok(h.valid && h.holdId, JSON.stringify(h));
  clock = expiry + 30_000; // the capture, within the minute the floor is not rewritten for
  const c = await CTL.captureCtl(h.valid ? h.holdId! : '', '40', {
    spendStorage: storage,
    timeFloor,
    now: () => clock,
  });
  assert.ok(c.captured, JSON.stringify(c));
  clock = expiry - 10_000; // set back: A would still be valid at this clock
  const again = await verify(a);
  assert.ok(!again.valid, 'accepted twice');
  assert.ok(['replay', 'sba_expired'].includes(!again.valid ? again.error.code : ''), JSON.stringify(again));
});

test.run();
