/**
 * Checks of the services' configuration at start: a mistake is refused before anything is opened,
 * with the name of the variable (docs/operations.md: exit 2), rather than surfacing later as a
 * driver's message or as every request failing.
 */
import { isIP } from 'node:net';
import { parseKek } from './secrets/kek.js';

/** A variable that is set wrongly; `ctl` commands exit 2 on it. */
export class ConfigError extends RangeError {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** pino's levels, plus `silent`. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** @example const level = checkLogLevel(env.LOG_LEVEL) // 'info' when unset */
export function checkLogLevel(value: string | undefined, variable = 'LOG_LEVEL'): string {
  const v = value?.trim() || 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(v))
    throw new ConfigError(variable, `expected one of ${LOG_LEVELS.join(', ')}, got '${v}'`);
  return v;
}

/** The password of a database URL replaced, for messages and logs. */
export const redactUrl = (url: string) => url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');

/**
 * `sqlite:<path>` or `postgres://…` / `postgresql://…` with a host.
 * @example checkDatabaseUrl('postgres://ctl@db/ctl')
 */
export function checkDatabaseUrl(url: string, variable = 'DATABASE_URL'): string {
  if (url.startsWith('sqlite:')) {
    if (url.length === 'sqlite:'.length)
      throw new ConfigError(variable, 'sqlite: needs a file path (sqlite:./data/ctl.db)');
    return url;
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new ConfigError(variable, `not a valid URL: '${redactUrl(url)}'`);
    }
    if (!u.hostname && !u.searchParams.get('host')) throw new ConfigError(variable, `no host in '${redactUrl(url)}'`);
    return url;
  }
  throw new ConfigError(
    variable,
    `expected sqlite:<path> or postgres://user@host:port/database, got '${redactUrl(url)}'`,
  );
}

/**
 * An absolute http(s) URL (a public base URL, a callback): anything else would only fail later,
 * in every request that uses it.
 */
