/**
 * Runs the gateway from the environment: PORT (8402), HOST (127.0.0.1),
 * DATABASE_URL (sqlite:./data/gateway.db or postgres://…), CTL_GATEWAY_ADMIN_KEY,
 * CTL_GATEWAY_PUBLIC_URL, CTL_GATEWAY_ISSUER, CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1,
 * CTL_GATEWAY_ALLOW_TARGETS=host:port,…, LOG_LEVEL; x402: CTL_X402_ASSETS,
 * CTL_X402_MAX_TIMEOUT_SECONDS, CTL_X402_MAX_HOLD_SECONDS, CTL_GATEWAY_EVM_PRIVATE_KEY, CTL_X402_RPC_URL,
 * CTL_X402_CONFIRMATIONS; webhooks:
 * CTL_WEBHOOK_*; limits: CTL_GATEWAY_RATE_LIMIT_OWNER (6000/60s), CTL_GATEWAY_RATE_LIMIT_SESSION (1200/60s), `0` for
 * none, and CTL_GATEWAY_MAX_SESSION_SECONDS (2592000, 30 days); custody (keys/custody.ts): CTL_GATEWAY_KEK or
 * CTL_GATEWAY_KEK_PKCS11_URI, CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI (or _PRIVATE_KEY_FILE, _PRIVATE_KEY_PEM),
 * CTL_PKCS11_MODULE; egress proxy (egress/config.ts): CTL_GATEWAY_EGRESS_PORT (unset: off), CTL_GATEWAY_EGRESS_HOST,
 * CTL_GATEWAY_EGRESS_PASS_THROUGH.
 */
import {
  ConfigError,
  checkAdminKey,
  checkDatabaseUrl,
  checkHost,
  checkHostPortList,
  checkHttpUrl,
  checkKek,
  checkLogLevel,
  checkVariableNames,
  type ConfigWarning,
} from '../service-kit/config.js';
import { GATEWAY_VARIABLES } from './config.js';
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
  webhookRetryFromEnv,
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
  rollbackOptionsFromEnv,
  type RollbackOptions,
} from '../service-kit/rollback-guard.js';
import { createGatewayApp, type GatewayApp, type GatewayDeps, type GatewayParts } from './app.js';
import { GATEWAY_MIGRATIONS } from './schema.js';
import { X402_MIGRATIONS } from './payments/schemes/x402/store.js';
import { MPP_MIGRATIONS } from './payments/schemes/mpp/store.js';
import { createKeyRing, sharedSecret } from './keys/ring.js';
import { createSessionKeys } from './sessions/actor-keys.js';
import { parseAssetMap, parseMaxHoldSeconds, parseMaxTimeoutSeconds } from './payments/evm/assets.js';
import { chainReaders, parseConfirmations, parseRpcUrls } from './payments/evm/chain.js';
import { externalKeysFromEnv, gatewayKek } from './keys/custody.js';
import {
  gatewayRateLimitsFromEnv,
  DEFAULT_GATEWAY_RATE_LIMITS,
  type GatewayRateLimits,
} from '../service-kit/service-limits.js';
import { DEFAULT_MAX_SESSION_SECONDS, maxSessionSecondsFromEnv } from './sessions/config.js';
import { egressFromEnv, type EgressConfig } from './egress/config.js';
import { startEgressProxy, type EgressProxy } from './egress/proxy-server.js';
import { maxSessionDepthFromEnv } from './sessions/child-config.js';
import { hostname } from 'node:os';
import {
  defaultLogOrigin,
  logCheckpointFileOf,
  prepareServiceLog,
  serviceLogConfigFromEnv,
  serviceLogMigrations,
} from '../service-kit/tlog/index.js';
import { anchorSettingsFromEnv, chainOutboxMigration, openServiceLedgers } from '../service-kit/anchor/index.js';

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

/**
 * The gateway's configuration from the environment: the one reader `ctl gateway` and `ctl start`
 * both use. Throws a ConfigError naming the variable when one is malformed (exit 2).
 * `alsoKnown`: CTL_* names another service reads from the same environment (`ctl start`).
 * @example const options = gatewayOptionsFromEnv(process.env)
 */
