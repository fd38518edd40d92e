/**
 * x402 merchants that know nothing of CTL, on loopback: the stock x402Facilitator
 * with the stock `exact` EVM scheme served over HTTP (its chain is the in-memory ledger or a real node:
 * x402-chain.ts), a stock
 * @x402/express merchant using it through the stock HTTPFacilitatorClient, and a small
 * hand-written x402 v1 merchant (a 402 JSON body with `accepts`, `X-PAYMENT`, `X-PAYMENT-RESPONSE`).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { registerExactEvmScheme } from '@x402/evm/exact/facilitator';
import { UptoEvmScheme as UptoFacilitatorScheme } from '@x402/evm/upto/facilitator';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import type { EvmLedger } from './evm-ledger.js';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

async function serve(server: Server): Promise<Listening> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 1000;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/**
 * The stock facilitator over HTTP (`/verify`, `/settle`, `/supported`) with the stock `exact` and
 * `upto` EVM schemes; `settleDelayMs` slows settle down. `ledger`: the in-memory ledger, or a node's
 * (x402-chain.ts deployX402Chain).
 */
export async function startFacilitator(
  ledger: Pick<EvmLedger, 'signer'> & { token: { chainId: number } },
  o: { settleDelayMs?: number } = {},
): Promise<Listening & { settles: number }> {
  const facilitator = new x402Facilitator();
  registerExactEvmScheme(facilitator, {
    signer: ledger.signer,
    networks: `eip155:${ledger.token.chainId}` as `${string}:${string}`,
  });
  facilitator.register(`eip155:${ledger.token.chainId}`, new UptoFacilitatorScheme(ledger.signer));
  const app = express();
  app.use(express.json());
  const state = { settles: 0 };
  app.get('/supported', (_req, res) => {
    res.json(facilitator.getSupported());
  });
  app.post('/verify', async (req, res) => {
    try {
      res.json(await facilitator.verify(req.body.paymentPayload, req.body.paymentRequirements));
    } catch (e) {
      res.status(400).json({ isValid: false, invalidReason: (e as Error).message });
    }
  });
  app.post('/settle', async (req, res) => {
    state.settles++;
    if (o.settleDelayMs) await new Promise((r) => setTimeout(r, o.settleDelayMs));
    try {
      res.json(await facilitator.settle(req.body.paymentPayload, req.body.paymentRequirements));
    } catch (e) {
      res.status(400).json({
        success: false,
        errorReason: (e as Error).message,
        transaction: '',
        network: req.body.paymentRequirements?.network,
      });
    }
  });
  const l = await serve(createServer(app));
  return Object.assign(l, {
    get settles() {
      return state.settles;
    },
  });
}

export interface StockMerchant extends Listening {
  /** Path (and full URL, with its query) and headers of every request that reached the merchant. */
  seen: { path: string; url?: string; headers: IncomingHttpHeaders }[];
}

/**
 * A merchant written the way the @x402/express README says: `GET /data` costs $0.01 (10000 atomic
 * USDC on Base Sepolia), `GET /boom` is paid but its handler fails, `GET /long` asks for an hour
 * of validity, `GET /other` is priced in a token outside the gateway's asset map.
 */
export async function startStockMerchant(o: {
  facilitatorUrl: string;
  payTo: string;
  facilitatorTimeoutMs?: number;
  otherAsset?: string;
  /** The validity `GET /data` asks for (the stock default otherwise): short, so a held authorization dies soon. */
  maxTimeoutSeconds?: number;
}): Promise<StockMerchant> {
  const resourceServer = new x402ResourceServer(
    new HTTPFacilitatorClient({ url: o.facilitatorUrl, timeoutMs: o.facilitatorTimeoutMs }),
  ).register('eip155:84532', new ExactEvmScheme());
  const accepts = {
    scheme: 'exact',
    price: '$0.01',
    network: 'eip155:84532' as const,
    payTo: o.payTo,
    ...(o.maxTimeoutSeconds ? { maxTimeoutSeconds: o.maxTimeoutSeconds } : {}),
  };
  const app = express();
  const seen: StockMerchant['seen'] = [];
  app.use((req, _res, next) => {
    seen.push({ path: req.path, url: req.originalUrl, headers: req.headers });
    next();
  });
  app.use(
    paymentMiddleware(
      {
        'GET /data': { accepts, description: 'one search' },
        'GET /boom': { accepts, description: 'fails after payment is verified' },
        'GET /long': { accepts: { ...accepts, maxTimeoutSeconds: 3600 }, description: 'long validity' },
        'GET /other': {
          accepts: {
            ...accepts,
            price: {
              amount: '10000',
              asset: o.otherAsset ?? '0x1111111111111111111111111111111111111111',
              extra: { name: 'Other', version: '1' },
            },
          },
          description: 'another token',
        },
      },
      resourceServer,
    ),
  );
  app.get('/data', (req, res) => {
    res.json({ results: ['a', 'b'], q: req.query.q ?? null });
  });
  app.get('/boom', (_req, res) => {
    res.status(500).json({ error: 'the search backend is down' });
  });
  app.get('/long', (_req, res) => {
    res.json({ long: true });
  });
  app.get('/other', (_req, res) => {
    res.json({ other: true });
  });
  return Object.assign(await serve(createServer(app)), { seen });
}

/**
 * A hand-written x402 v1 merchant: 402 with `{ x402Version: 1, accepts }` in the body, the paid
 * retry in `X-PAYMENT`, verify and settle at the facilitator, `X-PAYMENT-RESPONSE` on success.
 */
export async function startV1Merchant(o: {
  facilitatorUrl: string;
  payTo: string;
  asset: string;
  amount?: string;
}): Promise<StockMerchant> {
  const seen: StockMerchant['seen'] = [];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url!, 'http://x');
    seen.push({ path: url.pathname, headers: req.headers });
    const requirements = {
      scheme: 'exact',
      network: 'base-sepolia',
      maxAmountRequired: o.amount ?? '7000',
      resource: `http://${req.headers.host}${url.pathname}`,
      description: 'v1 weather',
      mimeType: 'application/json',
      outputSchema: {},
      payTo: o.payTo,
      maxTimeoutSeconds: 120,
      asset: o.asset,
      extra: { name: 'USDC', version: '2' },
    };
    const required = (error: string) => {
      res.writeHead(402, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ x402Version: 1, error, accepts: [requirements] }));
    };
    const header = req.headers['x-payment'];
    if (typeof header !== 'string') return required('X-PAYMENT header is required');
    let paymentPayload: unknown;
    try {
      paymentPayload = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
    } catch {
      return required('X-PAYMENT is not base64 JSON');
    }
    const post = async (path: string) =>
      (await (
        await fetch(`${o.facilitatorUrl}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ x402Version: 1, paymentPayload, paymentRequirements: requirements }),
        })
      ).json()) as Record<string, any>;
    const verified = await post('/verify');
    if (!verified.isValid) return required(String(verified.invalidReason));
    const settled = await post('/settle');
    const paymentResponse = Buffer.from(JSON.stringify(settled)).toString('base64');
    if (!settled.success) {
      res.writeHead(402, { 'content-type': 'application/json', 'x-payment-response': paymentResponse });
      return res.end(JSON.stringify({ x402Version: 1, error: settled.errorReason, accepts: [requirements] }));
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-payment-response': paymentResponse });
    res.end(JSON.stringify({ forecast: 'sunny' }));
  });
  return Object.assign(await serve(server), { seen });
}
