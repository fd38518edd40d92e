/**
 * createGatewayClient against the real gateway: the owner's session API, the
 * agent's session.fetch through /proxy, typed refusals, and onSoftLimit + continueSession.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createGatewayClient, GatewayError } from '../../src/client/index.js';
import { CtlBudgetExceededError, CtlError } from '../../src/errors.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  inOneHour,
  type TestGateway,
  type Merchant,
  type TestDb,
} from '../gateway/helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  db = sqliteDb();
  gw = await startTestGateway(db);
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

test('owner API: create, get, list, receipts, revoke', async () => {
  const owner = createGatewayClient({ baseUrl: gw.url + '/', ownerKey: gw.ownerKey });
  const s = await owner.createSession({
    budget: { amount: '300', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    label: 'client',
  });
  assert.match(s.sessionToken, /^gw_sess_/);
  const v = await owner.getSession(s.sessionId);
  assert.is(v.state, 'active');
  assert.is(v.label, 'client');
  const list = await owner.listSessions({ limit: 10 });
  assert.ok(list.sessions.some((x) => x.sessionId === s.sessionId));

  const agent = createGatewayClient({ baseUrl: gw.url }).session(s.sessionToken);
  const res = await agent.fetch(`${merchant.url}/data`, {
    purpose: 'api:search',
    method: 'POST',
    body: 'q=1',
    headers: { 'content-type': 'text/plain' },
  });
  assert.is(res.status, 200);
  const body = (await res.json()) as { paid: boolean; body: string };
  assert.is(body.paid, true);
  assert.is(body.body, 'q=1');
  assert.is(agent.sessionId, s.sessionId, 'learned from X-Ctl-Session-Id');
  const r = await owner.receipts(s.sessionId);
  assert.is(r.receipts.length, 1);
  // A merchant's own non-2xx comes back as a Response, not an error.
  const free = await agent.fetch(`${merchant.url}/free`);
  assert.is(free.status, 200);

  const revoked = await owner.revokeSession(s.sessionId);
  assert.is(revoked.state, 'revoked');
  try {
    await agent.fetch(`${merchant.url}/data`, { purpose: 'api:search' });
    assert.unreachable('revoked');
  } catch (e) {
    assert.instance(e, CtlError);
    assert.is((e as CtlError).code, 'session_revoked');
    assert.is((e as unknown as { status: number }).status, 410);
  }
  try {
    await owner.getSession('sess_nope');
    assert.unreachable();
  } catch (e) {
    assert.instance(e, GatewayError);
    assert.is((e as GatewayError).status, 404);
  }
});

test('budget_exceeded throws CtlBudgetExceededError', async () => {
  const owner = createGatewayClient({ baseUrl: gw.url, ownerKey: gw.ownerKey });
  const s = await owner.createSession({
    budget: { amount: '150', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
  });
  const agent = owner.session(s.sessionToken, { sessionId: s.sessionId });
  assert.is((await agent.fetch(`${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  try {
    await agent.fetch(`${merchant.url}/b`, { purpose: 'api:search' });
    assert.unreachable();
  } catch (e) {
    assert.instance(e, CtlBudgetExceededError);
    assert.is((e as CtlBudgetExceededError).code, 'budget_exceeded');
  }
});

test('onSoftLimit gets the pause, returns a continuation token, and the call is retried once', async () => {
  const owner = createGatewayClient({ baseUrl: gw.url, ownerKey: gw.ownerKey });
  const s = await owner.createSession({
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    softLimit: { amount: '200' },
  });
  const calls: unknown[] = [];
  const agent = createGatewayClient({ baseUrl: gw.url }).session(s.sessionToken, {
    sessionId: s.sessionId,
    onSoftLimit: async (info) => {
      calls.push(info);
      return (await owner.getSession(info.sessionId!)).continuationToken; // the owner approves
    },
  });
  const paidBefore = merchant.paid.length;
  assert.is((await agent.fetch(`${merchant.url}/1`, { purpose: 'api:search' })).status, 200);
  const second = await agent.fetch(`${merchant.url}/2`, { purpose: 'api:search' });
  assert.is(second.status, 200);
  assert.is(calls.length, 1);
  assert.is((calls[0] as { code: string }).code, 'session_paused');
  assert.is(merchant.paid.length - paidBefore, 2);
  const v = await owner.getSession(s.sessionId);
  assert.is(v.budget.amount, '300');
  assert.is(v.spentMinor, '200');

  // Declining leaves the session paused and throws session_paused.
  const s2 = await owner.createSession({
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    softLimit: { amount: '100' },
  });
  const agent2 = owner.session(s2.sessionToken, { onSoftLimit: () => undefined });
  await agent2.fetch(`${merchant.url}/1`, { purpose: 'api:search' });
  try {
    await agent2.fetch(`${merchant.url}/2`, { purpose: 'api:search' });
    assert.unreachable();
  } catch (e) {
    assert.is((e as CtlError).code, 'session_paused');
    assert.is((e as unknown as { status: number }).status, 409);
  }
  // The agent itself can continue with a token (its session token authorises the PATCH).
  const token = (await owner.getSession(s2.sessionId)).continuationToken!;
  const resumed = await agent2.continueSession(token);
  assert.is(resumed.state, 'active');
  try {
    await agent2.continueSession(token);
    assert.unreachable();
  } catch (e) {
    assert.is((e as CtlError).code, 'continuation_invalid');
  }
});

test('portable: an injected fetch is used', async () => {
  let n = 0;
  const client = createGatewayClient({ baseUrl: gw.url, ownerKey: gw.ownerKey, fetch: (u, i) => (n++, fetch(u, i)) });
  await client.listSessions();
  assert.is(n, 1);
  assert.throws(() => createGatewayClient({} as any), TypeError);
});

test('the agent reads its own session with its token alone: status, receipts, one receipt', async () => {
  const owner = createGatewayClient({ baseUrl: gw.url, ownerKey: gw.ownerKey });
  const s = await owner.createSession({
    budget: { amount: '300', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
  });
  const agent = createGatewayClient({ baseUrl: gw.url }).session(s.sessionToken);
  assert.is(agent.sessionId, undefined);
  const before = await agent.status();
  assert.is(before.sessionId, s.sessionId);
  assert.is(agent.sessionId, s.sessionId, 'learned from the status');
  assert.is(before.remainingMinor, '300');
  const res = await agent.fetch(`${merchant.url}/data`, { purpose: 'api:search' });
  const receiptId = res.headers.get('x-ctl-receipt-id')!;
  assert.is((await agent.status()).spentMinor, '100');
  const all = await agent.receipts();
  assert.equal(
    all.receipts.map((r) => r.receiptId),
    [receiptId],
  );
  assert.equal(await agent.receipt(receiptId), all.receipts[0]);
  try {
    await agent.receipt('rcpt_nope');
    assert.unreachable('unknown receipt');
  } catch (e) {
    assert.instance(e, GatewayError);
    assert.is((e as GatewayError).status, 404);
  }
});

test.run();
