/**
 * session.fetch and Idempotency-Key (gateway/README.md "Idempotency-Key"): one random key per
 * logical request, the caller's own when given, reused on the client's own retries (soft-limit
 * continuation, network error, 409 in flight), bounded.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createGatewayClient, GatewayError } from '../../src/client/index.js';
import { CtlError } from '../../src/index.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  inOneHour,
  type TestGateway,
  type Merchant,
  type TestDb,
} from '../gateway/helpers.js';
import { slowRail, books } from '../gateway/idempotency-cases.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  db = sqliteDb();
  gw = await startTestGateway(db, { rail: slowRail(() => gw.db, 100) });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

/** A fetch that records the Idempotency-Key of every /proxy call. */
function recording(inner: typeof fetch = fetch) {
  const keys: string[] = [];
  const f = ((u: string | URL | Request, i?: RequestInit) => {
    if (String(u).endsWith('/proxy')) keys.push(new Headers(i?.headers).get('idempotency-key') ?? '(none)');
    return inner(u, i);
  }) as typeof fetch;
  return { keys, fetch: f };
}

const owner = () => createGatewayClient({ baseUrl: gw.url, ownerKey: gw.ownerKey });
const newSession = (extra: Record<string, unknown> = {}) =>
  owner().createSession({
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    ...extra,
  });

test('each call sends a fresh random 128-bit key', async () => {
  const s = await newSession();
  const r = recording();
  const agent = createGatewayClient({ baseUrl: gw.url, fetch: r.fetch }).session(s.sessionToken);
  await agent.fetch(`${merchant.url}/a`, { purpose: 'api:search' });
  await agent.fetch(`${merchant.url}/a`, { purpose: 'api:search' });
  assert.is(r.keys.length, 2);
  for (const k of r.keys) assert.match(k, /^[A-Za-z0-9_-]{22}$/);
  assert.is.not(r.keys[0], r.keys[1], 'one key per logical request');
  assert.is((await books(gw, s.sessionId)).spent, '200', 'two requests, two payments');
});

test('the soft-limit continuation retry reuses the key, and runs (the pause moved no money)', async () => {
  const s = await newSession({ budget: { amount: '100', currency: 'USD' }, softLimit: { amount: '200' } });
  const r = recording();
  const agent = createGatewayClient({ baseUrl: gw.url, fetch: r.fetch }).session(s.sessionToken, {
    sessionId: s.sessionId,
    onSoftLimit: async (info) => (await owner().getSession(info.sessionId!)).continuationToken,
  });
  assert.is((await agent.fetch(`${merchant.url}/1`, { purpose: 'api:search' })).status, 200);
  const second = await agent.fetch(`${merchant.url}/2`, { purpose: 'api:search' });
  assert.is(second.status, 200);
  assert.is(second.headers.get('idempotent-replayed'), null);
  assert.is(r.keys.length, 3);
  assert.is(r.keys[1], r.keys[2], "the continuation retry carries the paused call's key");
  assert.is.not(r.keys[0], r.keys[1]);
  assert.is((await books(gw, s.sessionId)).spent, '200');
});

test("a caller's own key: the second call with it is the replay, paid once", async () => {
  const s = await newSession();
  const r = recording();
  const agent = createGatewayClient({ baseUrl: gw.url, fetch: r.fetch }).session(s.sessionToken);
  const paidBefore = merchant.paid.length;
  const a = await agent.fetch(`${merchant.url}/order`, {
    purpose: 'api:search',
    method: 'POST',
    body: 'id=7',
    idempotencyKey: 'order-7',
  });
  const b = await agent.fetch(`${merchant.url}/order`, {
    purpose: 'api:search',
    method: 'POST',
    body: 'id=7',
    headers: { 'Idempotency-Key': 'order-7' },
  });
  assert.equal(r.keys, ['order-7', 'order-7']);
  assert.is(await b.text(), await a.text());
  assert.is(b.headers.get('idempotent-replayed'), 'true');
  assert.is(merchant.paid.length - paidBefore, 1);
  await agent.fetch(`${merchant.url}/x`, { idempotencyKey: 'caf\u00e9' }).then(
    () => assert.unreachable(),
    (e) => assert.instance(e, RangeError),
  );
});

