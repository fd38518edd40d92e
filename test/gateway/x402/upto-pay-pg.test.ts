/**
 * x402 `upto` on PostgreSQL: the hold committed at the settled amount (the store's capture in one
 * statement), and a hold whose settlement the gateway never heard of reconciled from the chain.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { postgresDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS } from '../../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../../gateway/dev/x402-upto-merchant.js';
import { USDC_ASSETS } from './stand.js';

const PAYEE = '0x4444444444444444444444444444444444444444';

let db: TestDb | undefined;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let merchant: UptoMerchant;

test.before(async () => {
  db = await postgresDb('x402 upto on PostgreSQL');
  if (!db) return;
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS, chain: () => ledger.reader as any } });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 1_000_000n);
});
test.after(async () => {
  if (!db) return;
  await gw.close();
  await merchant.close();
  await facilitator.close();
  await db.drop();
});

const spentReserved = async (id: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
  return [v.spentMinor, v.reservedMinor];
};
const receipts = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts as any[];

test('PostgreSQL: settled 12000 of 50000 is spent, the rest released; a late settle is reconciled', async () => {
  if (!db) return;
  const s = await createSession(gw, { budget: { amount: '1000000', currency: 'USDC' }, purposes: ['api:meter'] });
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/metered?units=12`, {
    purpose: 'api:meter',
    method: 'GET',
  });
  assert.is(res.status, 200, res.text);
  assert.equal(await spentReserved(s.sessionId), ['12000', '0']);
  const [r] = await receipts(s.sessionId);
  assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['12000', '50000']);

  // A 0 settle keeps the hold; the facilitator later cashes the permit for 7000.
  const zero = await proxy(gw, s.sessionToken, `${merchant.url}/metered?units=0`, {
    purpose: 'api:meter',
    method: 'GET',
  });
  assert.is(zero.status, 200, zero.text);
  assert.equal(await spentReserved(s.sessionId), ['12000', '50000']);
  const sig = merchant.seen.filter((x) => x.headers['payment-signature']).at(-1)!.headers['payment-signature'];
  const payload = JSON.parse(Buffer.from(String(sig), 'base64').toString('utf8'));
  const late = await fetch(`${facilitator.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      x402Version: 2,
      paymentPayload: payload,
      paymentRequirements: { ...payload.accepted, amount: '7000' },
    }),
  }).then((x) => x.json());
  assert.is(late.success, true, JSON.stringify(late));
  const rec = await gw.gw.reconcile(0);
  assert.ok(rec.committed >= 1, JSON.stringify(rec));
  assert.equal(await spentReserved(s.sessionId), ['19000', '0']);
  assert.equal((await receipts(s.sessionId)).map((x) => x.amount.amountMinor).sort(), ['12000', '7000']);
});

test.run();