export function checkHttpUrl(value: string, variable: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(variable, `expected an http(s) URL such as https://pay.example.com, got '${value}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ConfigError(variable, `expected an http(s) URL, got the scheme '${u.protocol}' in '${value}'`);
  if (u.username || u.password) throw new ConfigError(variable, 'a URL with credentials is not accepted');
  return value;
}

/** `host:port,…` (IPv6 in brackets: `[::1]:8080`); the port is required, names are matched exactly. */
export function checkHostPortList(value: string | undefined, variable: string): string[] {
  const items = (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):([0-9]{1,5})$/.exec(item);
    if (!m || Number(m[2]) > 65535)
      throw new ConfigError(variable, `expected host:port entries (127.0.0.1:8080, [::1]:8080), got '${item}'`);
  }
  // The guard compares against the bare host (address-guard.ts isExcepted).
  return items.map((i) => i.replace(/^\[([^\]]+)\]/, '$1'));
}

/** A bootstrap (admin) key: at least 16 characters, named by its variable. */
export function checkAdminKey(value: string | undefined, variable: string): string | undefined {
  const v = value?.trim() ? value : undefined;
  if (v !== undefined && v.length < 16)
    throw new ConfigError(
      variable,
      `at least 16 characters (got ${v.length}); make one with: ` +
        `node -e "console.log(require('crypto').randomBytes(24).toString('base64url'))"`,
    );
  return v;
}

/** The KEK's form, checked before any store is opened (its key is used later, secrets/kek.ts). */
export function checkKek(env: Record<string, string | undefined>, variable: string): void {
  const v = env[variable];
  if (v === undefined || v.trim() === '') return;
  try {
    parseKek(v, variable);
  } catch (e) {
    const message = (e as Error).message;
    throw new ConfigError(variable, message.startsWith(`${variable}: `) ? message.slice(variable.length + 2) : message);
  }
}

/** What a refused connection means to an operator, from the driver's error code. */
const CONNECT_FAILURES: Record<string, string> = {
  ECONNREFUSED: 'nothing listens there',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve (temporary DNS failure)',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ETIMEDOUT: 'the connection timed out',
  ECONNRESET: 'the connection was reset',
  '28P01': 'the password was refused',
  '28000': 'the role may not connect',
  '3D000': 'the database does not exist',
};

/**
 * Connects to a PostgreSQL URL once and closes: a database that cannot be reached refuses the
 * start naming its variable, not with the driver's bare `connect ECONNREFUSED`. SQLite passes.
 * @example await checkDatabaseReachable(config.databaseUrl)
 */
export async function checkDatabaseReachable(
  url: string,
  variable = 'DATABASE_URL',
  timeoutMs = 10_000,
): Promise<void> {
  if (!/^postgres(ql)?:\/\//.test(url)) return;
  const { parsePostgresUrl, connectToAnyHost, NotReadWriteError } = await import('./pg-hosts.js');
  let target: ReturnType<typeof parsePostgresUrl>;
  try {
    target = parsePostgresUrl(url);
  } catch (e) {
    throw new ConfigError(variable, (e as Error).message);
  }
  let client: Awaited<ReturnType<typeof connectToAnyHost>> | undefined;
  try {
    // Several hosts: one that will do is enough (read-write when the URL asks for it).
    client = await connectToAnyHost(url, { connectionTimeoutMillis: timeoutMs });
  } catch (e) {
    const err = e as Error & { code?: string };
    const path = new URL(target.urlFor(0)).pathname;
    const where = target.hosts.map((h) => `${h.host}:${h.port}`).join(',') + path;
    if (e instanceof NotReadWriteError)
      throw new ConfigError(variable, `cannot connect to PostgreSQL at ${where}: no host accepts writes`);
    const why =
      (err.code && CONNECT_FAILURES[err.code]) ??
      (/timeout/i.test(err.message) ? 'the connection timed out' : err.message);
    throw new ConfigError(
      variable,
      `cannot connect to PostgreSQL at ${where}: ${why}${err.code ? ` (${err.code})` : ''}`,
    );
  } finally {
    await client?.end().catch(() => {});
  }
}

/** A variable, its default (omitted: none) and what it sets: one row of a service's known list. */
export type VariableHelp = readonly [name: string, defaultValue: string | undefined, meaning: string];

/**
 * The webhook outbox's variables (service-kit's, read alike by both services); `what` names the
 * webhooks in the first line.
 * @example [...webhookVariables('session webhooks')]
 */
export function webhookVariables(what: string): VariableHelp[] {
  return [
    ['CTL_WEBHOOK_MAX_ATTEMPTS', '12', `${what}: attempts before the dead letter`],
    ['CTL_WEBHOOK_BASE_DELAY_MS', '5000', 'first retry delay, doubled each attempt'],
    ['CTL_WEBHOOK_MAX_DELAY_MS', '3600000', 'longest retry delay'],
    ['CTL_WEBHOOK_TIMEOUT_MS', '5000', 'per-attempt timeout'],
    ['CTL_WEBHOOK_POLL_MS', '1000', 'how often each instance looks for due deliveries'],
  ];
}

/**
 * The anchoring variables (service-kit/anchor/config.ts), the same in both services; `revocations`
 * adds the revocation-token contract (the authority).
 * @example [...anchorVariables("the log's checkpoint", true)]
 */
export function anchorVariables(what: string, revocations = false): VariableHelp[] {
  return [
    ['CTL_ANCHOR_EVM_RPC_URL', undefined, `an EVM node's JSON-RPC: ${what} is anchored there`],
    ['CTL_ANCHOR_EVM_CHAIN_ID', undefined, 'its chain id (pinned: a node of another chain is refused)'],
    ['CTL_ANCHOR_EVM_CONTRACT', undefined, 'the CtlAnchor contract (ctl anchor deploy)'],
    ...(revocations
      ? ([
          ['CTL_ANCHOR_EVM_REVOCATION_CONTRACT', undefined, 'the CtlRevocationTokens contract: a token per revocation'],
        ] as VariableHelp[])
      : []),
    ['CTL_ANCHOR_EVM_KEY_FILE', undefined, 'the signing key: a secp256k1 private key as 64 hex, mode 0600'],
    ['CTL_ANCHOR_EVM_PKCS11_URI', undefined, 'or the key in a PKCS#11 token (secp256k1, CKM_ECDSA)'],
    ['CTL_ANCHOR_EVM_ADDRESS', undefined, 'the pinned anchoring address: the signer must be it'],
    ['CTL_ANCHOR_EVM_CONFIRMATIONS', '12', 'depth at which a transaction counts'],
    ['CTL_ANCHOR_BTC_RPC_URL', undefined, `a bitcoind-RPC node (Bitcoin, Litecoin): ${what} as an OP_RETURN`],
    ['CTL_ANCHOR_BTC_RPC_USER', undefined, 'its RPC user (with _PASSWORD), or'],
    ['CTL_ANCHOR_BTC_RPC_PASSWORD', undefined, 'its RPC password'],
    ['CTL_ANCHOR_BTC_RPC_COOKIE_FILE', undefined, "the node's .cookie file instead"],
    ['CTL_ANCHOR_BTC_WALLET', undefined, "the node's wallet holding the address's key"],
    ['CTL_ANCHOR_BTC_ADDRESS', undefined, 'the pinned anchoring address: coins from it, change to it'],
    ['CTL_ANCHOR_BTC_CONFIRMATIONS', '6', 'depth at which an anchor counts'],
    ['CTL_ANCHOR_BTC_FEE_RATE', undefined, "sat/vB (unset: the node's estimate)"],
    ['CTL_ANCHOR_LOCAL_PATH', undefined, `a local append-only file of ${what} (development)`],
    ['CTL_ANCHOR_INTERVAL_MS', '60000', 'how often the checkpoint (or head) is read and anchored when it grew'],
    ['CTL_ANCHOR_POLL_MS', '5000', 'how often a sent transaction is looked at until deep enough'],
    ['CTL_ANCHOR_MAX_DELAY_MS', '300000', 'longest delay between retries (a node that is down)'],
    ['CTL_ANCHOR_ALERT_AFTER_MS', '1800000', 'unconfirmed this long: reported once (log, metric)'],
  ];
}

