/**
 * The demo merchant of `ctl demo` and `ctl start`: a search API on this machine priced at 1.00 USD
 * a call in the X-Payment dialect (a 402 with `X-Payment: { amount, currency, address }`; the paid
 * retry carries `X-Payment-Receipt`). Every answer says it is the demo: it exists so that a
 * newcomer has something to pay, and is never started in production.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DemoMerchant {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `127.0.0.1:<port>`, the exact private target the gateway must be allowed to reach. */
  hostPort: string;
  /** Minor units of USD per search. */
  price: string;
  close(): Promise<void>;
}

export const DEMO_MERCHANT_ADDRESS = 'acct_demo_merchant';
const NOTE = 'CTL demo merchant (development only: started by ctl start / ctl demo, not a real service)';

/** @example const m = await startDemoMerchant(); // m.url + '/search?q=ctl' answers 402, then 200 once paid */
export async function startDemoMerchant(options: { port?: number; host?: string } = {}): Promise<DemoMerchant> {
  const price = '100';
  const server = createServer((req, res) => {
    const receipt = req.headers['x-payment-receipt'];
    if (typeof receipt !== 'string') {
      res.writeHead(402, {
        'content-type': 'application/json',
        'x-payment': JSON.stringify({ amount: price, currency: 'USD', address: DEMO_MERCHANT_ADDRESS }),
      });
      return res.end(JSON.stringify({ demo: true, note: NOTE, price: { amount: price, currency: 'USD' } }));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ demo: true, note: NOTE, results: ['a', 'b', 'c'], paidWith: receipt }));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE' ? new Error(`demo merchant: port ${options.port} on ${host} is already in use`) : e,
      ),
    );
    server.listen(options.port ?? 0, host, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    hostPort: `${host}:${port}`,
    price,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}
