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
import { createWalFlusher, type FlushFile, type WalFlusher } from './wal-flush.js';
import { startWalCheckpointer } from './wal-checkpointer.js';
import { HttpError } from './http-error.js';
import { DatabaseUnavailableError, isConnectionLoss } from './connection-loss.js';
import { createHostRotation, isHostFailure, isMultiHost, parsePostgresUrl, rotatingClient } from './pg-hosts.js';

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
  /**
   * One statement (its first row, as `get`) whose commit may be shared with concurrent ones:
   * group commit, so a hot row is locked and the log flushed once for many callers. It resolves
   * only once that commit is durable. `key` orders a group (its rows are locked in key order, so
   * two groups cannot deadlock on them): the id of the main row the statement locks.
   */
  getGrouped<T = Row>(key: string, sql: string, params?: unknown[]): Promise<T | undefined>;
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
  /** PostgreSQL only: the pool itself, for libraries that take one (rate-limit.ts). */
  readonly pgPool?: pg.Pool;
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
  /** SQLite file: how the WAL is flushed to disk (fdatasync on the thread pool); tests hold or fail it. */
  flushWal?: FlushFile;
}

/**
 * @example const db = await openDatabase(process.env.DATABASE_URL ?? 'sqlite:./data/authority.db')
 */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<SqlDatabase> {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length), options);
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

function openSqlite(path: string, options: OpenOptions = {}): SqlDatabase {
  const memory = path === ':memory:' || path === '';
  if (!memory) mkdirSync(dirname(resolve(path)), { recursive: true });
  const db = new Database(memory ? ':memory:' : path);
  // A file system without shared memory (some network mounts) refuses WAL: then no WAL to flush
  // or checkpoint, and SQLite's own FULL fsyncs each commit.
  const inWal = db.pragma('journal_mode = WAL', { simple: true }) === 'wal';
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  // A commit is on disk before anyone hears of it (a payment survives a power loss too), as with
  // `synchronous = FULL`; the flush that makes it so runs off the event loop (wal-flush.ts), so
  // SQLite itself does not fsync at COMMIT. In memory (journal mode 'memory') there is nothing to flush.
  db.pragma(inWal ? 'synchronous = NORMAL' : 'synchronous = FULL');
  const wal = inWal ? createWalFlusher(`${resolve(path)}-wal`, options.flushWal) : undefined;
  /** Waits until what the connection has written so far (all a caller may have seen) is durable. */
  const durableNow = (): Promise<void> | undefined => {
    if (!wal) return undefined;
    if (wal.failed !== undefined) return Promise.reject(wal.failed);
    return wal.latest > 0 ? wal.durable(wal.latest) : undefined;
  };
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
      return (s.reader ? s.get(...params.map(sqliteParam)) : (s.run(...params.map(sqliteParam)), undefined)) as
        T | undefined;
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
  // A statement outside a transaction autocommits when it writes; a read may see commits not yet
  // flushed. Either way the answer waits until what the connection has written is durable, so no
  // caller ever acts on a change a power loss could undo.
  const guarded = <K extends 'all' | 'get' | 'run' | 'exec'>(k: K) =>
    (async (...args: unknown[]) => {
      while (txOpen) await txTail;
      if (wal?.failed !== undefined) throw wal.failed;
      let out: unknown;
      try {
        out = await (direct[k] as (...a: unknown[]) => unknown)(...args);
      } catch (e) {
        // A refusal (a unique key taken) may rest on an unflushed commit as well.
        await durableNow()?.catch(() => {});
        throw e;
      }
      if (wal && (k === 'exec' || !prepare(args[0] as string).readonly)) wal.written();
      await durableNow();
      return out;
    }) as SqlExecutor[K];
  /** The connection to oneself until the returned release is called (a group, a checkpoint's restart). */
  async function claim() {
    // Claim the connection in the same step as the check, so two waiters cannot both enter.
    while (txOpen) await txTail;
    txOpen = true;
    let release!: () => void;
    txTail = new Promise<void>((r) => (release = r));
    return () => {
      txOpen = false;
      release();
    };
  }
  const group = sqliteGroupCommit(db, direct, wal, { claim });
  // Checkpoints on a worker thread, not inside a COMMIT on the event loop (wal-checkpointer.ts).
  const checkpointer = !inWal
    ? undefined
    : startWalCheckpointer(resolve(path), {
        selfCheckpoint: (on) => db.pragma(`wal_autocheckpoint = ${on ? 1000 : 0}`),
        claim,
      });
  return {
    dialect: 'sqlite',
    all: guarded('all'),
    get: guarded('get'),
    run: guarded('run'),
    exec: guarded('exec'),
    tx: (fn) => group.tx(fn),
    getGrouped: (_key, sql, params) => group.tx((q) => q.get(sql, params)),
    async ping() {
      try {
        while (txOpen) await txTail;
        if (wal?.failed !== undefined) return false;
        return prepare('SELECT 1 AS ok').get() !== undefined;
      } catch {
        return false;
      }
    },
    async close() {
      while (txOpen) await txTail;
      await checkpointer?.close();
      await wal?.close();
      db.close();
    },
    description: memory ? 'sqlite::memory:' : `sqlite:${path}`,
  };
}

