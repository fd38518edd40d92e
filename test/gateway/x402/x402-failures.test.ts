/**
 * When the paid retry goes wrong. A signed authorization can be cashed until it
 * expires, so an unknown outcome keeps the reservation; only a provably dead payment releases it,
 * and reconcile() settles the rest at expiry by asking the chain (here: the in-memory ledger).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { USDC, USDC_ASSETS } from './stand.js';
import {
  startFacilitator,
  startStockMerchant,
  type Listening,
  type StockMerchant,
} from '../../../gateway/dev/x402-merchants.js';
import { insertX402, recordOutcome } from '../../../gateway/payments/schemes/x402/store.js';

const PAYEE = '0x4444444444444444444444444444444444444444';

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let slowFacilitator: Listening & { settles: number };
let fastFacilitator: Listening;
let slowMerchant: StockMerchant;
let merchant: StockMerchant;
let skewMs = 0;

/** One reconcile pass two hours on, past every authorization's validBefore + margin. */
async function reconcileAfterExpiry() {
  skewMs = 2 * 3600_000;
  try {
    return await gw.gw.reconcile(0);
  } finally {
    skewMs = 0;
  }
}

test.before(async () => {
  ledger = createEvmLedger();
  // Settles, but only after the merchant's facilitator client has given up. The client's timeout
  // also bounds its first /supported request: 1.5 s leaves a loaded machine room for that one.
  slowFacilitator = await startFacilitator(ledger, { settleDelayMs: 3000 });
  fastFacilitator = await startFacilitator(ledger);
  slowMerchant = await startStockMerchant({
    facilitatorUrl: slowFacilitator.url,
    payTo: PAYEE,
    facilitatorTimeoutMs: 1500,
  });
  merchant = await startStockMerchant({ facilitatorUrl: fastFacilitator.url, payTo: PAYEE });
  db = sqliteDb();
  gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    x402: { assets: USDC_ASSETS, chain: (network) => (network === 'eip155:84532' ? ledger.signer : undefined) },
  });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
});
test.after(async () => {
  await gw.close();
  await slowMerchant.close();
  await merchant.close();
  await slowFacilitator.close();
  await fastFacilitator.close();
  await db.drop();
});

const usdcSession = () =>
  createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
const paymentRow = (sessionId: string) =>
  gw.db.get(`SELECT state, rail FROM gw_payments WHERE session_id = ?`, [sessionId]);

test(
  'facilitator timeout: payment_unconfirmed, the reservation held; at expiry reconcile ' +
    'finds it cashed and commits it',
  async () => {
    const s = await usdcSession();
    const transfers = ledger.transfers.length;
    const res = await proxy(gw, s.sessionToken, `${slowMerchant.url}/data`, { purpose: 'api:search', method: 'GET' });
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'payment_unconfirmed');
    assert.match(res.body.error.message, /held until the authorization expires/);
    let v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], ['0', '10000'], 'held, not released: the authorization is out');
    assert.equal(await paymentRow(s.sessionId), { state: 'paying', rail: 'x402' });
    // The late settlement lands on the ledger after the merchant gave up.
    for (let i = 0; i < 200 && ledger.transfers.length === transfers; i++) await new Promise((r) => setTimeout(r, 50));
    assert.is(ledger.transfers.length, transfers + 1);
    // Before expiry reconcile leaves it alone, whatever it is.
    assert.equal(await gw.gw.reconcile(0), { committed: 0, released: 0 });
    assert.is((await view(s.sessionId)).reservedMinor, '10000');
    // After expiry (validBefore + margin), the chain says the nonce was used: spent, with a receipt.
    const r = await reconcileAfterExpiry();
    assert.ok(r.committed >= 1, JSON.stringify(r));
    v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], ['10000', '0']);
    const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
    assert.is(receipts.length, 1);
    assert.match(receipts[0].txRef, /^txid:eip155:84532\/0x[0-9a-f]{40}\/0x[0-9a-f]{64}$/);
  },
);

test(
  'merchant error after verification: payment_unconfirmed, held; at expiry the chain ' +
    'says unused and it is released',
  async () => {
    const s = await usdcSession();
    const transfers = ledger.transfers.length;
    const res = await proxy(gw, s.sessionToken, `${merchant.url}/boom`, { purpose: 'api:search', method: 'GET' });
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'payment_unconfirmed');
    assert.match(res.body.error.message, /HTTP 500/);
    assert.is(ledger.transfers.length, transfers, 'the stock middleware does not settle when the handler fails');
    assert.is((await view(s.sessionId)).reservedMinor, '10000');
    await reconcileAfterExpiry();
    const v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
    assert.equal(await paymentRow(s.sessionId), { state: 'released', rail: 'x402' });
  },
);

test('merchant unreachable on the paid retry: payment_unconfirmed with the forwarder status, held', async () => {
  // A merchant that asks for payment and then closes the connection on the retry.
  const { createServer } = await import('node:http');
  const pr = await (await fetch(`${merchant.url}/data`)).headers.get('payment-required');
  const server = createServer((req, res) => {
    if (req.headers['payment-signature']) return req.socket.destroy();
    res.writeHead(402, { 'payment-required': pr! });
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const s = await usdcSession();
    const res = await proxy(gw, s.sessionToken, `http://127.0.0.1:${(server.address() as any).port}/data`, {
      purpose: 'api:search',
      method: 'GET',
    });
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'payment_unconfirmed');
    assert.is((await view(s.sessionId)).reservedMinor, '10000');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test('a reservation whose signature was never recorded is void at once (crash before the header left)', async () => {
  const s = await usdcSession();
  // What a crash between the reservation and the recorded signature leaves: a reserved x402 row.
  await gw.db.run(
    `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, created_at,
      updated_at)
    VALUES ('pay_crash', ?, 'reserved', 500, 'USDC', 'm', ?, 'api:search', 'x402', 0, 0)`,
    [s.sessionId, PAYEE],
  );
  await gw.db.run(`UPDATE gw_sessions SET reserved = reserved + 500 WHERE id = ?`, [s.sessionId]);
  await gw.gw.reconcile(0);
  assert.is((await view(s.sessionId)).reservedMinor, '0');
});

test(
  'a named transaction that never confirmed: held until expiry, then the chain says ' +
    'the nonce is unused and it is released',
  async () => {
    const s = await usdcSession();
    const at = Date.now();
    await gw.db.run(
      `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, created_at,
      updated_at)
    VALUES ('pay_stuck', ?, 'paying', 500, 'USDC', 'm', ?, 'api:search', 'x402', ?, ?)`,
      [s.sessionId, PAYEE, at, at],
    );
    await gw.db.run(`UPDATE gw_sessions SET reserved = reserved + 500 WHERE id = ?`, [s.sessionId]);
    await insertX402(
      gw.db,
      {
        paymentId: 'pay_stuck',
        version: 'v2',
        network: 'eip155:84532',
        asset: USDC,
        payTo: PAYEE.toLowerCase(),
        payer: gw.gw.evmAddress.toLowerCase(),
        nonce: `0x${'02'.repeat(32)}`,
        validBefore: at + 300_000,
      },
      at,
    );
    await recordOutcome(gw.db, 'pay_stuck', 'pending', `0x${'ab'.repeat(32)}`);
    await gw.gw.reconcile(0);
    assert.is((await view(s.sessionId)).reservedMinor, '500', 'held before expiry');
    await reconcileAfterExpiry();
    const v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
  },
);

test.run();
