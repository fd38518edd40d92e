/**
 * The authority's configuration from the environment (spec §4.3 variables, issue 3 §1).
 */
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
  /** CTL_ADMIN_API_KEY: a bootstrap key with the `admin` scope. */
  adminApiKey?: string;
  /** CTL_AUDIT_WEBHOOK_URLS (comma-separated) and CTL_AUDIT_WEBHOOK_SECRET (`whsec_…`). */
  webhookUrls: string[];
  webhookSecret?: string;
  /** CTL_ANCHOR_LOCAL_PATH: the local append-only anchor file (optional). */
  anchorLocalPath?: string;
  /** Which settings fell back to development defaults, to say so in the log. */
  defaulted: string[];
  logLevel: string;
}

type Env = Record<string, string | undefined>;

const nonEmpty = (v: string | undefined) => (v !== undefined && v.trim() !== '' ? v : undefined);

/** @example const config = readAuthorityConfig(process.env) */
export function readAuthorityConfig(env: Env = process.env): AuthorityConfig {
  const defaulted: string[] = [];
  const portText = nonEmpty(env['PORT']) ?? '8700';
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535) throw new RangeError(`PORT: expected 0–65535, got '${portText}'`);
  const port = Number(portText);
  const host = nonEmpty(env['HOST']) ?? '127.0.0.1';
  const databaseUrl = nonEmpty(env['DATABASE_URL']) ?? (defaulted.push('DATABASE_URL'), 'sqlite:./data/authority.db');
  const issuer = nonEmpty(env['CTL_ISSUER_DOMAIN']) ?? (defaulted.push('CTL_ISSUER_DOMAIN'), 'localhost');
  if (!/^[\x21-\x7e]{1,256}$/.test(issuer)) throw new RangeError('CTL_ISSUER_DOMAIN: printable ASCII without spaces, 1–256 characters (PROTOCOL.md §1)');
  const revocationBaseUrl = (nonEmpty(env['CTL_REVOCATION_BASE_URL']) ?? (defaulted.push('CTL_REVOCATION_BASE_URL'), `http://${host}:${port}`)).replace(/\/+$/, '');
  try {
    new URL(revocationBaseUrl);
  } catch {
    throw new RangeError(`CTL_REVOCATION_BASE_URL: not a URL: '${revocationBaseUrl}'`);
  }
  const adminApiKey = nonEmpty(env['CTL_ADMIN_API_KEY']);
  if (adminApiKey !== undefined && adminApiKey.length < 16) throw new RangeError('CTL_ADMIN_API_KEY: at least 16 characters');
  const webhookUrls = (nonEmpty(env['CTL_AUDIT_WEBHOOK_URLS']) ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const webhookSecret = nonEmpty(env['CTL_AUDIT_WEBHOOK_SECRET']);
  if (webhookUrls.length > 0 && !webhookSecret) throw new RangeError('CTL_AUDIT_WEBHOOK_URLS needs CTL_AUDIT_WEBHOOK_SECRET (whsec_<base64>)');
  const grantSigningKeyPem = nonEmpty(env['CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM'])?.replace(/\\n/g, '\n');
  const rootSigningKeyPem = nonEmpty(env['CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM'])?.replace(/\\n/g, '\n');
  return {
    port,
    host,
    databaseUrl,
    issuer,
    revocationBaseUrl,
    grantSigningKeyPem,
    grantSigningKeyId: nonEmpty(env['CTL_POLICY_GRANT_SIGNING_KEY_ID']),
    rootSigningKeyPem,
    adminApiKey,
    webhookUrls,
    webhookSecret,
    anchorLocalPath: nonEmpty(env['CTL_ANCHOR_LOCAL_PATH']),
    defaulted,
    logLevel: nonEmpty(env['LOG_LEVEL']) ?? 'info',
  };
}
