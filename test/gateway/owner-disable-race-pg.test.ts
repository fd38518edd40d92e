/**
 * Disabling an owner while one of its sessions is being created, on PostgreSQL (where statements
 * of two transactions interleave): the new session ends revoked, never live. The creation is held
 * mid-transaction, after it has checked the owner, by another connection's uncommitted row with
 * the same token hash (the unique index makes the INSERT wait), so the interleaving is certain.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { generateApiKey, migrate } from '../../service-kit/index.js';
import { GATEWAY_MIGRATIONS } from '../../gateway/schema.js';
import { insertOwner, disableOwner } from '../../gateway/owners/store.js';
import { insertOwnedSession, sessionById, type SessionRecord } from '../../gateway/sessions/store.js';
import { postgresDb, PG_URL } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a session created while its owner is being disabled is revoked with the others', async () => {
  const testDb = await postgresDb('owner disable race on PostgreSQL');
  if (!testDb) return;
  const db = await testDb.open();
  const blocker = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${testDb.schema}` });
  try {
    await migrate(db, GATEWAY_MIGRATIONS);
    const { keyId, record } = generateApiKey(['sessions']);
    await insertOwner(db, { ownerId: 'own_race', label: 'r', key: { keyId, record }, now: Date.now() });
    const tokenHash = randomBytes(32).toString('hex');
    const row = (id: string, grantId: string) => ({
      id,
      ownerId: 'own_race',
      tokenHash,
      label: 'x',
      currency: 'USD',
      ceiling: 100n,
      expiresAt: Date.now() + 3600_000,
      createdAt: Date.now(),
      config: {} as SessionRecord['config'], // a placeholder: this test reads no session's controls
      policyHash: 'h',
      grantId,
      grant: {} as SessionRecord['grant'],
      actorKeyPem: 'pem',
      softLimit: null,
      maxPerHour: null,
      maxPerMerchantDay: null,
      webhookUrl: null,
      webhookSecret: null,
      thresholds: [],
    });
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query(
      `INSERT INTO gw_sessions (id, owner_id, token_hash, label, currency, ceiling, state, expires_at, created_at,
        config, policy_hash, grant_id, grant_json, actor_key_pem)
       VALUES ('sess_blocker', 'nobody', $1, 'x', 'USD', 1, 'active', $2, $3, '{}', 'h', 'grant_blocker', '{}', 'pem')`,
      [tokenHash, Date.now() + 3600_000, Date.now()],
    );
    const creating = insertOwnedSession(db, row('sess_racing', 'grant_racing'));
    await sleep(300); // it has checked the owner and waits on the unique index
    const disabling = disableOwner(db, 'own_race', Date.now());
    await sleep(300);
    await blocker.query('ROLLBACK'); // the creation goes on and commits
    const created = await creating;
    const revoked = await disabling;
    const s = await sessionById(db, 'sess_racing');
    if (created) {
      assert.is(s?.state, 'revoked', 'created before the disabling took hold: revoked by it');
      assert.equal(
        revoked?.map((x) => x.id),
        ['sess_racing'],
      );
    } else assert.is(s, undefined, 'or refused');
  } finally {
    await blocker.end().catch(() => {});
    await db.close();
    await testDb.drop();
  }
});

test.run();
