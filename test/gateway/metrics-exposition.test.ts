/**
 * GET /metrics as a Prometheus user reads it (issue: metrics a Prometheus user expects): process
 * and Node.js defaults, and the gateway's business metrics with conventional names, types and
 * closed label sets, moving with real traffic; sessions by state read from the database (SQLite
 * and PostgreSQL).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type TestDb,
  type Merchant,
} from './helpers.js';
import { assertBoundedLabels, scrape } from '../service-kit/prometheus-scrape.js';

let merchant: Merchant;
let hook: Server;
let hookBase = '';
let failFirst = 0;

test.before(async () => {
  merchant = await startMerchant({ amount: '100' });
  // /hook fails its first request (a retry, then delivered); /dead always fails (dead letter).
  hook = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const fail = req.url === '/dead' || (req.url === '/hook' && failFirst-- > 0);
      res.writeHead(fail ? 500 : 204);
      res.end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookBase = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
});
test.after(async () => {
  await merchant.close();
  await new Promise((r) => hook.close(r));
});

async function exercise(testDb: TestDb) {
  failFirst = 1;
  const gw = await startTestGateway(testDb, { webhooks: { baseDelayMs: 10, maxAttempts: 2 } });
  try {
    const before = await scrape(gw.url);
    for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes'])
      before.family(name, name.endsWith('_total') ? 'COUNTER' : 'GAUGE');
    before.family('nodejs_heap_size_used_bytes', 'GAUGE');
    before.family('nodejs_eventloop_lag_seconds', 'GAUGE');
    const passesAtStart = before.value('ctl_gateway_reconcile_passes_total');
    assert.ok(passesAtStart >= 1, 'the pass at start is counted');
    for (const state of ['active', 'paused', 'revoked', 'expired'])
      assert.is(before.value('ctl_gateway_sessions', { state }), 0);

    const paying = await createSession(gw, { webhookUrl: `${hookBase}/hook` });
    const dead = await createSession(gw, { webhookUrl: `${hookBase}/dead` });
    await createSession(gw);
    for (let i = 0; i < 2; i++)
      assert.is((await proxy(gw, paying.sessionToken, `${merchant.url}/p`, { purpose: 'api:search' })).status, 200);
    assert.is((await proxy(gw, paying.sessionToken, `${merchant.url}/p`, { purpose: 'api:other' })).status, 402);
    assert.is((await proxy(gw, dead.sessionToken, `${merchant.url}/p`, { purpose: 'api:other' })).status, 402);
    assert.is((await call(gw.url, 'DELETE', `/sessions/${dead.sessionId}`, { key: gw.ownerKey })).status, 200);
    const settled = await gw.gw.reconcile(0);
    await gw.gw.idle();

    const after = await scrape(gw.url);
    after.family('ctl_gateway_sessions', 'GAUGE');
    assert.is(after.value('ctl_gateway_sessions', { state: 'active' }), 2);
    assert.is(after.value('ctl_gateway_sessions', { state: 'revoked' }), 1);
    assert.is(after.value('ctl_gateway_sessions', { state: 'paused' }), 0);

    after.family('ctl_gateway_payments_total', 'COUNTER');
    assert.is(after.value('ctl_gateway_payments_total', { rail: 'ledger' }), 2);
    after.family('ctl_gateway_payment_duration_seconds', 'HISTOGRAM');
    assert.is(after.value('ctl_gateway_payment_duration_seconds'), 2, 'histogram count');
    after.family('ctl_gateway_refusals_total', 'COUNTER');
    assert.is(after.value('ctl_gateway_refusals_total', { code: 'purpose_not_allowed', rail: 'ledger' }), 2);

    after.family('ctl_gateway_reconcile_passes_total', 'COUNTER');
    assert.is(after.value('ctl_gateway_reconcile_passes_total'), passesAtStart + 1);
    after.family('ctl_gateway_reconciled_payments_total', 'COUNTER');
    assert.is(after.value('ctl_gateway_reconciled_payments_total', { outcome: 'committed' }), settled.committed);
    assert.is(after.value('ctl_gateway_reconciled_payments_total', { outcome: 'released' }), settled.released);

    // /hook: 2 payment.completed + 1 payment.denied, the first failing once; /dead: payment.denied
    // and session.revoked, each failing twice (maxAttempts 2) and then dead-lettered.
    after.family('ctl_gateway_webhook_deliveries_total', 'COUNTER');
    const delivered = after.value('ctl_gateway_webhook_deliveries_total', { outcome: 'delivered' });
    const retried = after.value('ctl_gateway_webhook_deliveries_total', { outcome: 'retry' });
    const deadLettered = after.value('ctl_gateway_webhook_deliveries_total', { outcome: 'dead_letter' });
    const log = await gw.db.all<{ status: string; attempts: number | string }>(
      `SELECT status, attempts FROM gw_webhook_dispatches`,
    );
    assert.is(delivered, log.filter((r) => r.status === 'delivered').length);
    assert.is(deadLettered, log.filter((r) => r.status === 'failed').length);
    assert.ok(delivered >= 3 && deadLettered >= 2, `delivered ${delivered}, dead letters ${deadLettered}`);
    assert.is(
      retried,
      log.reduce((n, r) => n + Number(r.attempts) - 1, 0),
      'every attempt but the last of each row was a retry',
    );

    after.family('ctl_gateway_http_requests_total', 'COUNTER');
    for (const name of [
      'ctl_gateway_sessions',
      'ctl_gateway_refusals_total',
      'ctl_gateway_payments_total',
      'ctl_gateway_http_requests_total',
      'ctl_gateway_webhook_deliveries_total',
    ]) {
      assertBoundedLabels(after.family(name, name === 'ctl_gateway_sessions' ? 'GAUGE' : 'COUNTER'));
    }
  } finally {
    await gw.close();
  }
}

test('SQLite: process and Node.js defaults, and business metrics that move with traffic', async () => {
  const db = sqliteDb();
  try {
    await exercise(db);
  } finally {
    await db.drop();
  }
});

test('PostgreSQL: the same, sessions by state read with one GROUP BY', async () => {
  const db = await postgresDb('gateway metrics on PostgreSQL');
  if (!db) return;
  try {
    await exercise(db);
  } finally {
    await db.drop();
  }
});

test('two gateways in one process each expose their own metrics', async () => {
  const a = sqliteDb();
  const b = sqliteDb();
  const ga = await startTestGateway(a);
  const gb = await startTestGateway(b);
  try {
    await createSession(ga);
    assert.is((await scrape(ga.url)).value('ctl_gateway_sessions', { state: 'active' }), 1);
    const sb = await scrape(gb.url);
    assert.is(sb.value('ctl_gateway_sessions', { state: 'active' }), 0);
    sb.family('process_cpu_seconds_total', 'COUNTER');
  } finally {
    await ga.close();
    await gb.close();
    await a.drop();
    await b.drop();
  }
});

test('a scrape while the database is unreachable still answers, without sessions samples', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    await createSession(gw);
    assert.is((await scrape(gw.url)).value('ctl_gateway_sessions', { state: 'active' }), 1);
    await gw.db.close();
    const s = await scrape(gw.url);
    s.family('process_cpu_seconds_total', 'COUNTER');
    assert.equal(s.family('ctl_gateway_sessions', 'GAUGE').metrics, []);
  } finally {
    await gw.close().catch(() => {});
    await db.drop();
  }
});

test.run();
