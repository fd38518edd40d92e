/**
 * Shared set-up for the gateway tests: the real app on a temporary SQLite file (or a fresh
 * PostgreSQL schema), listening on 127.0.0.1 port 0, and a tiny x402 merchant.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { openDatabase, listen, createLogger, silentLogger, type SqlDatabase } from '../../service-kit/index.js';
import { openGateway } from '../../gateway/server.js';
import type { GatewayApp, GatewayDeps } from '../../gateway/app.js';
import { GATEWAY_OPENAPI } from '../../gateway/openapi.js';
import { compileOpenApi, expectErrorEnvelope, expectMatchesOpenApi } from '../helpers/openapi.js';

compileOpenApi(GATEWAY_OPENAPI);

export const ADMIN_KEY = 'test-admin-key-0123456789';
export const PG_URL = process.env.CTL_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDb {
  url: string;
  schema?: string;
  open(): Promise<SqlDatabase>;
  drop(): Promise<void>;
}

export function sqliteDb(): TestDb {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-gw-'));
  const url = `sqlite:${join(dir, 'gateway.db')}`;
  return { url, open: () => openDatabase(url), drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fresh schema on the test PostgreSQL, or undefined (and a SKIPPED line) when it is unreachable. */
export async function postgresDb(what: string): Promise<TestDb | undefined> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
  } catch (e) {
    console.log(`SKIPPED ${what}: PostgreSQL at ${PG_URL} is unreachable (${(e as Error).message})`);
    return undefined;
  }
  const schema = `ctl_g_${randomBytes(6).toString('hex')}`;
  return {
    url: PG_URL,
    schema,
    open: () => openDatabase(PG_URL, { schema, poolSize: 10 }),
    async drop() {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    },
  };
}

export interface TestGateway {
  url: string;
  gw: GatewayApp;
  db: SqlDatabase;
  ownerKey: string;
  events: { type: string; data: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startTestGateway(
  testDb: TestDb,
  deps: Partial<GatewayDeps> = {},
  ownerKey?: string,
): Promise<TestGateway> {
  const db = await testDb.open();
  const events: TestGateway['events'] = [];
  const gw = await openGateway({
    db,
    adminKey: ADMIN_KEY,
    // CTL_TEST_LOG=error shows the stacks behind 500s.
    logger: process.env.CTL_TEST_LOG
      ? createLogger({ name: 'gateway-test', level: process.env.CTL_TEST_LOG })
      : silentLogger(),
    targets: { allowPrivate: true },
    onEvent: (type, data) => events.push({ type, data }),
    ...deps,
  });
  const srv = await listen(gw.app, { port: 0 });
  let key = ownerKey;
  if (!key) {
    const res = await call(srv.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'test owner' } });
    key = (res.body as { apiKey: string }).apiKey;
  }
  return {
    url: srv.url,
    gw,
    db,
    ownerKey: key,
    events,
    async close() {
      await srv.close();
      await gw.close();
      await db.close();
    },
  };
}

