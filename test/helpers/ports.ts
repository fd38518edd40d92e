/** Local ports for tests: one nothing listens on, and whether one still listens. */
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';

/** A loopback port nothing listens on: bound, then closed. @example const port = await freePort() */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/**
 * Whether something accepts connections at `url`'s host and port. @example await portOpen(gatewayUrl) // false once
 * stopped
 */
export function portOpen(url: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const u = new URL(url);
    const s = connect(Number(u.port), u.hostname);
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}
