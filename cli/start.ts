/**
 * `npm start` / `ctl start`: the policy authority and the gateway together on
 * embedded SQLite. Development keys are made on first start and kept in ./data (the admin keys
 * and one budget-owner key in ./data/dev-keys.json, mode 0600; the signing keys inside each
 * service's database, sealed under a development KEK in ./data/authority.kek and
 * ./data/gateway.kek, mode 0600), then it prints how to create a session. Development only: the
 * KEKs sit beside the databases, so ./data as a whole is as secret as the keys.
 *
 * Each service reads its configuration through the very reader of `ctl authority` and
 * `ctl gateway` (readAuthorityConfig, gatewayOptionsFromEnv), so every variable they honour is
 * honoured here; start only supplies its defaults (ports, data files, dev keys) where unset.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { readAuthorityConfig } from '../authority/config.js';
import { startAuthority } from '../authority/server.js';
import { createLogger } from '../service-kit/index.js';
import { gatewayOptionsFromEnv, startGateway } from '../gateway/server.js';
import { guard, one, parseArgs, UsageError } from './device/args.js';
import { preflight, runUntilSignal, startFailure } from './service/lifecycle.js';

const USAGE = `usage: ctl start [--data <dir>]

Runs the policy authority (AUTHORITY_PORT, default 8700; AUTHORITY_DATABASE_URL) and the gateway
(PORT, default 8402; GATEWAY_DATABASE_URL) on SQLite files in <dir> (default ./data), with
development keys made on first start. Every other variable of \`ctl authority --help\` and
\`ctl gateway --help\` applies as it does there. Logs are JSON lines on stdout (LOG_LEVEL, default
info); the how-to is printed on stderr. SIGTERM or SIGINT stops both: requests in flight finish
(at most 10 s), then it exits 0.`;

interface DevKeys {
  authorityAdminKey: string;
  gatewayAdminKey: string;
  ownerKey?: string;
}

type Env = Record<string, string | undefined>;

/**
 * The environment each service reads under `start`: the process environment, with the start
 * defaults where a variable is unset. PORT and DATABASE_URL are the gateway's (as `ctl gateway`);
 * the authority's are AUTHORITY_PORT and AUTHORITY_DATABASE_URL.
 * @example const { authority, gateway } = startEnvironments(process.env, './data', keys)
 */
export function startEnvironments(env: Env, dataDir: string, keys: DevKeys): { authority: Env; gateway: Env } {
  const shared = { ...env, LOG_LEVEL: env.LOG_LEVEL || 'info' };
  return {
    authority: {
      ...shared,
      PORT: env.AUTHORITY_PORT || '8700',
      DATABASE_URL: env.AUTHORITY_DATABASE_URL || `sqlite:${join(dataDir, 'authority.db')}`,
      CTL_ADMIN_API_KEY: env.CTL_ADMIN_API_KEY || keys.authorityAdminKey,
    },
    gateway: {
      ...shared,
      PORT: env.PORT || '8402',
      DATABASE_URL: env.GATEWAY_DATABASE_URL || `sqlite:${join(dataDir, 'gateway.db')}`,
      CTL_GATEWAY_ADMIN_KEY: env.CTL_GATEWAY_ADMIN_KEY || keys.gatewayAdminKey,
    },
  };
}

function devKeys(dataDir: string): { keys: DevKeys; file: string } {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'dev-keys.json');
  if (existsSync(file)) return { keys: JSON.parse(readFileSync(file, 'utf8')) as DevKeys, file };
  const keys = { authorityAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}`, gatewayAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}` };
  writeFileSync(file, JSON.stringify(keys, null, 2), { mode: 0o600 });
  return { keys, file };
}

export async function main(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) return console.log(USAGE), 0;
  return guard(USAGE, async () => {
    const p = parseArgs(args, { values: ['data'] });
    if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
    const dataDir = resolve(one(p, 'data') ?? './data');
    const { keys, file: keysFile } = devKeys(dataDir);
    const env = startEnvironments(process.env, dataDir, keys);
    let authorityConfig, gatewayOptions;
    try {
      authorityConfig = readAuthorityConfig(env.authority);
    } catch (e) {
      // The reader names PORT / DATABASE_URL; under start the authority's are AUTHORITY_*.
      console.error(`ctl start: ${(e as Error).message.replace(/^(PORT|DATABASE_URL)\b/, 'AUTHORITY_$1')}`);
      return 2;
    }
    try {
      gatewayOptions = gatewayOptionsFromEnv(env.gateway);
    } catch (e) {
      console.error(`ctl start: ${(e as Error).message.replace(/^DATABASE_URL\b/, 'GATEWAY_DATABASE_URL')}`);
      return 2;
    }
    const refused = (await preflight('ctl start', authorityConfig.databaseUrl, 'AUTHORITY_DATABASE_URL'))
      ?? (await preflight('ctl start', gatewayOptions.databaseUrl, 'GATEWAY_DATABASE_URL'));
    if (refused !== undefined) return refused;
    let authority, gateway;
    try {
      authority = await startAuthority(authorityConfig, { logger: createLogger({ name: 'ctl-authority', level: authorityConfig.logLevel }) });
    } catch (e) {
      return startFailure('ctl start', e);
    }
    try {
      gateway = await startGateway(gatewayOptions);
    } catch (e) {
      await authority.close();
      return startFailure('ctl start', e);
    }
    const gw = gateway.server.url;
    if (!keys.ownerKey) {
      const res = await fetch(`${gw}/admin/owners`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gatewayOptions.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'dev owner' }),
      });
      keys.ownerKey = ((await res.json()) as { apiKey: string }).apiKey;
      writeFileSync(keysFile, JSON.stringify(keys, null, 2), { mode: 0o600 });
    }
    printHowTo(authority.url, gw, keysFile, dataDir, keys.ownerKey);
    const running = { authority, gateway };
    return runUntilSignal(authority.logger, async () => {
      // Both drain at once: the 10 s bound holds for the pair, not for each in turn.
      await Promise.all([running.gateway.close(), running.authority.close()]);
    });
  });
}

/** The how-to goes to stderr: stdout carries only the JSON log lines. */
function printHowTo(authorityUrl: string, gw: string, keysFile: string, dataDir: string, ownerKey: string): void {
  const expires = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
  console.error(`CTL is running.
  policy authority  ${authorityUrl}   (admin key in ${keysFile})
  payment gateway   ${gw}   (data in ${dataDir})
  owner console     ${gw}/console   (sign in with the owner key: ${ownerKey})

Create a session as the budget owner:
  curl -s -X POST ${gw}/sessions \\
    -H 'authorization: Bearer ${ownerKey}' -H 'content-type: application/json' \\
    -d '{"budget":{"amount":"5000","currency":"USD"},"purposes":["api:search"],"expiresAt":"${expires}","softLimit":{"amount":"1000"}}'

Give the agent the sessionToken; it calls merchants through the gateway:
  curl -s -X POST ${gw}/proxy -H 'authorization: Bearer <sessionToken>' \\
    -H 'x-target-url: https://merchant.example/data' -H 'x-ctl-purpose: api:search'

Receipts: GET ${gw}/sessions/<sessionId>/receipts   Revoke: DELETE ${gw}/sessions/<sessionId>
(private targets are refused; set CTL_GATEWAY_ALLOW_TARGETS=127.0.0.1:<port> to try a merchant on this machine)
Ctrl-C stops both.`);
}
