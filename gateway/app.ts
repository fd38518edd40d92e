/**
 * The transparent payment gateway (spec §1 part 1): `createGatewayApp(deps, parts)` builds the
 * Koa app with no side effects, as the authority's does; server.ts migrates the database, prepares
 * the parts, starts the background work (startGatewayWork: the expiry sweep, reconciliation,
 * webhooks) and listens.
 * Everything shared between instances lives in the database, so any number of instances can serve
 * one PostgreSQL database.
 */
import Koa from 'koa';
import Router from '@koa/router';
import {
  errorMiddleware,
  createMetrics,
  requireScope,
  ADMIN_SCOPE,
  silentLogger,
  type SqlDatabase,
  type Logger,
  type WebhookRetrySettings,
} from '../service-kit/index.js';
import { serveOpenApi } from '../service-kit/openapi.js';
import { GATEWAY_OPENAPI } from './openapi.js';
import { expireDue, nextExpiry, sessionById } from './sessions/store.js';
import { createLedgerRail } from './payments/ledger.js';
import type { Rail } from './payments/rail.js';
import { createPaymentSchemes } from './payments/registry.js';
import { createExchange } from './payments/exchange.js';
import { DEFAULT_EXPIRY_MARGIN_MS, type EvmChainReader } from './payments/evm/chain.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, holdCap, type X402AssetMap } from './payments/evm/assets.js';
import type { ExternalKey, KeyRing } from './keys/ring.js';
import type { SessionKeys } from './sessions/actor-keys.js';
import type { SecretSealer } from '../service-kit/secrets/index.js';
import { createGatewayEvents, type GatewayEvents, type GatewayEventType } from './sessions/events.js';
import { createPaymentService } from './payments/service.js';
import { gatewayMetrics } from './business-metrics.js';
import { createSessionService } from './sessions/service.js';
import { currentWindows } from './payments/store/counters.js';
import { createForwarder, guardedFetch } from './net/forwarder.js';
import { isIP } from 'node:net';
import { bareHost, type LookupFn, type TargetPolicy } from './net/address-guard.js';
import { sessionRoutes } from './routes/sessions.js';
import { proxyRoutes } from './routes/proxy.js';
import { agentSessionRoutes } from './routes/agent-session.js';
import { adminRoutes } from './routes/admin.js';
import { createOwnerAuth } from './owners/auth.js';
import { merchantRoutes } from './routes/merchant.js';
import { keyRoutes } from './routes/keys.js';
import { consoleRoutes, observeSessionWrites } from './routes/console.js';
import { createConsoleStreams } from './console/stream.js';
import { createIdempotencyService, type IdempotencyOptions } from './idempotency/service.js';
import { eventAdminRoutes } from '../service-kit/event-admin.js';
import {
  auditHeadSource,
  auditOrigin,
  checkpointSource,
  createServiceChainOutbox,
  type AnchorSettings,
  type ChainEvent,
  type ChainOutbox,
  type Ledger,
  type ServiceAnchoringOptions,
} from '../service-kit/anchor/index.js';
import { healthRoutes, serveRouter } from '../service-kit/service-routes.js';
import { createEgressCa } from './egress/ca.js';
import { caRoutes } from './egress/ca-routes.js';
import type { EgressHooks } from './egress/proxy-server.js';
import { createSessionEnds } from './egress/tunnel-watch.js';
import {
  gatewayRateLimits,
  DEFAULT_GATEWAY_RATE_LIMITS,
  type GatewayRateLimits,
} from '../service-kit/service-limits.js';
import { DEFAULT_MAX_SESSION_SECONDS } from './sessions/config.js';
import {
  createServiceLog,
  type ServiceLog,
  type ServiceLogConfig,
  type ServiceLogParts,
} from '../service-kit/tlog/index.js';

