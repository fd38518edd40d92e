/**
 * An EV charger holds 30.00 and captures 12.34 (PROTOCOL.md §15): it cannot know the kWh before
 * the session, so the vehicle's wallet signs a hold of 30.00 under a grant of 200.00 with a daily
 * window of 50.00 (§13); the charger verifies the hold for its maximum, charges, captures what
 * was used, and the rest goes back to the vehicle's lifetime budget and to its day. A capture
 * above the hold and a second capture are refused.
 *
 *   npm run compile && node build/examples/ev-charger-hold/main.js
 */
import * as CTL from '../../src/index.js';
// What each box carries (docs/sdk-api.md): the charger only verifies (ctl/verify), the vehicle
// only signs (ctl/wallet); the fleet back office has it all.
import * as Verifier from '../../src/entries/verify.js';
import * as Wallet from '../../src/entries/wallet.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const eur = (minor: string | bigint) => `${(Number(minor) / 100).toFixed(2)} EUR`;
const DAY = 86_400_000;

const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const vehicleKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem);
try {
  const { policyHash } = await authority.call('POST', '/policies', { policy: { fleet: 'demo', purpose: 'charging' } });
  // Days counted from this UTC midnight (a local midnight is written in UTC: PROTOCOL.md §13).
  const midnight = new Date(Math.floor(Date.now() / DAY) * DAY).toISOString().replace(/\.000Z$/, 'Z');
  const grant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: vehicleKey.publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    maxAmountMinor: '20000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 30 * DAY).toISOString(),
    windows: [{ every: 'P1D', maxAmountMinor: '5000' }],
    windowsStart: midnight,
    offline: { maxPayments: 10, maxAmountMinor: '10000', maxBundleAgeMs: DAY },
  });
  console.log(`grant ${grant.grantId}: ${eur('20000')} in all, at most ${eur('5000')} a day (days from ${midnight})`);

  // The charger: root pinned at manufacture, bundle installed during its last online moment.
  const charger = createDevice(Verifier, createNodeAbi());
  charger.provisionRoot({ rootPublicKeyPem: root.publicKeyPem });
  await charger.installBundle({
    bundle: await authority.call('POST', '/trust-bundles', {
      scope: { category: 'ev-charging', region: 'eu' },
      expiresAt: new Date(Date.now() + 2 * DAY).toISOString(),
    }),
  });
  const wallet = Wallet.createSession(grant, { actorId: 'vehicle-42', signingKey: vehicleKey.privateKeyPem });
  const show = async (when: string) => {
    const r = await wallet.remaining();
    const day = r.windows![0]!;
    console.log(
      `wallet ${when}: remaining ${eur(r.remainingMinor)}, today ${eur(day.remainingMinor)} (resets ${day.resetsAt})`,
    );
    return r;
  };

  // 1. The vehicle plugs in: its wallet signs a hold of 30.00, reserved in every counter at once.
  const hold = await wallet.createSba({ amount: '3000', currency: 'EUR', rail: 'card', hold: true });
  const budgetId = hold.authorization.budgetId;
  console.log(`vehicle signs a hold ${budgetId}: capture "${hold.authorization.capture}", up to ${eur('3000')}`);
  const held = await show('while held');
  expect(held.remainingMinor === '17000' && held.windows![0]!.remainingMinor === '2000', 'the hold is reserved');

  // 2. The charger verifies it for its maximum, then charges.
  const v = await charger.verify({ sba: hold, amount: '3000', currency: 'EUR' });
  console.log(`charger verifies the hold for ${eur('3000')}: ${v.valid ? 'accepted' : `refused (${v.error.code})`}`);
  expect(v.valid, 'the charger accepts the hold');
  console.log('charging… 12.34 EUR of energy delivered');

  // 3. It captures what was used: never above the hold, once.
  const capture = async (amount: string) => {
    const r = await charger.capture({ holdId: v.valid ? v.holdId : undefined, amount });
    console.log(
      `charger captures ${eur(amount)}: ${r.captured ? `captured ${eur(r.amountMinor)}` : `refused (${r.error.code})`}`,
    );
    return r.captured ? 'ok' : r.error.code;
  };
  expect((await capture('3100')) === 'capture_exceeds_hold', 'a capture above the hold is refused');
  expect((await capture('1234')) === 'ok', 'the capture of what was used');
  expect((await capture('1234')) === 'replay', 'a second capture is refused');
  const st = (await charger.status({ grantId: grant.grantId }))['grant'] as Record<string, string>;
  console.log(`charger's offline counters: ${st['offlinePayments']} payment, ${eur(st['offlineAmountMinor']!)}`);
  expect(st['offlineAmountMinor'] === '1234', 'the charger counts the captured amount');

  // 4. The wallet learns the captured amount (the charger's receipt) and settles its own hold.
  await wallet.capture(budgetId, '1234');
  const after = await show('after the capture');
  expect(after.remainingMinor === '18766', '30.00 released except 12.34 (lifetime)');
  expect(after.windows![0]!.remainingMinor === '3766', '30.00 released except 12.34 (today)');
  console.log(`released ${eur(3000n - 1234n)}: the vehicle paid ${eur('1234')} of its ${eur('3000')} hold`);
  console.log('OK ev-charger-hold');
} finally {
  await authority.close();
}
