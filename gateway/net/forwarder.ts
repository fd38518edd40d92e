/**
 * The outbound half of /proxy (spec §4.2): sends the agent's request to the merchant with
 * node:http(s), the address guard inside the socket's lookup, redirects followed by hand so
 * each hop is checked again, and limits on time and response size.
 */
import http from 'node:http';
import https from 'node:https';
import { lookup as dnsLookup } from 'node:dns';
import { HttpError } from '../../service-kit/http-error.js';
import {
  checkTargetUrl,
  guardedLookup,
  isExcepted,
  TargetRefused,
  type LookupFn,
  type TargetPolicy,
} from './address-guard.js';

export interface ForwardRequest {
  url: URL;
  method: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
}

export interface ForwardResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The URL that gave this response, after redirects. */
  url: URL;
}

export interface ForwarderOptions {
  policy: TargetPolicy;
  /** Whole exchange with the merchant, per hop. */
  timeoutMs?: number;
  maxResponseBytes?: number;
  maxRedirects?: number;
  /** DNS, injectable so tests can play a rebinding resolver. */
  resolve?: LookupFn;
  /** CA certificates (PEM) trusted for https targets instead of Node's default store. */
  ca?: string[];
}

// RFC 9110 §7.6.1 hop-by-hop headers, plus the ones that must be recomputed per hop.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
]);

/**
 * The agent's headers minus everything the merchant must never see: its
 * Authorization (the session token), cookies, the gateway's own X-Ctl-* / X-Target-* headers,
 * hop-by-hop headers and any header the Connection header names.
 */
export function cleanRequestHeaders(incoming: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(
    String(incoming.connection ?? '')
      .toLowerCase()
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(incoming)) {
    const name = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    if (name === 'authorization' || name === 'cookie' || name.startsWith('x-ctl-') || name.startsWith('x-target-'))
      continue;
    // Payment headers are the gateway's to write.
    if (name.startsWith('x-payment') || name === 'payment-signature') continue;
    if (name === 'x-forwarded-for' || name === 'forwarded' || name === 'x-real-ip') continue;
    out[name] = v;
  }
  return out;
}

/**
 * Headers that are the gateway's word on a /proxy answer, besides its `X-Ctl-*` namespace (receipt
 * id, session id, refusal code): `Idempotent-Replayed` (idempotency/service.ts: "this answer was
 * stored, nothing was paid again") and `WWW-Authenticate` (errorMiddleware's challenge for the
 * session token; the agent cannot answer a merchant's, its Authorization never reaches the
 * merchant). `Retry-After` and `Cache-Control` stay: on a forwarded answer they describe the
 * merchant's answer, and the gateway's own refusals are told apart by `X-Ctl-Gateway-Error`.
 */
const GATEWAY_ANSWER_HEADERS = new Set(['idempotent-replayed', 'www-authenticate']);

/**
 * The merchant's response headers for the agent: minus hop-by-hop ones, and minus every header
 * the gateway itself writes on its answers, so a merchant cannot speak with the gateway's voice.
 */
export function cleanResponseHeaders(incoming: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(
    String(incoming.connection ?? '')
      .toLowerCase()
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(incoming)) {
    const name = k.toLowerCase();
    if (
      v === undefined ||
      HOP_BY_HOP.has(name) ||
      named.has(name) ||
      name.startsWith('x-ctl-') ||
      GATEWAY_ANSWER_HEADERS.has(name)
    )
      continue;
    out[k] = v;
  }
  return out;
}

/**
 * What the gateway adds to a request to pay for it: proofs and credentials for the origin that
 * asked (a receipt, the SBA, the hold's payment id, an x402 signature, an MPP credential in
 * `Authorization`). None of it follows a redirect to another origin (as fetch drops Authorization).
 */
const isPaymentCredential = (name: string) =>
  name === 'authorization' || name === 'payment-signature' || name.startsWith('x-payment') || name.startsWith('x-ctl-');

/**
 * A merchant's word on a payment it received: a capture, an x402 settlement, an MPP receipt. From
 * an origin that was never sent the payment, it is nobody's word, and is dropped.
 */
const PAYMENT_ANSWERS = ['x-payment-captured', 'payment-response', 'x-payment-response', 'payment-receipt'];

export const upstreamTimeout = (ms: number) =>
  new HttpError(504, 'upstream_timeout', `the merchant did not answer within ${ms} ms`);
export const upstreamError = (message: string) => new HttpError(502, 'upstream_error', message);

export interface Forwarder {
  send(req: ForwardRequest): Promise<ForwardResponse>;
  close(): void;
}

