/**
 * PostgreSQL URLs that name several hosts, as libpq reads them
 * (`postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`): node-postgres refuses
 * such a URL, so the host list is parsed here and each connection is made to one host at a time.
 * With `target_session_attrs=read-write` a host counts only once `SHOW transaction_read_only`
 * answers `off` (libpq's own test), so a standby is passed over until it is promoted. The host
 * that answered last is tried first, the others after it in the order written (docs/operations.md
 * "A standby and failover").
 */
import pg from 'pg';
import { DatabaseUnavailableError, isConnectionLoss } from './connection-loss.js';

/** One `host:port` of the list. */
export interface PgHost {
  host: string;
  port: number;
}

/** A PostgreSQL URL with its host list taken apart. */
export interface PgTarget {
  hosts: PgHost[];
  /** `target_session_attrs=read-write`: only a host that accepts writes will do. */
  readWrite: boolean;
  /** A single-host URL for host `i`, everything else as written (minus target_session_attrs). */
  urlFor(i: number): string;
}

/** What libpq accepts for target_session_attrs; the ones served here are `any` and `read-write`. */
const SESSION_ATTRS = new Set(['any', 'read-write']);
const URL_PARTS = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/s;

/**
 * Takes a `postgres://` URL apart into its hosts. Throws RangeError (naming what is wrong, never
 * the password) for an empty host entry, a port outside 1–65535 or a target_session_attrs other
 * than `any` or `read-write` (libpq's `read-only`, `primary`, `standby` and `prefer-standby` are
 * not served: a gateway writes).
 * @example parsePostgresUrl('postgres://u@a:5432,b:5433/db?target_session_attrs=read-write').hosts.length // 2
 */
export function parsePostgresUrl(url: string): PgTarget {
  const m = URL_PARTS.exec(url);
  if (!m) throw new RangeError('expected postgres://[user@]host[:port][,host[:port]…]/database');
  const [, scheme, userinfo = '', hostList, rest] = m as unknown as [
    string,
    string,
    string | undefined,
    string,
    string,
  ];
  const qAt = rest.indexOf('?');
  const path = qAt < 0 ? rest : rest.slice(0, qAt);
  const query = new URLSearchParams(qAt < 0 ? '' : rest.slice(qAt + 1));
  const attrs = query.get('target_session_attrs') ?? 'any';
  if (!SESSION_ATTRS.has(attrs))
    throw new RangeError(`target_session_attrs: expected any or read-write, got '${attrs.slice(0, 40)}'`);
  query.delete('target_session_attrs');
  const hosts = (hostList === '' ? ['localhost'] : hostList.split(',')).map(parseHost);
  const search = query.toString();
  const tail = path + (search ? `?${search}` : '');
  return {
    hosts,
    readWrite: attrs === 'read-write',
    urlFor(i) {
      const h = hosts[i];
      if (!h) throw new RangeError(`host ${i}: the URL names ${hosts.length}`);
      return `${scheme}${userinfo}${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}${tail}`;
    },
  };
}

function parseHost(entry: string): PgHost {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::([0-9]{1,5}))?$/.exec(entry);
  if (!m) throw new RangeError(`host '${entry.slice(0, 80)}': expected host or host:port`);
  const port = m[2] === undefined ? 5432 : Number(m[2]);
  if (port < 1 || port > 65535) throw new RangeError(`host '${entry}': port must be 1–65535`);
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : m[1]!;
  return { host, port };
}

/**
 * Whether `url` needs the host handling here (several hosts, or a target_session_attrs): a
 * plain single-host URL goes to node-postgres unchanged.
 */
export function isMultiHost(url: string): boolean {
  if (!/^postgres(ql)?:\/\//.test(url)) return false;
  const t = parsePostgresUrl(url);
  return t.hosts.length > 1 || t.readWrite || /[?&]target_session_attrs=/.test(url);
}

/** Which host to try next: the one that last answered, then the others in the order written. */
export interface HostRotation {
  readonly target: PgTarget;
  /** The index of the host a new connection goes to now. */
  current(): number;
  /** Host `i` failed (unreachable, or not read-write): move on, unless another caller already did. */
  failed(i: number): void;
}

/** @example const r = createHostRotation(parsePostgresUrl(url)); r.failed(r.current()) */
export function createHostRotation(target: PgTarget): HostRotation {
  let at = 0;
  return {
    target,
    current: () => at,
    failed(i) {
      if (i === at) at = (at + 1) % target.hosts.length;
    },
  };
}

/** A host that answered but does not accept writes (a standby, or a read-only setting). */
export class NotReadWriteError extends DatabaseUnavailableError {
  constructor(host: PgHost) {
    super(new Error(`${host.host}:${host.port} does not accept writes (a standby?)`));
  }
}

/**
 * With read-write asked for: throws NotReadWriteError unless `client`'s session accepts writes.
 * @example await checkReadWrite(client, { host: 'db1', port: 5432 })
 */
export async function checkReadWrite(client: pg.ClientBase, host: PgHost): Promise<void> {
  const r = await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
  if (r.rows[0]?.transaction_read_only !== 'off') throw new NotReadWriteError(host);
}

/** A failed connection attempt that another host might not share: try the next one. */
export function isHostFailure(e: unknown): boolean {
  return e instanceof NotReadWriteError || isConnectionLoss(e);
}

/** How long one host may take to accept a connection before the next is tried, unless the URL says. */
export const HOST_CONNECT_TIMEOUT_MS = 5000;

/**
 * A pg.Client class for a pg.Pool over `rotation`: each client connects to the current host and,
 * when read-write is asked for, checks it; a failure moves the rotation on. (pg-pool builds its
 * clients itself, so the host is chosen in the constructor.)
 */
export function rotatingClient(rotation: HostRotation): typeof pg.Client {
  const { target } = rotation;
  return class RotatingClient extends pg.Client {
    readonly hostIndex: number;
    constructor(config: pg.ClientConfig = {}) {
      const i = rotation.current();
      const { connectionString: _ignored, ...rest } = config;
      super({ connectionTimeoutMillis: HOST_CONNECT_TIMEOUT_MS, ...rest, connectionString: target.urlFor(i) });
      this.hostIndex = i;
    }
    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(
      callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void),
    ): Promise<pg.Client> | void {
      const done = (async () => {
        try {
          await super.connect();
          if (target.readWrite) await checkReadWrite(this, target.hosts[this.hostIndex]!);
          return this;
        } catch (e) {
          if (isHostFailure(e)) rotation.failed(this.hostIndex);
          if (e instanceof NotReadWriteError) await this.end().catch(() => {});
          throw e;
        }
      })();
      if (!callback) return done;
      const cb = callback as (err: Error | null, c?: pg.Client) => void;
      done.then(
        (c) => cb(null, c),
        (e: Error) => cb(e),
      );
    }
  };
}

/**
 * One connected client on a host that will do (read-write when asked), trying each host of the
 * list once from the current one; throws the last host's error when none will.
 * @example const c = await connectToAnyHost(url); await c.query('LISTEN x')
 */
export async function connectToAnyHost(
  url: string,
  config: Omit<pg.ClientConfig, 'connectionString'> = {},
  rotation: HostRotation = createHostRotation(parsePostgresUrl(url)),
): Promise<pg.Client> {
  const Client = rotatingClient(rotation);
  let last: unknown;
  for (let n = 0; n < rotation.target.hosts.length; n++) {
    const c = new Client(config);
    c.on('error', () => {});
    try {
      await c.connect();
      return c;
    } catch (e) {
      last = e;
      await c.end().catch(() => {});
      if (!isHostFailure(e)) break;
    }
  }
  throw last;
}
