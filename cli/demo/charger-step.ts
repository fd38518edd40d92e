/**
 * The demo's charger step: a variable amount held, then captured (PROTOCOL.md §15), under a grant
 * with a daily window (§13), with the SDK alone, in this process and offline: a fleet root signs
 * a Trust Bundle naming the fleet authority's key, the vehicle's wallet signs a hold, the charger
 * verifies it against the bundle, captures what was used, and the wallet gets the rest back.
 */
import {
  captureCtl,
  createMemorySpendStorage,
  createSession,
  createSignedPolicyGrant,
  createTrustBundle,
  CtlError,
  formatTimestamp,
  generateKeyPair,
  jwkThumbprint,
  policyHash,
  verifyCtl,
} from '../../src/index.js';
import { formatMinor } from './money.js';

const DAY = 86_400_000;
const usd = (minor: string | bigint) => formatMinor(minor, 'USD');

/** Runs the step, printing with `show` and checking each outcome with `expect`. */
export async function chargerHoldStep(
  show: (text: string) => void,
  expect: (ok: boolean, what: string) => void,
): Promise<void> {
  const now = Date.now();
  const [root, authority, vehicle] = await Promise.all([0, 1, 2].map(() => generateKeyPair({ alg: 'EdDSA' })));
  const kid = await jwkThumbprint(authority!.publicJwk);
  const issuer = 'authority.fleet.demo';
  const grant = await createSignedPolicyGrant(
    {
      policyHash: policyHash({ fleet: 'demo', purpose: 'charging' }),
      actorKey: vehicle!.publicJwk,
      allowedRails: ['card'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      maxAmountMinor: '20000',
      currency: 'USD',
      expiresAt: formatTimestamp(now + 7 * DAY),
      windows: [{ every: 'P1D', maxAmountMinor: '5000' }],
      offline: { maxPayments: 10, maxAmountMinor: '10000' },
    },
    { issuer, keyId: kid, signingKey: authority!.privateKeyPem, revocationBaseUrl: `https://${issuer}` },
  );
  const bundle = await createTrustBundle(
    {
      sequence: 1,
      scope: { category: 'ev-charging' },
      issuers: [
        { issuer, keys: [{ ...authority!.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'], status: 'active' }] },
      ],
      revokedGrants: [],
      expiresAt: formatTimestamp(now + DAY),
    },
    { signingKey: root!.privateKeyPem, issuer: 'root.fleet.demo' },
  );
  const offline = { trustBundles: [bundle], rootPublicKeyPem: root!.publicKeyPem };
  show(`grant ${grant.grantId}: ${usd('20000')} in all, at most ${usd('5000')} a day`);

  const wallet = createSession(grant, {
    actorId: 'vehicle-42',
    signingKey: vehicle!.privateKeyPem,
    revocationFromBundles: offline,
  });
  const hold = await wallet.createSba({ amount: '3000', currency: 'USD', rail: 'card', hold: true });
  const { budgetId } = hold.authorization;
  const held = await wallet.remaining();
  show(`the vehicle signs a hold of ${usd('3000')}: its wallet has ${usd(held.remainingMinor)} left`);
  // The charger's ledger: the hold lives there until it is captured (PROTOCOL.md §15).
  const chargerLedger = createMemorySpendStorage();
  const v = await verifyCtl(hold, {
    amount: '3000',
    currency: 'USD',
    offline: true,
    ...offline,
    spendStorage: chargerLedger,
  });
  expect(v.valid, `the charger verifies the hold offline for ${usd('3000')}, then charges`);
  const holdId = v.valid ? v.holdId! : '';
  const capture = async (amount: string) => {
    const r = await captureCtl(holdId, amount, { spendStorage: chargerLedger });
    return r.captured ? `captured ${usd(r.amountMinor)}` : r.error.code;
  };
  expect((await capture('3100')) === 'capture_exceeds_hold', `a capture of ${usd('3100')}: capture_exceeds_hold`);
  expect((await capture('1234')) === `captured ${usd('1234')}`, `the charger captures ${usd('1234')}`);
  expect((await capture('1234')) === 'replay', 'a second capture: replay');
  await wallet.capture(budgetId, '1234');
  const after = await wallet.remaining();
  const [left, today] = [after.remainingMinor, after.windows![0]!.remainingMinor];
  expect(
    left === '18766' && today === '3766',
    `the wallet gets back all but ${usd('1234')}: ${usd(left)} left, ${usd(today)} today`,
  );
  const refused = await wallet
    .createSba({ amount: '4000', currency: 'USD', rail: 'card', hold: true })
    .catch((e: unknown) => e);
  expect(
    refused instanceof CtlError && refused.code === 'window_exceeded',
    `a second hold of ${usd('4000')} today: ${(refused as CtlError).code}, resets ${(refused as CtlError).resetsAt}`,
  );
}
