/**
 * The gateway as an HTTP forward proxy (spec §1 part 1: "the agent only points its HTTP client at
 * it"; gateway/README.md "Egress proxy"). An agent sets `HTTP_PROXY`/`HTTPS_PROXY` to
 * `http://agent:<session token>@gateway:port` and trusts the gateway's CA; nothing else changes.
 *
 * - Absolute-form requests (`GET http://host/path`) and the requests inside a `CONNECT` tunnel
 *   are handed to the gateway app as `ANY /proxy` with `X-Target-Url` (routes/proxy.ts): one path
 *   for the address guard, the payment of 402s, receipts, idempotency, rate limits and refusals.
 * - `CONNECT host:port` is answered by terminating TLS with a certificate minted for `host` by
 *   the gateway's CA (ca.ts); the gateway then opens its own TLS connection to the merchant, which
 *   verifies the merchant's certificate as any client does (net/forwarder.ts).
 * - Hosts the owner lists as pass-through (CTL_GATEWAY_EGRESS_PASS_THROUGH) are tunnelled as
 *   bytes: their TLS is the client's own, so nothing there can be read, changed or paid.
 * - The address guard applies to every CONNECT target, pass-through or not.
 * - CONNECTs are counted per session (`connectLimit`), and a tunnel closes when its session ends
 *   (tunnel-watch.ts): a CONNECT is authenticated once, a pass-through tunnel is never read.
 */
import http, { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type Socket } from 'node:net';
import tls from 'node:tls';
import { Duplex } from 'node:stream';
import { lookup as dnsLookup } from 'node:dns';
import type { AddressInfo } from 'node:net';
import { describeError } from '../../service-kit/error-middleware.js';
import { HttpError } from '../../service-kit/http-error.js';
import { canonicalHost } from '../../service-kit/host-name.js';
import { answerClientError } from '../../service-kit/listen.js';
import { createLimiter, type RateLimit, type RateLimitBackend } from '../../service-kit/rate-limit.js';
import type { Logger } from '../../service-kit/index.js';
import type { SessionRecord } from '../sessions/store.js';
import {
  bareHost,
  checkTargetUrl,
  guardedLookup,
  isExcepted,
  type LookupFn,
  type TargetPolicy,
} from '../net/address-guard.js';
import { hostGlobList } from '../net/host-glob.js';
import { authenticateProxy, PROXY_REALM } from './auth.js';
import type { EgressCa } from './ca.js';
import { DEFAULT_CONNECT_LIMIT } from './config.js';
import { createTunnelWatch, type SessionEnds } from './tunnel-watch.js';

/** What the proxy needs of the gateway app (GatewayApp.egress) besides its request handler. */
export interface EgressHooks {
  /** The session behind a token, not counted against the session's rate limit (/proxy counts each request). */
  sessionByToken(token: string): Promise<SessionRecord | undefined>;
  ca: EgressCa;
  targets: TargetPolicy;
  resolve?: LookupFn;
  now: () => number;
  /** Sessions ending (here at once, elsewhere by a re-read): their tunnels close. */
  ends: SessionEnds;
  /** Where the CONNECT counters live (the gateway's database: shared by its instances); default memory. */
  rateLimitBackend?: RateLimitBackend;
}

export interface EgressOptions {
  /** The gateway app's handler (`app.callback()`), taken once its middleware is complete. */
  handle: (req: IncomingMessage, res: ServerResponse) => void;
  hooks: EgressHooks;
  /** Host globs tunnelled untouched (net/host-glob.ts syntax). */
  passThrough?: readonly string[];
  port: number;
  host: string;
  logger?: Logger;
  /** Connecting to a pass-through host, and an idle tunnel (default 10 s and 5 min). */
  connectTimeoutMs?: number;
  idleTimeoutMs?: number;
  /** CONNECTs per session (default DEFAULT_CONNECT_LIMIT); `false`: none. */
  connectLimit?: RateLimit | false;
  /** How often the sessions of open tunnels are read again (tunnel-watch.ts; default 2 s). */
  sessionRecheckMs?: number;
}

export interface EgressProxy {
  /** `http://host:port` of the listener. */
  url: string;
  port: number;
  close(): Promise<void>;
}

