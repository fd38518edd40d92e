/**
 * The authority's HTTP surface (spec §4.3) against the real app on a
 * temporary SQLite file.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair } from '../../src/index.js';
import { ADMIN_KEY, grantRequest, startTestAuthority, type TestAuthority } from './harness.js';

let t: TestAuthority;
let actorJwk: object;

test.before(async () => {
  t = await startTestAuthority();
  actorJwk = (await generateKeyPair({ alg: 'EdDSA' })).publicJwk;
});
test.after(async () => {
  await t.close();
});

const isError = (r: { body: any }, code: string) => {
  assert.equal(Object.keys(r.body), ['error'], JSON.stringify(r.body));
  assert.is(r.body.error.code, code, JSON.stringify(r.body));
  assert.type(r.body.error.message, 'string');
  assert.not.match(JSON.stringify(r.body), /\bat .*\.(js|ts):\d+/); // no stack frames
};

test('health, readiness and metrics answer without a key', async () => {
  assert.equal((await t.call('GET', '/healthz', undefined, null)).body, { ok: true });
  assert.equal((await t.call('GET', '/readyz', undefined, null)).body, {
    status: 'ok',
    checks: { database: 'ok', keys: 'ok' },
  });
  await t.call('GET', '/revoke?grantId=nope', undefined, null);
  const m = await t.call('GET', '/metrics', undefined, null);
  assert.is(m.status, 200);
  assert.match(m.body, /ctl_authority_http_requests_total\{method="GET",route="\/revoke",status="404"\} 1/);
  assert.match(
    m.body,
    /ctl_authority_http_request_duration_seconds_bucket\{le="0.001",method="GET",route="\/healthz"\}/,
  );
});

test(
  'bad requests: malformed JSON 400, duplicate keys 400, oversize 413, not JSON 415, ' + 'unknown route 404',
  async () => {
    isError(await t.call('POST', '/policies', '{"policy":'), 'malformed');
    const dup = await t.call('POST', '/policies', '{"policy":{"a":1,"a":2}}');
    assert.is(dup.status, 400);
    isError(dup, 'malformed');
    const big = await t.call('POST', '/policies', JSON.stringify({ policy: { pad: 'x'.repeat(70_000) } }));
    assert.is(big.status, 413);
    isError(big, 'payload_too_large');
    const form = await t.call('POST', '/policies', 'a=1', ADMIN_KEY, {
      'content-type': 'application/x-www-form-urlencoded',
    });
    assert.is(form.status, 415);
    isError(form, 'unsupported_media_type');
    const nf = await t.call('GET', '/nowhere');
    assert.is(nf.status, 404);
    isError(nf, 'not_found');
    const wrongMethod = await t.call('PUT', '/policies', {});
    assert.is(wrongMethod.status, 405);
    isError(wrongMethod, 'method_not_allowed');
  },
);

test('API keys: missing or wrong key 401, wrong scope 403, revoked key 401; keys stored only as hashes', async () => {
  const none = await t.call('POST', '/policies', { policy: {} }, null);
  assert.is(none.status, 401);
  isError(none, 'unauthorized');
  assert.is(none.headers.get('www-authenticate'), 'Bearer');
  isError(await t.call('POST', '/policies', { policy: {} }, 'ctlk_AAAAAAAAAAAAAAAA_' + 'A'.repeat(43)), 'unauthorized');
  isError(await t.call('POST', '/policies', { policy: {} }, 'garbage'), 'unauthorized');

  const made = await t.call('POST', '/admin/keys', { scopes: ['grants:revoke'], label: 'revoker' });
  assert.is(made.status, 201);
  assert.match(made.body.apiKey, /^ctlk_/);
  const forbidden = await t.call('POST', '/policies', { policy: {} }, made.body.apiKey);
  assert.is(forbidden.status, 403);
  isError(forbidden, 'forbidden');
  // Its own scope works (404: the grant is unknown, past auth).
  assert.is((await t.call('POST', '/revoke', { grantId: 'unknown-grant' }, made.body.apiKey)).status, 404);

  const listed = await t.call('GET', '/admin/keys');
  const mine = listed.body.keys.find((k: any) => k.keyId === made.body.keyId);
  assert.equal(mine.scopes, ['grants:revoke']);
  // The secret is everything after `ctlk_<keyId>_` (base64url, which may itself contain '_').
  const secret = made.body.apiKey.slice(`ctlk_${made.body.keyId}_`.length);
  assert.ok(secret.length >= 40);
  assert.not.ok(JSON.stringify(listed.body).includes(secret), 'the secret never comes back');
  const stored = await t.authority.store.getApiKey(made.body.keyId);
  assert.is(stored!.hash.length, 64);
  assert.not.ok(JSON.stringify(stored).includes(made.body.apiKey), 'only the hash is stored');

  assert.is((await t.call('DELETE', `/admin/keys/${made.body.keyId}`)).status, 200);
  assert.is((await t.call('DELETE', `/admin/keys/${made.body.keyId}`)).status, 200, 'idempotent');
  isError(await t.call('POST', '/revoke', { grantId: 'unknown-grant' }, made.body.apiKey), 'unauthorized');
  isError(await t.call('DELETE', '/admin/keys/no-such-key'), 'not_found');
  // A non-admin key cannot make keys.
  const writer = await t.call('POST', '/admin/keys', { scopes: ['policies:write'], label: 'w' });
  isError(await t.call('POST', '/admin/keys', { scopes: ['admin'], label: 'x' }, writer.body.apiKey), 'forbidden');
});

test('admin key requests are validated', async () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ scopes: [], label: 'x' }, /^scopes:/],
    [{ scopes: ['root'], label: 'x' }, /^scopes: unknown scope/],
    [{ scopes: ['admin', 'admin'], label: 'x' }, /^scopes: duplicates/],
    [{ scopes: ['admin'] }, /^label: required/],
    [{ scopes: ['admin'], label: 'x', extra: 1 }, /unknown member "extra"/],
  ];
  for (const [body, message] of cases) {
    const r = await t.call('POST', '/admin/keys', body);
    assert.is(r.status, 400, JSON.stringify(body));
    assert.match(r.body.error.message, message);
  }
});

test('policies: hash of the document alone (JCS), the same document twice is one policy', async () => {
  const a = await t.call('POST', '/policies', { policy: { b: 2, a: 'x' } });
  assert.is(a.status, 201);
  assert.match(a.body.policyHash, /^[0-9a-f]{64}$/);
  const b = await t.call('POST', '/policies', '{ "policy" : {"a":"x","b":2} }');
  assert.is(b.status, 200);
  assert.equal(b.body, a.body);
  const { policyHash } = await import('../../src/index.js');
  assert.is(a.body.policyHash, policyHash({ a: 'x', b: 2 }));
  const got = await t.call('GET', `/policies/${a.body.policyHash}`);
  assert.equal(got.body.policy, { a: 'x', b: 2 });
  isError(await t.call('POST', '/policies', { policy: [1] }), 'malformed');
  isError(await t.call('POST', '/policies', {}), 'malformed');
});

test(
  'grants: signed per PROTOCOL.md §4, carrying the revocation URL; unknown policy 404; ' + 'bad fields named',
  async () => {
    const req = await grantRequest(t, actorJwk, {
      allowedPurposes: ['fuel:*'],
      destinationAllowlist: ['m-1'],
      velocity: { maxPaymentsPerHour: 3 },
    });
    const r = await t.call('POST', '/grants', req);
    assert.is(r.status, 201, JSON.stringify(r.body));
    const g = r.body;
    assert.is(g.version, 1);
    assert.is(g.issuer, 'authority.test');
    assert.is(g.policyHash, req.policyHash);
    assert.is(g.revocationUrl, `${t.url}/revoke?grantId=${encodeURIComponent(g.grantId)}`);
    assert.equal(g.actorKey, actorJwk);
    assert.equal(g.allowedPurposes, ['fuel:*']);
    const jwks = await t.call('GET', '/.well-known/ctl-keys.json', undefined, null);
    assert.ok(
      jwks.body.keys.some((k: any) => k.kid === g.keyId && k.status === 'active' && k.purposes.includes('grant')),
    );
    const custody = await t.call('GET', `/grants/${g.grantId}`);
    assert.equal(custody.body, { grant: g, revoked: false });

    isError(await t.call('POST', '/grants', { ...req, policyHash: 'f'.repeat(64) }), 'not_found');
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ maxAmountMinor: 5000 }, /^maxAmountMinor/],
      [{ maxAmountMinor: '01' }, /^maxAmountMinor/],
      [{ currency: 'usd' }, /^currency/],
      [{ expiresAt: '2020-01-01T00:00:00Z' }, /^expiresAt: must be in the future/],
      [{ expiresAt: '2030-01-01T00:00:00+00:00' }, /^expiresAt/],
      [{ allowedRails: 'x402' }, /^allowedRails/],
      [{ allowedAssets: [{ standard: 'iso4217' }] }, /^allowedAssets/],
      [{ actorKey: { kty: 'OKP', crv: 'Ed25519', x: 'short' } }, /^actorKey/],
      [{ destinationAllowlist: [] }, /^destinationAllowlist/],
      [{ allowedPurposes: ['*'] }, /^allowedPurposes/],
      [{ policyHash: 'ABC' }, /^policyHash/],
      [{ velocity: null }, /^velocity: must not be null/],
      [{ surprise: true }, /unknown member "surprise"/],
    ];
    for (const [over, message] of bad) {
      const res = await t.call('POST', '/grants', { ...req, ...over });
      assert.is(res.status, 400, JSON.stringify(over));
      isError(res, 'malformed');
      assert.match(res.body.error.message, message, JSON.stringify(over));
    }
    const { currency: _c, ...missing } = req;
    assert.match((await t.call('POST', '/grants', missing)).body.error.message, /^currency: required/);
  },
);

test(
  'revocation: GET is public and cacheable briefly; POST /revoke and /grants/{id}/revoke ' +
    'are immediate and idempotent',
  async () => {
    const g = (await t.call('POST', '/grants', await grantRequest(t, actorJwk))).body;
    const before = await t.call('GET', `/revoke?grantId=${g.grantId}`, undefined, null);
    assert.equal(before.body, { grantId: g.grantId, revoked: false });
    assert.match(
      before.headers.get('cache-control')!,
      /^private, max-age=5$/,
      'a "not revoked" answer is no shared cache\'s to keep',
    );
    const r1 = await t.call('POST', '/revoke', { grantId: g.grantId, reason: 'vehicle sold' });
    assert.is(r1.status, 200);
    assert.is(r1.body.revoked, true);
    const after = await t.call('GET', `/revoke?grantId=${g.grantId}`, undefined, null);
    assert.equal(after.body, { grantId: g.grantId, revoked: true, revokedAt: r1.body.revokedAt });
    const r2 = await t.call('POST', `/grants/${g.grantId}/revoke`);
    assert.equal(r2.body, r1.body, 'the first revokedAt stays');
    isError(await t.call('GET', '/revoke?grantId=unknown', undefined, null), 'not_found');
    isError(await t.call('GET', '/revoke', undefined, null), 'malformed');
    isError(await t.call('GET', '/revoke?grantId=' + encodeURIComponent('a b'), undefined, null), 'malformed');
    isError(await t.call('POST', '/grants/unknown/revoke', {}), 'not_found');
    isError(await t.call('POST', '/revoke', { grantId: g.grantId, reason: 7 }), 'malformed');
  },
);

test('custody: DELETE /grants/{id} revokes and soft-deletes; the record and the revocation answer remain', async () => {
  const g = (await t.call('POST', '/grants', await grantRequest(t, actorJwk))).body;
  const del = await t.call('DELETE', `/grants/${g.grantId}`);
  assert.is(del.status, 200);
  assert.is(del.body.revoked, true);
  assert.type(del.body.deletedAt, 'string');
  isError(await t.call('GET', `/grants/${g.grantId}`), 'not_found');
  assert.equal((await t.call('GET', `/grants/${g.grantId}?includeDeleted=true`)).body.grant, g);
  assert.is((await t.call('GET', `/revoke?grantId=${g.grantId}`, undefined, null)).body.revoked, true);
});

test(
  'key rotation: new active key; the retired one stays published while its grants live ' + 'and never signs again',
  async () => {
    const old = (await t.call('POST', '/grants', await grantRequest(t, actorJwk))).body;
    const rot = await t.call('POST', '/admin/keys/rotate');
    assert.is(rot.status, 201);
    assert.ok(rot.body.retired.includes(old.keyId));
    assert.is.not(rot.body.kid, old.keyId);
    const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body.keys;
    assert.is(jwks.find((k: any) => k.kid === old.keyId)?.status, 'retired');
    assert.is(jwks.find((k: any) => k.kid === rot.body.kid)?.status, 'active');
    const fresh = (await t.call('POST', '/grants', await grantRequest(t, actorJwk))).body;
    assert.is(fresh.keyId, rot.body.kid);
    // Once everything the retired key signed has expired, it is no longer published.
    const later = Date.now() + 2 * 3600_000;
    const published = await t.authority.keys.publishedGrantKeys(later);
    assert.not.ok(published.some((k) => k.kid === old.keyId));
    assert.ok(published.some((k) => k.kid === rot.body.kid));
    isError(
      await t.call(
        'POST',
        '/admin/keys/rotate',
        undefined,
        (await t.call('POST', '/admin/keys', { scopes: ['grants:write'], label: 'g' })).body.apiKey,
      ),
      'forbidden',
    );
  },
);

test(
  'trust bundles: root-signed, issuer keys + revoked grants, sequence grows per scope, ' + 'newest per scope served',
  async () => {
    const { verifyTrustBundle } = await import('../../src/index.js');
    const root = await t.authority.keys.rootSigner();
    const revoked = (await t.call('POST', '/grants', await grantRequest(t, actorJwk))).body;
    await t.call('POST', '/revoke', { grantId: revoked.grantId });
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const b1 = await t.call('POST', '/trust-bundles', { scope: { category: 'fuel' }, expiresAt });
    assert.is(b1.status, 201, JSON.stringify(b1.body));
    const b2 = (await t.call('POST', '/trust-bundles', { scope: { category: 'fuel' }, expiresAt })).body;
    const eu = (await t.call('POST', '/trust-bundles', { scope: { region: 'eu' }, expiresAt })).body;
    assert.is(b2.sequence, b1.body.sequence + 1);
    assert.is(eu.sequence, 1);
    assert.ok(b2.revokedGrants.includes(revoked.grantId));
    assert.equal(b2.issuers[0].issuer, 'authority.test');
    const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body.keys;
    assert.equal(b2.issuers[0].keys, jwks);
    const v = await verifyTrustBundle(b2, root.publicKeyPem, { minSequence: b1.body.sequence });
    assert.is(v.valid, true);
    const other = await generateKeyPair({ alg: 'EdDSA' });
    assert.is((await verifyTrustBundle(b2, other.publicKeyPem)).valid, false);

    const fuel = (await t.call('GET', '/trust-bundles?category=fuel', undefined, null)).body.bundles;
    assert.equal(
      fuel.map((b: any) => b.bundleId).sort(),
      [b2.bundleId, eu.bundleId].sort(),
      'newest fuel + region-only (category unset matches)',
    );
    const parking = (await t.call('GET', '/trust-bundles?category=parking&region=eu', undefined, null)).body.bundles;
    assert.equal(
      parking.map((b: any) => b.bundleId),
      [eu.bundleId],
    );
    isError(await t.call('POST', '/trust-bundles', { scope: { planet: 'mars' }, expiresAt }), 'malformed');
    isError(await t.call('POST', '/trust-bundles', { scope: {}, expiresAt: '2001-01-01T00:00:00Z' }), 'malformed');
    isError(
      await t.call('POST', '/trust-bundles', {
        scope: {},
        expiresAt: new Date(Date.now() + 90 * 86_400_000).toISOString(),
      }),
      'malformed',
    );
    isError(await t.call('POST', '/trust-bundles', { scope: { region: 'e u' }, expiresAt }), 'malformed');
    isError(await t.call('POST', '/trust-bundles', { scope: {}, expiresAt }, null), 'unauthorized');
  },
);

test('audit: every state change appended, hash chain verifies, GET /audit is admin-only', async () => {
  const entries: any[] = [];
  let after = 0;
  for (;;) {
    const page = await t.call('GET', `/audit?afterSeq=${after}&limit=50`);
    entries.push(...page.body.entries);
    if (page.body.entries.length < 50) break;
    after = page.body.next;
  }
  const actions = new Set(entries.map((e) => e.action));
  for (const a of [
    'policy.store',
    'grant.issue',
    'grant.revoke',
    'grant.delete',
    'apikey.create',
    'apikey.revoke',
    'key.rotate',
    'bundle.issue',
  ]) {
    assert.ok(actions.has(a), `audit has ${a}`);
  }
  assert.ok(entries.every((e) => e.actor === 'bootstrap' || /^[A-Za-z0-9-]+$/.test(e.actor)));
  const v = await t.call('GET', '/audit/verify');
  assert.equal(v.body.ok, true);
  assert.is(v.body.count, entries.length);
  const writer = (await t.call('POST', '/admin/keys', { scopes: ['bundles:write'], label: 'b' })).body.apiKey;
  isError(await t.call('GET', '/audit', undefined, writer), 'forbidden');
  isError(await t.call('GET', '/audit?limit=x'), 'malformed');
});

test('audit: GET /admin/audit is the path of both services; /audit still answers, deprecated', async () => {
  const now = await t.call('GET', '/admin/audit?limit=1000');
  const old = await t.call('GET', '/audit?limit=1000');
  assert.equal(old.body, now.body);
  assert.is(now.headers.get('deprecation'), null);
  assert.is(old.headers.get('deprecation'), 'true');
  assert.is(old.headers.get('link'), '</admin/audit>; rel="successor-version"');
  const verify = await t.call('GET', '/audit/verify');
  assert.equal(verify.body, (await t.call('GET', '/admin/audit/verify')).body);
  assert.is(verify.headers.get('link'), '</admin/audit/verify>; rel="successor-version"');
  isError(await t.call('GET', '/admin/audit', undefined, null), 'unauthorized');
});

test.run();
