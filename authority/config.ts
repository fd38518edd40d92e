/**
 * The authority's configuration from the environment (spec §4.3 variables): the one reader of the
 * variables variables.ts lists, as gateway/config.ts is the gateway's; what both
 * services read alike (PORT, HOST, DATABASE_URL, LOG_LEVEL, unknown names) is service-kit's
 * readServiceBasics.
 */
import { readFileSync } from 'node:fs';
import { secretBytes } from '../service-kit/webhook-signature.js';
import {
  ConfigError,
  checkAdminKey,
  checkHttpUrl,
  checkKek,
  readServiceBasics,
  urlHost,
  type ConfigWarning,
} from '../service-kit/config.js';
import { authorityRateLimitsFromEnv, type AuthorityRateLimits } from '../service-kit/service-limits.js';
import { anchorSettingsFromEnv, type AnchorSettings } from '../service-kit/anchor/config.js';
import { AUTHORITY_VARIABLES } from './variables.js';

export interface AuthorityConfig {
  port: number;
  host: string;
  /** `sqlite:./data/authority.db` (default) or `postgres://…` */
  databaseUrl: string;
  /** CTL_ISSUER_DOMAIN: the `issuer` of grants and bundles. */
  issuer: string;
  /** CTL_REVOCATION_BASE_URL: grants carry `<base>/revoke?grantId=…` (PROTOCOL.md §4). */
  revocationBaseUrl: string;
  /** CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM / CTL_POLICY_GRANT_SIGNING_KEY_ID; generated and stored when absent. */
  grantSigningKeyPem?: string;
  grantSigningKeyId?: string;
  /** CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: the root key that signs bundles; generated and stored when absent. */
  rootSigningKeyPem?: string;
  /**
   * CTL_TRUST_BUNDLE_SIGNING_KEY_PEM or _FILE: the bundle key that signs bundles once the root is rotated (PROTOCOL.md
   * §11, trust-root.ts).
   */
  bundleSigningKeyPem?: string;
  /**
   * CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI: the bundle key in a PKCS#11 token instead (with CTL_PKCS11_MODULE;
   * signers.ts).
   */
  bundleSigningKeyPkcs11Uri?: string;
  /**
   * The same keys in an HSM or a file (authority/signers.ts): CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI,
   * CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI (RFC 7512), CTL_PKCS11_MODULE; *_PRIVATE_KEY_FILE. At most one source per key.
   */
  grantSigningKeyPkcs11Uri?: string;
  grantSigningKeyFile?: string;
  rootSigningKeyPkcs11Uri?: string;
  rootSigningKeyFile?: string;
  pkcs11Module?: string;
  /**
   * CTL_AUTHORITY_KEK (32 bytes, base64url or hex) or CTL_AUTHORITY_KEK_PKCS11_URI (an AES key in a
   * token): the key-encryption key of the private keys the authority stores (generated keys).
   * Unset: a development KEK made once beside the SQLite file (or ./data) with mode 0600.
   */
  kek?: string;
  kekPkcs11Uri?: string;
  /** CTL_ADMIN_API_KEY: a bootstrap key with the `admin` scope. */
  adminApiKey?: string;
  /** CTL_AUDIT_WEBHOOK_URLS (comma-separated) and CTL_AUDIT_WEBHOOK_SECRET (`whsec_…`). */
  webhookUrls: string[];
  webhookSecret?: string;
  /**
   * CTL_ANCHOR_EVM_*, CTL_ANCHOR_BTC_*, CTL_ANCHOR_LOCAL_PATH, CTL_ANCHOR_*_MS: the ledgers the audit
   * chain's head is anchored on and revocation tokens minted on (service-kit/anchor/config.ts).
   */
  anchoring: AnchorSettings & { unknown: string[] };
  /**
   * CTL_AUTHORITY_RATE_LIMIT_KEY (6000/60s: per API key, shared by instances on one PostgreSQL)
   * and CTL_AUTHORITY_RATE_LIMIT_ADDRESS (60000/60s: requests per client address, per instance);
   * `N/Ss`, `0` for none.
   */
  rateLimits: AuthorityRateLimits;
  /** Which settings fell back to development defaults, to say so in the log. */
  defaulted: string[];
  /** CTL_* variables in the environment that nothing reads (misspelt?), to say so at start. */
  warnings: ConfigWarning[];
  logLevel: string;
}

type Env = Record<string, string | undefined>;

const nonEmpty = (v: string | undefined) => (v !== undefined && v.trim() !== '' ? v : undefined);

