/**
 * Money under concurrency: 50 parallel paid requests on a budget for 10 pay
 * exactly 10, on SQLite and with two gateway processes on one PostgreSQL database; revocation
 * on one instance refuses on the other; a continuation token raced across instances works once.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  ADMIN_KEY,
  type TestDb,
} from './helpers.js';

async function fiftyOnTen(
  gwUrls: string[],
  ownerKey: string,
  merchantUrl: string,
  paidCount: () => number,
  db: { get: (sql: string) => Promise<any> },
) {
  const gw = { url: gwUrls[0]!, ownerKey } as any;
  const s = await createSession(gw, { budget: { amount: '1000', currency: 'USD' } });
  const before = paidCount();
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      proxy({ url: gwUrls[i % gwUrls.length]! }, s.sessionToken, `${merchantUrl}/c${i}`, { purpose: 'api:search' }),
    ),
  );
  const ok = results.filter((r) => r.status === 200);
  const refusedRes = results.filter((r) => r.status === 402);
  assert.is(ok.length, 10, results.map((r) => r.status).join(','));
  assert.is(refusedRes.length, 40);
  assert.ok(refusedRes.every((r) => r.body.error.code === 'budget_exceeded'));
  assert.is(paidCount() - before, 10, 'the merchant got exactly 10 paid retries');
  const v = await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: ownerKey });
  assert.is(v.body.spentMinor, '1000');
  assert.is(v.body.reservedMinor, '0');
  assert.is(v.body.remainingMinor, '0');
  const rc = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: ownerKey });
  assert.is(rc.body.receipts.length, 10);
  assert.is(new Set(rc.body.receipts.map((r: any) => r.txRef)).size, 10);
  const ledger = await db.get(
    'SELECT COUNT(*) AS n, SUM(l.amount) AS total FROM gw_ledger l JOIN gw_payments p ' +
      `ON p.id = l.payment_id WHERE p.session_id = '${s.sessionId}' AND l.status = 'paid'`,
  );
  assert.is(Number(ledger.n), 10);
  assert.is(Number(ledger.total), 1000);
}

test('SQLite: 50 parallel paid requests on a budget for 10 → exactly 10 paid', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  const m = await startMerchant({ amount: '100' });
  try {
    await fiftyOnTen([gw.url], gw.ownerKey, m.url, () => m.paid.length, gw.db);
  } finally {
    await gw.close();
    await m.close();
    await db.drop();
  }
});

function startProcess(db: TestDb): Promise<{ url: string; child: ChildProcess }> {
  const file = fileURLToPath(new URL('./fixtures/gateway-process.js', import.meta.url));
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, DATABASE_URL: db.url, CTL_TEST_PG_SCHEMA: db.schema, CTL_GATEWAY_ADMIN_KEY: ADMIN_KEY },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('gateway process did not start in 20 s')), 20_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) {
        clearTimeout(timer);
        resolve({ url: JSON.parse(line).url, child });
      }
    });
    child.on('exit', (code) => reject(new Error(`gateway process exited ${code}`)));
  });
}

const stop = (c: ChildProcess) =>
  new Promise<void>((r) => {
    c.once('exit', () => r());
    c.kill('SIGTERM');
  });

test('PostgreSQL, two gateway processes: exactly 10 of 50; revocation and continuation shared', async () => {
  const db = await postgresDb('two gateway processes on PostgreSQL');
  if (!db) return;
  const m = await startMerchant({ amount: '100' });
  const procs: ChildProcess[] = [];
  try {
    const a = await startProcess(db);
    procs.push(a.child);
    const b = await startProcess(db);
    procs.push(b.child);
    const owner = (await call(a.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'pg' } })).body.apiKey;
    const check = await db.open();
    try {
      await fiftyOnTen([a.url, b.url], owner, m.url, () => m.paid.length, check);
      // Revocation on A refuses on B before anything is forwarded.
      const s = await createSession({ url: a.url, ownerKey: owner } as any);
      assert.is((await proxy(b, s.sessionToken, `${m.url}/r`, { purpose: 'api:search' })).status, 200);
      assert.is((await call(a.url, 'DELETE', `/sessions/${s.sessionId}`, { key: owner })).status, 200);
      const seen = m.seen.length;
      const r = await proxy(b, s.sessionToken, `${m.url}/r`, { purpose: 'api:search' });
      assert.is(r.status, 410);
      assert.is(r.body.error.code, 'session_revoked');
      assert.is(m.seen.length, seen);
      // Continuation token raced on both instances: one success.
      const p = await createSession({ url: a.url, ownerKey: owner } as any, {
        budget: { amount: '100', currency: 'USD' },
        softLimit: { amount: '100' },
      });
      assert.is((await proxy(a, p.sessionToken, `${m.url}/p`, { purpose: 'api:search' })).status, 200);
      assert.is((await proxy(b, p.sessionToken, `${m.url}/p`, { purpose: 'api:search' })).status, 409);
      const token = (await call(b.url, 'GET', `/sessions/${p.sessionId}`, { key: owner })).body.continuationToken;
      const both = await Promise.all(
        [a, b].map((g) =>
          call(g.url, 'PATCH', `/sessions/${p.sessionId}`, { key: owner, body: { continuationToken: token } }),
        ),
      );
      assert.equal(both.map((x) => x.status).sort(), [200, 403]);
      assert.is((await proxy(b, p.sessionToken, `${m.url}/p`, { purpose: 'api:search' })).status, 200);
      assert.is((await proxy(a, p.sessionToken, `${m.url}/p`, { purpose: 'api:search' })).status, 409);
    } finally {
      await check.close();
    }
  } finally {
    for (const c of procs) await stop(c);
    await m.close();
    await db.drop();
  }
});

test.run();