test(
  'a network error after the gateway ran the call: the retry with the same key gets ' +
    'the answer, not a second payment',
  async () => {
    const s = await newSession();
    let lost = 1;
    const r = recording(async (u, i) => {
      const res = await fetch(u, i);
      if (lost-- > 0) throw new TypeError('fetch failed (the answer was lost)');
      return res;
    });
    const agent = createGatewayClient({ baseUrl: gw.url, fetch: r.fetch, sleep: async () => {} }).session(
      s.sessionToken,
    );
    const paidBefore = merchant.paid.length;
    const res = await agent.fetch(`${merchant.url}/lost`, { purpose: 'api:search' });
    assert.is(res.status, 200);
    assert.is(res.headers.get('idempotent-replayed'), 'true');
    assert.is(r.keys.length, 2);
    assert.is(r.keys[0], r.keys[1]);
    assert.is(merchant.paid.length - paidBefore, 1);
    const b = await books(gw, s.sessionId);
    assert.equal([b.spent, b.reserved], ['100', '0']);
  },
);

test('409 while the first attempt is in flight: the client waits Retry-After and gets the answer', async () => {
  const s = await newSession();
  const waits: number[] = [];
  const agent = createGatewayClient({
    baseUrl: gw.url,
    sleep: (ms) => (waits.push(ms), new Promise((r) => setTimeout(r, 150))),
  }).session(s.sessionToken);
  const paidBefore = merchant.paid.length;
  const [a, b] = await Promise.all([
    agent.fetch(`${merchant.url}/twice`, { purpose: 'api:search', idempotencyKey: 'same-call' }),
    new Promise((r) => setTimeout(r, 20)).then(() =>
      agent.fetch(`${merchant.url}/twice`, { purpose: 'api:search', idempotencyKey: 'same-call' }),
    ),
  ]);
  assert.is(a.status, 200);
  assert.is(b.status, 200);
  assert.is(b.headers.get('idempotent-replayed'), 'true');
  assert.ok(waits.includes(1000), `waited Retry-After: ${waits}`);
  assert.is(merchant.paid.length - paidBefore, 1);
});

test('retries are bounded and can be turned off; an abort is not retried', async () => {
  const s = await newSession();
  let calls = 0;
  const down = (async () => {
    calls++;
    throw new TypeError('fetch failed');
  }) as typeof fetch;
  const agent = createGatewayClient({ baseUrl: gw.url, fetch: down, sleep: async () => {} }).session(s.sessionToken);
  await agent.fetch(`${merchant.url}/x`).then(
    () => assert.unreachable(),
    (e) => {
      assert.instance(e, CtlError);
      assert.is(e.code, 'upstream_error');
      assert.instance(e.cause, TypeError);
    },
  );
  assert.is(calls, 3, 'one call and two retries');
  calls = 0;
  await agent.fetch(`${merchant.url}/x`, { retries: 0 }).catch(() => {});
  assert.is(calls, 1);
  calls = 0;
  const ac = new AbortController();
  ac.abort();
  await agent.fetch(`${merchant.url}/x`, { signal: ac.signal }).catch(() => {});
  assert.is(calls, 1);
  // The same key for another request is the gateway's 409 conflict: not retried, thrown.
  const real = createGatewayClient({ baseUrl: gw.url }).session(s.sessionToken);
  await real.fetch(`${merchant.url}/one`, { purpose: 'api:search', idempotencyKey: 'k-reused' });
  try {
    await real.fetch(`${merchant.url}/two`, { purpose: 'api:search', idempotencyKey: 'k-reused' });
    assert.unreachable();
  } catch (e) {
    assert.instance(e, GatewayError);
    assert.is((e as GatewayError).code, 'conflict');
    assert.is((e as GatewayError).status, 409);
  }
});

test.run();
