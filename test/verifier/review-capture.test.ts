/**
 * Adversarial review of the capture (PROTOCOL.md §15): a capture names a hold, and only a hold.
 * A payment that is not a hold is committed at its whole amount right after its reservation; a
 * capture that reaches it first (the holdId is only `grant:<grantId>|<budgetId>`, public in the
 * SBA) must not commit it at less, else the ledger counts less than was accepted and the grant's
 * bound is passed by the difference.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { makeFleet, T0, HOUR } from '../offline/fleet.js';

/** Lets a capture run between the reservation of a payment and its commit (an async storage's gap). */
function gapBeforeCommit(inner: CTL.SpendStorage): { storage: CTL.SpendStorage; inGap: Promise<void>; go(): void } {
  let signal!: () => void;
  let go!: () => void;
  const inGap = new Promise<void>((r) => (signal = r));
  const resume = new Promise<void>((r) => (go = r));
  const storage: CTL.SpendStorage = {
    ...inner,
    reserve: inner.reserve.bind(inner),
    commit: inner.commit.bind(inner),
    release: inner.release.bind(inner),
    total: inner.total.bind(inner),
    reserveMany: inner.reserveMany!.bind(inner),
    releaseMany: inner.releaseMany!.bind(inner),
    async commitMany(id, captured, options) {
      if (captured === undefined && !id.startsWith('raise')) {
        signal();
        await resume;
      }
      return inner.commitMany!(id, captured, options);
    },
  };
  return { storage, inGap, go };
}

const storages: Array<[string, () => CTL.SpendStorage]> = [
  ['memory', () => CTL.createMemorySpendStorage()],
  ['flash ledger', () => createKvSpendStorage(createMemoryByteStorage())],
];

for (const [name, make] of storages) {
  test(`${name}: a capture never commits a payment that is not a hold at less than it was accepted for`, async () => {
    const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '4000', maxPayments: 100 } });
    const bundle = await fleet.bundle(1);
    const verify = CTL.verifyCtl;
    let n = 0;
    const sba = (amount: string) =>
      CTL.createSignedSessionBudgetAuthorization(
        {
          grant: fleet.grant,
          sessionId: 'sess_1',
          actorId: 'vehicle-42',
          maxAmountMinor: amount,
          budgetScope: 'TRIP',
          budgetId: `bud_r${++n}`,
          issuedAt: new Date(T0 - 1000).toISOString(),
          expiresAt: new Date(T0 + HOUR).toISOString(),
          rail: 'card',
        },
        { signingKey: fleet.wallet.privateKeyPem, now: () => T0 },
      );
    const gap = gapBeforeCommit(make());
    const o = {
      currency: 'EUR',
      offline: true,
      trustBundles: [bundle],
      rootPublicKeyPem: fleet.root.publicKeyPem,
      spendStorage: gap.storage,
      now: () => T0,
    };
    const first = verify(await sba('4000'), { ...o, amount: '4000' });
    await gap.inGap;
    // The id of a plain payment, built from what the SBA shows.
    const forged = await CTL.captureCtl(`grant:${fleet.grant.grantId}|bud_r1`, '0', {
      spendStorage: gap.storage,
      now: () => T0,
    });
    gap.go();
    const r = await first;
    assert.ok(r.valid, 'the payment is accepted');
    assert.is(forged.captured, false, 'a payment that is not a hold is not captured');
    assert.is(await gap.storage.total(`grant:${fleet.grant.grantId}`), 4000n, 'counted at what was accepted');
  });
}

test.run();
