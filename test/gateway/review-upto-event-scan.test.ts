/**
 * When a merchant's `upto` report names a transaction that is not its permit's settle (another
 * payment's), the gateway looks for the settle among the upto proxy's `Settled` events
 * (payments/evm/permit2.ts uptoSettlement), always over a block range: from the head when the
 * permit was signed (recorded with the payment; block 0 without a reader that numbers blocks) to
 * the confirmed block. A node asked with no `fromBlock` answers for the latest block only: the
 * settle would be missed and the whole hold committed, a hostile merchant making a session count
 * 50,000 for every 30,000 it is paid. The reader here answers as such a node does.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';
import { createEvmLedger, type EvmLedger } from '../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS } from '../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../gateway/dev/x402-upto-merchant.js';
import { startHostileFront, rewriteX402Settlement, type HostileFront } from '../../gateway/dev/hostile-merchants.js';
import { USDC_ASSETS } from './x402/stand.js';

const PAYEE = '0x4444444444444444444444444444444444444444';

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let merchant: UptoMerchant;
let otherTx: HostileFront;

/** The ledger as a node answers viem: eth_getLogs without a range is the latest block, mined after the settle. */
function viemLikeReader(l: EvmLedger) {
  const r = l.reader;
  return {
    ...r,
    async getContractEvents(a: Parameters<typeof r.getContractEvents>[0]) {
      if (a.fromBlock === undefined) return r.getContractEvents({ ...a, fromBlock: BigInt(l.logs.length + 1_000) });
      return r.getContractEvents(a);
    },
  };
}

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  otherTx = await startHostileFront(merchant.url, {
    lie: rewriteX402Settlement((s) => ({ ...s, amount: '1000', transaction: ledger.permit2Transfers[0]!.tx })),
  });
  db = sqliteDb();
  gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS, chain: () => viemLikeReader(ledger) as any } });
  ledger.mint(gw.gw.evmAddress, 10_000_000n);
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 10_000_000n);
});

test.after(async () => {
  await gw.close();
  for (const l of [otherTx, merchant, facilitator]) await l.close();
  await db.drop();
});

const session = () => createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:meter'] });
const pay = (token: string, url: string) => proxy(gw, token, url, { purpose: 'api:meter', method: 'GET' });
const spent = async (id: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
  return BigInt(v.spentMinor) + BigInt(v.reservedMinor);
};

test('a report naming another payment’s transaction: the settle is found, its amount counted', async () => {
  const honest = await session();
  assert.is((await pay(honest.sessionToken, `${merchant.url}/metered?units=10`)).status, 200);
  assert.is(await spent(honest.sessionId), 10_000n, 'the honest report names its own settle');

  const victim = await session();
  const before = ledger.balanceOf(PAYEE);
  const res = await pay(victim.sessionToken, `${otherTx.url}/metered?units=30`);
  assert.is(res.status, 200, res.text);
  const moved = ledger.balanceOf(PAYEE) - before;
  assert.is(moved, 30_000n);
  await gw.gw.reconcile(0);
  assert.is(await spent(victim.sessionId), moved, 'the session counts what moved, not the whole hold');
});

test.run();
