/**
 * `npm start` / `ctl start`: the policy authority and the gateway together on
 * embedded SQLite. Development keys are made on first start and kept in ./data (the admin keys
 * and one budget-owner key in ./data/dev-keys.json, mode 0600; the signing keys inside each
 * service's database, sealed under a development KEK in ./data/authority.kek and
 * ./data/gateway.kek, mode 0600), then it prints how to create a session. Development only: the
 * KEKs sit beside the databases, so ./data as a whole is as secret as the keys.
 *
 * Each service reads its configuration through the very reader of `ctl authority` and
 * `ctl gateway` (readAuthorityConfig, readGatewayConfig), so every variable they honour is
 * honoured here; start only supplies its defaults (ports, data files, dev keys) where unset.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { guard, one, parseArgs, UsageError } from './device/args.js';
import { startDemoMerchant, type DemoMerchant } from './demo/merchant.js';
import type { ChainDemo } from './demo/chain-step.js';
import { formatMinor } from './demo/money.js';
import {
  holdSignalsWhileStarting,
  preflight,
  runUntilSignal,
  startFailure,
  warnUnknownVariables,
} from './service/lifecycle.js';
import { urlHost } from '../service-kit/config.js';

const USAGE = `usage: ctl start [--data <dir>] [--no-demo-merchant] [--chain]

Runs the policy authority (AUTHORITY_PORT, default 8700; AUTHORITY_DATABASE_URL) and the gateway
(PORT, default 8402; GATEWAY_DATABASE_URL) on SQLite files in <dir> (default ./data), with
development keys made on first start, the gateway's egress proxy (CTL_GATEWAY_EGRESS_PORT, default
PORT + 1, 0 when PORT is 0; set it empty to turn it off; not by default under NODE_ENV=production),
and a demo merchant to pay (DEMO_MERCHANT_PORT, default any free port; 1.00 USD a search; also over
HTTPS on a free port, under a development CA the gateway trusts; not started with --no-demo-merchant
or NODE_ENV=production). With --chain (development only), a local EVM node beside them: anvil, from
the devDependency @foundry-rs/anvil, as chain 84532 with USDC (EIP-3009), Permit2 and x402's upto
proxy, and stock x402 merchants whose stock facilitator settles on it; the gateway pays them in
USDC from an account funded there (CTL_X402_ASSETS and CTL_X402_RPC_URL default to that node).
Every other variable of \`ctl authority --help\` and \`ctl gateway --help\`
applies as it does there. Logs are JSON lines on stdout (LOG_LEVEL, default info); the how-to is
printed on stderr. SIGTERM or SIGINT stops both: requests in flight finish (at most 10 s), then it
exits 0.`;

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
  // The gateway trusts the people enrolled at the authority it starts beside (PROTOCOL.md §10): its
  // grants' revocation URLs carry the authority's base. The gateway reaches a trusted authority on
  // loopback through its own exception, never opened to agents' /proxy (gateway/app.ts).
  const authorityPort = env.AUTHORITY_PORT || '8700';
  const host = env.HOST?.trim() || '127.0.0.1';
  const authorityBase = (env.CTL_REVOCATION_BASE_URL || `http://${urlHost(host)}:${authorityPort}`).replace(/\/+$/, '');
  // The egress proxy beside the gateway, so an unmodified agent can be tried (gateway/README.md
  // "Egress proxy"): PORT + 1, or any free port when PORT is; set empty, off; opt-in in production.
  const port = env.PORT || '8402';
  const egressPort =
    env.CTL_GATEWAY_EGRESS_PORT ??
    (env.NODE_ENV === 'production' || !/^[0-9]{1,5}$/.test(port)
      ? undefined
      : port === '0'
        ? '0'
        : String(Math.min(65535, Number(port) + 1)));
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
      CTL_GATEWAY_HUMAN_AUTHORITIES: env.CTL_GATEWAY_HUMAN_AUTHORITIES || authorityBase,
      ...(egressPort !== undefined ? { CTL_GATEWAY_EGRESS_PORT: egressPort } : {}),
    },
  };
}

function devKeys(dataDir: string): { keys: DevKeys; file: string } {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'dev-keys.json');
  if (existsSync(file)) return { keys: JSON.parse(readFileSync(file, 'utf8')) as DevKeys, file };
  const keys = {
    authorityAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}`,
    gatewayAdminKey: `dev-admin-${randomBytes(24).toString('base64url')}`,
  };
  writeFileSync(file, JSON.stringify(keys, null, 2), { mode: 0o600 });
  return { keys, file };
}

export async function main(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) return (console.log(USAGE), 0);
  return guard(USAGE, async () => {
    const p = parseArgs(args, { values: ['data'], flags: ['no-demo-merchant', 'chain'] });
    if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
    holdSignalsWhileStarting();
    // The services' modules load only to run them: --help and a usage error answer without them,
    // and a refused configuration is read before the servers load.
    const [{ readAuthorityConfig }, { AUTHORITY_VARIABLES }, { readGatewayConfig }, { GATEWAY_VARIABLES }] =
      await Promise.all([
        import('../authority/config.js'),
        import('../authority/variables.js'),
        import('../gateway/config.js'),
        import('../gateway/variables.js'),
      ]);
    const names = (list: readonly (readonly [string, ...unknown[]])[]) => list.map((v) => v[0]);
    const dataDir = resolve(one(p, 'data') ?? './data');
    const { keys, file: keysFile } = devKeys(dataDir);
    const env = startEnvironments(process.env, dataDir, keys);
    let authorityConfig, gatewayOptions;
    try {
      // One environment for both: each service's variables are known to the other.
      authorityConfig = readAuthorityConfig(env.authority, { alsoKnown: names(GATEWAY_VARIABLES) });
    } catch (e) {
      // The reader names PORT / DATABASE_URL; under start the authority's are AUTHORITY_*.
      console.error(`ctl start: ${(e as Error).message.replace(/^(PORT|DATABASE_URL)\b/, 'AUTHORITY_$1')}`);
      return 2;
    }
    try {
      gatewayOptions = readGatewayConfig(env.gateway, { alsoKnown: names(AUTHORITY_VARIABLES) });
    } catch (e) {
      console.error(`ctl start: ${(e as Error).message.replace(/^DATABASE_URL\b/, 'GATEWAY_DATABASE_URL')}`);
      return 2;
    }
    const refused =
      (await preflight('ctl start', authorityConfig.databaseUrl, 'AUTHORITY_DATABASE_URL')) ??
      (await preflight('ctl start', gatewayOptions.databaseUrl, 'GATEWAY_DATABASE_URL'));
    if (refused !== undefined) return refused;
    const [{ startAuthority }, { createLogger }, { startGateway }, { demoMerchantTls, trustedWith }] =
      await Promise.all([
        import('../authority/server.js'),
        import('../service-kit/logger.js'),
        import('../gateway/server.js'),
        import('../gateway/dev/demo-tls.js'),
      ]);
    let chain: ChainDemo | undefined;
    if (p.flags.has('chain')) {
      if (process.env.NODE_ENV === 'production') {
        console.error('ctl start: --chain runs a local development node; not under NODE_ENV=production');
        return 2;
      }
      try {
        chain = await (await import('./demo/chain-step.js')).startChainDemo();
        // The node's asset map and reader, unless the operator set their own.
        for (const [k, v] of Object.entries(chain.env)) if (!env.gateway[k]) env.gateway[k] = v;
        gatewayOptions = readGatewayConfig(env.gateway, { alsoKnown: names(AUTHORITY_VARIABLES) });
      } catch (e) {
        await chain?.close();
        return startFailure('ctl start', e);
      }
    }
    // The demo merchant first: the gateway must be let through to its exact host:port.
    const demoPort = process.env.DEMO_MERCHANT_PORT?.trim() || '0';
    if (!/^[0-9]{1,5}$/.test(demoPort) || Number(demoPort) > 65535) {
      console.error(`ctl start: DEMO_MERCHANT_PORT: expected 0–65535, got '${demoPort}'`);
      await chain?.close();
      return 2;
    }
    const withDemo = !p.flags.has('no-demo-merchant') && process.env.NODE_ENV !== 'production';
    let merchant: DemoMerchant | undefined;
    if (withDemo) {
      try {
        const tls = await demoMerchantTls('127.0.0.1', Date.now());
        merchant = await startDemoMerchant({ port: Number(demoPort), tls });
        // Its HTTPS is under a development CA: the gateway trusts it beside the usual roots.
        gatewayOptions.upstreamCa = trustedWith(tls.caPem, process.env);
      } catch (e) {
        await chain?.close();
        return startFailure('ctl start', e);
      }
    }
    const demoHosts = [...(merchant ? [merchant.hostPort, merchant.httpsHostPort!] : []), ...(chain?.hostPorts ?? [])];
    if (demoHosts.length)
      gatewayOptions.targets = {
        allowPrivate: gatewayOptions.targets?.allowPrivate ?? false,
        allowHosts: [...(gatewayOptions.targets?.allowHosts ?? []), ...demoHosts],
      };
    let authority, gateway;
    try {
      authority = await startAuthority(authorityConfig, {
        logger: createLogger({ name: 'ctl-authority', level: authorityConfig.logLevel }),
      });
    } catch (e) {
      await merchant?.close();
      await chain?.close();
      return startFailure('ctl start', e);
    }
    try {
      gateway = await startGateway(gatewayOptions);
      // The gateway's paying account holds 100 USDC on the node, and has approved Permit2 (upto).
      await chain?.fund(gateway.gateway.evmAddress, 100_000_000n);
    } catch (e) {
      await gateway?.close();
      await authority.close();
      await merchant?.close();
      await chain?.close();
      return startFailure('ctl start', e);
    }
    // Each reader knows both lists, so both find the same stray CTL_* variables: said once, for both.
    warnUnknownVariables(
      authority.logger,
      authorityConfig.warnings.map((w) => ({
        ...w,
        message: w.message.replace('the authority', 'the authority or the gateway'),
      })),
    );
    if (merchant)
      createLogger({ name: 'ctl-demo-merchant', level: authorityConfig.logLevel }).info(
        { url: merchant.url, httpsUrl: merchant.httpsUrl, demo: true },
        'demo merchant (development only, not started in production)',
      );
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
    printHowTo(authority.url, gw, gateway.egress?.url, keysFile, dataDir, keys.ownerKey, merchant, chain);
    const running = { authority, gateway };
    return runUntilSignal(authority.logger, async () => {
      // Both drain at once: the 10 s bound holds for the pair, not for each in turn.
      await Promise.all([running.gateway.close(), running.authority.close(), merchant?.close()]);
      await chain?.close();
    });
  });
}

/**
 * The how-to goes to stderr: stdout carries only the JSON log lines. The example is a shell
 * snippet that runs as printed (curl and node), paying the demo merchant when it runs.
 */
