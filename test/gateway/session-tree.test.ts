/**
 * Child sessions as the owner and the agent read them (PROTOCOL.md §14): a session's `state` is
 * what its payments meet, so a child of a paused parent is paused with it (`stateFrom` names the
 * parent) in every view — one session, the list, the tree, the agent's own — and active again
 * when the parent is continued; a revoked parent's children read revoked. A parent's receipts
 * with `?descendants=true` are every receipt its spend counts, each naming the session that paid.
 * A child inherits its parent's defaultPurpose. The children route answers a bad token 401.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { useGatewayAndMerchant, createSession, proxy, call, inOneHour } from './helpers.js';

const env = useGatewayAndMerchant(test, { amount: '100' });
const owner = (path: string) => call(env.gw.url, 'GET', path, { key: env.gw.ownerKey });
const child = (parent: { sessionId: string; sessionToken: string }, body: unknown) =>
  call(env.gw.url, 'POST', `/sessions/${parent.sessionId}/children`, { key: parent.sessionToken, body });
const pay = (token: string, purpose: string | undefined = 'api:search') =>
  proxy(env.gw, token, `${env.merchant.url}/search`, purpose ? { purpose } : {});

/** The state of every session in a tree, by id. */
function treeStates(node: { session: { sessionId: string; state: string; stateFrom?: string }; children: any[] }) {
  const out: Record<string, [string, string | undefined]> = {};
  const walk = (n: typeof node) => {
    out[n.session.sessionId] = [n.session.state, n.session.stateFrom];
    n.children.forEach(walk);
  };
  walk(node);
  return out;
}

test("a child of a paused parent is paused with it, in every view; the parent's continuation frees both", async () => {
  const p = await createSession(env.gw, { budget: { amount: '300', currency: 'USD' }, softLimit: { amount: '100' } });
  const c = await child(p, { budget: { amount: '300' }, label: 'sub-agent' });
  assert.is(c.status, 201, c.text);
  const g = await child(
    { sessionId: c.body.sessionId, sessionToken: c.body.sessionToken },
    { budget: { amount: '200' } },
  );
  assert.is(g.status, 201, g.text);
  assert.is((await pay(p.sessionToken)).status, 200);
  assert.is((await pay(c.body.sessionToken)).status, 200);
  assert.is((await pay(p.sessionToken)).status, 200);
  const paused = await pay(p.sessionToken);
  assert.is(paused.body.error.code, 'session_paused', paused.text);

  const one = await owner(`/sessions/${c.body.sessionId}`);
  assert.is(one.body.state, 'paused');
  assert.is(one.body.stateFrom, p.sessionId);
  assert.is(one.body.continuationToken, undefined, "the approval is the parent's");
  const agent = await call(env.gw.url, 'GET', '/session', { key: c.body.sessionToken });
  assert.is(agent.body.state, 'paused');
  assert.is(agent.body.stateFrom, p.sessionId);
  const list = await owner('/sessions?limit=200');
  const listed = Object.fromEntries(
    list.body.sessions.map((s: { sessionId: string; state: string; stateFrom?: string }) => [
      s.sessionId,
      [s.state, s.stateFrom],
    ]),
  );
  const expected = {
    [p.sessionId]: ['paused', undefined],
    [c.body.sessionId]: ['paused', p.sessionId],
    [g.body.sessionId]: ['paused', p.sessionId],
  };
  for (const [id, st] of Object.entries(expected)) assert.equal(listed[id], st, `list: ${id}`);
  assert.equal(treeStates((await owner(`/sessions/${p.sessionId}/tree`)).body), expected);
  assert.equal(treeStates((await owner(`/sessions/${c.body.sessionId}/tree`)).body), {
    [c.body.sessionId]: expected[c.body.sessionId],
    [g.body.sessionId]: expected[g.body.sessionId],
  });
  // What the views say is what a payment meets.
  const refused = await pay(g.body.sessionToken);
  assert.is(refused.body.error.code, 'session_paused');
  assert.match(refused.body.error.message, new RegExp(p.sessionId));

  const token = (await owner(`/sessions/${p.sessionId}`)).body.continuationToken;
  const cont = await call(env.gw.url, 'PATCH', `/sessions/${p.sessionId}`, {
    key: env.gw.ownerKey,
    body: { continuationToken: token },
  });
  assert.is(cont.status, 200, cont.text);
  const after = await owner(`/sessions/${g.body.sessionId}`);
  assert.is(after.body.state, 'active');
  assert.is(after.body.stateFrom, undefined);
  assert.is((await pay(g.body.sessionToken)).status, 200);
});