/**
 * The address a service listens on: an IP address or a host name. Checked on its own, so a bad
 * HOST is named as HOST, not as a URL built from it.
 * @example checkHost('0.0.0.0') // '0.0.0.0'
 */
export function checkHost(value: string, variable = 'HOST'): string {
  const name =
    /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
  if (isIP(value) || name.test(value)) return value;
  throw new ConfigError(variable, `expected an IP address or a host name (127.0.0.1, ::, localhost), got '${value}'`);
}

/** `host` as a URL writes it: an IPv6 address in brackets. */
export const urlHost = (host: string) => (isIP(host) === 6 ? `[${host}]` : host);

/**
 * CTL_* variables that CTL programs other than the services read (the MCP server and the agent
 * tools, the tests), so an environment that holds them holds no misspelling.
 */
const READ_ELSEWHERE = new Set([
  'CTL_GATEWAY_URL',
  'CTL_SESSION_TOKEN',
  'CTL_TOOLS',
  'CTL_CHROMIUM',
  'CTL_VECTORS_DIR',
  'CTL_DESIGN_DIR',
  'CTL_SEED',
  'CTL_GATEWAY_TEST_PG',
]);
const READ_ELSEWHERE_PREFIXES = ['CTL_TEST_'];

/** A CTL_* variable no CTL program reads, and the known name nearest to it. */
export interface ConfigWarning {
  variable: string;
  nearest?: string;
  message: string;
}

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  return d[a.length]![b.length]!;
}

/**
 * The known name nearest to `name`, when it is near enough to be what was meant (at most a
 * quarter of its length in edits, at least 2).
 * @example nearestName('CTL_GATEWAY_EGRES_PORT', ['CTL_GATEWAY_EGRESS_PORT']) // 'CTL_GATEWAY_EGRESS_PORT'
 */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  let best: [string, number] | undefined;
  for (const k of known) {
    const d = editDistance(name, k);
    if (!best || d < best[1]) best = [k, d];
  }
  return best && best[1] <= Math.max(2, Math.floor(name.length / 4)) ? best[0] : undefined;
}

