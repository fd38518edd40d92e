/**
 * Hostile merchants for tests: a front that stands before a stock merchant (x402-merchants.ts,
 * x402-upto-merchant.ts, mpp-merchants.ts), passes every request through, and lies about what
 * was paid in the answer it gives back: what a merchant that controls its own server can do. The
 * money itself only moves through the stock merchant's stock facilitator, on the ledger.
 */
import { createServer, request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Listening } from './x402-merchants.js';

/** A merchant's answer as the front holds it before sending it on. */
export interface FrontAnswer {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

export interface HostileFront extends Listening {
  /** Path and headers of every request the front received. */
  seen: { path: string; headers: IncomingHttpHeaders }[];
}

/**
 * Starts a front before `upstream`. `lie` may rewrite each answer (headers, status, body) before
 * the caller sees it; `answer`, when it returns one, answers the request without asking `upstream`.
 * @example const front = await startHostileFront(merchant.url, { lie: underReportUpto('1000') })
 */
export async function startHostileFront(
  upstream: string,
  o: {
    lie?: (a: FrontAnswer, req: { path: string; headers: IncomingHttpHeaders }) => FrontAnswer | void;
    answer?: (req: { path: string; headers: IncomingHttpHeaders }) => FrontAnswer | undefined;
  } = {},
): Promise<HostileFront> {
  const target = new URL(upstream);
  const seen: HostileFront['seen'] = [];
  const server = createServer((req, res) => {
    const seenReq = { path: req.url ?? '/', headers: req.headers };
    seen.push(seenReq);
    const own = o.answer?.(seenReq);
    if (own) {
      req.resume();
      res.writeHead(own.status, own.headers);
      return res.end(own.body);
    }
    const headers = { ...req.headers, host: target.host };
    const up = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => {
          const headersOut: OutgoingHttpHeaders = { ...answer.headers };
          delete headersOut['content-length'];
          delete headersOut['transfer-encoding'];
          delete headersOut.connection;
          let a: FrontAnswer = { status: answer.statusCode ?? 502, headers: headersOut, body: Buffer.concat(chunks) };
          a = o.lie?.(a, seenReq) ?? a;
          res.writeHead(a.status, { ...a.headers, 'content-length': a.body.length });
          res.end(a.body);
        });
      },
    );
    up.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(up);
  });
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

const decode = (v: unknown) => JSON.parse(Buffer.from(String(v), 'base64').toString('utf8')) as Record<string, unknown>;
const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');

/**
 * x402: rewrites a successful `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1) with `change`
 * (an `upto` merchant that settled the whole permit and reports `amount: '1000'`, or names another
 * transaction).
 */
export function rewriteX402Settlement(change: (settle: Record<string, unknown>) => Record<string, unknown>) {
  return (a: FrontAnswer): FrontAnswer => {
    for (const name of ['payment-response', 'x-payment-response']) {
      const v = a.headers[name];
      if (typeof v !== 'string') continue;
      const s = decode(v);
      if (s.success === true) a.headers[name] = encode(change(s));
    }
    return a;
  };
}

/** x402 `upto`: the settlement reported at `amount` whatever the facilitator settled. */
export const underReportUpto = (amount: string) => rewriteX402Settlement((s) => ({ ...s, amount }));

/**
 * MPP: rewrites a `Payment-Receipt` (base64url JSON, mppx's Receipt) with `change`, e.g. another
 * transaction as its `reference`.
 */
export function rewriteMppReceipt(change: (receipt: Record<string, unknown>) => Record<string, unknown>) {
  return (a: FrontAnswer): FrontAnswer => {
    const v = a.headers['payment-receipt'];
    if (typeof v !== 'string') return a;
    const r = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as Record<string, unknown>;
    a.headers['payment-receipt'] = Buffer.from(JSON.stringify(change(r))).toString('base64url');
    return a;
  };
}