interface Refusal {
  status: number;
  code: string;
  message: string;
  /** An HttpError's own headers (Retry-After of a 429). */
  headers?: Record<string, string>;
}

const refusalOf = (e: unknown): Refusal => {
  const d = describeError(e);
  const headers = e instanceof HttpError ? e.headers : undefined;
  return { status: d.status, code: d.code, message: d.message, ...(headers ? { headers } : {}) };
};

function refusalHead(r: Refusal, body: string): Record<string, string> {
  return {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'x-ctl-gateway-error': r.code,
    ...Object.fromEntries(Object.entries(r.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
    ...(r.status === 407 ? { 'proxy-authenticate': `Basic realm="${PROXY_REALM}"` } : {}),
  };
}

/** The gateway's refusal, `{ error: { code, message } }` marked `X-Ctl-Gateway-Error`, as /proxy gives it. */
function refuse(res: ServerResponse, r: Refusal) {
  const body = JSON.stringify({ error: { code: r.code, message: r.message } });
  if (res.headersSent) return void res.destroy();
  res.writeHead(r.status, refusalHead(r, body)).end(body);
}

/** The same refusal written on a CONNECT socket, which has no response object. */
function refuseSocket(socket: Socket, r: Refusal) {
  const body = JSON.stringify({ error: { code: r.code, message: r.message } });
  const head = Object.entries({ ...refusalHead(r, body), connection: 'close' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? 'Error'}\r\n${head}\r\n${body}`);
}

/** `host:port` of a CONNECT request as a URL, or undefined when it is not one (RFC 9110 §9.3.6 authority-form). */
function connectTarget(authority: string | undefined): URL | undefined {
  if (!authority || !/^(\[[0-9a-fA-F:.]+\]|[^\s/?#@\[\]:]+):[0-9]{1,5}$/.test(authority)) return undefined;
  try {
    const u = new URL(`https://${authority}/`);
    return u;
  } catch {
    return undefined;
  }
}

/**
 * A tunnel as the tunnel watch ends it: a pass-through one at once (nothing in it can be seen),
 * a decrypted one once the requests it is serving are answered (a payment made before the end
 * keeps its answer, as on /proxy); what it is asked after the end, /proxy refuses.
 */
interface TunnelLife {
  /** A request inside the tunnel starts; its response's close ends it. */
  begin(res: ServerResponse): void;
  destroy(): void;
  once(event: 'close', fn: () => void): unknown;
}

function tunnelLife(socket: Socket): TunnelLife {
  let inFlight = 0;
  let ending = false;
  return {
    begin(res) {
      inFlight++;
      res.once('close', () => {
        if (--inFlight === 0 && ending) socket.destroy();
      });
    },
    destroy() {
      ending = true;
      if (inFlight === 0) socket.destroy();
    },
    once: (event, fn) => socket.once(event, fn),
  };
}

/** The first bytes the client sends into a tunnel, or undefined if it closes first. */
function firstBytes(socket: Socket): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const done = (b?: Buffer) => {
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      resolve(b);
    };
    const onData = (b: Buffer) => done(b);
    const onClose = () => done(undefined);
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/**
 * The tunnel's socket with the bytes already read put back in front, as a plain stream: Node's
 * HTTP and TLS servers read a net.Socket's handle directly and would skip bytes unshifted onto it.
 */
function prefixed(socket: Socket, first: Buffer): Duplex {
  const d = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk, encoding, cb) {
      socket.write(chunk, encoding, cb);
    },
    final(cb) {
      socket.end(cb);
    },
    destroy(err, cb) {
      socket.destroy();
      cb(err);
    },
  });
  d.push(first);
  socket.on('data', (c: Buffer) => {
    if (!d.push(c)) socket.pause();
  });
  socket.on('end', () => d.push(null));
  socket.on('close', () => d.destroy());
  socket.on('error', (e) => d.destroy(e));
  return d;
}

