/**
 * The gateway's small laxities, closed: `null` for an optional text field, members a route does
 * not take (`scopes` on an owner), a body sent to a route that takes none, what Node's HTTP
 * parser refuses, and the Bearer scheme in another case (RFC 9110 §11.1). Every refusal is a
 * 400 `malformed` envelope naming the field, and changes nothing.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  ADMIN_KEY,
  call,
  createSession,
  inOneHour,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { send } from '../service-kit/route-sweep.js';
import { rawHttp } from '../helpers/raw-http.js';

let testDb: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  testDb = sqliteDb();
  gw = await startTestGateway(testDb);
  merchant = await startMerchant();
});
test.after(async () => {
  await merchant.close();
  await gw.close();
  await testDb.drop();
});

const malformed = (r: { status: number; body?: any; text: string }, message: RegExp) => {
  const body = r.body ?? JSON.parse(r.text);
  assert.equal([r.status, Object.keys(body).join(), body.error?.code], [400, 'error', 'malformed'], r.text);
  assert.match(body.error.message, message);
};
const ownerCount = async () => Number((await gw.db.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM gw_owners'))!.n);
const sessionCount = async () => Number((await gw.db.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM gw_sessions'))!.n);

test('label: null, description: null and control characters are refused, naming the field', async () => {
  const sessions = await sessionCount();
  const config = { budget: { amount: '1000', currency: 'USD' }, purposes: ['api:search'], expiresAt: inOneHour() };
  malformed(
    await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { ...config, label: null } }),
    /^label: must not be null/,
  );
  malformed(
    await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { ...config, label: 'a\nb' } }),
    /^label: must not contain control characters/,
  );
  for (const webhookUrl of [
    'http://127.0.0.1:9/ho\nok',
    'http://127.0.0.1:9/\tx',
    'http://127.0.0.1:9/a b',
    'http://127.0.0.1:9/\u0001',
  ]) {
    malformed(
      await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { ...config, webhookUrl } }),
      /^webhookUrl: /,
    );
  }
  assert.is(await sessionCount(), sessions, 'no session created');
  assert.is(
    (await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: config })).status,
    201,
    'label stays optional',
  );

  const owners = await ownerCount();
  malformed(
    await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: null } }),
    /^label: must not be null/,
  );
  malformed(
    await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'x\u0007' } }),
    /^label: must not contain control characters/,
  );
  assert.is(await ownerCount(), owners, 'no owner created');

  const charge = { amount: '100', currency: 'USD' };
  malformed(
    await call(gw.url, 'POST', '/charge', { body: { ...charge, description: null } }),
    /^description: must not be null/,
  );
  malformed(
    await call(gw.url, 'POST', '/charge', { raw: '[1]', headers: { 'content-type': 'application/json' } }),
    /^body: must be a JSON object/,
  );
});

test('an owner takes only a label: scopes (known or not) and other members are refused, not ignored', async () => {
  const owners = await ownerCount();
  malformed(
    await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'x', scopes: ['root'] } }),
    /^scopes: unknown field/,
  );
  malformed(
    await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { scopes: ['admin'] } }),
    /^scopes: unknown field/,
  );
  malformed(
    await call(gw.url, 'POST', '/admin/owners', {
      key: ADMIN_KEY,
      raw: '"an owner"',
      headers: { 'content-type': 'application/json' },
    }),
    /^body: must be a JSON object/,
  );
  assert.is(await ownerCount(), owners);
  const ok = await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY });
  assert.equal([ok.status, ok.body.label], [201, ''], 'no body is still an owner without a label');
});

test(
  'PATCH /sessions/:id: a body that is not an object, or a null member, is malformed ' + '(not continuation_invalid)',
  async () => {
    const s = await createSession(gw, { softLimit: { amount: '100' } });
    const patch = (raw: string) =>
      call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
        key: gw.ownerKey,
        raw,
        headers: { 'content-type': 'application/json' },
      });
    malformed(await patch('"junk"'), /^body: must be a JSON object/);
    malformed(await patch('null'), /^body: must be a JSON object/);
    malformed(await patch('{"continuationToken":null}'), /^continuationToken: must not be null/);
    malformed(await patch('{"continuationToken":"t","amount":null}'), /^amount: must not be null/);
  },
);

test('a body sent to a route that takes none is refused before the route runs', async () => {
  const s = await createSession(gw);
  const spare = await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'spare' } });
  const auth = (k: string) => ({ authorization: `Bearer ${k}` });
  malformed(
    await send(gw.url, 'DELETE', `/sessions/${s.sessionId}`, auth(gw.ownerKey), '{"reason":"x"}'),
    /^body: DELETE \/sessions\/.* takes no body/,
  );
  malformed(
    await send(
      gw.url,
      'DELETE',
      `/sessions/${s.sessionId}`,
      { ...auth(gw.ownerKey), 'content-type': 'text/plain' },
      'junk',
    ),
    /takes no body/,
  );
  assert.is(
    (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body.state,
    'active',
    'the session was not revoked',
  );
  malformed(
    await send(gw.url, 'DELETE', `/admin/owners/${spare.body.ownerId}`, auth(ADMIN_KEY), '{}'),
    /takes no body/,
  );
  assert.is(
    (await call(gw.url, 'GET', '/sessions', { key: spare.body.apiKey })).status,
    200,
    'the owner was not revoked',
  );
  malformed(await send(gw.url, 'GET', '/sessions', auth(gw.ownerKey), '{"limit":1}'), /takes no body/);
  malformed(await send(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, auth(gw.ownerKey), 'x'), /takes no body/);
  malformed(await send(gw.url, 'GET', '/healthz', {}, '{}'), /takes no body/);
  malformed(await send(gw.url, 'GET', '/.well-known/ctl-keys.json', {}, '{}'), /takes no body/);
  // Without a body the same routes answer as before; /proxy still forwards any body.
  assert.is((await send(gw.url, 'DELETE', `/sessions/${s.sessionId}`, auth(gw.ownerKey))).status, 200);
  const fwd = await proxy(gw, (await createSession(gw)).sessionToken, `${merchant.url}/free`, {
    body: 'raw \u0000 bytes',
    headers: { 'content-type': 'application/octet-stream' },
  });
  assert.equal([fwd.status, fwd.body.body], [200, 'raw \u0000 bytes']);
});

test('Content-Length: -1 (refused by the HTTP parser) gets the JSON envelope', async () => {
  const res = await rawHttp(
    gw.url,
    `POST /sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${gw.ownerKey}\r\nContent-Type: ` +
      'application/json\r\nContent-Length: -1\r\n\r\n{}',
  );
  const [head, body] = res.split('\r\n\r\n');
  assert.match(head, /^HTTP\/1\.1 400 /);
  assert.match(head, /\r\ncontent-type: application\/json/i);
  assert.is(JSON.parse(body).error.code, 'malformed');
});

test('the Bearer scheme is case-insensitive for owner keys and session tokens; the token is not', async () => {
  for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
    assert.is(
      (await send(gw.url, 'GET', '/sessions', { authorization: `${scheme} ${gw.ownerKey}` })).status,
      200,
      scheme,
    );
  }
  const s = await createSession(gw);
  for (const scheme of ['bearer', 'BEARER']) {
    const r = await send(gw.url, 'POST', '/proxy', {
      authorization: `${scheme} ${s.sessionToken}`,
      'x-target-url': `${merchant.url}/free`,
    });
    assert.is(r.status, 200, `${scheme}: ${r.text}`);
  }
  // PATCH /sessions/:id with the session's own token in lower case reaches the continuation check.
  const p = await send(
    gw.url,
    'PATCH',
    `/sessions/${s.sessionId}`,
    { authorization: `bearer ${s.sessionToken}` },
    '{"continuationToken":"not-a-token"}',
  );
  assert.equal([p.status, JSON.parse(p.text).error.code], [403, 'continuation_invalid'], p.text);
  const upper = s.sessionToken.replace(/^gw_sess_/, 'GW_SESS_');
  assert.is(
    (await send(gw.url, 'POST', '/proxy', { authorization: `bearer ${upper}`, 'x-target-url': `${merchant.url}/free` }))
      .status,
    401,
  );
});

test.run();
