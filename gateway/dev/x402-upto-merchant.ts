/**
 * A metered x402 merchant that knows nothing of CTL: the stock @x402/express middleware with the
 * stock `upto` EVM server scheme. Its terms name a maximum; the payer signs a Permit2 witness
 * transfer for that maximum; after the handler has run, the merchant settles what was used
 * (`setSettlementOverrides`, at most the maximum) through the stock facilitator, and the
 * PAYMENT-RESPONSE header carries the settled `amount`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { paymentMiddleware, setSettlementOverrides, x402ResourceServer } from '@x402/express';
import { UptoEvmScheme } from '@x402/evm/upto/server';
import type { StockMerchant } from './x402-merchants.js';

export interface UptoMerchant extends StockMerchant {
  /** Atomic units the handler asked to settle, per request, in order. */
  charged: string[];
}

/**
 * `GET /metered?units=N` authorizes `maxPrice` ($0.05, 50000 atomic USDC on Base Sepolia, unless
 * told) and charges `N × unitAtomic` (1000 unless told): N = 0 settles nothing, a charge above the
 * maximum is refused by the facilitator and the merchant answers 402. `GET /broken` fails after
 * verification (nothing is settled).
 *
 * @example const m = await startUptoMerchant({ facilitatorUrl, payTo }); fetch(`${m.url}/metered?units=12`)
 */
export async function startUptoMerchant(o: {
  facilitatorUrl: string;
  payTo: string;
  maxPrice?: string;
  unitAtomic?: bigint;
  maxTimeoutSeconds?: number;
}): Promise<UptoMerchant> {
  const resourceServer = new x402ResourceServer(new HTTPFacilitatorClient({ url: o.facilitatorUrl })).register(
    'eip155:84532',
    new UptoEvmScheme(),
  );
  const accepts = {
    scheme: 'upto',
    price: o.maxPrice ?? '$0.05',
    network: 'eip155:84532' as const,
    payTo: o.payTo,
    ...(o.maxTimeoutSeconds ? { maxTimeoutSeconds: o.maxTimeoutSeconds } : {}),
  };
  const unit = o.unitAtomic ?? 1000n;
  const seen: StockMerchant['seen'] = [];
  const charged: string[] = [];
  const app = express();
  app.use((req, _res, next) => {
    seen.push({ path: req.path, url: req.originalUrl, headers: req.headers });
    next();
  });
  app.use(
    paymentMiddleware(
      {
        'GET /metered': { accepts, description: 'metered: pay for the units used' },
        'GET /broken': { accepts, description: 'fails after payment is verified' },
      },
      resourceServer,
    ),
  );
  app.get('/metered', (req, res) => {
    const units = /^\d{1,6}$/.test(String(req.query.units ?? '')) ? BigInt(String(req.query.units)) : 1n;
    const amount = (units * unit).toString();
    charged.push(amount);
    setSettlementOverrides(res, { amount });
    res.json({ units: units.toString(), chargedAtomic: amount });
  });
  app.get('/broken', (_req, res) => {
    res.status(500).json({ error: 'the meter is down' });
  });
  const server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 1000;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    charged,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
