// Attacks on holds (PROTOCOL.md §15), budget windows (§13) and the atomic multi-counter reserve:
// each test is a sequence that once let money pass a bound, lose an amount or let a replay through.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  captureCtl,
  createMemorySpendStorage,
  createSignedSessionBudgetAuthorization,
  verifyCtl,
} from '../../src/index.js';
import { keys, grant, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const holdOf = (g: Awaited<ReturnType<typeof grant>>, amount: string, budgetId: string) =>
  createSignedSessionBudgetAuthorization(
    {
      grant: g,
      sessionId: 'sess_charger',
      actorId: 'charger-user',
      maxAmountMinor: amount,
      budgetId,
      issuedAt: new Date(T0 - 1000).toISOString(),
      expiresAt: new Date(T0 + HOUR).toISOString(),
      rail: 'card',
      hold: true,
    },
    { signingKey: k.actor.privateKeyPem, now: () => T0 },
  );

test("another grant's hold under the same budgetId cannot take over the capture of a live hold", async () => {
  const storage = createMemorySpendStorage();
  const verify = (sba: unknown, amount: string) =>
    verifyCtl(sba, {
      amount,
      currency: 'USD',
      signingKeyPem: k.authority.publicKeyPem,
      offline: true,
      spendStorage: storage,
      now: () => T0,
    });
  const victim = await grant(k, { grantId: 'grant_victim_h1', maxAmountMinor: '5000' });
  const other = await grant(k, { grantId: 'grant_other_h1', maxAmountMinor: '5000' });
  const h = await holdOf(victim, '3000', 'bud_shared_h1');
  assert.ok((await verify(h, '3000')).valid);
  // The budgetId is on the wire: anyone holding a grant can sign an SBA that carries it.
  const copy = await holdOf(other, '1', 'bud_shared_h1');
  const r = await verify(copy, '1');
  assert.is(!r.valid && r.error.code, 'replay', 'a live hold already answers to this budgetId');
  assert.is(await storage.total('grant:grant_other_h1'), 0n, 'the refused hold keeps nothing reserved');
  const c = await captureCtl('bud_shared_h1', '1234', { now: () => T0 });
  assert.equal(c, { captured: true, amountMinor: '1234' }, 'the capture settles the hold the merchant served');
  assert.is(await storage.total('grant:grant_victim_h1'), 1234n);
});

test.run();
