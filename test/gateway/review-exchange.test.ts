/**
 * Review (adversarial), the paid exchange written once (payments/exchange.ts; PROTOCOL.md §7).
 * A scheme is an adapter: one folder and one registry line. The exchange reserves what the
 * scheme's choice names (`authorize()`), then checks the signed authorization before it leaves;
 * that check must hold against the reservation itself, not only against the scheme's own record
 * of what it chose, or an adapter whose record drifts from its choice sends a signature for more
 * than was reserved (the budget's bound passed by the merchant cashing it).
 *
 * The exchange runs for real over a real authorization table; the payment service is a recorder
 * of what the exchange asks of it (the books are not under test here), and the scheme is a small
 * adapter written the way schemes/scheme.ts lets one be.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { migrate, type SqlDatabase } from '../../service-kit/index.js';
import { createExchange } from '../../gateway/payments/exchange.js';
import type { Authorization, PaymentService } from '../../gateway/payments/service.js';
import { X402_MIGRATIONS, X402_TABLE, x402Columns } from '../../gateway/payments/schemes/x402/store.js';
import type { PaidExchangeContext, PaymentScheme } from '../../gateway/payments/schemes/scheme.js';
import type { SessionRecord } from '../../gateway/sessions/store.js';
import { sqliteDb, type TestDb } from './helpers.js';

const PAYER = '0x1111111111111111111111111111111111111111';
const PAY_TO = '0x2222222222222222222222222222222222222222';
const RESERVED = 100n;

let testDb: TestDb;
let db: SqlDatabase;

test.before(async () => {
  testDb = sqliteDb();
  db = await testDb.open();
  await migrate(db, X402_MIGRATIONS);
});
test.after(async () => {
  await db.close();
  await testDb.drop();
});

/** What the exchange asked of the books, in order. */
function recordingPayments(prefix: string) {
  const asked: string[] = [];
  let n = 0;
  const payments = {
    railName: 'ledger',
    async authorize(_s: SessionRecord, terms: { amount: bigint }): Promise<Authorization> {
      asked.push(`authorize ${terms.amount}`);
      return {
        paymentId: `pay_${prefix}_${++n}`,
        sba: {} as Authorization['sba'],
        amount: terms.amount,
        currency: 'USD',
        merchant: 'merchant.test',
        purpose: 'api:search',
      };
    },
    async abandon(id: string) {
      asked.push(`abandon ${id}`);
      return true;
    },
    async markPaying(a: Authorization) {
      asked.push(`paying ${a.paymentId}`);
      return true;
    },
  };
  return { asked, payments: payments as unknown as PaymentService };
}

/**
 * An EVM scheme whose choice reserves `RESERVED` but whose signer (and its record of the choice,
 * read back from what it signed) says `signedValue`: a stock client that drifted, reported as is.
 */
function driftingScheme(signedValue: bigint): PaymentScheme {
  return {
    name: 'x402',
    title: 'drifting',
    detect: (res) => (res.status === 402 ? {} : undefined),
    async choose() {
      return { amount: RESERVED, currency: 'USD', address: PAY_TO, chosen: {} };
    },
    async sign(_c, authorize) {
      await authorize();
      const validBefore = Math.floor(Date.now() / 1000) + 60;
      return {
        headers: { 'payment-signature': 'signed' },
        authorization: {
          signed: {
            from: PAYER,
            to: PAY_TO,
            value: signedValue.toString(),
            validBefore: String(validBefore),
            nonce: '7',
          },
          chosen: { payTo: PAY_TO, amount: signedValue, payer: PAYER, latestValidBefore: Date.now() + 120_000 },
          table: X402_TABLE,
          record: { network: 'eip155:84532', asset: '0x3333333333333333333333333333333333333333', payTo: PAY_TO },
          extra: x402Columns({ version: '2' }),
        },
      };
    },
    async read() {
      return { kind: 'held', why: 'no settlement', record: { outcome: 'unknown' } };
    },
  };
}

function exchangeContext() {
  const sent: Record<string, string>[] = [];
  const x: PaidExchangeContext = {
    session: { id: 'ses_review', currency: 'USD', config: { trustLevel: 2 } } as unknown as SessionRecord,
    host: 'merchant.test',
    purpose: 'api:search',
    async retry(headers) {
      sent.push(headers);
      return { status: 200, headers: {}, body: Buffer.from('{}') } as any;
    },
  };
  return { x, sent };
}

const answer402 = { status: 402, headers: {}, body: Buffer.from('{}') };

test('a signature for more than was reserved never leaves, and its reservation is given back', async () => {
  const { asked, payments } = recordingPayments('drift');
  const [protocol] = createExchange({ db, payments, schemes: [driftingScheme(10n * RESERVED)], now: Date.now });
  const { x, sent } = exchangeContext();
  const err = await protocol!.pay(protocol!.detect(answer402)!, x).then(
    () => undefined,
    (e: unknown) => e as { code?: string },
  );
  assert.is(sent.length, 0, 'the paid retry carried a signature for 10× the reservation');
  assert.is(err?.code, 'payment_terms_refused');
  assert.equal(asked, [`authorize ${RESERVED}`, 'abandon pay_drift_1']);
  assert.is(await db.get(`SELECT payment_id FROM ${X402_TABLE} WHERE payment_id = ?`, ['pay_drift_1']), undefined);
});

test('a signature for exactly what was reserved leaves, recorded and `paying` first (regression guard)', async () => {
  const { asked, payments } = recordingPayments('exact');
  const [protocol] = createExchange({ db, payments, schemes: [driftingScheme(RESERVED)], now: Date.now });
  const { x, sent } = exchangeContext();
  await protocol!.pay(protocol!.detect(answer402)!, x).catch(() => undefined); // held: payment_unconfirmed
  assert.is(sent.length, 1);
  assert.equal(asked, [`authorize ${RESERVED}`, 'paying pay_exact_1']);
  const row = await db.get(`SELECT outcome FROM ${X402_TABLE} WHERE payment_id = ?`, ['pay_exact_1']);
  assert.is(row?.outcome, 'unknown');
});

/**
 * A scheme that is not the gateway's own rail and names no signed authorization: the exchange
 * takes that as "nothing cashable left" and gives the reservation back when the answer is lost.
 * Only the gateway's own rail pays without one (schemes/scheme.ts Credential); any other is
 * refused before its retry leaves, the reservation given back while nothing is out.
 */
function unrecordedScheme(): PaymentScheme {
  return {
    name: 'x402',
    title: 'unrecorded',
    detect: (res) => (res.status === 402 ? {} : undefined),
    async choose() {
      return { amount: RESERVED, currency: 'USD', address: PAY_TO, chosen: {} };
    },
    async sign(_c, authorize) {
      await authorize();
      return { headers: { 'payment-signature': 'signed, but not said so' } };
    },
    async read() {
      return { kind: 'capture', amount: 0n };
    },
  };
}

test("only the gateway's own rail may send a credential that names no signed authorization", async () => {
  const { asked, payments } = recordingPayments('unrecorded');
  const [protocol] = createExchange({ db, payments, schemes: [unrecordedScheme()], now: Date.now });
  const { x, sent } = exchangeContext();
  await protocol!.pay(protocol!.detect(answer402)!, x).catch(() => undefined);
  assert.is(sent.length, 0, 'a credential no record of which is kept left the gateway');
  assert.equal(asked, [`authorize ${RESERVED}`, 'abandon pay_unrecorded_1']);
});

test.run();
