/**
 * `ctl authority` runs the policy authority; `ctl authority root-key` prints the public half of
 * the Trust Bundle root key as PEM, for provisioning devices. Both read the same
 * environment (PORT, DATABASE_URL, CTL_* of spec §4.3) through authority/config.ts.
 */
import type { readAuthorityConfig } from '../authority/config.js';
import { guard, parseArgs, UsageError } from './device/args.js';
import { packageVersion, variableLines, webhookVariables, anchorVariables, type VariableHelp } from './service/help.js';
import { preflight, runUntilSignal, startFailure, warnNoAdminKey } from './service/lifecycle.js';

/** Every variable the authority reads (authority/README.md "Configuration" lists the same, with the same defaults). */
const VARIABLES: VariableHelp[] = [
  ['PORT', '8700', 'where it listens'],
  ['HOST', '127.0.0.1', 'the address it listens on'],
  ['DATABASE_URL', 'sqlite:./data/authority.db', 'or postgres://user@host:port/database (instances may share one)'],
  ['LOG_LEVEL', 'info', 'trace, debug, info, warn, error, fatal or silent'],
  ['CTL_ISSUER_DOMAIN', 'localhost', 'issuer of grants and bundles'],
  [
    'CTL_REVOCATION_BASE_URL',
    'http://HOST:PORT',
    'http(s) base of the revocation URL grants carry: <base>/revoke?grantId=...',
  ],
  ['CTL_ADMIN_API_KEY', undefined, 'bootstrap key with the admin scope (>= 16 characters)'],
  [
    'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM',
    undefined,
    "this instance's grant key (default: generated, stored sealed)",
  ],
  ['CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_FILE', undefined, 'the grant key as a PEM file (mode 0600)'],
  ['CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI', undefined, 'the grant key in an HSM (RFC 7512)'],
  ['CTL_POLICY_GRANT_SIGNING_KEY_ID', undefined, "the grant key's kid (default: its RFC 7638 thumbprint)"],
  [
    'CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM',
    undefined,
    'the root key that signs bundles (default: generated, stored sealed)',
  ],
  ['CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_FILE', undefined, 'the root key as a PEM file (mode 0600)'],
  ['CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI', undefined, 'the root key in an HSM'],
  [
    'CTL_TRUST_BUNDLE_SIGNING_KEY_PEM',
    undefined,
    'the bundle key that signs bundles once the root is rotated (ctl root rotate)',
  ],
  ['CTL_TRUST_BUNDLE_SIGNING_KEY_FILE', undefined, 'the bundle key as a PEM file'],
  ['CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI', undefined, 'the bundle key in an HSM'],
  ['CTL_PKCS11_MODULE', '/usr/lib/softhsm/libsofthsm2.so', 'the PKCS#11 library of the HSM'],
  [
    'CTL_AUTHORITY_KEK',
    undefined,
    '32 bytes (base64url or hex) sealing the stored private keys (unset: a dev KEK file beside the database)',
  ],
  ['CTL_AUTHORITY_KEK_PKCS11_URI', undefined, 'the KEK as an AES key in a PKCS#11 token instead'],
  ['CTL_AUDIT_WEBHOOK_URLS', undefined, 'comma-separated URLs the audit entries are pushed to (Standard Webhooks)'],
  ['CTL_AUDIT_WEBHOOK_SECRET', undefined, 'whsec_<base64>, signs them (required with the URLs)'],
  ...webhookVariables('audit webhooks'),
  ...anchorVariables('the audit chain head', true),
  ['CTL_AUTHORITY_RATE_LIMIT_KEY', '6000/60s', 'requests per API key, shared on PostgreSQL; 0: none'],
  ['CTL_AUTHORITY_RATE_LIMIT_ADDRESS', '60000/60s', 'requests per client address, per instance; 0: none'],
];

const usage = (program: string) => `usage: ${program}             run the policy authority
       ${program} root-key    print the Trust Bundle root public key (PEM) for device provisioning
       ${program} --help      this text
       ${program} --version   the version

SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s), then it exits 0.
A variable set wrongly refuses the start with its name (exit 2).

environment:
${variableLines(VARIABLES)}`;

const rootKeyUsage = (program: string) => `usage: ${program} root-key

  print the Trust Bundle root public key (PEM) on stdout, logs on stderr
  (reads DATABASE_URL and CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM like ${program})`;

/** `program`: the name it was run by, for usage and errors (`ctl authority`, or the package's `ctl-authority`). */
export async function main(args: string[], program = 'ctl authority'): Promise<number> {
  const help = args.includes('--help') || args.includes('-h');
  const sub = args.find((a) => !a.startsWith('-'));
  const USAGE = sub === 'root-key' ? rootKeyUsage(program) : usage(program);
  if (help) return (console.log(USAGE), 0);
  if (args.includes('--version') || args.includes('-V')) return (console.log(packageVersion(import.meta.url)), 0);
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length > 1 || (sub !== undefined && sub !== 'root-key'))
      throw new UsageError(`unknown subcommand ${p.positionals.join(' ')}`);
    // The service's modules load only to run it: --help, --version and a usage error answer without them.
    const { readAuthorityConfig } = await import('../authority/config.js');
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
    const { startAuthority } = await import('../authority/server.js');
    let authority;
    try {
      authority = await startAuthority(config);
    } catch (e) {
      return startFailure(program, e);
    }
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
