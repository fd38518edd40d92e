/**
 * The gateway pays a stock x402 `upto` merchant (@x402/express with the stock upto server scheme,
 * settling through the stock upto facilitator on the in-memory ledger's Permit2): the terms'
 * maximum is reserved before anything is signed, what the facilitator settled is committed, the
 * rest released, and the receipt shows both (PROTOCOL.md §15). A settle the gateway never heard
 * of is learnt from the chain (Permit2's nonce bitmap, the proxy's settle calldata).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS } from '../../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../../gateway/dev/x402-upto-merchant.js';
import { verifyReceipt } from '../../../src/index.js';
import { USDC_ASSETS } from './stand.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const MAX = 50_000n;
const FUNDS = 10_000_000n;

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let merchant: UptoMerchant;
/** Forwards to the merchant, then drops the connection once the merchant has answered (its settle done). */
let lossy: Server;
let skewMs = 0;
/** Whether the gateway has a chain reader (CTL_X402_RPC_URL) for the network. */
let reading = true;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const target = new URL(merchant.url);
  lossy = createServer((req, res) => {
    const up = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        if (answer.statusCode === 402 && !req.headers['payment-signature']) {
          res.writeHead(402, answer.headers);
          answer.pipe(res);
          return;
        }
        answer.resume();
        answer.on('end', () => res.socket?.destroy());
      },
    );
    req.pipe(up);
  });
  await new Promise<void>((r) => lossy.listen(0, '127.0.0.1', r));
  db = sqliteDb();
  gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    x402: { assets: USDC_ASSETS, chain: () => (reading ? (ledger.reader as any) : undefined) },
  });
  ledger.mint(gw.gw.evmAddress, FUNDS);
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, FUNDS);
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await facilitator.close();
  lossy.closeAllConnections();
  await new Promise((r) => lossy.close(r));
  await db.drop();
});

const session = (amount = 1_000_000n) =>
  createSession(gw, {
    budget: { amount: amount.toString(), currency: 'USDC' },
    purposes: ['api:meter'],
    expiresAt: new Date(Date.now() + 86400_000).toISOString().replace(/\.\d+Z$/, 'Z'),
  });
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
const receiptsOf = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts as any[];
const spentReserved = async (id: string) => {
  const v = await view(id);
  return [v.spentMinor, v.reservedMinor];
};
const pay = (token: string, url: string) => proxy(gw, token, url, { purpose: 'api:meter', method: 'GET' });
const signaturesSeen = () => merchant.seen.filter((s) => s.headers['payment-signature']).length;
const jwks = async () => (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;

test('a usage below the maximum: the settled amount is spent, the rest released, the receipt shows both', async () => {
  const s = await session();
  const before = ledger.balanceOf(PAYEE);
  const res = await pay(s.sessionToken, `${merchant.url}/metered?units=12`);
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, { units: '12', chargedAtomic: '12000' });
  assert.is(ledger.balanceOf(PAYEE) - before, 12_000n, 'the ledger moved what was settled');
  assert.equal(await spentReserved(s.sessionId), ['12000', '0'], 'the rest of the hold released');
  const [r] = await receiptsOf(s.sessionId);
  assert.is(r.amount.amountMinor, '12000');
  assert.is(r.authorizedAmountMinor, MAX.toString());
  assert.is(r.sba.authorization.maxAmountMinor, MAX.toString(), 'the SBA authorized the hold');
  assert.match(r.txRef, /^txid:0x[0-9a-f]{64}$/);
  assert.ok((await verifyReceipt(r, { jwks: await jwks() })).valid, 'the receipt verifies with both amounts');
  const raised = { ...r, authorizedAmountMinor: '60000' };
  assert.is((await verifyReceipt(raised, { jwks: await jwks() })).valid, false, 'the hold is signed');
  const above = { ...r, authorizedAmountMinor: '11999' };
  const v = await verifyReceipt(above, { jwks: await jwks() });
  assert.is(!v.valid && v.error.code, 'malformed', 'captured above the hold');
  const done = gw.events.find((e) => e.type === 'payment.completed' && e.data.receiptId === r.receiptId);
  assert.equal([done?.data.amountMinor, done?.data.authorizedAmountMinor], ['12000', '50000']);
});

test('usage at the maximum: the whole hold is spent', async () => {
  const s = await session();
  const res = await pay(s.sessionToken, `${merchant.url}/metered?units=50`);
  assert.is(res.status, 200, res.text);
  assert.equal(await spentReserved(s.sessionId), [MAX.toString(), '0']);
  const [r] = await receiptsOf(s.sessionId);
  assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['50000', '50000']);
});

test('a maximum past the remaining budget is refused with nothing signed, though the usage would fit', async () => {
  const s = await session(MAX - 1n);
  const seen = signaturesSeen();
  const before = ledger.balanceOf(PAYEE);
  const res = await pay(s.sessionToken, `${merchant.url}/metered?units=1`);
  assert.is(res.status, 402, res.text);
  assert.is(res.body.error.code, 'budget_exceeded');
  assert.is(signaturesSeen(), seen, 'no permit reached the merchant');
  assert.is(ledger.balanceOf(PAYEE), before);
  assert.equal(await spentReserved(s.sessionId), ['0', '0']);
});

