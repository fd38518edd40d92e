/**
 * `ctl gateway` / `npm run gateway`: the payment gateway from the environment (gateway/server.ts).
 */
import { guard, one, parseArgs, readText, required, UsageError, writeAtomic } from './device/args.js';
import { anchorVariables, packageVersion, variableLines, webhookVariables, type VariableHelp } from './service/help.js';
import { preflight, runUntilSignal, startFailure, warnNoAdminKey } from './service/lifecycle.js';

/** Every variable the gateway reads (gateway/README.md "Configuration" lists the same, with the same defaults). */
const VARIABLES: VariableHelp[] = [
  ['PORT', '8402', 'where it listens'],
  ['HOST', '127.0.0.1', 'the address it listens on'],
  ['DATABASE_URL', 'sqlite:./data/gateway.db', 'or postgres://user@host:port/database (instances may share one)'],
  ['LOG_LEVEL', 'info', 'trace, debug, info, warn, error, fatal or silent'],
  [
    'CTL_GATEWAY_ADMIN_KEY',
    undefined,
    'bootstrap key (>= 16 characters): POST /admin/owners { label } -> { ownerId, keyId, apiKey }',
  ],
  ['CTL_GATEWAY_PUBLIC_URL', 'the listen address', 'http(s) base URL written into grants and responses'],
  ['CTL_GATEWAY_ISSUER', 'ctl-gateway', "issuer of the gateway's grants, receipts and Trust Bundle"],
  ['CTL_GATEWAY_ALLOW_PRIVATE_TARGETS', '0', '1: let /proxy reach private addresses (tests, private deployments)'],
  ['CTL_GATEWAY_ALLOW_TARGETS', undefined, 'host:port,... exact private targets to allow ([::1]:8080 for IPv6)'],
  ['CTL_GATEWAY_HUMAN_AUTHORITIES', undefined, "url,... authorities whose people's grants may back sessions"],
  ['CTL_X402_ASSETS', undefined, 'x402: {"USDC":[{"network":"eip155:84532","asset":"0x..."}]}, currency -> assets'],
  ['CTL_X402_MAX_TIMEOUT_SECONDS', '600', 'x402: longest validity signed for an authorization'],
  ['CTL_X402_MAX_HOLD_SECONDS', '600', "x402: longest one payment may hold a session's budget"],
  [
    'CTL_X402_RPC_URL',
    undefined,
    'x402: {"eip155:84532":"https://..."}, JSON-RPC per network to settle expired authorizations',
  ],
  [
    'CTL_GATEWAY_EVM_PRIVATE_KEY',
    undefined,
    'x402: 0x + 64 hex digits, the paying account (default: made and kept sealed)',
  ],
  [
    'CTL_GATEWAY_KEK',
    undefined,
    '32 bytes (base64url or hex) sealing the keys and secrets kept in the database (unset: a dev KEK file beside it)',
  ],
  ['CTL_GATEWAY_KEK_PKCS11_URI', undefined, 'the KEK as an AES key in a PKCS#11 token instead'],
  [
    'CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI',
    undefined,
    'the receipt key in an HSM (RFC 7512); or _PRIVATE_KEY_FILE / _PRIVATE_KEY_PEM below',
  ],
  ['CTL_GATEWAY_RECEIPT_PRIVATE_KEY_FILE', undefined, 'the receipt key as a PEM file (mode 0600)'],
  ['CTL_GATEWAY_RECEIPT_PRIVATE_KEY_PEM', undefined, 'the receipt key as PEM text'],
  ['CTL_GATEWAY_GRANT_KEY_PKCS11_URI', undefined, 'the internal grant key in an HSM'],
  ['CTL_GATEWAY_GRANT_PRIVATE_KEY_FILE', undefined, 'the internal grant key as a PEM file'],
  ['CTL_GATEWAY_GRANT_PRIVATE_KEY_PEM', undefined, 'the internal grant key as PEM text'],
  ['CTL_GATEWAY_BUNDLE_KEY_PKCS11_URI', undefined, 'the Trust Bundle root key in an HSM'],
  ['CTL_GATEWAY_BUNDLE_PRIVATE_KEY_FILE', undefined, 'the Trust Bundle root key as a PEM file'],
  ['CTL_GATEWAY_BUNDLE_PRIVATE_KEY_PEM', undefined, 'the Trust Bundle root key as PEM text'],
  ['CTL_PKCS11_MODULE', '/usr/lib/softhsm/libsofthsm2.so', 'the PKCS#11 library of the HSM'],
  ['CTL_GATEWAY_RATE_LIMIT_OWNER', '6000/60s', 'owner API requests per budget owner, all its keys together; 0: none'],
  ['CTL_GATEWAY_RATE_LIMIT_SESSION', '1200/60s', 'agent requests per session (/proxy); 0: none'],
  ['CTL_GATEWAY_RATE_LIMIT_CHARGE', '1200/60s', 'POST /charge per client address; 0: none'],
  ['CTL_GATEWAY_MAX_SESSION_SECONDS', '2592000', 'longest session: expiresAt at most this far ahead (30 days)'],
  ['CTL_GATEWAY_EGRESS_PORT', undefined, "the egress proxy's port (HTTP(S)_PROXY for agents); unset: off"],
  ['CTL_GATEWAY_EGRESS_HOST', 'HOST', 'the address the egress proxy listens on'],
  ['CTL_GATEWAY_EGRESS_PASS_THROUGH', undefined, 'glob,... hosts the egress proxy tunnels untouched (nothing paid)'],
  ['CTL_GATEWAY_EGRESS_CONNECT_LIMIT', '120/60s', 'CONNECTs per session to the egress proxy; 0: none'],
  ...webhookVariables('session webhooks'),
  ...anchorVariables('the audit chain head'),
];