export interface CallResult {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** fetch + JSON against a gateway; the answer is checked against gateway/openapi.json. */
export async function call(
  base: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
): Promise<CallResult> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  let body: string | undefined = o.raw;
  if (o.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(o.body);
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {}
  // Every answer a gateway test receives is checked against the published document.
  const sent = o.body !== undefined ? { body: o.body } : undefined;
  expectMatchesOpenApi(
    GATEWAY_OPENAPI,
    method,
    path,
    res.status,
    parsed ?? text,
    res.headers.get('content-type'),
    sent,
  );
  // A refusal of the gateway's own, on /proxy too (where other answers are the merchant's), is the envelope it names.
  const refusal = res.headers.get('x-ctl-gateway-error');
  if (refusal) {
    expectErrorEnvelope(GATEWAY_OPENAPI, parsed, `${method} ${path} → ${res.status}`);
    if ((parsed as { error: { code: string } }).error.code !== refusal)
      throw new Error(`X-Ctl-Gateway-Error ${refusal} names another code than the body`);
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export const inOneHour = () => new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');

export async function createSession(gw: TestGateway, config: Record<string, unknown> = {}) {
  const res = await call(gw.url, 'POST', '/sessions', {
    key: gw.ownerKey,
    body: {
      budget: { amount: '1000', currency: 'USD' },
      purposes: ['api:search'],
      expiresAt: inOneHour(),
      label: 'test',
      ...config,
    },
  });
  if (res.status !== 201) throw new Error(`session create failed: ${res.status} ${res.text}`);
  return res.body as {
    sessionToken: string;
    sessionId: string;
    revocationUrl: string;
    policyHash: string;
    grantId: string;
    webhookSecret?: string;
  };
}

/** A request through /proxy. */
export function proxy(
  gw: { url: string },
  token: string,
  target: string,
  o: { purpose?: string; method?: string; body?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { 'x-target-url': target, ...o.headers };
  if (o.purpose) headers['x-ctl-purpose'] = o.purpose;
  if (o.method) headers['x-target-method'] = o.method;
  return call(gw.url, 'POST', '/proxy', { key: token, headers, raw: o.body });
}

export interface Merchant {
  url: string;
  port: number;
  /** Every request the merchant saw. */
  seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[];
  /** Requests that came with X-Payment-Receipt. */
  paid: { receipt: string; sba?: string }[];
  connections: number;
  close(): Promise<void>;
}

/**
 * An x402 merchant: answers 402 with `X-Payment: { amount, currency, address }` unless the
 * request carries `X-Payment-Receipt`, then 200. `/free` is always 200; `/redirect?to=` redirects.
 */
export async function startMerchant(
  o: {
    amount?: string | ((path: string) => string);
    currency?: string;
    address?: string;
    host?: string;
    /** Serve HTTPS with this key and certificate (PEM). */
    tls?: { key: string; cert: string };
  } = {},
): Promise<Merchant> {
  const m: Merchant = { url: '', port: 0, seen: [], paid: [], connections: 0, close: async () => {} };
  const handler = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      m.seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const u = new URL(req.url!, 'http://x');
      if (u.pathname === '/redirect') {
        res.writeHead(302, { location: u.searchParams.get('to')! });
        return res.end();
      }
      if (u.pathname === '/free') {
        res.writeHead(200, { 'content-type': 'application/json', 'x-merchant': 'yes' });
        return res.end(JSON.stringify({ free: true, method: req.method, body }));
      }
      const receipt = req.headers['x-payment-receipt'];
      if (typeof receipt === 'string') {
        m.paid.push({ receipt, sba: req.headers['x-ctl-sba'] as string | undefined });
        res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'm=1' });
        return res.end(JSON.stringify({ paid: true, receipt, path: u.pathname, body }));
      }
      const amount = typeof o.amount === 'function' ? o.amount(u.pathname) : (o.amount ?? '100');
      res.writeHead(402, {
        'content-type': 'application/json',
        'x-payment': JSON.stringify({ amount, currency: o.currency ?? 'USD', address: o.address ?? 'merchant-1' }),
      });
      res.end(JSON.stringify({ error: 'payment required' }));
    });
  };
  const server: Server = o.tls ? createHttpsServer(o.tls, handler) : createServer(handler);
  server.on(o.tls ? 'secureConnection' : 'connection', () => m.connections++);
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, o.host ?? '127.0.0.1', r));
  m.port = (server.address() as AddressInfo).port;
  m.url = `${o.tls ? 'https' : 'http'}://127.0.0.1:${m.port}`;
  m.close = () =>
    new Promise((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return m;
}

/**
 * The usual fixture of a test file: registers `suite`'s before/after hooks that start a gateway on
 * a fresh SQLite file and a 402 merchant, and close both; their handles are on the result once
 * the suite runs.
 * @example const env = useGatewayAndMerchant(test, { amount: '100' }); test('…', () => proxy(env.gw, …))
 */
export function useGatewayAndMerchant(
  suite: { before(fn: () => Promise<void>): void; after(fn: () => Promise<void>): void },
  merchant: Parameters<typeof startMerchant>[0] = {},
) {
  const env = {} as { db: TestDb; gw: TestGateway; merchant: Merchant };
  suite.before(async () => {
    env.db = sqliteDb();
    env.gw = await startTestGateway(env.db);
    env.merchant = await startMerchant(merchant);
  });
  suite.after(async () => {
    await env.gw.close();
    await env.merchant.close();
    await env.db.drop();
  });
  return env;
}

/** A request with node:http, for headers fetch will not send (Connection, Proxy-Authorization). */
export function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; headers: IncomingMessage['headers']; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, base);
    const req = httpRequest(
      { hostname: u.hostname, port: u.port, path: u.pathname + u.search, method, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
