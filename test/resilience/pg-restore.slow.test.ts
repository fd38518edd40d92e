/**
 * The restore drill on PostgreSQL (docs/operations.md "Backups"), beside the SQLite one in
 * backup-restore.test.ts: `pg_dump` (service-kit/backup.ts) taken while the gateway serves, a
 * payment after it, `pg_restore` into an empty database, and a fresh instance on it with the same
 * KEK: the same keys, the same session, exactly the receipts of before the backup, a paid request
 * retried with its Idempotency-Key answered from the stored answer (the merchant not paid again),
 * and the session paying on. On a cluster of its own (test/helpers/pg-standby.ts), never the
 * shared server on 5432.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { aesKeyWrapper, createSealer } from '../../service-kit/secrets/index.js';
import { backupDatabase } from '../../service-kit/backup.js';
import { silentLogger } from '../../service-kit/index.js';
import { startGateway, type RunningGateway } from '../../gateway/server.js';
import { ADMIN_KEY, call, createSession, proxy, startMerchant } from '../gateway/helpers.js';
import { replicatedPairMissing, startReplicatedPair } from '../helpers/pg-standby.js';

const kek = randomBytes(32);
const urlOf = (g: RunningGateway) => g.server.url.replace(/\/$/, '');
const start = (databaseUrl: string, highWaterFile: string) =>
  startGateway({
    port: 0,
    host: '127.0.0.1',
    databaseUrl,
    adminKey: ADMIN_KEY,
    sealer: createSealer(aesKeyWrapper(kek, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK'),
    logger: silentLogger(),
    targets: { allowPrivate: true },
    rollback: { highWaterFile, acceptVariable: 'CTL_GATEWAY_ACCEPT_ROLLBACK' },
  });

test('pg_dump while paying, pg_restore into an empty database: keys, sessions, receipts, stored answers', async () => {
  const missing = replicatedPairMissing();
  if (missing) {
    console.log(`SKIPPED PostgreSQL restore drill: ${missing}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'ctl-pg-restore-'));
  const pair = await startReplicatedPair();
  const merchant = await startMerchant();
  try {
    let g = await start(pair.primaryUrl, join(dir, 'live.json'));
    const gw = { url: urlOf(g), ownerKey: '' };
    gw.ownerKey = (
      await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'drill' } })
    ).body.apiKey;
    const s = await createSession(gw as never);
    const first = await proxy(gw, s.sessionToken, `${merchant.url}/a`, {
      purpose: 'api:search',
      headers: { 'idempotency-key': 'drill-a' },
    });
    assert.is(first.status, 200, first.text);
    const before = {
      session: (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body,
      receipts: (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body.receipts,
      jwks: (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body,
    };
    const backup = join(dir, 'gateway.dump');
    assert.equal(await backupDatabase(pair.primaryUrl, backup), { out: backup, format: 'pg_dump' });
    // A payment after the backup: the restored database must not know it.
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' })).status, 200);
    await g.close();
    assert.is(merchant.paid.length, 2);

    // Restore as documented: an empty database, pg_restore --no-owner.
    const admin = new pg.Client({ connectionString: pair.primaryUrl });
    await admin.connect();
    await admin.query('CREATE DATABASE restored');
    await admin.end();
    const restoredUrl = pair.primaryUrl.replace(/\/postgres$/, '/restored');
    const r = spawnSync('pg_restore', ['--no-owner', `--dbname=${restoredUrl}`, backup], { encoding: 'utf8' });
    assert.is(r.status, 0, r.stderr);

    g = await start(restoredUrl, join(dir, 'restored.json'));
    const rg = { url: urlOf(g), ownerKey: gw.ownerKey };
    try {
      assert.equal((await call(rg.url, 'GET', '/.well-known/ctl-keys.json')).body, before.jwks, 'the same keys');
      assert.equal((await call(rg.url, 'GET', `/sessions/${s.sessionId}`, { key: rg.ownerKey })).body, before.session);
      const receipts = (await call(rg.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: rg.ownerKey })).body
        .receipts;
      assert.equal(receipts, before.receipts, 'the receipts of before the backup, no more');
      const again = await proxy(rg, s.sessionToken, `${merchant.url}/a`, {
        purpose: 'api:search',
        headers: { 'idempotency-key': 'drill-a' },
      });
      assert.is(again.status, 200);
      assert.is(again.headers.get('idempotent-replayed'), 'true');
      assert.is(merchant.paid.length, 2, 'the merchant was not paid again');
      assert.is((await proxy(rg, s.sessionToken, `${merchant.url}/c`, { purpose: 'api:search' })).status, 200);
      assert.is(merchant.paid.length, 3);
    } finally {
      await g.close();
    }
  } finally {
    await merchant.close();
    pair.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
