/**
 * An x402 `upto` settle is captured only once it is `CTL_X402_CONFIRMATIONS` deep (default 2), on a
 * real node. The stock facilitator settles 1,000 of a 50,000 permit on anvil: the settle is at the
 * head, so the gateway keeps the hold. `anvil_reorg` then drops that block: on the chain that stays
 * the permit's nonce is unused, and the merchant, who kept the signed permit (every merchant sees
 * it), settles it again for the whole 50,000 before its deadline. Read at the head and final, the
 * gateway had counted 1,000 while 50,000 left its account; read two deep, reconcile captures what
 * moved on the chain that stays. Without a reorganisation, the next block makes 1,000 final.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Hex } from 'viem';
import {
  sqliteDb,
  startTestGateway,
  createSession,
  proxy,
  call,
  type TestGateway,
  type TestDb,
} from '../gateway/helpers.js';
import { startAnvil, type Anvil } from '../helpers/anvil.js';
import { deployX402Chain, type X402Chain } from '../../gateway/dev/x402-chain.js';
import { startFacilitator, type Listening } from '../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../gateway/dev/x402-upto-merchant.js';
import { chainReaders, parseRpcUrls } from '../../gateway/payments/evm/chain.js';
import { permit2NonceUsed } from '../../gateway/payments/evm/permit2.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const MAX = 50_000n;
const FUNDS = 10_000_000n;

let anvil: Anvil;
let chain: X402Chain;
let facilitator: Listening;
let merchant: UptoMerchant;
let db: TestDb;
let gw: TestGateway;

test.before(async () => {
  anvil = await startAnvil({ chainId: 84532 });
  chain = await deployX402Chain(anvil.url);
  facilitator = await startFacilitator(chain);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  db = sqliteDb();
  gw = await startTestGateway(db, {
    x402: {
      assets: new Map([['USDC', [{ network: chain.network, asset: chain.usdc }]]]),
      chain: chainReaders(parseRpcUrls(JSON.stringify({ [chain.network]: anvil.url }))),
    },
  });
  await chain.mint(gw.gw.evmAddress, FUNDS);
  await chain.approvePermit2(gw.gw.evmAddress, FUNDS);
});
test.after(async () => {
  await gw?.close();
  await merchant?.close();
  await facilitator?.close();
  await db?.drop();
  await anvil?.stop();
});

const books = async (id: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
  return { spent: BigInt(v.spentMinor), reserved: BigInt(v.reservedMinor) };
};

/** The transaction the merchant's PAYMENT-RESPONSE names. */
const settledTx = (res: { headers: Headers }) =>
  JSON.parse(Buffer.from(String(res.headers.get('payment-response')), 'base64').toString('utf8')).transaction as Hex;

const pay = async () => {
  const s = await createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:meter'] });
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/metered?units=1`, {
    purpose: 'api:meter',
    method: 'GET',
  });
  assert.is(res.status, 200, res.text);
  return { s, res };
};

test('a settle at the head keeps the hold; one block later it is final: 1,000 spent, the rest released', async () => {
  const { s, res } = await pay();
  const settle = await chain.client.getTransactionReceipt({ hash: settledTx(res) });
  assert.is(settle.blockNumber, await chain.client.getBlockNumber(), 'the settle is at the head');
  assert.equal(await books(s.sessionId), { spent: 0n, reserved: MAX }, 'one block deep: the hold is kept');
  await gw.gw.reconcile(0);
  assert.equal(await books(s.sessionId), { spent: 0n, reserved: MAX }, 'reconcile too waits for the depth');
  await anvil.rpc('evm_mine', []);
  await gw.gw.reconcile(0);
  assert.equal(await books(s.sessionId), { spent: 1000n, reserved: 0n });
  const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body.receipts;
  assert.equal(
    receipts.map((r: any) => [r.amount?.amountMinor ?? r.amountMinor, r.txRef]),
    [['1000', `txid:${settledTx(res)}`]],
  );
});

test('a settle reorganised away, then cashed in full: the books follow the chain that stays', async () => {
  const payer0 = await chain.balanceOf(gw.gw.evmAddress);
  const { s, res } = await pay();
  assert.equal(await books(s.sessionId), { spent: 0n, reserved: MAX }, 'at the head: held, not captured');

  // The merchant kept the permit the gateway signed (it arrived in PAYMENT-SIGNATURE).
  const sig = [...merchant.seen].reverse().find((x) => x.headers['payment-signature'])!.headers['payment-signature'];
  const kept = JSON.parse(Buffer.from(String(sig), 'base64').toString('utf8'));
  const owner = gw.gw.evmAddress;
  const nonce = BigInt(kept.payload.permit2Authorization.nonce);
  const reader = chainReaders(parseRpcUrls(JSON.stringify({ [chain.network]: anvil.url })), 1)!(chain.network)!;
  assert.ok(await permit2NonceUsed(reader, owner, nonce));

  // The settle's block (the head: automine gives it its own) is replaced by an empty one.
  const settle = await chain.client.getTransactionReceipt({ hash: settledTx(res) });
  assert.is(settle.blockNumber, await chain.client.getBlockNumber(), 'the settle is at the head');
  await anvil.rpc('anvil_reorg', [1, []]);
  assert.is(await permit2NonceUsed(reader, owner, nonce), false, 'on the chain that stays the permit is unused');
  assert.is(await chain.balanceOf(gw.gw.evmAddress), payer0, 'and nothing moved');

  // Before its deadline the merchant settles the kept permit again, for the whole maximum.
  const again = await fetch(`${facilitator.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ x402Version: 2, paymentPayload: kept, paymentRequirements: kept.accepted }),
  }).then((x) => x.json() as Promise<Record<string, unknown>>);
  assert.is(again.success, true, JSON.stringify(again));
  const moved = payer0 - (await chain.balanceOf(gw.gw.evmAddress));
  assert.is(moved, MAX, 'the whole maximum left the gateway on the chain that stayed');

  await anvil.rpc('evm_mine', []);
  await gw.gw.reconcile(0);
  assert.equal(await books(s.sessionId), { spent: moved, reserved: 0n }, 'what moved on the chain that stays');
});

test.run();
