/**
 * gateway/README.md "Secrets at rest": the `session.paused` webhook carries the continuation
 * token to the owner, signed, but the webhook dispatch log (`gw_webhook_dispatches`) never holds
 * it: only its nonce, which continues nothing without the MAC.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook } from '../../service-kit/index.js';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

let merchant: Merchant;
let hook: Server;
let hookUrl = '';
let failFirst = 0;
const received: { headers: Record<string, string | undefined>; body: string }[] = [];

test.before(async () => {
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (failFirst-- > 0) {
        res.writeHead(503);
        return res.end();
      }
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await merchant.close();
  await new Promise((r) => hook.close(r));
});

for (const kind of ['sqlite', 'postgres'] as const) {
  test(
    `${kind}: session.paused: the receiver gets the token (signed, after a retry too); ` +
      'the dispatch log holds no token',
    async () => {
      const db = kind === 'sqlite' ? sqliteDb() : await postgresDb('continuation tokens at rest on PostgreSQL');
      if (!db) return;
      const gw = await startTestGateway(db, { webhooks: { baseDelayMs: 20, maxAttempts: 4 } });
      try {
        await pausedScenario(db, gw);
      } finally {
        await gw.close();
        await db.drop();
      }
    },
  );
}

async function pausedScenario(db: TestDb, gw: TestGateway) {
  received.length = 0;
  const s = await createSession(gw, {
    budget: { amount: '100', currency: 'USD' },
    webhookUrl: hookUrl,
    softLimit: { amount: '100' },
  });
  failFirst = 1; // the first attempt fails: the retry is completed from the log too
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' })).status, 409);
  await gw.gw.idle();
  const token = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body
    .continuationToken as string;
  assert.match(token, /^ctn_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);

  const paused = received.find((r) => JSON.parse(r.body).type === 'session.paused');
  assert.ok(paused, 'session.paused delivered');
  assert.ok(verifyWebhook(s.webhookSecret!, paused!.headers, paused!.body), 'the completed body is signed');
  assert.is(JSON.parse(paused!.body).data.continuationToken, token, 'the receiver gets the whole token');

  const log = await gw.db.all<{ body: string; event_type: string; status: string; attempts: number }>(
    `SELECT body, event_type, status, attempts FROM gw_webhook_dispatches`,
  );
  const row = log.find((r) => r.event_type === 'session.paused')!;
  assert.is(row.status, 'delivered');
  assert.ok(Number(row.attempts) >= 1);
  const mac = token.split('.')[1]!;
  for (const r of log) {
    assert.not.ok(r.body.includes(token), 'no token in the dispatch log');
    assert.not.ok(r.body.includes(mac), 'not even its MAC');
  }
  assert.is(JSON.parse(row.body).data.continuationToken, token.split('.')[0], 'the log keeps the nonce alone');

  // The withheld form continues nothing.
  const refused = await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
    key: gw.ownerKey,
    body: { continuationToken: token.split('.')[0] },
  });
  assert.is(refused.status, 403);
  assert.is(refused.body.error.code, 'continuation_invalid');

  // A row an earlier version logged with the whole token is rewritten at the next start.
  const full = JSON.parse(row.body);
  full.data.continuationToken = token;
  await gw.db.run(`UPDATE gw_webhook_dispatches SET body = ? WHERE event_type = 'session.paused'`, [
    JSON.stringify(full),
  ]);
  const again = await startTestGateway(db, {}, gw.ownerKey);
  try {
    const after = await again.db.all<{ body: string }>(`SELECT body FROM gw_webhook_dispatches`);
    for (const r of after) assert.not.ok(r.body.includes(mac), 'no token in the dispatch log after a restart');
    const paused2 = after.find((r) => JSON.parse(r.body).type === 'session.paused')!;
    assert.is(JSON.parse(paused2.body).data.continuationToken, token.split('.')[0]);
  } finally {
    await again.close();
  }
}

test.run();