/** One transaction's callback waiting for the next group commit, and how to answer it. */
interface PendingTx {
  fn: (q: SqlExecutor) => Promise<unknown>;
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

/**
 * Group commit for SQLite: the transactions requested while the connection is busy, or in the
 * same event-loop turn, run one after another inside one `BEGIN IMMEDIATE … COMMIT`, each in its
 * own SAVEPOINT (a callback that throws rolls back only its own writes). One COMMIT covers them
 * all, and every caller is answered only after the WAL flush that covers that COMMIT
 * (wal-flush.ts, on the thread pool: the next group runs meanwhile, and one flush often covers
 * several groups): what a caller was told is committed is durable. A later transaction of the
 * group sees the earlier ones' writes, exactly as if they had committed one by one before it.
 */
function sqliteGroupCommit(
  db: Database.Database,
  direct: SqlExecutor,
  wal: WalFlusher | undefined,
  conn: { claim(): Promise<() => void> },
) {
  let queue: PendingTx[] = [];
  let scheduled = false;
  const MAX_GROUP = 256;

  async function flush() {
    const unclaim = await conn.claim();
    const group = queue.slice(0, MAX_GROUP);
    queue = queue.slice(group.length);
    scheduled = false;
    const done: Array<{ p: PendingTx; ok: boolean; v: unknown }> = [];
    try {
      if (wal?.failed !== undefined) throw wal.failed;
      db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      for (const p of group) p.reject(e);
      unclaim();
      return schedule();
    }
    for (const p of group) {
      if (!db.inTransaction) {
        // A failure SQLite answers by rolling back the whole transaction (I/O, disk full): the
        // group so far is lost, so nothing of it may be reported committed.
        done.push({ p, ok: false, v: new Error('the group transaction was rolled back') });
        continue;
      }
      db.exec('SAVEPOINT ctl_tx');
      try {
        const v = await p.fn(direct);
        db.exec('RELEASE ctl_tx');
        done.push({ p, ok: true, v });
      } catch (e) {
        if (db.inTransaction) db.exec('ROLLBACK TO ctl_tx; RELEASE ctl_tx');
        done.push({ p, ok: false, v: e });
      }
    }
    let commitError: unknown;
    let mark = 0;
    try {
      if (!db.inTransaction) throw new Error('the group transaction was rolled back');
      db.exec('COMMIT');
      mark = wal?.written() ?? 0;
    } catch (e) {
      commitError = e;
      if (db.inTransaction) db.exec('ROLLBACK');
    }
    unclaim();
    // The next group may run while this one's flush is on the thread pool.
    schedule();
    // Nobody is answered, not even a refusal (it may rest on a commit of this group or an earlier
    // one), before what the connection has written is durable (wal-flush.ts).
    if (commitError === undefined && wal) {
      await wal.durable(Math.max(mark, wal.latest)).catch((e) => {
        commitError = e;
      });
    }
    for (const d of done) {
      if (!d.ok) d.p.reject(d.v);
      else if (commitError !== undefined) d.p.reject(commitError);
      else d.p.resolve(d.v);
    }
  }

  function schedule() {
    if (scheduled || queue.length === 0) return;
    scheduled = true;
    // After the I/O callbacks of this turn: concurrent requests join the same group.
    setImmediate(() => void flush());
  }

  return {
    tx<T>(fn: (q: SqlExecutor) => Promise<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
        schedule();
      });
    },
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

/**
 * Refusals of a new connection that mean "not now" rather than "never": the server is at
 * max_connections (53300) or is starting up or shutting down (57P03). Nothing ran, so the
 * attempt can simply be made again.
 */
const BUSY_SERVER = new Set(['53300', '57P03']);
/** How long a checkout keeps trying a busy server before its error reaches the caller. */
const BUSY_PATIENCE_MS = 10_000;

/** `e`, or a DatabaseUnavailableError around it when it is a connection loss. */
const asUnavailable = (e: unknown): unknown =>
  e instanceof DatabaseUnavailableError || !isConnectionLoss(e) ? e : new DatabaseUnavailableError(e);

/**
 * A pool whose checkouts wait out a busy server (BUSY_SERVER) with jittered backoff, instead of
 * failing the query at once: a burst of connections elsewhere on a shared server would otherwise
 * fail requests that a moment later would have run (and send rate limits to their per-instance
 * stand-in). `query` checks out through `connect`, so both paths wait.
 */
class PatientPool extends pg.Pool {
  /** How many hosts the URL names (pg-hosts.ts): a checkout that fails on one tries the next at once. */
  hostCount = 1;

