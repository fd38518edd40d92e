/**
 * spec §3 last row: a payment that reaches SBA signing just after the session's `expiresAt` (the
 * session was live when the request arrived, and expired while the merchant answered its 402)
 * is `410 session_expired`, nothing paid, never `400 malformed`.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Server;
let merchantUrl = '';
let skewMs = 0;
let expireOn402 = 0;

test.before(async () => {
  // The merchant's 402 takes the gateway's clock past the session's expiry.
  merchant = createServer((req, res) => {
    if (req.headers['x-payment-receipt']) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"paid":true}');
    }
    skewMs += expireOn402;
    res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'merchant-1' }) });
    res.end();
  });
  await new Promise<void>((r) => merchant.listen(0, '127.0.0.1', r));
  merchantUrl = `http://127.0.0.1:${(merchant.address() as AddressInfo).port}`;
  db = sqliteDb();
  gw = await startTestGateway(db, { now: () => Date.now() + skewMs, expiryMaxSleepMs: 3_600_000 });
});
test.after(async () => {
  await gw.close();
  await new Promise((r) => merchant.close(r));
  await db.drop();
});

for (const velocity of [false, true]) {
  const which = velocity ? ' (reservation path)' : '';
  test(`expired between request and signature: 410 session_expired, nothing paid${which}`, async () => {
    const s = await createSession(gw, velocity ? { velocity: { maxPaymentsPerHour: 10 } } : {});
    expireOn402 = 3_600_000 + 1000; // one hour and a second: past the session's expiresAt
    try {
      const res = await proxy(gw, s.sessionToken, `${merchantUrl}/data`, { purpose: 'api:search' });
      assert.is(res.status, 410, res.text);
      assert.is(res.body.error.code, 'session_expired');
      const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
      assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
    } finally {
      expireOn402 = 0;
      skewMs = 0;
    }
  });
}

test.run();
