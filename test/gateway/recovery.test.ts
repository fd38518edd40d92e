/**
 * A crash between pay and commit: the payment record is left 'paying'; a restart
 * reconciles it with the rail (idempotent by payment id): paid → committed once with a receipt;
 * not paid → released and voided at the rail, so a late pay cannot happen. Nothing paid twice,
 * nothing paid and forgotten.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createLedgerRail } from '../../gateway/payments/ledger.js';
import type { Rail } from '../../gateway/payments/rail.js';
import { reserve, payLedgerAndCommit } from '../../gateway/payments/store/payments.js';
import { sqliteDb, startTestGateway, startMerchant, createSession, call, type TestDb } from './helpers.js';

const never = () => new Promise<never>(() => {});

async function crashDuringPayment(db: TestDb, payFirst: boolean) {
  const m = await startMerchant({ amount: '100' });
  let ledger: ReturnType<typeof createLedgerRail> | undefined;
  // The "crash": the process stops right after (or right before) the rail call.
  const rail: Rail = {
    name: 'ledger',
    pay: async (o) => {
      if (payFirst) await ledger!.pay(o);
      return never();
    },
    outcome: (id) => ledger!.outcome(id),
  };
  const a = await startTestGateway(db, { rail });
  ledger = createLedgerRail(a.db);
  const s = await createSession(a);
  const abort = new AbortController();
  const pending = fetch(`${a.url}/proxy`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.sessionToken}`, 'x-target-url': `${m.url}/x`, 'x-ctl-purpose': 'api:search' },
    signal: abort.signal,
  }).catch(() => undefined);
  for (let i = 0; i < 100; i++) {
    const row = await a.db.get<{ state: string }>(`SELECT state FROM gw_payments`);
    if (row?.state === 'paying') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 50));
  abort.abort();
  await pending;
  const owner = a.ownerKey;
  await a.close();
  return { m, s, owner };
}

test('crash after the rail paid: restart commits once, with a receipt', async () => {
  const db = sqliteDb();
  const { m, s, owner } = await crashDuringPayment(db, true);
  const b = await startTestGateway(db, {}, owner);
  try {
    const st = await b.db.get<{ state: string }>(`SELECT state FROM gw_payments`);
    assert.is(st!.state, 'paying', 'the crash left an open record');
    assert.equal(await b.gw.reconcile(0), { committed: 1, released: 0 });
    assert.equal(await b.gw.reconcile(0), { committed: 0, released: 0 }, 'settled once');
    const v = await call(b.url, 'GET', `/sessions/${s.sessionId}`, { key: owner });
    assert.is(v.body.spentMinor, '100');
    assert.is(v.body.reservedMinor, '0');
    const rc = await call(b.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: owner });
    assert.is(rc.body.receipts.length, 1);
    const ledgerRow = await b.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_ledger WHERE status = 'paid'`);
    assert.is(Number(ledgerRow!.n), 1);
    assert.is(rc.body.receipts[0].txRef, (await b.db.get<{ tx_ref: string }>(`SELECT tx_ref FROM gw_ledger`))!.tx_ref);
  } finally {
    await b.close();
    await m.close();
    await db.drop();
  }
});

test('crash before the rail paid: restart releases the reservation and voids the id', async () => {
  const db = sqliteDb();
  const { m, s, owner } = await crashDuringPayment(db, false);
  const b = await startTestGateway(db, {}, owner);
  try {
    assert.equal(await b.gw.reconcile(0), { committed: 0, released: 1 });
    const v = await call(b.url, 'GET', `/sessions/${s.sessionId}`, { key: owner });
    assert.is(v.body.spentMinor, '0');
    assert.is(v.body.reservedMinor, '0');
    assert.is(v.body.remainingMinor, '1000');
    const p = await b.db.get<{ id: string; state: string }>(`SELECT id, state FROM gw_payments`);
    assert.is(p!.state, 'released');
    // The crashed process waking up late cannot pay it now.
    const ledger = createLedgerRail(b.db);
    let refused = false;
    try {
      await ledger.pay({
        paymentId: p!.id,
        amount: 100n,
        currency: 'USD',
        address: 'merchant-1',
        merchant: '127.0.0.1',
      });
    } catch {
      refused = true;
    }
    assert.ok(refused, 'a voided payment id cannot be paid');
  } finally {
    await b.close();
    await m.close();
    await db.drop();
  }
});

test('reconcile leaves fresh in-flight payments alone', async () => {
  const db = sqliteDb();
  const { m, s, owner } = await crashDuringPayment(db, true);
  const b = await startTestGateway(db, {}, owner);
  try {
    assert.equal(await b.gw.reconcile(60_000), { committed: 0, released: 0 });
    const v = await call(b.url, 'GET', `/sessions/${s.sessionId}`, { key: owner });
    assert.is(v.body.reservedMinor, '100');
  } finally {
    await b.close();
    await m.close();
    await db.drop();
  }
});

test('ledger rail: a crash after the reservation is released; the late payment cannot commit', async () => {
  const db = sqliteDb();
  const g = await startTestGateway(db);
  try {
    const s = await createSession(g);
    // The state a crash right after reserve() leaves behind (the local ledger pays and commits atomically after it).
    const r = await reserve(g.db, {
      paymentId: 'pay_crashed',
      sessionId: s.sessionId,
      amount: 100n,
      currency: 'USD',
      merchant: 'm',
      address: 'a',
      purpose: 'api:search',
      rail: 'ledger',
      now: Date.now(),
      velocity: false,
    });
    assert.ok(r.ok);
    assert.equal(await g.gw.reconcile(0), { committed: 0, released: 1 });
    let late: unknown;
    try {
      late = await payLedgerAndCommit(g.db, {
        paymentId: 'pay_crashed',
        sessionId: s.sessionId,
        amount: 100n,
        currency: 'USD',
        address: 'a',
        txRef: 'txid:late',
        receiptId: 'rcpt_late',
        receipt: '{}',
        paidAt: Date.now(),
      });
    } catch (e) {
      late = e;
    }
    assert.ok(
      late instanceof Error || (late as { committed: boolean }).committed === false,
      'the late payment is refused',
    );
    const paid = await g.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_ledger WHERE status = 'paid'`);
    assert.is(Number(paid!.n), 0);
    const v = await call(g.url, 'GET', `/sessions/${s.sessionId}`, { key: g.ownerKey });
    assert.is(v.body.reservedMinor, '0');
    assert.is(v.body.spentMinor, '0');
  } finally {
    await g.close();
    await db.drop();
  }
});

test.run();