/** A PEM from `<name>` (newlines may be `\n`) or from the file `<fileVar>` names; both set is an error. */
function readPemVar(env: Env, name: string, fileVar: string): string | undefined {
  const inline = nonEmpty(env[name]);
  const file = nonEmpty(env[fileVar]);
  if (inline && file) throw new ConfigError(`${name} and ${fileVar}`, 'set one, not both');
  if (inline) return inline.replace(/\\n/g, '\n');
  if (!file) return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(
      fileVar,
      `cannot read '${file}' (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
}

/**
 * The authority's configuration; a variable set wrongly throws a ConfigError naming it (exit 2).
 * `alsoKnown`: CTL_* names another service reads from the same environment (`ctl start`).
 * @example const config = readAuthorityConfig(process.env)
 */
export function readAuthorityConfig(
  env: Env = process.env,
  options: { alsoKnown?: Iterable<string> } = {},
): AuthorityConfig {
  const { port, host, databaseUrl, logLevel, warnings, defaulted } = readServiceBasics(env, {
    service: 'the authority',
    variables: AUTHORITY_VARIABLES,
    alsoKnown: options.alsoKnown,
  });
  const issuer = nonEmpty(env['CTL_ISSUER_DOMAIN']) ?? (defaulted.push('CTL_ISSUER_DOMAIN'), 'localhost');
  if (!/^[\x21-\x7e]{1,256}$/.test(issuer))
    throw new ConfigError('CTL_ISSUER_DOMAIN', 'printable ASCII without spaces, 1–256 characters (PROTOCOL.md §1)');
  const revocationBaseUrl = (
    nonEmpty(env['CTL_REVOCATION_BASE_URL']) ??
    (defaulted.push('CTL_REVOCATION_BASE_URL'), `http://${urlHost(host)}:${port}`)
  ).replace(/\/+$/, '');
  // Devices and merchants fetch `<base>/revoke`: an http(s) URL (PROTOCOL.md §4).
  checkHttpUrl(revocationBaseUrl, 'CTL_REVOCATION_BASE_URL');
  const adminApiKey = checkAdminKey(env['CTL_ADMIN_API_KEY'], 'CTL_ADMIN_API_KEY');
  checkKek(env, 'CTL_AUTHORITY_KEK');
  const webhookUrls = (nonEmpty(env['CTL_AUDIT_WEBHOOK_URLS']) ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const webhookSecret = nonEmpty(env['CTL_AUDIT_WEBHOOK_SECRET']);
  if (webhookUrls.length > 0 && !webhookSecret)
    throw new ConfigError('CTL_AUDIT_WEBHOOK_URLS', 'needs CTL_AUDIT_WEBHOOK_SECRET (whsec_<base64>)');
  if (webhookSecret !== undefined) {
    // Checked here, not at the first delivery: a bad secret would otherwise fail every webhook silently.
    try {
      secretBytes(webhookSecret);
    } catch (e) {
      throw new ConfigError('CTL_AUDIT_WEBHOOK_SECRET', (e as Error).message.replace(/^webhook secret: /, ''));
    }
  }
  const grantSigningKeyPem = nonEmpty(env['CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM'])?.replace(/\\n/g, '\n');
  const rootSigningKeyPem = nonEmpty(env['CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM'])?.replace(/\\n/g, '\n');
  const bundleSigningKeyPem = readPemVar(env, 'CTL_TRUST_BUNDLE_SIGNING_KEY_PEM', 'CTL_TRUST_BUNDLE_SIGNING_KEY_FILE');
  const bundleSigningKeyPkcs11Uri = nonEmpty(env['CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI']);
  if (bundleSigningKeyPkcs11Uri && bundleSigningKeyPem) {
    const other = nonEmpty(env['CTL_TRUST_BUNDLE_SIGNING_KEY_PEM'])
      ? 'CTL_TRUST_BUNDLE_SIGNING_KEY_PEM'
      : 'CTL_TRUST_BUNDLE_SIGNING_KEY_FILE';
    throw new ConfigError(`CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI and ${other}`, 'set one, not both');
  }
  return {
    port,
    bundleSigningKeyPem,
    bundleSigningKeyPkcs11Uri,
    host,
    databaseUrl,
    issuer,
    revocationBaseUrl,
    grantSigningKeyPem,
    grantSigningKeyId: nonEmpty(env['CTL_POLICY_GRANT_SIGNING_KEY_ID']),
    rootSigningKeyPem,
    grantSigningKeyPkcs11Uri: nonEmpty(env['CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI']),
    grantSigningKeyFile: nonEmpty(env['CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_FILE']),
    rootSigningKeyPkcs11Uri: nonEmpty(env['CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI']),
    rootSigningKeyFile: nonEmpty(env['CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_FILE']),
    pkcs11Module: nonEmpty(env['CTL_PKCS11_MODULE']),
    kek: nonEmpty(env['CTL_AUTHORITY_KEK']),
    kekPkcs11Uri: nonEmpty(env['CTL_AUTHORITY_KEK_PKCS11_URI']),
    adminApiKey,
    webhookUrls,
    webhookSecret,
    anchoring: anchorSettingsFromEnv(env),
    rateLimits: authorityRateLimitsFromEnv(env),
    defaulted,
    warnings,
    logLevel,
  };
}
