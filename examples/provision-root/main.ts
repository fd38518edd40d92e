/**
 * Root keys at manufacture (spec §5: the Trust Bundle root "is installed at manufacture").
 * The fleet operator creates the root once; its public half is burnt into every device on the
 * line; the authority signs bundles with the private half; a device pinned to the root accepts
 * those bundles and refuses a second, different root.
 *
 *   npm run compile && node build/examples/provision-root/main.js
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { main as ctlRoot } from '../../cli/root.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const work = mkdtempSync(join(tmpdir(), 'ctl-provision-'));
try {
  // 1. The fleet root, as `ctl root init --out DIR` makes it.
  expect((await ctlRoot(['init', '--out', join(work, 'root')])) === 0, 'ctl root init');
  const rootPub = readFileSync(join(work, 'root', 'root.pub.pem'), 'utf8');
  const rootKey = readFileSync(join(work, 'root', 'root.key.pem'), 'utf8');

  // 2. The production line: each device's flash gets the root public key, nothing else.
  const devices = ['charger-001', 'charger-002', 'kiosk-017'].map((id) => {
    const device = createDevice(CTL, createNodeAbi({ storage: createFileByteStorage(join(work, `${id}.flash.json`)) }));
    device.provisionRoot({ rootPublicKeyPem: rootPub });
    console.log(`provisioned ${id} with the fleet root`);
    return { id, device };
  });

  // 3. The authority signs a bundle with the root; every device accepts it.
  const authority = await startLocalAuthority(rootKey);
  try {
    const bundle = await authority.call('POST', '/trust-bundles', {
      scope: { category: 'ev-charging' },
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    });
    for (const { id, device } of devices) {
      const info = await device.installBundle({ bundle });
      console.log(`${id}: installed bundle ${info.bundleId} sequence ${info.sequence}`);
    }
  } finally {
    await authority.close();
  }

  // 4. A different root cannot be provisioned over the pinned one, and its bundles are refused.
  const rogue = await CTL.generateKeyPair({ alg: 'EdDSA' });
  try {
    devices[0]!.device.provisionRoot({ rootPublicKeyPem: rogue.publicKeyPem });
    expect(false, 'a second root was accepted');
  } catch (e) {
    console.log(`charger-001: a different root is refused (${(e as { code: string }).code})`);
    expect((e as { code: string }).code === 'already_provisioned', 'already_provisioned');
  }
  const forged = await CTL.createTrustBundle(
    {
      sequence: 99,
      scope: { category: 'ev-charging' },
      issuers: [],
      revokedGrants: [],
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    },
    { signingKey: rogue.privateKeyPem, issuer: 'rogue' },
  );
  try {
    await devices[1]!.device.installBundle({ bundle: forged });
    expect(false, 'a bundle from another root was installed');
  } catch (e) {
    console.log(`charger-002: a bundle signed by another root is refused (${(e as { code: string }).code})`);
    expect((e as { code: string }).code === 'trust_bundle_invalid', 'trust_bundle_invalid');
  }

  // 5. After a reboot the device still knows its root (it lives in flash).
  const rebooted = createDevice(
    CTL,
    createNodeAbi({ storage: createFileByteStorage(join(work, 'kiosk-017.flash.json')) }),
  );
  const status = await rebooted.status();
  expect(status['provisioned'] === true, 'root survives reboot');
  console.log('kiosk-017 after reboot: root provisioned, 1 bundle installed');
  console.log('OK provision-root');
} finally {
  rmSync(work, { recursive: true, force: true });
}
