/**
 * A vehicle wallet on the device: the key is made on the vehicle and never leaves
 * it, the fleet authority grants that key a budget, and the wallet signs one SBA per payment with
 * its spend kept in flash, so a reboot cannot reset the ceiling. A merchant verifies the SBAs
 * online against the authority's JWKS.
 *
 *   npm run compile && node build/examples/fleet-wallet/main.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
// What each side carries (docs/sdk-api.md): the vehicle only signs (ctl/wallet, in QuickJS
// dist/ctl-wallet.iife.js), the merchant only verifies (ctl/verify, plus ctl/online: it fetches
// the authority's JWKS and checks revocation URLs); the back office has it all.
import * as Wallet from '../../src/entries/wallet.js';
import * as Verifier from '../../src/entries/verify.js';
import { onlineChecks } from '../../src/entries/online.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

Verifier.registerOnlineChecks(onlineChecks);
const work = mkdtempSync(join(tmpdir(), 'ctl-wallet-'));
const flash = join(work, 'vehicle.flash.json');
const vehicle = () => createDevice(Wallet, createNodeAbi({ storage: createFileByteStorage(flash) }));
const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem);
try {
  const device = vehicle();
  device.provisionRoot({ rootPublicKeyPem: root.publicKeyPem });
  const { publicJwk } = await device.provisionWallet({ actorId: 'vehicle-42' });
  console.log(`vehicle-42 made its key on board: ${await CTL.jwkThumbprint(publicJwk as CTL.PublicJwk)}`);
  const { policyHash } = await authority.call('POST', '/policies', {
    policy: { fleet: 'demo', trip: 'berlin-hamburg' },
  });
  const grant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    maxAmountMinor: '10000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
  });
  device.installGrant({ grant });
  // The wallet's revocation answer offline comes from the installed bundle (fail closed without one).
  await device.installBundle({
    bundle: await authority.call('POST', '/trust-bundles', {
      scope: { category: 'fleet' },
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    }),
  });
  console.log(`grant ${grant.grantId}: 100.00 EUR for the trip`);

  const merchant = (sba: unknown, amount: string) =>
    Verifier.verifyCtl(sba, {
      amount,
      currency: 'EUR',
      jwksUrl: `${authority.url}/.well-known/ctl-keys.json`,
      trackSpend: true,
    });
  for (const amount of ['4000', '3500']) {
    const sba = await device.createSba({ amount, currency: 'EUR', rail: 'card' });
    const r = await merchant(sba, amount);
    console.log(`paid ${(Number(amount) / 100).toFixed(2)} EUR: merchant says ${r.valid ? 'valid' : r.error.code}`);
    expect(r.valid, 'merchant accepts');
  }
  const rebooted = vehicle();
  const s = (await rebooted.status())['grant'] as Record<string, string>;
  console.log(
    `after a reboot: spent ${(Number(s['walletSpentMinor']) / 100).toFixed(2)} EUR, remaining ` +
      `${(Number(s['walletRemainingMinor']) / 100).toFixed(2)} EUR`,
  );
  expect(s['walletRemainingMinor'] === '2500', 'remaining persisted');
  try {
    await rebooted.createSba({ amount: '3000', currency: 'EUR', rail: 'card' });
    expect(false, 'signed past the ceiling');
  } catch (e) {
    console.log(`30.00 EUR more is refused: ${(e as Error).name} (${(e as { code: string }).code})`);
    expect((e as { code: string }).code === 'budget_exceeded', 'budget_exceeded');
  }
  const last = await rebooted.createSba({ amount: '2500', currency: 'EUR', rail: 'card' });
  expect((await merchant(last, '2500')).valid, 'last payment fits exactly');
  console.log('the last 25.00 EUR fits exactly; the ceiling holds across reboots');
  // The fleet revokes the grant; the next bundle carries it and the wallet stops signing.
  await authority.call('POST', '/revoke', { grantId: grant.grantId, reason: 'vehicle sold' });
  await rebooted.installBundle({
    bundle: await authority.call('POST', '/trust-bundles', {
      scope: { category: 'fleet' },
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    }),
  });
  try {
    await vehicle().createSba({ amount: '1', currency: 'EUR', rail: 'card' });
    expect(false, 'signed after revocation');
  } catch (e) {
    console.log(`after revocation: ${(e as Error).name} (${(e as { code: string }).code})`);
    expect(
      (e as { code: string }).code === 'grant_revoked' || (e as { code: string }).code === 'budget_exceeded',
      'refused after revocation',
    );
  }
  console.log('OK fleet-wallet');
} finally {
  await authority.close();
  rmSync(work, { recursive: true, force: true });
}
