/**
 * The gateway's server entry, in the authority's shape: configuration (config.ts readGatewayConfig)
 * → keys → database and migrations → app (app.ts createGatewayApp, which starts nothing) → the
 * background work (startGatewayWork: webhooks, anchors, the log, reconciliation, the expiry sweep)
 * → listen. `openGateway` does all but listening (tests, `ctl demo`).
 */
import type { ConfigWarning } from '../service-kit/config.js';
import { GATEWAY_LOG_NAME } from './config.js';
import { randomBytes } from 'node:crypto';
import { generatePrivateKey } from 'viem/accounts';
import {
  openDatabase,
  createLogger,
  formatRateLimit,
  listen,
  migrate,
  requestLogger,
  silentLogger,
  dispatchLogMigration,
  webhookOutboxMigration,
  auditLogMigration,
  auditStagingMigration,
  type Listening,
  type Logger,
  type Migration,
} from '../service-kit/index.js';
import {
  auditChainReader,
  guardRollback,
  highWaterFileOf,
  type RollbackOptions,
} from '../service-kit/rollback-guard.js';
import { createGatewayApp, type GatewayApp, type GatewayDeps, type GatewayParts } from './app.js';
import { GATEWAY_MIGRATIONS } from './schema.js';
import { SCHEME_MIGRATIONS } from './payments/registry.js';
import { createKeyRing, sharedSecret } from './keys/ring.js';
import { createSessionKeys } from './sessions/actor-keys.js';
import { externalKeysFromEnv, gatewayKek } from './keys/custody.js';
import { DEFAULT_GATEWAY_RATE_LIMITS, type GatewayRateLimits } from '../service-kit/service-limits.js';
import { DEFAULT_MAX_SESSION_SECONDS } from './sessions/config.js';
import type { EgressConfig } from './egress/config.js';
import { startEgressProxy, type EgressProxy } from './egress/proxy-server.js';
import { hostname } from 'node:os';
import {
  defaultLogOrigin,
  logCheckpointFileOf,
  prepareServiceLog,
  serviceLogMigrations,
} from '../service-kit/tlog/index.js';
import { chainOutboxMigration, openServiceLedgers } from '../service-kit/anchor/index.js';

export interface RunningGateway {
  gateway: GatewayApp;
  server: Listening;
  /** The egress proxy, when configured. */
  egress?: EgressProxy;
  logger: Logger;
  close(): Promise<void>;
}

export type GatewayStartOptions = Partial<GatewayDeps> & {
  port: number;
  host: string;
  databaseUrl: string;
  logLevel?: string;
  logger?: Logger;
  /** Where the custody variables are read (CTL_GATEWAY_KEK…, *_PKCS11_URI); default process.env. */
  env?: Record<string, string | undefined>;
  /** The egress proxy's listener (egress/proxy-server.ts); unset: off. */
  egress?: EgressConfig;
  /** CTL_* variables in the environment that nothing reads (misspelt?), to say so at start. */
  warnings?: ConfigWarning[];
  /** The rollback check (service-kit/rollback-guard.ts): the high-water file, and the operator's consent. */
  rollback?: RollbackOptions;
};

/** The gateway log's tables' prefix. */
const GATEWAY_LOG_PREFIX = 'gw_log';

/** Every table the gateway reads or writes, in order (run by prepareGateway, never by createGatewayApp). */
export const GATEWAY_ALL_MIGRATIONS: readonly Migration[] = [
  ...GATEWAY_MIGRATIONS,
  dispatchLogMigration('gw_webhook_dispatches'),
  // The payment schemes' own tables (payments/registry.ts).
  ...SCHEME_MIGRATIONS,
  // Durable events: the audit chain and the webhook outbox, written in each change's transaction (sessions/events.ts).
  auditLogMigration('gw_audit_log'),
  auditStagingMigration('gw_audit_log'),
  webhookOutboxMigration('gw_webhook_dispatches'),
  // The transparency log: receipts and session changes, appended in their own transactions (service-kit/tlog).
  ...serviceLogMigrations(GATEWAY_LOG_PREFIX),
  // Anchors of the log's checkpoint (the audit chain's head with the log off) on ledgers (service-kit/anchor/).
  chainOutboxMigration('gw_chain_outbox'),
];

