/**
 * An MPP merchant that lies in its `Payment-Receipt` (ARCHITECTURE.md rule 13: a counter moves by
 * what moved on a rail, never by what a counterparty says). A hostile front stands before the
 * stock `mppx/express` merchant, which settles through the stock x402 facilitator on the in-memory
 * EIP-3009 ledger. An `evm` charge can move its signed value and nothing else, so that value is
 * what is counted, once, whatever the receipt says; with a chain reader, a receipt the chain
 * contradicts is `payment.settlement_mismatch` naming the merchant, and the gateway's receipt does
 * not repeat the merchant's transaction. On SQLite and on PostgreSQL (fresh schema).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  createSession,
  proxy,
  call,
  type TestGateway,
  type TestDb,
} from '../helpers.js';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startMppMerchant, type MppMerchant } from '../../../gateway/dev/mpp-merchants.js';
import { startHostileFront, rewriteMppReceipt, type HostileFront } from '../../../gateway/dev/hostile-merchants.js';

const PAYEE = '0x6666666666666666666666666666666666666666';
const PRICE = 10_000n;
const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();
const USDC_ASSETS = new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]);
const FAKE_TX = `0x${'cd'.repeat(32)}`;

interface Stand {
  db: TestDb;
  gw: TestGateway;
  ledger: EvmLedger;
  facilitator: Listening;
  merchant: MppMerchant;
  /** Keeps the credential and answers with a made-up receipt. */
  pocket: HostileFront;
  /** Lets the stock merchant settle, then names an earlier payment's transaction. */
  otherTx: HostileFront;
  close(): Promise<void>;
}

async function startStand(db: TestDb): Promise<Stand> {
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startMppMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const pocket = await startHostileFront(merchant.url, {
    answer: (req) => {
      if (!String(req.headers.authorization ?? '').startsWith('Payment ')) return undefined;
      const receipt = { method: 'evm', reference: FAKE_TX, status: 'success', timestamp: new Date().toISOString() };
      return {
        status: 200,
        headers: {
          'content-type': 'application/json',
          'payment-receipt': Buffer.from(JSON.stringify(receipt)).toString('base64url'),
        },
        body: Buffer.from('{"results":[]}'),
      };
    },
  });
  const otherTx = await startHostileFront(merchant.url, {
    lie: rewriteMppReceipt((r) => ({ ...r, reference: ledger.transfers[0]!.tx })),
  });
  const gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS, chain: () => ledger.reader as any } });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
  return {
    db,
    gw,
    ledger,
    facilitator,
    merchant,
    pocket,
    otherTx,
    async close() {
      await gw.close();
      for (const l of [pocket, otherTx, merchant, facilitator]) await l.close();
      await db.drop();
    },
  };
}

const session = (s: Stand) =>
  createSession(s.gw, {
    budget: { amount: '100000', currency: 'USDC' },
    purposes: ['api:search'],
    webhookUrl: 'http://127.0.0.1:9/hook',
  });
const pay = (s: Stand, token: string, url: string) => proxy(s.gw, token, url, { purpose: 'api:search', method: 'GET' });
const spent = async (s: Stand, id: string) => {
  const v = (await call(s.gw.url, 'GET', `/sessions/${id}`, { key: s.gw.ownerKey })).body;
  return [v.spentMinor, v.reservedMinor];
};
const receiptsOf = async (s: Stand, id: string) =>
  (await call(s.gw.url, 'GET', `/sessions/${id}/receipts`, { key: s.gw.ownerKey })).body.receipts as any[];
const mismatches = (s: Stand, id: string) =>
  s.gw.events.filter((e) => e.type === 'payment.settlement_mismatch' && e.data.sessionId === id);

for (const engine of ['sqlite', 'postgres'] as const) {
  let s: Stand | undefined;
  test.before(async () => {
    const db = engine === 'sqlite' ? sqliteDb() : await postgresDb('MPP reported settlements on PostgreSQL');
    if (db) s = await startStand(db);
  });

  test(`${engine}: an honest receipt is committed with its transaction and no event`, async () => {
    if (!s) return;
    const sess = await session(s);
    const res = await pay(s, sess.sessionToken, `${s.merchant.url}/data`);
    assert.is(res.status, 200, res.text);
    assert.equal(await spent(s, sess.sessionId), [PRICE.toString(), '0']);
    const [r] = await receiptsOf(s, sess.sessionId);
    assert.is(r.txRef, `txid:${s.ledger.transfers.at(-1)!.tx}`);
    assert.equal(mismatches(s, sess.sessionId), []);
  });

  test(`${engine}: a made-up receipt: the value counted once, the lie recorded, cashed later at no extra`, async () => {
    if (!s) return;
    const sess = await session(s);
    const before = s.ledger.balanceOf(PAYEE);
    const res = await pay(s, sess.sessionToken, `${s.pocket.url}/data`);
    assert.is(res.status, 200, res.text);
    assert.is(s.ledger.balanceOf(PAYEE), before, 'nothing moved yet');
    assert.equal(await spent(s, sess.sessionId), [PRICE.toString(), '0'], 'all it can ever move is counted');
    const [r] = await receiptsOf(s, sess.sessionId);
    assert.not.match(r.txRef, FAKE_TX.slice(2), "the gateway's receipt does not repeat the merchant's claim");
    const [m] = mismatches(s, sess.sessionId);
    assert.equal(
      [m?.data.merchant, m?.data.reportedTx, m?.data.settledAmountMinor, m?.data.payTo],
      ['127.0.0.1', FAKE_TX, null, PAYEE],
    );
    const hooks = await s.gw.db.all(
      `SELECT id FROM gw_webhook_dispatches WHERE event_type = 'payment.settlement_mismatch' AND body LIKE ?`,
      [`%${sess.sessionId}%`],
    );
    assert.is(hooks.length, 1, 'the owner hears of it');
    // The merchant cashes the credential it kept: the money moves once, and is counted once.
    const kept = s.pocket.seen.filter((x) => String(x.headers.authorization ?? '').startsWith('Payment ')).at(-1)!;
    const late = await fetch(`${s.merchant.url}/data`, {
      headers: { authorization: String(kept.headers.authorization) },
    });
    assert.is(late.status, 200, await late.text());
    assert.is(s.ledger.balanceOf(PAYEE) - before, PRICE);
    await s.gw.gw.reconcile(0);
    assert.equal(await spent(s, sess.sessionId), [PRICE.toString(), '0']);
  });

  test(`${engine}: a receipt naming another payment's transaction: recorded, not repeated`, async () => {
    if (!s) return;
    const sess = await session(s);
    const before = s.ledger.balanceOf(PAYEE);
    const res = await pay(s, sess.sessionToken, `${s.otherTx.url}/data`);
    assert.is(res.status, 200, res.text);
    assert.is(s.ledger.balanceOf(PAYEE) - before, PRICE);
    assert.equal(await spent(s, sess.sessionId), [PRICE.toString(), '0']);
    const [r] = await receiptsOf(s, sess.sessionId);
    assert.is.not(r.txRef, `txid:${s.ledger.transfers[0]!.tx}`);
    const [m] = mismatches(s, sess.sessionId);
    assert.equal(
      [m?.data.reportedTx, m?.data.settledAmountMinor, m?.data.settledTx],
      [s.ledger.transfers[0]!.tx, PRICE.toString(), null],
    );
  });

  test.after(async () => {
    await s?.close();
    s = undefined;
  });
}

test.run();
