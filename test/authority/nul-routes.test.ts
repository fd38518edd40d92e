/**
 * A NUL (U+0000) in a path segment, a query parameter or a JSON string answers a 4xx with a
 * PROTOCOL.md §9 code on every route the authority registers, on SQLite and on PostgreSQL
 * (PostgreSQL refuses NUL in TEXT, 22021, which must never surface as a 500).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { didKeyFromJwk, generateKeyPair } from '../../src/index.js';
import { ADMIN_KEY, grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { describeFailures, sweepNul } from '../service-kit/route-sweep.js';
import { AUTHORITY_OPENAPI } from '../../authority/openapi.js';

const inOneDay = () => new Date(Date.now() + 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');

async function sweep(t: TestAuthority) {
  const actorJwk = (await generateKeyPair({ alg: 'EdDSA' })).publicJwk;
  const request = await grantRequest(t, actorJwk);
  const grant = await t.call('POST', '/grants', request);
  assert.is(grant.status, 201);
  // A key of its own for DELETE /admin/keys/:keyId, so the sweep never revokes what it uses.
  const spare = await t.call('POST', '/admin/keys', { scopes: ['grants:write'], label: 'spare' });
  // A person enrolled for the Human-Agent routes (PROTOCOL.md §10), and one the sweep may remove.
  const did = didKeyFromJwk((await generateKeyPair()).publicJwk);
  const removable = didKeyFromJwk((await generateKeyPair()).publicJwk);
  for (const d of [did, removable])
    assert.is((await t.call('POST', '/humans', { did: d, label: 'person' })).status, 201);
  const params: Record<string, string> = {
    grantId: grant.body.grantId,
    keyId: spare.body.keyId,
    policyHash: request.policyHash,
    did: removable,
  };
  const bodies: Record<string, unknown> = {
    'POST /policies': { policy: { fleet: 'sweep', limits: ['a', 'b'] } },
    'POST /grants': request,
    'POST /revoke': { grantId: grant.body.grantId, reason: 'a reason' },
    'POST /grants/:grantId/revoke': { reason: 'a reason' },
    'POST /trust-bundles': { scope: { category: 'food', merchant: 'm1', region: 'eu' }, expiresAt: inOneDay() },
    'POST /admin/keys': { scopes: ['grants:write'], label: 'a label' },
    'POST /humans': { did: didKeyFromJwk(actorJwk as any), label: 'a label', scope: { category: 'travel' } },
    'POST /grants/human/prepare': {
      issuer: did,
      actorKey: actorJwk,
      maxAmountMinor: '100',
      currency: 'EUR',
      allowedPurposes: ['travel:booking'],
      expiresAt: inOneDay(),
    },
  };
  const r = await sweepNul({
    base: t.url,
    app: t.authority.app,
    openapi: AUTHORITY_OPENAPI,
    credentials: [ADMIN_KEY],
    param: (_path, name) => params[name] ?? `some-${name}`,
    query: {
      grantId: grant.body.grantId,
      includeDeleted: 'true',
      afterSeq: '0',
      limit: '10',
      status: 'pending',
      category: 'food',
      merchant: 'm1',
      region: 'eu',
    },
    body: (method, path) => bodies[`${method} ${path}`],
  });
  assert.ok(
    r.routes.some((x) => x.method === 'DELETE' && x.path === '/admin/keys/:keyId'),
    'the routes come from the app',
  );
  assert.ok(r.sent > 150, `${r.sent} requests`);
  assert.is(
    r.failures.length,
    0,
    `${r.failures.length} answers were not a 4xx §9 envelope:\n${describeFailures(r.failures)}`,
  );
}

test('SQLite: NUL anywhere in a request is a 4xx §9 envelope on every authority route', async () => {
  const t = await startTestAuthority();
  try {
    await sweep(t);
  } finally {
    await t.close();
  }
});

test('PostgreSQL: NUL anywhere in a request is a 4xx §9 envelope on every authority route', async () => {
  if (!(await pgAvailable()))
    return console.log(`SKIPPED the authority NUL sweep on PostgreSQL: ${PG_URL} is unreachable`);
  const schema = freshSchema();
  const t = await startTestAuthority({ databaseUrl: PG_URL, schema });
  try {
    await sweep(t);
  } finally {
    await t.close();
    await dropSchema(schema);
  }
});

test.run();
