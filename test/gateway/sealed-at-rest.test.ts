/**
 * The gateway's secrets at rest: a database from before sealing (gw_keys, gw_secrets and a
 * session's actor key in the clear) is sealed at start, and the session it holds keeps paying
 * with the same key; new sessions store no key at all (derived); another KEK is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPrivateKey, randomBytes } from 'node:crypto';
import { canonicalize, verifyReceipt, verifyWithJwk } from '../../src/index.js';
import { aesKeyWrapper, createSealer, isSealed, type SecretSealer } from '../../service-kit/secrets/index.js';
import { DERIVED_MARKER, deriveSessionSeed } from '../../gateway/sessions/actor-keys.js';
import {
  call,
  createSession,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type TestDb,
  type TestGateway,
} from './helpers.js';

const sealerOf = (kek: Buffer): SecretSealer => createSealer(aesKeyWrapper(kek, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK');
const seedPem = (seed: Uint8Array) =>
  createPrivateKey({
    key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]),
    format: 'der',
    type: 'pkcs8',
  })
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();

test('clear rows are sealed at start; the old session pays on with its key; another KEK is refused', async () => {
  const db: TestDb = sqliteDb();
  const kek = randomBytes(32);
  const merchant = await startMerchant({ amount: '100' });
  let gw: TestGateway | undefined;
  try {
    gw = await startTestGateway(db, { sealer: sealerOf(kek) });
    const ownerKey = gw.ownerKey;
    const s = await createSession(gw);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
    const row = await gw.db.get<{ actor_key_pem: string }>(`SELECT actor_key_pem FROM gw_sessions WHERE id = ?`, [
      s.sessionId,
    ]);
    assert.is(row!.actor_key_pem, DERIVED_MARKER, 'a new session stores no key');

    // Make it a database from before sealing: every secret in the clear, the session's key as a PEM.
    const sealer = sealerOf(kek);
    for (const k of await gw.db.all<{ kid: string; private_pem: string }>(`SELECT kid, private_pem FROM gw_keys`)) {
      await gw.db.run(`UPDATE gw_keys SET private_pem = ? WHERE kid = ?`, [
        await sealer.open(k.private_pem, `gw_keys:${k.kid}`),
        k.kid,
      ]);
    }
    let master = '';
    for (const r of await gw.db.all<{ name: string; value: string }>(`SELECT name, value FROM gw_secrets`)) {
      const clear = await sealer.open(r.value, `gw_secrets:${r.name}`);
      if (r.name === 'session-key-master') master = clear;
      await gw.db.run(`UPDATE gw_secrets SET value = ? WHERE name = ?`, [clear, r.name]);
    }
    const legacyPem = seedPem(deriveSessionSeed(Buffer.from(master, 'base64url'), s.sessionId));
    await gw.db.run(`UPDATE gw_sessions SET actor_key_pem = ? WHERE id = ?`, [legacyPem, s.sessionId]);
    await gw.close();

    gw = await startTestGateway(db, { sealer: sealerOf(kek) }, ownerKey);
    for (const k of await gw.db.all<{ private_pem: string }>(`SELECT private_pem FROM gw_keys`))
      assert.ok(isSealed(k.private_pem));
    for (const r of await gw.db.all<{ value: string }>(`SELECT value FROM gw_secrets`)) assert.ok(isSealed(r.value));
    const sealedRow = await gw.db.get<{ actor_key_pem: string }>(`SELECT actor_key_pem FROM gw_sessions WHERE id = ?`, [
      s.sessionId,
    ]);
    assert.ok(isSealed(sealedRow!.actor_key_pem), 'the old session key is sealed');
    const paid = await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' });
    assert.is(paid.status, 200, paid.text);
    const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: ownerKey })).body.receipts;
    const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
    for (const r of receipts) {
      assert.ok((await verifyReceipt(r, { jwks })).valid);
      // The SBA was signed by the session's own key (the grant's actorKey), before and after sealing.
      const { signature, ...signed } = r.sba;
      const bytes = new TextEncoder().encode(`ctl-sba/1\n${canonicalize(signed)}`);
      assert.ok(await verifyWithJwk(r.sba.grant.actorKey, bytes, Buffer.from(signature, 'base64url')));
    }
    assert.is(receipts.length, 2);
    await gw.close();
    gw = undefined;

    let message = '';
    try {
      await (await startTestGateway(db, { sealer: sealerOf(randomBytes(32)) }, ownerKey)).close();
    } catch (e) {
      message = (e as Error).message;
    }
    assert.match(message, /sealed under KEK [0-9a-f]{16}, but CTL_GATEWAY_KEK here is KEK/);
  } finally {
    await gw?.close().catch(() => {});
    await merchant.close();
    await db.drop();
  }
});

test.run();