export function gatewayOptionsFromEnv(
  env: Record<string, string | undefined>,
  options: { alsoKnown?: Iterable<string> } = {},
): GatewayStartOptions {
  const warnings = checkVariableNames(
    env,
    [...GATEWAY_VARIABLES.map((v) => v[0]), ...(options.alsoKnown ?? [])],
    'the gateway',
  );
  const portText = env.PORT?.trim() || '8402';
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535)
    throw new ConfigError('PORT', `expected 0–65535, got '${portText}'`);
  // Grants carry the public URL (PROTOCOL.md §10): a wrong one would fail every POST /sessions later.
  const publicUrl = env.CTL_GATEWAY_PUBLIC_URL?.trim()
    ? checkHttpUrl(env.CTL_GATEWAY_PUBLIC_URL.trim(), 'CTL_GATEWAY_PUBLIC_URL')
    : undefined;
  checkKek(env, 'CTL_GATEWAY_KEK');
  return {
    port: Number(portText),
    host: checkHost(env.HOST?.trim() || '127.0.0.1'),
    databaseUrl: checkDatabaseUrl(env.DATABASE_URL || 'sqlite:./data/gateway.db'),
    logLevel: checkLogLevel(env.LOG_LEVEL),
    adminKey: checkAdminKey(env.CTL_GATEWAY_ADMIN_KEY, 'CTL_GATEWAY_ADMIN_KEY'),
    publicUrl,
    issuer: env.CTL_GATEWAY_ISSUER || undefined,
    targets: {
      allowPrivate: flag(env.CTL_GATEWAY_ALLOW_PRIVATE_TARGETS, 'CTL_GATEWAY_ALLOW_PRIVATE_TARGETS'),
      allowHosts: checkHostPortList(env.CTL_GATEWAY_ALLOW_TARGETS, 'CTL_GATEWAY_ALLOW_TARGETS'),
    },
    // Webhook outbox: CTL_WEBHOOK_MAX_ATTEMPTS, _BASE_DELAY_MS, _MAX_DELAY_MS, _TIMEOUT_MS, _POLL_MS.
    webhooks: webhookRetryFromEnv(env),
    x402: {
      assets: parseAssetMap(env.CTL_X402_ASSETS),
      maxTimeoutSeconds: parseMaxTimeoutSeconds(env.CTL_X402_MAX_TIMEOUT_SECONDS),
      maxHoldSeconds: parseMaxHoldSeconds(env.CTL_X402_MAX_HOLD_SECONDS),
      privateKey: evmPrivateKey(env.CTL_GATEWAY_EVM_PRIVATE_KEY),
      chain: chainReaders(parseRpcUrls(env.CTL_X402_RPC_URL), parseConfirmations(env.CTL_X402_CONFIRMATIONS)),
    },
    rateLimits: gatewayRateLimitsFromEnv(env),
    maxSessionSeconds: maxSessionSecondsFromEnv(env),
    maxSessionDepth: maxSessionDepthFromEnv(env),
    humanAuthorities: humanAuthoritiesFromEnv(env.CTL_GATEWAY_HUMAN_AUTHORITIES),
    egress: egressFromEnv(env),
    warnings,
    log: serviceLogConfigFromEnv(env, 'CTL_GATEWAY', {
      defaultOrigin: defaultLogOrigin(publicUrl, hostname(), GATEWAY_LOG_NAME),
    }),
    rollback: rollbackOptionsFromEnv(env, 'CTL_GATEWAY'),
    anchoring: anchorSettingsFromEnv(env),
  };
}

/** The gateway log's tables' prefix and the last part of its default origin. */
const GATEWAY_LOG_PREFIX = 'gw_log';
const GATEWAY_LOG_NAME = 'ctl-gateway-log';

/**
 * CTL_GATEWAY_HUMAN_AUTHORITIES: comma-separated http(s) base URLs of the authorities whose people's grants are
 * accepted.
 */
function humanAuthoritiesFromEnv(v: string | undefined): string[] {
  const list = (v ?? '')
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  for (const u of list) {
    let ok = false;
    try {
      const url = new URL(u);
      ok =
        (url.protocol === 'http:' || url.protocol === 'https:') &&
        !url.search &&
        !url.hash &&
        !url.username &&
        !url.password;
    } catch {}
    if (!ok) throw new ConfigError('CTL_GATEWAY_HUMAN_AUTHORITIES', `'${u}' is not an http(s) base URL`);
  }
  return list;
}

/** `1` on, `0` or unset off; anything else (`true`, `yes`) is refused rather than read as off. */
function flag(v: string | undefined, variable: string): boolean {
  const t = v?.trim() ?? '';
  if (t === '' || t === '0') return false;
  if (t === '1') return true;
  throw new ConfigError(variable, `expected 1 (on) or 0 (off), got '${t}'`);
}

function evmPrivateKey(v: string | undefined): `0x${string}` | undefined {
  if (!v) return undefined;
  if (!/^0x[0-9a-fA-F]{64}$/.test(v)) throw new ConfigError('CTL_GATEWAY_EVM_PRIVATE_KEY', '0x and 64 hex digits');
  return v as `0x${string}`;
}

/** Every table the gateway reads or writes, in order (run by prepareGateway, never by createGatewayApp). */
export const GATEWAY_ALL_MIGRATIONS: readonly Migration[] = [
  ...GATEWAY_MIGRATIONS,
  dispatchLogMigration('gw_webhook_dispatches'),
  ...X402_MIGRATIONS,
  // Durable events: the audit chain and the webhook outbox, written in each change's transaction (sessions/events.ts).
  auditLogMigration('gw_audit_log'),
  auditStagingMigration('gw_audit_log'),
  webhookOutboxMigration('gw_webhook_dispatches'),
  ...MPP_MIGRATIONS,
  // The transparency log: receipts and session changes, appended in their own transactions (service-kit/tlog).
  ...serviceLogMigrations(GATEWAY_LOG_PREFIX),
  // Anchors of the audit chain's head on ledgers (service-kit/anchor/).
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

/**
 * The gateway on an open database, without listening: prepared, built and started (server entry,
 * `ctl demo`, tests). `close()` stops its work; the database stays open.
 * @example const gw = await openGateway({ db, adminKey }); await listen(gw.app, { port: 0 })
 */
export async function openGateway(deps: GatewayDeps): Promise<GatewayApp> {
  const gateway = createGatewayApp(deps, await prepareGateway(deps));
  try {
    await gateway.start();
    // Integrates the log's pending entries and signs a checkpoint every second (service-kit/tlog/service.ts).
    gateway.log?.start();
  } catch (e) {
    await gateway.close();
    throw e;
  }
  return gateway;
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
