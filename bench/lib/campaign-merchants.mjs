// The merchants of bench/campaign.mjs, in the campaign's own process (they outlive every gateway
// kill), each keeping its own books:
// - an X-Payment merchant (spec §2.6) whose pay-to address names the agent's request
//   (`m-<req>`), so a ledger row says which request it paid; it counts paid retries by request;
// - the stock @x402/express merchant (gateway/dev/x402-merchants.ts) with the stock facilitator
//   on the in-memory EVM ledger, whose transfers are the x402 money; the merchant logs each
//   request's URL, so a transfer's nonce leads back to the agent's request;
// - a JSON-RPC `eth_call` endpoint on that ledger: the gateways' chain reader (CTL_X402_RPC_URL),
//   so reconcile can ask whether an expired authorization was cashed.
// With `node: true` the x402 money moves on a real EVM node instead (anvil with the contracts of
// gateway/dev/x402-chain.ts): the facilitator settles over JSON-RPC, the gateways read the node,
// and the transfers and the payer's balance are read back from its logs (`refresh()`).
import http from 'node:http';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const build = (p) => import(pathToFileURL(join(root, 'build', p)).href);

export const XPAY_AMOUNT = 7000n;
/** What the stock merchant's `$0.01` costs in USDC atomic units (the session's minor units, PROTOCOL.md §1). */
export const X402_AMOUNT = 10000n;
export const X402_NETWORK = 'eip155:84532';
const PAYEE = '0x00000000000000000000000000000000000000aa';

