/**
 * Delegations at the authority (PROTOCOL.md §14), through HTTP on the real app, on SQLite and on
 * PostgreSQL: a grant allowing delegation, a delegation's revocation by the root's owner (API key)
 * or by the delegator (a `ctl-revocation/1` signed by the parent's actorKey), `GET /revoke`
 * answering for delegation ids, bundles listing them, and a verifier stopped online and offline.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createDelegation,
  createSession,
  createSignedRevocation,
  generateKeyPair,
  linkRevocationId,
  verifyCtl,
  type Delegation,
  type PolicyGrant,
} from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const isError = (r: { status: number; body: any }, status: number, code: string) => {
  assert.is(r.status, status, JSON.stringify(r.body));
  assert.is(r.body?.error?.code, code, JSON.stringify(r.body));
};

async function scenario(t: TestAuthority) {
  const agent = await generateKeyPair();
  const req = await grantRequest(t, agent.publicJwk, { delegation: { maxDepth: 2 } });
  isError(await t.call('POST', '/grants', { ...req, delegation: { maxDepth: 5 } }), 400, 'malformed');
  isError(await t.call('POST', '/grants', { ...req, delegation: { maxDepth: 1, x: 1 } }), 400, 'malformed');
  const issued = await t.call('POST', '/grants', req);
  assert.is(issued.status, 201, JSON.stringify(issued.body));
  const root = issued.body as PolicyGrant;
  assert.equal(root.delegation, { maxDepth: 2 });

  const mid = await generateKeyPair();
  const leafKey = await generateKeyPair();
  const expiresAt = root.expiresAt;
  const d1 = await createDelegation(
    root,
    { actorKey: mid.publicJwk, maxAmountMinor: '1000', expiresAt },
    { signingKey: agent.privateKeyPem },
  );
  const d2 = await createDelegation(
    d1,
    { actorKey: leafKey.publicJwk, maxAmountMinor: '500', expiresAt },
    { signingKey: mid.privateKeyPem },
  );
  const q = (id: string) => `/revoke?grantId=${id}&rootGrantId=${root.grantId}`;
  // Never revoked: "not revoked" beside its root; unknown without it.
  assert.equal((await t.call('GET', q(d1.delegationId), undefined, null)).body, {
    grantId: d1.delegationId,
    revoked: false,
  });
  isError(await t.call('GET', `/revoke?grantId=${d1.delegationId}`, undefined, null), 404, 'not_found');
  isError(
    await t.call('GET', `/revoke?grantId=${d1.delegationId}&rootGrantId=nope`, undefined, null),
    404,
    'not_found',
  );

  // A verifier online pays under the chain.
  const fetch = (url: string) => globalThis.fetch(url);
  const s = createSession(d2, { actorId: 'leaf', signingKey: leafKey.privateKeyPem, fetch });
  const sba = await s.createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  const jwksUrl = `${t.url}/.well-known/ctl-keys.json`;
  const ok = await verifyCtl(sba, { amount: '10', currency: 'USD', jwksUrl, fetch, revocationTtl: 0 });
  assert.ok(ok.valid, JSON.stringify(!ok.valid && ok.error));

  // The delegator signs; a stranger's signature or a revocation of another id is refused.
  const stranger = await generateKeyPair();
  isError(
    await t.call(
      'POST',
      '/revoke',
      {
        delegation: d2,
        revocation: await createSignedRevocation({ grantId: d2.delegationId }, { signingKey: stranger.privateKeyPem }),
      },
      null,
    ),
    403,
    'forbidden',
  );
  isError(
    await t.call(
      'POST',
      '/revoke',
      {
        delegation: d2,
        revocation: await createSignedRevocation({ grantId: 'other' }, { signingKey: mid.privateKeyPem }),
      },
      null,
    ),
    400,
    'malformed',
  );
  // Without a revocation, an API key is needed.
  isError(await t.call('POST', '/revoke', { delegation: d2 }, null), 401, 'unauthorized');
  // A chain whose root is not this authority's grant (or is edited) is refused.
  const edited = JSON.parse(JSON.stringify(d2)) as Delegation;
  (edited.parent as Delegation).maxAmountMinor = '1001';
  assert.ok((await t.call('POST', '/revoke', { delegation: edited })).status >= 400);

  // The delegator of the middle link (the root grant's actor) revokes it, without an API key.
  const byDelegator = await t.call(
    'POST',
    '/revoke',
    {
      delegation: d1,
      revocation: await createSignedRevocation({ grantId: d1.delegationId }, { signingKey: agent.privateKeyPem }),
    },
    null,
  );
  assert.is(byDelegator.status, 200, JSON.stringify(byDelegator.body));
  assert.is(byDelegator.body.grantId, d1.delegationId);
  assert.is(byDelegator.body.revocationId, linkRevocationId(d1));
  const status = await t.call('GET', `/revoke?grantId=${linkRevocationId(d1)}`, undefined, null);
  assert.is(status.body.revoked, true, 'a revoked delegation answers without its root');
  // Online: the leaf below the revoked middle link is refused.
  const online = await verifyCtl(sba, { amount: '10', currency: 'USD', jwksUrl, fetch, revocationTtl: 0 });
  assert.is(!online.valid && online.error.code, 'grant_revoked');

  // The owner (API key) revokes another delegation; idempotent.
  const other = await createDelegation(
    root,
    { actorKey: (await generateKeyPair()).publicJwk, maxAmountMinor: '10', expiresAt },
    { signingKey: agent.privateKeyPem },
  );
  const r1 = await t.call('POST', '/revoke', { delegation: other, reason: 'lost device' });
  assert.is(r1.status, 200, JSON.stringify(r1.body));
  const r2 = await t.call('POST', '/revoke', { delegation: other });
  assert.is(r2.body.revokedAt, r1.body.revokedAt);

  // Bundles list revoked delegation ids beside grant ids.
  const bundle = (await t.call('POST', '/trust-bundles', { scope: { category: 'deleg' }, expiresAt })).body;
  // By their revocation ids (what the link signs), never by delegation id alone.
  assert.ok(bundle.revokedGrants.includes(linkRevocationId(d1)), JSON.stringify(bundle.revokedGrants));
  assert.ok(bundle.revokedGrants.includes(linkRevocationId(other)));
  assert.not.ok(bundle.revokedGrants.includes(d1.delegationId));
}

/**
 * A delegator in one tree can name its own link with any id, another tree's delegation id or a
 * grant id included, and revoke it without an API key: that must stop only its own link.
 */
