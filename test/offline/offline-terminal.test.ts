/**
 * The offline exposure bound (PROTOCOL.md §8 `offline`): an offline terminal
 * accepts a grant only within its allowance, counted in storage that survives a restart, so a
 * lost or revoked grant costs at most min(maxAmountMinor, maxPayments × per-payment maximum).
 * "Restart" = a new device object over the same storage (what a reboot keeps is the flash).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import * as CTL from '../../src/index.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createMemoryByteStorage, type ByteStorage } from '../../firmware-bridge/abi.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { makeFleet, T0, HOUR } from './fleet.js';

async function terminal(
  fleet: Awaited<ReturnType<typeof makeFleet>>,
  storage: ByteStorage = createMemoryByteStorage(),
  now = T0,
) {
  const abi = createNodeAbi({ now, storage });
  const device = createDevice(CTL, abi);
  device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  return { abi, device, storage };
}

const pay = (device: ReturnType<typeof createDevice>, sba: unknown, amount: string) =>
  device.verify({ sba, amount, currency: 'EUR' });

test('the (n+1)-th offline payment is refused, and stays refused after a restart', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 3 } });
  const { device, storage } = await terminal(fleet);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  for (let i = 0; i < 3; i++) {
    const r = await pay(device, await fleet.sba('100'), '100');
    assert.ok(r.valid, `payment ${i + 1}: ${JSON.stringify(r)}`);
  }
  const fourth = await pay(device, await fleet.sba('100'), '100');
  assert.is(fourth.valid, false);
  assert.is(!fourth.valid && fourth.error.code, 'offline_limit_exceeded');
  const { device: rebooted } = await terminal(fleet, storage);
  const fifth = await pay(rebooted, await fleet.sba('100'), '100');
  assert.is(!fifth.valid && fifth.error.code, 'offline_limit_exceeded', 'the count survived the reboot');
  const s = await rebooted.status({ grantId: fleet.grant.grantId });
  assert.is((s['grant'] as any).offlinePayments, '3');
  assert.is((s['grant'] as any).acceptedMinor, '300');
});

test('the payment over the offline total is refused; one that fits exactly is accepted', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '5000' } });
  const { device } = await terminal(fleet);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  const outcomes: string[] = [];
  for (const amount of ['2000', '2500', '1000', '500', '1']) {
    const r = await pay(device, await fleet.sba(amount), amount);
    outcomes.push(r.valid ? 'ok' : r.error.code);
  }
  assert.equal(outcomes, ['ok', 'ok', 'offline_limit_exceeded', 'ok', 'offline_limit_exceeded']);
  const s = await device.status({ grantId: fleet.grant.grantId });
  assert.is((s['grant'] as any).offlineAmountMinor, '5000');
});

test('a refused payment consumes nothing, and a replayed SBA is refused without counting twice', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 2, maxAmountMinor: '1000' } });
  const { device } = await terminal(fleet);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  const big = await pay(device, await fleet.sba('1500'), '1500');
  assert.is(!big.valid && big.error.code, 'offline_limit_exceeded');
  const sba = await fleet.sba('400');
  assert.ok((await pay(device, sba, '400')).valid);
  const again = await pay(device, sba, '400');
  assert.is(!again.valid && again.error.code, 'replay');
  const s = (await device.status({ grantId: fleet.grant.grantId }))['grant'] as any;
  assert.equal(
    [s.offlinePayments, s.offlineAmountMinor],
    ['1', '400'],
    'the refused and the replayed payment left no trace',
  );
  assert.ok((await pay(device, await fleet.sba('600'), '600')).valid, 'the second allowed payment still fits');
});

test('an expired bundle refuses everything, installed or presented', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 10 } });
  const { device, abi } = await terminal(fleet);
  await device.installBundle({ bundle: await fleet.bundle(1, { ttlMs: 2 * HOUR }) }); // expires at T0 + 1h
  assert.ok((await pay(device, await fleet.sba('100'), '100')).valid);
  abi.setNow(T0 + HOUR);
  const r = await pay(device, await fleet.sba('100', T0 + HOUR), '100');
  assert.is(!r.valid && r.error.code, 'trust_bundle_expired');
  try {
    await device.installBundle({ bundle: await fleet.bundle(2, { issuedAt: T0 - 3 * HOUR, ttlMs: HOUR }) });
    assert.unreachable('an expired bundle was installed');
  } catch (e: any) {
    assert.is(e.code, 'trust_bundle_expired');
  }
  await device.installBundle({ bundle: await fleet.bundle(3, { issuedAt: T0 + HOUR - 60_000 }) });
  assert.ok((await pay(device, await fleet.sba('100', T0 + HOUR), '100')).valid, 'a fresh bundle restores service');
});

test('a rolled-back bundle is refused, after a restart too (the floor is persisted)', async () => {
  const fleet = await makeFleet(CTL);
  const { device, storage } = await terminal(fleet);
  const old = await fleet.bundle(4);
  await device.installBundle({ bundle: await fleet.bundle(5) });
  const { device: rebooted } = await terminal(fleet, storage);
  try {
    await rebooted.installBundle({ bundle: old });
    assert.unreachable('rollback accepted after reboot');
  } catch (e: any) {
    assert.is(e.code, 'trust_bundle_rollback');
  }
  const same = await rebooted.installBundle({ bundle: await fleet.bundle(5) });
  assert.is(same.sequence, 5, 'the same sequence again is accepted');
  assert.is((await rebooted.installBundle({ bundle: await fleet.bundle(6) })).sequence, 6);
  // Another scope has its own floor.
  assert.is((await rebooted.installBundle({ bundle: await fleet.bundle(1, { scope: { region: 'us' } }) })).sequence, 1);
  const bundles = (await rebooted.status())['bundles'] as Array<{ sequence: number; minSequence: number }>;
  assert.equal(bundles.map((b) => [b.sequence, b.minSequence]).sort(), [
    [1, 1],
    [6, 6],
  ]);
});

test(
  'a grant revoked in a newer bundle is refused offline; the old bundle is kept until ' + 'a new one verifies',
  async () => {
    const fleet = await makeFleet(CTL);
    const { device } = await terminal(fleet);
    await device.installBundle({ bundle: await fleet.bundle(1) });
    const forged = { ...(await fleet.bundle(2, { revokedGrants: [] })), sequence: 3 };
    await device.installBundle({ bundle: forged }).then(
      () => assert.unreachable('forged bundle'),
      (e) => assert.is(e.code, 'trust_bundle_invalid'),
    );
    assert.ok((await pay(device, await fleet.sba('100'), '100')).valid, 'the failed install left bundle 1 in place');
    await device.installBundle({ bundle: await fleet.bundle(2, { revokedGrants: [fleet.grant.grantId] }) });
    const r = await pay(device, await fleet.sba('100'), '100');
    assert.is(!r.valid && r.error.code, 'grant_revoked');
  },
);

test('maxBundleAgeMs: a bundle older than the grant allows offline refuses the grant', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxBundleAgeMs: 2 * HOUR } });
  const { device, abi } = await terminal(fleet);
  await device.installBundle({ bundle: await fleet.bundle(1) }); // issued T0 - 1h
  assert.ok((await pay(device, await fleet.sba('100'), '100')).valid);
  abi.setNow(T0 + 2 * HOUR);
  const r = await pay(device, await fleet.sba('100', T0 + 2 * HOUR), '100');
  assert.is(!r.valid && r.error.code, 'offline_limit_exceeded');
});

test('two terminals on one storage (contending CAS) never exceed the allowance together', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 5, maxAmountMinor: '100000' } });
  const storage = createMemoryByteStorage();
  const a = await terminal(fleet, storage);
  const b = await terminal(fleet, storage);
  await a.device.installBundle({ bundle: await fleet.bundle(1) });
  const sbas = await Promise.all(Array.from({ length: 12 }, () => fleet.sba('10')));
  const results = await Promise.all(sbas.map((s, i) => pay(i % 2 ? a.device : b.device, s, '10')));
  assert.is(results.filter((r) => r.valid).length, 5);
  assert.ok(results.every((r) => r.valid || r.error.code === 'offline_limit_exceeded'));
});

test('property: over any sequence of payments and reboots, exactly the greedy model is accepted', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 4, maxAmountMinor: '1000' } });
  const pool = await Promise.all(
    [50, 120, 300, 450, 700, 999].map(async (n) => [String(n), fleet.sba(String(n))] as const),
  );
  let seed = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.boolean()), { minLength: 1, maxLength: 9 }),
      async (steps) => {
        // Fresh SBAs per run (budgetIds are single-use), re-signed from the pool's amounts.
        const storage = createMemoryByteStorage();
        let t = await terminal(fleet, storage);
        await t.device.installBundle({ bundle: await fleet.bundle(1) });
        let count = 0;
        let sum = 0;
        for (const [i, reboot] of steps) {
          if (reboot) t = await terminal(fleet, storage);
          const amount = pool[i]![0];
          const r = await pay(t.device, await fleet.sba(amount), amount);
          const fits = count < 4 && sum + Number(amount) <= 1000;
          if (r.valid !== fits) return false;
          if (fits) {
            count++;
            sum += Number(amount);
          }
          if (!r.valid && r.error.code !== 'offline_limit_exceeded') return false;
        }
        return count <= 4 && sum <= 1000;
      },
    ),
    {
      numRuns: 25,
      seed: (seed = Number(process.env.CTL_SEED ?? Date.now() % 2 ** 31)),
      reporter: (out) => {
        if (out.failed) throw new Error(`seed ${seed}: ${out.counterexample}`);
      },
    },
  );
});

test('a flash failure mid-verification refuses the payment as host_failure and counts nothing', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 3 } });
  const flash = createMemoryByteStorage();
  let broken = false;
  const flaky: ByteStorage = {
    get: (k) => flash.get(k),
    put: (k, v) => flash.put(k, v),
    compareAndSet: (k, e, v) => {
      if (broken) throw new Error('flash write failed');
      return flash.compareAndSet(k, e, v);
    },
  };
  const { device } = await terminal(fleet, flaky);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  broken = true;
  const r = await pay(device, await fleet.sba('100'), '100');
  assert.is(!r.valid && r.error.code, 'host_failure');
  broken = false;
  const s = (await device.status({ grantId: fleet.grant.grantId }))['grant'] as any;
  assert.is(s.offlinePayments, '0');
  assert.ok((await pay(device, await fleet.sba('100'), '100')).valid);
});

test.run();
