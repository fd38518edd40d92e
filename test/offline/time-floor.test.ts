/**
 * The persisted time floor (PROTOCOL.md §12): once a device has seen a bundle expire, setting its
 * clock back does not make the bundle acceptable again, nor an expired SBA, nor a reboot; the
 * clock below the floor shows in `status`, it is not an error. The SDK's offline verifier takes the
 * floor as an option (`timeFloor`), persisted by the host.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createMemoryByteStorage, type ByteStorage } from '../../firmware-bridge/abi.js';
import { createTimeFloorStore } from '../../firmware-bridge/time-floor-store.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { makeFleet, T0, HOUR } from './fleet.js';

const MIN = 60_000;

async function terminal(fleet: Awaited<ReturnType<typeof makeFleet>>, storage: ByteStorage, now: number) {
  const abi = createNodeAbi({ now, storage });
  const device = createDevice(CTL, abi);
  device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  return { abi, device };
}

test('device: a bundle seen expired stays expired when the clock is set back, across a reboot', async () => {
  // The bundle is valid from T0-1h to T0+1h.
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 100 }, bundleTtlMs: 2 * HOUR });
  const flash = createMemoryByteStorage();
  const { abi, device } = await terminal(fleet, flash, T0);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  const ok = await device.verify({ sba: await fleet.sba('100', T0), amount: '100', currency: 'EUR' });
  assert.ok(ok.valid, JSON.stringify(ok));

  abi.setNow(T0 + 2 * HOUR);
  const late = await device.verify({ sba: await fleet.sba('100', T0 + 2 * HOUR), amount: '100', currency: 'EUR' });
  assert.is(!late.valid && late.error.code, 'trust_bundle_expired');

  abi.setNow(T0 + 10 * MIN); // the clock set back to when the bundle was fine
  const back = await device.verify({ sba: await fleet.sba('100', T0 + 10 * MIN), amount: '100', currency: 'EUR' });
  assert.is(!back.valid && back.error.code, 'trust_bundle_expired', 'the floor, not the clock, decides');
  const s = await device.status();
  assert.equal((s['bundles'] as Array<{ expired: boolean }>)[0]!.expired, true);
  const time = s['time'] as { clock: number; floor: number; clockBehindFloorMs: number };
  assert.is(time.clock, T0 + 10 * MIN);
  assert.ok(time.floor >= T0 + 2 * HOUR);
  assert.is(time.clockBehindFloorMs, time.floor - time.clock, 'reported in status, not an error');

  const { device: rebooted } = await terminal(fleet, flash, T0 + 10 * MIN);
  const afterReboot = await rebooted.verify({
    sba: await fleet.sba('100', T0 + 10 * MIN),
    amount: '100',
    currency: 'EUR',
  });
  assert.is(!afterReboot.valid && afterReboot.error.code, 'trust_bundle_expired', 'the floor is in flash');
  // Re-installing the same bundle under the rolled-back clock is refused the same way.
  try {
    await rebooted.installBundle({ bundle: await fleet.bundle(2) });
    assert.unreachable('an expired bundle was installed');
  } catch (e) {
    assert.is((e as { code?: string }).code, 'trust_bundle_expired');
  }
});

test('device: an SBA its ledger has forgotten is not revived by setting the clock back', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 100 }, bundleTtlMs: 48 * HOUR });
  const { abi, device } = await terminal(fleet, createMemoryByteStorage(), T0);
  await device.installBundle({ bundle: await fleet.bundle(1) });
  const s1 = await fleet.sba('100', T0); // valid until T0+1h
  assert.ok((await device.verify({ sba: s1, amount: '100', currency: 'EUR' })).valid);
  abi.setNow(T0 + 3 * HOUR); // s1 has expired: the next payment lets the ledgers forget it
  assert.ok(
    (await device.verify({ sba: await fleet.sba('100', T0 + 3 * HOUR), amount: '100', currency: 'EUR' })).valid,
  );
  abi.setNow(T0 + 30 * MIN);
  const replay = await device.verify({ sba: s1, amount: '100', currency: 'EUR' });
  assert.is(!replay.valid && replay.error.code, 'sba_expired', 'expired by the floor, never accepted twice');
});

test('device: the stored floor only rises', () => {
  let writes = 0;
  const inner = createMemoryByteStorage();
  const storage: ByteStorage = {
    get: (k) => inner.get(k),
    put: (k, v) => {
      writes++;
      inner.put(k, v);
    },
    compareAndSet: (k, e, v) => {
      const ok = inner.compareAndSet(k, e, v);
      if (ok) writes++;
      return ok;
    },
  };
  const floor = createTimeFloorStore(storage);
  floor.raise(T0);
  floor.raise(T0 - HOUR);
  assert.is(floor.get(), T0);
  assert.is(writes, 1, 'lowering writes nothing');
});

test(
  'SDK: verifyCtl with a timeFloor refuses an SBA seen expired after the clock is set ' + 'back; without one it cannot',
  async () => {
    const fleet = await makeFleet(CTL, { bundleTtlMs: 48 * HOUR });
    const bundle = await fleet.bundle(1);
    const sba = await fleet.sba('100', T0); // expires T0+1h
    let clock = T0 + 2 * HOUR;
    const floor = CTL.createMemoryTimeFloor();
    const options = (timeFloor?: CTL.TimeFloor) => ({
      amount: '100',
      currency: 'EUR',
      offline: true,
      trustBundles: [bundle],
      rootPublicKeyPem: fleet.root.publicKeyPem,
      now: () => clock,
      ...(timeFloor ? { timeFloor } : {}),
    });
    const expired = await CTL.verifyCtl(sba, options(floor));
    assert.is(!expired.valid && expired.error.code, 'sba_expired');
    assert.ok((await floor.get()) >= T0 + 2 * HOUR, 'the reading that saw it expire is kept');
    clock = T0 + 10 * MIN;
    const back = await CTL.verifyCtl(sba, options(floor));
    assert.is(!back.valid && back.error.code, 'sba_expired');
    const noFloor = await CTL.verifyCtl(sba, options());
    assert.ok(noFloor.valid, 'without a floor the clock alone decides (what the option is for)');
  },
);

test('SDK without a timeFloor: a clock stepped forward then back does not let an SBA through twice', async () => {
  const fleet = await makeFleet(CTL, { bundleTtlMs: 48 * HOUR });
  const bundle = await fleet.bundle(1);
  const spendStorage = CTL.createMemorySpendStorage();
  let clock = T0;
  const verify = (sba: unknown) =>
    CTL.verifyCtl(sba, {
      amount: '100',
      currency: 'EUR',
      offline: true,
      trackSpend: true,
      spendStorage,
      trustBundles: [bundle],
      rootPublicKeyPem: fleet.root.publicKeyPem,
      now: () => clock,
    });
  const s1 = await fleet.sba('100', T0); // expires T0+1h
  assert.ok((await verify(s1)).valid);
  clock = T0 + 3 * HOUR; // e.g. a bad time sync; a payment then may let ledgers forget
  assert.ok((await verify(await fleet.sba('100', clock))).valid);
  clock = T0 + 30 * MIN;
  const again = await verify(s1);
  // The ledger has counted at T0+3h (PROTOCOL.md §12, §13): an SBA expired by then stays expired.
  assert.is(!again.valid && again.error.code, 'sba_expired', 'the ledger remembers the latest time it counted');
  clock = T0 + 30 * HOUR; // past the day its id is kept: the ledger forgets it
  assert.ok((await verify(await fleet.sba('100', clock))).valid);
  clock = T0 + 30 * MIN;
  const later = await verify(s1);
  assert.is(!later.valid && later.error.code, 'sba_expired', 'a forgotten id is still no second payment');
  assert.is(await spendStorage.total(`grant:${fleet.grant.grantId}`), 300n, 'three payments, each once');
});

test(
  'SDK: an accepted payment records the clock; other readings at most once a minute; ' +
    'an unreadable floor fails closed',
  async () => {
    const fleet = await makeFleet(CTL, { bundleTtlMs: 48 * HOUR });
    const bundle = await fleet.bundle(1);
    const raises: number[] = [];
    let value = 0;
    const floor: CTL.TimeFloor = {
      get: () => value,
      raise: (ms) => {
        raises.push(ms);
        value = Math.max(value, ms);
      },
    };
    let clock = T0;
    const verify = async (at: number) =>
      CTL.verifyCtl(await fleet.sba('100', at), {
        amount: '100',
        currency: 'EUR',
        offline: true,
        trustBundles: [bundle],
        rootPublicKeyPem: fleet.root.publicKeyPem,
        now: () => clock,
        timeFloor: floor,
      });
    assert.ok((await verify(T0)).valid);
    assert.is(value, T0, 'an accepted payment records the clock');
    clock = T0 + 30_000;
    const refused = await CTL.verifyCtl('{}', {
      amount: '100',
      currency: 'EUR',
      offline: true,
      now: () => clock,
      timeFloor: floor,
    });
    assert.not.ok(refused.valid);
    assert.is(value, T0, 'a reading within the minute of the floor is not written');
    clock = T0 + 2 * MIN;
    await CTL.verifyCtl('{}', { amount: '100', currency: 'EUR', offline: true, now: () => clock, timeFloor: floor });
    assert.is(value, T0 + 2 * MIN, 'a reading a minute past the floor is');
    const broken: CTL.TimeFloor = { get: () => Number.NaN, raise: () => undefined };
    const r = await CTL.verifyCtl(await fleet.sba('100', clock), {
      amount: '100',
      currency: 'EUR',
      offline: true,
      trustBundles: [bundle],
      rootPublicKeyPem: fleet.root.publicKeyPem,
      now: () => clock,
      timeFloor: broken,
    });
    assert.not.ok(r.valid, 'an unreadable floor fails closed');
  },
);

test.run();