function listen(server) {
  server.keepAliveTimeout = 60_000;
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${server.address().port}`)));
}
const close = (server) =>
  new Promise((r) => {
    server.close(() => r());
    server.closeAllConnections();
  });

/** 402 with X-Payment until the retry carries X-Payment-Receipt; `paid` maps request → receipt txids seen. */
export async function startXPayMerchant() {
  const paid = new Map();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const id = url.searchParams.get('req') ?? '';
    const receipt = req.headers['x-payment-receipt'];
    if (typeof receipt === 'string') {
      paid.set(id, [...(paid.get(id) ?? []), receipt]);
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ results: [id] }));
    }
    res.writeHead(402, {
      'x-payment': JSON.stringify({ amount: String(XPAY_AMOUNT), currency: 'USD', address: `m-${id}` }),
      'content-length': 0,
    });
    res.end();
  });
  const url = await listen(server);
  return { url, paid, close: () => close(server) };
}

/**
 * The x402 side: ledger, facilitator, stock merchant (authorizations valid `maxTimeoutSeconds`)
 * and the chain endpoint. `fund(address)` mints the gateway's payer enough for the run.
 */
export async function startX402World({ maxTimeoutSeconds = 10, node = false } = {}) {
  if (node) return startX402NodeWorld({ maxTimeoutSeconds });
  const { createEvmLedger, BASE_SEPOLIA_USDC, TOKEN_ABI } = await build('gateway/dev/evm-ledger.js');
  const { startFacilitator, startStockMerchant } = await build('gateway/dev/x402-merchants.js');
  const { decodeFunctionData, encodeFunctionResult } = await import('viem');
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE, maxTimeoutSeconds });

  const rpc = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      const answer = async (m) => {
        try {
          if (m.method === 'eth_chainId')
            return { jsonrpc: '2.0', id: m.id, result: `0x${BASE_SEPOLIA_USDC.chainId.toString(16)}` };
          if (m.method !== 'eth_call') throw new Error(`${m.method} is not served here`);
          const { to, data } = m.params[0];
          const call = decodeFunctionData({ abi: TOKEN_ABI, data });
          const result = await ledger.signer.readContract({
            address: to,
            abi: TOKEN_ABI,
            functionName: call.functionName,
            args: call.args,
          });
          return {
            jsonrpc: '2.0',
            id: m.id,
            result: encodeFunctionResult({ abi: TOKEN_ABI, functionName: call.functionName, result }),
          };
        } catch (e) {
          return { jsonrpc: '2.0', id: m.id, error: { code: -32000, message: e.message } };
        }
      };
      const m = JSON.parse(body);
      const out = Array.isArray(m) ? await Promise.all(m.map(answer)) : await answer(m);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(out));
    });
  });
  const rpcUrl = await listen(rpc);

  return {
    ledger,
    merchantUrl: merchant.url,
    rpcUrl,
    asset: BASE_SEPOLIA_USDC.address.toLowerCase(),
    fund: (address) => ledger.mint(address, 10n ** 15n),
    requestByNonce: () => requestByNonce(merchant),
    async close() {
      await merchant.close();
      await facilitator.close();
      await close(rpc);
    },
  };
}

/** Request id of each authorization nonce the merchant was sent (from its PAYMENT-SIGNATURE). */
function requestByNonce(merchant) {
  const map = new Map();
  for (const s of merchant.seen) {
    const sig = s.headers['payment-signature'] ?? s.headers['x-payment'];
    if (typeof sig !== 'string') continue;
    const nonce = JSON.parse(Buffer.from(sig, 'base64').toString('utf8')).payload?.authorization?.nonce;
    const id = new URL(s.url ?? s.path, 'http://x').searchParams.get('req');
    if (nonce) map.set(nonce.toLowerCase(), id);
  }
  return map;
}

/**
 * The x402 side on a real node: anvil (chain id 84532) with USDC, Permit2, the upto proxy and
 * Multicall3 (gateway/dev/x402-chain.ts), the stock facilitator settling over JSON-RPC, the stock
 * merchant. `refresh()` reads the node: `ledger.transfers` from the token's AuthorizationUsed and
 * Transfer logs, and `chainMoved`, what left the funded accounts (minted − balance).
 */
async function startX402NodeWorld({ maxTimeoutSeconds }) {
  const { startAnvil } = await build('gateway/dev/anvil.js');
  const { deployX402Chain, USDC_ABI } = await build('gateway/dev/x402-chain.js');
  const { startFacilitator, startStockMerchant } = await build('gateway/dev/x402-merchants.js');
  const anvil = await startAnvil({ chainId: 84532 });
  try {
    const chain = await deployX402Chain(anvil.url);
    const facilitator = await startFacilitator(chain);
    const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE, maxTimeoutSeconds });
    const minted = new Map();
    const world = {
      ledger: { transfers: [] },
      chainMoved: 0n,
      node: anvil,
      merchantUrl: merchant.url,
      rpcUrl: anvil.url,
      asset: chain.usdc,
      async fund(address) {
        await chain.mint(address, 10n ** 15n);
        const a = address.toLowerCase();
        minted.set(a, (minted.get(a) ?? 0n) + 10n ** 15n);
      },
      requestByNonce: () => requestByNonce(merchant),
      async refresh() {
        const events = (eventName) =>
          chain.client.getContractEvents({ address: chain.usdc, abi: USDC_ABI, eventName, fromBlock: 0n });
        const [used, moves] = await Promise.all([events('AuthorizationUsed'), events('Transfer')]);
        world.ledger.transfers = used.map((u) => {
          const t = moves.find(
            (m) =>
              m.transactionHash === u.transactionHash && m.args.from.toLowerCase() === u.args.authorizer.toLowerCase(),
          );
          return {
            tx: u.transactionHash,
            from: u.args.authorizer,
            to: t?.args.to,
            value: t?.args.value ?? 0n,
            nonce: u.args.nonce,
          };
        });
        let moved = 0n;
        for (const [a, n] of minted) moved += n - (await chain.balanceOf(a));
        world.chainMoved = moved;
      },
      async close() {
        await merchant.close();
        await facilitator.close();
        await anvil.stop();
      },
    };
    return world;
  } catch (e) {
    await anvil.stop();
    throw e;
  }
}
