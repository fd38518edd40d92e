/**
 * Variable amounts in the spec's own `X-Payment` protocol (PROTOCOL.md §15): terms
 * `{ maxAmount, currency, address }` hold the maximum before anything is paid, the merchant's
 * answer names what it used in `X-Payment-Captured`, and the gateway pays and commits that, the
 * rest released, the receipt showing both. On SQLite and PostgreSQL (the store's capture).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  createSession,
  proxy,
  call,
  type TestGateway,
  type TestDb,
} from './helpers.js';
import { parsePaymentTerms, parseCaptured } from '../../gateway/payments/schemes/x-payment/terms.js';

const MAX = '3000';

/** A metered merchant: holds `MAX`, then answers `?capture=N` with X-Payment-Captured: N (`none`: no header). */
function startHoldMerchant() {
  const holds: { hold: string; sba?: string }[] = [];
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    const hold = req.headers['x-payment-hold'];
    if (typeof hold !== 'string') {
      res.writeHead(402, {
        'x-payment': JSON.stringify({
          maxAmount: u.searchParams.get('max') ?? MAX,
          currency: 'USD',
          address: 'meter-1',
        }),
      });
      return res.end('{}');
    }
    holds.push({ hold, sba: req.headers['x-ctl-sba'] as string | undefined });
    const capture = u.searchParams.get('capture') ?? '0';
    const status = Number(u.searchParams.get('status') ?? 200);
    res.writeHead(status, {
      'content-type': 'application/json',
      ...(capture === 'none' ? {} : { 'x-payment-captured': capture }),
    });
    res.end(JSON.stringify({ used: capture }));
  });
  return { server, holds };
}

