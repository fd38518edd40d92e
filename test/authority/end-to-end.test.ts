/**
 * End-to-end flows (spec §3): the authority issues a grant, a wallet
 * signs an SBA with the SDK, a merchant verifies it online (JWKS + revocation URL) and offline
 * (Trust Bundle + pinned root key from `ctl authority root-key`); after revocation the online
 * verifier refuses at its next check and the offline one after its next bundle refresh.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import {
  CtlGrantRevokedError,
  createSession,
  generateKeyPair,
  verifyCtl,
  createMemorySpendStorage,
} from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';

const run = promisify(execFile);
let t: TestAuthority;

test.before(async () => {
  t = await startTestAuthority();
});
test.after(async () => {
  await t.close();
});

const bundleFor = async (category: string) =>
  (
    await t.call('POST', '/trust-bundles', {
      scope: { category },
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    })
  ).body;

test(
  'issue → wallet SBA → online and offline verification; revoke → online refuses at ' +
    'its next check, offline after refresh',
  async () => {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    const grant = (
      await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk, { destinationAllowlist: ['station-7'] }))
    ).body;
    assert.is(grant.version, 1, JSON.stringify(grant));

    const session = createSession(grant, {
      actorId: 'vehicle-42',
      signingKey: wallet.privateKeyPem,
      scope: 'TRIP',
      revocationTtl: 0,
    });
    const sba = await session.createSba({ amount: '1250', currency: 'USD', rail: 'x402', merchantId: 'station-7' });

    // The root key as a fleet operator would provision it: printed by the CLI from the same database.
    const cli = await run(process.execPath, [join(process.cwd(), 'bin', 'ctl.mjs'), 'authority', 'root-key'], {
      env: { ...process.env, DATABASE_URL: `sqlite:${join(t.dir, 'authority.db')}`, LOG_LEVEL: 'silent' },
    });
    const rootPublicKeyPem = cli.stdout;
    assert.match(rootPublicKeyPem, /^-----BEGIN PUBLIC KEY-----\n[\s\S]+-----END PUBLIC KEY-----\n$/);
    assert.is(rootPublicKeyPem, (await t.authority.keys.rootSigner()).publicKeyPem);

    const jwksUrl = `${t.url}/.well-known/ctl-keys.json`;
    const t0 = Date.now();
    const online = (now: number) =>
      verifyCtl(sba, {
        amount: '1250',
        currency: 'USD',
        merchantId: 'station-7',
        jwksUrl,
        revocationTtl: 60_000,
        now: () => now,
      });
    // A terminal per check: offline, a verifier records the budgetId it accepts (PROTOCOL.md §12), and
    // this test presents one SBA before and after the refresh to see the revocation, not a replay.
    const offline = (bundle: unknown) =>
      verifyCtl(sba, {
        amount: '1250',
        currency: 'USD',
        merchantId: 'station-7',
        trustBundles: [bundle],
        rootPublicKeyPem,
        offline: true,
        spendStorage: createMemorySpendStorage(),
      });

    const first = await online(t0);
    assert.is(first.valid, true, JSON.stringify(first));
    const bundle1 = await bundleFor('fuel');
    const off1 = await offline(bundle1);
    assert.is(off1.valid, true, JSON.stringify(off1));
    // A merchant that is not in the grant's allowlist is refused, online and offline alike.
    const elsewhere = await verifyCtl(sba, {
      amount: '1250',
      currency: 'USD',
      merchantId: 'station-8',
      trustBundles: [bundle1],
      rootPublicKeyPem,
      offline: true,
    });
    assert.equal(elsewhere.valid ? 'valid' : elsewhere.error.code, 'destination_not_allowed');

    assert.is((await t.call('POST', '/revoke', { grantId: grant.grantId, reason: 'stolen' })).status, 200);

    // Online: the cached "not revoked" answer holds within the TTL; the next check refuses.
    assert.is((await online(t0 + 1000)).valid, true);
    const next = await online(t0 + 61_000);
    assert.equal(next.valid ? 'valid' : next.error.code, 'grant_revoked');

    // Offline: accepted on the old bundle (spec §3: until the next refresh), refused on the new one.
    assert.is((await offline(bundle1)).valid, true);
    const bundle2 = await bundleFor('fuel');
    assert.ok(bundle2.sequence > bundle1.sequence);
    assert.ok(bundle2.revokedGrants.includes(grant.grantId));
    const off2 = await offline(bundle2);
    assert.equal(off2.valid ? 'valid' : off2.error.code, 'grant_revoked');

    // The wallet stops too: its next SBA is refused before anything is signed (spec §3 rule 1).
    let thrown: unknown;
    try {
      await session.createSba({ amount: '10', currency: 'USD', rail: 'x402', merchantId: 'station-7' });
    } catch (e) {
      thrown = e;
    }
    assert.ok(thrown instanceof CtlGrantRevokedError, String(thrown));
  },
);

test('a grant signed by a retired key still verifies online after rotation; the new key signs new grants', async () => {
  const wallet = await generateKeyPair({ alg: 'ES256' });
  const old = (await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk))).body;
  await t.call('POST', '/admin/keys/rotate');
  const fresh = (await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk))).body;
  assert.is.not(fresh.keyId, old.keyId);
  const jwksUrl = `${t.url}/.well-known/ctl-keys.json`;
  for (const grant of [old, fresh]) {
    const s = createSession(grant, { actorId: 'agent-1', signingKey: wallet.privateKeyPem, revocationTtl: 0 });
    const sba = await s.createSba({ amount: '5', currency: 'USD', rail: 'x402' });
    // jwksTtl 0: this verifier must see the rotated JWKS, not a cached one.
    const r = await verifyCtl(sba, { amount: '5', currency: 'USD', jwksUrl, jwksTtl: 0, revocationTtl: 0 });
    assert.is(r.valid, true, JSON.stringify(r));
  }
});

test('a grant altered after signing is refused against the JWKS', async () => {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const grant = (await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk))).body;
  const s = createSession(grant, { actorId: 'agent-1', signingKey: wallet.privateKeyPem, revocationTtl: 0 });
  const sba = await s.createSba({ amount: '5', currency: 'USD', rail: 'x402' });
  const forged = { ...sba, grant: { ...sba.grant, maxAmountMinor: '999999' } };
  const r = await verifyCtl(forged, {
    amount: '5',
    currency: 'USD',
    jwksUrl: `${t.url}/.well-known/ctl-keys.json`,
    revocationTtl: 0,
  });
  assert.equal(r.valid ? 'valid' : r.error.code, 'grant_signature_invalid');
});

test.run();
