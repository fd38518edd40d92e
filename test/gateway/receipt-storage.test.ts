/**
 * How receipts are stored: the grant inside each receipt's SBA is kept apart, once per grant
 * (payments/store/payments.ts ReceiptRow), and every reader puts it back, so a receipt reads whole and
 * verifies exactly as signed. receipt-storage-pg.test.ts runs this file on PostgreSQL.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash } from 'node:crypto';
import { canonicalize, verifyReceipt } from '../../src/index.js';
import { createLedgerRail } from '../../gateway/payments/ledger.js';
import type { Rail } from '../../gateway/payments/rail.js';
import { RECEIPT_GRANTS_INLINE_SQL } from '../../gateway/schema.js';
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

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let jwks: unknown;

test.before(async () => {
  db =
    (process.env.CTL_GATEWAY_TEST_PG === '1'
      ? await postgresDb('receipt storage on PostgreSQL (ran on SQLite instead)')
      : undefined) ?? sqliteDb();
  gw = await startTestGateway(db);
  merchant = await startMerchant({ amount: '100' });
  jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

const rowsOf = (sessionId: string) =>
  gw.db.all<{ id: string; body: string; grant_hash: string | null }>(
    `SELECT id, body, grant_hash FROM gw_receipts WHERE session_id = ? ORDER BY paid_at, id`,
    [sessionId],
  );
const grantText = async (hash: string) =>
  (await gw.db.get<{ body: string }>(`SELECT body FROM gw_receipt_grants WHERE hash = ?`, [hash]))?.body;
const receiptsOf = async (sessionId: string) =>
  (await call(gw.url, 'GET', `/sessions/${sessionId}/receipts`, { key: gw.ownerKey })).body.receipts as any[];

async function pay(token: string, n: number) {
  const all = await Promise.all(
    Array.from({ length: n }, (_, i) => proxy(gw, token, `${merchant.url}/r${i}`, { purpose: 'api:search' })),
  );
  for (const r of all) assert.is(r.status, 200, r.text);
}

test('each receipt row holds no grant; the grant is kept once, under the SHA-256 of its canonical text', async () => {
  const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
  await pay(s.sessionToken, 8); // concurrent: several changes may write the grant, one row results
  await pay(s.sessionToken, 2);
  const rows = await rowsOf(s.sessionId);
  assert.is(rows.length, 10);
  const hashes = new Set(rows.map((r) => r.grant_hash));
  assert.is(hashes.size, 1);
  const hash = rows[0]!.grant_hash!;
  assert.type(hash, 'string');
  for (const r of rows) {
    const body = JSON.parse(r.body);
    assert.is('grant' in body.sba, false, 'the row holds the SBA without its grant');
    assert.type(body.sba.authorization, 'object');
  }
  const text = await grantText(hash);
  assert.type(text, 'string');
  assert.is(createHash('sha256').update(text!).digest('base64url'), hash);
  // What the API returns is whole: the grant put back, equal to the kept text, and every receipt verifies.
  const receipts = await receiptsOf(s.sessionId);
  assert.is(receipts.length, 10);
  for (const r of receipts) {
    assert.is(canonicalize(r.sba.grant), text);
    const v = await verifyReceipt(r, { jwks: jwks as any });
    assert.ok(v.valid, JSON.stringify(v));
  }
  // The agent's own view of one receipt reads the same.
  const one = await call(gw.url, 'GET', `/session/receipts/${receipts[3].receiptId}`, { key: s.sessionToken });
  assert.is(one.status, 200, one.text);
  assert.equal(one.body, receipts[3]);
});

test('a receipt stored whole (before grants were kept apart) reads the same', async () => {
  const s = await createSession(gw);
  await pay(s.sessionToken, 2);
  const [first, second] = await receiptsOf(s.sessionId);
  // Rewrite the first row as an older gateway stored it: the receipt whole, no grant_hash.
  await gw.db.run(`UPDATE gw_receipts SET body = ?, grant_hash = NULL WHERE id = ?`, [
    JSON.stringify(first),
    first.receiptId,
  ]);
  const again = await receiptsOf(s.sessionId);
  assert.equal(again, [first, second]);
  assert.ok((await verifyReceipt(again[0], { jwks: jwks as any })).valid);
  assert.is((await rowsOf(s.sessionId))[0]!.grant_hash, null);
});

test('a continued session: each receipt carries the grant it was signed under', async () => {
  const s = await createSession(gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
  await pay(s.sessionToken, 2);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/p`, { purpose: 'api:search' })).status, 409);
  const token = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body.continuationToken;
  const c = await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
    key: gw.ownerKey,
    body: { continuationToken: token },
  });
  assert.is(c.status, 200, c.text);
  await pay(s.sessionToken, 1);
  const rows = await rowsOf(s.sessionId);
  assert.is(rows.length, 3);
  assert.is(rows[0]!.grant_hash, rows[1]!.grant_hash);
  assert.is.not(rows[2]!.grant_hash, rows[0]!.grant_hash, 'the re-minted grant is kept under its own hash');
  const receipts = await receiptsOf(s.sessionId);
  assert.equal(
    receipts.map((r) => r.sba.grant.maxAmountMinor),
    ['200', '200', '300'],
  );
  for (const r of receipts) assert.ok((await verifyReceipt(r, { jwks: jwks as any })).valid);
});

test('a payment refused in its own change wrote no grant: the next one writes it', async () => {
  // The session's first payment is signed for, receipt and all, then refused by the budget guard
  // of its own change (the budget spent elsewhere meanwhile): nothing of it is written, so the
  // grant still has to come with the next receipt.
  const s = await createSession(gw, { budget: { amount: '150', currency: 'USD' } });
  await gw.db.run(`UPDATE gw_sessions SET spent = 100 WHERE id = ?`, [s.sessionId]);
  const refused = await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' });
  assert.is(refused.body?.error?.code, 'budget_exceeded', refused.text);
  assert.is((await rowsOf(s.sessionId)).length, 0);
  await gw.db.run(`UPDATE gw_sessions SET spent = 0 WHERE id = ?`, [s.sessionId]);
  await pay(s.sessionToken, 1);
  const receipts = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(receipts.status, 200, receipts.text);
  assert.is(receipts.body.receipts.length, 1);
  assert.ok((await verifyReceipt(receipts.body.receipts[0], { jwks: jwks as any })).valid);
});

test(
  'every commit keeps the grant apart and reads whole: a rail paid before its commit, ' + 'velocity limits, thresholds',
  async () => {
    // The tests above pay on the ledger rail in one change (reserveAndPayLedger). A rail that is not
    // local commits after it paid (commit()); velocity limits take payLedgerAndCommit; thresholds
    // make a PostgreSQL commit a transaction instead of one statement.
    let ledger: ReturnType<typeof createLedgerRail> | undefined;
    const rail: Rail = { name: 'ledger', pay: (o) => ledger!.pay(o), outcome: (id) => ledger!.outcome(id) };
    const remote = await startTestGateway(db, { rail }, gw.ownerKey);
    ledger = createLedgerRail(remote.db);
    try {
      for (const [what, via, config] of [
        ['commit', remote, {}],
        ['commit, thresholds', remote, { thresholds: [50] }],
        ['payLedgerAndCommit', gw, { velocity: { maxPaymentsPerHour: 100 } }],
        ['payLedgerAndCommit, thresholds', gw, { velocity: { maxPaymentsPerHour: 100 }, thresholds: [50] }],
        ['reserveAndPayLedger, thresholds', gw, { thresholds: [50] }],
      ] as const) {
        const s = await createSession(via, { budget: { amount: '10000', currency: 'USD' }, ...config });
        const paid = await Promise.all(
          [0, 1, 2].map((i) => proxy(via, s.sessionToken, `${merchant.url}/${i}`, { purpose: 'api:search' })),
        );
        for (const r of paid) assert.is(r.status, 200, `${what}: ${r.text}`);
        const rows = await rowsOf(s.sessionId);
        assert.is(rows.length, 3, what);
        for (const r of rows) assert.type(r.grant_hash, 'string', `${what}: the grant kept apart`);
        const receipts = await receiptsOf(s.sessionId);
        assert.is(receipts.length, 3, what);
        for (const r of receipts) assert.ok((await verifyReceipt(r, { jwks: jwks as any })).valid, what);
        // The SBA a rail paid under was held on its payment row for reconcile (markPaying); once
        // paid, the receipt is its one copy.
        const payments = await via.db.all<{ state: string; sba: string | null }>(
          `SELECT state, sba FROM gw_payments WHERE session_id = ?`,
          [s.sessionId],
        );
        assert.equal(
          payments,
          [0, 1, 2].map(() => ({ state: 'paid', sba: null })),
          `${what}: paid rows hold no SBA`,
        );
      }
    } finally {
      await remote.close();
    }
  },
);

test('going back below the migration: RECEIPT_GRANTS_INLINE_SQL puts every grant back into its body', async () => {
  const s = await createSession(gw);
  await pay(s.sessionToken, 3);
  const before = await receiptsOf(s.sessionId);
  await gw.db.run(RECEIPT_GRANTS_INLINE_SQL[gw.db.dialect]);
  await gw.db.run(RECEIPT_GRANTS_INLINE_SQL[gw.db.dialect]); // idempotent
  const rows = await rowsOf(s.sessionId);
  assert.is(rows.length, 3);
  for (const [i, r] of rows.entries()) {
    assert.is(r.grant_hash, null);
    // What an older gateway does with a body: the whole receipt, as signed.
    const old = JSON.parse(r.body);
    assert.equal(old, before[i]);
    assert.ok((await verifyReceipt(old, { jwks: jwks as any })).valid);
  }
});

test('a receipt whose kept grant is missing is an error, never a receipt without its grant', async () => {
  const s = await createSession(gw);
  await pay(s.sessionToken, 1);
  const [row] = await rowsOf(s.sessionId);
  const text = await grantText(row!.grant_hash!);
  await gw.db.run(`DELETE FROM gw_receipt_grants WHERE hash = ?`, [row!.grant_hash]);
  try {
    const res = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
    assert.is(res.status, 500, res.text);
    assert.not.match(res.text, /"authorization"/);
  } finally {
    await gw.db.run(`INSERT INTO gw_receipt_grants (hash, body) VALUES (?, ?)`, [row!.grant_hash, text]);
  }
});

test.run();