  // pg-pool calls connect(callback) from query(); callers call connect() for a promise.
  override connect(): Promise<pg.PoolClient>;
  override connect(
    callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ): void;
  override connect(
    callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ): Promise<pg.PoolClient> | void {
    const checkout = this.checkoutPatiently();
    if (!callback) return checkout;
    checkout.then(
      (client) =>
        callback(undefined, client, (release?: unknown) => client.release(release as Error | boolean | undefined)),
      (err: Error) => callback(err, undefined, () => {}),
    );
  }

  private async checkoutPatiently(): Promise<pg.PoolClient> {
    const giveUpAt = Date.now() + BUSY_PATIENCE_MS;
    for (let delayMs = 20; ; delayMs = Math.min(delayMs * 2, 500)) {
      try {
        return await this.checkoutAnyHost();
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code === undefined || !BUSY_SERVER.has(code) || Date.now() + delayMs > giveUpAt) throw e;
        await new Promise((r) => setTimeout(r, delayMs / 2 + Math.random() * delayMs));
      }
    }
  }

  /**
   * Another host of the list may serve (a failover): each is tried once before the caller hears
   * `unavailable`, so no request waits on a promotion that may take long.
   */
  private async checkoutAnyHost(): Promise<pg.PoolClient> {
    for (let tried = 1; ; tried++) {
      try {
        return await super.connect();
      } catch (e) {
        if (!isHostFailure(e) || tried >= this.hostCount) throw e;
      }
    }
  }
}

async function openPostgres(url: string, options: OpenOptions): Promise<SqlDatabase> {
  const schema = options.schema;
  if (schema !== undefined && !SCHEMA_PATTERN.test(schema))
    throw new RangeError(`schema: expected ${SCHEMA_PATTERN}, got '${schema}'`);
  // node-postgres refuses a URL with several hosts: those are connected to one at a time (pg-hosts.ts).
  const rotation = isMultiHost(url) ? createHostRotation(parsePostgresUrl(url)) : undefined;
  const pool = new PatientPool({
    ...(rotation ? { Client: rotatingClient(rotation) } : { connectionString: url }),
    max: options.poolSize ?? 10,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  });
  pool.hostCount = rotation?.target.hosts.length ?? 1;
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // Nor may a checked-out client's: pg-pool listens to a client only while it is idle, and
  // pool.query's own listener is a `once`, gone before a terminated connection's second error
  // event. A listener for the client's whole life makes no error event unhandled; the failure
  // itself reaches the statement that was using the connection (its query fails, or the next
  // one: the client is then not queryable), and pg-pool discards the client on release.
  pool.on('connect', (client) => client.on('error', () => {}));
  if (schema) {
    // Two processes creating the same schema at once: IF NOT EXISTS does not serialise them, and
    // the loser's error code depends on where it lost; the schema being there is what counts.
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch(async (e: unknown) => {
      const found = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]).catch(() => undefined);
      if (!found?.rowCount) throw e;
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
    const query = (sql: string, params: unknown[]) =>
      q.query({ ...statement(sql), values: params.map(pgParam) }).catch((e: unknown) => {
        throw asUnavailable(e);
      });
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
        await q.query(script).catch((e: unknown) => {
          throw asUnavailable(e);
        });
      },
    };
  };
  const base = on(pool);
  const grouped = pgGroupCommit(pool, on, base);
  async function txOnce<T>(fn: (q: SqlExecutor) => Promise<T>, txOptions: { lock?: string }): Promise<T> {
    const client = await pool.connect().catch((e: unknown) => {
      throw asUnavailable(e);
    });
    // A checked-out client is outside the pool's error listener: a connection the server ends
    // between two queries (a restart) would be an unhandled 'error' and end the process. Heard
    // here, it fails this transaction (its next query throws) and the client is discarded.
    let lost: Error | undefined;
    const onError = (e: Error) => {
      lost = e;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      if (txOptions.lock) await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [txOptions.lock]);
      const out = await fn(on(client));
      await client.query('COMMIT');
      return out;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      // A transaction whose connection was lost failed for that, whatever plain error the
      // callback made of it; a refusal with a code (an HttpError, a protocol error) stands.
      const coded = e instanceof HttpError || typeof (e as { code?: unknown })?.code === 'string';
      throw lost !== undefined && !coded ? new DatabaseUnavailableError(lost) : asUnavailable(e);
    } finally {
      client.off('error', onError);
      client.release(lost);
    }
  }

  return {
    ...base,
    getGrouped: grouped.get,
    tx: (fn, txOptions = {}) => retryDeadlock(() => txOnce(fn, txOptions)),
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
    pgPool: pool,
  };
}

