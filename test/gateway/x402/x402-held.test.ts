/**
 * Reviewer findings on the x402 money path: an EIP-3009 authorization, once sent, stays cashable
 * until its `validBefore` whatever the merchant says, so the reservation is released only when
 * the payment is provably dead; in doubt it is counted spent. A hostile merchant here cashes the
 * authorization through the stock facilitator and then lies about it (402 again, or 200 with no
 * settlement), or names a transaction that never lands. No chain reader is configured, like a
 * gateway started from the environment without `CTL_X402_RPC_URL`.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
import { parseRpcUrls, chainReaders } from '../../../gateway/payments/evm/chain.js';
import { readGatewayConfig } from '../../../gateway/config.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const PRICE = 10000n;

type Mode = '402' | '200' | 'stuck';

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let stock: StockMerchant;
let hostile: Server;
let mode: Mode = '402';
let skewMs = 0;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  stock = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const pr = (await fetch(`${stock.url}/data`)).headers.get('payment-required')!;
  hostile = createServer(async (req, res) => {
    const sig = req.headers['payment-signature'];
    if (typeof sig !== 'string') {
      res.writeHead(402, { 'payment-required': pr });
      return res.end('{}');
    }
    if (mode === 'stuck') {
      // A transaction named but never confirmed (reverted): nothing was cashed.
      const h = Buffer.from(
        JSON.stringify({
          success: false,
          transaction: '0x' + 'ab'.repeat(32),
          network: 'eip155:84532',
          errorReason: 'reverted',
        }),
      ).toString('base64');
      res.writeHead(502, { 'payment-response': h });
      return res.end('{}');
    }
    // Cash the authorization through the facilitator, then lie about it.
    const payload = JSON.parse(Buffer.from(sig, 'base64').toString('utf8'));
    const r = await fetch(`${facilitator.url}/settle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ paymentPayload: payload, paymentRequirements: payload.accepted }),
    });
    await r.json();
    if (mode === '402') {
      res.writeHead(402, { 'payment-required': pr });
      return res.end('{"error":"nope"}');
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', r));
  db = sqliteDb();
  gw = await startTestGateway(db, { now: () => Date.now() + skewMs, x402: { assets: USDC_ASSETS } });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
});
test.after(async () => {
  await gw.close();
  await stock.close();
  await facilitator.close();
  hostile.closeAllConnections();
  await new Promise((r) => hostile.close(r));
  await db.drop();
});

const hostileUrl = () => `http://127.0.0.1:${(hostile.address() as AddressInfo).port}/data`;
const oneCallSession = () =>
  createSession(gw, {
    budget: { amount: PRICE.toString(), currency: 'USDC' },
    purposes: ['api:search'],
    expiresAt: new Date(Date.now() + 86400_000).toISOString().replace(/\.\d+Z$/, 'Z'),
  });
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
const received = () => ledger.balanceOf(PAYEE);

/** Five tries against a budget for one payment: the merchant never receives more than the budget. */
async function drain(m: Mode, reconcileBetween: boolean) {
  mode = m;
  const s = await oneCallSession();
  const before = received();
  const codes: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await proxy(gw, s.sessionToken, hostileUrl(), { purpose: 'api:search', method: 'GET' });
    codes.push(res.status === 200 ? '200' : res.body?.error?.code);
    if (reconcileBetween) {
      skewMs += 15 * 60_000; // past validBefore + margin
      await gw.gw.reconcile(0);
    }
  }
  return { s, codes, paid: received() - before };
}

test('finding 1: a merchant that cashes the authorization and answers 402 again cannot drain the budget', async () => {
  const { s, codes, paid } = await drain('402', false);
  assert.is(codes[0], 'payment_unconfirmed', 'the refusal is not believed');
  assert.equal(codes.slice(1), ['budget_exceeded', 'budget_exceeded', 'budget_exceeded', 'budget_exceeded']);
  assert.is(paid, PRICE, 'the merchant received exactly the budget');
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], ['0', PRICE.toString()], 'held until reconcile decides');
});