/**
 * The CTL_* variables of `env` that neither `service` (its `known` list) nor any other CTL
 * program reads: most likely misspelt, and then silently ignored. Each is a warning naming the
 * nearest known name; under NODE_ENV=production the first refuses the start (ConfigError, exit 2).
 * @example const warnings = checkVariableNames(process.env, GATEWAY_VARIABLE_NAMES, 'the gateway')
 */
export function checkVariableNames(
  env: Record<string, string | undefined>,
  known: Iterable<string>,
  service: string,
): ConfigWarning[] {
  const names = new Set(known);
  const warnings: ConfigWarning[] = [];
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith('CTL_') || env[variable] === undefined || names.has(variable)) continue;
    if (READ_ELSEWHERE.has(variable) || READ_ELSEWHERE_PREFIXES.some((p) => variable.startsWith(p))) continue;
    const nearest = nearestName(variable, names);
    const hint = nearest ? `did you mean ${nearest}?` : 'see --help for the variables it reads';
    warnings.push({ variable, nearest, message: `not a variable ${service} reads (it is ignored): ${hint}` });
  }
  if (warnings.length && env.NODE_ENV === 'production') {
    const [first, ...more] = warnings;
    throw new ConfigError(
      first!.variable,
      `${first!.message.replace(' (it is ignored)', '')} (NODE_ENV=production refuses an unknown CTL_* variable` +
        `${more.length ? `; also ${more.map((w) => w.variable).join(', ')}` : ''})`,
    );
  }
  return warnings;
}

/** What every service reads alike from its environment (readServiceBasics). */
export interface ServiceBasics {
  port: number;
  host: string;
  /** `sqlite:<path>` or `postgres://…` (checkDatabaseUrl). */
  databaseUrl: string;
  logLevel: string;
  /** CTL_* variables in the environment that nothing reads (misspelt?), to say so at start. */
  warnings: ConfigWarning[];
  /** Which settings fell back to their development defaults, to say so in the log. */
  defaulted: string[];
}

/**
 * The part of a service's configuration both services read the same way, with the defaults of
 * its own variable list (the one `--help` prints): the unknown CTL_* names, PORT, HOST,
 * DATABASE_URL and LOG_LEVEL. A malformed one throws a ConfigError naming it (exit 2).
 * `alsoKnown`: CTL_* names another service reads from the same environment (`ctl start`).
 * @example const basics = readServiceBasics(env, { service: 'the gateway', variables: GATEWAY_VARIABLES })
 */
export function readServiceBasics(
  env: Record<string, string | undefined>,
  o: { service: string; variables: readonly VariableHelp[]; alsoKnown?: Iterable<string> },
): ServiceBasics {
  const warnings = checkVariableNames(env, [...o.variables.map((v) => v[0]), ...(o.alsoKnown ?? [])], o.service);
  const defaultOf = (name: string) => {
    const d = o.variables.find((v) => v[0] === name)?.[1];
    if (d === undefined) throw new TypeError(`readServiceBasics: ${name} has no default in the variable list`);
    return d;
  };
  const set = (name: string) => (env[name]?.trim() ? env[name]!.trim() : undefined);
  const defaulted: string[] = [];
  const portText = set('PORT') ?? defaultOf('PORT');
  if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) > 65535)
    throw new ConfigError('PORT', `expected 0–65535, got '${portText}'`);
  const databaseUrl = set('DATABASE_URL') ?? (defaulted.push('DATABASE_URL'), defaultOf('DATABASE_URL'));
  return {
    port: Number(portText),
    host: checkHost(set('HOST') ?? defaultOf('HOST')),
    databaseUrl: checkDatabaseUrl(databaseUrl),
    logLevel: checkLogLevel(env['LOG_LEVEL']),
    warnings,
    defaulted,
  };
}