/**
 * Migrates the database and reads (or makes, once per database) what the app is built from: the
 * key ring, the session-key master, the continuation key and the EVM account.
 * @example const parts = await prepareGateway({ db })
 */
export async function prepareGateway(deps: GatewayDeps): Promise<GatewayParts> {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const logger = deps.logger ?? silentLogger();
  await migrate(db, [...GATEWAY_ALL_MIGRATIONS]);
  // Each payment writes a few pages (its receipt carries the SBA and grant): checkpoint the WAL
  // less often, so its fsync is paid once per ~40 MB rather than every ~200 payments.
  if (db.dialect === 'sqlite') await db.exec('PRAGMA wal_autocheckpoint = 10000');
  let sealer = deps.sealer;
  if (!sealer) {
    const kek = await gatewayKek({}, db.description);
    logger.warn(
      { kek: kek.sealer.description },
      'no CTL_GATEWAY_KEK: stored keys and secrets are sealed under a development KEK ' +
        '(set CTL_GATEWAY_KEK or CTL_GATEWAY_KEK_PKCS11_URI in production)',
    );
    sealer = kek.sealer;
  }
  const keys = createKeyRing(db, now, {
    sealer,
    external: { ...deps.externalKeys, ...(deps.receiptKey ? { receipt: deps.receiptKey } : {}) },
  });
  await keys.init(); // seals keys found in the clear, holds the external key, makes the key set on first start
  const sessionKeys = await createSessionKeys(db, sealer);
  const continuationSecret = Buffer.from(
    await sharedSecret(db, 'continuation-hmac', () => randomBytes(32).toString('base64url'), sealer),
    'base64url',
  );
  // The gateway's EVM account, like its other keys: configured, or made once and kept.
  const evmPrivateKey =
    deps.x402?.privateKey ??
    ((await sharedSecret(db, 'evm-private-key', () => generatePrivateKey(), sealer)) as `0x${string}`);
  const log =
    deps.log === false
      ? undefined
      : await prepareServiceLog(
          db,
          {
            origin: defaultLogOrigin(deps.publicUrl, hostname(), GATEWAY_LOG_NAME),
            ...deps.log,
            prefix: GATEWAY_LOG_PREFIX,
          },
          sealer,
        );
  // Ledgers last: their signers (an HSM) are opened once the database is ready.
  const ledgers = [
    ...(deps.anchoring
      ? await openServiceLedgers({ settings: deps.anchoring, env: deps.anchoringEnv ?? {}, logger })
      : []),
    ...(deps.ledgers ?? []),
  ];
  return { sealer, keys, sessionKeys, continuationSecret, evmPrivateKey, log, ledgers };
}

/** What startGatewayWork started. */
export interface GatewayWork {
  /** A new session's expiresAt (ms): the expiry sweep wakes by it when it is the nearest. */
  sessionExpiresAt(at: number): void;
  /** Clears the timers; the app's close() stops the outboxes and the log. */
  stop(): void;
}

/**
 * Starts the gateway's background work, as the authority's server.ts starts its own; the app
 * starts none of it (ARCHITECTURE.md rule 11): the webhook outbox and audit sealer, the anchors,
 * a reconcile pass and its timer (which also prunes idempotency keys), the expiry sweep, and the
 * log's checkpoints.
 * @example const work = await startGatewayWork(gw, deps); … work.stop(); await gw.close()
 */