export interface GatewayDeps {
  db: SqlDatabase;
  logger?: Logger;
  /** `CTL_GATEWAY_ADMIN_KEY`: bootstraps budget-owner keys (≥ 16 characters). */
  adminKey?: string;
  /** Base URL put in grants and responses; default: the listen address (pinListenUrl), never a request's Host. */
  publicUrl?: string;
  /** Issuer of the internal grants, receipts and bundle; default `ctl-gateway`. */
  issuer?: string;
  /** The forwarder's address guard; private targets refused unless allowed. */
  targets?: TargetPolicy;
  /** DNS for the forwarder (tests). */
  resolve?: LookupFn;
  /**
   * CA certificates (PEM) the forwarder trusts for merchants' TLS instead of Node's bundled roots
   * (a private merchant CA, tests); default Node's roots plus NODE_EXTRA_CA_CERTS.
   */
  upstreamCa?: string[];
  /**
   * Base URLs of the policy authorities whose people's grants may back sessions
   * (CTL_GATEWAY_HUMAN_AUTHORITIES; sessions/human.ts). Reached through the address
   * guard like every outbound request: an authority on a private address needs its host:port in
   * `targets.allowHosts`. Default none: every `humanGrant` is refused `issuer_not_trusted`.
   */
  humanAuthorities?: string[];
  /** Pays merchants; default the ledger rail on this database. */
  rail?: Rail;
  /**
   * The x402 rail: `CTL_X402_ASSETS` (session currency → assets it may pay with; empty:
   * every x402 402 is `asset_not_allowed`), `CTL_X402_MAX_TIMEOUT_SECONDS` (600) and
   * `CTL_GATEWAY_EVM_PRIVATE_KEY` (default: made on first start and kept in the database).
   */
  x402?: {
    assets?: X402AssetMap;
    maxTimeoutSeconds?: number;
    privateKey?: `0x${string}`;
    chain?: (network: string) => EvmChainReader | undefined;
    /**
     * `CTL_X402_MAX_HOLD_SECONDS` (600): the longest one payment may hold its amount of a session's budget
     * (payments/evm/assets.ts holdCap).
     */
    maxHoldSeconds?: number;
    /**
     * Clock skew allowed past an authorization's `validBefore` before the chain is asked (default 60 s;
     * payments/evm/rail.ts).
     */
    expiryMarginMs?: number;
  };
  now?: () => number;
  forwardTimeoutMs?: number;
  maxBodyBytes?: number;
  maxResponseBytes?: number;
  /** Payments open longer than this are settled by reconcile (default 120 s: longer than any forward). */
  reconcileStaleMs?: number;
  /** How often server.ts's reconcile pass runs (default 30 s); also part of how long an x402 hold may last. */
  reconcileIntervalMs?: number;
  /** Upper bound on the expiry sweep's sleep (server.ts; default 30 s; a new session reschedules it). */
  expiryMaxSleepMs?: number;
  /** Told each new session's expiresAt (ms): server.ts's expiry sweep wakes by it. */
  onSessionCreated?: (expiresAt: number) => void;
  /** Webhook delivery (`CTL_WEBHOOK_*`, service-kit webhookRetryFromEnv) and a fetch for tests. */
  webhooks?: WebhookRetrySettings & { fetch?: typeof fetch };
  /**
   * Seals the private keys and secrets the gateway stores (keys/custody.ts); default: the
   * development KEK file beside the SQLite database (./data/gateway.kek otherwise).
   */
  sealer?: SecretSealer;
  /** The receipt key when held outside the database (CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI, …). */
  receiptKey?: ExternalKey;
  /**
   * Keys held outside the database by purpose (CTL_GATEWAY_<PURPOSE>_KEY_PKCS11_URI, …); `receiptKey` is
   * `externalKeys.receipt`.
   */
  externalKeys?: Partial<Record<'grant' | 'receipt' | 'bundle', ExternalKey>>;
  /**
   * `Idempotency-Key` on /proxy (README "Idempotency-Key"): lease (default reconcileStaleMs), 24 h ttl, stored body
   * bound.
   */
  idempotency?: IdempotencyOptions;
  /**
   * Per budget owner and per session (service-kit/service-limits.ts); default
   * DEFAULT_GATEWAY_RATE_LIMITS, a missing entry is no limit.
   */
  rateLimits?: GatewayRateLimits;
  /** `CTL_GATEWAY_MAX_SESSION_SECONDS`: how far ahead `expiresAt` may be (default 30 days). */
  maxSessionSeconds?: number;
  /** `CTL_GATEWAY_MAX_SESSION_DEPTH`: levels of child sessions below a root session (PROTOCOL.md §14; default 4). */
  maxSessionDepth?: number;
  /** Told of every event (tests, logs). */
  onEvent?: (type: GatewayEventType, data: Record<string, unknown>) => void;
  /**
   * The transparency log (service-kit/tlog, `CTL_GATEWAY_LOG_*`): settings beside the defaults, and the fetch its
   * witness requests use; `false`: no log (development and the cost bench only).
   */
  log?: (Partial<Omit<ServiceLogConfig, 'prefix'>> & { fetch?: typeof fetch }) | false;
  /** The console (/console): its built files (default build/console/) and live-stream bounds. */
  console?: { dir?: string; maxStreamsPerOwner?: number; maxStreams?: number; heartbeatMs?: number };
  /** `CTL_ANCHOR_*`: where the log's checkpoint (audit head, log off) is anchored (service-kit/anchor/config.ts). */
  anchoring?: AnchorSettings & { unknown: string[] };
  /** Where CTL_PKCS11_MODULE is read for an anchoring key in a token (default none: the module default). */
  anchoringEnv?: Record<string, string | undefined>;
  /** Ledgers besides the configured ones, and timing over CTL_ANCHOR_*_MS (tests). */
  ledgers?: Ledger[];
  anchorTiming?: ServiceAnchoringOptions['timing'];
  onChainEvent?: (e: ChainEvent) => void;
}

