/**
 * A person lets an AI assistant book travel on their behalf (the spec's Human-Agent profile,
 * PROTOCOL.md §10): their did:key signs a bounded budget for the agent's session key, the agent
 * signs one SBA per payment, and merchants verify the whole chain themselves, one offline against
 * a Trust Bundle. The person uses the `ctl human` commands; the authority is the real one.
 *
 *   npm run compile && node build/examples/human-agent/main.js
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as CTL from '../../src/index.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const repo = fileURLToPath(new URL('../../..', import.meta.url)); // build/examples/human-agent → repo
const work = mkdtempSync(join(tmpdir(), 'ctl-human-'));
const eur = (minor: string | bigint) => `${(Number(minor) / 100).toFixed(2)} EUR`;
/** The person's terminal: `ctl human …` in its own process (the authority answers from this one), stdout returned. */
const ctl = async (...args: string[]) =>
  (
    await promisify(execFile)(process.execPath, [join(repo, 'bin', 'ctl.mjs'), 'human', ...args], {
      cwd: repo,
      encoding: 'utf8',
    })
  ).stdout.trim();

const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem, 'authority.travel.example');
try {
  // 1. The person makes their key; the authority's admin enrols the DID for travel bundles.
  const keyFile = join(work, 'alex.key.pem');
  const did = await ctl('keygen', '--out', keyFile);
  expect(/^did:key:z6Mk/.test(did) && (statSync(keyFile).mode & 0o777) === 0o600, 'a DID and a 0600 key file');
  console.log(`Alex's DID: ${did} (key file mode 0600)`);
  await authority.call('POST', '/humans', { did, label: 'Alex', scope: { category: 'travel' } });
  console.log('the authority enrolled Alex for travel bundles');

  // 2. The assistant has a session key; Alex delegates 20.00 EUR for travel:booking to it.
  const agent = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const agentPub = join(work, 'agent.pub.pem');
  writeFileSync(agentPub, agent.publicKeyPem);
  const grantFile = join(work, 'grant.json');
  await ctl(
    'grant',
    '--key',
    keyFile,
    '--authority',
    authority.url,
    '--agent',
    agentPub,
    '--amount',
    '2000',
    '--currency',
    'EUR',
    '--purpose',
    'travel:booking',
    '--expires',
    '24h',
    '--out',
    grantFile,
  );
  const grant = CTL.parseGrant(readFileSync(grantFile, 'utf8'));
  expect(
    grant.issuer === did && grant.profile === 'human-agent' && grant.maxAmountMinor === '2000',
    "the grant is Alex's",
  );
  console.log(
    `Alex signed grant ${grant.grantId}: ${eur(grant.maxAmountMinor)} for ${grant.allowedPurposes!.join(', ')}, ` +
      `revocable at ${grant.revocationUrl}`,
  );

  // 3. Merchants: a hotel online (trusts Alex's DID, asks the revocation URL), a rail kiosk
  //    offline with the travel Trust Bundle and the pinned root key.
  const bundle = await authority.call('POST', '/trust-bundles', {
    scope: { category: 'travel' },
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
  });
  const hotel = (sba: unknown, amount: string) =>
    CTL.verifyCtl(sba, {
      amount,
      currency: 'EUR',
      merchantId: 'hotel.example',
      rail: 'x402',
      purpose: 'travel:booking',
      trustedHumans: [did],
      trackSpend: true,
      revocationTtl: 0,
    });
  const kiosk = (sba: unknown, amount: string) =>
    CTL.verifyCtl(sba, {
      amount,
      currency: 'EUR',
      merchantId: 'rail.example',
      rail: 'x402',
      purpose: 'travel:booking',
      trustBundles: [bundle],
      rootPublicKeyPem: root.publicKeyPem,
      offline: true,
      trackSpend: true,
    });

  // 4. The assistant pays: one SBA per payment, each naming its payment (intentHash).
  const session = CTL.createSession(grant, {
    actorId: 'assistant',
    signingKey: agent.privateKeyPem,
    ceiling: { amount: '2000', currency: 'EUR' },
    revocationTtl: 0,
  });
  const pay = (merchantId: string, amount: string) =>
    session.createSba({ amount, currency: 'EUR', rail: 'x402', merchantId, purpose: 'travel:booking' });
  const room = await pay('hotel.example', '1200');
  const r1 = await hotel(room, '1200');
  console.log(`hotel (online) 12.00 EUR: ${r1.valid ? 'accepted' : r1.error.code}`);
  expect(r1.valid, 'hotel accepts');
  const ticket = await pay('rail.example', '500');
  const r2 = await kiosk(ticket, '500');
  console.log(`rail kiosk (offline, bundle) 5.00 EUR: ${r2.valid ? 'accepted' : r2.error.code}`);
  expect(r2.valid, 'kiosk accepts offline');
  console.log(`remaining: ${eur((await session.remaining()).remainingMinor)}`);

  // 5. A third payment over the ceiling: the agent's wallet will not sign it.
  try {
    await pay('hotel.example', '600');
    expect(false, 'signed past the ceiling');
  } catch (e) {
    console.log(`6.00 EUR more: refused by the wallet (${(e as { code: string }).code})`);
    expect((e as { code: string }).code === 'budget_exceeded', 'budget_exceeded');
  }
  // 6. A payment with a wrong intent: an SBA made for the hotel, presented to the kiosk.
  const snack = await pay('hotel.example', '100');
  const r3 = await kiosk(snack, '100');
  const kioskOutcome = r3.valid ? 'accepted' : `refused (${r3.error.code}: ${r3.error.message})`;
  console.log(`an SBA for the hotel presented at the kiosk: ${kioskOutcome}`);
  expect(!r3.valid && r3.error.code === 'destination_not_allowed', 'wrong intent refused');

  // 7. Alex revokes with the same key, no API key; the next online payment is refused.
  const pending = await pay('hotel.example', '100');
  const answer = JSON.parse(await ctl('revoke', '--key', keyFile, '--grant', grantFile));
  expect(answer.revoked === true, 'revoked');
  console.log(`Alex revoked ${grant.grantId} at ${answer.revokedAt}`);
  const r4 = await hotel(pending, '100');
  console.log(`next online payment (hotel): ${r4.valid ? 'accepted' : `refused (${r4.error.code})`}`);
  expect(!r4.valid && r4.error.code === 'grant_revoked', 'refused after revocation');
  try {
    await pay('hotel.example', '100');
    expect(false, 'wallet signed after revocation');
  } catch (e) {
    console.log(`the assistant's wallet stops too: ${(e as Error).name} (${(e as { code: string }).code})`);
    expect((e as { code: string }).code === 'grant_revoked', 'wallet grant_revoked');
  }
  const audit = await authority.call('GET', '/audit?limit=100');
  const trail = audit.entries.filter((e: any) => e.subject === grant.grantId).map((e: any) => e.action);
  console.log(`audit trail of the grant: ${trail.join(', ')} (actor ${did.slice(0, 20)}…)`);
  expect(trail.join() === 'grant.issue,grant.revoke', 'audited');
  console.log('OK human-agent');
} finally {
  await authority.close();
  rmSync(work, { recursive: true, force: true });
}