export async function startGatewayWork(
  gateway: GatewayApp,
  o: Pick<GatewayDeps, 'logger' | 'now' | 'reconcileIntervalMs' | 'expiryMaxSleepMs'> = {},
): Promise<GatewayWork> {
  const logger = o.logger ?? silentLogger();
  const now = o.now ?? Date.now;
  // Tokens logged in the clear by an earlier version: withheld like new ones ("Secrets at rest").
  await gateway.events.withholdLoggedTokens();
  gateway.events.start();
  gateway.chain.start();
  // Payments left open by a crash are settled before the first request's (spec §3 "reconcile").
  await gateway.reconcile().catch((e) => logger.error({ err: e }, 'reconcile failed'));
  const reconcileTimer = setInterval(() => {
    gateway.reconcile().catch((e) => logger.error({ err: e }, 'reconcile failed'));
    gateway.pruneIdempotency().catch((e) => logger.error({ err: e }, 'pruning idempotency keys failed'));
  }, o.reconcileIntervalMs ?? 30_000);
  reconcileTimer.unref?.();
  const expiry = expirySweep(gateway, { logger, now, maxSleepMs: o.expiryMaxSleepMs ?? 30_000 });
  try {
    await gateway.expireNow();
    const first = await gateway.nextExpiry();
    if (first !== undefined) expiry.schedule(first);
    // Integrates the log's pending entries and signs a checkpoint every second (service-kit/tlog/service.ts).
    gateway.log?.start();
  } catch (e) {
    clearInterval(reconcileTimer);
    expiry.stop();
    throw e;
  }
  return {
    sessionExpiresAt: (at) => expiry.schedule(at),
    stop() {
      clearInterval(reconcileTimer);
      expiry.stop();
    },
  };
}

/**
 * spec §3 last row: `expiresAt` revokes the session on time, with or without traffic. One timer,
 * set for the nearest expiry and at most `maxSleepMs` ahead; each wake expires what is due.
 */
