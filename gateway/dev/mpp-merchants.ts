/**
 * MPP merchants that know nothing of CTL, on loopback: the stock `mppx/express` middleware with
 * the stock `evm` charge method, written the way the mppx README says. Its settlement goes
 * through mppx's own `x402.facilitator` path to the stock x402 facilitator
 * (x402-merchants.ts startFacilitator), whose chain is the in-memory EIP-3009 ledger
 * (evm-ledger.ts). Nothing here is CTL code but the routes.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Mppx, evm, tempo } from 'mppx/express';
import { assets } from 'mppx/evm';
import type { Listening } from './x402-merchants.js';

export interface MppMerchant extends Listening {
  /** Path and headers of every request that reached the merchant. */
  seen: { path: string; headers: IncomingHttpHeaders }[];
}

/**
 * `GET /data` costs 0.01 USDC on Base Sepolia (10000 atomic units), `GET /boom` is paid but its
 * handler fails, `GET /long` asks for an hour of validity (the stock default is 5 minutes),
 * `GET /tempo` is priced only in mppx's `tempo` method (which the gateway does not pay).
 */
export async function startMppMerchant(o: {
  facilitatorUrl: string;
  payTo: `0x${string}`;
  secretKey?: string;
  /** Gives up on the facilitator after this long (it may still settle): mppx's own `fetch` option. */
  facilitatorTimeoutMs?: number;
}): Promise<MppMerchant> {
  const secretKey = o.secretKey ?? 'dev-mpp-merchant-secret-0123456789abcdef';
  const mppx = Mppx.create({
    methods: [
      evm.charge({
        currency: assets.baseSepolia.USDC,
        recipient: o.payTo,
        x402: {
          facilitator: o.facilitatorUrl,
          ...(o.facilitatorTimeoutMs
            ? {
                fetch: ((input: RequestInfo | URL, init?: RequestInit) =>
                  fetch(input, { ...init, signal: AbortSignal.timeout(o.facilitatorTimeoutMs!) })) as typeof fetch,
              }
            : {}),
        },
      }),
    ],
    secretKey,
  });
  const tempoOnly = Mppx.create({
    methods: [tempo.charge({ currency: '0x20c0000000000000000000000000000000000000', recipient: o.payTo })],
    secretKey,
  });
  const price = { amount: '0.01', description: 'one search' };
  const app = express();
  const seen: MppMerchant['seen'] = [];
  app.use((req, _res, next) => {
    seen.push({ path: req.path, headers: req.headers });
    next();
  });
  app.get('/data', mppx.charge(price), (req, res) => {
    res.json({ results: ['a', 'b'], q: req.query.q ?? null });
  });
  app.get('/boom', mppx.charge(price), (_req, res) => {
    res.status(500).json({ error: 'the search backend is down' });
  });
  // An hour of validity, fixed when the merchant starts (`expires` is a route option).
  app.get('/long', mppx.charge({ ...price, expires: new Date(Date.now() + 3600_000).toISOString() }), (_req, res) => {
    res.json({ long: true });
  });
  app.get('/tempo', tempoOnly.charge({ amount: '0.01' }), (_req, res) => {
    res.json({ tempo: true });
  });
  const server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 1000;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