function suite(name: string, makeDb: () => Promise<TestDb | undefined>) {
  let db: TestDb | undefined;
  let gw: TestGateway;
  const m = startHoldMerchant();
  let url = '';

  test.before(async () => {
    db = await makeDb();
    if (!db) return;
    gw = await startTestGateway(db);
    await new Promise<void>((r) => m.server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(m.server.address() as AddressInfo).port}`;
  });
  test.after(async () => {
    if (!db) return;
    await gw.close();
    m.server.closeAllConnections();
    await new Promise((r) => m.server.close(r));
    await db.drop();
  });

  const view = async (id: string) => {
    const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
    return [v.spentMinor, v.reservedMinor];
  };
  const receipts = async (id: string) =>
    (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts as any[];
  const pay = (token: string, q: string) => proxy(gw, token, `${url}/meter?${q}`, { purpose: 'api:search' });
  const ledgerAmounts = async () =>
    (await gw.db.all(`SELECT amount FROM gw_ledger WHERE status = 'paid' ORDER BY created_at`)).map((r) =>
      String(r.amount),
    );

  test(`${name}: captured below the hold: that is paid and spent, the rest released, both on the receipt`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' }, trustLevel: 1 });
    const paidBefore = (await ledgerAmounts()).length;
    const res = await pay(s.sessionToken, 'capture=1234');
    assert.is(res.status, 200, res.text);
    assert.equal(res.body, { used: '1234' });
    assert.equal(await view(s.sessionId), ['1234', '0']);
    const [r] = await receipts(s.sessionId);
    assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['1234', MAX]);
    assert.is(res.headers.get('x-ctl-receipt-id'), r.receiptId);
    assert.equal((await ledgerAmounts()).slice(paidBefore), ['1234'], 'the rail paid the captured amount');
    // The merchant saw the hold and, at trust level 1, the SBA for the maximum.
    const seen = m.holds.at(-1)!;
    const sba = JSON.parse(Buffer.from(seen.sba!, 'base64').toString('utf8'));
    assert.is(sba.authorization.maxAmountMinor, MAX);
    assert.is(sba.authorization.budgetId, seen.hold);
  });

  test(`${name}: captured at the hold, and a 2xx answer without X-Payment-Captured: the whole hold`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    assert.is((await pay(s.sessionToken, `capture=${MAX}`)).status, 200);
    assert.is((await pay(s.sessionToken, 'capture=none')).status, 200);
    assert.equal(await view(s.sessionId), ['6000', '0']);
    assert.equal(
      (await receipts(s.sessionId)).map((r) => [r.amount.amountMinor, r.authorizedAmountMinor]),
      [
        [MAX, MAX],
        [MAX, MAX],
      ],
    );
  });

  test(`${name}: captured above the hold is capture_exceeds_hold: nothing paid, the hold released`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    const paidBefore = (await ledgerAmounts()).length;
    const res = await pay(s.sessionToken, 'capture=3001');
    assert.is(res.status, 402, res.text);
    assert.is(res.body.error.code, 'capture_exceeds_hold');
    assert.equal(await view(s.sessionId), ['0', '0']);
    assert.equal(await receipts(s.sessionId), []);
    assert.is((await ledgerAmounts()).length, paidBefore);
    assert.ok(gw.events.some((e) => e.type === 'payment.denied' && e.data.code === 'capture_exceeds_hold'));
  });

  test(`${name}: nothing captured (0, or a failed answer without the header): released, nothing paid`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    assert.is((await pay(s.sessionToken, 'capture=0')).status, 200);
    assert.is((await pay(s.sessionToken, 'capture=none&status=500')).status, 500);
    assert.equal(await view(s.sessionId), ['0', '0']);
    assert.equal(await receipts(s.sessionId), []);
  });

  test(`${name}: a maximum past the remaining budget is refused before the merchant sees a hold`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '2999', currency: 'USD' } });
    const holds = m.holds.length;
    const res = await pay(s.sessionToken, 'capture=1');
    assert.is(res.status, 402, res.text);
    assert.is(res.body.error.code, 'budget_exceeded');
    assert.is(m.holds.length, holds);
    assert.equal(await view(s.sessionId), ['0', '0']);
  });

  test(`${name}: an unreadable X-Payment-Captured: refused, released, nothing paid`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    const res = await pay(s.sessionToken, 'capture=12.5');
    assert.is(res.body.error.code, 'payment_terms_refused', res.text);
    assert.equal(await view(s.sessionId), ['0', '0']);
  });

  test(`${name}: a crash between the rail's capture and its commit: reconciled to the capture`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    const at = Date.now() - 10 * 60_000;
    await gw.db.run(
      `INSERT INTO gw_payments
         (id, session_id, state, amount, currency, merchant, address, purpose, rail, sba, created_at, updated_at)
       VALUES ('pay_hold_crash', ?, 'paying', 3000, 'USD', 'm.example', 'meter-1', 'api:search', 'ledger', NULL, ?, ?)`,
      [s.sessionId, at, at],
    );
    await gw.db.run(`UPDATE gw_sessions SET reserved = reserved + 3000 WHERE id = ?`, [s.sessionId]);
    await gw.db.run(
      `INSERT INTO gw_ledger (payment_id, status, tx_ref, address, amount, currency, created_at)
       VALUES ('pay_hold_crash', 'paid', 'txid:crashed-capture', 'meter-1', 700, 'USD', ?)`,
      [at],
    );
    const r = await gw.gw.reconcile(0);
    assert.ok(r.committed >= 1, JSON.stringify(r));
    assert.equal(await view(s.sessionId), ['700', '0']);
    const [receipt] = await receipts(s.sessionId);
    assert.equal([receipt.amount.amountMinor, receipt.authorizedAmountMinor], ['700', '3000']);
    assert.is(receipt.txRef, 'txid:crashed-capture');
  });
}

test('X-Payment terms: maxAmount is a hold; with amount, or malformed, it is refused', () => {
  assert.equal(parsePaymentTerms('{"maxAmount":"3000","currency":"USD","address":"a"}'), {
    amount: 3000n,
    currency: 'USD',
    address: 'a',
    hold: true,
  });
  assert.equal(parsePaymentTerms('{"amount":"5","currency":"USD","address":"a"}'), {
    amount: 5n,
    currency: 'USD',
    address: 'a',
  });
  assert.throws(() => parsePaymentTerms('{"amount":"1","maxAmount":"3","currency":"USD","address":"a"}'), /together/);
  assert.throws(() => parsePaymentTerms('{"maxAmount":"0","currency":"USD","address":"a"}'), /maxAmount/);
  assert.throws(() => parsePaymentTerms('{"maxAmount":3,"currency":"USD","address":"a"}'), /maxAmount/);
  assert.is(parseCaptured(undefined), undefined);
  assert.is(parseCaptured('0'), 0n);
  assert.throws(() => parseCaptured('-1'), /X-Payment-Captured/);
  assert.throws(() => parseCaptured(['1', '2']), /X-Payment-Captured/);
});

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('hold-xpayment on PostgreSQL'));

test.run();