/** Pass-through: bytes both ways to the address the guard checked, the client's TLS end to end. */
function tunnelUntouched(
  socket: Socket,
  head: Buffer,
  address: string,
  port: number,
  t: { connectTimeoutMs: number; idleTimeoutMs: number },
) {
  const upstream = net.connect({ host: address, port });
  let connected = false;
  const timer = setTimeout(() => {
    upstream.destroy();
    refuseSocket(socket, {
      status: 504,
      code: 'upstream_timeout',
      message: 'the host did not accept the connection',
    });
  }, t.connectTimeoutMs);
  upstream.once('connect', () => {
    clearTimeout(timer);
    connected = true;
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) upstream.write(head);
    socket.pipe(upstream).pipe(socket);
    socket.setTimeout(t.idleTimeoutMs, () => socket.destroy());
  });
  upstream.on('error', (e) => {
    clearTimeout(timer);
    if (connected || !socket.writable) return socket.destroy();
    refuseSocket(socket, {
      status: 502,
      code: 'upstream_error',
      message: `the host could not be reached: ${(e as NodeJS.ErrnoException).code ?? 'error'}`,
    });
  });
  upstream.on('close', () => socket.destroy());
  socket.on('close', () => upstream.destroy());
}

/** Resolves a CONNECT target's host through the address guard (refusing as /proxy does), for an early answer. */
function guardedAddressOf(hooks: EgressHooks): (url: URL) => Promise<string> {
  const guarded = guardedLookup(hooks.targets, hooks.resolve);
  const open = hooks.resolve ?? (dnsLookup as unknown as LookupFn);
  const openLookup = (h: string, opts: any, cb: any) =>
    open(h, { all: true }, (e, a) => (e ? cb(e) : opts?.all ? cb(null, a) : cb(null, a[0]!.address, a[0]!.family)));
  const lookupFor = (url: URL) => (hooks.targets.allowPrivate || isExcepted(url, hooks.targets) ? openLookup : guarded);
  return (url) =>
    new Promise((resolve, reject) =>
      lookupFor(url)(bareHost(url), {}, (err: Error | null, address: string) => (err ? reject(err) : resolve(address))),
    );
}

/**
 * Starts the egress proxy listener.
 * @example const egress = await startEgressProxy({ handle: gw.app.callback(), hooks: gw.egress, port: 0, host:
 * '127.0.0.1' })
 */