test("a revoked parent's descendants read revoked everywhere, and cannot pay", async () => {
  const p = await createSession(env.gw, { budget: { amount: '1000', currency: 'USD' } });
  const c = await child(p, { budget: { amount: '500' } });
  assert.is((await call(env.gw.url, 'DELETE', `/sessions/${p.sessionId}`, { key: env.gw.ownerKey })).status, 200);
  assert.is((await owner(`/sessions/${c.body.sessionId}`)).body.state, 'revoked');
  assert.equal(
    Object.values(treeStates((await owner(`/sessions/${p.sessionId}/tree`)).body)).map((x) => x[0]),
    ['revoked', 'revoked'],
  );
  assert.is((await pay(c.body.sessionToken)).body.error.code, 'session_revoked');
});

test("a parent's receipts with ?descendants=true are every receipt its spend counts, naming its payer", async () => {
  const p = await createSession(env.gw, { budget: { amount: '1000', currency: 'USD' } });
  const c = await child(p, { budget: { amount: '500' } });
  assert.is((await pay(p.sessionToken)).status, 200);
  assert.is((await pay(c.body.sessionToken)).status, 200);
  assert.is((await pay(c.body.sessionToken)).status, 200);
  const own = await owner(`/sessions/${p.sessionId}/receipts`);
  assert.is(own.body.receipts.length, 1, 'without the parameter: its own payments');
  const all = await owner(`/sessions/${p.sessionId}/receipts?descendants=true`);
  const receipts = all.body.receipts as { sessionId: string; amount: { amountMinor: string } }[];
  assert.equal(receipts.map((r) => r.sessionId).sort(), [p.sessionId, c.body.sessionId, c.body.sessionId].sort());
  const sum = receipts.reduce((a, r) => a + BigInt(r.amount.amountMinor), 0n);
  assert.is(
    sum.toString(),
    (await owner(`/sessions/${p.sessionId}`)).body.spentMinor,
    'the receipts add up to the spend',
  );
  const childOnly = await owner(`/sessions/${c.body.sessionId}/receipts?descendants=true`);
  assert.is(childOnly.body.receipts.length, 2);
  const bad = await owner(`/sessions/${p.sessionId}/receipts?descendants=yes`);
  assert.is(bad.status, 400);
  assert.match(bad.body.error.message, /^descendants: /);
});

test("a child inherits its parent's defaultPurpose, and may name its own among its purposes", async () => {
  const p = await createSession(env.gw, { purposes: ['api:search', 'data:read'], defaultPurpose: 'api:search' });
  const c = await child(p, { budget: { amount: '500' } });
  assert.is((await owner(`/sessions/${c.body.sessionId}`)).body.defaultPurpose, 'api:search');
  const paid = await pay(c.body.sessionToken, undefined);
  assert.is(paid.status, 200, paid.text);
  const narrowed = await child(p, { budget: { amount: '10' }, purposes: ['data:read'] });
  assert.is((await owner(`/sessions/${narrowed.body.sessionId}`)).body.defaultPurpose, undefined);
  const own = await child(p, { budget: { amount: '10' }, purposes: ['data:read'], defaultPurpose: 'data:read' });
  assert.is(own.status, 201, own.text);
  assert.is((await owner(`/sessions/${own.body.sessionId}`)).body.defaultPurpose, 'data:read');
  const wide = await child(p, { budget: { amount: '10' }, purposes: ['data:read'], defaultPurpose: 'api:search' });
  assert.is(wide.status, 400);
  assert.match(wide.body.error.message, /^defaultPurpose: /);
});

test('POST /sessions/{id}/children answers a bad token 401, as every route does', async () => {
  const p = await createSession(env.gw, { expiresAt: inOneHour() });
  const body = { budget: { amount: '10' } };
  for (const key of [undefined, 'gw_sess_notatokenofanysession', env.gw.ownerKey]) {
    const r = await call(env.gw.url, 'POST', `/sessions/${p.sessionId}/children`, { key, body });
    assert.is(r.status, 401, `${key}: ${r.text}`);
    assert.is(r.body.error.code, 'unauthorized');
    assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer/);
  }
  const other = await createSession(env.gw);
  const wrong = await call(env.gw.url, 'POST', `/sessions/${p.sessionId}/children`, { key: other.sessionToken, body });
  assert.is(wrong.status, 404, "another session's token does not reach this one");
});

test.run();