test(
  'finding 2: with no chain reader, an expired sent authorization is counted spent, ' +
    'not released (a merchant that cashes and serves without PAYMENT-RESPONSE)',
  async () => {
    const { s, codes, paid } = await drain('200', true);
    assert.equal(codes, ['200', 'budget_exceeded', 'budget_exceeded', 'budget_exceeded', 'budget_exceeded']);
    assert.is(paid, PRICE, 'the merchant received exactly the budget');
    const v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0'], 'committed at expiry, not released');
    const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
    assert.is(receipts.length, 1);
    assert.match(receipts[0].txRef, /^txid:eip155:84532\/0x[0-9a-f]{40}\/0x[0-9a-f]{64}$/);
    assert.is(receipts[0].rail, `x402:eip155:84532:${USDC}`);
  },
);

test('finding 2: CTL_X402_RPC_URL configures a chain reader per network', () => {
  assert.is(readGatewayConfig({}).x402?.chain, undefined);
  const chain = readGatewayConfig({ CTL_X402_RPC_URL: '{"eip155:84532":"http://127.0.0.1:1"}' }).x402!.chain!;
  assert.type(chain('eip155:84532')?.readContract, 'function');
  assert.is(chain('eip155:8453'), undefined);
  assert.is(chainReaders(parseRpcUrls('{}')), undefined);
  assert.throws(() => parseRpcUrls('not json'), /not JSON/);
  assert.throws(() => parseRpcUrls('{"base":"http://x"}'), /CAIP-2/);
  assert.throws(() => parseRpcUrls('{"eip155:1":"ftp://x"}'), /http/);
});

test(
  'finding 3: a named transaction that never confirms is not held forever: at expiry, ' +
    'with no reader, it is committed',
  async () => {
    const { s, codes, paid } = await drain('stuck', true);
    assert.equal(codes, [
      'payment_unconfirmed',
      'budget_exceeded',
      'budget_exceeded',
      'budget_exceeded',
      'budget_exceeded',
    ]);
    assert.is(paid, 0n);
    const v = await view(s.sessionId);
    assert.equal(
      [v.spentMinor, v.reservedMinor],
      [PRICE.toString(), '0'],
      'settled (counted spent), not stuck reserved',
    );
    const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
    assert.is(receipts[0].txRef, `txid:0x${'ab'.repeat(32)}`);
  },
);

test(
  "finding 3: a crash between the merchant's confirmed transaction and the commit is " +
    'completed by reconcile (commit, receipt, event)',
  async () => {
    const s = await oneCallSession();
    const at = Date.now() + skewMs;
    const tx = `0x${'cd'.repeat(32)}`;
    // What the crash leaves: the payment `paying`, its authorization recorded with outcome 'paid'.
    await gw.db.run(
      `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, sba,
      created_at, updated_at)
    VALUES ('pay_crash_paid', ?, 'paying', ?, 'USDC', 'm.example', ?, 'api:search', 'x402', NULL, ?, ?)`,
      [s.sessionId, PRICE, PAYEE, at, at],
    );
    await gw.db.run(`UPDATE gw_sessions SET reserved = reserved + ? WHERE id = ?`, [PRICE, s.sessionId]);
    await insertX402(
      gw.db,
      {
        paymentId: 'pay_crash_paid',
        version: 'v2',
        network: 'eip155:84532',
        asset: USDC,
        payTo: PAYEE.toLowerCase(),
        payer: gw.gw.evmAddress.toLowerCase(),
        nonce: `0x${'01'.repeat(32)}`,
        validBefore: at + 600_000,
      },
      at,
    );
    await recordOutcome(gw.db, 'pay_crash_paid', 'paid', tx);
    const r = await gw.gw.reconcile(0);
    assert.ok(r.committed >= 1, JSON.stringify(r));
    const v = await view(s.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0']);
    const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
    assert.is(receipts.length, 1);
    assert.is(receipts[0].txRef, `txid:${tx}`);
    assert.is(receipts[0].rail, `x402:eip155:84532:${USDC}`);
    assert.ok(gw.events.some((e) => e.type === 'payment.completed' && e.data.paymentId === 'pay_crash_paid'));
  },
);

test.run();
