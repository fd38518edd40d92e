/**
 * The budget guard over several counters (gateway/payments/store/guard.ts, PROTOCOL.md §13, §14):
 * a counter that refuses after another has moved leaves every counter as it was, on SQLite and on
 * PostgreSQL, where one statement moves them all: a full window behind a session with room, and
 * a full parent behind a child with room (the child's id first in lock order).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import type { SqlDatabase } from '../../service-kit/index.js';
import { migrate } from '../../service-kit/migrate.js';
import { GATEWAY_ALL_MIGRATIONS } from '../../gateway/server.js';
import { insertSession, type NewSession } from '../../gateway/sessions/store.js';
import { payLedgerInCommit, reserve } from '../../gateway/payments/store/payments.js';
import { chainWindowKeys } from '../../gateway/payments/store/counters.js';
import { sqliteDb, postgresDb, type TestDb } from './helpers.js';

const NOW = Date.parse('2026-03-01T10:00:00Z');

function session(id: string, ceiling: bigint, extra: Partial<NewSession> = {}): NewSession {
  return {
    id,
    ownerId: 'own_guard',
    tokenHash: `t_${id}`,
    label: id,
    currency: 'USD',
    ceiling,
    expiresAt: NOW + 3_600_000,
    createdAt: NOW,
    config: {} as NewSession['config'],
    policyHash: 'h',
    grantId: `g_${id}`,
    grant: {} as NewSession['grant'],
    actorKeyPem: 'k',
    softLimit: null,
    maxPerHour: null,
    maxPerMerchantDay: null,
    webhookUrl: null,
    webhookSecret: null,
    thresholds: [],
    ...extra,
  };
}

/** A ledger payment of `amount` on `chain` (the payer first), with the chain's windows. */
function pay(db: SqlDatabase, chain: string[], amount: bigint, windows: ReturnType<typeof chainWindowKeys> = []) {
  const id = `pay_${randomBytes(6).toString('hex')}`;
  return payLedgerInCommit(db, {
    paymentId: id,
    sessionId: chain[0]!,
    amount,
    currency: 'USD',
    merchant: 'm.example',
    address: 'a',
    purpose: 'api:search',
    rail: 'ledger',
    now: NOW,
    velocity: false,
    chain,
    chainWindows: windows,
    txRef: `txid:${id}`,
    receiptId: `rcpt_${id}`,
    paidAt: NOW,
    receipt: '{}',
  });
}

/** A reservation of `amount` on `chain` (the x402 and MPP path: paid later, or released). */
function hold(db: SqlDatabase, chain: string[], amount: bigint, windows: ReturnType<typeof chainWindowKeys> = []) {
  return reserve(db, {
    paymentId: `pay_${randomBytes(6).toString('hex')}`,
    sessionId: chain[0]!,
    amount,
    currency: 'USD',
    merchant: 'm.example',
    address: 'a',
    purpose: 'api:search',
    rail: 'x402',
    now: NOW,
    velocity: false,
    chain,
    chainWindows: windows,
  });
}

const counters = async (db: SqlDatabase) => ({
  sessions: await db.all(`SELECT id, spent, reserved FROM gw_sessions ORDER BY id`),
  windows: await db.all(`SELECT session_id, every, spent, reserved, payments FROM gw_session_windows ORDER BY every`),
  payments: (await db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_payments`))!.n,
});

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let t: { testDb: TestDb; db: SqlDatabase } | undefined;
  test.before.each(async () => {
    const testDb = await open();
    if (!testDb) return;
    const db = await testDb.open();
    await migrate(db, [...GATEWAY_ALL_MIGRATIONS]);
    t = { testDb, db };
  });
  test.after.each(async () => {
    await t?.db.close();
    await t?.testDb.drop();
    t = undefined;
  });

  test(`${name}: a full window behind a session with room moves nothing`, async () => {
    if (!t) return;
    const windows = [{ every: 'P1D' as const, maxAmountMinor: '10' }];
    await insertSession(
      t.db,
      session('sess_w', 1000n, { config: { windows } as NewSession['config'], windowsStart: NOW }),
    );
    const keys = chainWindowKeys([{ id: 'sess_w', windows, windowsStart: NOW }], NOW);
    const paid = await pay(t.db, ['sess_w'], 8n, keys);
    assert.ok('committed' in paid && paid.committed);
    const before = await counters(t.db);
    const r = await pay(t.db, ['sess_w'], 5n, keys);
    assert.ok('ok' in r && r.code === 'window_exceeded', JSON.stringify(r));
    assert.equal(await counters(t.db), before);
  });

  test(`${name}: a full parent behind a child with room moves nothing`, async () => {
    if (!t) return;
    // 'sess_a_child' < 'sess_b_parent': the child's counter is the first the guard moves.
    await insertSession(t.db, session('sess_b_parent', 10n));
    await insertSession(
      t.db,
      session('sess_a_child', 100n, { parentId: 'sess_b_parent', path: '/sess_b_parent/sess_a_child/', depth: 1 }),
    );
    const chain = ['sess_a_child', 'sess_b_parent'];
    const paid = await pay(t.db, chain, 8n);
    assert.ok('committed' in paid && paid.committed);
    const before = await counters(t.db);
    const r = await pay(t.db, chain, 5n);
    assert.ok('ok' in r && r.code === 'budget_exceeded', JSON.stringify(r));
    assert.equal(await counters(t.db), before);
  });

  test(`${name}: a reservation refused by a full window or parent moves nothing`, async () => {
    if (!t) return;
    const windows = [{ every: 'P1D' as const, maxAmountMinor: '10' }];
    await insertSession(
      t.db,
      session('sess_w', 1000n, { config: { windows } as NewSession['config'], windowsStart: NOW }),
    );
    await insertSession(t.db, session('sess_b_parent', 10n));
    await insertSession(
      t.db,
      session('sess_a_child', 100n, { parentId: 'sess_b_parent', path: '/sess_b_parent/sess_a_child/', depth: 1 }),
    );
    const keys = chainWindowKeys([{ id: 'sess_w', windows, windowsStart: NOW }], NOW);
    const chain = ['sess_a_child', 'sess_b_parent'];
    assert.ok((await hold(t.db, ['sess_w'], 8n, keys)).ok);
    assert.ok((await hold(t.db, chain, 8n)).ok);
    const before = await counters(t.db);
    const w = await hold(t.db, ['sess_w'], 5n, keys);
    assert.ok(!w.ok && w.code === 'window_exceeded', JSON.stringify(w));
    const c = await hold(t.db, chain, 5n);
    assert.ok(!c.ok && c.code === 'budget_exceeded', JSON.stringify(c));
    assert.equal(await counters(t.db), before);
  });
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('the chain guard on PostgreSQL'));

test.run();
