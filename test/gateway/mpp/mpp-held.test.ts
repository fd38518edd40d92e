/**
 * When the paid MPP retry goes wrong. The credential carries an EIP-3009 authorization the
 * merchant can cash until its `validBefore` (the challenge's `expires`), whatever it answers, so
 * an unknown outcome keeps the reservation, and reconcile settles it after expiry by asking the
 * chain (here the in-memory ledger, read through the same reader x402 uses). The merchants are
 * stock `mppx/express` servers; the facilitator is the stock x402 one on that ledger.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startMppMerchant, type MppMerchant } from '../../../gateway/dev/mpp-merchants.js';
import { insertMpp, recordMppOutcome } from '../../../gateway/payments/schemes/mpp/store.js';

const PAYEE = '0x6666666666666666666666666666666666666666';
const PRICE = 10000n;
const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();
const USDC_ASSETS = new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]);

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let slowFacilitator: Listening & { settles: number };
let merchant: MppMerchant;
let slowMerchant: MppMerchant;
let skewMs = 0;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  // Settles, but only after the gateway has stopped waiting for the merchant (forwardTimeoutMs).
  slowFacilitator = await startFacilitator(ledger, { settleDelayMs: 2500 });
  merchant = await startMppMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  slowMerchant = await startMppMerchant({ facilitatorUrl: slowFacilitator.url, payTo: PAYEE });
  db = sqliteDb();
  gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    forwardTimeoutMs: 1500,
    x402: { assets: USDC_ASSETS, chain: (network) => (network === 'eip155:84532' ? ledger.signer : undefined) },
  });
  // The gateway's account holds nothing yet: the first test's authorization cannot be cashed.
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await slowMerchant.close();
  await facilitator.close();
  await slowFacilitator.close();
  await db.drop();
});

/** One reconcile pass two hours on, past every authorization's validBefore + margin. */
async function reconcileAfterExpiry() {
  skewMs = 2 * 3600_000;
  try {
    return await gw.gw.reconcile(0);
  } finally {
    skewMs = 0;
  }
}
const usdcSession = () =>
  createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
const receiptsOf = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts;

test('402 again to the credential: held, not believed; released once the chain shows it unused', async () => {
  const s = await usdcSession();
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 502, res.text);
  assert.is(res.body.error.code, 'payment_unconfirmed');
  assert.match(res.body.error.message, /the merchant refused the payment \(.+\); its reservation is held until/);
  assert.equal(
    [(await view(s.sessionId)).spentMinor, (await view(s.sessionId)).reservedMinor],
    ['0', PRICE.toString()],
  );
  // Before expiry the merchant could still cash it: reconcile keeps it.
  await gw.gw.reconcile(0);
  assert.is((await view(s.sessionId)).reservedMinor, PRICE.toString());
  const r = await reconcileAfterExpiry();
  assert.ok(r.released >= 1, JSON.stringify(r));
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
  assert.is((await receiptsOf(s.sessionId)).length, 0);
});

test('no answer in time while the merchant cashes it: held, then reconciled with a receipt', async () => {
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
  const s = await usdcSession();
  const transfers = ledger.transfers.length;
  const res = await proxy(gw, s.sessionToken, `${slowMerchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.ok(res.status === 502 || res.status === 504, res.text);
  assert.is(res.body.error.code, 'payment_unconfirmed');
  assert.match(res.body.error.message, /did not answer the paid retry/);
  // The merchant settles after all.
  for (let i = 0; i < 100 && ledger.transfers.length === transfers; i++) await new Promise((r) => setTimeout(r, 50));
  assert.is(ledger.transfers.length, transfers + 1);
  const cashed = ledger.transfers.at(-1)!;
  await gw.gw.reconcile(0);
  let v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], ['0', PRICE.toString()], 'held until expiry');
  const r = await reconcileAfterExpiry();
  assert.ok(r.committed >= 1, JSON.stringify(r));
  v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0']);
  const receipts = await receiptsOf(s.sessionId);
  assert.is(receipts.length, 1);
  assert.is(receipts[0].txRef, `txid:eip155:84532/${USDC}/${cashed.nonce}`);
  assert.is(receipts[0].rail, `mpp:eip155:84532:${USDC}`);
  assert.ok(gw.events.some((e) => e.type === 'payment.completed' && e.data.receiptId === receipts[0].receiptId));
});

test("a crash between the merchant's Payment-Receipt and the commit is completed by reconcile", async () => {
  const s = await usdcSession();
  const at = Date.now();
  const tx = `0x${'cd'.repeat(32)}`;
  // What the crash leaves: the payment `paying`, its credential recorded with the receipt's transaction.
  await gw.db.run(
    `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, sba,
       created_at, updated_at) VALUES ('pay_mpp_crash', ?, 'paying', ?, 'USDC', 'm.example', ?, 'api:search', 'mpp',
       NULL, ?, ?)`,
    [s.sessionId, PRICE, PAYEE, at, at],
  );
  await gw.db.run(`UPDATE gw_sessions SET reserved = reserved + ? WHERE id = ?`, [PRICE, s.sessionId]);
  const record = {
    paymentId: 'pay_mpp_crash',
    challengeId: 'c',
    realm: 'm.example',
    method: 'evm',
    network: 'eip155:84532',
    asset: USDC,
    payTo: PAYEE,
    payer: gw.gw.evmAddress.toLowerCase(),
    nonce: `0x${'01'.repeat(32)}`,
    validBefore: at + 300_000,
  };
  await insertMpp(gw.db, record, at);
  await recordMppOutcome(gw.db, 'pay_mpp_crash', 'paid', tx);
  const r = await gw.gw.reconcile(0);
  assert.ok(r.committed >= 1, JSON.stringify(r));
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0']);
  const receipts = await receiptsOf(s.sessionId);
  assert.equal([receipts[0].txRef, receipts[0].rail], [`txid:${tx}`, `mpp:eip155:84532:${USDC}`]);
});

test('after those, a plain payment still goes through', async () => {
  const s = await usdcSession();
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  assert.is((await receiptsOf(s.sessionId)).length, 1);
});

test.run();
