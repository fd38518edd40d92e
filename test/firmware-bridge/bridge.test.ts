/**
 * The reference host and the framed protocol: the bridge as a child process (QuickJS engine,
 * flash in a file) keeps its floor and counters across a restart; the QuickJS device answers
 * byte-identically to the same device code on Node; frames split anywhere still parse; and no
 * payload, however hostile, makes `handlePayload` throw or answer anything but an error.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { spawnBridge } from '../../firmware-bridge/node/client.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createFrameReader, frame, handlePayload } from '../../firmware-bridge/protocol.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';
import { root } from '../../firmware-bridge/node/device-script.js';
import { makeFleet, iso, T0 } from '../offline/fleet.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-bridge-'));

test.before(() => {
  if (!existsSync(join(root, 'dist', 'ctl.iife.js')))
    throw new Error('dist/ctl.iife.js is missing: run `npm run build` before these tests');
});

test('bridge child process: counters and the bundle floor survive a restart', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 2 } });
  const flash = join(dir, 'flash.json');
  let bridge = spawnBridge({ flash, now: iso(T0) });
  try {
    assert.is((await bridge.request('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem })).ok, true);
    const inst = await bridge.request('installBundle', { bundle: await fleet.bundle(7) });
    assert.is(inst.ok, true, JSON.stringify(inst));
    const v = await bridge.request('verify', { sba: await fleet.sba('300'), amount: '300', currency: 'EUR' });
    assert.equal((v.result as any).valid, true, JSON.stringify(v));
  } finally {
    assert.is(await bridge.close(), 0);
  }
  bridge = spawnBridge({ flash, now: iso(T0) });
  try {
    const old = await bridge.request('installBundle', { bundle: await fleet.bundle(6) });
    assert.is(old.ok, false);
    assert.is(old.error?.code, 'trust_bundle_rollback');
    assert.is(
      ((await bridge.request('verify', { sba: await fleet.sba('300'), amount: '300', currency: 'EUR' })).result as any)
        .valid,
      true,
    );
    const third = await bridge.request('verify', { sba: await fleet.sba('300'), amount: '300', currency: 'EUR' });
    assert.is((third.result as any).error.code, 'offline_limit_exceeded');
    const s = await bridge.request('status', { grantId: fleet.grant.grantId });
    assert.equal((s.result as any).grant.offlinePayments, '2');
    assert.equal((s.result as any).bundles[0].minSequence, 7);
  } finally {
    assert.is(await bridge.close(), 0);
  }
});

test('QuickJS device and Node device give the same bytes for the same requests', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxAmountMinor: '1000' } });
  const qjs = await createQuickJsDevice(createNodeAbi({ now: T0 }));
  const node = createDevice(CTL, createNodeAbi({ now: T0 }));
  try {
    const sbas = [await fleet.sba('600'), await fleet.sba('600'), await fleet.sba('400')];
    const requests: Array<[string, Record<string, unknown>]> = [
      ['verify', { sba: sbas[0], amount: '600', currency: 'EUR' }], // not provisioned yet
      ['provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem }],
      ['installBundle', { bundle: await fleet.bundle(1) }],
      ['verify', { sba: sbas[0], amount: '600', currency: 'EUR' }],
      ['verify', { sba: sbas[0], amount: '600', currency: 'EUR' }],
      ['verify', { sba: sbas[1], amount: '600', currency: 'EUR' }],
      ['verify', { sba: sbas[2], amount: '400', currency: 'EUR' }],
      [
        'verify',
        {
          sba: { ...sbas[2], authorization: { ...sbas[2]!.authorization, maxAmountMinor: '401' } },
          amount: '400',
          currency: 'EUR',
        },
      ],
      ['status', { grantId: fleet.grant.grantId }],
    ];
    const codes: string[] = [];
    for (const [i, [op, args]] of requests.entries()) {
      const payload = cborEncode({ id: i, op, args });
      const a = qjs.request(payload);
      const b = await handlePayload(node, payload);
      assert.equal(cborDecode(a), cborDecode(b), `${op} #${i}`);
      assert.ok(a.length === b.length && a.every((x, j) => x === b[j]), `${op} #${i}: bytes differ`);
      const r = cborDecode(a) as any;
      codes.push(r.ok ? (r.result.valid === false ? r.result.error.code : 'ok') : r.error.code);
    }
    assert.equal(
      codes,
      ['ok', 'ok', 'ok', 'ok', 'replay', 'offline_limit_exceeded', 'ok', 'sba_signature_invalid', 'ok'].map((c, i) =>
        i === 0 ? 'not_provisioned' : c,
      ),
    );
  } finally {
    qjs.dispose();
  }
});

test(
  'QuickJS device with a hardware monotonic counter (ctlHost.counterRead/counterIncrement): ' +
    'a restored flash is refused',
  async () => {
    const fleet = await makeFleet(CTL, { offline: { maxPayments: 5 } });
    const counter = { value: 100, read: () => counter.value, increment: () => ++counter.value };
    const flash = createMemoryByteStorage();
    const call = (dev: Awaited<ReturnType<typeof createQuickJsDevice>>, op: string, args: Record<string, unknown>) =>
      cborDecode(dev.request(cborEncode({ id: 1, op, args }))) as any;
    const qjs = await createQuickJsDevice({ ...createNodeAbi({ now: T0, storage: flash }), monotonicCounter: counter });
    let snapshot: ReturnType<typeof createMemoryByteStorage>;
    try {
      assert.ok(call(qjs, 'provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem }).ok);
      assert.ok(call(qjs, 'installBundle', { bundle: await fleet.bundle(1) }).ok);
      snapshot = createMemoryByteStorage();
      for (const [k, v] of flash.entries()) snapshot.put(k, v);
      const paid = call(qjs, 'verify', { sba: await fleet.sba('100'), amount: '100', currency: 'EUR' });
      assert.is(paid.result.valid, true, JSON.stringify(paid));
      assert.ok(counter.value > 100, 'the ledger writes advanced the hardware counter');
    } finally {
      qjs.dispose();
    }
    const restored = await createQuickJsDevice({
      ...createNodeAbi({ now: T0, storage: snapshot }),
      monotonicCounter: counter,
    });
    try {
      const again = call(restored, 'verify', { sba: await fleet.sba('100'), amount: '100', currency: 'EUR' });
      assert.is(again.result.valid, false);
      assert.is(again.result.error.code, 'host_failure', JSON.stringify(again.result));
      assert.match(again.result.error.message, /restored or altered flash/);
    } finally {
      restored.dispose();
    }
  },
);

test('frames split at every byte boundary reassemble; an oversized frame is skipped by length', () => {
  const payloads = [cborEncode({ id: 1, op: 'ping' }), cborEncode({ id: 2, op: 'status', args: { grantId: 'g' } })];
  const stream = new Uint8Array([...frame(payloads[0]!), ...frame(payloads[1]!)]);
  for (let cut = 0; cut <= stream.length; cut++) {
    const r = createFrameReader();
    const got = [...r.push(stream.slice(0, cut)), ...r.push(stream.slice(cut))];
    assert.equal(got, payloads, `cut at ${cut}`);
  }
  const r = createFrameReader(8);
  const big = frame(new Uint8Array(20));
  const got = [...r.push(big.slice(0, 10)), ...r.push(big.slice(10)), ...r.push(frame(payloads[0]!.slice(0, 8)))];
  assert.equal(got[0], { oversized: 20 });
  assert.is(got.length, 2);
});

test('property: any payload gets exactly one well-formed response and never a throw', async () => {
  const device = createDevice(CTL, createNodeAbi({ now: T0, storage: createMemoryByteStorage() }));
  const ops = [
    'verify',
    'installBundle',
    'provisionRoot',
    'status',
    'createSba',
    'installGrant',
    'provisionWallet',
    'ping',
    'nope',
  ];
  const anyValue = fc.letrec((tie) => ({
    v: fc.oneof(
      { depthSize: 'small' },
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.uint8Array({ maxLength: 16 }),
      fc.array(tie('v'), { maxLength: 3 }),
      fc.dictionary(fc.string({ maxLength: 6 }), tie('v'), { maxKeys: 3 }),
    ),
  })).v;
  const payload = fc.oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc
      .record({
        id: fc.nat(),
        op: fc.constantFrom(...ops),
        args: fc.dictionary(
          fc.constantFrom('sba', 'bundle', 'amount', 'currency', 'rootPublicKeyPem', 'grant'),
          anyValue,
        ),
      })
      .map((r) => cborEncode(r)),
  );
  await fc.assert(
    fc.asyncProperty(payload, async (p) => {
      const out = cborDecode(await handlePayload(device, p)) as any;
      if (typeof out.ok !== 'boolean') return false;
      if (!out.ok) return typeof out.error?.code === 'string' && typeof out.error?.message === 'string';
      return true;
    }),
    { numRuns: 300 },
  );
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
