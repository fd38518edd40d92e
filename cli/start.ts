/**
 * `npm start` / `ctl start` (issue 4 §9): the policy authority and the gateway together on
 * embedded SQLite. Development keys are made on first start and kept in ./data (the admin keys
 * and one budget-owner key in ./data/dev-keys.json, mode 0600; the signing keys inside each
 * service's database), then it prints how to create a session.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { readAuthorityConfig } from '../authority/config.js';
import { startAuthority } from '../authority/server.js';
import { createLogger } from '../service-kit/index.js';
import { startGateway } from '../gateway/server.js';

interface DevKeys {
  authorityAdminKey: string;
  gatewayAdminKey: string;
  ownerKey?: string;
}

export async function main(args: string[]): Promise<number | void> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(`usage: ctl start [--data <dir>]

Runs the policy authority (AUTHORITY_PORT, default 8700) and the gateway (PORT, default 8402) on
SQLite files in ./data, with development keys made on first start.`);
    return 0;
  }
  const at = args.indexOf('--data');
  const dataDir = resolve(at >= 0 && args[at + 1] ? args[at + 1]! : './data');
  mkdirSync(dataDir, { recursive: true });
  const keysFile = join(dataDir, 'dev-keys.json');
  let keys: DevKeys;
  if (existsSync(keysFile)) keys = JSON.parse(readFileSync(keysFile, 'utf8'));
  else {
    keys = { authorityAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}`, gatewayAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}` };
    writeFileSync(keysFile, JSON.stringify(keys, null, 2), { mode: 0o600 });
  }
  const host = process.env.HOST ?? '127.0.0.1';
  const authorityPort = Number(process.env.AUTHORITY_PORT ?? 8700);
  const gatewayPort = Number(process.env.PORT ?? 8402);
  const logLevel = process.env.LOG_LEVEL ?? 'warn';

  const authority = await startAuthority(
    readAuthorityConfig({
      ...process.env,
      PORT: String(authorityPort),
      HOST: host,
      DATABASE_URL: process.env.AUTHORITY_DATABASE_URL ?? `sqlite:${join(dataDir, 'authority.db')}`,
      CTL_ADMIN_API_KEY: process.env.CTL_ADMIN_API_KEY ?? keys.authorityAdminKey,
      LOG_LEVEL: logLevel,
    }),
    { logger: createLogger({ name: 'ctl-authority', level: logLevel }) },
  );
  const gateway = await startGateway({
    port: gatewayPort,
    host,
    databaseUrl: process.env.GATEWAY_DATABASE_URL ?? `sqlite:${join(dataDir, 'gateway.db')}`,
    adminKey: process.env.CTL_GATEWAY_ADMIN_KEY ?? keys.gatewayAdminKey,
    publicUrl: process.env.CTL_GATEWAY_PUBLIC_URL,
    targets: { allowPrivate: process.env.CTL_GATEWAY_ALLOW_PRIVATE_TARGETS === '1' },
    logger: createLogger({ name: 'ctl-gateway', level: logLevel }),
  });
  const gw = gateway.server.url;
  if (!keys.ownerKey) {
    const res = await fetch(`${gw}/admin/owners`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.gatewayAdminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'dev owner' }),
    });
    keys.ownerKey = ((await res.json()) as { apiKey: string }).apiKey;
    writeFileSync(keysFile, JSON.stringify(keys, null, 2), { mode: 0o600 });
  }
  const expires = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
  console.log(`CTL is running.
  policy authority  ${authority.url}   (admin key in ${keysFile})
  payment gateway   ${gw}   (data in ${dataDir})

Create a session as the budget owner:
  curl -s -X POST ${gw}/sessions \\
    -H 'authorization: Bearer ${keys.ownerKey}' -H 'content-type: application/json' \\
    -d '{"budget":{"amount":"5000","currency":"USD"},"purposes":["api:search"],"expiresAt":"${expires}","softLimit":{"amount":"1000"}}'

Give the agent the sessionToken; it calls merchants through the gateway:
  curl -s -X POST ${gw}/proxy -H 'authorization: Bearer <sessionToken>' \\
    -H 'x-target-url: https://merchant.example/data' -H 'x-ctl-purpose: api:search'

Receipts: GET ${gw}/sessions/<sessionId>/receipts   Revoke: DELETE ${gw}/sessions/<sessionId>
(private targets are refused; set CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1 to try a merchant on this machine)
Ctrl-C stops both.`);
  const stop = async () => {
    await gateway.close();
    await authority.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await new Promise(() => {});
}
