/**
 * x402 on a real EVM node: anvil (chain id 84532) carries the EIP-3009 USDC and the `upto` proxy
 * written here, Permit2 from its canonical bytecode and Multicall3 (gateway/dev/x402-chain.ts). The
 * gateway pays stock @x402/express merchants whose stock facilitator settles over JSON-RPC, and
 * reads outcomes from the node through its own reader (CTL_X402_RPC_URL, payments/evm/chain.ts):
 * `authorizationState`, Permit2's nonce bitmap, the settle transaction and its logs. Every amount
 * the session's books show is what the node's balances moved.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeEventLog, type Hex } from 'viem';
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyAddress } from '@x402/evm';
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
import { deployX402Chain, USDC_ABI, type X402Chain } from '../../gateway/dev/x402-chain.js';
import {
  startFacilitator,
  startStockMerchant,
  type Listening,
  type StockMerchant,
} from '../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../gateway/dev/x402-upto-merchant.js';
import { chainReaders, parseRpcUrls } from '../../gateway/payments/evm/chain.js';
import { permit2NonceUsed } from '../../gateway/payments/evm/permit2.js';
import { verifyReceipt } from '../../src/index.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const FUNDS = 10_000_000n;

let anvil: Anvil;
let chain: X402Chain;
let facilitator: Listening;
let merchant: StockMerchant;
let upto: UptoMerchant;
let db: TestDb;
let gw: TestGateway;
let skewMs = 0;
/** Forwards to a merchant, and drops the connection once the paid retry was answered (the settle done). */
let lossy: Server;
let lossyTarget = '';

test.before(async () => {
  anvil = await startAnvil({ chainId: 84532 });
  chain = await deployX402Chain(anvil.url);
  facilitator = await startFacilitator(chain);
  merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE, maxTimeoutSeconds: 60 });
  upto = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  lossy = createServer((req, res) => {
    const target = new URL(lossyTarget);
    const up = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        if (answer.statusCode === 402 && !req.headers['payment-signature']) {
          res.writeHead(402, answer.headers);
          answer.pipe(res);
          return;
        }
        answer.resume();
        answer.on('end', () => res.socket?.destroy());
      },
    );
    req.pipe(up);
  });
  await new Promise<void>((r) => lossy.listen(0, '127.0.0.1', r));
  db = sqliteDb();
  gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    x402: {
      assets: new Map([['USDC', [{ network: chain.network, asset: chain.usdc }]]]),
      // The reader the gateway builds from CTL_X402_RPC_URL, as configured in production.
      chain: chainReaders(parseRpcUrls(JSON.stringify({ [chain.network]: anvil.url }))),
    },
  });
  await chain.mint(gw.gw.evmAddress, FUNDS);
  await chain.approvePermit2(gw.gw.evmAddress, FUNDS);
});
test.after(async () => {
  await gw?.close();
  await merchant?.close();
  await upto?.close();
  await facilitator?.close();
  lossy?.closeAllConnections();
  await new Promise((r) => lossy?.close(r));
  await db?.drop();
  await anvil?.stop();
});

const session = (amount = 1_000_000n, purpose = 'api:search') =>
  createSession(gw, {
    budget: { amount: amount.toString(), currency: 'USDC' },
    purposes: [purpose],
    expiresAt: new Date(Date.now() + 86400_000).toISOString().replace(/\.\d+Z$/, 'Z'),
  });
