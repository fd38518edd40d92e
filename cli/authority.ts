/**
 * `ctl authority` runs the policy authority; `ctl authority root-key` prints the public half of
 * the Trust Bundle root key as PEM, for provisioning devices. Both read the same
 * environment (PORT, DATABASE_URL, CTL_* of spec §4.3) through authority/config.ts.
 */
import { guard, parseArgs, UsageError } from './device/args.js';
import { packageVersion, variableLines } from './service/help.js';
import { readAuthorityConfig } from '../authority/config.js';
import { AUTHORITY_VARIABLES } from '../authority/variables.js';
import {
  holdSignalsWhileStarting,
  preflight,
  runUntilSignal,
  startFailure,
  warnNoAdminKey,
  warnUnknownVariables,
} from './service/lifecycle.js';
import { backupCommand, backupUsage } from './service/backup.js';

const DEFAULT_DB = 'sqlite:./data/authority.db';

const usage = (program: string) => `usage: ${program}             run the policy authority
       ${program} root-key    print the Trust Bundle root public key (PEM) for device provisioning
       ${program} backup --out FILE
                    an online backup of DATABASE_URL (docs/operations.md "Backups")
       ${program} --help      this text
       ${program} --version   the version

SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s), then it exits 0.
A variable set wrongly refuses the start with its name (exit 2).

environment:
${variableLines(AUTHORITY_VARIABLES)}`;

const rootKeyUsage = (program: string) => `usage: ${program} root-key

  print the Trust Bundle root public key (PEM) on stdout, logs on stderr
  (reads DATABASE_URL and CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM like ${program})`;

/** `program`: the name it was run by, for usage and errors (`ctl authority`, or the package's `ctl-authority`). */
export async function main(args: string[], program = 'ctl authority'): Promise<number> {
  const help = args.includes('--help') || args.includes('-h');
  const sub = args.find((a) => !a.startsWith('-'));
  const USAGE = sub === 'root-key' ? rootKeyUsage(program) : usage(program);
  if (help) return (console.log(sub === 'backup' ? backupUsage(program, DEFAULT_DB) : USAGE), 0);
  if (sub === 'backup') {
    const rest = args.filter((a) => a !== 'backup');
    return guard(backupUsage(program, DEFAULT_DB), () => backupCommand(program, rest, DEFAULT_DB));
  }
  if (args.includes('--version') || args.includes('-V')) return (console.log(packageVersion(import.meta.url)), 0);
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length > 1 || (sub !== undefined && sub !== 'root-key'))
      throw new UsageError(`unknown subcommand ${p.positionals.join(' ')}`);
    // The service's modules load only to run it: --help, --version and a usage error answer without them.
    const { GATEWAY_VARIABLES } = await import('../gateway/variables.js');
    let config;
    try {
      // The gateway's variables may share the environment: they are not misspellings here.
      config = readAuthorityConfig(process.env, { alsoKnown: GATEWAY_VARIABLES.map((v) => v[0]) });
    } catch (e) {
      console.error(`${program}: ${(e as Error).message}`);
      return 2;
    }
    const refused = await preflight(program, config.databaseUrl);
    if (refused !== undefined) return refused;
    if (sub === 'root-key') return printRootKey(config, program);
    holdSignalsWhileStarting();
    const { startAuthority } = await import('../authority/server.js');
    let authority;
    try {
      authority = await startAuthority(config);
    } catch (e) {
      return startFailure(program, e);
    }
    warnUnknownVariables(authority.logger, config.warnings);
    if (!config.adminApiKey)
      warnNoAdminKey(authority.logger, 'CTL_ADMIN_API_KEY', 'no API key can be created (POST /admin/keys)');
    return runUntilSignal(authority.logger, () => authority.close());
  });
}

async function printRootKey(config: ReturnType<typeof readAuthorityConfig>, program: string): Promise<number> {
  const [{ createLogger }, { openAuthorityKek, openAuthoritySigners }, { openAuthorityStore }, { createKeyRing }] =
    await Promise.all([
      import('../service-kit/index.js'),
      import('../authority/signers.js'),
      import('../authority/store/open.js'),
      import('../authority/keys.js'),
    ]);
  // Logs go to stderr so stdout is exactly the PEM (`ctl authority root-key > root.pem`).
  const logger = createLogger({ name: 'ctl-authority', level: config.logLevel, destination: process.stderr });
  let signers;
  try {
    signers = await openAuthoritySigners(config);
  } catch (e) {
    console.error(`${program}: ${(e as Error).message}`);
    return 2;
  }
  let kek;
  try {
    kek = await openAuthorityKek(config);
  } catch (e) {
    await signers.close();
    console.error(`${program}: ${(e as Error).message}`);
    return 2;
  }
  const store = await openAuthorityStore(config.databaseUrl);
  try {
    const keys = createKeyRing({
      store,
      logger,
      now: Date.now,
      rootSigner: signers.root,
      grantSigner: signers.grant,
      grantSigningKeyId: config.grantSigningKeyId,
      sealer: kek.sealer,
      rootPrivateKeyOptional: (await store.listRootStatements()).length > 0,
    });
    await keys.init();
    // The pinned version-1 root, whatever version the chain is at (PROTOCOL.md §11: devices keep their pin).
    process.stdout.write((await store.activeSigningKey('bundle'))!.publicPem);
  } finally {
    await store.close();
    await signers.close();
    await kek.close();
  }
  return 0;
}
