/**
 * An x402 `upto` merchant that lies about what it settled (PROTOCOL.md §15; ARCHITECTURE.md rule
 * 13: a counter moves by what moved on a rail, never by what a counterparty says moved). A hostile
 * front stands before the stock @x402/express `upto` merchant, whose stock facilitator settles on
 * the in-memory ledger's Permit2; the front rewrites `PAYMENT-RESPONSE`. With a chain reader the
 * gateway commits what the chain shows moved and records `payment.settlement_mismatch` naming the
 * merchant; without one it commits the whole hold. On SQLite and on PostgreSQL (fresh schema).
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
import { createEvmLedger, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS } from '../../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../../gateway/dev/x402-upto-merchant.js';
import {
  startHostileFront,
  underReportUpto,
  rewriteX402Settlement,
  type HostileFront,
} from '../../../gateway/dev/hostile-merchants.js';
import { USDC_ASSETS } from './stand.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const MAX = 50_000n;
const CEILING = 100_000n;
const FUNDS = 10_000_000n;

interface Stand {
  db: TestDb;
  gw: TestGateway;
  ledger: EvmLedger;
  facilitator: Listening;
  merchant: UptoMerchant;
  /** Settles whatever was used, reports 1000. */
  liar: HostileFront;
  /** Reports 1000 and names the transaction of an earlier settlement. */
  otherTx: HostileFront;
  /** Keeps the permit, answers 200 with a made-up settlement of 1000, never settles it (yet). */
  pocket: HostileFront;
  reading: boolean;
  skewMs: number;
  close(): Promise<void>;
}

const FAKE_TX = `0x${'ab'.repeat(32)}`;

async function startStand(db: TestDb): Promise<Stand> {
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const liar = await startHostileFront(merchant.url, { lie: underReportUpto('1000') });
  const otherTx = await startHostileFront(merchant.url, {
    lie: rewriteX402Settlement((s) => ({ ...s, amount: '1000', transaction: ledger.permit2Transfers[0]!.tx })),
  });
  const pocket = await startHostileFront(merchant.url, {
    answer: (req) => {
      if (!req.headers['payment-signature']) return undefined; // the stock 402 passes
      const settle = { success: true, transaction: FAKE_TX, network: 'eip155:84532', amount: '1000' };
      return {
        status: 200,
        headers: {
          'content-type': 'application/json',
          'payment-response': Buffer.from(JSON.stringify(settle)).toString('base64'),
        },
        body: Buffer.from('{"units":"1"}'),
      };
    },
  });
  const partial: Partial<Stand> = {
    db,
    ledger,
    facilitator,
    merchant,
    liar,
    otherTx,
    pocket,
    reading: true,
    skewMs: 0,
  };
  const stand = partial as Stand;
  stand.gw = await startTestGateway(db, {
    now: () => Date.now() + stand.skewMs,
    x402: { assets: USDC_ASSETS, chain: () => (stand.reading ? (ledger.reader as any) : undefined) },
  });
  ledger.mint(stand.gw.gw.evmAddress, FUNDS);
  ledger.approve(stand.gw.gw.evmAddress, PERMIT2_ADDRESS, FUNDS);
  stand.close = async () => {
    await stand.gw.close();
    for (const l of [liar, otherTx, pocket, merchant, facilitator]) await l.close();
    await db.drop();
  };
  return stand;
}

const session = (s: Stand) =>
  createSession(s.gw, {
    budget: { amount: CEILING.toString(), currency: 'USDC' },
    purposes: ['api:meter'],
    webhookUrl: 'http://127.0.0.1:9/hook',
  });
const pay = (s: Stand, token: string, url: string) => proxy(s.gw, token, url, { purpose: 'api:meter', method: 'GET' });
const view = async (s: Stand, id: string) =>
  (await call(s.gw.url, 'GET', `/sessions/${id}`, { key: s.gw.ownerKey })).body;
const receiptsOf = async (s: Stand, id: string) =>
  (await call(s.gw.url, 'GET', `/sessions/${id}/receipts`, { key: s.gw.ownerKey })).body.receipts as any[];
const movedTo = (s: Stand) => s.ledger.balanceOf(PAYEE);
const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n);
const mismatches = (s: Stand, sessionId: string) =>
  s.gw.events.filter((e) => e.type === 'payment.settlement_mismatch' && e.data.sessionId === sessionId);

/** Ten requests that each use the whole maximum: what moved, what the session says, what was refused. */
async function drain(s: Stand, url: string) {
  const sess = await session(s);
  const before = movedTo(s);
  const codes: string[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await pay(s, sess.sessionToken, `${url}/metered?units=50`);
    codes.push(res.status === 200 ? 'paid' : res.body.error.code);
  }
  const v = await view(s, sess.sessionId);
  const receipts = await receiptsOf(s, sess.sessionId);
  return {
    sess,
    codes,
    moved: movedTo(s) - before,
    spent: BigInt(v.spentMinor),
    reserved: BigInt(v.reservedMinor),
    receipts,
    receiptTotal: sum(receipts.map((r) => BigInt(r.amount.amountMinor))),
  };
}

