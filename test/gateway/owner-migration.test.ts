/**
 * A database made before owners had several keys (gateway-001 only: gw_owners.id is both the
 * owner id and the key id) migrates: its owners keep working with their keys, keyed as before;
 * an owner revoked back then is disabled now, so its sessions still live are revoked and listed
 * in the Trust Bundle, whose sequence stays above the clock-based ones bundles used to carry.
 * SQLite and PostgreSQL.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { generateApiKey, migrate, type SqlDatabase } from '../../service-kit/index.js';
import { GATEWAY_MIGRATIONS } from '../../gateway/schema.js';
import { sqliteDb, postgresDb, startTestGateway, call, ADMIN_KEY, inOneHour, type TestDb } from './helpers.js';

async function legacyOwner(db: SqlDatabase, revokedAt: number | null) {
  const { keyId, apiKey, record } = generateApiKey(['sessions']);
  await db.run(
    `INSERT INTO gw_owners (id, label, key_hash, scopes, created_at, revoked_at) VALUES (?, 'legacy', ?, ?, ?, ?)`,
    [keyId, record.hash, JSON.stringify(record.scopes), Date.now() - 1000, revokedAt],
  );
  return { keyId, apiKey };
}

async function legacySession(db: SqlDatabase, ownerId: string) {
  const id = `sess_${randomBytes(8).toString('hex')}`;
  const grantId = `grant_${randomBytes(8).toString('hex')}`;
  const expiresAt = inOneHour();
  const config = {
    label: 'old',
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt,
    merchantAllowlist: [],
    merchantBlocklist: [],
    thresholds: [],
    trustLevel: 0,
  };
  await db.run(
    `INSERT INTO gw_sessions (id, owner_id, token_hash, label, currency, ceiling, state, expires_at, created_at,
      config, policy_hash, grant_id, grant_json, actor_key_pem)
     VALUES (?, ?, ?, 'old', 'USD', 1000, 'active', ?, ?, ?, 'h', ?, '{}', 'pem')`,
    [
      id,
      ownerId,
      randomBytes(16).toString('hex'),
      Date.parse(expiresAt),
      Date.now() - 500,
      JSON.stringify(config),
      grantId,
    ],
  );
  return { id, grantId };
}

async function migrates(testDb: TestDb) {
  const db = await testDb.open();
  await migrate(db, [GATEWAY_MIGRATIONS[0]!]);
  const kept = await legacyOwner(db, null);
  const gone = await legacyOwner(db, Date.now() - 100);
  const keptSession = await legacySession(db, kept.keyId);
  const goneSession = await legacySession(db, gone.keyId);
  await db.close();

  const gw = await startTestGateway(testDb, {}, 'unused');
  try {
    // The old key still works, as the same owner (its id is the old key id).
    const list = await call(gw.url, 'GET', '/sessions', { key: kept.apiKey });
    assert.is(list.status, 200, list.text);
    assert.equal(
      list.body.sessions.map((s: { sessionId: string }) => s.sessionId),
      [keptSession.id],
    );
    const created = await call(gw.url, 'POST', '/sessions', {
      key: kept.apiKey,
      body: { budget: { amount: '10', currency: 'USD' }, purposes: ['api:search'], expiresAt: inOneHour() },
    });
    assert.is(created.status, 201, created.text);
    const more = await call(gw.url, 'POST', `/admin/owners/${kept.keyId}/keys`, { key: ADMIN_KEY });
    assert.is(more.status, 201, more.text);
    assert.is(
      (await call(gw.url, 'GET', `/sessions/${keptSession.id}`, { key: more.body.apiKey })).status,
      200,
      'a new key of the migrated owner',
    );

    // The owner revoked before the migration: its key stays refused, its live session is revoked.
    assert.is((await call(gw.url, 'GET', '/sessions', { key: gone.apiKey })).status, 401);
    assert.is((await call(gw.url, 'GET', `/revoke?grantId=${goneSession.grantId}`)).body.revoked, true);
    assert.is((await call(gw.url, 'GET', `/revoke?grantId=${keptSession.grantId}`)).body.revoked, false);
    const bundle = (await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json')).body;
    assert.equal(bundle.revokedGrants, [goneSession.grantId]);
    // Bundles used to carry floor(ms / 1000): a verifier that stored one must not see a rollback.
    assert.ok(bundle.sequence > Math.floor(Date.now() / 1000) + 3600, `sequence ${bundle.sequence}`);
    assert.is(
      (await call(gw.url, 'DELETE', `/admin/owners/${kept.keyId}`, { key: ADMIN_KEY })).body.revokedSessions,
      2,
    );
  } finally {
    await gw.close();
    await testDb.drop();
  }
}

test('a pre-keys SQLite database migrates', async () => {
  await migrates(sqliteDb());
});

test('a pre-keys PostgreSQL database migrates', async () => {
  const db = await postgresDb('owner migration on PostgreSQL');
  if (db) await migrates(db);
});

test.run();
