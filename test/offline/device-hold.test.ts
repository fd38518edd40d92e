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
  assert.is((await device.verify({ sba: h1, amount: '3000', currency: 'EUR' })).valid, true);
  const h2 = await hold('1001', 'bud_hold_2');
  const refused = await device.verify({ sba: h2, amount: '1001', currency: 'EUR' });
  assert.is(!refused.valid && refused.error.code, 'offline_limit_exceeded', 'the maximum is held');
  const above = await capture({ budgetId: 'bud_hold_1', amount: '3001' });
  assert.is(above.result.error.code, 'capture_exceeds_hold', JSON.stringify(above));
  const ok = await capture({ budgetId: 'bud_hold_1', amount: '1234' });
  assert.equal(ok.result, { captured: true, amountMinor: '1234' }, JSON.stringify(ok));
  const twice = await capture({ budgetId: 'bud_hold_1', amount: '1234' });
  assert.is(twice.result.error.code, 'replay');
  assert.is((await device.verify({ sba: h2, amount: '1001', currency: 'EUR' })).valid, true, 'captured amount counts');
  abi.setNow(T0 + 2 * HOUR);
  const late = await device.capture({ budgetId: 'bud_hold_2', amount: '1' });
  assert.is(!late.captured && late.error.code, 'hold_expired');
});

test.run();
