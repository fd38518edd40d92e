/**
 * A merchant's own ledger gives an uncaptured hold back at the SBA's expiry (PROTOCOL.md §15): it
 * knows it captured nothing. Not a day later without a time floor, and not only once every
 * reservation before it has expired (the clean-up must not stop at the first live record): a
 * charger must not refuse a customer it should serve.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { makeFleet, T0, HOUR } from '../offline/fleet.js';

const MIN = 60_000;

async function setup() {
  const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '4000', maxPayments: 100 } });
  const bundle = await fleet.bundle(1);
  let n = 0;
  const sba = (amount: string, at: number, ttlMs: number, hold = false) =>
    CTL.createSignedSessionBudgetAuthorization(
      {
        grant: fleet.grant,
        sessionId: 'sess_vehicle42',
        actorId: 'vehicle-42',
        maxAmountMinor: amount,
        budgetScope: 'TRIP',
        budgetId: `bud_x${++n}`,
        issuedAt: new Date(at - 1000).toISOString(),
        expiresAt: new Date(at + ttlMs).toISOString(),
        rail: 'card',
        ...(hold ? { hold: true } : {}),
      },
      { signingKey: fleet.wallet.privateKeyPem, now: () => at },
    );
  return { fleet, bundle, sba };
}

const cases: Array<
  [string, (sba: unknown, o: CTL.VerifyCtlOptions) => Promise<CTL.VerifyCtlResult>, () => CTL.SpendStorage]
> = [
  ['ctl, memory', CTL.verifyCtl, () => CTL.createMemorySpendStorage()],
  ['ctl/edge, memory', verifyCtlEdge, () => CTL.createMemorySpendStorage()],
  ['ctl, flash ledger', CTL.verifyCtl, () => createKvSpendStorage(createMemoryByteStorage())],
];

for (const [name, verify, storage] of cases) {
  for (const floor of [false, true]) {
    const title = `${name}${floor ? ', with a time floor' : ''}`;
    test(`${title}: an uncaptured hold stops counting at its expiry, behind a live payment`, async () => {
      const { fleet, bundle, sba } = await setup();
      const spendStorage = storage();
      let clock = T0;
      const o = {
        amount: '0',
        currency: 'EUR',
        offline: true,
        trustBundles: [bundle],
        rootPublicKeyPem: fleet.root.publicKeyPem,
        spendStorage,
        now: () => clock,
        ...(floor ? { timeFloor: CTL.createMemoryTimeFloor() } : {}),
      };
      const code = async (s: unknown, amount: string) => {
        const r = await verify(s, { ...o, amount });
        return r.valid ? 'valid' : r.error.code;
      };
      // A payment that lives long comes first: its record stays while the hold expires behind it.
      assert.is(await code(await sba('1000', clock, 20 * HOUR), '1000'), 'valid');
      assert.is(await code(await sba('3000', clock, 5 * MIN, true), '3000'), 'valid', 'the hold');
      assert.is(await code(await sba('1', clock, HOUR), '1'), 'offline_limit_exceeded', 'the hold is counted');
      clock = T0 + 5 * MIN; // the hold's SBA expires: uncaptured, it goes back now
      assert.is(await code(await sba('3000', clock, HOUR), '3000'), 'valid', 'the next customer is served');
      assert.is(await spendStorage.total(`grant:${fleet.grant.grantId}`), 4000n);
    });
  }
}

test.run();