for (const engine of ['sqlite', 'postgres'] as const) {
  let s: Stand | undefined;
  test.before(async () => {
    const db = engine === 'sqlite' ? sqliteDb() : await postgresDb('x402 upto reported amounts on PostgreSQL');
    if (db) s = await startStand(db);
  });

  test(`${engine}: settled in full, reported 1000, with a chain reader: the chain's amount is committed`, async () => {
    if (!s) return;
    const d = await drain(s, s.liar.url);
    assert.ok(d.moved <= CEILING, `moved ${d.moved} under a ceiling of ${CEILING}`);
    assert.is(d.moved, CEILING, 'two holds fit and were settled in full');
    assert.is(d.spent, d.moved, 'the session counts what moved');
    assert.is(d.reserved, 0n);
    assert.is(d.receiptTotal, d.moved, 'the receipts add up to what moved');
    assert.equal(d.codes.slice(0, 2), ['paid', 'paid']);
    assert.equal([...new Set(d.codes.slice(2))], ['budget_exceeded'], d.codes.join());
    for (const r of d.receipts) assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['50000', '50000']);
    const m = mismatches(s, d.sess.sessionId);
    assert.is(m.length, 2, 'each lie is an event');
    assert.equal(
      [m[0]!.data.merchant, m[0]!.data.reportedAmountMinor, m[0]!.data.settledAmountMinor, m[0]!.data.payTo],
      ['127.0.0.1', '1000', '50000', PAYEE],
    );
    const hooks = await s.gw.db.all(
      `SELECT event_type FROM gw_webhook_dispatches WHERE event_type = 'payment.settlement_mismatch' AND body LIKE ?`,
      [`%${d.sess.sessionId}%`],
    );
    assert.is(hooks.length, 2, 'and a webhook to the owner');
  });

  test(`${engine}: the same without a chain reader: the whole hold is committed`, async () => {
    if (!s) return;
    s.reading = false;
    try {
      const d = await drain(s, s.liar.url);
      assert.is(d.moved, CEILING);
      assert.is(d.spent, d.moved);
      assert.is(d.receiptTotal, d.moved);
      assert.equal([...new Set(d.codes.slice(2))], ['budget_exceeded']);
      // An honest merchant's usage below the maximum is counted whole too: the gateway cannot know it.
      const honest = await session(s);
      const before = movedTo(s);
      const res = await pay(s, honest.sessionToken, `${s.merchant.url}/metered?units=12`);
      assert.is(res.status, 200, res.text);
      assert.is(movedTo(s) - before, 12_000n);
      assert.is((await view(s, honest.sessionId)).spentMinor, MAX.toString(), 'never less than could have moved');
    } finally {
      s.reading = true;
    }
  });

  test(`${engine}: a report naming another transaction: the permit's own settlement is found`, async () => {
    if (!s) return;
    const sess = await session(s);
    const before = movedTo(s);
    const res = await pay(s, sess.sessionToken, `${s.otherTx.url}/metered?units=30`);
    assert.is(res.status, 200, res.text);
    assert.is(movedTo(s) - before, 30_000n);
    assert.equal([(await view(s, sess.sessionId)).spentMinor], ['30000']);
    const [r] = await receiptsOf(s, sess.sessionId);
    const own = s.ledger.permit2Transfers.at(-1)!;
    assert.is(r.txRef, `txid:${own.tx}`, 'the receipt names the transaction that moved the money');
    const [m] = mismatches(s, sess.sessionId);
    assert.equal(
      [m?.data.reportedTx, m?.data.settledTx, m?.data.settledAmountMinor],
      [s.ledger.permit2Transfers[0]!.tx, own.tx, '30000'],
    );
  });

  test(`${engine}: a made-up settlement: held while the permit is unused, then what the chain shows`, async () => {
    if (!s) return;
    const sess = await session(s);
    const res = await pay(s, sess.sessionToken, `${s.pocket.url}/metered?units=1`);
    assert.is(res.status, 200, 'the merchant answered; the agent gets its answer');
    assert.is(res.headers.get('x-ctl-receipt-id'), null, 'nothing committed on the merchant’s word');
    let v = await view(s, sess.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], ['0', MAX.toString()], 'the hold is kept');
    const [m] = mismatches(s, sess.sessionId);
    assert.equal([m?.data.merchant, m?.data.reportedTx, m?.data.settledAmountMinor], ['127.0.0.1', FAKE_TX, null]);
    // The merchant cashes the permit it kept, for the whole maximum.
    const sig = s.pocket.seen.filter((x) => x.headers['payment-signature']).at(-1)!.headers['payment-signature'];
    const payload = JSON.parse(Buffer.from(String(sig), 'base64').toString('utf8'));
    const late = await fetch(`${s.facilitator.url}/settle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ x402Version: 2, paymentPayload: payload, paymentRequirements: payload.accepted }),
    }).then((x) => x.json());
    assert.is(late.success, true, JSON.stringify(late));
    await s.gw.gw.reconcile(0);
    v = await view(s, sess.sessionId);
    assert.equal([v.spentMinor, v.reservedMinor], [MAX.toString(), '0']);
    const [r] = await receiptsOf(s, sess.sessionId);
    assert.is(r.txRef, `txid:${late.transaction}`);
  });

  test.after(async () => {
    await s?.close();
    s = undefined;
  });
}

test.run();
