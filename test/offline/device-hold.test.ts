// The device bridge captures a hold it verified (PROTOCOL.md §15): the offline allowance holds the
// maximum, then counts what was captured; above the hold, twice, after expiry are refused.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { handlePayload } from '../../firmware-bridge/protocol.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { makeFleet, T0, HOUR } from './fleet.js';

test('device: verify a hold at its maximum, capture below it over the protocol, once', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '4000', maxPayments: 10 } });
  const abi = createNodeAbi({ now: T0 });
  const device = createDevice(CTL, abi);
  device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  await device.installBundle({ bundle: await fleet.bundle(1) });
  const hold = (amount: string, budgetId: string) =>
    CTL.createSignedSessionBudgetAuthorization(
      {
        grant: fleet.grant,
        sessionId: 'sess_vehicle42',
        actorId: 'vehicle-42',
        maxAmountMinor: amount,
        budgetScope: 'TRIP',
        budgetId,
        issuedAt: new Date(T0 - 1000).toISOString(),
        expiresAt: new Date(T0 + HOUR).toISOString(),
        rail: 'card',
        hold: true,
      },
      { signingKey: fleet.wallet.privateKeyPem, keyId: 'vehicle-42-key', now: () => T0 },
    );
  const capture = async (args: Record<string, unknown>) =>
    cborDecode(await handlePayload(device, cborEncode({ id: 1, op: 'capture', args }))) as any;
  const h1 = await hold('3000', 'bud_hold_1');
  const v1 = await device.verify({ sba: h1, amount: '3000', currency: 'EUR' });
  assert.ok(v1.valid && v1.holdId === `grant:${fleet.grant.grantId}|bud_hold_1`, JSON.stringify(v1));
  const holdId = v1.valid ? v1.holdId! : '';
  const h2 = await hold('1001', 'bud_hold_2');
  const refused = await device.verify({ sba: h2, amount: '1001', currency: 'EUR' });
  assert.is(!refused.valid && refused.error.code, 'offline_limit_exceeded', 'the maximum is held');
  const above = await capture({ holdId, amount: '3001' });
  assert.is(above.result.error.code, 'capture_exceeds_hold', JSON.stringify(above));
  const ok = await capture({ holdId, amount: '1234' });
  assert.equal(ok.result, { captured: true, amountMinor: '1234' }, JSON.stringify(ok));
  const twice = await capture({ holdId, amount: '1234' });
  assert.is(twice.result.error.code, 'replay');
  assert.is((await device.verify({ sba: h2, amount: '1001', currency: 'EUR' })).valid, true, 'captured amount counts');
  abi.setNow(T0 + 2 * HOUR);
  const late = await device.capture({ sba: h2, amount: '1' });
  assert.is(!late.captured && late.error.code, 'hold_expired');
});

test('device terminal: a reboot between verify and capture changes nothing (the hold is in flash)', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '4000', maxPayments: 10 } });
  const abi = createNodeAbi({ now: T0 });
  const before = createDevice(CTL, abi);
  before.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  await before.installBundle({ bundle: await fleet.bundle(1) });
  const hold = await CTL.createSignedSessionBudgetAuthorization(
    {
      grant: fleet.grant,
      sessionId: 'sess_vehicle42',
      actorId: 'vehicle-42',
      maxAmountMinor: '3000',
      budgetScope: 'TRIP',
      budgetId: 'bud_reboot',
      issuedAt: new Date(T0 - 1000).toISOString(),
      expiresAt: new Date(T0 + HOUR).toISOString(),
      rail: 'card',
      hold: true,
    },
    { signingKey: fleet.wallet.privateKeyPem, now: () => T0 },
  );
  const v = await before.verify({ sba: hold, amount: '3000', currency: 'EUR' });
  assert.ok(v.valid && v.holdId, JSON.stringify(v));
  const after = createDevice(CTL, abi); // rebooted: new objects, the same flash
  const c = await after.capture({ holdId: v.valid ? v.holdId! : '', amount: '2800' });
  assert.equal(c, { captured: true, amountMinor: '2800' });
  const st = (await after.status({ grantId: fleet.grant.grantId }))['grant'] as Record<string, string>;
  assert.is(st['offlineAmountMinor'], '2800');
  const again = await createDevice(CTL, abi).capture({ sba: hold, amount: '1' });
  assert.is(!again.captured && again.error.code, 'replay', 'captured once, across reboots');
  abi.setNow(T0 + HOUR);
  const late = await createDevice(CTL, abi).capture({ holdId: v.valid ? v.holdId! : '', amount: '1' });
  assert.is(!late.captured && late.error.code, 'hold_expired', 'settled and forgotten once the SBA expired');
  const end = (await createDevice(CTL, abi).status({ grantId: fleet.grant.grantId }))['grant'] as Record<
    string,
    string
  >;
  assert.is(end['offlineAmountMinor'], '2800');
});

test('device wallet (the car): a reboot while charging, a capture of 2,800 learned: 200 more, not 3,000', async () => {
  const fleet = await makeFleet(CTL);
  const abi = createNodeAbi({ now: T0 });
  const boot = () => createDevice(CTL, abi);
  let car = boot();
  car.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  await car.installBundle({ bundle: await fleet.bundle(1) });
  const { publicJwk } = await car.provisionWallet({ actorId: 'car-7' });
  const grant = await CTL.createSignedPolicyGrant(
    { ...grantFieldsOf(fleet.grant), actorKey: publicJwk as never, maxAmountMinor: '3000' },
    {
      issuer: fleet.grant.issuer,
      keyId: fleet.grant.keyId,
      signingKey: fleet.authority.privateKeyPem,
      revocationBaseUrl: 'https://authority.fleet.example',
    },
  );
  car.installGrant({ grant });
  const pay = async (amount: string, hold = false) => {
    const r = cborDecode(
      await handlePayload(
        car,
        cborEncode({ id: 1, op: 'createSba', args: { amount, currency: 'EUR', rail: 'card', hold } }),
      ),
    ) as any;
    return r.ok ? r.result : r.error.code;
  };
  const hold = await pay('3000', true);
  assert.is(hold.authorization.capture, 'hold');
  car = boot(); // the car restarts while charging
  assert.is(await pay('1'), 'budget_exceeded');
  abi.setNow(Date.parse(hold.authorization.expiresAt) + 2 * HOUR);
  car = boot();
  assert.is(await pay('3000'), 'budget_exceeded', 'an outcome never learned stays counted');
  const settle = cborDecode(
    await handlePayload(
      car,
      cborEncode({ id: 2, op: 'settleHold', args: { budgetId: hold.authorization.budgetId, amount: '2800' } }),
    ),
  ) as any;
  assert.equal(settle.result, { settled: true, amountMinor: '2800' }, JSON.stringify(settle));
  assert.is(await pay('201'), 'budget_exceeded');
  assert.is((await pay('200')).authorization.maxAmountMinor, '200');
  const st = (await car.status())['grant'] as Record<string, string>;
  assert.is(st['walletSpentMinor'], '3000');
});

/** The members of a signed grant that `createSignedPolicyGrant` takes again. */
function grantFieldsOf(g: CTL.PolicyGrant) {
  const { signature: _s, keyId: _k, issuer: _i, version: _v, grantId: _g, revocationUrl: _r, ...fields } = g as any;
  return fields;
}

test.run();
