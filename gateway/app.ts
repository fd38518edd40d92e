/**
 * The transparent payment gateway (spec §1 part 1, issue 4): `createGatewayApp(deps)` builds the
 * Koa app and its background work (expiry timer, reconciliation) without listening; server.ts
 * listens. Everything shared between instances lives in the database, so any number of
 * instances can serve one PostgreSQL database.
 */
import Koa from 'koa';
import Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import { Counter, Histogram } from 'prom-client';
import {
  errorMiddleware, createMetrics, createApiKeyAuth, migrate, dispatchLogMigration, createSqlDispatchLog, silentLogger,
  type SqlDatabase, type Logger,
} from '../service-kit/index.js';
import { GATEWAY_MIGRATIONS } from './store/schema.js';
import { expireDue, nextExpiry, sessionById } from './store/sessions.js';
import { createLedgerRail } from './rails/ledger.js';
import type { Rail } from './rails/rail.js';
import { createCtlDialect } from './rails/ctl-dialect.js';
import { createX402Rail, createX402Dialect, X402_RAIL, type X402ChainReader } from './rails/x402/rail.js';
import { X402_MIGRATIONS } from './rails/x402/store.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, type X402AssetMap } from './rails/x402/assets.js';
import { generatePrivateKey } from 'viem/accounts';
import { createKeyRing, sharedSecret } from './services/keys.js';
import { createGatewayEvents, type GatewayEventType } from './services/events.js';
import { createPaymentService } from './services/payments.js';
import { createSessionService } from './services/sessions.js';
import { createForwarder, guardedFetch } from './services/forwarder.js';
import type { LookupFn, TargetPolicy } from './services/address-guard.js';
import { sessionRoutes } from './routes/sessions.js';
import { proxyRoutes } from './routes/proxy.js';
import { adminRoutes, findOwnerKey } from './routes/admin.js';
import { merchantRoutes } from './routes/merchant.js';
import { keyRoutes } from './routes/keys.js';

export interface GatewayDeps {
  db: SqlDatabase;
  logger?: Logger;
  /** `CTL_GATEWAY_ADMIN_KEY`: bootstraps budget-owner keys (≥ 16 characters). */
  adminKey?: string;
  /** Base URL put in grants and responses; default: the listen address (pinListenUrl), never a request's Host. */
  publicUrl?: string;
  /** Issuer of the internal grants, receipts and bundle; default `ctl-gateway`. */
  issuer?: string;
  /** The forwarder's address guard (issue 4 §7); private targets refused unless allowed. */
  targets?: TargetPolicy;
  /** DNS for the forwarder (tests). */
  resolve?: LookupFn;
  /** Pays merchants; default the ledger rail on this database. */
  rail?: Rail;
  /**
   * The x402 rail (issue 6): `CTL_X402_ASSETS` (session currency → assets it may pay with; empty:
   * every x402 402 is `asset_not_allowed`), `CTL_X402_MAX_TIMEOUT_SECONDS` (600) and
   * `CTL_GATEWAY_EVM_PRIVATE_KEY` (default: made on first start and kept in the database).
   */
  x402?: { assets?: X402AssetMap; maxTimeoutSeconds?: number; privateKey?: `0x${string}`; chain?: (network: string) => X402ChainReader | undefined };
  now?: () => number;
  forwardTimeoutMs?: number;
  maxBodyBytes?: number;
  maxResponseBytes?: number;
  /** Payments open longer than this are settled by reconcile (default 120 s: longer than any forward). */
  reconcileStaleMs?: number;
  reconcileIntervalMs?: number;
  /** Upper bound on the expiry timer's sleep (default 30 s; a new session reschedules it). */
  expiryMaxSleepMs?: number;
  webhooks?: { fetch?: typeof fetch; maxAttempts?: number; baseDelayMs?: number };
  /** Told of every event (tests, logs). */
  onEvent?: (type: GatewayEventType, data: Record<string, unknown>) => void;
}

