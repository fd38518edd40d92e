/**
 * A payment committed before the paid retry failed (gateway/README.md "Errors"): a merchant that
 * takes the payment and then loses its answer (a redirect to a refused address, a timeout, a body
 * too large, a reset connection) is answered `502 paid_response_lost` with `X-Ctl-Receipt-Id`,
 * never as if nothing was paid; the SDK client and the MCP tool do not send it again.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGatewayClient, GatewayError } from '../../src/client/index.js';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Server;
let victim: Server;
let merchantUrl = '';
let victimPort = 0;
const paidRetries: string[] = [];

test.before(async () => {
  victim = createServer((_req, res) => res.end('internal'));
  await new Promise<void>((r) => victim.listen(0, '127.0.0.1', r));
  victimPort = (victim.address() as AddressInfo).port;
  // Takes the payment on every path, then fails its answer in the way the path names.
  merchant = createServer((req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    if (!req.headers['x-payment-receipt']) {
      res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'merchant-1' }) });
      return res.end();
    }
    paidRetries.push(path);
    if (path === '/redirect') {
      res.writeHead(302, { location: `http://127.0.0.1:${victimPort}/admin` });
      return res.end();
    }
    if (path === '/slow') return; // never answers
    if (path === '/large') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('x'.repeat(64 * 1024));
    }
    if (path === '/reset') return req.socket.destroy();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"paid":true}');
  });
  await new Promise<void>((r) => merchant.listen(0, '127.0.0.1', r));
  const port = (merchant.address() as AddressInfo).port;
  merchantUrl = `http://127.0.0.1:${port}`;
  db = sqliteDb();
  gw = await startTestGateway(db, {
    // Only the merchant is reachable: its redirect to another local port is refused (403 target_not_allowed before the
    // fix).
    targets: { allowPrivate: false, allowHosts: [`127.0.0.1:${port}`] },
    forwardTimeoutMs: 400,
    maxResponseBytes: 4096,
  });
});
test.after(async () => {
  await gw.close();
  merchant.closeAllConnections();
  await new Promise((r) => merchant.close(r));
  await new Promise((r) => victim.close(r));
  await db.drop();
});

const books = async (sessionId: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${sessionId}`, { key: gw.ownerKey })).body;
  const r = (await call(gw.url, 'GET', `/sessions/${sessionId}/receipts`, { key: gw.ownerKey })).body;
  return {
    spent: v.spentMinor as string,
    reserved: v.reservedMinor as string,
    receipts: (r.receipts as { receiptId: string }[]).map((x) => x.receiptId),
  };
};

for (const [path, cause] of [
  ['/redirect', /target|not allowed|private/i],
  ['/slow', /within 400 ms/],
  ['/large', /larger than 4096 bytes/],
  ['/reset', /could not be reached|aborted|ECONNRESET|socket hang up/i],
] as const) {
  test(`paid, then the answer is lost (${path.slice(1)}): 502 paid_response_lost naming the receipt`, async () => {
    const s = await createSession(gw);
    const before = paidRetries.length;
    // no Idempotency-Key
    const res = await proxy(gw, s.sessionToken, `${merchantUrl}${path}`, { purpose: 'api:search' });
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'paid_response_lost');
    assert.is(res.headers.get('x-ctl-gateway-error'), 'paid_response_lost');
    assert.match(res.body.error.message, cause);
    assert.match(res.body.error.message, /payment was made/);
    const b = await books(s.sessionId);
    assert.equal([b.spent, b.reserved], ['100', '0'], 'the payment stands');
    assert.is(b.receipts.length, 1);
    assert.is(res.headers.get('x-ctl-receipt-id'), b.receipts[0], 'the answer names the receipt of the payment made');
    assert.is(paidRetries.length - before, 1, 'the merchant got one paid retry');
  });
}

test('the SDK client does not send a paid_response_lost call again, and names the receipt', async () => {
  const s = await createSession(gw);
  let proxied = 0;
  const counting = ((u: string | URL | Request, i?: RequestInit) => {
    if (String(u).endsWith('/proxy')) proxied++;
    return fetch(u, i);
  }) as typeof fetch;
  const agent = createGatewayClient({ baseUrl: gw.url, fetch: counting, sleep: async () => {} }).session(
    s.sessionToken,
  );
  const e = await agent.fetch(`${merchantUrl}/reset`, { purpose: 'api:search', retries: 3 }).then(
    () => undefined,
    (x) => x,
  );
  assert.ok(e instanceof GatewayError, String(e));
  assert.is(e.code, 'paid_response_lost');
  assert.is(e.status, 502);
  const b = await books(s.sessionId);
  assert.is(e.receiptId, b.receipts[0]);
  assert.is(proxied, 1, 'sent once');
  assert.is(b.spent, '100');
});

test.run();
