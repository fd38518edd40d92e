/**
 * `ctl gateway` / `npm run gateway`: the payment gateway from the environment (gateway/server.ts).
 */
import { guard, one, parseArgs, readText, required, UsageError, writeAtomic } from './device/args.js';
import { packageVersion, variableLines } from './service/help.js';
import { GATEWAY_VARIABLES } from '../gateway/variables.js';
import {
  holdSignalsWhileStarting,
  preflight,
  runUntilSignal,
  startFailure,
  warnNoAdminKey,
  warnUnknownVariables,
} from './service/lifecycle.js';
import { backupCommand, backupUsage } from './service/backup.js';

const DEFAULT_DB = 'sqlite:./data/gateway.db';

const usage = (program: string) => `usage: ${program}            run the payment gateway
       ${program} backup --out FILE
                  an online backup of DATABASE_URL (docs/operations.md "Backups")
       ${program} ca [--url URL] --key-file FILE [--out FILE]
                  the egress proxy's CA certificate (PEM) for agents to trust, from GET /ca.pem
                  with a budget owner's API key; --url default http://127.0.0.1:8402
       ${program} --help     this text
       ${program} --version  the version

SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s), then it exits 0.
A variable set wrongly refuses the start with its name (exit 2).

environment:
${variableLines(GATEWAY_VARIABLES)}`;

/** `program`: the name it was run by, for usage and errors (`ctl gateway`, or the package's `ctl-gateway`). */
export async function main(args: string[], program = 'ctl gateway'): Promise<number> {
  const USAGE = usage(program);
  if (args.includes('--help') || args.includes('-h')) return (console.log(USAGE), 0);
  if (args.includes('--version') || args.includes('-V')) return (console.log(packageVersion(import.meta.url)), 0);
  if (args[0] === 'ca') return guard(USAGE, () => printCa(program, args.slice(1)));
  if (args[0] === 'backup')
    return guard(backupUsage(program, DEFAULT_DB), () => backupCommand(program, args.slice(1), DEFAULT_DB));
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
    holdSignalsWhileStarting();
    // The service's modules load only to run it: --help, --version and a usage error answer without them.
    // The configuration is read before the server's modules load: a refused start stays quick.
    const [{ readGatewayConfig }, { AUTHORITY_VARIABLES }] = await Promise.all([
      import('../gateway/config.js'),
      import('../authority/variables.js'),
    ]);
    let options;
    try {
      // The authority's variables may share the environment: they are not misspellings here.
      options = readGatewayConfig(process.env, { alsoKnown: AUTHORITY_VARIABLES.map((v) => v[0]) });
    } catch (e) {
      console.error(`${program}: ${(e as Error).message}`);
      return 2;
    }
    const refused = await preflight(program, options.databaseUrl);
    if (refused !== undefined) return refused;
    const { startGateway } = await import('../gateway/server.js');
    let running;
    try {
      running = await startGateway(options);
    } catch (e) {
      return startFailure(program, e);
    }
    warnUnknownVariables(running.logger, options.warnings);
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
