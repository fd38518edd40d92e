// The device follows a root rotation (PROTOCOL.md §11): pinned at version 1, it walks a chain
// given with a bundle (or alone), stores the highest version through the ABI's storage (CAS),
// and after a reboot refuses an older chain (root_rollback), a broken one (root_rotation_invalid)
// and bundles of a retired root (trust_bundle_invalid). Node and QuickJS answer byte for byte alike.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { handlePayload } from '../../firmware-bridge/protocol.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createMemoryByteStorage, type ByteStorage } from '../../firmware-bridge/abi.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';
import { spawnBridge } from '../../firmware-bridge/node/client.js';
import { root as repoRoot } from '../../firmware-bridge/node/device-script.js';
import { makeFleet, iso, T0 } from '../offline/fleet.js';
import { rotate4, rotatedRoot } from '../helpers/root-chain.js';

test.before(() => {
  if (!existsSync(join(repoRoot, 'dist', 'ctl.iife.js')))
    throw new Error('dist/ctl.iife.js is missing: run `npm run build` before these tests');
});

async function scenario() {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 50 } });
  const r = await rotatedRoot(fleet);
  const s4 = await rotate4(r);
  const short = await CTL.createRootStatement(
    { rootVersion: 4, keys: [r.a.publicJwk], threshold: 1, bundleKeys: [r.bk4.publicJwk], issuedAt: iso(T0 - 1000) },
    { signers: [{ key: r.a.privateKeyPem }] },
  ); // one of a 2-of-3 set
  // r2 (retired at version 3) leaks: the thief signs another version 3 and a version 4 of his own.
  const thief = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const f3 = await CTL.createRootStatement(
    { rootVersion: 3, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk], issuedAt: iso(T0) },
    { signers: [{ key: r.r2.privateKeyPem }, { key: thief.privateKeyPem }] },
  );
  const f4 = await CTL.createRootStatement(
    { rootVersion: 4, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk], issuedAt: iso(T0) },
    { signers: [{ key: thief.privateKeyPem }] },
  );
  return { fleet, r, s4, short, fork: [r.s2, f3, f4], thief };
}

type Call = (op: string, args?: Record<string, unknown>) => Promise<any>;
const codeOf = (x: any) => (x.ok ? (x.result?.valid === false ? x.result.error.code : 'ok') : x.error.code);

