/**
 * One small SQL surface over SQLite (better-sqlite3, WAL) and PostgreSQL (pg Pool), opened from a
 * database URL (`sqlite:./data/x.db`, `sqlite::memory:`, `postgres://…`). SQL is written once with
 * `?` placeholders (rewritten to `$n` for PostgreSQL; never put a literal `?` in SQL text).
 * Both back ends support `INSERT … ON CONFLICT … RETURNING`, so counters and idempotent writes
 * are single statements (no check-then-set).
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export type Row = Record<string, unknown>;
export type Dialect = 'sqlite' | 'postgres';

/** Statements, inside or outside a transaction. */
export interface SqlExecutor {
  readonly dialect: Dialect;
  /** All rows of a query (or of a statement with RETURNING). */
  all<T = Row>(sql: string, params?: unknown[]): Promise<T[]>;
  /** The first row, or undefined. */
  get<T = Row>(sql: string, params?: unknown[]): Promise<T | undefined>;
  /** A statement without rows; `changes` counts affected rows. */
  run(sql: string, params?: unknown[]): Promise<{ changes: number }>;
  /** Several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

export interface SqlDatabase extends SqlExecutor {
  /**
   * Runs `fn` in a transaction, committed when it resolves and rolled back when it throws.
   * `lock` names a critical section held until commit across processes too (PostgreSQL
   * advisory lock; SQLite `BEGIN IMMEDIATE` holds the single writer lock anyway).
   */
  tx<T>(fn: (q: SqlExecutor) => Promise<T>, options?: { lock?: string }): Promise<T>;
  /** true when a trivial query succeeds (readiness). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
  /** The URL without credentials, for logs. */
  readonly description: string;
  /**
   * PostgreSQL only (absent on SQLite): LISTEN on `channel`. See `ListenHandlers`; `close()`
   * ends this subscription (and the connection with the last one).
   */
  listen?(channel: string, handlers: ListenHandlers): { close(): Promise<void> };
}

/** One LISTEN subscription (PostgreSQL). */
export interface ListenHandlers {
  /** A NOTIFY on the channel, with its payload. */
  notify(payload: string): void;
  /**
   * `true` once LISTEN is in effect (first, and again after each reconnection); `false` when the
   * listening connection is lost or stops answering: notifications may be missed from then on.
   */
  state(listening: boolean): void;
}

export interface OpenOptions {
  /** PostgreSQL: the schema to use (created if missing) via search_path. Tests use one each. */
  schema?: string;
  /** PostgreSQL pool size (default 10). */
  poolSize?: number;
}

/**
 * @example const db = await openDatabase(process.env.DATABASE_URL ?? 'sqlite:./data/authority.db')
 */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<SqlDatabase> {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length));
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) return openPostgres(url, options);
  throw new RangeError(`DATABASE_URL: expected sqlite:<path> or postgres://…, got '${redact(url)}'`);
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

function sqliteParam(v: unknown): unknown {
  if (v === undefined) return null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  return v;
}

