/**
 * Runs the gateway from the environment: PORT (8402), HOST (127.0.0.1),
 * DATABASE_URL (sqlite:./data/gateway.db or postgres://…), CTL_GATEWAY_ADMIN_KEY,
 * CTL_GATEWAY_PUBLIC_URL, CTL_GATEWAY_ISSUER, CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1,
 * CTL_GATEWAY_ALLOW_TARGETS=host:port,…, LOG_LEVEL; x402: CTL_X402_ASSETS,
 * CTL_X402_MAX_TIMEOUT_SECONDS, CTL_X402_MAX_HOLD_SECONDS, CTL_GATEWAY_EVM_PRIVATE_KEY, CTL_X402_RPC_URL; webhooks: CTL_WEBHOOK_*;
 * limits: CTL_GATEWAY_RATE_LIMIT_OWNER (6000/60s), CTL_GATEWAY_RATE_LIMIT_SESSION (1200/60s), `0` for
 * none, and CTL_GATEWAY_MAX_SESSION_SECONDS (2592000, 30 days); custody (services/custody.ts):
 * CTL_GATEWAY_KEK or CTL_GATEWAY_KEK_PKCS11_URI, CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI
 * (or _PRIVATE_KEY_FILE, _PRIVATE_KEY_PEM), CTL_PKCS11_MODULE.
 */
import {
  ConfigError,
  checkAdminKey,
  checkDatabaseUrl,
  checkHostPortList,
  checkHttpUrl,
  checkKek,
  checkLogLevel,
} from '../service-kit/config.js';
import {
  openDatabase,
  createLogger,
  listen,
  requestLogger,
  webhookRetryFromEnv,
  type Listening,
  type Logger,
} from '../service-kit/index.js';
import { createGatewayApp, type GatewayApp, type GatewayDeps } from './app.js';
import { parseAssetMap, parseMaxHoldSeconds, parseMaxTimeoutSeconds } from './payments/rails/x402/assets.js';
import { chainReaders, parseRpcUrls } from './payments/rails/x402/chain.js';
import { externalKeysFromEnv, gatewayKek } from './services/custody.js';
import { gatewayRateLimitsFromEnv, maxSessionSecondsFromEnv, describeLimits } from './services/rate-limits.js';
import { maxSessionDepthFromEnv } from './services/child-config.js';

export interface RunningGateway {
  gateway: GatewayApp;
  server: Listening;
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
};

/**
 * The gateway's configuration from the environment: the one reader `ctl gateway` and `ctl start`
 * both use. Throws an Error naming the variable when one is malformed.
 * @example const options = gatewayOptionsFromEnv(process.env)
 */
export function gatewayOptionsFromEnv(env: Record<string, string | undefined>): GatewayStartOptions {
  const portText = env.PORT?.trim() || '8402';
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535)
    throw new RangeError(`PORT: expected 0–65535, got '${portText}'`);
  // Grants carry the public URL (PROTOCOL.md §10): a wrong one would fail every POST /sessions later.
  const publicUrl = env.CTL_GATEWAY_PUBLIC_URL?.trim()
    ? checkHttpUrl(env.CTL_GATEWAY_PUBLIC_URL.trim(), 'CTL_GATEWAY_PUBLIC_URL')
    : undefined;
  checkKek(env, 'CTL_GATEWAY_KEK');
  return {
    port: Number(portText),
    host: env.HOST || '127.0.0.1',
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
      chain: chainReaders(parseRpcUrls(env.CTL_X402_RPC_URL)),
    },
    rateLimits: gatewayRateLimitsFromEnv(env),
    maxSessionSeconds: maxSessionSecondsFromEnv(env),
    maxSessionDepth: maxSessionDepthFromEnv(env),
    humanAuthorities: humanAuthoritiesFromEnv(env.CTL_GATEWAY_HUMAN_AUTHORITIES),
  };
}

/** CTL_GATEWAY_HUMAN_AUTHORITIES: comma-separated http(s) base URLs of the authorities whose people's grants are accepted. */
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
      'no CTL_GATEWAY_KEK: stored keys and secrets are sealed under a development KEK in a 0600 file beside the database (set CTL_GATEWAY_KEK or CTL_GATEWAY_KEK_PKCS11_URI in production)',
    );
  }
  let gateway: GatewayApp | undefined;
  let server: Listening;
  try {
    gateway = await createGatewayApp({ ...opts, db, logger, sealer: opts.sealer ?? kek!.sealer, externalKeys });
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
  } catch (e) {
    await gateway?.close();
    await db.close();
    await closeKeys();
    await kek?.close();
    throw e;
  }
  gateway.pinListenUrl(server.url);
  logger.info({ url: server.url, database: db.description, ...describeLimits(opts) }, 'gateway listening');
  const app = gateway;
  return {
    gateway: app,
    server,
    logger,
    async close() {
      await server.close();
      await app.close();
      await db.close();
      await closeKeys();
      await kek?.close();
    },
  };
}
