/**
 * Review (adversarial): holds raced at a session tree's limits by two gateway instances on one
 * PostgreSQL database (PROTOCOL.md §13–§15). Two children of one parent (a lifetime ceiling and a
 * daily window) each take X-Payment holds of 300 on both instances at once; the merchant captures
 * 200 of each after a random delay, so holds, captures and releases interleave across instances.
 * However they interleave: no counter of the tree ever passes its limit (the window's 800, the
 * parent's 1,000, a child's 600), what the books say was spent is what the ledger paid, nothing
 * stays reserved, and every refusal names the limit that refused. Regression guard: passes today.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { postgresDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';

let db: TestDb | undefined;
let gw1: TestGateway;
let gw2: TestGateway;
let server: Server;
let url = '';

test.before(async () => {
  db = await postgresDb('review: holds raced on a session tree by two instances');
  if (!db) return;
  gw1 = await startTestGateway(db);
  gw2 = await startTestGateway(db, {}, gw1.ownerKey);
  server = createServer((req, res) => {
    if (typeof req.headers['x-payment-hold'] !== 'string') {
      res.writeHead(402, { 'x-payment': JSON.stringify({ maxAmount: '300', currency: 'USD', address: 'meter-1' }) });
      return res.end('{}');
    }
    setTimeout(
      () => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-payment-captured': '200' });
        res.end('{}');
      },
      10 + Math.floor(Math.random() * 60),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

test.after(async () => {
  if (!db) return;
  await gw2.close();
  await gw1.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await db.drop();
});

const view = async (id: string) => (await call(gw1.url, 'GET', `/sessions/${id}`, { key: gw1.ownerKey })).body;

test('holds, captures and releases raced on two instances never pass a limit of the tree', async () => {
  if (!db) return;
  const parent = await createSession(gw1, {
    budget: { amount: '1000', currency: 'USD' },
    windows: [{ every: 'P1D', maxAmountMinor: '800' }],
  });
  const kids: { sessionId: string; sessionToken: string }[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await call(gw1.url, 'POST', `/sessions/${parent.sessionId}/children`, {
      key: parent.sessionToken,
      body: { budget: { amount: '600' } },
    });
    assert.is(r.status, 201, r.text);
    kids.push(r.body as { sessionId: string; sessionToken: string });
  }
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        proxy(i % 2 ? gw2 : gw1, kids[(i >> 1) % 2]!.sessionToken, `${url}/meter`, { purpose: 'api:search' }),
      ),
    );
    for (const r of results)
      assert.ok(
        r.status === 200 || ['window_exceeded', 'budget_exceeded'].includes(r.body?.error?.code),
        `${r.status} ${r.text}`,
      );
  }
  const paid = await gw1.db.all(
    `SELECT session_id, amount FROM gw_payments WHERE state = 'paid' AND session_id IN (?, ?)`,
    [kids[0]!.sessionId, kids[1]!.sessionId],
  );
  const total = paid.reduce((a, r) => a + Number(r.amount), 0);
  const p = await view(parent.sessionId);
  assert.is(Number(p.spentMinor), total, 'the parent counts what was paid below it');
  assert.is(p.reservedMinor, '0');
  assert.ok(total <= 800, `the daily window of 800 passed: ${total}`);
  // Three captures of 200: then 600 + a hold of 300 would pass 800, so every later hold is refused.
  assert.is(total, 600, 'holds are reserved whole, captures release the rest');
  for (const k of kids) {
    const v = await view(k.sessionId);
    const own = paid.filter((r) => r.session_id === k.sessionId).reduce((a, r) => a + Number(r.amount), 0);
    assert.is(Number(v.spentMinor), own);
    assert.is(v.reservedMinor, '0');
    assert.ok(own <= 600, `a child passed its 600: ${own}`);
  }
  const w = await gw1.db.all(`SELECT spent, reserved FROM gw_session_windows WHERE session_id = ?`, [parent.sessionId]);
  for (const row of w) {
    assert.ok(Number(row.spent) <= 800, JSON.stringify(row));
    assert.is(Number(row.reserved), 0);
  }
});

test.run();
