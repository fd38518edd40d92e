/**
 * A receipt key held outside the database may be P-256 (service-kit/signers): the JWKS publishes
 * the algorithm that signs with it, not EdDSA for every key, so a verifier that checks `alg`
 * against the signature accepts the gateway's receipts.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../service-kit/index.js';
import { startGateway } from '../../gateway/server.js';
import { ADMIN_KEY, call, createSession, proxy, startMerchant } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-gw-alg-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

test('a P-256 receipt key is published as ES256 and signs the receipts', async () => {
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  const running = await startGateway({
    port: 0,
    host: '127.0.0.1',
    databaseUrl: `sqlite:${join(dir, 'gateway.db')}`,
    adminKey: ADMIN_KEY,
    targets: { allowPrivate: true },
    logger: silentLogger(),
    env: { CTL_GATEWAY_RECEIPT_PRIVATE_KEY_PEM: pem },
  });
  const merchant = await startMerchant({ amount: '100' });
  try {
    const url = running.server.url;
    const owner = await call(url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'alg' } });
    const gw = { url, ownerKey: owner.body.apiKey as string } as never;
    const s = await createSession(gw);
    const paid = await proxy(gw, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' });
    assert.is(paid.status, 200, paid.text);
    const receipt = (await call(url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: owner.body.apiKey })).body
      .receipts[0];
    const jwks = (await call(url, 'GET', '/.well-known/ctl-keys.json')).body;
    const key = jwks.keys.find((k: { kid: string }) => k.kid === receipt.keyId);
    assert.ok(key, 'the receipt key is published');
    assert.is(key.crv, 'P-256');
    assert.is(key.alg, 'ES256');
    const grantKey = jwks.keys.find((k: { purposes: string[] }) => k.purposes.includes('grant'));
    assert.is(grantKey.alg, 'EdDSA');
  } finally {
    await merchant.close();
    await running.close();
  }
});

test.run();
