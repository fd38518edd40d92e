/**
 * `ctl authority` runs the policy authority; `ctl authority root-key` prints the public half of
 * the Trust Bundle root key as PEM, for provisioning devices (issue 3 §2). Both read the same
 * environment (PORT, DATABASE_URL, CTL_* of spec §4.3).
 */
import { readAuthorityConfig } from '../authority/config.js';
import { createKeyRing } from '../authority/keys.js';
import { startAuthority } from '../authority/server.js';
import { openAuthorityStore } from '../authority/store/open.js';
import { createLogger } from '../service-kit/index.js';

const USAGE = `usage: ctl authority [root-key]

  (no argument)  run the policy authority (PORT, default 8700; DATABASE_URL, default sqlite:./data/authority.db)
  root-key       print the Trust Bundle root public key (PEM) for device provisioning

environment: CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM, CTL_POLICY_GRANT_SIGNING_KEY_ID, CTL_ISSUER_DOMAIN,
  CTL_REVOCATION_BASE_URL, CTL_ADMIN_API_KEY, CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM,
  CTL_AUDIT_WEBHOOK_URLS + CTL_AUDIT_WEBHOOK_SECRET, CTL_ANCHOR_LOCAL_PATH, LOG_LEVEL`;

export async function main(args: string[]): Promise<number | void> {
  const [sub, ...rest] = args;
  if (sub === '--help' || sub === '-h' || rest.length > 0 || (sub !== undefined && sub !== 'root-key')) {
    console.log(USAGE);
    return sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let config;
  try {
    config = readAuthorityConfig(process.env);
  } catch (e) {
    console.error(`ctl authority: ${(e as Error).message}`);
    return 2;
  }
  if (sub === 'root-key') {
    // Logs go to stderr so stdout is exactly the PEM (`ctl authority root-key > root.pem`).
    const logger = createLogger({ name: 'ctl-authority', level: config.logLevel, destination: process.stderr });
    const store = await openAuthorityStore(config.databaseUrl);
    try {
      const keys = createKeyRing({ store, logger, now: Date.now, rootSigningKeyPem: config.rootSigningKeyPem,
        grantSigningKeyPem: config.grantSigningKeyPem, grantSigningKeyId: config.grantSigningKeyId });
      await keys.init();
      process.stdout.write((await keys.rootSigner()).publicKeyPem);
    } finally {
      await store.close();
    }
    return 0;
  }
  const authority = await startAuthority(config);
  const stop = async (signal: string) => {
    authority.logger.info({ signal }, 'shutting down');
    await authority.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}
