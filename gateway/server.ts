/**
 * Runs the gateway from the environment (issue 4 §1): PORT (8402), HOST (127.0.0.1),
 * DATABASE_URL (sqlite:./data/gateway.db or postgres://…), CTL_GATEWAY_ADMIN_KEY,
 * CTL_GATEWAY_PUBLIC_URL, CTL_GATEWAY_ISSUER, CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1,
 * CTL_GATEWAY_ALLOW_TARGETS=host:port,…, LOG_LEVEL; x402 (issue 6): CTL_X402_ASSETS,
 * CTL_X402_MAX_TIMEOUT_SECONDS, CTL_GATEWAY_EVM_PRIVATE_KEY, CTL_X402_RPC_URL.
 */
import { openDatabase, createLogger, listen, requestLogger, type Listening, type Logger } from '../service-kit/index.js';
import { createGatewayApp, type GatewayApp, type GatewayDeps } from './app.js';
import { parseAssetMap, parseMaxTimeoutSeconds } from './rails/x402/assets.js';
import { chainReaders, parseRpcUrls } from './rails/x402/chain.js';

export interface RunningGateway {
  gateway: GatewayApp;
  server: Listening;
  close(): Promise<void>;
}

export function gatewayOptionsFromEnv(env: Record<string, string | undefined>): Partial<GatewayDeps> & { port: number; host: string; databaseUrl: string } {
  return {
    port: env.PORT ? Number(env.PORT) : 8402,
    host: env.HOST ?? '127.0.0.1',
    databaseUrl: env.DATABASE_URL ?? 'sqlite:./data/gateway.db',
    adminKey: env.CTL_GATEWAY_ADMIN_KEY || undefined,
    publicUrl: env.CTL_GATEWAY_PUBLIC_URL || undefined,
    issuer: env.CTL_GATEWAY_ISSUER || undefined,
    targets: {
      allowPrivate: env.CTL_GATEWAY_ALLOW_PRIVATE_TARGETS === '1',
      allowHosts: (env.CTL_GATEWAY_ALLOW_TARGETS ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    },
    x402: {
      assets: parseAssetMap(env.CTL_X402_ASSETS),
      maxTimeoutSeconds: parseMaxTimeoutSeconds(env.CTL_X402_MAX_TIMEOUT_SECONDS),
      privateKey: evmPrivateKey(env.CTL_GATEWAY_EVM_PRIVATE_KEY),
      chain: chainReaders(parseRpcUrls(env.CTL_X402_RPC_URL)),
    },
  };
}

function evmPrivateKey(v: string | undefined): `0x${string}` | undefined {
  if (!v) return undefined;
  if (!/^0x[0-9a-fA-F]{64}$/.test(v)) throw new Error('CTL_GATEWAY_EVM_PRIVATE_KEY: 0x and 64 hex digits');
  return v as `0x${string}`;
}

/** Opens the database, builds the app and listens. */
export async function startGateway(opts: Partial<GatewayDeps> & { port: number; host: string; databaseUrl: string; logger?: Logger }): Promise<RunningGateway> {
  const logger = opts.logger ?? createLogger({ name: 'gateway', level: process.env.LOG_LEVEL });
  const db = await openDatabase(opts.databaseUrl);
  const gateway = await createGatewayApp({ ...opts, db, logger });
  gateway.app.middleware.unshift(requestLogger(logger));
  const server = await listen(gateway.app, { port: opts.port, host: opts.host });
  gateway.pinListenUrl(server.url);
  logger.info({ url: server.url, database: db.description }, 'gateway listening');
  return {
    gateway,
    server,
    async close() {
      await server.close();
      await gateway.close();
      await db.close();
    },
  };
}