const usage = (program: string) => `usage: ${program}            run the payment gateway
       ${program} ca [--url URL] --key-file FILE [--out FILE]
                  the egress proxy's CA certificate (PEM) for agents to trust, from GET /ca.pem
                  with a budget owner's API key; --url default http://127.0.0.1:8402
       ${program} --help     this text
       ${program} --version  the version

SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s), then it exits 0.
A variable set wrongly refuses the start with its name (exit 2).

environment:
${variableLines(VARIABLES)}`;

/** `program`: the name it was run by, for usage and errors (`ctl gateway`, or the package's `ctl-gateway`). */
export async function main(args: string[], program = 'ctl gateway'): Promise<number> {
  const USAGE = usage(program);
  if (args.includes('--help') || args.includes('-h')) return (console.log(USAGE), 0);
  if (args.includes('--version') || args.includes('-V')) return (console.log(packageVersion(import.meta.url)), 0);
  if (args[0] === 'ca') return guard(USAGE, () => printCa(program, args.slice(1)));
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
    // The service's modules load only to run it: --help, --version and a usage error answer without them.
    const { gatewayOptionsFromEnv, startGateway } = await import('../gateway/server.js');
    let options;
    try {
      options = gatewayOptionsFromEnv(process.env);
    } catch (e) {
      console.error(`${program}: ${(e as Error).message}`);
      return 2;
    }
    const refused = await preflight(program, options.databaseUrl);
    if (refused !== undefined) return refused;
    let running;
    try {
      running = await startGateway(options);
    } catch (e) {
      return startFailure(program, e);
    }
    if (!options.adminKey)
      warnNoAdminKey(running.logger, 'CTL_GATEWAY_ADMIN_KEY', 'no budget owner can be created (POST /admin/owners)');
    return runUntilSignal(running.logger, () => running.close());
  });
}

/**
 * `ctl gateway ca`: the egress CA certificate from a running gateway (GET /ca.pem), printed or
 * written to --out. The owner key comes from a file so it stays out of the process list.
 */
async function printCa(program: string, args: string[]): Promise<number> {
  const p = parseArgs(args, { values: ['url', 'key-file', 'out'] });
  if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
  const base = (one(p, 'url') ?? 'http://127.0.0.1:8402').replace(/\/+$/, '');
  const key = readText(required(p, 'key-file'), 'the owner key').trim();
  let res: Response;
  try {
    res = await fetch(`${base}/ca.pem`, { headers: { authorization: `Bearer ${key}` } });
  } catch (e) {
    console.error(`${program} ca: ${base} cannot be reached: ${(e as Error & { cause?: Error }).cause?.message ?? e}`);
    return 1;
  }
  const text = await res.text();
  if (res.status !== 200) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error: { message: string } }).error.message;
    } catch {}
    console.error(`${program} ca: ${res.status} ${message}`);
    return 1;
  }
  const out = one(p, 'out');
  if (out) {
    writeAtomic(out, text);
    console.error(`wrote ${out} (SHA-256 ${res.headers.get('x-ctl-ca-fingerprint') ?? '?'})`);
  } else process.stdout.write(text);
  return 0;
}
