/**
 * PostgreSQL under a collation that does not sort ids by code point (ICU): a payment charged up
 * a chain of sessions locks its rows in the order commit and release use (JavaScript's), so a
 * transaction holding the first of them never meets the reservation holding the second.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { postgresDb, startTestGateway, createSession, call, type TestDb, type TestGateway } from './helpers.js';
import { reserve } from '../../gateway/payments/store/payments.js';

let e: { db: TestDb; gw: TestGateway } | undefined;

test.before(async () => {
  const db = await postgresDb('chain lock order on PostgreSQL');
  if (!db) return;
  e = { db, gw: await startTestGateway(db, { maxSessionSeconds: 20 * 365 * 86400 }) };
});
test.after(async () => {
  if (!e) return;
  await e.gw.close();
  await e.db.drop();
});

test('a chain is locked in code-point order whatever the collation', async () => {
  if (!e) return;
  const p = await createSession(e.gw, {
    budget: { amount: '1000', currency: 'USD' },
    expiresAt: '2036-01-01T00:00:00Z',
  });
  const c = await call(e.gw.url, 'POST', `/sessions/${p.sessionId}/children`, {
    key: p.sessionToken,
    body: { budget: { amount: '100' } },
  });
  assert.is(c.status, 201, c.text);
  // 'sess_B' < 'sess_a' by code point; ICU sorts them the other way round.
  const db = e.gw.db;
  await db.run(`UPDATE gw_sessions SET id = 'sess_a', path = '/sess_a/' WHERE id = ?`, [p.sessionId]);
  await db.run(`UPDATE gw_sessions SET id = 'sess_B', parent_id = 'sess_a', path = '/sess_a/sess_B/' WHERE id = ?`, [
    c.body.sessionId,
  ]);
  await db.run(`ALTER TABLE gw_sessions ALTER COLUMN id TYPE text COLLATE "und-x-icu"`);

  const x = new pg.Client({ connectionString: e.db.url });
  await x.connect();
  try {
    await x.query(`SET search_path TO ${e.db.schema}`);
    await x.query('BEGIN');
    // As settleCounters does: the chain's first id in code-point order first.
    await x.query(`SELECT id FROM gw_sessions WHERE id = 'sess_B' FOR UPDATE`);
    const pending = reserve(db, {
      paymentId: 'pay_lock_order',
      sessionId: 'sess_B',
      amount: 10n,
      currency: 'USD',
      merchant: 'm.example',
      address: 'a',
      purpose: 'api:search',
      rail: 'ledger',
      now: Date.now(),
      velocity: false,
      chain: ['sess_B', 'sess_a'],
    });
    await new Promise((r) => setTimeout(r, 300));
    await x.query(`SET LOCAL lock_timeout = '500ms'`);
    let second = 'locked';
    await x.query(`SELECT id FROM gw_sessions WHERE id = 'sess_a' FOR UPDATE`).catch((err: Error) => {
      second = err.message;
    });
    await x.query(second === 'locked' ? 'COMMIT' : 'ROLLBACK');
    assert.is(second, 'locked', 'the reservation held the later row while waiting for the earlier one');
    assert.ok((await pending).ok);
  } finally {
    await x.end();
  }
});

test.run();
