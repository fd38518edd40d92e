/**
 * No private key at rest in the clear: after a full run of both services (grants, bundles, grant
 * key rotations and a revocation at the authority; sessions, payments, receipts, a revoked
 * session and rotations of every gateway key), every table of both databases (SQLite and
 * PostgreSQL) and every file of the data directory is dumped, and every candidate private key in
 * it (PEM, JWK with d, DER, 32-byte seeds in base64url/base64/hex) is tried against every public
 * key published anywhere: none signs. A planted key proves the search finds one when it is there.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { generateKeyPair } from '../../src/index.js';
import { openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import { aesKeyWrapper, createSealer, parseKek } from '../../service-kit/secrets/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from '../authority/harness.js';
import {
  call,
  createSession,
  postgresDb,
  proxy,
  startMerchant,
  startTestGateway,
  ADMIN_KEY,
  type TestDb,
  type TestGateway,
} from '../gateway/helpers.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { createHarvest, harvestValue, usableKeys, type Harvest } from './key-harvest.js';

const AUTHORITY_KEK = randomBytes(32).toString('base64url');
const GATEWAY_KEK = randomBytes(32).toString('hex');
const gatewaySealer = () =>
  createSealer(aesKeyWrapper(parseKek(GATEWAY_KEK, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK');
const later = (ms: number) => new Date(Date.now() + ms).toISOString().replace(/\.\d+Z$/, 'Z');

/** Everything the authority does that creates or changes keys and signed artifacts. */
async function runAuthority(t: TestAuthority, h: Harvest): Promise<void> {
  const grants = [];
  for (let i = 0; i < 3; i++) {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
    assert.is(r.status, 201);
    grants.push(r.body);
    assert.is((await t.call('POST', '/admin/keys/rotate')).status, 201);
  }
  assert.is((await t.call('POST', `/grants/${grants[0].grantId}/revoke`, { reason: 'test' })).status, 200);
  const b = await t.call('POST', '/trust-bundles', { scope: {}, expiresAt: later(86_400_000) });
  assert.is(b.status, 201);
  harvestValue(h, b.body, 'authority bundle');
  harvestValue(h, grants, 'authority grants');
  harvestValue(h, (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body, 'authority JWKS');
  for (const k of await t.authority.store.listSigningKeys()) h.published.add(JSON.parse(k.publicJwk).x); // the root too
}

/** Sessions, payments, receipts, a revocation and a rotation of every key purpose at the gateway. */
async function runGateway(gw: TestGateway, h: Harvest): Promise<void> {
  const merchant = await startMerchant({ amount: '100' });
  try {
    for (let i = 0; i < 3; i++) {
      const s = await createSession(gw, { budget: { amount: '1000', currency: 'USD' } });
      for (let j = 0; j < 2; j++)
        assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/p${j}`, { purpose: 'api:search' })).status, 200);
      harvestValue(
        h,
        (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body,
        'gateway receipts',
      );
      if (i === 0)
        assert.is((await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).status, 200);
      for (const purpose of ['grant', 'receipt', 'bundle']) {
        assert.is(
          (await call(gw.url, 'POST', '/admin/keys/rotate', { key: ADMIN_KEY, body: { purpose } })).status,
          200,
        );
      }
    }
    harvestValue(h, (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body, 'gateway JWKS');
    harvestValue(h, (await call(gw.url, 'GET', '/.well-known/ctl-bundle-root.json')).body, 'gateway bundle root');
    harvestValue(h, (await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json')).body, 'gateway bundle');
  } finally {
    await merchant.close();
  }
}

async function dumpSqlite(h: Harvest, db: SqlDatabase, name: string): Promise<number> {
  const tables = await db.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`);
  for (const t of tables) harvestValue(h, await db.all(`SELECT * FROM "${t.name}"`), `${name}.${t.name}`);
  return tables.length;
}

async function dumpPostgres(h: Harvest, schema: string): Promise<number> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const tables = (await c.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, [schema]))
      .rows;
    for (const t of tables)
      harvestValue(h, (await c.query(`SELECT * FROM "${schema}"."${t.table_name}"`)).rows, `${schema}.${t.table_name}`);
    return tables.length;
  } finally {
    await c.end();
  }
}

