/**
 * Checks of the services' configuration at start: a mistake is refused before anything is opened,
 * with the name of the variable (docs/operations.md: exit 2), rather than surfacing later as a
 * driver's message or as every request failing.
 */
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
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  // A connection that fails emits 'error' as well as rejecting connect(): handled here.
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (e) {
    const err = e as Error & { code?: string };
    const u = new URL(url);
    const where = `${u.hostname || 'localhost'}:${u.port || '5432'}${u.pathname}`;
    const why =
      (err.code && CONNECT_FAILURES[err.code]) ??
      (/timeout/i.test(err.message) ? 'the connection timed out' : err.message);
    throw new ConfigError(
      variable,
      `cannot connect to PostgreSQL at ${where}: ${why}${err.code ? ` (${err.code})` : ''}`,
    );
  } finally {
    await client.end().catch(() => {});
  }
}
