import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { verifyReceipt, verifyCtl, base64DecodeLenient, utf8Decode } from '../../src/index.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type TestGateway,
  type Merchant,
  type TestDb,
  rawRequest,
} from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  db = sqliteDb();
  gw = await startTestGateway(db);
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

test('spec §3 row 2: a 402 is paid, retried with X-Payment-Receipt, and a signed receipt is written', async () => {
  const s = await createSession(gw, { budget: { amount: '1000', currency: 'USD' } });
  const before = merchant.paid.length;
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data?q=1`, { purpose: 'api:search' });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.paid, true);
  assert.match(res.body.receipt, /^txid:/);
  assert.is(merchant.paid.length, before + 1);
  assert.is(merchant.paid.at(-1)!.sba, undefined, 'level 0 sends no SBA');
  const view = await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.is(view.body.spentMinor, '100');
  assert.is(view.body.remainingMinor, '900');
  assert.is(view.body.state, 'active');
  const rc = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(rc.body.receipts.length, 1);
  const receipt = rc.body.receipts[0];
  assert.match(receipt.receiptId, /^rcpt_/);
  assert.is(receipt.txRef, res.body.receipt);
  assert.equal(receipt.amount, { amountMinor: '100', currency: 'USD' });
  assert.is(receipt.merchant, '127.0.0.1');
  assert.is(receipt.purpose, 'api:search');
  assert.is(res.headers.get('x-ctl-receipt-id'), receipt.receiptId);
  // The receipt verifies with the gateway's published keys and carries the SBA.
  const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
  const v = await verifyReceipt(receipt, { jwks });
  assert.ok(v.valid, JSON.stringify(v));
  assert.is(receipt.sba.authorization.maxAmountMinor, '100', 'spec §8: SBA maxAmountMinor = the payment amount');
  assert.is(receipt.sba.authorization.budgetScope, 'SESSION');
  assert.is(receipt.sba.authorization.policyHash, s.policyHash);
  // A tampered receipt does not verify.
  const bad = await verifyReceipt({ ...receipt, amount: { amountMinor: '1', currency: 'USD' } }, { jwks });
  assert.is(bad.valid, false);
});

test('merchant mode: the txid verifies at GET /charge/{id}/verify', async () => {
  const s = await createSession(gw);
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' });
  assert.is(res.status, 200);
  const v = await call(gw.url, 'GET', `/charge/${encodeURIComponent(res.body.receipt)}/verify`);
  assert.is(v.status, 200, v.text);
  assert.is(v.body.paid, true);
  assert.is(v.body.amountMinor, '100');
  assert.is(v.body.address, 'merchant-1');
  const unknown = await call(gw.url, 'GET', `/charge/${encodeURIComponent('txid:nope')}/verify`);
  assert.is(unknown.status, 404);
});

test('merchant mode: a charge is paid through its terms', async () => {
  const ch = await call(gw.url, 'POST', '/charge', {
    body: { amount: '250', currency: 'USD', description: 'one report' },
  });
  assert.is(ch.status, 201, ch.text);
  const m2 = await startMerchant({ amount: '250', address: ch.body.chargeId });
  try {
    let v = await call(gw.url, 'GET', `/charge/${ch.body.chargeId}/verify`);
    assert.is(v.body.paid, false);
    const s = await createSession(gw);
    const res = await proxy(gw, s.sessionToken, `${m2.url}/report`, { purpose: 'api:search' });
    assert.is(res.status, 200);
    v = await call(gw.url, 'GET', `/charge/${ch.body.chargeId}/verify`);
    assert.is(v.body.paid, true);
    assert.is(v.body.txRef, res.body.receipt);
    const info = await call(gw.url, 'GET', '/.well-known/x402-payment-info');
    assert.equal(info.body.rails, ['ledger']);
  } finally {
    await m2.close();
  }
});

test('trust level 1: the paid retry carries X-Ctl-Sba, a chain a merchant can verify', async () => {
  const s = await createSession(gw, { trustLevel: 1 });
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/lvl1`, { purpose: 'api:search' });
  assert.is(res.status, 200);
  const header = merchant.paid.at(-1)!.sba!;
  assert.ok(header, 'X-Ctl-Sba present');
  const sba = JSON.parse(utf8Decode(base64DecodeLenient(header)));
  assert.is(sba.authorization.sessionId, s.sessionId);
  const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
  const v = await verifyCtl(sba, {
    amount: '100',
    currency: 'USD',
    fetch: (u: any, i: any) => fetch(u, i),
    jwks,
  } as any);
  assert.ok(v.valid, JSON.stringify(v));
});

test('unpaid responses pass through unchanged; header hygiene both ways', async () => {
  const s = await createSession(gw);
  const res = await rawRequest(
    gw.url,
    'POST',
    '/proxy',
    {
      authorization: `Bearer ${s.sessionToken}`,
      'x-target-url': `${merchant.url}/free`,
      'x-target-method': 'PUT',
      'x-ctl-purpose': 'api:search',
      cookie: 'secret=1',
      'x-custom': 'kept',
      'content-type': 'text/plain',
      connection: 'x-drop-me',
      'x-drop-me': 'dropped',
      'proxy-authorization': 'Basic abc',
    },
    'hello',
  );
  assert.is(res.status, 200);
  assert.equal(JSON.parse(res.text), { free: true, method: 'PUT', body: 'hello' });
  assert.is(res.headers['x-merchant'], 'yes');
  assert.is(res.headers['connection'], 'keep-alive', 'the gateway writes its own hop-by-hop headers');
  const seen = merchant.seen.at(-1)!.headers;
  assert.is(seen.authorization, undefined, 'the session token never reaches the merchant');
  assert.is(seen.cookie, undefined);
  assert.is(seen['x-target-url'], undefined);
  assert.is(seen['x-target-method'], undefined);
  assert.is(seen['x-ctl-purpose'], undefined);
  assert.is(seen['x-drop-me'], undefined, 'headers named by Connection are hop-by-hop');
  assert.is(seen['proxy-authorization'], undefined);
  assert.is(seen['x-custom'], 'kept');
  assert.is(seen.host, `127.0.0.1:${merchant.port}`);
});

test.run();