async function hostileIdReuse(t: TestAuthority) {
  const victimAgent = await generateKeyPair();
  const victimRoot = (
    await t.call('POST', '/grants', await grantRequest(t, victimAgent.publicJwk, { delegation: { maxDepth: 1 } }))
  ).body as PolicyGrant;
  const leafKey = await generateKeyPair();
  const victim = await createDelegation(
    victimRoot,
    { actorKey: leafKey.publicJwk, maxAmountMinor: '500', expiresAt: victimRoot.expiresAt },
    { signingKey: victimAgent.privateKeyPem },
  );
  // A P-256 delegator (its did:key is zDn...) revokes as an Ed25519 one does.
  const hostileAgent = await generateKeyPair({ alg: 'ES256' });
  const hostileRoot = (
    await t.call('POST', '/grants', await grantRequest(t, hostileAgent.publicJwk, { delegation: { maxDepth: 1 } }))
  ).body as PolicyGrant;
  for (const id of [victim.delegationId, victimRoot.grantId]) {
    const copy = await createDelegation(
      hostileRoot,
      {
        actorKey: (await generateKeyPair()).publicJwk,
        delegationId: id,
        maxAmountMinor: '1',
        expiresAt: hostileRoot.expiresAt,
      },
      { signingKey: hostileAgent.privateKeyPem },
    );
    const r = await t.call(
      'POST',
      '/revoke',
      {
        delegation: copy,
        revocation: await createSignedRevocation({ grantId: id }, { signingKey: hostileAgent.privateKeyPem }),
      },
      null,
    );
    assert.is(r.status, 200, JSON.stringify(r.body));
  }
  // Its own link is revoked, by its revocation id only.
  const own = await createDelegation(
    hostileRoot,
    { actorKey: (await generateKeyPair()).publicJwk, maxAmountMinor: '1', expiresAt: hostileRoot.expiresAt },
    { signingKey: hostileAgent.privateKeyPem },
  );
  const ownRevoked = await t.call(
    'POST',
    '/revoke',
    {
      delegation: own,
      revocation: await createSignedRevocation(
        { grantId: own.delegationId },
        { signingKey: hostileAgent.privateKeyPem },
      ),
    },
    null,
  );
  assert.is(ownRevoked.body.revocationId, linkRevocationId(own));
  const asked = await t.call('GET', `/revoke?grantId=${linkRevocationId(own)}`, undefined, null);
  assert.is(asked.body.revoked, true);
  const fetch = (url: string) => globalThis.fetch(url);
  const s = createSession(victim, { actorId: 'leaf', signingKey: leafKey.privateKeyPem, fetch });
  const sba = await s.createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  const jwksUrl = `${t.url}/.well-known/ctl-keys.json`;
  const online = await verifyCtl(sba, { amount: '10', currency: 'USD', jwksUrl, fetch, revocationTtl: 0 });
  assert.ok(online.valid, JSON.stringify(!online.valid && online.error));
  const bundle = (
    await t.call('POST', '/trust-bundles', { scope: { category: 'hostile' }, expiresAt: victimRoot.expiresAt })
  ).body;
  const rootPublicKeyPem = (await t.authority.keys.rootSigner()).publicKeyPem;
  const offline = await verifyCtl(sba, {
    amount: '10',
    currency: 'USD',
    trustBundles: [bundle],
    rootPublicKeyPem,
    offline: true,
  });
  assert.ok(offline.valid, JSON.stringify(!offline.valid && offline.error));
}

test("sqlite: a hostile delegator reusing another tree's ids revokes only its own link", async () => {
  const t = await startTestAuthority();
  try {
    await hostileIdReuse(t);
  } finally {
    await t.close();
  }
});

test('sqlite: grant with delegation, revocation by owner and by delegator, GET /revoke, bundles', async () => {
  const t = await startTestAuthority();
  try {
    await scenario(t);
  } finally {
    await t.close();
  }
});

if (await pgAvailable()) {
  test('postgres: the same story on a shared database', async () => {
    const schema = freshSchema();
    const t = await startTestAuthority({ databaseUrl: PG_URL, schema });
    try {
      await scenario(t);
    } finally {
      await t.close();
      await dropSchema(schema);
    }
  });
} else console.log(`SKIPPED postgres: ${PG_URL} is unreachable`);

test.run();
