/**
 * A webhook receiver for the durability tests: it can be down (its port refuses connections)
 * and come up later on the same port; it records every delivery and the most attempts of one
 * `webhook-id` it ever had in flight at once.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './ports.js';

export interface Delivery {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export { freePort };

/** Down until `up()`; `url` is fixed from the start. */
export async function downReceiver() {
  const port = await freePort();
  const got: Delivery[] = [];
  const open = new Map<string, number>();
  let maxConcurrentPerId = 0;
  let server: Server | undefined;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    got,
    get maxConcurrentPerId() {
      return maxConcurrentPerId;
    },
    /** Distinct webhook-ids received. */
    ids: () => new Set(got.map((d) => d.id)),
    async up() {
      server = createServer((req, res) => {
        const id = String(req.headers['webhook-id']);
        open.set(id, (open.get(id) ?? 0) + 1);
        maxConcurrentPerId = Math.max(maxConcurrentPerId, open.get(id)!);
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          // A little latency, so two instances attempting one id at once would overlap here.
          setTimeout(() => {
            got.push({ id, headers: req.headers, body });
            open.set(id, open.get(id)! - 1);
            res.writeHead(204).end();
          }, 10);
        });
      });
      await new Promise<void>((r) => server!.listen(port, '127.0.0.1', r));
    },
    async close() {
      if (server)
        await new Promise<void>((r) => {
          server!.close(() => r());
          server!.closeAllConnections();
        });
    },
  };
}

/** A service child process that prints one JSON line `{ url }` once listening. */
export function startChild(
  file: string,
  env: Record<string, string | undefined>,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${file} did not start in 30 s`)), 30_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) {
        clearTimeout(timer);
        resolve({ url: JSON.parse(line).url, child });
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited (${code ?? signal}) before listening`));
    });
  });
}

/** SIGKILL: no shutdown code runs (nothing flushed, no lease released). */
export const kill = (c: ChildProcess) =>
  new Promise<void>((r) => {
    if (c.exitCode !== null || c.signalCode !== null) return r();
    c.once('exit', () => r());
    c.kill('SIGKILL');
  });

/** Polls `check` every 50 ms until it returns true, or throws after `ms`. */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
