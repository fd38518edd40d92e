/**
 * A terminal at the edges of PROTOCOL.md §12, in QuickJS on the verifier bundle and on Node over
 * the source, byte for byte: a host clock that fails is a host failure (nothing accepted, status
 * still answers), a clock set back revives nothing, a revocation outlives the bundle that carried
 * it (persisted, across a restart), and a fresh bundle restores the offline allowance.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as Verify from '../../src/entries/verify.js';
import * as CTL from '../../src/index.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { handlePayload } from '../../firmware-bridge/protocol.js';
import { createNodeAbi, type NodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';
import { makeFleet, T0, HOUR } from '../offline/fleet.js';

/** One terminal twice over (QuickJS and Node), each on its own flash, both asked the same. */
async function terminals() {
  const flash = { qjs: createMemoryByteStorage(), node: createMemoryByteStorage() };
  const abi = {
    qjs: createNodeAbi({ now: T0, storage: flash.qjs }),
    node: createNodeAbi({ now: T0, storage: flash.node }),
  };
  let qjs = await createQuickJsDevice(abi.qjs, { bundle: 'verify' });
  let node = createDevice(Verify, abi.node);
  let id = 0;
  const t = {
    /** Sends one request to both; the answers must be the same bytes. */
    async call(op: string, args: Record<string, unknown> = {}): Promise<any> {
      const payload = cborEncode({ id: ++id, op, args });
      const a = qjs.request(payload);
      const b = await handlePayload(node, payload);
      assert.ok(
        a.length === b.length && a.every((x, j) => x === b[j]),
        `${op}: QuickJS and Node answer differently:\n` +
          `${JSON.stringify(cborDecode(a))}\n${JSON.stringify(cborDecode(b))}`,
      );
      return cborDecode(a);
    },
    async outcome(op: string, args: Record<string, unknown> = {}): Promise<string> {
      const r = await t.call(op, args);
      return r.ok ? (r.result?.valid === false ? r.result.error.code : 'ok') : r.error.code;
    },
    setNow(v: unknown) {
      for (const x of [abi.qjs, abi.node]) (x as NodeAbi).setNow(v as number);
    },
    /** A reboot: the same flash, a fresh engine and device. */
    async restart() {
      qjs.dispose();
      qjs = await createQuickJsDevice(abi.qjs, { bundle: 'verify' });
      node = createDevice(Verify, abi.node);
    },
    dispose: () => qjs.dispose(),
  };
  return t;
}

test('a host clock that fails is a host failure: nothing accepted, status answers, the floor holds', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 10 } });
  const t = await terminals();
  try {
    await t.call('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem });
    const pay = async (at: number) =>
      t.outcome('verify', { sba: await fleet.sba('100', at), amount: '100', currency: 'EUR' });
    const codes = [await t.outcome('installBundle', { bundle: await fleet.bundle(1) }), await pay(T0)];
    t.setNow(T0 + 30 * HOUR); // the bundle (a day from T0 − 1 h) has expired
    codes.push(await pay(T0 + 30 * HOUR));
    // (A string is coerced to a number by the QuickJS binding itself; the SDK's own tests refuse one.)
    for (const broken of [NaN, undefined, Infinity]) {
      t.setNow(broken);
      codes.push(await pay(T0));
      const status = await t.call('status', { grantId: fleet.grant.grantId });
      assert.ok(status.ok, `status with a clock of ${String(broken)}: ${JSON.stringify(status)}`);
      assert.is(status.result.time.clock, null);
      assert.match(status.result.time.clockError, /clock/);
      codes.push(await t.outcome('installBundle', { bundle: await fleet.bundle(2) }));
    }
    t.setNow(T0); // set back: the expired bundle stays expired
    codes.push(await pay(T0));
    assert.equal(codes, [
      'ok',
      'ok',
      'trust_bundle_expired',
      'host_failure',
      'host_failure',
      'host_failure',
      'host_failure',
      'host_failure',
      'host_failure',
      'trust_bundle_expired',
    ]);
    const status = await t.call('status', { grantId: fleet.grant.grantId });
    assert.is(status.result.grant.acceptedMinor, '100', 'one payment, before the clock failed');
  } finally {
    t.dispose();
  }
});

