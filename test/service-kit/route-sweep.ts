/**
 * Sends hostile input to every route a Koa app has registered, enumerated from the app's own
 * routers (@koa/router layers), so a route added later is swept without touching the tests.
 * A NUL goes into each path segment, into query parameters and into each string of a JSON
 * body; every answer must be a 4xx with a PROTOCOL.md §9 code in `{ error: { code, message } }`.
 */
import type Koa from 'koa';
import { request as httpRequest, Agent } from 'node:http';
import { ERROR_CODES } from '../../src/index.js';
import { HTTP_ERROR_CODES } from '../../service-kit/index.js';
import type { OpenApiDocument } from '../../service-kit/openapi.js';
import { expectMatchesOpenApi } from '../helpers/openapi.js';

/** PROTOCOL.md §9: the SDK's codes, the service codes, and the gateway's payment/upstream codes. */
export const SECTION_9_CODES: ReadonlySet<string> = new Set([
  ...ERROR_CODES,
  ...HTTP_ERROR_CODES,
  'unsupported_algorithm',
  'root_rotation_invalid',
  'root_rollback',
  'rate_limited',
  'upstream_error',
  'upstream_timeout',
  'payment_failed',
  'payment_unconfirmed',
]);

export interface RegisteredRoute {
  method: string;
  path: string;
  params: string[];
}

const SWEPT_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** Every (method, path) of the routers mounted on `app` (HEAD, OPTIONS and router.use layers left out). */
export function registeredRoutes(app: Koa<any, any>): RegisteredRoute[] {
  const routers = new Set<any>();
  for (const mw of app.middleware as unknown as Array<{ router?: unknown }>) if (mw.router) routers.add(mw.router);
  const out: RegisteredRoute[] = [];
  for (const router of routers) {
    for (const layer of router.stack as Array<{
      methods: string[];
      path: unknown;
      paramNames: Array<{ name: string }>;
    }>) {
      if (typeof layer.path !== 'string') continue;
      for (const method of layer.methods) {
        if (!SWEPT_METHODS.includes(method)) continue;
        out.push({ method, path: layer.path, params: layer.paramNames.map((p) => p.name) });
      }
    }
  }
  return out;
}

export interface SweepOptions {
  base: string;
  app: Koa<any, any>;
  /** Bearer credentials; every request is sent once with each, so it passes whichever check the route makes. */
  credentials: string[];
  /** A value for path parameter `name` of `path` that names a real record (so the lookup runs). */
  param(path: string, name: string): string;
  /** Query parameters to try, each with a real-looking value (a NUL is appended). */
  query: Record<string, string>;
  /** A body that would be accepted by `method path`, or undefined (a small generic one is used). */
  body(method: string, path: string): unknown;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** The service's OpenAPI document: every answer must also match it (test/helpers/openapi.ts). */
  openapi?: OpenApiDocument;
}

export interface Sent {
  what: string;
  method: string;
  path: string;
  status: number;
  text: string;
}

const NUL = '\u0000';

/** Copies of `value`, each with a NUL put into one of its strings (the string's middle). */
export function withNulInEachString(value: unknown): unknown[] {
  if (typeof value === 'string') {
    const at = value.length >> 1;
    return [value.slice(0, at) + NUL + value.slice(at)];
  }
  if (Array.isArray(value))
    return value.flatMap((v, i) => withNulInEachString(v).map((x) => value.map((y, j) => (i === j ? x : y))));
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) =>
      withNulInEachString(v).map((x) => ({ ...(value as object), [k]: x })),
    );
  }
  return [];
}

function fill(route: RegisteredRoute, o: SweepOptions, nulAt = -1): string {
  return route.path
    .split('/')
    .map((seg, i) => {
      if (i === 0) return seg;
      let s = seg.startsWith(':') ? encodeURIComponent(o.param(route.path, seg.slice(1).replace(/[?*+]$/, ''))) : seg;
      if (i === nulAt) s += '%00';
      return s;
    })
    .join('/');
}

const agent = new Agent({ keepAlive: true, maxSockets: 4 });

/** One request with node:http (fetch refuses a body on GET). */
export function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const u = new URL(base);
    const h: Record<string, string> = { ...headers };
    if (body !== undefined) {
      h['content-type'] ??= 'application/json';
      if (!h['transfer-encoding']) h['content-length'] ??= String(Buffer.byteLength(body));
    }
    const req = httpRequest({ hostname: u.hostname, port: u.port, path, method, headers: h, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** True when `r` is a 4xx whose body is exactly `{ error: { code, message } }` with a §9 code. */
export function isEnvelope4xx(r: { status: number; text: string }): boolean {
  if (r.status < 400 || r.status > 499) return false;
  try {
    const b = JSON.parse(r.text);
    return (
      Object.keys(b).join() === 'error' && SECTION_9_CODES.has(b.error.code) && typeof b.error.message === 'string'
    );
  } catch {
    return false;
  }
}

/**
 * Sweeps every registered route; returns the answers that were not a 4xx §9 envelope, and how
 * many requests were sent (so a test can tell the sweep did run).
 */
export async function sweepNul(
  o: SweepOptions,
): Promise<{ failures: Sent[]; sent: number; routes: RegisteredRoute[] }> {
  const routes = registeredRoutes(o.app);
  const failures: Sent[] = [];
  let sent = 0;
  const attempt = async (what: string, method: string, path: string, body?: string) => {
    for (const key of o.credentials) {
      const r = await send(o.base, method, path, { authorization: `Bearer ${key}`, ...o.headers }, body);
      sent++;
      if (!isEnvelope4xx(r)) failures.push({ what, method, path, status: r.status, text: r.text.slice(0, 200) });
      else if (o.openapi) {
        try {
          expectMatchesOpenApi(
            o.openapi,
            method,
            path,
            r.status,
            JSON.parse(r.text),
            String(r.headers['content-type'] ?? ''),
          );
        } catch (e) {
          failures.push({ what, method, path, status: r.status, text: (e as Error).message.slice(0, 200) });
        }
      }
    }
  };
  for (const route of routes) {
    const segments = route.path.split('/').length;
    for (let i = 1; i < segments; i++) await attempt(`NUL in path segment ${i}`, route.method, fill(route, o, i));
    for (const [name, value] of Object.entries(o.query)) {
      await attempt(
        `NUL in query ${name}`,
        route.method,
        `${fill(route, o)}?${name}=${encodeURIComponent(value + NUL)}`,
      );
    }
    const sample = o.body(route.method, route.path) ?? { label: 'label' };
    for (const b of withNulInEachString(sample))
      await attempt('NUL in a JSON string', route.method, fill(route, o), JSON.stringify(b));
  }
  return { failures, sent, routes };
}

/** One line per failure, for assertion messages. */
export const describeFailures = (f: Sent[]) =>
  [...new Set(f.map((x) => `${x.what}: ${x.method} ${x.path} → ${x.status} ${x.text.slice(0, 100)}`))].join('\n');
