/**
 * The MPP rail on PostgreSQL: a stock mppx merchant paid, its credential recorded in
 * gw_mpp_payments, and a held payment settled by reconcile from the chain, in a schema of its own.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { postgresDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from '../helpers.js';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startMppMerchant, type MppMerchant } from '../../../gateway/dev/mpp-merchants.js';

const PAYEE = '0x7777777777777777777777777777777777777777';
const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();

let db: TestDb | undefined;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let merchant: MppMerchant;
let skewMs = 0;

test.before(async () => {
  db = await postgresDb('MPP on PostgreSQL');
  if (!db) return;
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startMppMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    x402: {
      assets: new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]),
      chain: (network) => (network === 'eip155:84532' ? ledger.signer : undefined),
    },
  });
});
test.after(async () => {
  if (!db) return;
  await gw.close();
  await merchant.close();
  await facilitator.close();
  await db.drop();
});

test('paid once funded; refused by the merchant while unfunded, held, then released at expiry', async () => {
  if (!db) return;
  const s = await createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
  const send = () => proxy(gw, s.sessionToken, `${merchant.url}/data`, { purpose: 'api:search', method: 'GET' });
  const refused = await send();
  assert.is(refused.body.error.code, 'payment_unconfirmed', refused.text);
  skewMs = 2 * 3600_000;
  const r = await gw.gw.reconcile(0);
  skewMs = 0;
  assert.ok(r.released >= 1, JSON.stringify(r));
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
  const paid = await send();
  assert.is(paid.status, 200, paid.text);
  const rows = await gw.db.all<{ outcome: string; tx: string | null }>(
    `SELECT outcome, tx FROM gw_mpp_payments ORDER BY created_at`,
  );
  assert.equal(
    rows.map((x) => x.outcome),
    ['refused', 'paid'],
  );
  assert.is(rows[1]!.tx, ledger.transfers.at(-1)!.tx);
  const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
  assert.equal([v.spentMinor, v.reservedMinor], ['10000', '0']);
});

test.run();