test('a settle response lost after the merchant settled: held, then reconciled to the settled amount', async () => {
  const s = await session();
  const before = ledger.balanceOf(PAYEE);
  const res = await pay(s.sessionToken, `http://127.0.0.1:${(lossy.address() as AddressInfo).port}/metered?units=9`);
  assert.ok(res.status >= 500, res.text);
  assert.is(res.body.error.code, 'payment_unconfirmed');
  assert.is(ledger.balanceOf(PAYEE) - before, 9_000n, 'the merchant did settle');
  assert.equal(await spentReserved(s.sessionId), ['0', MAX.toString()], 'the hold is kept while unknown');
  const r = await gw.gw.reconcile(0);
  assert.ok(r.committed >= 1, JSON.stringify(r));
  assert.equal(await spentReserved(s.sessionId), ['9000', '0']);
  const [receipt] = await receiptsOf(s.sessionId);
  assert.equal([receipt.amount.amountMinor, receipt.authorizedAmountMinor], ['9000', '50000']);
  assert.match(receipt.txRef, /^txid:0x[0-9a-f]{64}$/);
});

test('a 0 settle keeps the hold (the permit stays cashable); a late settle is learnt from the chain', async () => {
  const s = await session();
  const res = await pay(s.sessionToken, `${merchant.url}/metered?units=0`);
  assert.is(res.status, 200, res.text);
  assert.equal(await spentReserved(s.sessionId), ['0', MAX.toString()], 'held until the permit is dead or used');
  await gw.gw.reconcile(0);
  assert.equal(await spentReserved(s.sessionId), ['0', MAX.toString()], 'unused, before its deadline: still held');
  // The merchant's facilitator cashes the same permit later, for 20000.
  const sig = merchant.seen.filter((x) => x.headers['payment-signature']).at(-1)!.headers['payment-signature'];
  const payload = JSON.parse(Buffer.from(String(sig), 'base64').toString('utf8'));
  const late = await fetch(`${facilitator.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      x402Version: 2,
      paymentPayload: payload,
      paymentRequirements: { ...payload.accepted, amount: '20000' },
    }),
  }).then((r) => r.json());
  assert.is(late.success, true, JSON.stringify(late));
  await gw.gw.reconcile(0);
  assert.equal(await spentReserved(s.sessionId), ['20000', '0']);
  const [r] = await receiptsOf(s.sessionId);
  assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['20000', '50000']);
});

test('a failed handler or a usage above the maximum: held to the deadline, then released (nonce unused)', async () => {
  const s = await session();
  const broken = await pay(s.sessionToken, `${merchant.url}/broken`);
  assert.is(broken.body.error.code, 'payment_unconfirmed', broken.text);
  const above = await pay(s.sessionToken, `${merchant.url}/metered?units=51`);
  assert.is(above.body.error.code, 'payment_unconfirmed', above.text);
  assert.equal(await spentReserved(s.sessionId), ['0', (2n * MAX).toString()]);
  await gw.gw.reconcile(0);
  assert.equal(await spentReserved(s.sessionId), ['0', (2n * MAX).toString()], 'before the deadline: held');
  skewMs = 15 * 60_000; // past the permits' deadline + margin
  try {
    const r = await gw.gw.reconcile(0);
    assert.ok(r.released >= 2, JSON.stringify(r));
  } finally {
    skewMs = 0;
  }
  assert.equal(await spentReserved(s.sessionId), ['0', '0']);
  assert.equal(await receiptsOf(s.sessionId), []);
});

test('no Permit2 allowance: refused before anything is reserved or signed, and the refusal says why', async () => {
  const s = await session();
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 0n);
  const seen = signaturesSeen();
  try {
    const res = await pay(s.sessionToken, `${merchant.url}/metered?units=1`);
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'payment_failed');
    assert.match(res.body.error.message, /approved Permit2/);
  } finally {
    ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, FUNDS);
  }
  assert.is(signaturesSeen(), seen);
  assert.equal(await spentReserved(s.sessionId), ['0', '0']);
});

test("no Permit2 allowance, no reader: the merchant's 412 is reported, the permit held to its deadline", async () => {
  const s = await session();
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 0n);
  reading = false;
  try {
    const res = await pay(s.sessionToken, `${merchant.url}/metered?units=1`);
    assert.is(res.status, 502, res.text);
    assert.is(res.body.error.code, 'payment_unconfirmed');
    assert.match(res.body.error.message, /has not approved Permit2 .* held until/);
    assert.equal(await spentReserved(s.sessionId), ['0', MAX.toString()], 'the permit is out: held');
  } finally {
    ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, FUNDS);
    reading = true;
  }
  skewMs = 15 * 60_000;
  try {
    await gw.gw.reconcile(0);
  } finally {
    skewMs = 0;
  }
  assert.equal(await spentReserved(s.sessionId), ['0', '0'], 'unused past its deadline: released');
});

test.run();
