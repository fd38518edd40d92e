/**
 * The gateway pays merchants that only know the Machine Payments Protocol as the stock `mppx`
 * server speaks it (`mppx/express`, `evm` charge), through /proxy, on loopback. The merchant
 * settles through mppx's own x402-facilitator path: the stock x402 facilitator, whose chain is the
 * in-memory EIP-3009 ledger (gateway/dev/evm-ledger.ts). Nothing of mppx is mocked.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Credential, Receipt } from 'mppx';
import { challengeHash } from 'mppx/evm';
import { verifyReceipt } from '../../../src/index.js';
import { createSession, proxy, call, sqliteDb, startTestGateway, type TestDb, type TestGateway } from '../helpers.js';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startMppMerchant, type MppMerchant } from '../../../gateway/dev/mpp-merchants.js';

const PAYEE = '0x5555555555555555555555555555555555555555';
const PRICE = 10000n; // 0.01 USDC in atomic units
const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();
const USDC_ASSETS = new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]);

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening & { settles: number };
let merchant: MppMerchant;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startMppMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  db = sqliteDb();
  gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS } });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await facilitator.close();
  await db.drop();
});

const usdcSession = (config: Record<string, unknown> = {}) =>
  createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'], ...config });
/** Requests that reached the merchant carrying a credential (MPP or x402). */
const credentialed = () =>
  merchant.seen.filter((s) => s.headers.authorization !== undefined || s.headers['payment-signature'] !== undefined);
/** Credentials the gateway signed: each is recorded before it is sent (payments/schemes/mpp/store.ts). */
const signed = async () => Number((await gw.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM gw_mpp_payments`))!.n);
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
const receiptsOf = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts;

test('the stock merchant asks in both protocols; the gateway answers in MPP', async () => {
  const res = await fetch(`${merchant.url}/data`);
  assert.is(res.status, 402);
  assert.match(
    res.headers.get('www-authenticate')!,
    /^Payment id="[^"]+", realm="[^"]+", method="evm", intent="charge"/,
  );
  assert.ok(res.headers.get('payment-required'), 'mppx also offers x402 terms');
});

test('a stock mppx merchant is paid end to end through /proxy, with a receipt', async () => {
  const s = await usdcSession();
  const payer = ledger.balanceOf(gw.gw.evmAddress);
  const payee = ledger.balanceOf(PAYEE);
  const before = credentialed().length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data?q=1`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, { results: ['a', 'b'], q: '1' });
  // The money moved on the ledger, once.
  assert.is(ledger.balanceOf(gw.gw.evmAddress), payer - PRICE);
  assert.is(ledger.balanceOf(PAYEE), payee + PRICE);
  const transfer = ledger.transfers.at(-1)!;
  // Paid over MPP (Authorization: Payment), not over the x402 terms beside it.
  const sent = credentialed().slice(before);
  assert.is(sent.length, 1);
  assert.match(String(sent[0]!.headers.authorization), /^Payment [A-Za-z0-9_-]+$/);
  assert.is(sent[0]!.headers['payment-signature'], undefined);
  // The merchant's Payment-Receipt reaches the agent, naming the transaction.
  const mppReceipt = Receipt.deserialize(res.headers.get('payment-receipt')!);
  assert.equal([mppReceipt.method, mppReceipt.status, mppReceipt.reference], ['evm', 'success', transfer.tx]);
  // Books and the gateway's own receipt.
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0']);
  const receipts = await receiptsOf(s.sessionId);
  assert.is(receipts.length, 1);
  const r = receipts[0];
  assert.is(r.txRef, `txid:${transfer.tx}`);
  assert.is(r.rail, `mpp:eip155:84532:${USDC}`);
  assert.equal(r.amount, { amountMinor: PRICE.toString(), currency: 'USDC' });
  assert.is(r.sba.authorization.rail, 'mpp');
  assert.ok(r.sba.grant.allowedRails.includes('mpp'), 'the grant allows the rail its SBAs name');
  assert.is(res.headers.get('x-ctl-receipt-id'), r.receiptId);
  const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
  assert.ok((await verifyReceipt(r, { jwks })).valid);
  assert.ok(gw.events.some((e) => e.type === 'payment.completed' && e.data.receiptId === r.receiptId));
});

test('golden: the decoded credential the merchant received', async () => {
  const s = await usdcSession();
  const before = credentialed().length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  const header = String(credentialed().slice(before)[0]!.headers.authorization);
  const c = Credential.deserialize(header);
  assert.equal([c.challenge.method, c.challenge.intent], ['evm', 'charge']);
  assert.is(c.challenge.request.amount, PRICE.toString());
  const p = c.payload as Record<string, string>;
  assert.equal(Object.keys(p).sort(), [
    'from',
    'nonce',
    'signature',
    'to',
    'type',
    'validAfter',
    'validBefore',
    'value',
  ]);
  assert.is(p.type, 'authorization');
  assert.is(p.from.toLowerCase(), gw.gw.evmAddress.toLowerCase());
  assert.is(p.to.toLowerCase(), PAYEE);
  assert.is(p.value, PRICE.toString());
  assert.is(p.nonce, challengeHash(c.challenge), 'the EIP-3009 nonce binds the challenge');
  assert.is(
    Number(p.validBefore),
    Math.floor(Date.parse(c.challenge.expires!) / 1000),
    'valid until the challenge expires',
  );
  assert.is(c.source, `did:pkh:eip155:84532:${gw.gw.evmAddress}`);
});