export async function startEgressProxy(o: EgressOptions): Promise<EgressProxy> {
  const { hooks } = o;
  const passThrough = o.passThrough?.length ? hostGlobList(o.passThrough) : () => false;
  const timeouts = { connectTimeoutMs: o.connectTimeoutMs ?? 10_000, idleTimeoutMs: o.idleTimeoutMs ?? 300_000 };
  const guardedAddress = guardedAddressOf(hooks);
  const sockets = new Set<Socket>();
  const limit = o.connectLimit === false ? undefined : (o.connectLimit ?? DEFAULT_CONNECT_LIMIT);
  const connects = createLimiter(hooks.rateLimitBackend, limit, { name: 'gw_connect', what: "session's CONNECTs" });
  const watch = createTunnelWatch({
    ends: hooks.ends,
    now: hooks.now,
    recheckMs: o.sessionRecheckMs,
    onError: (e) => o.logger?.warn({ err: e }, 'egress proxy: re-reading the sessions of open tunnels failed'),
  });
  /** The CONNECT a decrypted socket came from: its target, the token that opened it, its requests. */
  const tunnels = new WeakMap<object, { origin: string; token: string; life: TunnelLife }>();

  /** Hands a request to the gateway as `/proxy` would receive it from the same agent. */
  function dispatch(req: IncomingMessage, res: ServerResponse, target: URL, token: string) {
    const headers = req.headers;
    for (const k of Object.keys(headers))
      if (k.startsWith('x-target-') || k === 'proxy-authorization') delete headers[k];
    headers['authorization'] = `Bearer ${token}`;
    headers['x-target-url'] = target.href;
    req.url = '/proxy';
    o.handle(req, res);
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse) {
    try {
      const url = req.url ?? '';
      if (!/^https?:\/\//i.test(url)) {
        return refuse(res, {
          status: 400,
          code: 'malformed',
          message:
            "this is the gateway's egress proxy: send absolute-form requests (GET http://host/path) " +
            'or CONNECT host:port',
        });
      }
      const auth = await authenticateProxy(req.headers['proxy-authorization'], hooks.sessionByToken, hooks.now());
      if (!auth.ok) return refuse(res, { status: 407, code: auth.code, message: auth.message });
      let target: URL;
      try {
        target = new URL(url);
      } catch {
        return refuse(res, { status: 400, code: 'malformed', message: 'the request target is not an absolute URL' });
      }
      dispatch(req, res, target, auth.token);
    } catch (e) {
      o.logger?.warn({ err: e }, 'egress proxy request failed');
      refuse(res, refusalOf(e));
    }
  }

  /** A request inside a CONNECT tunnel: origin-form, for the host the tunnel was opened to. */
  function onTunnelRequest(req: IncomingMessage, res: ServerResponse) {
    const tunnel = tunnels.get(req.socket);
    if (!tunnel) return refuse(res, { status: 400, code: 'malformed', message: 'not a tunnel' });
    tunnel.life.begin(res);
    const path = req.url ?? '';
    // The tunnel's host is the target, whatever the Host header says: it is what the address guard checked.
    if (!path.startsWith('/'))
      return refuse(res, { status: 400, code: 'malformed', message: 'inside a tunnel, send origin-form requests' });
    let target: URL;
    try {
      target = new URL(tunnel.origin + path);
    } catch {
      return refuse(res, { status: 400, code: 'malformed', message: 'the request target is not a valid path' });
    }
    dispatch(req, res, target, tunnel.token);
  }

  async function onConnect(req: IncomingMessage, socket: Socket, head: Buffer) {
    socket.on('error', () => socket.destroy());
    try {
      // A target that is no host:port is a malformed request, whoever sends it (as the main port's 400).
      const target = connectTarget(req.url);
      if (!target) return refuseSocket(socket, { status: 400, code: 'malformed', message: 'CONNECT needs host:port' });
      const auth = await authenticateProxy(req.headers['proxy-authorization'], hooks.sessionByToken, hooks.now());
      if (!auth.ok) return refuseSocket(socket, { status: 407, code: auth.code, message: auth.message });
      // Counted once the token is found: a made-up token spends nobody's budget.
      await connects?.consume(auth.session.id);
      const life = tunnelLife(socket);
      const ended = watch.add(auth.session, life);
      if (ended)
        return refuseSocket(socket, { status: 407, code: `session_${ended}`, message: `the session has ${ended}` });
      checkTargetUrl(target, hooks.targets); // names of this machine and private literals: refused here
      const address = await guardedAddress(target); // and names that resolve inside the network
      // The one canonical host the payment path uses (service-kit/host-name.ts): globs and the leaf
      // certificate see the same name a merchant limit does.
      const host = canonicalHost(bareHost(target));
      if (host === undefined)
        return refuseSocket(socket, {
          status: 400,
          code: 'malformed',
          message: 'the CONNECT target is not a host name',
        });
      const port = Number(target.port || 443);
      if (socket.destroyed) return; // the session ended (or the client left) meanwhile
      if (passThrough(host)) return tunnelUntouched(socket, head, address, port, timeouts);
      const secureContext = await hooks.ca.contextFor(host);
      if (socket.destroyed) return;
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      socket.setTimeout(timeouts.idleTimeoutMs, () => socket.destroy());
      const first = head.length ? head : await firstBytes(socket);
      if (!first) return socket.destroy();
      const stream = prefixed(socket, first);
      // Some clients (undici's ProxyAgent) tunnel plain http too: a TLS record starts with 0x16.
      if (first[0] !== 0x16) {
        tunnels.set(stream, { origin: `http://${target.hostname}:${port}`, token: auth.token, life });
        return void inner.emit('connection', stream);
      }
      // No ALPN: the client speaks HTTP/1.1 inside, which the inner server reads.
      const secure = new tls.TLSSocket(stream as Socket, { isServer: true, secureContext });
      secure.on('error', () => secure.destroy());
      tunnels.set(secure, { origin: `https://${target.host}`, token: auth.token, life });
      inner.emit('connection', secure);
    } catch (e) {
      refuseSocket(socket, refusalOf(e));
    }
  }

  // What the HTTP parser refuses is answered as on the main port (400, 431…), outside and inside tunnels.
  const inner = http.createServer(onTunnelRequest);
  inner.on('clientError', answerClientError);
  const server = http.createServer((req, res) => void onRequest(req, res));
  server.on('connect', (req, socket, head) => void onConnect(req, socket as Socket, head));
  server.on('clientError', answerClientError);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.address.includes(':') ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown}:${addr.port}`,
    port: addr.port,
    async close() {
      watch.close();
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