function openSqlite(path: string): SqlDatabase {
  const memory = path === ':memory:' || path === '';
  if (!memory) mkdirSync(dirname(resolve(path)), { recursive: true });
  const db = new Database(memory ? ':memory:' : path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  const cache = new Map<string, Database.Statement>();
  const prepare = (sql: string) => {
    let s = cache.get(sql);
    if (!s) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
  // better-sqlite3 is synchronous and has one connection: while a transaction is open (its
  // callback may await), statements from other requests must wait, or they would run inside it.
  // Each wait loop re-checks `txOpen` and then acts in the same synchronous step.
  let txTail: Promise<void> = Promise.resolve();
  let txOpen = false;
  const direct: SqlExecutor = {
    dialect: 'sqlite',
    async all<T>(sql: string, params: unknown[] = []) {
      return prepare(sql).all(...params.map(sqliteParam)) as T[];
    },
    async get<T>(sql: string, params: unknown[] = []) {
      const s = prepare(sql);
      return (s.reader ? s.get(...params.map(sqliteParam)) : (s.run(...params.map(sqliteParam)), undefined)) as T | undefined;
    },
    async run(sql: string, params: unknown[] = []) {
      const s = prepare(sql);
      if (s.reader) return { changes: s.all(...params.map(sqliteParam)).length };
      return { changes: s.run(...params.map(sqliteParam)).changes };
    },
    async exec(script: string) {
      db.exec(script);
    },
  };
  const guarded = <K extends 'all' | 'get' | 'run' | 'exec'>(k: K) =>
    (async (...args: unknown[]) => {
      while (txOpen) await txTail;
      return (direct[k] as (...a: unknown[]) => unknown)(...args);
    }) as SqlExecutor[K];
  return {
    dialect: 'sqlite',
    all: guarded('all'),
    get: guarded('get'),
    run: guarded('run'),
    exec: guarded('exec'),
    async tx(fn) {
      // Claim the connection in the same step as the check, so two waiters cannot both enter.
      while (txOpen) await txTail;
      txOpen = true;
      let release!: () => void;
      txTail = new Promise<void>((r) => (release = r));
      try {
        db.exec('BEGIN IMMEDIATE');
        try {
          const out = await fn(direct);
          db.exec('COMMIT');
          return out;
        } catch (e) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw e;
        }
      } finally {
        txOpen = false;
        release();
      }
    },
    async ping() {
      try {
        while (txOpen) await txTail;
        return prepare('SELECT 1 AS ok').get() !== undefined;
      } catch {
        return false;
      }
    },
    async close() {
      while (txOpen) await txTail;
      db.close();
    },
    description: memory ? 'sqlite::memory:' : `sqlite:${path}`,
  };
}

/** `?` → `$1, $2, …` */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

function pgParam(v: unknown): unknown {
  if (v === undefined) return null;
  if (typeof v === 'bigint') return v.toString();
  return v;
}

const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

async function openPostgres(url: string, options: OpenOptions): Promise<SqlDatabase> {
  const schema = options.schema;
  if (schema !== undefined && !SCHEMA_PATTERN.test(schema)) throw new RangeError(`schema: expected ${SCHEMA_PATTERN}, got '${schema}'`);
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  if (schema) {
    // Two processes creating the same schema at once: the loser's unique violation is harmless.
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch((e: { code?: string }) => {
      if (e.code !== '23505' && e.code !== '42P06') throw e;
    });
  }
  // Named statements: each connection parses and plans a statement once, then only binds
  // (the revocation check is one such statement on every wallet's and merchant's path).
  const statements = new Map<string, { name: string; text: string }>();
  const statement = (sql: string) => {
    let st = statements.get(sql);
    if (st === undefined) {
      st = { name: `ctl_${statements.size}`, text: numbered(sql) };
      statements.set(sql, st);
    }
    return st;
  };
  const on = (q: pg.Pool | pg.PoolClient): SqlExecutor => {
    const query = (sql: string, params: unknown[]) => q.query({ ...statement(sql), values: params.map(pgParam) });
    return {
      dialect: 'postgres',
      async all<T>(sql: string, params: unknown[] = []) {
        return (await query(sql, params)).rows as T[];
      },
      async get<T>(sql: string, params: unknown[] = []) {
        return (await query(sql, params)).rows[0] as T | undefined;
      },
      async run(sql: string, params: unknown[] = []) {
        return { changes: (await query(sql, params)).rowCount ?? 0 };
      },
      async exec(script: string) {
        await q.query(script);
      },
    };
  };
  const base = on(pool);
  return {
    ...base,
    async tx(fn, txOptions = {}) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        if (txOptions.lock) await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [txOptions.lock]);
        const out = await fn(on(client));
        await client.query('COMMIT');
        return out;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
    },
    async ping() {
      try {
        await pool.query('SELECT 1');
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      await pool.end();
    },
    description: redact(url) + (schema ? ` (schema ${schema})` : ''),
    listen: (channel, handlers) => sharedListener(url).subscribe(channel, handlers),
  };
}