test('a revocation outlives its bundle: expired, superseded, across a restart', async () => {
  const fleet = await makeFleet(CTL);
  const t = await terminals();
  try {
    await t.call('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem });
    const pay = async (at: number) =>
      t.outcome('verify', { sba: await fleet.sba('100', at), amount: '100', currency: 'EUR' });
    const codes = [
      // Another scope, issued earlier, vouching for two days.
      await t.outcome('installBundle', {
        bundle: await fleet.bundle(1, { scope: { region: 'us' }, ttlMs: 48 * HOUR }),
      }),
      await pay(T0),
      // The fleet's own scope revokes the grant, for two hours.
      await t.outcome('installBundle', {
        bundle: await fleet.bundle(1, { revokedGrants: [fleet.grant.grantId], issuedAt: T0, ttlMs: 2 * HOUR }),
      }),
      await pay(T0),
    ];
    t.setNow(T0 + 3 * HOUR);
    codes.push(await pay(T0 + 3 * HOUR)); // the revoking bundle has expired
    // Superseded by a newer bundle of its scope that no longer lists the grant.
    codes.push(await t.outcome('installBundle', { bundle: await fleet.bundle(2, { issuedAt: T0 + 2.5 * HOUR }) }));
    codes.push(await pay(T0 + 3 * HOUR));
    await t.restart();
    codes.push(await pay(T0 + 3 * HOUR));
    assert.equal(codes, ['ok', 'ok', 'ok', 'grant_revoked', 'grant_revoked', 'ok', 'grant_revoked', 'grant_revoked']);
  } finally {
    t.dispose();
  }
});

test('a root-signed bundle too late or too old to install still revokes', async () => {
  const fleet = await makeFleet(CTL);
  const t = await terminals();
  try {
    await t.call('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem });
    const pay = async () => t.outcome('verify', { sba: await fleet.sba('100', T0), amount: '100', currency: 'EUR' });
    const codes = [await t.outcome('installBundle', { bundle: await fleet.bundle(3) }), await pay()];
    // A backlog arrives late: sequence 2 (below the floor of 3) and an expired sequence 4, each revoking.
    codes.push(
      await t.outcome('installBundle', { bundle: await fleet.bundle(2, { revokedGrants: [fleet.grant.grantId] }) }),
    );
    codes.push(await pay());
    const forged = { ...(await fleet.bundle(5, { revokedGrants: ['grant_someone_else'] })), sequence: 6 };
    codes.push(
      await t.outcome('installBundle', { bundle: forged }),
      await t.outcome('installBundle', {
        bundle: await fleet.bundle(4, { revokedGrants: [fleet.grant.grantId], issuedAt: T0 - 30 * HOUR }),
      }),
    );
    assert.equal(codes, [
      'ok',
      'ok',
      'trust_bundle_rollback',
      'grant_revoked',
      'trust_bundle_invalid',
      'trust_bundle_expired',
    ]);
  } finally {
    t.dispose();
  }
});

test('a fresh bundle restores the offline allowance, and status counts since it', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 2 } });
  const t = await terminals();
  try {
    await t.call('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem });
    const pay = async (at: number) =>
      t.outcome('verify', { sba: await fleet.sba('100', at), amount: '100', currency: 'EUR' });
    const codes = [await t.outcome('installBundle', { bundle: await fleet.bundle(1) })];
    for (let i = 0; i < 3; i++) codes.push(await pay(T0));
    const before = (await t.call('status', { grantId: fleet.grant.grantId })).result.grant;
    t.setNow(T0 + HOUR);
    codes.push(await t.outcome('installBundle', { bundle: await fleet.bundle(2, { issuedAt: T0 + HOUR - 1000 }) }));
    for (let i = 0; i < 3; i++) codes.push(await pay(T0 + HOUR));
    const after = (await t.call('status', { grantId: fleet.grant.grantId })).result.grant;
    assert.equal(codes, ['ok', 'ok', 'ok', 'offline_limit_exceeded', 'ok', 'ok', 'ok', 'offline_limit_exceeded']);
    assert.equal([before.offlinePayments, before.acceptedMinor], ['2', '200']);
    assert.equal([after.offlinePayments, after.acceptedMinor], ['2', '400']);
  } finally {
    t.dispose();
  }
});

test.run();
