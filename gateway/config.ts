/**
 * The gateway's configuration: the one reader, readGatewayConfig, as authority/config.ts is the
 * authority's; what both services read alike (PORT, HOST, DATABASE_URL, LOG_LEVEL, unknown names)
 * is service-kit's readServiceBasics. The list of its variables is variables.ts, apart because
 * the readers here load the chain client and the database drivers, and `ctl gateway --help`
 * prints the list without them.
 */
import { hostname } from 'node:os';
import { defaultLogOrigin, serviceLogConfigFromEnv } from '../service-kit/tlog/config.js';
import {
  ConfigError,
  checkAdminKey,
  checkHostPortList,
  checkHttpUrl,
  checkKek,
  readServiceBasics,
} from '../service-kit/config.js';
import { webhookRetryFromEnv } from '../service-kit/webhook-outbox.js';
import { rollbackOptionsFromEnv } from '../service-kit/rollback-guard.js';
import { anchorSettingsFromEnv } from '../service-kit/anchor/config.js';
import { gatewayRateLimitsFromEnv } from '../service-kit/service-limits.js';
import { parseAssetMap, parseMaxHoldSeconds, parseMaxTimeoutSeconds } from './payments/evm/assets.js';
import { chainReaders, parseConfirmations, parseRpcUrls } from './payments/evm/chain.js';
import { maxSessionSecondsFromEnv } from './sessions/config.js';
import { maxSessionDepthFromEnv } from './sessions/child-config.js';
import { egressFromEnv } from './egress/config.js';
import type { GatewayStartOptions } from './server.js';
import { GATEWAY_VARIABLES } from './variables.js';

export { GATEWAY_VARIABLES };

/**
 * The gateway's configuration from the environment: the one reader `ctl gateway` and `ctl start`
 * both use, as readAuthorityConfig is the authority's. Throws a ConfigError naming the variable
 * when one is malformed (exit 2). `alsoKnown`: CTL_* names another service reads from the same
 * environment (`ctl start`).
 * @example const options = readGatewayConfig(process.env)
 */
export function readGatewayConfig(
  env: Record<string, string | undefined> = process.env,
  options: { alsoKnown?: Iterable<string> } = {},
): GatewayStartOptions {
  const { port, host, databaseUrl, logLevel, warnings } = readServiceBasics(env, {
    service: 'the gateway',
    variables: GATEWAY_VARIABLES,
    alsoKnown: options.alsoKnown,
  });
  // Grants carry the public URL (PROTOCOL.md §10): a wrong one would fail every POST /sessions later.
  const publicUrl = env.CTL_GATEWAY_PUBLIC_URL?.trim()
    ? checkHttpUrl(env.CTL_GATEWAY_PUBLIC_URL.trim(), 'CTL_GATEWAY_PUBLIC_URL')
    : undefined;
  checkKek(env, 'CTL_GATEWAY_KEK');
  return {
    port,
    host,
    databaseUrl,
    logLevel,
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

/** The last part of the gateway log's default origin. */
export const GATEWAY_LOG_NAME = 'ctl-gateway-log';

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