export interface GatewayApp {
  app: Koa;
  /** The address the gateway pays x402 merchants from (fund it with the mapped assets). */
  evmAddress: `0x${string}`;
  /** Settles payments left open by a crash (server.ts runs it at start and on a timer). */
  reconcile(staleMs?: number): Promise<{ committed: number; released: number }>;
  /** Expires due sessions now (server.ts's expiry sweep calls it). */
  expireNow(): Promise<string[]>;
  /** When the next session expires (ms), or undefined when none will. */
  nextExpiry(): Promise<number | undefined>;
  /** Drops `Idempotency-Key` answers past their ttl (server.ts, with each reconcile pass). */
  pruneIdempotency(): Promise<unknown>;
  /** Pins the base URL to the listen address when no public URL is configured (server.ts, once listening). */
  pinListenUrl(url: string): void;
  /** Session events: server.ts starts their webhook outbox and audit sealer (`events.start()`). */
  events: GatewayEvents;
  /** Resolves when queued webhook deliveries are done. */
  idle(): Promise<void>;
  /** The transparency log (/log/…); server.ts starts its checkpoint timer. Undefined when the log is off. */
  log?: ServiceLog;
  /** Anchors of the log's checkpoint, or of the audit chain's head with the log off (service-kit/anchor/). */
  chain: ChainOutbox;
  /** What the egress proxy needs besides `app` (egress/proxy-server.ts; server.ts starts it when configured). */
  egress: EgressHooks;
  /** Stops what the app built (forwarders, streams, the outboxes server.ts started); the database stays open. */
  close(): Promise<void>;
}

// Gateway statuses where they differ from service-kit's defaults.
const STATUS_BY_CODE = { session_paused: 409, currency_mismatch: 402, payment_failed: 502 };

/**
 * What the database holds for the app, read (or made, once per database) by prepareGateway in
 * server.ts after the migrations: the sealer, the initialised key ring and the stored secrets.
 */
export interface GatewayParts {
  sealer: SecretSealer;
  /** Initialised (`await keys.init()`). */
  keys: KeyRing;
  sessionKeys: SessionKeys;
  /** The continuation HMAC key (README "Secrets at rest"). */
  continuationSecret: Buffer;
  /** The EVM account x402 merchants are paid from: configured, or made once and kept. */
  evmPrivateKey: `0x${string}`;
  /** The transparency log's keys (service-kit/tlog); absent: no log. */
  log?: ServiceLogParts;
  /** The ledgers the log's checkpoint is anchored on (opened: their signers included). */
  ledgers?: Ledger[];
}

