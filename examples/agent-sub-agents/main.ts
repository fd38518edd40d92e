/**
 * A trip-planning agent hands two sub-agents a slice each (PROTOCOL.md §14): 80.00 EUR to a hotel
 * sub-agent and 80.00 EUR to a train sub-agent under its own 100.00 EUR grant. Delegating more than
 * it holds is allowed: every payment is charged to every link, leaf to root, in one reservation, so
 * on the merchant's spend storage what the siblings spend together never passes 100.00 EUR.
 *
 *   npm run compile && node build/examples/agent-sub-agents/main.js
 */
import * as CTL from '../../src/index.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const eur = (minor: string | bigint) => `${(Number(minor) / 100).toFixed(2)} EUR`;
const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem, 'authority.travel.example');
try {
  // 1. The owner grants the planning agent 100.00 EUR for travel, delegable one link deep.
  const [agentKey, hotelKey, trainKey] = await Promise.all([
    CTL.generateKeyPair({ alg: 'EdDSA' }),
    CTL.generateKeyPair({ alg: 'EdDSA' }),
    CTL.generateKeyPair({ alg: 'EdDSA' }),
  ]);
  const { policyHash } = await authority.call('POST', '/policies', { policy: { owner: 'alex', trip: 'lisbon' } });
  const grant: CTL.PolicyGrant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: agentKey.publicJwk,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    allowedPurposes: ['travel:*'],
    maxAmountMinor: '10000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    delegation: { maxDepth: 1 },
  });
  console.log(`grant ${grant.grantId}: ${eur(grant.maxAmountMinor)} for travel:* to the planning agent`);

  // 2. The agent signs a slice for each sub-agent's key: 80.00 + 80.00, more than it holds.
  const planner = CTL.createSession(grant, { actorId: 'planner', signingKey: agentKey.privateKeyPem });
  const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
  const subAgent = async (name: string, key: CTL.GeneratedKeyPair, purpose: string) => {
    const d = await planner.delegate({
      actorKey: key.publicJwk,
      maxAmountMinor: '8000',
      expiresAt,
      allowedPurposes: [purpose],
    });
    console.log(
      `planner delegated ${eur(d.maxAmountMinor)} for ${purpose} to the ${name} sub-agent (${d.delegationId})`,
    );
    // Each sub-agent runs on its own with its own wallet: neither sees what the other spent.
    const s = CTL.createSession(d, { actorId: name, signingKey: key.privateKeyPem });
    return (amount: string) =>
      s.createSba({ amount, currency: 'EUR', rail: 'x402', merchantId: 'trips.example', purpose });
  };
  const hotel = await subAgent('hotel', hotelKey, 'travel:hotel');
  const train = await subAgent('train', trainKey, 'travel:rail');

  // 3. One merchant (a travel site selling rooms and tickets), verifying online with one spend
  //    storage shared by all its endpoints: it charges the grant and each delegation together.
  const spendStorage = CTL.createMemorySpendStorage();
  const merchant = (sba: unknown, amount: string) =>
    CTL.verifyCtl(sba, {
      amount,
      currency: 'EUR',
      merchantId: 'trips.example',
      rail: 'x402',
      jwksUrl: `${authority.url}/.well-known/ctl-keys.json`,
      trackSpend: true,
      spendStorage,
    });
  const spent = async () => eur(await spendStorage.total(`grant:${grant.grantId}`));
  const step = async (who: string, pay: (a: string) => Promise<unknown>, amount: string) => {
    const r = await merchant(await pay(amount), amount);
    const why = r.valid ? 'accepted' : `refused (${r.error.code}: ${r.error.message})`;
    console.log(`${who} pays ${eur(amount)}: ${why}; spent on the grant ${await spent()}`);
    return r;
  };
  expect((await step('hotel', hotel, '6000')).valid, 'hotel room accepted');
  expect((await step('train', train, '3000')).valid, 'train ticket accepted');
  // The train sub-agent still has 50.00 of its slice, but the parent only 10.00.
  const over = await step('train', train, '2500');
  expect(!over.valid && over.error.code === 'budget_exceeded', 'the parent caps the sum: budget_exceeded');

  // 4. Both sub-agents race for the last 10.00: 8 × 1.00 each, presented at once.
  const racers = Array.from({ length: 16 }, (_, i) => (i % 2 ? hotel : train));
  const results = await Promise.all(racers.map(async (pay) => merchant(await pay('100'), '100')));
  const accepted = results.filter((r) => r.valid).length;
  const codes = [...new Set(results.flatMap((r) => (r.valid ? [] : [r.error.code])))];
  console.log(`race, 16 × 1.00 EUR at once: ${accepted} accepted, ${16 - accepted} refused (${codes.join(', ')})`);
  expect(accepted === 10 && codes.join() === 'budget_exceeded', 'exactly the last 10.00 fits');
  const total = await spendStorage.total(`grant:${grant.grantId}`);
  console.log(`spent by both sub-agents together: ${eur(total)} of the parent's ${eur(grant.maxAmountMinor)}`);
  expect(total === 10000n, 'the sum stops at the parent ceiling');
  console.log('OK agent-sub-agents');
} finally {
  await authority.close();
}
