/**
 * Holds live in the SpendStorage (PROTOCOL.md §15), never only in a process's memory: a wallet or
 * a verifier restarted between hold and capture (new objects over the same storage) changes
 * nothing. The car: a grant of 3,000, a hold of 3,000, a restart while charging, the charger
 * captures 2,800; the wallet then signs at most 200 more, never 3,000.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createSession,
  CtlError,
  verifyCtl,
  type PolicyGrant,
  type SpendStorage,
} from '../../src/index.js';
import * as VerifyEntry from '../../src/entries/verify.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
let g: PolicyGrant;
test.before(async () => {
  k = await keys();
  g = await grant(k, { maxAmountMinor: '3000', destinationAllowlist: ['charger-17'] });
});

const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof CtlError ? e.code : `${(e as Error).name}: ${(e as Error).message}`;
  }
};

const car = (storage: SpendStorage, clock: { t: number }) =>
  createSession(g, {
    actorId: 'car-7',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => clock.t,
    spendStorage: storage,
  });
const pay = (s: ReturnType<typeof car>, amount: string, hold = false) =>
  codeOf(() => s.createSba({ amount, currency: 'USD', rail: 'card', merchantId: 'charger-17', hold }));

const storages: Array<[string, () => SpendStorage]> = [
  ['memory', () => createMemorySpendStorage()],
  ['flash ledger', () => createKvSpendStorage(createMemoryByteStorage())],
];

for (const [name, make] of storages) {
  test(`${name}: the car restarts while charging, the charger captures 2,800: 200 more, never 3,000`, async () => {
    const storage = make();
    const clock = { t: T0 };
    const before = car(storage, clock);
    const hold = await before.createSba({
      amount: '3000',
      currency: 'USD',
      rail: 'card',
      merchantId: 'charger-17',
      hold: true,
    });
    // The charger verifies the hold for its maximum on its own ledger and charges.
    const charger = createMemorySpendStorage();
    const v = await verifyCtl(hold, {
      amount: '3000',
      currency: 'USD',
      merchantId: 'charger-17',
      signingKeyPem: k.authority.publicKeyPem,
      offline: true,
      spendStorage: charger,
      now: () => clock.t,
    });
    assert.ok(v.valid, JSON.stringify(v));
    // The car restarts: a new session object, a new session id, the same storage.
    const after = car(storage, clock);
    assert.is.not(after.sessionId, before.sessionId);
    assert.is((await after.remaining()).remainingMinor, '0', 'the hold is still counted after the restart');
    assert.is(await pay(after, '1'), 'budget_exceeded');
    // Long past the SBA's expiry, the outcome still unknown to the car: the hold stays counted.
    clock.t = Date.parse(hold.authorization.expiresAt) + 2 * HOUR;
    assert.is((await after.remaining()).remainingMinor, '0', 'an unknown outcome is never released by time');
    assert.is(await pay(after, '3000'), 'budget_exceeded', 'never 3,000 more');
    // The charger captured 2,800 before the SBA expired; the car learns it from its receipt.
    const c = await VerifyEntry.captureCtl(v.valid ? v.holdId! : '', '2800', {
      spendStorage: charger,
      now: () => Date.parse(hold.authorization.expiresAt) - 1000,
    });
    assert.equal(c, { captured: true, amountMinor: '2800' });
    await after.capture(hold.authorization.budgetId, '2800');
    assert.is((await after.remaining()).remainingMinor, '200');
    assert.is(await pay(after, '201'), 'budget_exceeded');
    assert.is(await pay(after, '3000'), 'budget_exceeded');
    assert.is(await pay(after, '200'), 'ok');
    // Learned once: settled, its id forgotten since the SBA expired (PROTOCOL.md §12); nothing moves.
    for (const s of [after, car(storage, clock)]) {
      const again = await codeOf(() => s.capture(hold.authorization.budgetId, '1'));
      assert.ok(again === 'replay' || again === 'hold_expired', again);
    }
    assert.is((await after.remaining()).remainingMinor, '0');
  });

  test(`${name}: a void (capture of 0) learned after a restart gives the whole hold back`, async () => {
    const storage = make();
    const clock = { t: T0 };
    const hold = await car(storage, clock).createSba({ amount: '3000', currency: 'USD', rail: 'card', hold: true });
    clock.t += 3 * HOUR;
    const again = car(storage, clock);
    await again.capture(hold.authorization.budgetId, '0');
    assert.is((await again.remaining()).remainingMinor, '3000');
    assert.is(await pay(again, '3000'), 'ok');
  });
}

test('a verifier restarted between hold and capture captures it from the storage the verification used', async () => {
  const storage = createMemorySpendStorage();
  const clock = { t: T0 };
  const hold = await car(createMemorySpendStorage(), clock).createSba({
    amount: '3000',
    currency: 'USD',
    rail: 'card',
    hold: true,
  });
  const o = {
    amount: '3000',
    currency: 'USD',
    signingKeyPem: k.authority.publicKeyPem,
    offline: true,
    spendStorage: storage,
    now: () => clock.t,
  };
  const v = await verifyCtl(hold, o);
  assert.ok(v.valid && v.holdId, JSON.stringify(v));
  // Another verifier object (`ctl/verify`'s), as a restarted process has: only the storage is shared.
  const bare = await VerifyEntry.captureCtl(v.valid ? v.holdId! : '', '2800', { now: () => clock.t });
  assert.is(!bare.captured && bare.error.code, 'hold_expired', 'not in that verifier’s own memory');
  const c = await VerifyEntry.captureCtl(hold, '2800', { spendStorage: storage, now: () => clock.t });
  assert.equal(c, { captured: true, amountMinor: '2800' }, 'named by the SBA, found in the storage');
  assert.is(await storage.total(`grant:${g.grantId}`), 2800n);
  const again = await verifyCtl(hold, o);
  assert.is(!again.valid && again.error.code, 'replay');
});

test.run();
