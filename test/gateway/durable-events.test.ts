/**
 * Durable events (spec §6): a gateway process is SIGKILLed with webhook deliveries pending and
 * the receiver down; after a restart and the receiver coming up, every event arrives, each with
 * the webhook-id it was given in the transaction of its change (none new). On SQLite (one
 * process) and on PostgreSQL (two processes on one database: each delivery attempted by one
 * instance at a time, one audit chain). And: no change commits without its audit entry.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fileURLToPath } from 'node:url';
import { createAuditLog, verifyWebhook } from '../../service-kit/index.js';
import {
  ADMIN_KEY,
  call,
  createSession,
  inOneHour,
  postgresDb,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type TestDb,
} from './helpers.js';
import { downReceiver, kill, startChild, waitFor } from '../helpers/webhook-receiver.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/gateway-process.js', import.meta.url));

type OutboxRow = { message_id: string; event_type: string; status: string; attempts: number | string };

async function killAndResume(db: TestDb, instances: number) {
  const merchant = await startMerchant({ amount: '100' });
  const hook = await downReceiver();
  const env = {
    DATABASE_URL: db.url,
    CTL_TEST_PG_SCHEMA: db.schema,
    CTL_GATEWAY_ADMIN_KEY: ADMIN_KEY,
    CTL_WEBHOOK_BASE_DELAY_MS: '100',
    CTL_WEBHOOK_MAX_DELAY_MS: '400',
    CTL_WEBHOOK_MAX_ATTEMPTS: '1000',
    CTL_WEBHOOK_POLL_MS: '100',
    CTL_WEBHOOK_TIMEOUT_MS: '1000',
  };
  const start = () => Promise.all(Array.from({ length: instances }, () => startChild(FIXTURE, env)));
  let procs = await start();
  const reader = await db.open();
  try {
    const owner = await call(procs[0].url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'fleet' } });
    const key = owner.body.apiKey as string;
    const created = await call(procs[0].url, 'POST', '/sessions', {
      key,
      body: {
        budget: { amount: '1000', currency: 'USD' },
        purposes: ['api:search'],
        expiresAt: inOneHour(),
        webhookUrl: hook.url,
        thresholds: [50],
      },
    });
    assert.is(created.status, 201, created.text);
    const s = created.body as { sessionId: string; sessionToken: string; webhookSecret: string };
    for (let i = 0; i < 6; i++) {
      const r = await proxy(procs[i % instances], s.sessionToken, `${merchant.url}/item/${i}`, {
        purpose: 'api:search',
      });
      assert.is(r.status, 200, r.text);
    }
    // A session without thresholds: on PostgreSQL its commit carries its event rows in the commit statement itself.
    const plain = await call(procs[0].url, 'POST', '/sessions', {
      key,
      body: {
        budget: { amount: '1000', currency: 'USD' },
        purposes: ['api:search'],
        expiresAt: inOneHour(),
        webhookUrl: hook.url,
      },
    });
    assert.is(
      (await proxy(procs[instances - 1], plain.body.sessionToken, `${merchant.url}/plain`, { purpose: 'api:search' }))
        .status,
      200,
    );
    assert.is(
      (await proxy(procs[instances - 1], s.sessionToken, `${merchant.url}/x`, { purpose: 'api:other' })).status,
      402,
    );
    assert.is((await call(procs[instances - 1].url, 'DELETE', `/sessions/${s.sessionId}`, { key })).status, 200);

    // 7 payment.completed, 1 threshold (50 %), 1 payment.denied, 1 session.revoked: all pending,
    // each attempted at least once against the receiver that is down.
    const rows = () =>
      reader.all<OutboxRow>(`SELECT message_id, event_type, status, attempts FROM gw_webhook_dispatches`);
    await waitFor('failed first attempts', async () => {
      const r = await rows();
      return r.length === 10 && r.every((x) => x.status === 'pending' && Number(x.attempts) >= 1);
    });
    const before = await rows();
    const ids = new Set(before.map((r) => r.message_id));
    assert.is(ids.size, 10, 'one webhook-id per event');

    await Promise.all(procs.map((p) => kill(p.child)));
    assert.is(hook.got.length, 0);
    procs = await start();
    await hook.up();
    await waitFor('every delivery', async () => (await rows()).every((x) => x.status === 'delivered'));

    assert.equal(hook.ids(), ids, 'every event arrived, none with a new id');
    assert.is(hook.maxConcurrentPerId, 1, 'one attempt of an id at a time');
    const types = hook.got.map((d) => {
      const secret =
        (JSON.parse(d.body) as { data: { sessionId: string } }).data.sessionId === s.sessionId
          ? s.webhookSecret
          : plain.body.webhookSecret;
      assert.ok(verifyWebhook(secret, d.headers as Record<string, string>, d.body), 'signed with the session secret');
      return (JSON.parse(d.body) as { type: string }).type;
    });
    assert.equal([...new Set(types)].sort(), [
      'payment.completed',
      'payment.denied',
      'session.revoked',
      'session.threshold_crossed',
    ]);
    assert.is(types.filter((t) => t === 'payment.completed').length >= 7, true);

    // The audit chain: one, unforked, with each change once, every staged entry sealed.
    await waitFor(
      'sealed audit entries',
      async () => (await reader.all('SELECT id FROM gw_audit_log_staged')).length === 0,
    );
    const audit = createAuditLog(reader, 'gw_audit_log');
    const v = await audit.verify();
    assert.ok(v.ok, JSON.stringify(v));
    const actions = (await audit.list({ limit: 1000 })).map((e) => e.action);
    assert.equal(actions.filter((a) => a === 'payment.completed').length, 7);
    assert.equal(actions.filter((a) => a === 'session.revoked').length, 1);
    assert.equal(actions.filter((a) => a === 'session.created').length, 2);
    assert.not.ok(actions.includes('payment.denied'), 'a refusal changes nothing: delivered, not audited');
    assert.not.ok(
      (await audit.list({ limit: 1000 })).some((e) => e.data.includes('ctn_')),
      'no continuation token in the audit log',
    );
  } finally {
    await Promise.all(procs.map((p) => kill(p.child)));
    await reader.close();
    await hook.close();
    await merchant.close();
  }
}

test(
  'SQLite: SIGKILL with deliveries pending and the receiver down; after restart every ' + 'event arrives with its id',
  async () => {
    const db = sqliteDb();
    try {
      await killAndResume(db, 1);
    } finally {
      await db.drop();
    }
  },
);

test(
  'PostgreSQL, two processes: SIGKILL both with deliveries pending; after restart every ' +
    'event arrives once per id, one chain',
  async () => {
    const db = await postgresDb('durable events on PostgreSQL');
    if (!db) return;
    try {
      await killAndResume(db, 2);
    } finally {
      await db.drop();
    }
  },
);

test('a change whose audit entry cannot be written does not commit (same transaction)', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    const s = await createSession(gw);
    // The audit append fails: the revocation must roll back with it.
    await gw.db.exec(
      `CREATE TRIGGER no_audit BEFORE INSERT ON gw_audit_log_staged BEGIN SELECT RAISE(ABORT, 'audit refused'); END`,
    );
    const r = await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
    assert.is(r.status, 500);
    const row = await gw.db.get<{ state: string }>(`SELECT state FROM gw_sessions WHERE id = ?`, [s.sessionId]);
    assert.is(row?.state, 'active', 'not revoked without its audit entry');
    await gw.db.exec(`DROP TRIGGER no_audit`);
    assert.is((await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).status, 200);
    await gw.gw.idle(); // seals the staged entries into the chain
    const entries = await createAuditLog(gw.db, 'gw_audit_log').list();
    assert.equal(
      entries.map((e) => e.action),
      ['owner.create', 'session.created', 'session.revoked'],
    );
  } finally {
    await gw.close();
    await db.drop();
  }
});

test(
  'dead letters: after the last attempt, visible in the dispatch log; redelivered with ' +
    'the same webhook-id; the audit log is served and verifies',
  async () => {
    const db = sqliteDb();
    const hook = await downReceiver();
    const merchant = await startMerchant({ amount: '100' });
    const gw = await startTestGateway(db, { webhooks: { maxAttempts: 2, baseDelayMs: 10, pollMs: 20 } });
    try {
      const s = await createSession(gw, { webhookUrl: hook.url });
      assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
      await gw.gw.idle();
      const dead = (await call(gw.url, 'GET', '/admin/webhooks/dispatches?status=failed', { key: ADMIN_KEY })).body
        .dispatches;
      assert.is(dead.length, 1);
      assert.equal([dead[0].eventType, dead[0].attempts, dead[0].nextAttemptAt], ['payment.completed', 2, null]);
      assert.match(dead[0].lastError, /fetch failed|ECONNREFUSED|connect/i);
      assert.is((await call(gw.url, 'GET', '/admin/webhooks/dispatches?status=dead', { key: ADMIN_KEY })).status, 400);
      assert.is((await call(gw.url, 'GET', '/admin/webhooks/dispatches', { key: gw.ownerKey })).status, 403);
      await hook.up();
      const again = await call(
        gw.url,
        'POST',
        `/admin/webhooks/dispatches/${encodeURIComponent(dead[0].id)}/redeliver`,
        {
          key: ADMIN_KEY,
        },
      );
      assert.is(again.status, 202);
      assert.is(
        (
          await call(gw.url, 'POST', `/admin/webhooks/dispatches/${encodeURIComponent(dead[0].id)}/redeliver`, {
            key: ADMIN_KEY,
          })
        ).status,
        404,
      );
      await gw.gw.idle();
      assert.equal([...hook.ids()], [dead[0].messageId]);
      const audit = (await call(gw.url, 'GET', '/admin/audit', { key: ADMIN_KEY })).body.entries;
      // The owner made by the test harness, then the session and its payment.
      assert.equal(
        audit.map((e: { action: string }) => e.action),
        ['owner.create', 'session.created', 'payment.completed'],
      );
      assert.equal((await call(gw.url, 'GET', '/admin/audit/verify', { key: ADMIN_KEY })).body, {
        ok: true,
        count: 3,
        headHash: audit[2].hash,
      });
    } finally {
      await gw.close();
      await merchant.close();
      await hook.close();
      await db.drop();
    }
  },
);

test.run();
