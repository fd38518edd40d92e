/**
 * A NUL (U+0000) in a path segment, a query parameter or a JSON string answers a 4xx with a
 * PROTOCOL.md §9 code on every route the gateway registers, on SQLite and on PostgreSQL
 * (PostgreSQL refuses NUL in TEXT, 22021, which must never surface as a 500).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  ADMIN_KEY,
  call,
  createSession,
  inOneHour,
  postgresDb,
  sqliteDb,
  startTestGateway,
  type TestDb,
} from './helpers.js';
import { describeFailures, sweepNul } from '../service-kit/route-sweep.js';
import { GATEWAY_OPENAPI } from '../../gateway/openapi.js';

async function sweep(testDb: TestDb) {
  const gw = await startTestGateway(testDb);
  try {
    const s = await createSession(gw, { softLimit: { amount: '100' } });
    // A second owner, so DELETE /admin/owners/:id cannot lock the sweep's own owner key out.
    const spare = await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'spare' } });
    const charge = await call(gw.url, 'POST', '/charge', { body: { amount: '100', currency: 'USD' } });
    assert.is(charge.status, 201);
    const ids: Record<string, string> = {
      '/admin/owners': spare.body.ownerId,
      '/sessions': s.sessionId,
      '/charge': charge.body.chargeId,
    };
    const bodies: Record<string, unknown> = {
      'POST /admin/owners': { label: 'an owner' },
      'POST /admin/keys/rotate': { purpose: 'receipt' },
      'POST /sessions': {
        budget: { amount: '1000', currency: 'USD' },
        purposes: ['api:search'],
        expiresAt: inOneHour(),
        label: 'a label',
        merchantAllowlist: ['*.example.com'],
        webhookUrl: 'http://127.0.0.1:9/hook',
      },
      'PATCH /sessions/:id': { continuationToken: 'a-token-value', amount: '10' },
      'POST /charge': { amount: '100', currency: 'USD', description: 'a charge' },
    };
    const r = await sweepNul({
      base: gw.url,
      app: gw.gw.app,
      openapi: GATEWAY_OPENAPI,
      credentials: [ADMIN_KEY, gw.ownerKey, s.sessionToken],
      param: (path, name) => Object.entries(ids).find(([prefix]) => path.startsWith(prefix))?.[1] ?? `some-${name}`,
      query: { grantId: s.grantId, limit: '10', cursor: 'abc', status: 'active', x: 'y' },
      body: (method, path) => bodies[`${method} ${path}`],
    });
    assert.ok(
      r.routes.some((x) => x.method === 'PATCH' && x.path === '/sessions/:id'),
      'the routes come from the app',
    );
    assert.ok(r.sent > 300, `${r.sent} requests`);
    assert.is(
      r.failures.length,
      0,
      `${r.failures.length} answers were not a 4xx §9 envelope:\n${describeFailures(r.failures)}`,
    );
  } finally {
    await gw.close();
    await testDb.drop();
  }
}

test('SQLite: NUL anywhere in a request is a 4xx §9 envelope on every gateway route', async () => {
  await sweep(sqliteDb());
});

test('PostgreSQL: NUL anywhere in a request is a 4xx §9 envelope on every gateway route', async () => {
  const db = await postgresDb('the gateway NUL sweep on PostgreSQL');
  if (db) await sweep(db);
});

test.run();