export interface GatewayApp {
  app: Koa;
  /** The address the gateway pays x402 merchants from (fund it with the mapped assets). */
  evmAddress: `0x${string}`;
  /** Settles payments left open by a crash (run at start and on a timer). */
  reconcile(staleMs?: number): Promise<{ committed: number; released: number }>;
  /** Expires due sessions now (the timer calls it). */
  expireNow(): Promise<string[]>;
  /** Pins the base URL to the listen address when no public URL is configured (server.ts, once listening). */
  pinListenUrl(url: string): void;
  /** Resolves when queued webhook deliveries are done. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

// Gateway statuses where they differ from service-kit's defaults (issue 4 §3).
const STATUS_BY_CODE = { session_paused: 409, currency_mismatch: 402, payment_failed: 502 };

export async function createGatewayApp(deps: GatewayDeps): Promise<GatewayApp> {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const logger = deps.logger ?? silentLogger();
  const issuer = deps.issuer ?? 'ctl-gateway';
  const targets = deps.targets ?? { allowPrivate: false };
  await migrate(db, [...GATEWAY_MIGRATIONS, dispatchLogMigration('gw_webhook_dispatches'), ...X402_MIGRATIONS]);
  // Each payment writes a few pages (its receipt carries the SBA and grant): checkpoint the WAL
  // less often, so its fsync is paid once per ~40 MB rather than every ~200 payments.
  if (db.dialect === 'sqlite') await db.exec('PRAGMA wal_autocheckpoint = 10000');

  const ledger = createLedgerRail(db, now);
  const rail = deps.rail ?? ledger;
  const keys = createKeyRing(db, now);
  await keys.all(); // makes the key set on first start
  const continuationSecret = Buffer.from(await sharedSecret(db, 'continuation-hmac', () => randomBytes(32).toString('base64url')), 'base64url');
  const metrics = createMetrics({ prefix: 'ctl_gateway_' });
  const payments_total = new Counter({ name: 'ctl_gateway_payments_total', help: 'Payments made', registers: [metrics.registry] });
  const refusals = new Counter({ name: 'ctl_gateway_refusals_total', help: 'Payments refused, by code', labelNames: ['code'] as const, registers: [metrics.registry] });
  const payLatency = new Histogram({
    name: 'ctl_gateway_payment_duration_seconds', help: 'From the merchant 402 to the committed receipt', registers: [metrics.registry],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  const forwarder = createForwarder({
    policy: targets, timeoutMs: deps.forwardTimeoutMs, maxResponseBytes: deps.maxResponseBytes, resolve: deps.resolve,
  });
  // Webhook URLs are the owner's, but they are still outbound requests from inside: same guard.
  const hookForwarder = createForwarder({ policy: targets, timeoutMs: 5000, maxResponseBytes: 64 * 1024, maxRedirects: 0, resolve: deps.resolve });
  const events = createGatewayEvents({
    log: createSqlDispatchLog(db, 'gw_webhook_dispatches'),
    fetch: guardedFetch(hookForwarder),
    ...deps.webhooks,
    onError: (e) => logger.warn({ err: e }, 'webhook delivery failed'),
    onEvent: deps.onEvent,
  });
  // The base URL written into grants (revocationUrl) and responses never comes from a request
  // (a Host header would let a caller point a grant's revocation check at its own server): the
  // configured public URL, else the listen address pinned by server.ts, else the address the
  // connection was accepted on.
  let pinnedBase = deps.publicUrl?.replace(/\/+$/, '');
  const baseUrl = (ctx: Koa.Context) => pinnedBase ?? localOrigin(ctx);

  let expiryTimer: ReturnType<typeof setTimeout> | undefined;
  let expiryAt = Infinity;
  let closed = false;
  const maxSleep = deps.expiryMaxSleepMs ?? 30_000;

  async function expireNow(): Promise<string[]> {
    const ended = await expireDue(db, now());
    for (const id of ended) {
      const s = await sessionById(db, id);
      if (s) events.emit(s, 'session.expired', { expiredAt: new Date(s.expiresAt).toISOString() });
    }
    return ended;
  }
  // spec §3 last row: `expiresAt` revokes the session on time, with or without traffic.
  function scheduleExpiry(at: number) {
    if (closed || at >= expiryAt) return;
    if (expiryTimer) clearTimeout(expiryTimer);
    expiryAt = at;
    expiryTimer = setTimeout(async () => {
      expiryTimer = undefined;
      expiryAt = Infinity;
      try {
        await expireNow();
        const next = await nextExpiry(db);
        scheduleExpiry(Math.min(next ?? Infinity, now() + maxSleep));
      } catch (e) {
        logger.error({ err: e }, 'expiry sweep failed');
        scheduleExpiry(now() + 1000);
      }
    }, Math.max(0, Math.min(at - now(), maxSleep)));
    expiryTimer.unref?.();
  }

  const x402Rail = createX402Rail(db, now, deps.x402?.chain);
  const sessions = createSessionService({
    db, keys, events, issuer, railName: rail.name, extraRails: [X402_RAIL], continuationSecret, targets, now, onCreated: (at) => scheduleExpiry(at),
  });
  const payments = createPaymentService({
    db, rail, otherRails: [x402Rail], keys, events, continuationSecret, issuer, now,
    onPaid: (ms) => {
      payments_total.inc();
      payLatency.observe(ms / 1000);
    },
    onRefused: (code) => refusals.inc({ code }),
    onReconcileError: (paymentId, err) => logger.warn({ err, paymentId }, 'reconcile: payment left open, retried next pass'),
  });
  // The gateway's EVM account, like its other keys: configured, or made once and kept (issue 6 §4).
  const evmKey = deps.x402?.privateKey ?? ((await sharedSecret(db, 'evm-private-key', () => generatePrivateKey())) as `0x${string}`);
  const x402 = createX402Dialect({
    db, payments, privateKey: evmKey, assets: deps.x402?.assets ?? new Map(), maxTimeoutSeconds: deps.x402?.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS, now,
  });
  const dialects = [x402, createCtlDialect(payments)];
  const auth = createApiKeyAuth({ findKey: findOwnerKey(db), bootstrapKey: deps.adminKey });

  const app = new Koa();
  app.proxy = false;
  app.use(metrics.middleware);
  // The agent can tell the gateway's own refusals from a merchant's response.
  app.use(async (ctx, next) => {
    await next();
    const b = ctx.body as { error?: { code?: unknown } } | undefined;
    if (b && typeof b === 'object' && !Buffer.isBuffer(b) && typeof b.error?.code === 'string') ctx.set('X-Ctl-Gateway-Error', b.error.code);
  });
  app.use(errorMiddleware({ logger, statusByCode: STATUS_BY_CODE }));

  const health = new Router();
  health.get('/healthz', (ctx) => {
    ctx.body = { ok: true };
  });
  health.get('/readyz', async (ctx) => {
    const ok = await db.ping();
    ctx.status = ok ? 200 : 503;
    ctx.body = ok ? { ok: true } : { error: { code: 'unavailable', message: 'the database is not reachable' } };
  });
  health.get('/metrics', metrics.handler);

  for (const r of [
    health,
    adminRoutes({ db, auth, keys, now }),
    sessionRoutes({ db, auth, sessions, baseUrl }),
    proxyRoutes({ sessions, dialects, forwarder, now, maxBodyBytes: deps.maxBodyBytes ?? 1024 * 1024 }),
    merchantRoutes({ db, ledger, now, baseUrl }),
    keyRoutes({ db, keys, issuer, now }),
  ]) {
    app.use(r.routes());
    app.use(r.allowedMethods());
  }

  const staleMs = deps.reconcileStaleMs ?? 120_000;
  const reconcile = (ms = staleMs) => payments.reconcile(ms);
  await reconcile().catch((e) => logger.error({ err: e }, 'reconcile failed'));
  const reconcileTimer = setInterval(() => {
    reconcile().catch((e) => logger.error({ err: e }, 'reconcile failed'));
  }, deps.reconcileIntervalMs ?? 30_000);
  reconcileTimer.unref?.();
  await expireNow();
  const first = await nextExpiry(db);
  if (first !== undefined) scheduleExpiry(first);

  return {
    app,
    evmAddress: x402.address,
    reconcile,
    expireNow,
    pinListenUrl(url) {
      if (!deps.publicUrl) pinnedBase = url.replace(/\/+$/, '');
    },
    idle: () => events.idle(),
    async close() {
      closed = true;
      if (expiryTimer) clearTimeout(expiryTimer);
      clearInterval(reconcileTimer);
      events.close();
      forwarder.close();
      hookForwarder.close();
    },
  };
}

/** `http://<local address>:<port>` of the accepted connection: the listen address, whatever the Host header says. */
function localOrigin(ctx: Koa.Context): string {
  const a = (ctx.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.)/, '');
  return `http://${a.includes(':') ? `[${a}]` : a}:${ctx.socket.localPort}`;
}