/**
 * LISTEN connections, one per database URL per process (notifications are database-wide, so
 * every SqlDatabase of that URL shares it, whatever its schema): a process holds one listening
 * connection however many databases it opens, outside the pool (a pooled connection would be
 * lent to queries and its LISTEN lost), and hands each notification to all its subscribers in
 * one synchronous step.
 */
const listeners = new Map<string, { subscribe(channel: string, h: ListenHandlers): { close(): Promise<void> } }>();

/** How often the listening connection is probed, and how long a probe may take. */
const LISTEN_PROBE_MS = 5000;

function sharedListener(url: string) {
  const existing = listeners.get(url);
  if (existing) return existing;
  const subs = new Map<string, Set<ListenHandlers>>();
  const quote = (ch: string) => `"${ch.replace(/"/g, '""')}"`;
  let client: pg.Client | undefined;
  let live = false;
  let retry: NodeJS.Timeout | undefined;
  let probe: NodeJS.Timeout | undefined;
  let backoffMs = 100;
  const each = (f: (h: ListenHandlers) => void) => {
    for (const set of subs.values()) for (const h of set) f(h);
  };
  // Any error, end or failed probe of the current connection: subscribers hear `false` (they
  // must stop trusting what they cached), then it reconnects with backoff.
  const fail = (c: pg.Client) => {
    if (client !== c) return;
    client = undefined;
    clearInterval(probe);
    c.end().catch(() => {});
    if (live) each((h) => h.state(false));
    live = false;
    if (subs.size) {
      retry = setTimeout(connect, backoffMs);
      retry.unref();
      backoffMs = Math.min(backoffMs * 2, 5000);
    }
  };
  const connect = async () => {
    retry = undefined;
    // query_timeout bounds the probe: a silently dead TCP connection would otherwise keep
    // `live` true while notifications are lost.
    const c = new pg.Client({ connectionString: url, query_timeout: LISTEN_PROBE_MS, keepAlive: true, application_name: `ctl-listen-${process.pid}` });
    client = c;
    c.on('error', () => fail(c));
    c.on('end', () => fail(c));
    c.on('notification', (n) => {
      if (client === c && live) for (const h of subs.get(n.channel) ?? []) h.notify(n.payload ?? '');
    });
    try {
      await c.connect();
      // Channels subscribed while this runs are picked up by the next pass.
      const done = new Set<string>();
      for (let todo = [...subs.keys()]; todo.length; todo = [...subs.keys()].filter((ch) => !done.has(ch))) {
        for (const ch of todo) {
          await c.query(`LISTEN ${quote(ch)}`);
          done.add(ch);
        }
      }
      if (client !== c) return;
      live = true;
      backoffMs = 100;
      probe = setInterval(() => c.query('SELECT 1').catch(() => fail(c)), LISTEN_PROBE_MS);
      probe.unref();
      each((h) => h.state(true));
    } catch {
      fail(c);
    }
  };
  const self = {
    subscribe(channel: string, h: ListenHandlers) {
      let set = subs.get(channel);
      const fresh = !set;
      if (!set) subs.set(channel, (set = new Set()));
      set.add(h);
      if (!client && !retry) void connect();
      else if (client && live) {
        const c = client;
        // Already listening: LISTEN this channel too (when new), then this subscriber is live.
        void (fresh ? c.query(`LISTEN ${quote(channel)}`) : Promise.resolve()).then(
          () => client === c && live && set.has(h) && h.state(true),
          () => fail(c),
        );
      } // else connecting: `connect` LISTENs every channel, then tells every subscriber.
      return {
        async close() {
          if (!set.delete(h)) return;
          if (set.size === 0) subs.delete(channel);
          if (subs.size > 0) {
            if (set.size === 0 && client && live) await client.query(`UNLISTEN ${quote(channel)}`).catch(() => {});
            return;
          }
          // The last subscriber: no connection, no timers; a later subscribe starts afresh.
          listeners.delete(url);
          clearTimeout(retry);
          clearInterval(probe);
          const c = client;
          client = undefined;
          live = false;
          await c?.end().catch(() => {});
        },
      };
    },
  };
  listeners.set(url, self);
  return self;
}
