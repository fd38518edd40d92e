/**
 * The variables the gateway reads, as an operator sees them: `ctl gateway --help` prints them, a
 * CTL_* variable not among them is named at start, and readGatewayConfig (config.ts) takes the
 * defaults of PORT, HOST and DATABASE_URL from here. Light on purpose: `--help` loads nothing else.
 */
import { logVariables } from '../service-kit/tlog/config.js';
import { anchorVariables, webhookVariables, type VariableHelp } from '../service-kit/config.js';

/**
 * Every variable the gateway reads: its `--help` lists them, a CTL_* variable not among them is
 * named at start (checkVariableNames), and gateway/README.md lists the same, with the same defaults.
 */
export const GATEWAY_VARIABLES: readonly VariableHelp[] = [
  ['PORT', '8402', 'where it listens'],
  ['HOST', '127.0.0.1', 'the address it listens on'],
  [
    'DATABASE_URL',
    'sqlite:./data/gateway.db',
    'or postgres://user@host:port[,host:port…]/database[?target_session_attrs=read-write] (instances may share one)',
  ],
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
  ['CTL_X402_CONFIRMATIONS', '2', 'x402: blocks deep (the head is 1) a read must be before it moves money'],
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
  ['CTL_GATEWAY_MAX_SESSION_DEPTH', '4', 'levels of child sessions below a root session (1-16)'],
  ['CTL_GATEWAY_EGRESS_PORT', undefined, "the egress proxy's port (HTTP(S)_PROXY for agents); unset: off"],
  ['CTL_GATEWAY_EGRESS_HOST', 'HOST', 'the address the egress proxy listens on'],
  ['CTL_GATEWAY_EGRESS_PASS_THROUGH', undefined, 'glob,... hosts the egress proxy tunnels untouched (nothing paid)'],
  ['CTL_GATEWAY_EGRESS_CONNECT_LIMIT', '120/60s', 'CONNECTs per session to the egress proxy; 0: none'],
  ...webhookVariables('session webhooks'),
  ...anchorVariables("the log's checkpoint (the audit head with the log off)"),
  [
    'CTL_GATEWAY_HIGH_WATER_FILE',
    'DATABASE.high-water.json',
    "the audit head kept outside the database (SQLite's default)",
  ],
  ['CTL_GATEWAY_ACCEPT_ROLLBACK', '0', '1: serve from a database behind its high-water mark (a restore)'],
  ...logVariables('CTL_GATEWAY', 'ctl-gateway-log'),
];
