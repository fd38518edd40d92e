/**
 * Starts a Koa app on a port and closes it cleanly (tests listen on port 0 on 127.0.0.1).
 */
import type Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';

export interface Listening {
  server: Server;
  port: number;
  /** `http://127.0.0.1:<port>` (or the host given) */
  url: string;
  close(): Promise<void>;
}

/** @example const srv = await listen(app, { port: 0 }); await fetch(srv.url + '/healthz'); await srv.close() */
export function listen(app: Koa<any, any>, options: { port?: number; host?: string } = {}): Promise<Listening> {
  const host = options.host ?? '127.0.0.1';
  const server = createServer(app.callback());
  // Keep-alive clients (benchmarks, pooled fetch) must not hold close() open forever.
  server.keepAliveTimeout = 5000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      const port = (server.address() as AddressInfo).port;
      resolve({
        server,
        port,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
        close: () =>
          new Promise<void>((res, rej) => {
            server.close((e) => (e ? rej(e) : res()));
            server.closeIdleConnections();
          }),
      });
    });
  });
}
