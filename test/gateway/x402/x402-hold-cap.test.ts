/**
 * What an x402 merchant's terms can hold (gateway/README.md "x402 merchants"): a sent
 * authorization holds its amount of the budget for its validity plus the time reconcile takes to
 * settle it once expired (expiry margin, staleness, interval). `CTL_X402_MAX_HOLD_SECONDS` caps
 * that whole hold: terms whose validity would hold the budget longer are `payment_terms_refused`
 * before anything is reserved or signed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSession, proxy, call, sqliteDb, startTestGateway, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import {
  startFacilitator,
  startStockMerchant,
  type Listening,
  type StockMerchant,
} from '../../../gateway/dev/x402-merchants.js';
import { holdCap } from '../../../gateway/payments/evm/assets.js';
import { parseMaxHoldSeconds } from '../../../gateway/payments/evm/assets.js';
import { USDC_ASSETS } from './stand.js';

const PAYEE = '0x3333333333333333333333333333333333333333';

let ledger: EvmLedger;
let facilitator: Listening;
let stock: StockMerchant; // the stock validity, 300 s
let long: StockMerchant; // 500 s: under CTL_X402_MAX_TIMEOUT_SECONDS (600), but held 500 s + reconcile's delay
let db: TestDb;
let gw: TestGateway;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  stock = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  long = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE, maxTimeoutSeconds: 500 });
  db = sqliteDb();
  // defaults: hold 600 s, reconcile 120 s stale + 30 s, margin 60 s
  gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS } });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
});
test.after(async () => {
  await gw.close();
  await stock.close();
  await long.close();
  await facilitator.close();
  await db.drop();
});

const signedSent = (m: StockMerchant) => m.seen.filter((s) => s.headers['payment-signature'] !== undefined).length;

test(
  'terms that would hold the budget past CTL_X402_MAX_HOLD_SECONDS are refused, nothing ' + 'reserved or signed',
  async () => {
    const s = await createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
    const refused = await proxy(gw, s.sessionToken, `${long.url}/data`, { purpose: 'api:search', method: 'GET' });
    assert.is(refused.status, 502, refused.text);
    assert.is(refused.body.error.code, 'payment_terms_refused');
    assert.match(refused.body.error.message, /maxTimeoutSeconds 500 is above the gateway's 390/);
    assert.is(signedSent(long), 0, 'no authorization left the gateway');
    const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
    assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
    // The stock validity fits (300 s + 210 s ≤ 600 s) and is paid.
    const paid = await proxy(gw, s.sessionToken, `${stock.url}/data`, { purpose: 'api:search', method: 'GET' });
    assert.is(paid.status, 200, paid.text);
    assert.ok(paid.headers.get('x-ctl-receipt-id'));
  },
);

test(
  'holdCap: the validity left under the hold, never above CTL_X402_MAX_TIMEOUT_SECONDS, ' +
    '0 when reconcile alone is longer',
  () => {
    assert.is(holdCap({ maxTimeoutSeconds: 600, maxHoldSeconds: 600, settleDelayMs: 210_000 }), 390);
    assert.is(holdCap({ maxTimeoutSeconds: 600, maxHoldSeconds: 3600, settleDelayMs: 210_000 }), 600);
    assert.is(holdCap({ maxTimeoutSeconds: 600, maxHoldSeconds: 200, settleDelayMs: 210_000 }), 0);
    assert.is(holdCap({ maxTimeoutSeconds: 600, settleDelayMs: 0 }), 600, 'default hold 600 s');
    assert.is(parseMaxHoldSeconds(undefined), 600);
    assert.is(parseMaxHoldSeconds('900'), 900);
    assert.throws(() => parseMaxHoldSeconds('10m'), /CTL_X402_MAX_HOLD_SECONDS/);
  },
);

test.run();