function dumpDir(h: Harvest, dir: string): number {
  let files = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files += dumpDir(h, path);
    else {
      harvestValue(h, readFileSync(path), path);
      files++;
    }
  }
  return files;
}

function assertNoUsableKey(h: Harvest): void {
  assert.ok(h.published.size >= 10, `public keys seen: ${h.published.size}`);
  assert.ok(h.candidates.length > 0, 'the dump holds strings that parse as keys (the search ran)');
  assert.equal(usableKeys(h), []);
  // The search finds a key when one is there: plant a published key's PEM and its seed.
  const planted = createHarvest();
  planted.published = new Set(h.published);
  planted.published.add(plantedPair.x);
  harvestValue(planted, `x ${plantedPair.pem} y`, 'planted PEM');
  harvestValue(planted, plantedPair.seedHex, 'planted seed');
  const found = usableKeys(planted).join('\n');
  assert.match(found, 'planted PEM (PEM)');
  assert.match(found, 'planted seed (hex seed)');
}

/** A published key planted in a dump, as a PEM and as a hex seed. */
let plantedPair: { pem: string; x: string; seedHex: string };
test.before(async () => {
  const p = await generateKeyPair({ alg: 'EdDSA' });
  const der = Buffer.from(p.privateKeyPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
  plantedPair = { pem: p.privateKeyPem, x: p.publicJwk.x, seedHex: der.subarray(der.length - 32).toString('hex') };
});

test('SQLite: both databases and the data directory hold no usable private key', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-at-rest-'));
  const h = createHarvest();
  try {
    const a = await startTestAuthority({ dir, keepDir: true, env: { CTL_AUTHORITY_KEK: AUTHORITY_KEK } });
    try {
      await runAuthority(a, h);
    } finally {
      await a.close();
    }
    const gwDb: TestDb = {
      url: `sqlite:${join(dir, 'gateway.db')}`,
      open: () => openDatabase(`sqlite:${join(dir, 'gateway.db')}`),
      drop: async () => {},
    };
    const gw = await startTestGateway(gwDb, { sealer: gatewaySealer() });
    try {
      await runGateway(gw, h);
      assert.ok((await dumpSqlite(h, gw.db, 'gateway')) >= 8);
    } finally {
      await gw.close();
    }
    const adb = await openDatabase(`sqlite:${join(dir, 'authority.db')}`);
    try {
      assert.ok((await dumpSqlite(h, adb, 'authority')) >= 5);
    } finally {
      await adb.close();
    }
    assert.ok(dumpDir(h, dir) >= 2);
    assertNoUsableKey(h);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PostgreSQL: both schemas hold no usable private key', async () => {
  if (!(await pgAvailable())) {
    console.log('SKIPPED: PostgreSQL unreachable');
    return;
  }
  const h = createHarvest();
  const schema = freshSchema();
  const gwDb = (await postgresDb('no-key-at-rest'))!;
  try {
    const a = await startTestAuthority({ databaseUrl: PG_URL, schema, env: { CTL_AUTHORITY_KEK: AUTHORITY_KEK } });
    try {
      await runAuthority(a, h);
    } finally {
      await a.close();
    }
    const gw = await startTestGateway(gwDb, { sealer: gatewaySealer() });
    try {
      await runGateway(gw, h);
    } finally {
      await gw.close();
    }
    assert.ok((await dumpPostgres(h, schema)) >= 5);
    assert.ok((await dumpPostgres(h, gwDb.schema!)) >= 8);
    assertNoUsableKey(h);
  } finally {
    await dropSchema(schema);
    await gwDb.drop();
  }
});

test.run();