function expirySweep(
  gateway: Pick<GatewayApp, 'expireNow' | 'nextExpiry'>,
  o: { logger: Logger; now: () => number; maxSleepMs: number },
) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let at = Infinity;
  let stopped = false;
  function schedule(when: number) {
    if (stopped || when >= at) return;
    if (timer) clearTimeout(timer);
    at = when;
    timer = setTimeout(
      async () => {
        timer = undefined;
        at = Infinity;
        try {
          await gateway.expireNow();
          const next = await gateway.nextExpiry();
          schedule(Math.min(next ?? Infinity, o.now() + o.maxSleepMs));
        } catch (e) {
          o.logger.error({ err: e }, 'expiry sweep failed');
          schedule(o.now() + 1000);
        }
      },
      Math.max(0, Math.min(when - o.now(), o.maxSleepMs)),
    );
    timer.unref?.();
  }
  return {
    schedule,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * The gateway on an open database, without listening: prepared, built and its work started
 * (server entry, `ctl demo`, tests). `close()` stops its work; the database stays open.
 * @example const gw = await openGateway({ db, adminKey }); await listen(gw.app, { port: 0 })
 */
export async function openGateway(deps: GatewayDeps): Promise<GatewayApp> {
  let work: GatewayWork | undefined;
  const onSessionCreated = (at: number) => {
    work?.sessionExpiresAt(at);
    deps.onSessionCreated?.(at);
  };
  const gateway = createGatewayApp({ ...deps, onSessionCreated }, await prepareGateway(deps));
  try {
    work = await startGatewayWork(gateway, deps);
  } catch (e) {
    await gateway.close();
    throw e;
  }
  const started = work;
  return {
    ...gateway,
    async close() {
      started.stop();
      await gateway.close();
    },
  };
}

/**
 * Opens the keys and the database, builds the app and listens; `close()` drains requests in
 * flight, then closes the database and the keys.
 */
export async function startGateway(opts: GatewayStartOptions): Promise<RunningGateway> {
  const logger = opts.logger ?? createLogger({ name: 'ctl-gateway', level: opts.logLevel ?? process.env.LOG_LEVEL });
  const env = opts.env ?? process.env;
  // Keys first: an HSM that cannot be reached stops the start before the database is touched.
  const externalKeys = opts.externalKeys ?? {
    ...(await externalKeysFromEnv(env)),
    ...(opts.receiptKey ? { receipt: opts.receiptKey } : {}),
  };
  const closeKeys = async () => {
    for (const k of Object.values(externalKeys)) await k?.signer.close();
  };
  let db;
  try {
    db = await openDatabase(opts.databaseUrl);
  } catch (e) {
    await closeKeys();
    throw e;
  }
  const kek = opts.sealer
    ? undefined
    : await gatewayKek(env, db.description).catch(async (e) => {
        await db.close();
        await closeKeys();
        throw e;
      });
  if (kek?.source === 'dev-file') {
    logger.warn(
      { kek: kek.sealer.description },
      'no CTL_GATEWAY_KEK: stored keys and secrets are sealed under a development KEK in ' +
        'a 0600 file beside the database (set CTL_GATEWAY_KEK or CTL_GATEWAY_KEK_PKCS11_URI ' +
        'in production)',
    );
  }
  let gateway: GatewayApp | undefined;
  let server: Listening | undefined;
  let egress: EgressProxy | undefined;
  let highWater: Awaited<ReturnType<typeof guardRollback>>;
  try {
    gateway = await openGateway({
      ...opts,
      db,
      logger,
      sealer: opts.sealer ?? kek!.sealer,
      externalKeys,
      anchoringEnv: env,
    });
    // Before serving: a database restored from an older backup would reopen spent budget.
    // The log's newest checkpoint is a mark too: in a file beside the audit chain's, and at each witness.
    const chain = auditChainReader(db, 'gw_audit_log', 'gw_audit_log_staged');
    const rollback = opts.rollback ?? {};
    const markFile = highWaterFileOf(db, rollback);
    const logMarks = gateway.log?.highWaterSources(markFile && logCheckpointFileOf(markFile)) ?? [];
    highWater = await guardRollback(
      db,
      chain,
      { ...rollback, sources: [...(rollback.sources ?? []), ...logMarks] },
      logger,
    );
    for (const [purpose, k] of Object.entries(externalKeys)) {
      if (k)
        logger.info(
          { purpose, custody: k.signer.custody, key: k.signer.description },
          `${purpose} key from ${k.variable}`,
        );
    }
    // Probes and key fetches are high-volume reads: at debug, as the authority logs them.
    gateway.app.middleware.unshift(
      requestLogger(logger, { quietPaths: ['/healthz', '/readyz', '/metrics', '/.well-known/ctl-keys.json'] }),
    );
    server = await listen(gateway.app, { port: opts.port, host: opts.host });
    // The handler is taken once the middleware above is in place: proxied requests are logged alike.
    if (opts.egress)
      egress = await startEgressProxy({
        handle: gateway.app.callback(),
        hooks: gateway.egress,
        passThrough: opts.egress.passThrough,
        connectLimit: opts.egress.connectLimit,
        sessionRecheckMs: opts.egress.sessionRecheckMs,
        port: opts.egress.port,
        host: opts.egress.host ?? opts.host,
        logger,
      });
  } catch (e) {
    await server?.close();
    await gateway?.close();
    await db.close();
    await closeKeys();
    await kek?.close();
    throw e;
  }
  gateway.pinListenUrl(server.url);
  // The egress CA is made (or read) before the gateway says it listens: that line is the last of a
  // start, which supervisors and `ctl start` take as ready. `proxy`, not `url`: a forward proxy
  // answers no /healthz.
  if (egress)
    logger.info(
      { proxy: egress.url, passThrough: opts.egress?.passThrough, ca: await gateway.egress.ca.fingerprint() },
      'egress proxy listening (agents trust GET /ca.pem)',
    );
  logger.info({ url: server.url, database: db.description, ...describeLimits(opts) }, 'gateway listening');
  const app = gateway;
  const listening = server;
  return {
    gateway: app,
    server: listening,
    egress,
    logger,
    async close() {
      await egress?.close();
      await listening.close();
      await app.close();
      await highWater?.close();
      await db.close();
      await closeKeys();
      await kek?.close();
    },
  };
}

/** The effective limits, for the start-up log line. */
function describeLimits(o: { rateLimits?: GatewayRateLimits; maxSessionSeconds?: number }) {
  const l = o.rateLimits ?? DEFAULT_GATEWAY_RATE_LIMITS;
  return {
    rateLimitOwner: formatRateLimit(l.owner),
    rateLimitSession: formatRateLimit(l.session),
    rateLimitCharge: formatRateLimit(l.charge),
    maxSessionSeconds: o.maxSessionSeconds ?? DEFAULT_MAX_SESSION_SECONDS,
  };
}
