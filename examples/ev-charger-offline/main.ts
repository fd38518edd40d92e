/**
 * An EV charger that takes payments with no network: it verifies each vehicle's
 * SBA against its installed Trust Bundle, counts every accepted payment in flash against the
 * grant's offline allowance (PROTOCOL.md §8), and so bounds what a lost or revoked grant can cost.
 *
 *   npm run compile && node build/examples/ev-charger-offline/main.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
// What each box carries (docs/sdk-api.md): the charger only verifies (ctl/verify, in QuickJS
// dist/ctl-verify.iife.js), the vehicle only signs (ctl/wallet); the fleet back office has it all.
import * as Verifier from '../../src/entries/verify.js';
import * as Wallet from '../../src/entries/wallet.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const work = mkdtempSync(join(tmpdir(), 'ctl-charger-'));
const flash = join(work, 'charger.flash.json');
const charger = () => createDevice(Verifier, createNodeAbi({ storage: createFileByteStorage(flash) }));
try {
  // Fleet side, while everything is online: root, authority, the vehicle's grant.
  const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const vehicleKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const authority = await startLocalAuthority(root.privateKeyPem);
  const { policyHash } = await authority.call('POST', '/policies', { policy: { fleet: 'demo', purpose: 'charging' } });
  const grant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: vehicleKey.publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    maxAmountMinor: '50000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 7 * 86_400_000).toISOString(),
    offline: { maxPayments: 3, maxAmountMinor: '6000', maxBundleAgeMs: 86_400_000 },
  });
  console.log(`grant ${grant.grantId}: 500.00 EUR, offline at most 3 payments / 60.00 EUR per terminal`);
  const bundle = await authority.call('POST', '/trust-bundles', {
    scope: { category: 'ev-charging', region: 'eu' },
    expiresAt: new Date(Date.now() + 2 * 86_400_000).toISOString(),
  });

  // The charger: root pinned at manufacture, bundle installed during its last online moment.
  const device = charger();
  device.provisionRoot({ rootPublicKeyPem: root.publicKeyPem });
  await device.installBundle({ bundle });
  // The vehicle signs while the authority still answers revocation checks.
  const wallet = Wallet.createSession(grant, {
    actorId: 'vehicle-42',
    signingKey: vehicleKey.privateKeyPem,
    scope: 'TRIP',
  });
  const sbas = [];
  for (const amount of ['2500', '1800', '1500', '900'])
    sbas.push([amount, await wallet.createSba({ amount, currency: 'EUR', rail: 'card' })] as const);
  await authority.close();
  console.log('network down: the charger is on its own');

  const results: string[] = [];
  let dev = device;
  for (const [i, [amount, sba]] of sbas.entries()) {
    if (i === 2) {
      dev = charger(); // a reboot before the third session: only the flash survives
      console.log('charger rebooted');
    }
    const r = await dev.verify({ sba, amount, currency: 'EUR' });
    results.push(r.valid ? 'ok' : r.error.code);
    const outcome = r.valid ? 'accepted' : `refused (${r.error.code})`;
    console.log(`session ${i + 1}: ${(Number(amount) / 100).toFixed(2)} EUR → ${outcome}`);
  }
  const again = await dev.verify({ sba: sbas[0]![1], amount: '2500', currency: 'EUR' });
  console.log(`the first SBA presented again → ${again.valid ? 'accepted' : `refused (${again.error.code})`}`);
  // 2500 + 1800 = 4300; +1500 = 5800 ≤ 6000; the 4th (900) would be the 4th payment and over 6000.
  expect(results.join(',') === 'ok,ok,ok,offline_limit_exceeded', `outcomes ${results}`);
  expect(!again.valid && again.error.code === 'replay', 'replay refused');
  const status = (await charger().status({ grantId: grant.grantId }))['grant'] as Record<string, string>;
  const offlineEur = (Number(status['offlineAmountMinor']) / 100).toFixed(2);
  console.log(`counters in flash: ${status['offlinePayments']} payments, ${offlineEur} EUR`);
  console.log('exposure bound of this terminal for this grant: min(60.00 EUR, 3 × 500.00 EUR) = 60.00 EUR');
  console.log('OK ev-charger-offline');
} finally {
  rmSync(work, { recursive: true, force: true });
}
