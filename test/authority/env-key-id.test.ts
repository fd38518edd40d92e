/**
 * A grant key from the environment keeps its kid for life: restarting with a new
 * CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM under a CTL_POLICY_GRANT_SIGNING_KEY_ID already stored
 * with another key is refused at start (review: it kept publishing the old public key under that
 * kid while signing with the new one, so every grant was unverifiable). SQLite and PostgreSQL.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSession, generateKeyPair, verifyCtl } from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

type Start = (env: Record<string, string>) => Promise<TestAuthority>;
const envOf = (pem: string, kid: string) => ({
  CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM: pem,
  CTL_POLICY_GRANT_SIGNING_KEY_ID: kid,
});

/** A grant issued by `t` verifies against `t`'s published JWKS. */
async function grantVerifies(t: TestAuthority, kid: string): Promise<void> {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const grant = (await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk))).body;
  assert.is(grant.keyId, kid);
  const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
  const session = createSession(grant, {
    actorId: 'v',
    signingKey: wallet.privateKeyPem,
    scope: 'TRIP',
    revocationTtl: 0,
  });
  const sba = await session.createSba({ amount: '1', currency: 'USD', rail: 'x402' });
  const r = await verifyCtl(sba, { amount: '1', currency: 'USD', jwks });
  assert.ok(r.valid, JSON.stringify(r));
}

async function scenario(start: Start): Promise<void> {
  const k1 = await generateKeyPair({ alg: 'EdDSA' });
  const k2 = await generateKeyPair({ alg: 'EdDSA' });

  let t = await start(envOf(k1.privateKeyPem, 'grant-1'));
  await grantVerifies(t, 'grant-1');
  await t.close();

  // Same key, same kid: starts as before.
  t = await start(envOf(k1.privateKeyPem, 'grant-1'));
  await grantVerifies(t, 'grant-1');
  await t.close();

  // New key, same kid: refused, with an error naming both variables.
  let error: unknown;
  try {
    t = await start(envOf(k2.privateKeyPem, 'grant-1'));
    await t.close();
  } catch (e) {
    error = e;
  }
  assert.instance(error, Error, 'a new key under a stored kid must not start');
  const message = (error as Error).message;
  assert.match(message, 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM');
  assert.match(message, "CTL_POLICY_GRANT_SIGNING_KEY_ID='grant-1'");
  assert.match(message, 'a kid must never change its key');

  // The refusal changed nothing: the old key still starts and its grants verify.
  t = await start(envOf(k1.privateKeyPem, 'grant-1'));
  const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
  assert.is(jwks.keys.find((k: { kid: string }) => k.kid === 'grant-1').x, k1.publicJwk.x);
  await grantVerifies(t, 'grant-1');
  await t.close();

  // New key under a new kid: the way to replace it.
  t = await start(envOf(k2.privateKeyPem, 'grant-2'));
  await grantVerifies(t, 'grant-2');
  const after = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
  assert.is(after.keys.find((k: { kid: string }) => k.kid === 'grant-2').x, k2.publicJwk.x);
  assert.is(
    after.keys.find((k: { kid: string }) => k.kid === 'grant-1').x,
    k1.publicJwk.x,
    'the old key stays published while its grants live',
  );
  await t.close();
}

test('SQLite: a new grant key under a stored CTL_POLICY_GRANT_SIGNING_KEY_ID is refused at start', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-envkid-'));
  try {
    await scenario((env) => startTestAuthority({ dir, keepDir: true, env }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

if (!(await pgAvailable())) {
  console.log(`SKIPPED env key id on PostgreSQL: ${PG_URL} is unreachable`);
} else {
  test('PostgreSQL: a new grant key under a stored CTL_POLICY_GRANT_SIGNING_KEY_ID is refused at start', async () => {
    const schema = freshSchema();
    try {
      await scenario((env) => startTestAuthority({ databaseUrl: PG_URL, schema, env }));
    } finally {
      await dropSchema(schema);
    }
  });
}

test.run();
