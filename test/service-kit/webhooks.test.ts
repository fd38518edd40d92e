/**
 * Standard Webhooks signing (checked against the reference vector) and the durable webhook
 * outbox (spec §6): written in a transaction, retried with backoff, dead-lettered, resumed by
 * another instance, claimed by one instance at a time (SQLite and PostgreSQL).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createWebhookOutbox,
  dispatchLogMigration,
  generateWebhookSecret,
  migrate,
  openDatabase,
  signWebhook,
  verifyWebhook,
  webhookOutboxMigration,
  webhookRetryFromEnv,
  type SqlDatabase,
  type WebhookOutboxOptions,
} from '../../service-kit/index.js';
import { readVectorJson } from '../helpers/vectors.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';

// The reference vector of the Standard Webhooks JavaScript library, from the shared vectors.
const VECTOR = readVectorJson<{ secret: string; msgId: string; timestamp: number; payload: string; signature: string }>(
  'standard-webhooks.json',
);

test('signWebhook reproduces the Standard Webhooks reference vector', () => {
  const h = signWebhook(VECTOR.secret, VECTOR.msgId, VECTOR.timestamp, VECTOR.payload);
  assert.equal(h, {
    'webhook-id': VECTOR.msgId,
    'webhook-timestamp': String(VECTOR.timestamp),
    'webhook-signature': VECTOR.signature,
  });
  assert.ok(verifyWebhook(VECTOR.secret, h, VECTOR.payload, { nowSeconds: VECTOR.timestamp }));
});

test('verifyWebhook: accepts the right signature in time, refuses tampering, old timestamps and other secrets', () => {
  const h = signWebhook(VECTOR.secret, VECTOR.msgId, VECTOR.timestamp, VECTOR.payload);
  const now = { nowSeconds: VECTOR.timestamp + 10 };
  assert.is(verifyWebhook(VECTOR.secret, { ...h }, VECTOR.payload, now), true);
  assert.is(
    verifyWebhook(
      VECTOR.secret,
      { ...h, 'webhook-signature': `v1,bad ${h['webhook-signature']}` },
      VECTOR.payload,
      now,
    ),
    true,
    'any listed v1 signature',
  );
  assert.is(verifyWebhook(VECTOR.secret, h, VECTOR.payload + ' ', now), false);
  assert.is(verifyWebhook(VECTOR.secret, { ...h, 'webhook-id': 'msg_other' }, VECTOR.payload, now), false);
  assert.is(verifyWebhook(VECTOR.secret, h, VECTOR.payload, { nowSeconds: VECTOR.timestamp + 301 }), false);
  assert.is(verifyWebhook(generateWebhookSecret(), h, VECTOR.payload, now), false);
  assert.is(
    verifyWebhook(
      VECTOR.secret,
      { ...h, 'webhook-signature': h['webhook-signature'].replace('v1,', 'v2,') },
      VECTOR.payload,
      now,
    ),
    false,
  );
  assert.throws(() => signWebhook('whsec_!!', 'id', 1, ''), /webhook secret/);
});

test('webhookRetryFromEnv reads CTL_WEBHOOK_* and refuses nonsense', () => {
  assert.equal(
    webhookRetryFromEnv({ CTL_WEBHOOK_MAX_ATTEMPTS: '3', CTL_WEBHOOK_BASE_DELAY_MS: '10', CTL_WEBHOOK_POLL_MS: '' }),
    { maxAttempts: 3, baseDelayMs: 10 },
  );
  assert.throws(() => webhookRetryFromEnv({ CTL_WEBHOOK_MAX_ATTEMPTS: '0' }), /CTL_WEBHOOK_MAX_ATTEMPTS/);
  assert.throws(() => webhookRetryFromEnv({ CTL_WEBHOOK_TIMEOUT_MS: '1e3' }), /CTL_WEBHOOK_TIMEOUT_MS/);
});

/** A receiver answering each request with the next status of `plan` (the last one repeats). */
async function receiver(plan: number[], delayMs = 0) {
  const seen: Array<{ headers: IncomingMessage['headers']; body: string; status: number }> = [];
  let inFlight = 0;
  let maxInFlightPerId = 0;
  const open = new Map<string, number>();
  const server = createServer((req, res) => {
    let body = '';
    const id = String(req.headers['webhook-id']);
    open.set(id, (open.get(id) ?? 0) + 1);
    maxInFlightPerId = Math.max(maxInFlightPerId, open.get(id)!);
    inFlight++;
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      setTimeout(() => {
        const status = plan[Math.min(seen.length, plan.length - 1)];
        seen.push({ headers: req.headers, body, status });
        inFlight--;
        open.set(id, open.get(id)! - 1);
        res.writeHead(status).end();
      }, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    seen,
    get maxInFlightPerId() {
      return maxInFlightPerId;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function sqlite() {
  const db = await openDatabase('sqlite::memory:');
  await migrate(db, [dispatchLogMigration(), webhookOutboxMigration()]);
  return db;
}

const outboxOn = (db: SqlDatabase, secret: string, o: Partial<WebhookOutboxOptions> = {}) =>
  createWebhookOutbox({ db, resolve: () => ({ secret }), baseDelayMs: 10, maxAttempts: 5, pollMs: 20, ...o });

test('outbox: retried with backoff until delivered, the same webhook-id each time, every attempt logged', async () => {
  const db = await sqlite();
  const r = await receiver([500, 503, 204]);
  const secret = generateWebhookSecret();
  const outbox = outboxOn(db, secret);
  const id = await db.tx((q) =>
    outbox.enqueue(q, { type: 'audit.appended', data: { seq: 1 } }, [{ url: r.url, target: 'a' }]),
  );
  const started = Date.now();
  outbox.start();
  await outbox.idle();
  assert.ok(Date.now() - started >= 30, 'backoff 10 ms then 20 ms');
  assert.equal(
    r.seen.map((s) => s.status),
    [500, 503, 204],
  );
  for (const s of r.seen) {
    assert.is(s.headers['webhook-id'], id);
    assert.ok(verifyWebhook(secret, s.headers as Record<string, string>, s.body));
  }
  assert.equal(JSON.parse(r.seen[0].body).type, 'audit.appended');
  assert.equal(JSON.parse(r.seen[0].body).data, { seq: 1 });
  const [row] = await outbox.log.list();
  assert.equal(
    { status: row.status, attempts: row.attempts, lastStatus: row.lastStatus, messageId: row.messageId },
    { status: 'delivered', attempts: 3, lastStatus: 204, messageId: id },
  );
  await outbox.close();
  await r.close();
  await db.close();
});

test(
  'outbox: a rolled-back event is never delivered; dead letters after maxAttempts; redeliver ' + 'keeps the id',
  async () => {
    const db = await sqlite();
    const r = await receiver([500]);
    const outbox = outboxOn(db, generateWebhookSecret(), { maxAttempts: 3, baseDelayMs: 1 });
    await db
      .tx(async (q) => {
        await outbox.enqueue(q, { type: 'x', data: { lost: true } }, [{ url: r.url, target: 'a' }]);
        throw new Error('the change failed');
      })
      .catch(() => {});
    const id = await db.tx((q) =>
      outbox.enqueue(q, { type: 'x', data: {} }, [
        { url: r.url, target: 'a' },
        { url: 'http://127.0.0.1:1/none', target: 'b' },
      ]),
    );
    outbox.start();
    await outbox.idle();
    assert.ok(
      r.seen.every((s) => !s.body.includes('lost')),
      'the rolled-back event was not sent',
    );
    const rows = await outbox.log.list({ status: 'failed' });
    assert.is(rows.length, 2);
    assert.ok(rows.every((x) => x.attempts === 3 && x.messageId === id && x.nextAttemptAt === null));
    assert.ok(rows.some((x) => x.lastStatus === 500 && x.lastError === 'HTTP 500'));
    assert.ok(
      rows.some((x) => x.lastStatus === null && x.lastError !== null),
      'network errors count',
    );

    const dead = rows.find((x) => x.endpoint === r.url)!;
    r.seen.length = 0;
    const ok = await receiver([204]);
    // the receiver moved and is back
    await db.run(`UPDATE webhook_dispatches SET endpoint = ? WHERE id = ?`, [ok.url, dead.id]);
    assert.is(await outbox.redeliver(dead.id), true);
    assert.is(await outbox.redeliver(dead.id), false, 'only a dead letter is redelivered');
    await outbox.idle();
    assert.is(ok.seen.length, 1);
    assert.is(ok.seen[0].headers['webhook-id'], id, 'the same webhook-id');
    await outbox.close();
    await r.close();
    await ok.close();
    await db.close();
  },
);

test('outbox: rows left pending by a stopped instance are delivered by the next one, with their ids', async () => {
  const dir = (await import('node:fs')).mkdtempSync(
    (await import('node:path')).join((await import('node:os')).tmpdir(), 'ctl-outbox-'),
  );
  const url = `sqlite:${dir}/o.db`;
  const db1 = await openDatabase(url);
  await migrate(db1, [dispatchLogMigration(), webhookOutboxMigration()]);
  const secret = generateWebhookSecret();
  const down = outboxOn(db1, secret, { maxAttempts: 10 });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++)
    ids.push(
      (await db1.tx((q) =>
        down.enqueue(q, { type: 'e', data: { i } }, [{ url: 'http://127.0.0.1:1/down', target: 't' }]),
      ))!,
    );
  await down.runOnce(); // the receiver is down: one failed attempt each
  await down.close();
  await db1.close();

  const r = await receiver([204]);
  const db2 = await openDatabase(url);
  await migrate(db2, [dispatchLogMigration(), webhookOutboxMigration()]);
  await db2.run(`UPDATE webhook_dispatches SET endpoint = ?`, [r.url]); // the receiver is up, at its address
  const up = outboxOn(db2, secret, { maxAttempts: 10 });
  up.start();
  await up.idle();
  assert.equal(r.seen.map((s) => s.headers['webhook-id']).sort(), [...ids].sort());
  assert.ok((await up.log.list()).every((x) => x.status === 'delivered' && x.attempts === 2));
  await up.close();
  await r.close();
  await db2.close();
  (await import('node:fs')).rmSync(dir, { recursive: true, force: true });
});

test(
  'outbox on PostgreSQL: two instances share the work, each event delivered once, never ' +
    "attempted by two at a time; a dead instance's lease is taken over",
  async () => {
    if (!(await pgAvailable())) return console.log('SKIPPED: no PostgreSQL at', PG_URL);
    const schema = freshSchema();
    const a = await openDatabase(PG_URL, { schema });
    const b = await openDatabase(PG_URL, { schema });
    try {
      await Promise.all([
        migrate(a, [dispatchLogMigration(), webhookOutboxMigration()]),
        migrate(b, [dispatchLogMigration(), webhookOutboxMigration()]),
      ]);
      const r = await receiver([204], 15);
      const secret = generateWebhookSecret();
      const oa = outboxOn(a, secret, { batch: 4 });
      const ob = outboxOn(b, secret, { batch: 4 });
      const ids = new Set<string>();
      for (let i = 0; i < 40; i++)
        ids.add(
          (await (i % 2 ? a : b).tx((q) =>
            (i % 2 ? oa : ob).enqueue(q, { type: 'e', data: { i } }, [{ url: r.url, target: 't' }]),
          ))!,
        );
      oa.start();
      ob.start();
      await Promise.all([oa.idle(), ob.idle()]);
      const got = r.seen.map((s) => String(s.headers['webhook-id']));
      assert.is(got.length, 40, 'each event once (no failure, so no redelivery)');
      assert.equal(new Set(got), ids);
      assert.is(r.maxInFlightPerId, 1);
      const owners = await a.all<{ n: number }>(
        `SELECT COUNT(*) AS n FROM webhook_dispatches WHERE status = 'delivered'`,
      );
      assert.is(Number(owners[0].n), 40);
      await oa.close();
      await ob.close();

      // An instance that claimed a row and died: nobody else attempts it until its lease runs out.
      const slowClock = { t: Date.now() };
      const dying = outboxOn(a, secret, {
        leaseMs: 60_000,
        now: () => slowClock.t,
        fetch: () => new Promise<Response>(() => {}),
      });
      const id = await a.tx((q) =>
        dying.enqueue(q, { type: 'e', data: { last: true } }, [{ url: r.url, target: 't' }]),
      );
      void dying.runOnce(); // claims, then hangs forever (as a killed process would)
      await new Promise((res) => setTimeout(res, 100));
      const heir = outboxOn(b, secret, { now: () => slowClock.t });
      assert.is(await heir.runOnce(), 0, 'leased by the dying instance');
      const heirLater = outboxOn(b, secret, { now: () => slowClock.t + 61_000 });
      assert.is(await heirLater.runOnce(), 1, 'taken over after the lease');
      assert.is(r.seen.at(-1)?.headers['webhook-id'], id);
      await r.close();
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  },
);

test.run();
