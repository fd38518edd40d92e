/**
 * On the device (QuickJS, the verifier bundle, the flash ledger): an SBA under a link with an
 * hourly window is accepted once, not once per window (PROTOCOL.md §7, §13, §14), also after a
 * reboot over the same flash.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { windowedChain, T0, MINUTE, HOUR } from '../helpers/windowed-chain.js';

test('QuickJS terminal: an SBA under an hourly-window link, at 10:58, 11:00, after a reboot, pays once', async () => {
  const fx = await windowedChain(CTL);
  const flash = createMemoryByteStorage();
  const abi = createNodeAbi({ now: T0 + 58 * MINUTE, storage: flash });
  let dev = await createQuickJsDevice(abi, { bundle: 'verify' });
  const call = (op: string, args: Record<string, unknown>) =>
    cborDecode(dev.request(cborEncode({ id: 1, op, args }))) as { ok: boolean; result?: any; error?: any };
  try {
    assert.ok(call('provisionRoot', { rootPublicKeyPem: fx.root.publicKeyPem }).ok);
    assert.ok(call('installBundle', { bundle: fx.bundle }).ok);
    const sba = await fx.sba('500', T0 + 58 * MINUTE, 20 * HOUR);
    const verify = () => call('verify', { sba, amount: '500', currency: 'EUR' }).result;
    assert.is(verify().valid, true, 'first at 10:58');
    abi.setNow(T0 + HOUR);
    assert.is(verify().error?.code, 'replay', 'again at 11:00');
    abi.setNow(T0 + 3 * HOUR);
    assert.is(verify().error?.code, 'replay', 'again at 13:00');
    dev.dispose();
    dev = await createQuickJsDevice(abi, { bundle: 'verify' });
    abi.setNow(T0 + 5 * HOUR);
    assert.is(verify().error?.code, 'replay', 'after a reboot, at 15:00');
    const st = call('status', { grantId: fx.grant.grantId }).result;
    assert.is(st.grant.acceptedMinor, '500', 'charged once');
  } finally {
    dev.dispose();
  }
});

test.run();
