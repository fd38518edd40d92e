/**
 * Spend webhooks (spec §6): Standard-Webhooks-signed deliveries of the session's
 * events to its webhookUrl, retried after a failure, every delivery in the dispatch log.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook } from '../../service-kit/index.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  inOneHour,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let hook: Server;
let hookUrl = '';
let failFirst = 1;
const received: { headers: Record<string, string | undefined>; body: string }[] = [];

test.before(async () => {
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (failFirst-- > 0) {
        res.writeHead(500);
        return res.end();
      }
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  db = sqliteDb();
  gw = await startTestGateway(db, { webhooks: { baseDelayMs: 20, maxAttempts: 3 } });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await new Promise((r) => hook.close(r));
  await db.drop();
});

test(
  'payment.completed, threshold_crossed, payment.denied, session.paused, session.revoked: ' + 'signed and logged',
  async () => {
    const s = await createSession(gw, {
      budget: { amount: '200', currency: 'USD' },
      webhookUrl: hookUrl,
      thresholds: [50, 100],
      softLimit: { amount: '100' },
    });
    assert.match(s.webhookSecret!, /^whsec_/);
    for (let i = 0; i < 2; i++)
      assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:search' })).status, 200);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:other' })).status, 402);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:search' })).status, 409);
    assert.is((await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).status, 200);
    await gw.gw.idle();
    const events = received.map((r) => {
      assert.ok(verifyWebhook(s.webhookSecret!, r.headers, r.body), 'Standard Webhooks signature verifies');
      assert.not.ok(verifyWebhook(s.webhookSecret!, r.headers, r.body + ' '), 'and fails on a changed body');
      return JSON.parse(r.body) as { type: string; data: Record<string, unknown> };
    });
    const types = events.map((e) => e.type);
    assert.is(types.filter((t) => t === 'payment.completed').length, 2);
    const thresholds = events
      .filter((e) => e.type === 'session.threshold_crossed')
      .map((e) => e.data.threshold)
      .sort();
    assert.equal(thresholds, [100, 50]);
    assert.ok(events.some((e) => e.type === 'payment.denied' && e.data.code === 'purpose_not_allowed'));
    assert.ok(events.some((e) => e.type === 'payment.denied' && e.data.code === 'session_paused'));
    const paused = events.find((e) => e.type === 'session.paused');
    assert.match(String(paused?.data.continuationToken), /^ctn_/);
    assert.ok(types.includes('session.revoked'));
    assert.ok(events.every((e) => e.data.sessionId === s.sessionId));
    // The first delivery failed with 500 and was retried; the dispatch log says so.
    const log = await gw.db.all<{ status: string; attempts: number }>(
      `SELECT status, attempts FROM gw_webhook_dispatches`,
    );
    assert.is(log.length, events.length);
    assert.ok(log.every((r) => r.status === 'delivered'));
    assert.ok(
      log.some((r) => Number(r.attempts) === 2),
      'one delivery needed a retry',
    );
  },
);

test('a webhookUrl on a private address is refused unless private targets are allowed', async () => {
  const db2 = sqliteDb();
  const strict = await startTestGateway(db2, { targets: { allowPrivate: false } });
  try {
    const res = await call(strict.url, 'POST', '/sessions', {
      key: strict.ownerKey,
      body: {
        budget: { amount: '1', currency: 'USD' },
        purposes: ['a:b'],
        expiresAt: inOneHour(),
        webhookUrl: 'http://169.254.169.254/hook',
      },
    });
    assert.is(res.status, 403);
    assert.is(res.body.error.code, 'target_not_allowed');
  } finally {
    await strict.close();
    await db2.drop();
  }
});

test('webhook deliveries go through the address guard at connect time (DNS rebinding)', async () => {
  const db2 = sqliteDb();
  const hookPort = Number(new URL(hookUrl).port);
  const before = received.length;
  failFirst = 0;
  const strict = await startTestGateway(db2, {
    targets: { allowPrivate: false, allowHosts: [`127.0.0.1:${merchant.port}`] },
    webhooks: { baseDelayMs: 10, maxAttempts: 2 },
    // A name that looks public at creation and resolves to loopback at delivery.
    resolve: (host, _o, cb) =>
      host === 'hooks.example'
        ? cb(null, [{ address: '127.0.0.1', family: 4 }])
        : cb(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), []),
  });
  try {
    const s = await createSession(strict, { webhookUrl: `http://hooks.example:${hookPort}/hook` });
    assert.is((await proxy(strict, s.sessionToken, `${merchant.url}/w`, { purpose: 'api:search' })).status, 200);
    await strict.gw.idle();
    assert.is(received.length, before, 'nothing delivered to the loopback receiver');
    const log = await strict.db.all<{ status: string; last_error: string }>(
      `SELECT status, last_error FROM gw_webhook_dispatches`,
    );
    assert.ok(log.length >= 1);
    assert.ok(
      log.every((r) => r.status === 'failed'),
      JSON.stringify(log),
    );
  } finally {
    await strict.close();
    await db2.drop();
  }
});

test.run();
