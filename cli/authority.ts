/**
 * `ctl authority` runs the policy authority; `ctl authority root-key` prints the public half of
 * the Trust Bundle root key as PEM, for provisioning devices. Both read the same
 * environment (PORT, DATABASE_URL, CTL_* of spec §4.3) through authority/config.ts.
 */
import { readAuthorityConfig } from '../authority/config.js';
import { createKeyRing } from '../authority/keys.js';
import { openAuthorityKek, openAuthoritySigners } from '../authority/signers.js';
import { startAuthority } from '../authority/server.js';
import { openAuthorityStore } from '../authority/store/open.js';
import { createLogger } from '../service-kit/index.js';
import { guard, parseArgs, UsageError } from './device/args.js';
import { preflight, runUntilSignal, startFailure, warnNoAdminKey } from './service/lifecycle.js';

const usage = (program: string) => `usage: ${program} [root-key]

  (no argument)  run the policy authority (PORT, default 8700; DATABASE_URL, default sqlite:./data/authority.db);
                 SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s), then it exits 0
  root-key       print the Trust Bundle root public key (PEM) for device provisioning

rate limits (N/Ss, 0 for none): CTL_AUTHORITY_RATE_LIMIT_KEY (6000/60s per API key, shared on PostgreSQL),
  CTL_AUTHORITY_RATE_LIMIT_ADDRESS (60000/60s per client address, per instance)

environment: CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM (or _KEY_PKCS11_URI, _PRIVATE_KEY_FILE), CTL_POLICY_GRANT_SIGNING_KEY_ID,
  CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI, CTL_PKCS11_MODULE, CTL_ISSUER_DOMAIN,
  CTL_REVOCATION_BASE_URL, CTL_ADMIN_API_KEY, CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM,
  CTL_AUDIT_WEBHOOK_URLS + CTL_AUDIT_WEBHOOK_SECRET (whsec_<base64>), CTL_ANCHOR_LOCAL_PATH, LOG_LEVEL (info)`;

const rootKeyUsage = (program: string) => `usage: ${program} root-key

  print the Trust Bundle root public key (PEM) on stdout, logs on stderr
  (reads DATABASE_URL and CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM like ${program})`;

/** `program`: the name it was run by, for usage and errors (`ctl authority`, or the package's `ctl-authority`). */
export async function main(args: string[], program = 'ctl authority'): Promise<number> {
  const help = args.includes('--help') || args.includes('-h');
  const sub = args.find((a) => !a.startsWith('-'));
  const USAGE = sub === 'root-key' ? rootKeyUsage(program) : usage(program);
  if (help) return console.log(USAGE), 0;
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length > 1 || (sub !== undefined && sub !== 'root-key')) throw new UsageError(`unknown subcommand ${p.positionals.join(' ')}`);
    let config;
    try {
      config = readAuthorityConfig(process.env);
    } catch (e) {
      console.error(`${program}: ${(e as Error).message}`);
      return 2;
    }
    const refused = await preflight(program, config.databaseUrl);
    if (refused !== undefined) return refused;
    if (sub === 'root-key') return printRootKey(config, program);
    let authority;
    try {
      authority = await startAuthority(config);
    } catch (e) {
      return startFailure(program, e);
    }
    if (!config.adminApiKey) warnNoAdminKey(authority.logger, 'CTL_ADMIN_API_KEY', 'no API key can be created (POST /admin/keys)');
    return runUntilSignal(authority.logger, () => authority.close());
  });
}

async function printRootKey(config: ReturnType<typeof readAuthorityConfig>, program: string): Promise<number> {
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
    const keys = createKeyRing({ store, logger, now: Date.now, rootSigner: signers.root, grantSigner: signers.grant,
      grantSigningKeyId: config.grantSigningKeyId, sealer: kek.sealer,
      rootPrivateKeyOptional: (await store.listRootStatements()).length > 0 });
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
