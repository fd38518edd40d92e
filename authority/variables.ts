/**
 * The variables the authority reads, as an operator sees them: `ctl authority --help` prints them,
 * a CTL_* variable not among them is named at start, and readAuthorityConfig (config.ts) takes the
 * defaults of PORT, HOST and DATABASE_URL from here. Light on purpose, as gateway/variables.ts.
 */
import { logVariables } from '../service-kit/tlog/config.js';
import { anchorVariables, webhookVariables, type VariableHelp } from '../service-kit/config.js';

/**
 * Every variable the authority reads: its `--help` lists them, a CTL_* variable not among them is
 * named at start (checkVariableNames), and authority/README.md "Configuration" lists the same.
 */
export const AUTHORITY_VARIABLES: readonly VariableHelp[] = [
  ['PORT', '8700', 'where it listens'],
  ['HOST', '127.0.0.1', 'the address it listens on'],
  [
    'DATABASE_URL',
    'sqlite:./data/authority.db',
    'or postgres://user@host:port[,host:port…]/database[?target_session_attrs=read-write] (instances may share one)',
  ],
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
  ...anchorVariables("the log's checkpoint (the audit head with the log off)", true),
  [
    'CTL_AUTHORITY_HIGH_WATER_FILE',
    'DATABASE.high-water.json',
    "the audit head kept outside the database (SQLite's default)",
  ],
  ['CTL_AUTHORITY_ACCEPT_ROLLBACK', '0', '1: serve from a database behind its high-water mark (a restore)'],
  ...logVariables('CTL_AUTHORITY', 'ctl-authority-log'),
  ['CTL_AUTHORITY_RATE_LIMIT_KEY', '6000/60s', 'requests per API key, shared on PostgreSQL; 0: none'],
  ['CTL_AUTHORITY_RATE_LIMIT_ADDRESS', '60000/60s', 'requests per client address, per instance; 0: none'],
];
