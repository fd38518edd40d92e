/**
 * The demo merchant of `ctl demo` and `ctl start`: a search API on this machine priced at 1.00 USD
 * a call in the X-Payment dialect (a 402 with `X-Payment: { amount, currency, address }`; the paid
 * retry carries `X-Payment-Receipt`). Every answer says it is the demo: it exists so that a
 * newcomer has something to pay, and is never started in production. With `tls` it also answers
 * HTTPS on a port of its own (`ctl start`: for the egress proxy, gateway/dev/demo-tls.ts).
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface DemoMerchant {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** `127.0.0.1:<port>`, the exact private target the gateway must be allowed to reach. */
  hostPort: string;
  /** Minor units of USD per search. */
  price: string;
  /** With `tls`: `https://<host>:<port>` and its `host:port`, the same merchant over HTTPS. */
  httpsUrl?: string;
  httpsHostPort?: string;
  close(): Promise<void>;
}

export const DEMO_MERCHANT_ADDRESS = 'acct_demo_merchant';
const NOTE = 'CTL demo merchant (development only: started by ctl start / ctl demo, not a real service)';

/** @example const m = await startDemoMerchant(); // m.url + '/search?q=ctl' answers 402, then 200 once paid */
export async function startDemoMerchant(
  options: { port?: number; host?: string; tls?: { key: string; cert: string } } = {},
): Promise<DemoMerchant> {
  const price = '100';
  const handler: RequestListener = (req, res) => {
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
  };
  const host = options.host ?? '127.0.0.1';
  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) =>
        reject(e.code === 'EADDRINUSE' ? new Error(`demo merchant: port ${port} on ${host} is already in use`) : e),
      );
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  const stop = (server: Server) => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  };
  const server = createServer(handler);
  const port = await listen(server, options.port ?? 0);
  const secure = options.tls ? createHttpsServer(options.tls, handler) : undefined;
  const httpsPort = secure ? await listen(secure, 0).catch(async (e) => (await stop(server), Promise.reject(e))) : 0;
  return {
    url: `http://${host}:${port}`,
    hostPort: `${host}:${port}`,
    price,
    ...(secure ? { httpsUrl: `https://${host}:${httpsPort}`, httpsHostPort: `${host}:${httpsPort}` } : {}),
    close: async () => {
      await Promise.all([stop(server), secure && stop(secure)]);
    },
  };
}