function printHowTo(
  authorityUrl: string,
  gw: string,
  egress: string | undefined,
  keysFile: string,
  dataDir: string,
  ownerKey: string,
  merchant: DemoMerchant | undefined,
  chain?: ChainDemo,
): void {
  const expires = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
  const target = merchant ? `${merchant.url}/search?q=ctl` : 'https://merchant.example/data';
  const sessionBody = JSON.stringify({
    budget: { amount: '5000', currency: 'USD' },
    purposes: ['api:search'],
    defaultPurpose: 'api:search',
    expiresAt: expires,
    softLimit: { amount: '1000' },
  });
  const caFile = join(dataDir, 'gateway-ca.pem');
  const httpsTarget = merchant?.httpsUrl ? `${merchant.httpsUrl}/search?q=ctl` : 'https://merchant.example/data';
  // Three curl lines: the egress CA (once), a request as an unmodified agent sends it, the receipts.
  const egressHowTo = egress
    ? `
Or as an agent that only knows HTTPS_PROXY (the same session; no X-Ctl-Purpose: its defaultPurpose):
  curl -s -o ${caFile} ${gw}/ca.pem -H 'authorization: Bearer ${ownerKey}'
  curl -s -i -w '\\n' --proxy ${egress} --proxy-user "agent:$TOKEN" --cacert ${caFile} '${httpsTarget}'
  curl -s -w '\\n' ${gw}/session/receipts -H "authorization: Bearer $TOKEN"
`
    : '';
  const chainSession = JSON.stringify({
    budget: { amount: '100000', currency: 'USDC' },
    purposes: ['api:search', 'api:meter'],
    expiresAt: expires,
  });
  const rpcCall = (method: string, params: string) =>
    `curl -s -w '\\n' ${chain?.rpcUrl} -H 'content-type: application/json' ` +
    `-d '{"jsonrpc":"2.0","id":1,"method":"${method}","params":${params}}'`;
  const chainHowTo = chain
    ? `
Pay on the EVM node (--chain): a USDC session; the merchant's facilitator settles on ${chain.network}:
  CTOKEN=$(curl -s -X POST ${gw}/sessions \\
    -H 'authorization: Bearer ${ownerKey}' -H 'content-type: application/json' \\
    -d '${chainSession}' \\
    | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).sessionToken')
  curl -s -i -w '\\n' ${gw}/proxy -H "authorization: Bearer $CTOKEN" \\
    -H 'x-target-url: ${chain.merchantUrl}/data?q=ctl' -H 'x-ctl-purpose: api:search'
  curl -s -w '\\n' ${gw}/proxy -H "authorization: Bearer $CTOKEN" \\
    -H 'x-target-url: ${chain.uptoUrl}/metered?units=12' -H 'x-ctl-purpose: api:meter'
  curl -s -w '\\n' ${gw}/session/receipts -H "authorization: Bearer $CTOKEN"

Each receipt's txRef is a transaction on the node: ${rpcCall('eth_getTransactionReceipt', '["<0x…>"]')}
`
    : '';
  console.error(`CTL is running.
  policy authority  ${authorityUrl}   (admin key in ${keysFile})
  payment gateway   ${gw}   (data in ${dataDir})
  owner console     ${gw}/console   (sign in with the owner key: ${ownerKey})
${egress ? `  egress proxy      ${egress}   (HTTP(S)_PROXY for agents; they trust ${gw}/ca.pem)\n` : ''}${
    merchant
      ? `  demo merchant     ${merchant.url}   (DEMO, development only: ` +
        `${formatMinor(merchant.price, 'USD')} a search; ` +
        `off with --no-demo-merchant or NODE_ENV=production)\n` +
        `                    ${merchant.httpsUrl}   (the same over HTTPS, under a development CA the gateway trusts)\n`
      : ''
  }${
    chain
      ? `  EVM node          ${chain.rpcUrl}   (anvil, ${chain.network}, development only; USDC ${chain.usdc})\n` +
        `  x402 merchants    ${chain.merchantUrl}/data   (exact, 0.01 USDC) and ${chain.uptoUrl}/metered   ` +
        `(upto, at most 0.05 USDC); their facilitator settles on the node\n`
      : ''
  }
Pay the ${merchant ? 'demo merchant' : 'merchant'} through a session (paste into a shell):
  TOKEN=$(curl -s -X POST ${gw}/sessions \\
    -H 'authorization: Bearer ${ownerKey}' -H 'content-type: application/json' \\
    -d '${sessionBody}' \\
    | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).sessionToken')
  curl -s -i -w '\\n' ${gw}/proxy -H "authorization: Bearer $TOKEN" \\
    -H 'x-target-url: ${target}' -H 'x-ctl-purpose: api:search'
  curl -s -w '\\n' ${gw}/session/receipts -H "authorization: Bearer $TOKEN"
${egressHowTo}${chainHowTo}
The budget owner's view: GET ${gw}/sessions/<sessionId>/receipts, or the console;
revoke: DELETE ${gw}/sessions/<sessionId>
(private targets are refused; set CTL_GATEWAY_ALLOW_TARGETS=127.0.0.1:<port> to try another merchant on this machine)
Ctrl-C stops ${merchant ? 'all three' : 'both'}.`);
}
