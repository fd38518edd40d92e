/**
 * The authority's small laxities, closed: a body sent to a route that takes none (it ran and
 * rotated or revoked), what Node's HTTP parser refuses on the production listener, and the Bearer
 * scheme in another case (RFC 9110 §11.1). Unknown scopes and `null` members stay refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '../../src/index.js';
import { readAuthorityConfig } from '../../authority/config.js';
import { startAuthority } from '../../authority/server.js';
import { silentLogger } from '../../service-kit/index.js';
import { ADMIN_KEY, grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { send } from '../service-kit/route-sweep.js';
import { rawHttp } from '../helpers/raw-http.js';

let t: TestAuthority;

test.before(async () => {
  t = await startTestAuthority();
});
test.after(async () => {
  await t.close();
});

const malformed = (r: { status: number; text: string }, message: RegExp) => {
  const body = JSON.parse(r.text);
  assert.equal([r.status, Object.keys(body).join(), body.error?.code], [400, 'error', 'malformed'], r.text);
  assert.match(body.error.message, message);
};
const admin = { authorization: `Bearer ${ADMIN_KEY}` };

test('a body sent to a route that takes none is refused before the route runs', async () => {
  const keysBefore = (await t.call('GET', '/.well-known/ctl-keys.json')).body.keys;
  malformed(
    await send(t.url, 'POST', '/admin/keys/rotate', admin, '{"purpose":"grant"}'),
    /^body: POST \/admin\/keys\/rotate takes no body/,
  );
  assert.equal((await t.call('GET', '/.well-known/ctl-keys.json')).body.keys, keysBefore, 'no rotation happened');

  const grant = await t.call(
    'POST',
    '/grants',
    await grantRequest(t, (await generateKeyPair({ alg: 'EdDSA' })).publicJwk),
  );
  const id = grant.body.grantId;
  malformed(
    await send(t.url, 'DELETE', `/grants/${id}`, { ...admin, 'content-type': 'text/plain' }, 'junk'),
    /takes no body/,
  );
  assert.is((await t.call('GET', `/revoke?grantId=${id}`)).body.revoked, false, 'the grant was not revoked');
  malformed(await send(t.url, 'GET', `/revoke?grantId=${id}`, {}, '{}'), /takes no body/);

  const spare = await t.call('POST', '/admin/keys', { scopes: ['grants:write'], label: 'spare' });
  malformed(await send(t.url, 'DELETE', `/admin/keys/${spare.body.keyId}`, admin, '{}'), /takes no body/);
  assert.is(
    (await t.call('GET', `/grants/${id}`, undefined, spare.body.apiKey)).status,
    200,
    'the key was not revoked',
  );
  malformed(await send(t.url, 'GET', '/healthz', {}, 'x'), /takes no body/);

  // Routes with an optional body still take one, or none.
  assert.is((await send(t.url, 'POST', `/grants/${id}/revoke`, admin, '{"reason":"test"}')).status, 200);
  assert.is((await send(t.url, 'POST', '/admin/keys/rotate', admin)).status, 201);
});

test('unknown scopes and null members of POST /admin/keys, POST /revoke are refused', async () => {
  malformed(
    await send(t.url, 'POST', '/admin/keys', admin, '{"scopes":["admin","sessions"],"label":"x"}'),
    /^scopes: unknown scope "sessions"/,
  );
  malformed(
    await send(t.url, 'POST', '/admin/keys', admin, '{"scopes":["admin"],"label":null}'),
    /^label: must not be null/,
  );
  malformed(
    await send(t.url, 'POST', '/admin/keys', admin, '{"scopes":["admin"],"label":"a\\u0001"}'),
    /^label: .*control characters/,
  );
  malformed(await send(t.url, 'POST', '/revoke', admin, '{"grantId":"g1","reason":null}'), /^reason: must not be null/);
});

test('the Bearer scheme is case-insensitive (RFC 9110 §11.1); the key is not', async () => {
  for (const scheme of ['bearer', 'BEARER', 'bEARER']) {
    assert.is(
      (await send(t.url, 'GET', '/admin/keys', { authorization: `${scheme} ${ADMIN_KEY}` })).status,
      200,
      scheme,
    );
  }
  assert.is(
    (await send(t.url, 'GET', '/admin/keys', { authorization: `bearer ${ADMIN_KEY.toUpperCase()}` })).status,
    401,
  );
});

test('Content-Length: -1 on the production listener gets the JSON envelope', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-authority-'));
  const a = await startAuthority(
    readAuthorityConfig({
      PORT: '0',
      DATABASE_URL: `sqlite:${join(dir, 'a.db')}`,
      CTL_ISSUER_DOMAIN: 'authority.test',
      CTL_REVOCATION_BASE_URL: 'http://127.0.0.1',
      CTL_ADMIN_API_KEY: ADMIN_KEY,
    }),
    { logger: silentLogger(), env: {} },
  );
  try {
    const res = await rawHttp(
      a.url,
      `POST /policies HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_KEY}\r\nContent-Type: ` +
        'application/json\r\nContent-Length: -1\r\n\r\n{}',
    );
    const [head, body] = res.split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 400 /);
    assert.match(head, /\r\ncontent-type: application\/json/i);
    assert.equal(Object.keys(JSON.parse(body)), ['error']);
    assert.is(JSON.parse(body).error.code, 'malformed');
  } finally {
    await a.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
