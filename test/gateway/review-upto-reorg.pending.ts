/**
 * Review (adversarial): an x402 `upto` capture is committed on the first chain reading, and a
 * committed payment is never read again. The gateway's reader sees a settle of 1,000 under the
 * permit (a block at the chain's head: a sequencer's unsafe block, a node on a fork), commits 1,000
 * and releases the other 49,000 of the hold. That block is then dropped (a reorganisation): on the
 * chain that stays, the permit's nonce is unused, and the merchant, who kept the signed permit,
 * settles it again for the whole 50,000 before its deadline. Reconcile never looks at the
 * committed payment: the session shows 1,000 spent while 50,000 moved, and the 49,000 released
 * were spent again elsewhere (money past the ceiling, repeatable per hold).
 *
 * Expected: what is committed is what moved on the chain that stays: a capture read at a depth
 * that cannot be reorganised (`safe`/`finalized`, or N confirmations), the hold kept until then;
 * or a committed `upto` payment re-read by reconcile until its deadline has passed and the read
 * is final, its spend raised to what moved (`payment.settlement_mismatch`).
 * Pending: fails today (spent 1,000, moved 50,000).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { encodeFunctionData, getAddress, type Hex } from 'viem';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';
import { createEvmLedger, type EvmLedger } from '../../gateway/dev/evm-ledger.js';
import { PERMIT2_ADDRESS, UPTO_PROXY_ABI, UPTO_PROXY_ADDRESS } from '../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../gateway/dev/x402-upto-merchant.js';
import { startHostileFront, type HostileFront } from '../../gateway/dev/hostile-merchants.js';
import { USDC_ASSETS } from './x402/stand.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const MAX = 50_000n;
const FORK_TX = `0x${'f0'.repeat(32)}` as Hex;

let db: TestDb;
let gw: TestGateway;
let ledger: EvmLedger;
let facilitator: Listening;
let merchant: UptoMerchant;
let front: HostileFront;
/** While true, the gateway's reader sees the fork: the permit settled for 1,000 in FORK_TX. */
let onFork = false;
let forkInput: Hex | undefined;
let pocketed: any;

/** The chain as the gateway's node shows it: the canonical ledger, or briefly the fork's head. */
function readerOf(l: EvmLedger) {
  const r = l.reader;
  return {
    ...r,
    async readContract(a: any) {
      if (onFork && a.functionName === 'nonceBitmap') return 2n ** 256n - 1n; // the fork used the nonce
      return r.readContract(a);
    },
    async getTransaction(a: { hash: Hex }) {
      if (onFork && a.hash === FORK_TX)
        return { hash: FORK_TX, from: PAYEE as Hex, to: UPTO_PROXY_ADDRESS as Hex, input: forkInput!, blockNumber: 1n };
      return r.getTransaction(a);
    },
    async getTransactionReceipt(a: { hash: Hex }) {
      if (onFork && a.hash === FORK_TX) return { status: 'success' as const, transactionHash: FORK_TX, logs: [] };
      return r.getTransactionReceipt(a);
    },
  };
}

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  // The merchant keeps the permit; its answer names the fork's settle of 1,000.
  front = await startHostileFront(merchant.url, {
    answer: (req) => {
      const sig = req.headers['payment-signature'];
      if (typeof sig !== 'string') return undefined; // the stock 402 passes
      pocketed = JSON.parse(Buffer.from(sig, 'base64').toString('utf8'));
      const a = pocketed.payload.permit2Authorization;
      forkInput = encodeFunctionData({
        abi: UPTO_PROXY_ABI,
        functionName: 'settle',
        args: [
          {
            permitted: { token: getAddress(a.permitted.token), amount: BigInt(a.permitted.amount) },
            nonce: BigInt(a.nonce),
            deadline: BigInt(a.deadline),
          },
          1000n,
          getAddress(a.from),
          {
            to: getAddress(a.witness.to),
            facilitator: getAddress(a.witness.facilitator),
            validAfter: BigInt(a.witness.validAfter),
          },
          pocketed.payload.signature,
        ],
      });
      onFork = true;
      const settle = { success: true, transaction: FORK_TX, network: 'eip155:84532', amount: '1000' };
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
  db = sqliteDb();
  gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS, chain: () => readerOf(ledger) as any } });
  ledger.mint(gw.gw.evmAddress, 10_000_000n);
  ledger.approve(gw.gw.evmAddress, PERMIT2_ADDRESS, 10_000_000n);
});

test.after(async () => {
  await gw.close();
  for (const l of [front, merchant, facilitator]) await l.close();
  await db.drop();
});

test('a settle read at the head and then reorganised away: the spend follows what finally moved', async () => {
  const sess = await createSession(gw, {
    budget: { amount: '100000', currency: 'USDC' },
    purposes: ['api:meter'],
  });
  const res = await proxy(gw, sess.sessionToken, `${front.url}/metered?units=1`, {
    purpose: 'api:meter',
    method: 'GET',
  });
  assert.is(res.status, 200, res.text);
  let v = (await call(gw.url, 'GET', `/sessions/${sess.sessionId}`, { key: gw.ownerKey })).body;
  const committedAtHead = [v.spentMinor, v.reservedMinor];

  // The fork's block is dropped; on the chain that stays the merchant cashes the kept permit in full.
  onFork = false;
  const before = ledger.balanceOf(PAYEE);
  const late = await fetch(`${facilitator.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ x402Version: 2, paymentPayload: pocketed, paymentRequirements: pocketed.accepted }),
  }).then((x) => x.json());
  assert.is(late.success, true, JSON.stringify(late));
  const moved = ledger.balanceOf(PAYEE) - before;
  assert.is(moved, MAX, 'the whole maximum moved on the chain that stayed');

  await gw.gw.reconcile(0);
  v = (await call(gw.url, 'GET', `/sessions/${sess.sessionId}`, { key: gw.ownerKey })).body;
  assert.is(
    BigInt(v.spentMinor) + BigInt(v.reservedMinor),
    moved,
    `committed at the head: ${committedAtHead.join('/')} (spent/reserved); after reconcile ` +
      `${v.spentMinor}/${v.reservedMinor}, while ${moved} moved`,
  );
});

test.run();