/**
 * PostgreSQL aborts one transaction of a lock cycle (40P01) and, at higher isolation, one of a
 * serialization conflict (40001); the aborted one changed nothing, and the documented answer is
 * to run it again. Locks taken in key order make cycles rare, not impossible: a group of
 * statements on several sessions and a payment charged up a chain of sessions lock rows that
 * no single order covers.
 */
async function retryDeadlock<T>(run: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await run();
    } catch (e) {
      const code = (e as { code?: unknown; cause?: { code?: unknown } })?.code;
      const causeCode = (e as { cause?: { code?: unknown } })?.cause?.code;
      const aborted = [code, causeCode].some((c) => c === '40P01' || c === '40001');
      if (!aborted || i >= attempts) throw e;
      await new Promise((r) => setTimeout(r, Math.random() * 10 * i));
    }
  }
}

/** One statement waiting for the next PostgreSQL group. */
interface PendingStatement {
  key: string;
  sql: string;
  params: unknown[];
  resolve(row: unknown): void;
  reject(e: unknown): void;
}

/**
 * Group commit for PostgreSQL: statements that arrive while groups are in flight (or in the same
 * event-loop turn) run in one transaction on one connection, ordered by key, and are answered
 * after its COMMIT: one WAL flush, and a hot session row locked once, for many payments. When a
 * statement fails the group is rolled back and each statement runs again on its own (an error
 * is then its own, and nothing of the group was committed). A COMMIT that fails rejects the group,
 * as the failed COMMIT of a single statement would.
 */
function pgGroupCommit(pool: pg.Pool, on: (c: pg.PoolClient) => SqlExecutor, alone: SqlExecutor) {
  const MAX_IN_FLIGHT = 2;
  const MAX_GROUP = 128;
  let queue: PendingStatement[] = [];
  let inFlight = 0;
  let scheduled = false;

  async function runGroup(group: PendingStatement[]) {
    if (group.length === 1) {
      // Alone: its own autocommit, without the round trips of BEGIN and COMMIT.
      const s = group[0]!;
      return retryDeadlock(() => alone.get(s.sql, s.params)).then(s.resolve, s.reject);
    }
    group.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    let rows: unknown[] | undefined;
    let client: pg.PoolClient | undefined;
    try {
      client = await pool.connect();
      const q = on(client);
      await client.query('BEGIN');
      const out: unknown[] = [];
      try {
        for (const s of group) out.push(await q.get(s.sql, s.params));
      } catch {
        await client.query('ROLLBACK').catch(() => {});
      }
      if (out.length === group.length) {
        await client.query('COMMIT');
        rows = out;
      }
    } catch (e) {
      // Connection lost or COMMIT refused: the outcome of the group is that of a failed commit.
      client?.release(true);
      client = undefined;
      for (const s of group) s.reject(asUnavailable(e));
      return;
    } finally {
      client?.release();
    }
    if (rows) group.forEach((s, i) => s.resolve(rows![i]));
    else for (const s of group) retryDeadlock(() => alone.get(s.sql, s.params)).then(s.resolve, s.reject);
  }

  function pump() {
    scheduled = false;
    while (inFlight < MAX_IN_FLIGHT && queue.length) {
      const group = queue.slice(0, MAX_GROUP);
      queue = queue.slice(group.length);
      inFlight++;
      void runGroup(group).finally(() => {
        inFlight--;
        schedule();
      });
    }
  }

  function schedule() {
    if (scheduled || queue.length === 0 || inFlight >= MAX_IN_FLIGHT) return;
    scheduled = true;
    // After the I/O callbacks of this turn: concurrent requests join the same group.
    setImmediate(pump);
  }

  return {
    get<T>(key: string, sql: string, params: unknown[] = []): Promise<T | undefined> {
      return new Promise<T | undefined>((resolve, reject) => {
        queue.push({ key, sql, params, resolve: resolve as (row: unknown) => void, reject });
        schedule();
      });
    },
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
  // Several hosts: LISTEN where writes (and so NOTIFYs) happen; a standby refuses LISTEN anyway.
  const Client = isMultiHost(url) ? rotatingClient(createHostRotation(parsePostgresUrl(url))) : pg.Client;
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
    const c = new Client({
      connectionString: url,
      query_timeout: LISTEN_PROBE_MS,
      keepAlive: true,
      application_name: `ctl-listen-${process.pid}`,
    });
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