/** The final answer of a chain: payment answers dropped when another origin than the paid one gave it. */
function answerOf(res: ForwardResponse, asked: URL, paid: boolean): ForwardResponse {
  if (!paid || res.url.origin === asked.origin) return res;
  const headers = { ...res.headers };
  for (const k of PAYMENT_ANSWERS) delete headers[k];
  return { ...res, headers };
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const policy = options.policy;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxBytes = options.maxResponseBytes ?? 10 * 1024 * 1024;
  const maxRedirects = options.maxRedirects ?? 5;
  const guarded = guardedLookup(policy, options.resolve);
  const open = options.resolve ?? (dnsLookup as unknown as LookupFn);
  const openLookup = (h: string, o: any, cb: any) =>
    open(h, { all: true }, (e, a) => (e ? cb(e) : o?.all ? cb(null, a) : cb(null, a[0]!.address, a[0]!.family)));
  const agents = {
    http: new http.Agent({ keepAlive: true, maxSockets: 512 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 512, ...(options.ca?.length ? { ca: options.ca } : {}) }),
  };

  function once(req: ForwardRequest): Promise<ForwardResponse> {
    const url = req.url;
    const isHttps = url.protocol === 'https:';
    const lookup = policy.allowPrivate || isExcepted(url, policy) ? openLookup : guarded;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (e: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        r.destroy();
        if (e instanceof TargetRefused || e instanceof HttpError) reject(e);
        else {
          const reason = (e as NodeJS.ErrnoException)?.code ?? (e as Error)?.message ?? 'error';
          reject(upstreamError(`the merchant could not be reached: ${reason}`));
        }
      };
      const headers: Record<string, string | string[]> = { ...req.headers, host: url.host };
      if (req.body && req.body.length > 0) headers['content-length'] = String(req.body.length);
      const r = (isHttps ? https : http).request(
        {
          protocol: url.protocol,
          hostname: url.hostname.replace(/^\[|\]$/g, ''),
          port: url.port || (isHttps ? 443 : 80),
          path: url.pathname + url.search,
          method: req.method,
          headers,
          agent: isHttps ? agents.https : agents.http,
          lookup: lookup as any,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > maxBytes) fail(upstreamError(`the merchant's response is larger than ${maxBytes} bytes`));
            else chunks.push(c);
          });
          res.on('end', () => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks), url });
          });
          res.on('error', fail);
          res.on('aborted', () => fail(upstreamError('the merchant aborted the response')));
        },
      );
      const timer = setTimeout(() => fail(upstreamTimeout(timeoutMs)), timeoutMs);
      r.on('error', fail);
      r.end(req.body && req.body.length > 0 ? req.body : undefined);
    });
  }

  return {
    async send(first) {
      let req = { ...first, url: checkTargetUrl(first.url, policy) };
      const paid = Object.keys(first.headers).some((k) => isPaymentCredential(k.toLowerCase()));
      for (let hop = 0; ; hop++) {
        const res = await once(req);
        const location = res.headers.location;
        if (![301, 302, 303, 307, 308].includes(res.status) || !location) return answerOf(res, first.url, paid);
        if (hop >= maxRedirects) throw upstreamError(`more than ${maxRedirects} redirects`);
        let next: URL;
        try {
          next = new URL(location, req.url);
        } catch {
          throw upstreamError('the merchant redirected to an invalid URL');
        }
        next = checkTargetUrl(next, policy); // every hop is checked again
        const toGet = res.status === 303 || ((res.status === 301 || res.status === 302) && req.method === 'POST');
        const headers = { ...req.headers };
        if (next.origin !== req.url.origin) {
          // A hold's capture is the holding origin's answer (PROTOCOL.md §15): its redirect away
          // is that answer, with its own X-Payment-Captured if any; the agent follows it unheld.
          if (Object.keys(headers).some((k) => k.toLowerCase() === 'x-payment-hold'))
            return answerOf(res, first.url, paid);
          // The payment proof is for the merchant that asked for it, not for whoever it redirects to.
          for (const k of Object.keys(headers)) if (isPaymentCredential(k.toLowerCase())) delete headers[k];
        }
        if (toGet) {
          delete headers['content-type'];
          delete headers['content-encoding'];
        }
        req = { url: next, method: toGet ? 'GET' : req.method, headers, body: toGet ? undefined : req.body };
      }
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/**
 * A `fetch` over the guarded forwarder, for outbound calls the gateway makes on an owner's
 * behalf (webhook deliveries): the same address guard, checked at connect time and on redirects.
 */
export function guardedFetch(forwarder: Forwarder): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => (headers[k] = v));
    const body =
      typeof init.body === 'string'
        ? Buffer.from(init.body)
        : init.body instanceof Uint8Array
          ? Buffer.from(init.body)
          : undefined;
    const res = await forwarder.send({ url, method: init.method ?? 'GET', headers, body });
    const out = new Headers();
    for (const [k, v] of Object.entries(cleanResponseHeaders(res.headers)))
      out.set(k, Array.isArray(v) ? v.join(', ') : v);
    const nullBody = [101, 204, 205, 304].includes(res.status);
    return new Response(nullBody ? null : new Uint8Array(res.body), { status: res.status, headers: out });
  }) as typeof fetch;
}
