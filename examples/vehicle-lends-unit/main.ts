/**
 * A vehicle lends its trailer's refrigeration unit a slice of its energy budget (PROTOCOL.md §14):
 * the fleet's grant allows delegation, the vehicle signs a ctl-delegation/1 for the unit's key
 * itself (no service), and the unit pays a charging terminal that has no network. The terminal
 * checks the whole chain against its Trust Bundle and pinned root, counts every link in flash,
 * and refuses the unit once a later bundle lists the delegation as revoked.
 *
 *   npm run compile && node build/examples/vehicle-lends-unit/main.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
// The terminal only verifies (ctl/verify on the device), the vehicle and the unit only sign (ctl/wallet).
import * as Verifier from '../../src/entries/verify.js';
import * as Wallet from '../../src/entries/wallet.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const eur = (minor: string | bigint) => `${(Number(minor) / 100).toFixed(2)} EUR`;
const codeOf = (e: unknown) => (e as { code?: string }).code;
const work = mkdtempSync(join(tmpdir(), 'ctl-trailer-'));
const flash = join(work, 'terminal.flash.json');
const terminal = () => createDevice(Verifier, createNodeAbi({ storage: createFileByteStorage(flash) }));
const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem);
try {
  // 1. The fleet grants the vehicle's key a budget it may lend on, two links deep at most.
  const vehicleKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const unitKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const { policyHash } = await authority.call('POST', '/policies', { policy: { fleet: 'demo', trailer: 'reefer' } });
  const grant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: vehicleKey.publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    allowedPurposes: ['energy:*', 'road:tolls'],
    maxAmountMinor: '50000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 7 * 86_400_000).toISOString(),
    delegation: { maxDepth: 2 },
    offline: { maxPayments: 10, maxAmountMinor: '10000', maxBundleAgeMs: 86_400_000 },
  });
  console.log(
    `grant ${grant.grantId}: ${eur(grant.maxAmountMinor)} for energy:* and road:tolls, delegable 2 deep,` +
      ` offline at most 10 payments / 100.00 EUR per terminal`,
  );
  const newBundle = () =>
    authority.call('POST', '/trust-bundles', {
      scope: { category: 'ev-charging', region: 'eu' },
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    });
  const bundle1 = await newBundle();

  // 2. The terminal: root pinned at manufacture, the bundle installed at its last online moment.
  const term = terminal();
  term.provisionRoot({ rootPublicKeyPem: root.publicKeyPem });
  await term.installBundle({ bundle: bundle1 });
  console.log(`terminal: root pinned, bundle sequence ${bundle1.sequence} installed, then offline`);

  // 3. The vehicle lends the unit 20.00 EUR for energy, signed with its own key: peer to peer.
  //    Both take revocation from the bundle they carry (an offline wallet fails closed without one).
  const fromBundle = { trustBundles: [bundle1], rootPublicKeyPem: root.publicKeyPem };
  const vehicle = Wallet.createSession(grant, {
    actorId: 'vehicle-42',
    signingKey: vehicleKey.privateKeyPem,
    revocationFromBundles: fromBundle,
  });
  const slice = await vehicle.delegate({
    actorKey: unitKey.publicJwk,
    maxAmountMinor: '2000',
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    allowedPurposes: ['energy:*'],
  });
  console.log(
    `vehicle-42 delegated ${slice.delegationId} to the reefer unit: ${eur(slice.maxAmountMinor)} for energy:*`,
  );
  const unitSession = (spendStorage = Wallet.createMemorySpendStorage()) =>
    Wallet.createSession(slice, {
      actorId: 'reefer-7',
      signingKey: unitKey.privateKeyPem,
      revocationFromBundles: fromBundle,
      spendStorage,
    });
  const unit = unitSession();
  const pay = (s: CTL.WalletSession<CTL.Delegation>, amount: string, purpose = 'energy:charging') =>
    s.createSba({ amount, currency: 'EUR', rail: 'card', merchantId: 'charger-17', purpose });
  const atTerminal = async (what: string, sba: unknown, amount: string) => {
    const r = await term.verify({ sba, amount, currency: 'EUR', merchantId: 'charger-17', purpose: 'energy:charging' });
    console.log(
      `${what} ${eur(amount)} at the terminal (offline): ${r.valid ? 'accepted' : `refused (${r.error.code})`}`,
    );
    return r;
  };

  // 4. The unit pays within its slice; the terminal verifies the chain root → vehicle → unit.
  for (const amount of ['800', '900']) {
    const r = await atTerminal('unit pays', await pay(unit, amount), amount);
    expect(r.valid && r.grantId === grant.grantId, 'terminal accepts the unit within its slice');
  }
  console.log(`unit's remaining slice: ${eur((await unit.remaining()).remainingMinor)}`);

  // 5. Past the slice: the unit's wallet will not sign; nor will it pay for tolls.
  for (const [amount, purpose, code] of [
    ['500', 'energy:charging', 'budget_exceeded'],
    ['100', 'road:tolls', 'purpose_not_allowed'],
  ] as const) {
    try {
      await pay(unit, amount, purpose);
      expect(false, `unit signed ${amount} for ${purpose}`);
    } catch (e) {
      console.log(`unit asks ${eur(amount)} for ${purpose}: refused by its wallet (${codeOf(e)})`);
      expect(codeOf(e) === code, code);
    }
  }
  // A unit that lost its counters (a reset) signs anyway: the terminal counts the delegation in flash.
  const reset = unitSession();
  const r5 = await atTerminal('reset unit pays', await pay(reset, '500'), '500');
  expect(!r5.valid && r5.error.code === 'budget_exceeded', 'terminal refuses past the slice');

  // 6. The vehicle pays on its own grant at the same terminal: the slice took nothing else from it.
  const own = await vehicle.createSba({
    amount: '3000',
    currency: 'EUR',
    rail: 'card',
    merchantId: 'charger-17',
    purpose: 'energy:charging',
  });
  expect((await atTerminal('vehicle pays', own, '3000')).valid, 'vehicle accepted');

  // 7. The vehicle revokes the slice with a revocation signed by its key (no API key); the next
  //    bundle lists the delegation and the terminal receives it at its next online moment.
  const pending = await pay(reset, '300');
  const revocation = await Wallet.createSignedRevocation(
    { grantId: slice.delegationId },
    { signingKey: vehicleKey.privateKeyPem },
  );
  const res = await fetch(`${authority.url}/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ delegation: slice, revocation }),
  });
  expect(res.ok, `revoke: ${res.status} ${await res.clone().text()}`);
  console.log(`vehicle-42 revoked ${slice.delegationId} (signed revocation, no API key): HTTP ${res.status}`);
  const bundle2 = await newBundle();
  expect(bundle2.revokedGrants.includes(CTL.linkRevocationId(slice)), 'the new bundle lists the delegation');
  // A link is revoked by the hash of its chain (linkRevocationId), never by its id alone: ids are the
  // delegator's to choose, so another tree could carry the same one.
  const link = CTL.linkRevocationId(slice).slice(0, 16);
  console.log(`bundle sequence ${bundle2.sequence} lists revoked: the slice's link (${link}…)`);
  await authority.close();
  await terminal().installBundle({ bundle: bundle2 });
  console.log('terminal installed it; network down again');
  const r7 = await atTerminal('unit pays (the slice has room) after revocation:', pending, '300');
  expect(!r7.valid && r7.error.code === 'grant_revoked', 'terminal refuses the revoked delegation');
  const status = (await terminal().status({ grantId: grant.grantId }))['grant'] as Record<string, string>;
  console.log(
    `terminal counters for the whole tree: ${status['offlinePayments']} payments,` +
      ` ${eur(status['offlineAmountMinor']!)} of the 100.00 EUR offline allowance`,
  );
  expect(status['offlineAmountMinor'] === '4700', 'offline counters of the tree');
  console.log('OK vehicle-lends-unit');
} finally {
  await authority.close();
  rmSync(work, { recursive: true, force: true });
}
