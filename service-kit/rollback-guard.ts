/**
 * A database restored from an older backup would let sessions spend again what they spent after
 * it. At start a service compares where its database stands (its audit chain head: every payment
 * and budget change appends to it) with high-water marks kept outside that database, and refuses
 * to serve while any mark is ahead of it, or names the same position with another hash (a
 * restore that has since moved on: a fork), until the operator confirms (docs/operations.md
 * "Restoring a backup").
 *
 * A mark source is anything that remembers a position the database reached: a file on other
 * storage (`fileHighWater`, kept current by `startHighWaterRecorder`), the webhook receivers'
 * last sequence, or a cosigned checkpoint of the verifiable log (service-kit/tlog/high-water.ts,
 * compared with the log's tree rather than the audit chain). They all plug in as `HighWaterSource`.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SqlDatabase } from './database.js';
import { checkTableName, type AuditLog } from './audit-log.js';
import { ConfigError } from './config.js';
import type { Logger } from './logger.js';

/**
 * A position in the audit chain: its sequence number and the entry hash there, and how many
 * entries were staged but not yet sealed into it (audit-log.ts: they take the next sequences).
 */
export interface ChainPosition {
  seq: number;
  hash: string;
  staged?: number;
}

/** A position the database reached, remembered elsewhere. */
export interface HighWaterSource {
  /** For the refusal message: where the mark was read (a file path, a witness URL). */
  readonly name: string;
  /** The newest position it knows, or undefined when it knows none yet. */
  read(): Promise<ChainPosition | undefined>;
  /**
   * The database's chain its marks are positions of, when not the audit chain the check is given
   * (the transparency log's tree: size and root, service-kit/tlog/high-water.ts).
   */
  readonly chain?: ChainReader;
  /** Words for the messages: the chain and its positions (default `audit chain`, `sequence`). */
  readonly terms?: { chain: string; position: string };
}

/** A source the service itself keeps current. */
export interface HighWaterSink extends HighWaterSource {
  record(p: ChainPosition): Promise<void>;
}

/** The database side of the comparison: its head, and the hash it holds at a sequence. */
export interface ChainReader {
  head(): Promise<ChainPosition | undefined>;
  hashAt(seq: number): Promise<string | undefined>;
}

/** A start refused because the database is behind (or beside) a mark; the CLI exits 3 on it. */
export class RollbackRefusedError extends Error {
  override readonly name = 'RollbackRefusedError';
}

/** The audit chain of `table` (audit-log.ts) as a ChainReader; `staged`: its staging table, if any. */
export function auditChainReader(db: SqlDatabase, table: string, staged?: string): ChainReader {
  checkTableName(table);
  if (staged) checkTableName(staged);
  return {
    async head() {
      const r = await db.get<{ seq: number | string; hash: string }>(
        `SELECT seq, hash FROM ${table} ORDER BY seq DESC LIMIT 1`,
      );
      const n = staged ? Number((await db.get<{ n: number | string }>(`SELECT count(*) AS n FROM ${staged}`))!.n) : 0;
      if (!r && !n) return undefined;
      return { seq: r ? Number(r.seq) : 0, hash: r?.hash ?? '', staged: n };
    },
    async hashAt(seq) {
      return (await db.get<{ hash: string }>(`SELECT hash FROM ${table} WHERE seq = ?`, [seq]))?.hash;
    },
  };
}

/** An audit log without staging (the authority's: every entry appended under the chain's lock). */
export function auditLogChainReader(audit: Pick<AuditLog, 'head' | 'list'>): ChainReader {
  return {
    async head() {
      const h = await audit.head();
      return h ? { seq: h.seq, hash: h.hash, staged: 0 } : undefined;
    },
    async hashAt(seq) {
      const [e] = await audit.list({ afterSeq: seq - 1, limit: 1 });
      return e?.seq === seq ? e.hash : undefined;
    },
  };
}

