/**
 * Idempotency-Key with an x402 merchant (gateway/README.md): the payment made inside the x402
 * client's hook carries the key's payment id, and a retry is the replay: one transfer on the ledger.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSession, proxy, call, type TestGateway } from '../helpers.js';
import type { EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import type { StockMerchant } from '../../../gateway/dev/x402-merchants.js';
import { startX402Stand, type X402Stand } from './stand.js';

const PAYEE = '0x2222222222222222222222222222222222222222';

let stand: X402Stand;
let gw: TestGateway;
let ledger: EvmLedger;
let merchant: StockMerchant;

test.before(async () => {
  stand = await startX402Stand({ payTo: PAYEE });
  ({ gw, ledger, merchant } = stand);
});
test.after(() => stand.close());

test("x402: a keyed request is paid once under the key's payment id; the retry is the replay", async () => {
  const s = await createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
  const send = () =>
    proxy(gw, s.sessionToken, `${merchant.url}/data?q=7`, {
      purpose: 'api:search',
      method: 'GET',
      headers: { 'idempotency-key': 'x402-key' },
    });
  const transfers = ledger.transfers.length;
  const first = await send();
  assert.is(first.status, 200, first.text);
  const key = await gw.db.get<{ payment_id: string; state: string }>(`SELECT payment_id, state FROM gw_idempotency`);
  const pay = await gw.db.get<{ id: string; state: string }>(`SELECT id, state FROM gw_payments`);
  assert.is(key!.state, 'done');
  assert.is(pay!.id, key!.payment_id, "the x402 payment carries the key's payment id");
  assert.is(pay!.state, 'paid');
  const again = await send();
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.is(again.text, first.text);
  assert.is(
    again.headers.get('payment-response'),
    first.headers.get('payment-response'),
    "the merchant's settlement header is replayed too",
  );
  assert.is(ledger.transfers.length - transfers, 1, 'one transfer');
  const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
  assert.is(v.spentMinor, '10000');
  assert.is(v.reservedMinor, '0');
});

test.run();
