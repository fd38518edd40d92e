/**
 * The agent's read-only view of its own session (GET /session, /session/receipts[/{id}]): found
 * by the session token alone, current spend, never the continuation token or webhook address,
 * and nothing of another session.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { call, createSession, proxy, useGatewayAndMerchant } from './helpers.js';

const env = useGatewayAndMerchant(test, { amount: '100' });

test("GET /session: the token's own session with its current spend", async () => {
  const s = await createSession(env.gw, { webhookUrl: 'http://127.0.0.1:9/hook' });
  const before = await call(env.gw.url, 'GET', '/session', { key: s.sessionToken });
  assert.is(before.status, 200);
  assert.is(before.body.sessionId, s.sessionId);
  assert.is(before.body.state, 'active');
  assert.is(before.body.spentMinor, '0');
  assert.is(before.headers.get('cache-control'), 'no-store');
  assert.is(before.body.webhookUrl, undefined, "the owner's webhook address is not the agent's");
  assert.is((await proxy(env.gw, s.sessionToken, `${env.merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  const after = await call(env.gw.url, 'GET', '/session', { key: s.sessionToken });
  assert.is(after.body.spentMinor, '100');
  assert.is(after.body.remainingMinor, '900');
  const owner = await call(env.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey });
  const { webhookUrl: _w, ...shared } = owner.body;
  assert.equal(after.body, shared, "the owner's view less the webhook address");
});

test('a paused session: the agent sees the state, never the continuation token', async () => {
  const s = await createSession(env.gw, { budget: { amount: '100', currency: 'USD' }, softLimit: { amount: '100' } });
  assert.is((await proxy(env.gw, s.sessionToken, `${env.merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  assert.is((await proxy(env.gw, s.sessionToken, `${env.merchant.url}/a`, { purpose: 'api:search' })).status, 409);
  const owner = await call(env.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey });
  assert.match(owner.body.continuationToken, /^ctn_/);
  const agent = await call(env.gw.url, 'GET', '/session', { key: s.sessionToken });
  assert.is(agent.body.state, 'paused');
  assert.not.ok(agent.text.includes(owner.body.continuationToken));
  assert.is(agent.body.continuationToken, undefined);
});

test("receipts: the list and one by id, only the session's own", async () => {
  const a = await createSession(env.gw);
  const b = await createSession(env.gw);
  const paid = await proxy(env.gw, a.sessionToken, `${env.merchant.url}/a`, { purpose: 'api:search' });
  const receiptId = paid.headers.get('x-ctl-receipt-id')!;
  assert.match(receiptId, /^rcpt_/);
  const list = await call(env.gw.url, 'GET', '/session/receipts', { key: a.sessionToken });
  assert.is(list.status, 200);
  assert.is(list.body.sessionId, a.sessionId);
  assert.equal(
    list.body.receipts,
    (await call(env.gw.url, 'GET', `/sessions/${a.sessionId}/receipts`, { key: env.gw.ownerKey })).body.receipts,
  );
  const one = await call(env.gw.url, 'GET', `/session/receipts/${receiptId}`, { key: a.sessionToken });
  assert.is(one.status, 200);
  assert.equal(one.body, list.body.receipts[0]);
  assert.equal(one.body.amount, { amountMinor: '100', currency: 'USD' });
  const other = await call(env.gw.url, 'GET', `/session/receipts/${receiptId}`, { key: b.sessionToken });
  assert.is(other.status, 404);
  assert.is(other.body.error.code, 'not_found');
  assert.equal((await call(env.gw.url, 'GET', '/session/receipts', { key: b.sessionToken })).body.receipts, []);
});

test('only a session token opens it; a revoked session still answers with its state', async () => {
  for (const key of [undefined, env.gw.ownerKey, 'gw_sess_unknown']) {
    for (const path of ['/session', '/session/receipts', '/session/receipts/rcpt_x']) {
      const r = await call(env.gw.url, 'GET', path, { key });
      assert.is(r.status, 401, `${path} with ${key}`);
      assert.is(r.body.error.code, 'unauthorized');
    }
  }
  const s = await createSession(env.gw);
  await call(env.gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: env.gw.ownerKey });
  const r = await call(env.gw.url, 'GET', '/session', { key: s.sessionToken });
  assert.is(r.status, 200);
  assert.is(r.body.state, 'revoked');
  assert.is(r.body.revokedBy, 'owner');
});

test.run();
