/**
 * The gateway pays merchants that only know the official x402 packages, through
 * /proxy, on loopback, with the stock facilitator on an in-memory EIP-3009 ledger.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { verifyReceipt } from '../../../src/index.js';
import { createSession, proxy, call, sqliteDb, startTestGateway, type TestGateway } from '../helpers.js';
import { BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { startV1Merchant, type StockMerchant } from '../../../gateway/dev/x402-merchants.js';
import { startX402Stand, USDC, USDC_ASSETS, type X402Stand } from './stand.js';

const PAYEE = '0x2222222222222222222222222222222222222222';
const PRICE = 10000n; // "$0.01" in atomic USDC

let stand: X402Stand;
let gw: TestGateway;
let ledger: EvmLedger;
let merchant: StockMerchant;
let v1: StockMerchant;

test.before(async () => {
  stand = await startX402Stand({ payTo: PAYEE });
  ({ gw, ledger, merchant } = stand);
  v1 = await startV1Merchant({ facilitatorUrl: stand.facilitator.url, payTo: PAYEE, asset: BASE_SEPOLIA_USDC.address });
});
test.after(async () => {
  await v1.close();
  await stand.close();
});

const usdcSession = (config: Record<string, unknown> = {}) =>
  createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'], ...config });
const paidHeaders = (m: StockMerchant) =>
  m.seen.filter((s) => s.headers['payment-signature'] !== undefined || s.headers['x-payment'] !== undefined);
const decode = (h: unknown) => JSON.parse(Buffer.from(String(h), 'base64').toString('utf8'));
const view = async (id: string) => (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;

test('v2: a stock @x402/express merchant is paid end to end through /proxy', async () => {
  const s = await usdcSession();
  const payer = ledger.balanceOf(gw.gw.evmAddress);
  const payee = ledger.balanceOf(PAYEE);
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data?q=1`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, { results: ['a', 'b'], q: '1' });
  // The money moved on the ledger, by the facilitator, exactly once.
  assert.is(ledger.balanceOf(gw.gw.evmAddress), payer - PRICE);
  assert.is(ledger.balanceOf(PAYEE), payee + PRICE);
  const transfer = ledger.transfers.at(-1)!;
  // The merchant's answer to the agent carries its PAYMENT-RESPONSE with that transaction.
  const settle = decode(res.headers.get('payment-response'));
  assert.is(settle.success, true);
  assert.is(settle.transaction, transfer.tx);
  // Books and receipt: txRef is the transaction, rail names x402, network and asset.
  const v = await view(s.sessionId);
  assert.is(v.spentMinor, PRICE.toString());
  assert.is(v.reservedMinor, '0');
  const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
  assert.is(receipts.length, 1);
  const r = receipts[0];
  assert.is(r.txRef, `txid:${transfer.tx}`);
  assert.is(r.rail, `x402:eip155:84532:${USDC}`);
  assert.equal(r.amount, { amountMinor: PRICE.toString(), currency: 'USDC' });
  assert.is(r.sba.authorization.rail, 'x402');
  assert.ok(r.sba.grant.allowedRails.includes('x402'), 'the grant allows the rail its SBAs name');
  assert.is(res.headers.get('x-ctl-receipt-id'), r.receiptId);
  const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
  assert.ok((await verifyReceipt(r, { jwks })).valid);
  // Once paid, the SBA lives in the receipt alone: the copy held for reconcile is dropped.
  const row = await gw.db.get<{ state: string; sba: string | null }>(
    `SELECT state, sba FROM gw_payments WHERE session_id = ?`,
    [s.sessionId],
  );
  assert.equal(row, { state: 'paid', sba: null });
});

test('golden: the decoded PAYMENT-SIGNATURE the merchant received', async () => {
  const s = await usdcSession();
  const before = paidHeaders(merchant).length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  const seen = paidHeaders(merchant).slice(before);
  assert.is(seen.length, 1);
  assert.is(seen[0]!.headers['x-payment'], undefined, 'v2 only: no v1 header');
  assert.is(seen[0]!.headers.authorization, undefined, 'the session token never reaches the merchant');
  const p = decode(seen[0]!.headers['payment-signature']);
  assert.equal(Object.keys(p).sort(), ['accepted', 'payload', 'resource', 'x402Version']);
  assert.is(p.x402Version, 2);
  assert.equal(Object.keys(p.accepted).sort(), [
    'amount',
    'asset',
    'extra',
    'maxTimeoutSeconds',
    'network',
    'payTo',
    'scheme',
  ]);
  assert.equal(
    {
      scheme: p.accepted.scheme,
      network: p.accepted.network,
      amount: p.accepted.amount,
      asset: p.accepted.asset.toLowerCase(),
      payTo: p.accepted.payTo.toLowerCase(),
    },
    { scheme: 'exact', network: 'eip155:84532', amount: PRICE.toString(), asset: USDC, payTo: PAYEE },
  );
  assert.equal(Object.keys(p.payload).sort(), ['authorization', 'signature']);
  assert.match(p.payload.signature, /^0x[0-9a-f]{130}$/);
  const a = p.payload.authorization;
  assert.equal(Object.keys(a).sort(), ['from', 'nonce', 'to', 'validAfter', 'validBefore', 'value']);
  assert.is(a.from.toLowerCase(), gw.gw.evmAddress.toLowerCase());
  assert.is(a.to.toLowerCase(), PAYEE);
  assert.is(a.value, PRICE.toString());
  assert.match(a.nonce, /^0x[0-9a-f]{64}$/);
  assert.ok(
    Number(a.validBefore) - Math.floor(Date.now() / 1000) <= p.accepted.maxTimeoutSeconds,
    'validity no longer than the merchant asked',
  );
});

test('v1: a hand-written x402 v1 merchant is paid with X-PAYMENT and answers X-PAYMENT-RESPONSE', async () => {
  const s = await usdcSession();
  const before = ledger.transfers.length;
  const res = await proxy(gw, s.sessionToken, `${v1.url}/weather`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, { forecast: 'sunny' });
  assert.is(ledger.transfers.length, before + 1);
  const seen = paidHeaders(v1);
  const p = decode(seen.at(-1)!.headers['x-payment']);
  assert.is(seen.at(-1)!.headers['payment-signature'], undefined);
  // golden: the v1 payload shape (network by name, the payload complete in itself)
  assert.equal(Object.keys(p).sort(), ['network', 'payload', 'scheme', 'x402Version']);
  assert.equal(
    { x402Version: p.x402Version, scheme: p.scheme, network: p.network },
    { x402Version: 1, scheme: 'exact', network: 'base-sepolia' },
  );
  assert.equal(Object.keys(p.payload.authorization).sort(), [
    'from',
    'nonce',
    'to',
    'validAfter',
    'validBefore',
    'value',
  ]);
  assert.is(p.payload.authorization.value, '7000');
  const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
  assert.is(receipts[0].txRef, `txid:${ledger.transfers.at(-1)!.tx}`);
  assert.is(receipts[0].rail, `x402:eip155:84532:${USDC}`, 'the v1 network name is normalised to CAIP-2');
  assert.is((await view(s.sessionId)).spentMinor, '7000');
});

test('budget refusal: no signature, no payment header, nothing reserved', async () => {
  const s = await usdcSession({ budget: { amount: '9999', currency: 'USDC' } });
  const before = paidHeaders(merchant).length;
  const transfers = ledger.transfers.length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 402, res.text);
  assert.is(res.body.error.code, 'budget_exceeded');
  assert.is(res.headers.get('x-ctl-gateway-error'), 'budget_exceeded');
  assert.is(paidHeaders(merchant).length, before, 'the merchant never saw PAYMENT-SIGNATURE');
  assert.is(ledger.transfers.length, transfers);
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], ['0', '0']);
});

test('purpose and merchant refusals: no payment header', async () => {
  const before = paidHeaders(merchant).length;
  const s = await usdcSession();
  const p = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'shopping:checkout', method: 'GET' });
  assert.is(p.status, 402);
  assert.is(p.body.error.code, 'purpose_not_allowed');
  const blocked = await usdcSession({ merchantBlocklist: ['127.0.0.1'] });
  const m = await proxy(gw, blocked.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(m.status, 402);
  assert.is(m.body.error.code, 'destination_not_allowed');
  assert.is(paidHeaders(merchant).length, before);
  assert.ok(gw.events.some((e) => e.type === 'payment.denied' && e.data.code === 'purpose_not_allowed'));
});

test(
  'terms refused before any policy: an asset outside CTL_X402_ASSETS, a validity above ' +
    'the maximum, a currency with no mapped asset',
  async () => {
    const before = paidHeaders(merchant).length;
    const s = await usdcSession();
    const other = await proxy(gw, s.sessionToken, `${merchant.url}/other`, { purpose: 'api:search', method: 'GET' });
    assert.is(other.status, 402, other.text);
    assert.is(other.body.error.code, 'asset_not_allowed');
    const long = await proxy(gw, s.sessionToken, `${merchant.url}/long`, { purpose: 'api:search', method: 'GET' });
    assert.is(long.status, 502, long.text);
    assert.is(long.body.error.code, 'payment_terms_refused');
    assert.match(long.body.error.message, /maxTimeoutSeconds 3600/);
    const usd = await createSession(gw, { budget: { amount: '100000', currency: 'USD' } });
    const u = await proxy(gw, usd.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
    assert.is(u.body.error.code, 'asset_not_allowed', 'a USD budget is not paid in USDC unless the map says so');
    assert.is(paidHeaders(merchant).length, before);
    assert.equal([(await view(s.sessionId)).reservedMinor, (await view(usd.sessionId)).reservedMinor], ['0', '0']);
  },
);

test('a replayed or tampered payment is refused by the facilitator; the ledger does not move', async () => {
  const s = await usdcSession();
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200);
  const header = String(paidHeaders(merchant).at(-1)!.headers['payment-signature']);
  const balance = ledger.balanceOf(gw.gw.evmAddress);
  const transfers = ledger.transfers.length;
  // Replay: the same signed authorization again, straight to the merchant.
  const replay = await fetch(`${merchant.url}/data`, { headers: { 'payment-signature': header } });
  assert.is(replay.status, 402);
  await replay.text();
  // Tampered: a larger value under the same signature.
  const p = decode(header);
  p.payload.authorization.value = (PRICE * 100n).toString();
  p.accepted.amount = (PRICE * 100n).toString();
  const tampered = await fetch(`${merchant.url}/data`, {
    headers: { 'payment-signature': Buffer.from(JSON.stringify(p)).toString('base64') },
  });
  assert.is(tampered.status, 402);
  await tampered.text();
  // Redirected to another payee under the same signature.
  const q = decode(header);
  q.payload.authorization.to = '0x3333333333333333333333333333333333333333';
  const redirected = await fetch(`${merchant.url}/data`, {
    headers: { 'payment-signature': Buffer.from(JSON.stringify(q)).toString('base64') },
  });
  assert.is(redirected.status, 402);
  await redirected.text();
  assert.is(ledger.balanceOf(gw.gw.evmAddress), balance);
  assert.is(ledger.transfers.length, transfers);
  // And on the ledger itself: a used nonce and a bad signature revert.
  const a = decode(header).payload.authorization;
  const sig = decode(header).payload.signature;
  const args = [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, sig] as const;
  const revert = (a: readonly unknown[]) =>
    ledger.signer
      .writeContract({
        address: BASE_SEPOLIA_USDC.address,
        abi: [],
        functionName: 'transferWithAuthorization',
        args: a,
      })
      .then(
        () => 'mined',
        (e: Error) => e.message,
      );
  assert.is(await revert(args), 'FiatTokenV2: authorization is used or canceled');
  assert.is(
    await revert([...args.slice(0, 5), `0x${'11'.repeat(32)}`, sig]),
    'FiatTokenV2: invalid signature',
    'another nonce under the same signature',
  );
});

test('N parallel paid calls against a budget for fewer: exactly the budget is paid', async () => {
  const N = 8;
  const fits = 3;
  const s = await usdcSession({ budget: { amount: (PRICE * BigInt(fits) + 5000n).toString(), currency: 'USDC' } });
  const payer = ledger.balanceOf(gw.gw.evmAddress);
  const before = paidHeaders(merchant).length;
  const results = await Promise.all(
    Array.from({ length: N }, (_, i) =>
      proxy(gw, s.sessionToken, `${merchant.url}/data?q=${i}`, { purpose: 'api:search', method: 'GET' }),
    ),
  );
  const ok = results.filter((r) => r.status === 200).length;
  const refused = results.filter((r) => r.body?.error?.code === 'budget_exceeded').length;
  assert.is(ok, fits, JSON.stringify(results.map((r) => r.status)));
  assert.is(refused, N - fits);
  assert.is(paidHeaders(merchant).length - before, fits, 'refused calls sent no payment header');
  assert.is(payer - ledger.balanceOf(gw.gw.evmAddress), PRICE * BigInt(fits));
  const v = await view(s.sessionId);
  assert.equal([v.spentMinor, v.reservedMinor], [(PRICE * BigInt(fits)).toString(), '0']);
});

test(
  'a payer without funds: the facilitator refuses, the agent gets payment_unconfirmed, ' +
    'the reservation is held (the sent authorization stays cashable)',
  async () => {
    const poor = await startTestGateway(sqliteDb(), { x402: { assets: USDC_ASSETS } });
    try {
      const s = await createSession(poor, { budget: { amount: '100000', currency: 'USDC' } });
      const res = await proxy(poor, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
      assert.is(res.status, 502, res.text);
      assert.is(res.body.error.code, 'payment_unconfirmed');
      assert.match(res.body.error.message, /insufficient|balance/i);
      const v = (await call(poor.url, 'GET', `/sessions/${s.sessionId}`, { key: poor.ownerKey })).body;
      assert.equal([v.spentMinor, v.reservedMinor], ['0', PRICE.toString()]);
    } finally {
      await poor.close();
    }
  },
);

test('the agent cannot smuggle its own payment headers to the merchant', async () => {
  const s = await usdcSession();
  await proxy(gw, s.sessionToken, `${merchant.url}/data`, {
    purpose: 'shopping:checkout',
    method: 'GET',
    headers: { 'payment-signature': 'forged', 'x-payment': 'forged' },
  });
  const last = merchant.seen.at(-1)!;
  assert.is(last.headers['payment-signature'], undefined);
  assert.is(last.headers['x-payment'], undefined);
});

test.run();