/** The whole life of one device; `boot()` gives a fresh device on the same flash (a reboot). */
async function life(boot: () => Promise<Call>, s: Awaited<ReturnType<typeof scenario>>): Promise<string[]> {
  const { fleet, r, s4, short, fork, thief } = s;
  const codes: string[] = [];
  const pay = async (call: Call) =>
    codeOf(await call('verify', { sba: await fleet.sba('100'), amount: '100', currency: 'EUR' }));
  let call = await boot();
  codes.push(codeOf(await call('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem })));
  codes.push(codeOf(await call('installBundle', { bundle: await fleet.bundle(1) })));
  codes.push(await pay(call));
  // Rotation 1 → 3 arrives with a bundle signed by the version-3 bundle key.
  const inst = await call('installBundle', {
    bundle: await fleet.bundle(2, { signer: r.bk3 }),
    rootChain: [r.s2, r.s3],
  });
  codes.push(codeOf(inst), String(inst.result?.rootVersion));
  codes.push(await pay(call));
  // The retired version-1 root signs a newer bundle: refused.
  codes.push(codeOf(await call('installBundle', { bundle: await fleet.bundle(3) })));
  call = await boot(); // reboot
  codes.push(String((await call('status')).result.rootVersion));
  codes.push(await pay(call));
  // Replayed older chain, with a bundle of its (version 2) bundle key.
  codes.push(
    codeOf(await call('installBundle', { bundle: await fleet.bundle(4, { signer: r.bk2 }), rootChain: [r.s2] })),
  );
  codes.push(codeOf(await call('updateRoot', { rootChain: [r.s2] })));
  // Skipped version and a statement short of its threshold.
  codes.push(codeOf(await call('updateRoot', { rootChain: [r.s2, s4] })));
  codes.push(codeOf(await call('updateRoot', { rootChain: [r.s2, r.s3, short] })));
  // A fork signed by the retired version-2 key reaches version 4: it walks from the pin, but does not extend the stored
  // chain.
  codes.push(codeOf(await call('updateRoot', { rootChain: fork })));
  codes.push(
    codeOf(await call('installBundle', { bundle: await fleet.bundle(20, { signer: thief }), rootChain: fork })),
  );
  // The version-3 bundle key is compromised: version 4 retires it, the device's pin untouched.
  const up = await call('updateRoot', { rootChain: [r.s2, r.s3, s4] });
  codes.push(codeOf(up), String(up.result?.rootVersion));
  codes.push(await pay(call)); // the installed version-3 bundle no longer vouches
  codes.push(codeOf(await call('installBundle', { bundle: await fleet.bundle(9, { signer: r.bk3 }) })));
  codes.push(codeOf(await call('installBundle', { bundle: await fleet.bundle(5, { signer: r.bk4 }) })));
  call = await boot();
  codes.push(await pay(call));
  codes.push(codeOf(await call('updateRoot', { rootChain: [r.s2, r.s3] })));
  codes.push(codeOf(await call('updateRoot', { rootChain: [r.s2, r.s3, s4] })));
  return codes;
}

const EXPECTED = [
  'ok',
  'ok',
  'ok',
  'ok',
  '3',
  'ok',
  'trust_bundle_invalid',
  '3',
  'ok',
  'root_rollback',
  'root_rollback',
  'root_rotation_invalid',
  'root_rotation_invalid',
  'root_rotation_invalid',
  'root_rotation_invalid',
  'ok',
  '4',
  'trust_bundle_invalid',
  'trust_bundle_invalid',
  'ok',
  'ok',
  'root_rollback',
  'ok',
];

test('Node device: follows 1 → 3 → 4, persists the root version, refuses rollback after reboot', async () => {
  const s = await scenario();
  const flash = createMemoryByteStorage();
  let id = 0;
  const boot = async (): Promise<Call> => {
    const device = createDevice(CTL, createNodeAbi({ now: T0, storage: flash }));
    return async (op, args = {}) => cborDecode(await handlePayload(device, cborEncode({ id: ++id, op, args })));
  };
  assert.equal(await life(boot, s), EXPECTED);
  // What is stored: the version and the chain that reaches it, nothing the device did not verify.
  const rec = JSON.parse(new TextDecoder().decode(flash.get(new TextEncoder().encode('ctl/root-chain'))!));
  assert.is(rec.rootVersion, 4);
  assert.is(rec.statements.length, 3);
});

test('QuickJS device (dist/ctl.iife.js): the same answers, byte for byte, as the Node device', async () => {
  const s = await scenario();
  const flashQ = createMemoryByteStorage();
  const flashN = createMemoryByteStorage();
  const engines: Array<{ dispose(): void }> = [];
  let id = 0;
  const boot = async (): Promise<Call> => {
    const qjs = await createQuickJsDevice(createNodeAbi({ now: T0, storage: flashQ }));
    const node = createDevice(CTL, createNodeAbi({ now: T0, storage: flashN }));
    engines.push(qjs);
    return async (op, args = {}) => {
      const payload = cborEncode({ id: ++id, op, args });
      const a = qjs.request(payload);
      const b = await handlePayload(node, payload);
      assert.equal(cborDecode(a), cborDecode(b), op);
      return cborDecode(a);
    };
  };
  try {
    assert.equal(await life(boot, s), EXPECTED);
  } finally {
    for (const e of engines) e.dispose();
  }
});

test('bridge child process on a flash file: the root version survives a process restart', async () => {
  const { fleet, r } = await scenario();
  const flash = join(mkdtempSync(join(tmpdir(), 'ctl-root-')), 'flash.json');
  let bridge = spawnBridge({ flash, now: iso(T0) });
  try {
    assert.ok((await bridge.request('provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem })).ok);
    const up = await bridge.request('updateRoot', { rootChain: [r.s2, r.s3] });
    assert.equal(up.result, { rootVersion: 3, changed: true }, JSON.stringify(up));
  } finally {
    assert.is(await bridge.close(), 0);
  }
  bridge = spawnBridge({ flash, now: iso(T0) });
  try {
    const old = await bridge.request('installBundle', { bundle: await fleet.bundle(1) });
    assert.is(old.error?.code, 'trust_bundle_invalid', JSON.stringify(old));
    const replay = await bridge.request('updateRoot', { rootChain: [r.s2] });
    assert.is(replay.error?.code, 'root_rollback');
    assert.ok((await bridge.request('installBundle', { bundle: await fleet.bundle(1, { signer: r.bk3 }) })).ok);
    assert.is(((await bridge.request('status', {})).result as any).rootVersion, 3);
  } finally {
    assert.is(await bridge.close(), 0);
  }
});

test('a corrupt root record fails closed (host_failure), never back to version 1', async () => {
  const { fleet } = await scenario();
  const flash: ByteStorage = createMemoryByteStorage();
  const device = createDevice(CTL, createNodeAbi({ now: T0, storage: flash }));
  device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  flash.put(new TextEncoder().encode('ctl/root-chain'), new TextEncoder().encode('{"rootVersion":"x"}'));
  await device.installBundle({ bundle: await fleet.bundle(1) }).then(
    () => assert.unreachable('must refuse'),
    (e) => assert.is(e.code, 'host_failure'),
  );
});

test.run();