const books = async (id: string) => {
  const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
  return [v.spentMinor, v.reservedMinor];
};
const receiptsOf = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts as any[];
const jwks = async () => (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body;
const lastSignature = (m: StockMerchant) => {
  const sig = [...m.seen].reverse().find((s) => s.headers['payment-signature'])!.headers['payment-signature'];
  return JSON.parse(Buffer.from(String(sig), 'base64').toString('utf8'));
};

test('exact: the facilitator settles on the node; the books are what the node moved', async () => {
  const s = await session();
  const [payee0, payer0] = [await chain.balanceOf(PAYEE), await chain.balanceOf(gw.gw.evmAddress)];
  const res = await proxy(gw, s.sessionToken, `${merchant.url}/data?q=anvil`, { purpose: 'api:search', method: 'GET' });
  assert.is(res.status, 200, res.text);
  const moved = (await chain.balanceOf(PAYEE)) - payee0;
  assert.is(moved, 10_000n, 'the payee received the price on the node');
  assert.is(payer0 - (await chain.balanceOf(gw.gw.evmAddress)), moved, 'the gateway paid it');
  assert.equal(await books(s.sessionId), [moved.toString(), '0'], 'spent = what moved');
  const [r] = await receiptsOf(s.sessionId);
  const tx = r.txRef.replace(/^txid:/, '') as Hex;
  const mined = await chain.client.getTransactionReceipt({ hash: tx });
  assert.is(mined.status, 'success', 'the receipt names a mined transaction');
  const { authorization } = lastSignature(merchant).payload;
  const used = mined.logs.some((l) => {
    try {
      const e = decodeEventLog({ abi: USDC_ABI, data: l.data, topics: l.topics as any });
      return e.eventName === 'AuthorizationUsed' && e.args.nonce === authorization.nonce;
    } catch {
      return false;
    }
  });
  assert.ok(used, "that transaction used the gateway's authorization");
  assert.ok((await verifyReceipt(r, { jwks: await jwks() })).valid);
});

test('upto: Permit2 and the proxy on the node move what was used; the rest of the hold is released', async () => {
  const s = await session(1_000_000n, 'api:meter');
  const payee0 = await chain.balanceOf(PAYEE);
  const res = await proxy(gw, s.sessionToken, `${upto.url}/metered?units=12`, { purpose: 'api:meter', method: 'GET' });
  assert.is(res.status, 200, res.text);
  assert.is((await chain.balanceOf(PAYEE)) - payee0, 12_000n, 'the proxy settled 12 units');
  // The settle is at the head: the hold is kept until it is CTL_X402_CONFIRMATIONS (2) deep.
  assert.equal(await books(s.sessionId), ['0', '50000']);
  await anvil.rpc('evm_mine', []);
  await gw.gw.reconcile(0);
  assert.equal(await books(s.sessionId), ['12000', '0']);
  const [r] = await receiptsOf(s.sessionId);
  assert.equal([r.amount.amountMinor, r.authorizedAmountMinor], ['12000', '50000']);
  const t = await chain.client.getTransaction({ hash: r.txRef.replace(/^txid:/, '') as Hex });
  assert.is(t.to?.toLowerCase(), x402UptoPermit2ProxyAddress.toLowerCase(), 'settled through the upto proxy');
  const { permit2Authorization } = lastSignature(upto as StockMerchant).payload;
  const reader = chainReaders(parseRpcUrls(JSON.stringify({ [chain.network]: anvil.url })))!(chain.network)!;
  assert.ok(await permit2NonceUsed(reader, gw.gw.evmAddress, BigInt(permit2Authorization.nonce)), 'nonce spent');
  assert.is(
    await chain.client.readContract({
      address: chain.usdc,
      abi: USDC_ABI,
      functionName: 'allowance',
      args: [gw.gw.evmAddress as Hex, PERMIT2_ADDRESS],
    }),
    FUNDS - 12_000n,
    "Permit2 drew on the gateway's allowance",
  );
});

test('reconcile reads the node: a lost answer to a settle is committed, a dead authorization released', async () => {
  // The merchant settles, then the connection drops: the gateway cannot know from the merchant.
  lossyTarget = merchant.url;
  const lost = await session();
  const payee0 = await chain.balanceOf(PAYEE);
  const url = `http://127.0.0.1:${(lossy.address() as AddressInfo).port}/data`;
  const res = await proxy(gw, lost.sessionToken, url, { purpose: 'api:search', method: 'GET' });
  assert.ok(res.status >= 500, `the agent sees the lost answer (${res.status})`);
  assert.is((await chain.balanceOf(PAYEE)) - payee0, 10_000n, 'yet the node moved it');
  assert.equal(await books(lost.sessionId), ['0', '10000'], 'held: the outcome is unknown');

  // The handler fails after verify: the stock middleware never settles; the authorization dies.
  const dead = await session();
  const boom = await proxy(gw, dead.sessionToken, `${merchant.url}/boom`, { purpose: 'api:search', method: 'GET' });
  assert.is(boom.body?.error?.code, 'payment_unconfirmed', boom.text);
  assert.equal(await books(dead.sessionId), ['0', '10000'], 'held until the authorization is provably dead');

  skewMs += 15 * 60_000; // past validBefore + the margin, on the gateway's clock
  await gw.gw.reconcile(0);
  assert.equal(await books(lost.sessionId), ['10000', '0'], 'authorizationState says used: committed');
  assert.equal(await books(dead.sessionId), ['0', '0'], 'authorizationState says unused: released');
  assert.is((await chain.balanceOf(PAYEE)) - payee0, 10_000n, 'and the node moved only the one');
});

test.run();