/**
 * Builds the app from prepared parts without touching the database, starting a timer or
 * listening: server.ts (openGateway) starts the background work (startGatewayWork) and listens.
 * @example const gw = createGatewayApp(deps, await prepareGateway(deps)); const work = await startGatewayWork(gw, deps)
 */
export function createGatewayApp(deps: GatewayDeps, parts: GatewayParts): GatewayApp {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const logger = deps.logger ?? silentLogger();
  const issuer = deps.issuer ?? 'ctl-gateway';
  const targets = deps.targets ?? { allowPrivate: false };
  const ledger = createLedgerRail(db, now);
  const rail = deps.rail ?? ledger;
  const { keys, sessionKeys, continuationSecret } = parts;
  const metrics = createMetrics({ prefix: 'ctl_gateway_' });
  const business = gatewayMetrics(metrics.registry, db);
  const forwarder = createForwarder({
    policy: targets,
    timeoutMs: deps.forwardTimeoutMs,
    maxResponseBytes: deps.maxResponseBytes,
    resolve: deps.resolve,
    ca: deps.upstreamCa,
  });
  // Webhook URLs are the owner's, but they are still outbound requests from inside: same guard.
  const hookForwarder = createForwarder({
    policy: targets,
    timeoutMs: 5000,
    maxResponseBytes: 64 * 1024,
    maxRedirects: 0,
    resolve: deps.resolve,
  });
  // Revocation (and any JWKS) the SDK's verifier fetches for a person's grant: same guard, no
  // redirects. A trusted authority the operator named by a private IP address (no DNS in between)
  // is reachable by these checks alone, never opened to agents' /proxy or webhooks by it.
  const authorityForwarder = createForwarder({
    policy: {
      ...targets,
      allowHosts: [...(targets.allowHosts ?? []), ...authorityTargets(deps.humanAuthorities ?? [])],
    },
    timeoutMs: 3000,
    maxResponseBytes: 64 * 1024,
    maxRedirects: 0,
    resolve: deps.resolve,
  });
  const humans = { authorities: deps.humanAuthorities ?? [], fetch: guardedFetch(authorityForwarder) };
  const consoleStreams = createConsoleStreams({
    db,
    now,
    maxPerOwner: deps.console?.maxStreamsPerOwner,
    maxTotal: deps.console?.maxStreams,
    heartbeatMs: deps.console?.heartbeatMs,
    ownerOfKey: async (key) => (await auth(key))?.ownerId,
    onError: (e) => logger.warn({ err: e }, 'console stream'),
  });
  // Sessions revoked or expired here: the egress proxy closes their tunnels (egress/tunnel-watch.ts).
  const sessionEnds = createSessionEnds(db, now);
  // Every receipt and session change is appended to it in its own transaction (log/entries.ts).
  const serviceLog =
    parts.log &&
    createServiceLog(db, parts.log, {
      registry: metrics.registry,
      metricPrefix: 'ctl_gateway_',
      logger,
      now,
      fetch: deps.log ? deps.log.fetch : undefined,
      onSplitView: async (s) => {
        await events.audit.append({ actor: 'system', action: 'log.split_view', subject: s.origin, data: s });
      },
    });
  const events = createGatewayEvents({
    db,
    now,
    log: serviceLog?.log,
    continuationSecret,
    fetch: guardedFetch(hookForwarder),
    ...deps.webhooks,
    onError: (e) => logger.warn({ err: e }, 'webhook delivery failed'),
    onDelivery: business.delivery,
    onEvent: (type, data) => {
      if ((type === 'session.revoked' || type === 'session.expired') && typeof data.sessionId === 'string')
        sessionEnds.ended(data.sessionId, type === 'session.revoked' ? 'revoked' : 'expired');
      consoleStreams.publish(type, data);
      deps.onEvent?.(type, data);
    },
  });
  // The log's signed checkpoint, anchored by the chain outbox's timer; with the log off, the audit
  // chain's head under a stable name (the public URL's host, else the issuer), the anchor records
  // saying which (service-kit/anchor/service.ts).
  const anchorSources = [
    serviceLog
      ? checkpointSource(serviceLog.log)
      : auditHeadSource(
          events.audit,
          deps.publicUrl ? auditOrigin(deps.publicUrl, 'gateway') : `${issuer}/ctl-gateway-audit`,
        ),
  ];
  const chain = createServiceChainOutbox({
    db,
    table: 'gw_chain_outbox',
    ledgers: parts.ledgers ?? [],
    sources: anchorSources,
    settings: deps.anchoring,
    timing: deps.anchorTiming,
    logger,
    metrics: { registry: metrics.registry, prefix: 'ctl_gateway_' },
    now,
    onEvent: deps.onChainEvent,
  });
  // The base URL written into grants (revocationUrl) and responses never comes from a request
  // (a Host header would let a caller point a grant's revocation check at its own server): the
  // configured public URL, else the listen address pinned by server.ts, else the address the
  // connection was accepted on.
  let pinnedBase = deps.publicUrl?.replace(/\/+$/, '');
  const baseUrl = (ctx: Koa.Context) => pinnedBase ?? localOrigin(ctx);

  async function expireNow(): Promise<string[]> {
    return expireDue(
      db,
      now(),
      events.effect(async (ended, q) => {
        const sessions = await Promise.all(ended.map((id) => sessionById(q, id)));
        return sessions.flatMap((s) =>
          s
            ? [
                {
                  session: s,
                  type: 'session.expired' as const,
                  data: { expiredAt: new Date(s.expiresAt).toISOString() },
                  actor: 'system',
                },
              ]
            : [],
        );
      }),
    );
  }
  // The 402 schemes (payments/registry.ts): x402 and MPP sign with one EVM account, on the same chains.
  const paymentSchemes = createPaymentSchemes({
    db,
    now,
    railName: rail.name,
    evm: {
      privateKey: parts.evmPrivateKey,
      assets: deps.x402?.assets ?? new Map(),
      // The cap on how long one signed authorization may hold a budget (payments/evm/assets.ts holdCap),
      // after validBefore: the expiry margin, then a reconcile pass once the row is stale.
      maxTimeoutSeconds: holdCap({
        maxTimeoutSeconds: deps.x402?.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS,
        maxHoldSeconds: deps.x402?.maxHoldSeconds,
        settleDelayMs:
          (deps.x402?.expiryMarginMs ?? DEFAULT_EXPIRY_MARGIN_MS) +
          (deps.reconcileStaleMs ?? 120_000) +
          (deps.reconcileIntervalMs ?? 30_000),
      }),
      chain: deps.x402?.chain,
      expiryMarginMs: deps.x402?.expiryMarginMs,
    },
  });
  const limits = gatewayRateLimits(
    db,
    deps.rateLimits ?? DEFAULT_GATEWAY_RATE_LIMITS,
    createOwnerAuth(db, deps.adminKey),
  );
  const sessionService = createSessionService({
    db,
    currentWindows,
    keys,
    sessionKeys,
    events,
    issuer,
    railName: rail.name,
    extraRails: paymentSchemes.rails.map((r) => r.name),
    continuationSecret,
    targets,
    humans,
    now,
    onCreated: (at) => deps.onSessionCreated?.(at),
    maxSessionSeconds: deps.maxSessionSeconds ?? DEFAULT_MAX_SESSION_SECONDS,
    maxSessionDepth: deps.maxSessionDepth,
  });
  const sessions = limits.sessions(sessionService);
  // Made on first use (GET /ca.pem, the first CONNECT), kept sealed like the other secrets.
  const egressCa = createEgressCa({ db, sealer: parts.sealer, issuer, now });
  const idempotency = createIdempotencyService({
    db,
    now,
    statusByCode: STATUS_BY_CODE,
    logger,
    leaseMs: deps.reconcileStaleMs,
    ...deps.idempotency,
  });
  const payments = createPaymentService({
    db,
    rail,
    otherRails: paymentSchemes.rails,
    keys,
    sessionKeys,
    events,
    continuationSecret,
    issuer,
    now,
    paymentId: idempotency.paymentId,
    humans,
    onPaid: business.paid,
    onRefused: business.refused,
    onReconciled: business.reconciled,
    onReconcileError: (paymentId, err) =>
      logger.warn({ err, paymentId }, 'reconcile: payment left open, retried next pass'),
  });
  const protocols = createExchange({ db, payments, schemes: paymentSchemes.schemes, now });
  const auth = limits.auth;

  const app = new Koa();
  app.proxy = false;
  app.use(metrics.middleware);
  // The agent can tell the gateway's own refusals from a merchant's response.
  app.use(async (ctx, next) => {
    await next();
    const b = ctx.body as { error?: { code?: unknown } } | undefined;
    if (b && typeof b === 'object' && !Buffer.isBuffer(b) && typeof b.error?.code === 'string')
      ctx.set('X-Ctl-Gateway-Error', b.error.code);
  });
  app.use(errorMiddleware({ logger, statusByCode: STATUS_BY_CODE }));

  const router = new Router();
  healthRoutes(router, {
    // The same checks as the authority's: the database, and the keys it signs with.
    ready: {
      database: () => db.ping(),
      keys: async () => Boolean((await keys.active('grant')) && (await keys.active('receipt'))),
    },
    metrics,
  });
  adminRoutes(router, { db, auth, keys, sessions, events, now });
  sessionRoutes(router, { db, auth, sessions, baseUrl, log: serviceLog?.log });
  proxyRoutes(router, {
    sessions,
    protocols,
    forwarder,
    now,
    maxBodyBytes: deps.maxBodyBytes ?? 1024 * 1024,
    idempotency,
    log: serviceLog?.log,
  });
  agentSessionRoutes(router, { db, sessions, log: serviceLog?.log });
  serviceLog?.routes(router, { receiptId: 'receipt:' });
  merchantRoutes(router, { db, ledger, now, baseUrl, limit: limits.charges });
  keyRoutes(router, { db, keys, issuer, now });
  consoleRoutes(router, { db, auth, sessions, streams: consoleStreams, dir: deps.console?.dir });
  eventAdminRoutes(router, {
    admin: requireScope(auth, ADMIN_SCOPE),
    audit: events.audit,
    dispatches: events.outbox.log,
    redeliver: (id) => events.outbox.redeliver(id),
    anchors: { outbox: chain, sources: anchorSources },
  });
  caRoutes(router, { auth, ca: egressCa });
  serveOpenApi(router, GATEWAY_OPENAPI);
  serveRouter(app, router, [observeSessionWrites(consoleStreams)]);

  const staleMs = deps.reconcileStaleMs ?? 120_000;
  const reconcile = (ms = staleMs) => payments.reconcile(ms);

  return {
    app,
    evmAddress: paymentSchemes.evmAddress,
    reconcile,
    expireNow,
    pinListenUrl(url) {
      if (!deps.publicUrl) pinnedBase = url.replace(/\/+$/, '');
    },
    nextExpiry: () => nextExpiry(db),
    pruneIdempotency: () => idempotency.prune(),
    events,
    idle: () => events.idle(),
    log: serviceLog,
    chain,
    egress: {
      sessionByToken: (token) => sessionService.byToken(token),
      ca: egressCa,
      targets,
      resolve: deps.resolve,
      now,
      ends: sessionEnds,
      rateLimitBackend: db,
    },
    async close() {
      await serviceLog?.close();
      await chain.close();
      await events.close();
      await consoleStreams.close();
      forwarder.close();
      hookForwarder.close();
      authorityForwarder.close();
    },
  };
}

/** `http://<local address>:<port>` of the accepted connection: the listen address, whatever the Host header says. */
function localOrigin(ctx: Koa.Context): string {
  const a = (ctx.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.)/, '');
  return `http://${a.includes(':') ? `[${a}]` : a}:${ctx.socket.localPort}`;
}

/**
 * The `ip:port` of each trusted authority whose base URL names an IP address, as the address guard's
 * allowHosts reads them. A name is not excepted: what it resolves to is not what the operator wrote.
 */
function authorityTargets(bases: readonly string[]): string[] {
  return bases.flatMap((base) => {
    try {
      const u = new URL(base);
      if (!isIP(bareHost(u))) return [];
      return [`${bareHost(u)}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`];
    } catch {
      return [];
    }
  });
}
