/** Standard Webhooks signing and the retrying dispatcher with its log (spec §5, §6). */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createSqlDispatchLog, createWebhookDispatcher, dispatchLogMigration, generateWebhookSecret, migrate, openDatabase, signWebhook, verifyWebhook,
} from '../../service-kit/index.js';

// The example of the Standard Webhooks specification (standard-webhooks/spec, "Signature scheme").
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

test('signWebhook reproduces the Standard Webhooks example', () => {
  const h = signWebhook(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body);
  assert.equal(h, { 'webhook-id': VECTOR.id, 'webhook-timestamp': String(VECTOR.timestamp), 'webhook-signature': VECTOR.signature });
});

test('verifyWebhook: accepts the right signature in time, refuses tampering, old timestamps and other secrets', () => {
  const h = signWebhook(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body);
  const now = { nowSeconds: VECTOR.timestamp + 10 };
  assert.is(verifyWebhook(VECTOR.secret, { ...h }, VECTOR.body, now), true);
  assert.is(verifyWebhook(VECTOR.secret, { ...h, 'webhook-signature': `v1,bad ${h['webhook-signature']}` }, VECTOR.body, now), true, 'any listed v1 signature');
  assert.is(verifyWebhook(VECTOR.secret, h, VECTOR.body + ' ', now), false);
  assert.is(verifyWebhook(VECTOR.secret, { ...h, 'webhook-id': 'msg_other' }, VECTOR.body, now), false);
  assert.is(verifyWebhook(VECTOR.secret, h, VECTOR.body, { nowSeconds: VECTOR.timestamp + 301 }), false);
  assert.is(verifyWebhook(generateWebhookSecret(), h, VECTOR.body, now), false);
  assert.is(verifyWebhook(VECTOR.secret, { ...h, 'webhook-signature': h['webhook-signature'].replace('v1,', 'v2,') }, VECTOR.body, now), false);
  assert.throws(() => signWebhook('whsec_!!', 'id', 1, ''), /webhook secret/);
});

async function receiver(plan: number[]) {
  const seen: Array<{ headers: IncomingMessage['headers']; body: string; status: number }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const status = plan[Math.min(seen.length, plan.length - 1)];
      seen.push({ headers: req.headers, body, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

test('dispatcher: retries with backoff until delivered, same webhook-id each time, every attempt logged', async () => {
  const db = await openDatabase('sqlite::memory:');
  await migrate(db, [dispatchLogMigration()]);
  const log = createSqlDispatchLog(db);
  const r = await receiver([500, 503, 204]);
  const secret = generateWebhookSecret();
  const d = createWebhookDispatcher({ endpoints: [{ url: r.url, secret }], log, baseDelayMs: 10, maxAttempts: 5 });
  const started = Date.now();
  const id = d.dispatch('audit.appended', { seq: 1 });
  await d.idle();
  assert.ok(Date.now() - started >= 30, 'backoff 10 ms then 20 ms');
  assert.equal(r.seen.map((s) => s.status), [500, 503, 204]);
  for (const s of r.seen) {
    assert.is(s.headers['webhook-id'], id);
    assert.ok(verifyWebhook(secret, s.headers as Record<string, string>, s.body));
  }
  assert.equal(JSON.parse(r.seen[0].body).type, 'audit.appended');
  assert.equal(JSON.parse(r.seen[0].body).data, { seq: 1 });
  const [row] = await log.list();
  assert.equal({ status: row.status, attempts: row.attempts, lastStatus: row.lastStatus, messageId: row.messageId }, { status: 'delivered', attempts: 3, lastStatus: 204, messageId: id });
  await r.close();
  await db.close();
});

test('dispatcher: gives up after maxAttempts (failed), network errors included; close() stops retries', async () => {
  const db = await openDatabase('sqlite::memory:');
  await migrate(db, [dispatchLogMigration()]);
  const log = createSqlDispatchLog(db);
  const r = await receiver([500]);
  const d = createWebhookDispatcher({ endpoints: [{ url: r.url, secret: generateWebhookSecret() }, { url: 'http://127.0.0.1:1/none', secret: generateWebhookSecret() }], log, baseDelayMs: 1, maxAttempts: 3 });
  d.dispatch('x', {});
  await d.idle();
  const rows = await log.list({ status: 'failed' });
  assert.is(rows.length, 2);
  assert.ok(rows.every((x) => x.attempts === 3));
  assert.ok(rows.some((x) => x.lastStatus === 500 && x.lastError === 'HTTP 500'));
  assert.ok(rows.some((x) => x.lastStatus === null && x.lastError !== null));

  const slow = createWebhookDispatcher({ endpoints: [{ url: r.url, secret: generateWebhookSecret() }], log, baseDelayMs: 60_000, maxAttempts: 5 });
  slow.dispatch('y', {});
  await new Promise((res) => setTimeout(res, 50));
  slow.close();
  await slow.idle(); // resolves although a 60 s backoff was pending
  const pending = await log.list({ status: 'pending' });
  assert.is(pending.length, 1);
  assert.is(pending[0].attempts, 1);
  await r.close();
  await db.close();
});

test.run();
