import { connect } from 'node:net';

/** Raw bytes on a socket: what fetch and node:http refuse to send. Resolves with all the server wrote. */
export function rawHttp(url: string, request: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const c = connect(Number(u.port), u.hostname);
    let data = '';
    c.on('data', (d) => (data += d));
    c.on('close', () => resolve(data));
    c.on('error', reject);
    c.write(request);
  });
}