/** A JSON file `{ seq, hash }`, replaced atomically (write, then rename) at each record. */
export function fileHighWater(path: string): HighWaterSink {
  return {
    name: path,
    async read() {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
      const v = JSON.parse(text) as Partial<ChainPosition>;
      if (!Number.isSafeInteger(v.seq) || typeof v.hash !== 'string' || !Number.isSafeInteger(v.staged ?? 0))
        throw new RangeError(`${path}: not a high-water mark ({ seq, hash, staged })`);
      return { seq: v.seq!, hash: v.hash, staged: v.staged ?? 0 };
    },
    async record(p) {
      mkdirSync(dirname(path), { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, `${JSON.stringify({ seq: p.seq, hash: p.hash, staged: p.staged ?? 0 })}\n`, { mode: 0o600 });
      renameSync(tmp, path);
    },
  };
}

/**
 * Why the database may not serve, or undefined when every mark is at or behind its head on the
 * same chain.
 */
export async function rollbackFinding(chain: ChainReader, sources: HighWaterSource[]): Promise<string | undefined> {
  const end = (p: ChainPosition | undefined) => (p ? p.seq + (p.staged ?? 0) : 0);
  for (const s of sources) {
    const mark = await s.read();
    if (!mark) continue;
    const c = s.chain ?? chain;
    const t = s.terms ?? { chain: 'audit chain', position: 'sequence' };
    const head = await c.head();
    if (end(head) < end(mark))
      return (
        `the database's ${t.chain} ends at ${t.position} ${end(head)}, but ${s.name} saw ${t.position} ` +
        `${end(mark)}: it was restored from an older backup`
      );
    // Staged entries have no hash yet: the sealed part is compared where both have it.
    if (mark.seq > 0 && mark.seq <= head!.seq && (await c.hashAt(mark.seq)) !== mark.hash)
      return s.terms
        ? `the database's ${t.chain} at ${t.position} ${mark.seq} is not the one ${s.name} saw: ` +
            'it was restored from another history'
        : `the database's audit entry ${mark.seq} is not the one ${s.name} saw: ` +
            'it was restored from another history';
  }
  return undefined;
}

/**
 * The start-time check. Refuses (RollbackRefusedError naming `acceptVariable`) unless `accept`;
 * when accepted, the sinks are reset to the database's head, so the next start passes.
 */
export async function checkRollback(o: {
  chain: ChainReader;
  sources: HighWaterSource[];
  accept: boolean;
  acceptVariable: string;
  warn(message: string): void;
}): Promise<void> {
  const finding = await rollbackFinding(o.chain, o.sources);
  if (finding === undefined) return;
  if (!o.accept)
    throw new RollbackRefusedError(
      `${finding}. Payments made after that backup would be spendable again; see docs/operations.md ` +
        `"Restoring a backup", then start with ${o.acceptVariable}=1 to serve from this database`,
    );
  o.warn(`${finding}; serving anyway (${o.acceptVariable}=1)`);
  for (const s of o.sources) {
    const head = await (s.chain ?? o.chain).head();
    if (head && 'record' in s) await (s as HighWaterSink).record(head);
  }
}

/**
 * Keeps `sink` at the database's head: every `intervalMs`, and once more at `close()`. A backup
 * taken within the last interval may still pass the check; one older than that does not.
 */
export function startHighWaterRecorder(
  chain: ChainReader,
  sink: HighWaterSink,
  intervalMs = 1000,
  onError?: (e: unknown) => void,
) {
  let last = -1;
  let sealed = -1;
  let running: Promise<void> = Promise.resolve();
  const tick = () =>
    (running = running
      .then(async () => {
        const head = await chain.head();
        const end = head ? head.seq + (head.staged ?? 0) : -1;
        // Sealing moves entries from staged to the chain: recorded too, for the hash it gives.
        if (head && (end > last || head.seq > sealed)) {
          await sink.record(head);
          last = end;
          sealed = head.seq;
        }
      })
      .catch((e) => onError?.(e)));
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    async close() {
      clearInterval(timer);
      await tick();
    },
  };
}

/** The rollback check's settings: where the mark is kept, and whether the operator accepted a rollback. */
export interface RollbackOptions {
  /** The high-water file; default for a SQLite file, `<database>.high-water.json`; else none. */
  highWaterFile?: string;
  /** More marks to compare with (a witness, the verifiable log's newest cosigned checkpoint). */
  sources?: HighWaterSource[];
  accept?: boolean;
  /** The variable that consents, for the refusal message (`CTL_GATEWAY_ACCEPT_ROLLBACK`). */
  acceptVariable?: string;
}

/** `<prefix>_HIGH_WATER_FILE` and `<prefix>_ACCEPT_ROLLBACK` (1 or 0). */
export function rollbackOptionsFromEnv(env: Record<string, string | undefined>, prefix: string): RollbackOptions {
  const acceptVariable = `${prefix}_ACCEPT_ROLLBACK`;
  const a = env[acceptVariable]?.trim() ?? '';
  if (a !== '' && a !== '0' && a !== '1') throw new ConfigError(acceptVariable, `expected 1 or 0, got '${a}'`);
  const file = env[`${prefix}_HIGH_WATER_FILE`]?.trim();
  return { highWaterFile: file || undefined, accept: a === '1', acceptVariable };
}

/**
 * The start-time check on an open, migrated database, then the recorder that keeps the file
 * current (closed before the database). Throws RollbackRefusedError.
 */
export async function guardRollback(
  db: Pick<SqlDatabase, 'description'>,
  chain: ChainReader,
  o: RollbackOptions = {},
  logger?: Pick<Logger, 'warn'>,
): Promise<{ close(): Promise<void> } | undefined> {
  const file = highWaterFileOf(db, o);
  const sink = file ? fileHighWater(file) : undefined;
  const sources = [...(sink ? [sink] : []), ...(o.sources ?? [])];
  if (!sources.length) return undefined;
  await checkRollback({
    chain,
    sources,
    accept: o.accept ?? false,
    acceptVariable: o.acceptVariable ?? 'ACCEPT_ROLLBACK',
    warn: (m) => logger?.warn({ highWater: sources.map((s) => s.name) }, m),
  });
  // Every mark this service keeps itself is kept current from now on, each from its own chain.
  const recorders = sources
    .filter((s): s is HighWaterSink => 'record' in s)
    .map((s) =>
      startHighWaterRecorder(s.chain ?? chain, s, 1000, (e) =>
        logger?.warn({ err: e, file: s.name }, 'high-water mark not recorded'),
      ),
    );
  if (!recorders.length) return undefined;
  return {
    async close() {
      for (const r of recorders) await r.close();
    },
  };
}

/**
 * The audit chain's high-water file: as configured, else for a SQLite file `<database>.high-water.json`.
 * @example highWaterFileOf({ description: 'sqlite:/data/gw.db' }, {}) // '/data/gw.db.high-water.json'
 */
export function highWaterFileOf(db: Pick<SqlDatabase, 'description'>, o: RollbackOptions = {}): string | undefined {
  return (
    o.highWaterFile ??
    (db.description.startsWith('sqlite:') && db.description !== 'sqlite::memory:'
      ? `${db.description.slice('sqlite:'.length)}.high-water.json`
      : undefined)
  );
}
