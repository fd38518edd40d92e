/**
 * The console's live feed (GET /console/events) and its dispatch-log route, without a browser:
 * authenticated by the owner key, one owner's events only, no secrets on the wire, capped per
 * owner, ended when the key is revoked and when the server closes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  ADMIN_KEY,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';
import { openStream } from './console-sse.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let hook: Server;
let hookUrl = '';
let ownerB = { ownerId: '', apiKey: '' };

test.before(async () => {
  hook = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  db = sqliteDb();
  gw = await startTestGateway(db, { console: { maxStreamsPerOwner: 2, heartbeatMs: 200 } });
  merchant = await startMerchant({ amount: '100' });
  ownerB = (await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'B' } })).body;
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await new Promise((r) => hook.close(r));
  await db.drop();
});

test(
  'an owner sees its own sessions change live, and nothing of another owner; no continuation ' + 'token on the wire',
  async () => {
    const a = await openStream(gw.url, gw.ownerKey);
    const b = await openStream(gw.url, ownerB.apiKey);
    assert.is(a.status, 200);
    assert.match(a.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.is(a.headers.get('cache-control'), 'no-store');
    await a.waitFor((e) => e.event === 'ready');
    await b.waitFor((e) => e.event === 'ready');

    const s = await createSession(gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
    await a.waitFor(
      (e) => e.event === 'session' && e.data.type === 'session.created' && e.data.sessionId === s.sessionId,
    );
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
    const paid = await a.waitFor((e) => e.data.type === 'payment.completed');
    assert.is(paid.data.sessionId, s.sessionId);
    assert.is(paid.data.amountMinor, '100');
    assert.match(paid.data.receiptId, /^rcpt_/);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 409);
    const paused = await a.waitFor((e) => e.data.type === 'session.paused');
    assert.is(paused.data.continuationToken, undefined, 'the continuation token never rides the stream');
    assert.not.match(JSON.stringify(a.events), /continuationToken/);
    const view = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
    assert.is(
      (
        await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
          key: gw.ownerKey,
          body: { continuationToken: view.continuationToken },
        })
      ).status,
      200,
    );
    await a.waitFor((e) => e.data.type === 'session.continued' && e.data.sessionId === s.sessionId);
    assert.is((await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).status, 200);
    const revoked = await a.waitFor((e) => e.data.type === 'session.revoked');
    assert.is(revoked.data.revokedBy, 'owner');

    await new Promise((r) => setTimeout(r, 300));
    assert.equal(
      b.events.filter((e) => e.event === 'session'),
      [],
      "owner B saw none of owner A's events",
    );
    a.close();
    b.close();
  },
);

test(
  'authenticated by the owner key in the header: none → 401, the admin key → 403, a ' + 'key in the URL is not a key',
  async () => {
    const none = await openStream(gw.url, undefined);
    assert.is(none.status, 401);
    assert.is(none.body.error.code, 'unauthorized');
    const admin = await openStream(gw.url, ADMIN_KEY);
    assert.is(admin.status, 403);
    assert.is(admin.body.error.code, 'forbidden');
    const inUrl = await fetch(`${gw.url}/console/events?key=${encodeURIComponent(gw.ownerKey)}`);
    assert.is(inUrl.status, 401);
    await inUrl.body?.cancel();
  },
);

test(
  'bounded: a cap on streams per owner (429 rate_limited with Retry-After); a closed ' + 'stream frees its place',
  async () => {
    const one = await openStream(gw.url, ownerB.apiKey);
    const two = await openStream(gw.url, ownerB.apiKey);
    const three = await openStream(gw.url, ownerB.apiKey);
    assert.is(one.status, 200);
    assert.is(two.status, 200);
    assert.is(three.status, 429);
    assert.is(three.body.error.code, 'rate_limited');
    assert.ok(Number(three.headers.get('retry-after')) > 0);
    const otherOwner = await openStream(gw.url, gw.ownerKey);
    assert.is(otherOwner.status, 200, 'the cap is per owner');
    one.close();
    await new Promise((r) => setTimeout(r, 100));
    const again = await openStream(gw.url, ownerB.apiKey);
    assert.is(again.status, 200);
    // Heartbeats keep idle proxies from closing the stream.
    const raw = await fetch(`${gw.url}/console/events`, { headers: { authorization: `Bearer ${gw.ownerKey}` } });
    const reader = raw.body!.getReader();
    let text = '';
    const until = Date.now() + 2000;
    while (!text.includes(': heartbeat') && Date.now() < until)
      text += new TextDecoder().decode((await reader.read()).value);
    assert.match(text, /: heartbeat/);
    await reader.cancel();
    for (const s of [two, again, otherOwner]) s.close();
  },
);

test('bounded per instance too: past maxStreams, any owner gets 429', async () => {
  const smallDb = sqliteDb();
  const small = await startTestGateway(smallDb, { console: { maxStreams: 1 } });
  try {
    const other = (await call(small.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: {} })).body.apiKey;
    const first = await openStream(small.url, small.ownerKey);
    assert.is(first.status, 200);
    const second = await openStream(small.url, other);
    assert.is(second.status, 429);
    assert.match(second.body.error.message, /instance/);
    first.close();
  } finally {
    await small.close();
    await smallDb.drop();
  }
});

test('a revoked key ends its streams within a heartbeat', async () => {
  const added = (await call(gw.url, 'POST', `/admin/owners/${ownerB.ownerId}/keys`, { key: ADMIN_KEY })).body;
  const s = await openStream(gw.url, added.apiKey);
  await s.waitFor((e) => e.event === 'ready');
  assert.is(
    (await call(gw.url, 'DELETE', `/admin/owners/${ownerB.ownerId}/keys/${added.keyId}`, { key: ADMIN_KEY })).status,
    200,
  );
  const end = await s.waitFor((e) => e.event === 'end', 3000);
  assert.is(end.data.reason, 'unauthorized');
  await s.ended;
});

test("the session's webhook dispatch log: the owner's deliveries, 404 for another owner", async () => {
  const s = await createSession(gw, { webhookUrl: hookUrl });
  const other = await createSession(gw, { webhookUrl: hookUrl });
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  assert.is((await proxy(gw, other.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  await gw.gw.idle();
  const log = await call(gw.url, 'GET', `/sessions/${s.sessionId}/webhooks`, { key: gw.ownerKey });
  assert.is(log.status, 200);
  assert.equal(
    log.body.dispatches.map((d: any) => [d.eventType, d.status, d.attempts, d.lastStatus]),
    [['payment.completed', 'delivered', 1, 204]],
  );
  assert.not.ok('body' in log.body.dispatches[0], 'the signed body (and its data) is not repeated');
  assert.is((await call(gw.url, 'GET', `/sessions/${s.sessionId}/webhooks`, { key: ownerB.apiKey })).status, 404);
  assert.is((await call(gw.url, 'GET', `/sessions/${s.sessionId}/webhooks?limit=0`, { key: gw.ownerKey })).status, 400);
});

test('closing the server is not held open by a console tab', async () => {
  const s = await openStream(gw.url, gw.ownerKey);
  await s.waitFor((e) => e.event === 'ready');
  await gw.close();
  // A stream that held close() open would be cut when the grace period ran out, not ended by the server.
  assert.is(await s.ended, 'clean');
  assert.ok(s.events.some((e) => e.event === 'end' && e.data.reason === 'shutdown'));
  gw.close = async () => {};
});

test.run();
