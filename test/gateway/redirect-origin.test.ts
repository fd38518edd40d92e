/**
 * A payment belongs to the origin that asked for it (gateway/README.md "Redirects"): a paid or
 * held retry that the merchant redirects to another origin carries none of its payment headers
 * there (the hold's payment id, the SBA, a receipt, an x402 or MPP credential in Authorization),
 * a hold is not followed there at all (its capture is the holding origin's word alone), and what
 * another origin answers about a payment it never received is not read as a settlement.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createForwarder } from '../../gateway/net/forwarder.js';
import {
  call,
  createSession,
  rawRequest,
  sqliteDb,
  startTestGateway,
  type TestDb,
  type TestGateway,
} from './helpers.js';

const MAX = '3000';
let db: TestDb;
let gw: TestGateway;
let holder: Server;
let other: Server;
let holderUrl = '';
let otherUrl = '';
/** What the other origin received, and what it claims about the capture. */
const otherSaw: IncomingHttpHeaders[] = [];
const holdsSeen: string[] = [];

const listen = async (srv: Server) => {
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
};

test.before(async () => {
  // The holding merchant: asks for a hold, then answers the held retry by its path.
  holder = createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    const hold = req.headers['x-payment-hold'];
    if (u.pathname === '/proof') {
      // A paid (not held) retry redirected away: only the first request is asked to pay.
      if (!req.headers['x-payment-receipt']) {
        res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'm-1' }) });
        return res.end('{}');
      }
      res.writeHead(307, { location: `${otherUrl}/claims` });
      return res.end();
    }
    if (typeof hold !== 'string') {
      res.writeHead(402, { 'x-payment': JSON.stringify({ maxAmount: MAX, currency: 'USD', address: 'meter-1' }) });
      return res.end('{}');
    }
    holdsSeen.push(`${u.pathname}:${hold}`);
    if (u.pathname === '/away') res.writeHead(307, { location: `${otherUrl}/claims` });
    else if (u.pathname === '/away-captured')
      res.writeHead(307, { location: `${otherUrl}/claims`, 'x-payment-captured': '1200' });
    else if (u.pathname === '/same') res.writeHead(307, { location: '/done' });
    else res.writeHead(200, { 'x-payment-captured': '700' });
    res.end();
  });
  // Another origin: records what reached it, and claims a capture and a settlement of its own.
  other = createServer((req, res) => {
    otherSaw.push(req.headers);
    res.writeHead(200, {
      'x-payment-captured': '2500',
      'payment-response': 'eyJzdWNjZXNzIjp0cnVlfQ==',
      'payment-receipt': 'forged',
      'x-other': 'yes',
    });
    res.end('{"other":true}');
  });
  holderUrl = await listen(holder);
  otherUrl = await listen(other);
  db = sqliteDb();
  gw = await startTestGateway(db);
});
test.after(async () => {
  await gw.close();
  await db.drop();
  for (const srv of [holder, other]) {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
});

/** /proxy without following redirects (fetch would follow the gateway's 307 itself). */
const pay = (token: string, path: string) =>
  rawRequest(gw.url, 'GET', '/proxy', {
    authorization: `Bearer ${token}`,
    'x-target-url': `${holderUrl}${path}`,
    'x-ctl-purpose': 'api:search',
  });
const spend = async (id: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
  return [v.spentMinor, v.reservedMinor];
};

test("a held retry redirected to another origin: not followed, the other origin's capture never read", async () => {
  const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' }, trustLevel: 1 });
  const seenBefore = otherSaw.length;
  const res = await pay(s.sessionToken, '/away');
  assert.is(otherSaw.length, seenBefore, 'the other origin never saw the held request');
  assert.is(res.status, 307, res.text);
  assert.is(res.headers.location, `${otherUrl}/claims`, 'the agent is told where, and goes there itself');
  // The holder answered with a redirect and no capture: nothing captured (PROTOCOL.md §15).
  assert.equal(await spend(s.sessionId), ['0', '0']);
});

test('a holder that captures on its redirect: its own capture counts', async () => {
  const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
  const res = await pay(s.sessionToken, '/away-captured');
  assert.is(res.status, 307, res.text);
  assert.equal(await spend(s.sessionId), ['1200', '0']);
});

test('a same-origin redirect keeps the hold: the capture is the holder’s final answer', async () => {
  const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
  const res = await pay(s.sessionToken, '/same');
  assert.is(res.status, 200, res.text);
  assert.ok(
    holdsSeen.some((h) => h.startsWith('/done:')),
    'the hold followed within the origin',
  );
  assert.equal(await spend(s.sessionId), ['700', '0']);
});

test('a paid retry redirected away: the proof stays behind, the other origin answers as any host', async () => {
  const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' }, trustLevel: 1 });
  const res = await pay(s.sessionToken, '/proof');
  assert.is(res.status, 200, res.text);
  const seen = otherSaw.at(-1)!;
  for (const h of ['x-payment-receipt', 'x-ctl-sba', 'x-payment-hold', 'authorization'])
    assert.is(seen[h], undefined, h);
  assert.is(res.headers['x-other'], 'yes', "the other origin's answer is forwarded");
  assert.is(res.headers['x-payment-captured'], undefined, 'but not its word on a payment it never received');
  assert.equal(await spend(s.sessionId), ['100', '0']);
});

test('the forwarder: credentials stay on their origin, settlement claims of another origin are dropped', async () => {
  const forwarder = createForwarder({ policy: { allowPrivate: true } });
  try {
    // An MPP credential rides in Authorization; x402's in PAYMENT-SIGNATURE / X-PAYMENT.
    const paid = await forwarder.send({
      url: new URL(`${holderUrl}/proof`),
      method: 'GET',
      headers: {
        authorization: 'Payment abc',
        'payment-signature': 'sig',
        'x-payment': 'v1',
        'x-payment-receipt': 'r',
      },
    });
    assert.is(paid.url.origin, otherUrl);
    const seen = otherSaw.at(-1)!;
    for (const h of ['authorization', 'payment-signature', 'x-payment', 'x-payment-receipt'])
      assert.is(seen[h], undefined, h);
    for (const h of ['x-payment-captured', 'payment-response', 'payment-receipt'])
      assert.is(paid.headers[h], undefined, h);
    assert.is(paid.headers['x-other'], 'yes');
    // Nothing of a payment sent: another origin's answer is whole (its 402 terms are what get paid).
    const free = await forwarder.send({ url: new URL(`${holderUrl}/proof`), method: 'GET', headers: {} });
    assert.is(free.status, 402, 'no redirect without a receipt');
  } finally {
    forwarder.close();
  }
});

test.run();