test('past the budget: refused before anything is signed (the merchant and the ledger see nothing)', async () => {
  const s = await usdcSession({ budget: { amount: '15000', currency: 'USDC' } });
  const ok = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(ok.status, 200, ok.text);
  const credentials = credentialed().length;
  const signatures = await signed();
  const transfers = ledger.transfers.length;
  const settles = facilitator.settles;
  const seen = merchant.seen.length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 402, res.text);
  assert.is(res.body.error.code, 'budget_exceeded');
  assert.is(res.headers.get('x-ctl-gateway-error'), 'budget_exceeded');
  assert.is(merchant.seen.length, seen + 1, 'only the unpaid request reached the merchant');
  assert.is(credentialed().length, credentials, 'no credential was sent');
  assert.is(await signed(), signatures, 'none was signed');
  assert.is(ledger.transfers.length, transfers);
  assert.is(facilitator.settles, settles);
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [PRICE.toString(), '0'], 'nothing reserved for the refusal');
  assert.ok(gw.events.some((e) => e.type === 'payment.denied' && e.data.code === 'budget_exceeded'));
});

test('purpose and revocation are checked before anything is signed', async () => {
  const s = await usdcSession();
  const credentials = credentialed().length;
  const signatures = await signed();
  const wrong = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:other', method: 'GET' });
  assert.is(wrong.body.error.code, 'purpose_not_allowed');
  const none = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { method: 'GET' });
  assert.is(none.body.error.code, 'purpose_not_allowed');
  const revoked = await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.ok(revoked.status < 300, revoked.text);
  const after = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(after.body.error.code, 'session_revoked');
  assert.is(credentialed().length, credentials, 'no credential was sent');
  assert.is(await signed(), signatures, 'none was signed');
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
});

test('terms the gateway will not sign are refused with nothing reserved', async () => {
  const s = await usdcSession();
  const credentials = credentialed().length;
  const signatures = await signed();
  // An hour of validity: a sent credential would hold the budget past CTL_X402_MAX_HOLD_SECONDS.
  const long = await proxy(gw, s.sessionToken, `${merchant.url}/long`, { purpose: 'api:search', method: 'GET' });
  assert.is(long.status, 502, long.text);
  assert.is(long.body.error.code, 'payment_terms_refused');
  assert.match(long.body.error.message, /expires is \d+ s ahead/);
  // A method the gateway does not pay (mppx's tempo): an unknown method stays refused.
  const tempo = await proxy(gw, s.sessionToken, `${merchant.url}/tempo`, { purpose: 'api:search', method: 'GET' });
  assert.is(tempo.status, 502, tempo.text);
  assert.is(tempo.body.error.code, 'payment_terms_refused');
  assert.match(tempo.body.error.message, /tempo\/charge/);
  // A budget in a currency the asset map does not tie to the merchant's token.
  const eur = await usdcSession({ budget: { amount: '100000', currency: 'EUR' } });
  const other = await proxy(gw, eur.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(other.status, 402, other.text);
  assert.is(other.body.error.code, 'asset_not_allowed');
  assert.is(credentialed().length, credentials, 'no credential was sent');
  assert.is(await signed(), signatures, 'none was signed');
  for (const id of [s.sessionId, eur.sessionId]) {
    const v = await view(id);
    assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
  }
});

test('paid, then the handler fails: committed with its receipt (the money moved)', async () => {
  const s = await usdcSession();
  const transfers = ledger.transfers.length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/boom`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 500, res.text);
  assert.is(ledger.transfers.length, transfers + 1);
  const receipts = await receiptsOf(s.sessionId);
  assert.is(receipts.length, 1);
  assert.is(receipts[0].txRef, `txid:${ledger.transfers.at(-1)!.tx}`);
  assert.is(res.headers.get('x-ctl-receipt-id'), receipts[0].receiptId);
});

test('parallel payments on a budget for two: two are paid, the rest refused before signing', async () => {
  const s = await usdcSession({ budget: { amount: (PRICE * 2n).toString(), currency: 'USDC' } });
  const credentials = credentialed().length;
  const signatures = await signed();
  const transfers = ledger.transfers.length;
  const all = await Promise.all(
    Array.from({ length: 5 }, () =>
      proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' }),
    ),
  );
  const codes = all.map((r) => (r.status === 200 ? 'paid' : r.body.error.code)).sort();
  assert.equal(codes, ['budget_exceeded', 'budget_exceeded', 'budget_exceeded', 'paid', 'paid']);
  assert.is(credentialed().length - credentials, 2, 'two credentials sent');
  assert.is((await signed()) - signatures, 2, 'two signed');
  assert.is(ledger.transfers.length - transfers, 2);
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [(PRICE * 2n).toString(), '0']);
});

test("an Idempotency-Key pays once under the key's payment id; the retry is the replay", async () => {
  const s = await usdcSession();
  const send = () =>
    proxy(gw, s.sessionToken, `${merchant.url}/data?q=7`, {
      purpose: 'api:search',
      method: 'GET',
      headers: { 'idempotency-key': 'mpp-key' },
    });
  const transfers = ledger.transfers.length;
  const first = await send();
  assert.is(first.status, 200, first.text);
  const again = await send();
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.is(again.headers.get('payment-receipt'), first.headers.get('payment-receipt'));
  assert.is(ledger.transfers.length - transfers, 1, 'one transfer');
  const key = await gw.db.get<{ payment_id: string }>(
    `SELECT payment_id FROM gw_idempotency WHERE idem_key = 'mpp-key'`,
  );
  const pay = await gw.db.get<{ rail: string; state: string }>(`SELECT rail, state FROM gw_payments WHERE id = ?`, [
    key!.payment_id,
  ]);
  assert.equal([pay!.rail, pay!.state], ['mpp', 'paid']);
});

test.run();
