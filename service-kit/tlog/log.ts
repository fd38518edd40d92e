/**
 * An append-only RFC 6962 / RFC 9162 log of a service's records in its own database (SQLite or
 * PostgreSQL), served as C2SP tlog-tiles with C2SP tlog-checkpoint signed notes.
 *
 * Appending is a row in `<prefix>_pending`, written in the transaction of the record it logs
 * (`append(q, …)`, or `row(…)` folded into the change's own statement): no record commits
 * without its entry, and writers take no lock. Indices are given by a sequencer, as Sunlight and
 * tessera do it: `sequence()` takes the log's lock (a PostgreSQL advisory lock held to commit;
 * SQLite's single writer), reads the committed pending entries in id order, numbers them from the
 * tree's size on, writes them to `<prefix>_entries` with the tiles they change and the new size
 * and root, and deletes exactly the pending rows it numbered — all in one transaction. So the
 * indices are gapless and unique whatever number of instances share the database, an entry's
 * index never changes once given, and a crash at any point leaves either the whole pass or none
 * of it. (Numbering inside each record's transaction instead would serialise every payment of
 * every instance on one counter row until its commit.) A pending id is only an order hint:
 * PostgreSQL ids can commit out of order, and a late one simply gets the next index.
 *
 * `publish()` signs a checkpoint of the integrated tree when it grew (server.ts runs it at least
 * every second while entries arrive), asks the configured witnesses to cosign it, and stores it:
 * `/log/checkpoint` serves the newest whose witness round is over.
 */
import { canonicalize } from '../../src/encoding/jcs.js';
import type { SqlDatabase, SqlExecutor } from '../database.js';
import type { RowInsert } from '../row-insert.js';
import { checkTableName } from '../audit-log.js';
import {
  HASH_SIZE,
  TILE_WIDTH,
  consistencyProof,
  inclusionProof,
  leafHash,
  treeRoot,
  type TileRead,
} from './merkle.js';
import { appendToTiles, encodeEntryBundle, partialTiles, type Tile } from './tiles.js';
import { parseCheckpointText, signCheckpoint, type NoteSigner } from './note.js';

/** One log entry: a typed envelope, logged as the UTF-8 bytes of its JCS (RFC 8785) text. */
export interface LogEntry {
  type: string;
  body: unknown;
}

/** The bytes a log entry is hashed and served as. */
export function encodeEntry(e: LogEntry): Buffer {
  return Buffer.from(canonicalize({ type: e.type, body: e.body }), 'utf8');
}

/** What a witness answered for a checkpoint (witness.ts submitToWitnesses). */
export type WitnessRound = (
  note: string,
  size: number,
  proofFrom: (old: number) => Promise<Buffer[]>,
) => Promise<string>;

export interface TransparencyLogOptions {
  db: SqlDatabase;
  /** Table prefix (schema.ts), e.g. `gw_log`. */
  prefix: string;
  signer: NoteSigner;
  now?: () => number;
  /** Entries numbered per sequencing transaction (default 2048). */
  batch?: number;
  /** Least time between the starts of two sequencing passes of this process (default 5 ms). */
  passGapMs?: number;
  /** Collects witness cosignature lines for a new checkpoint (witness.ts); none: no witnesses. */
  witnesses?: WitnessRound;
}

export interface InclusionAnswer {
  index: number;
  size: number;
  leafHash: Buffer;
  hashes: Buffer[];
  entry: string;
}

export interface TransparencyLog {
  readonly origin: string;
  readonly vkey: string;
  readonly prefix: string;
  /** The pending row of `entry`, to write in the record's own transaction or statement; `ref` finds it again. */
  row(entry: LogEntry, ref?: string): RowInsert;
  /** Writes `entry` in the transaction `q` of the record it logs. */
  append(q: SqlExecutor, entry: LogEntry, ref?: string): Promise<void>;
  /** Integrates every committed pending entry; resolves to the tree size after a pass that started after the call. */
  sequence(): Promise<number>;
  /** Asks for a sequencing pass soon (after a commit that appended), without waiting for it. */
  kick(): void;
  /** The index of the first entry with `ref`, once sequenced (waits for one pass); undefined when there is none. */
  indexOf(ref: string): Promise<number | undefined>;
  /** The indices of sequenced entries by ref, no waiting. */
  indicesOf(refs: readonly string[]): Promise<Map<string, number>>;
  /** Signs and stores a checkpoint when the tree grew since the last one; resolves to its size, or undefined. */
  publish(): Promise<number | undefined>;
  /** The newest checkpoint whose witness round is over, with its cosignatures; undefined before the first. */
  checkpoint(): Promise<{ size: number; note: string } | undefined>;
  /** The stored checkpoint of exactly `size` (with cosignatures), or undefined. */
  checkpointAt(size: number): Promise<string | undefined>;
  /** The integrated tree: size and root. */
  tree(q?: SqlExecutor): Promise<{ size: number; root: Buffer }>;
  /** The first `width` hashes of tile `n` at `level`, or undefined when the tree does not have them yet. */
  tile(level: number, n: number, width: number): Promise<Buffer | undefined>;
  /** Entry bundle `n` of `width` entries, or undefined. */
  entryBundle(n: number, width: number): Promise<Buffer | undefined>;
  inclusion(index: number, size: number): Promise<InclusionAnswer>;
  consistency(from: number, to: number): Promise<Buffer[]>;
  close(): Promise<void>;
}

/** Statements take at most this many rows, in power-of-two chunks, so each size is one prepared statement. */
const MAX_CHUNK = 256;
function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let at = 0; at < items.length;) {
    let k = MAX_CHUNK;
    while (k > items.length - at) k /= 2;
    out.push(items.slice(at, at + k));
    at += k;
  }
  return out;
}

const asBuffer = (v: unknown): Buffer => (Buffer.isBuffer(v) ? v : Buffer.from(v as Uint8Array));

/** A small least-recently-used map for immutable things (full tiles, full entry bundles). */
function lru<V>(max: number) {
  const m = new Map<string, V>();
  return {
    get(k: string) {
      const v = m.get(k);
      if (v !== undefined) {
        m.delete(k);
        m.set(k, v);
      }
      return v;
    },
    set(k: string, v: V) {
      m.set(k, v);
      if (m.size > max) m.delete(m.keys().next().value as string);
    },
  };
}

export function createTransparencyLog(options: TransparencyLogOptions): TransparencyLog {
  const { db, prefix: p, signer } = options;
  checkTableName(`${p}_split_views`);
  const now = options.now ?? Date.now;
  const batch = options.batch ?? 2048;
  const gapMs = options.passGapMs ?? 5;
  const fullTiles = lru<Buffer>(2048);
  const fullBundles = lru<Buffer>(64);
  let closed = false;

  async function readTile(q: SqlExecutor, level: number, n: number): Promise<Tile | undefined> {
    const cached = fullTiles.get(`${level}/${n}`);
    if (cached) return { level, n, width: TILE_WIDTH, hashes: cached };
    const r = await q.get<{ width: number; hashes: unknown }>(
      `SELECT width, hashes FROM ${p}_tiles WHERE level = ? AND n = ?`,
      [level, n],
    );
    if (!r) return undefined;
    const t = { level, n, width: Number(r.width), hashes: asBuffer(r.hashes) };
    if (t.width === TILE_WIDTH) fullTiles.set(`${level}/${n}`, t.hashes);
    return t;
  }

  /** Tile hashes from the database, refusing a tile narrower than asked (a damaged or unsequenced tree). */
  const reader =
    (q: SqlExecutor, overlay?: Map<string, Tile>): TileRead =>
    async (level, n, width) => {
      const t = overlay?.get(`${level}/${n}`) ?? (await readTile(q, level, n));
      if (!t || t.width < width) throw new Error(`tile ${level}/${n}: ${t?.width ?? 0} hashes stored, ${width} needed`);
      return t.hashes;
    };

  async function tree(q: SqlExecutor = db) {
    const r = await q.get<{ size: unknown; root: unknown }>(`SELECT size, root FROM ${p}_tree WHERE id = 1`);
    if (!r) throw new Error(`${p}_tree: no row (migrations not run)`);
    return { size: Number(r.size), root: asBuffer(r.root) };
  }

  // The indices this process's passes gave, by ref (bounded): a paid answer finds its receipt's
  // index here without a query.
  const recent = new Map<string, number>();
  const remember = (ref: string | null, idx: number) => {
    if (ref === null) return;
    recent.set(ref, idx);
    if (recent.size > 16384) recent.delete(recent.keys().next().value as string);
  };
  // The tree this process last wrote: its tiles need no re-check before the next pass extends it.
  let lastWritten: { size: number; root: Buffer } | undefined;

  /** One sequencing transaction: up to `batch` pending entries numbered; resolves to the new size and how many. */
  async function integrate(): Promise<{ size: number; added: number }> {
    const r = await db.tx(
      async (q) => {
        const t = await tree(q);
        // Taken in one statement: exactly the rows read are deleted, and only if this transaction
        // commits with their numbering (a row committed meanwhile waits for the next pass).
        const pending = (
          await q.all<{ id: unknown; ref: string | null; entry: string }>(
            `DELETE FROM ${p}_pending WHERE id IN (SELECT id FROM ${p}_pending ORDER BY id LIMIT ${batch})
             RETURNING id, ref, entry`,
          )
        ).sort((x, y) => Number(x.id) - Number(y.id));
        if (pending.length === 0) return { size: t.size, root: undefined, added: 0, numbered: undefined };
        const edge: Tile[] = [];
        const wanted = partialTiles(t.size);
        // The right edge in one statement (full tiles of it come from the cache).
        const where = wanted.map(() => '(level = ? AND n = ?)').join(' OR ');
        const rows = wanted.length
          ? await q.all<{ level: unknown; n: unknown; width: unknown; hashes: unknown }>(
              `SELECT level, n, width, hashes FROM ${p}_tiles WHERE ${where}`,
              wanted.flatMap((w) => [w.level, w.n]),
            )
          : [];
        const stored = new Map(
          rows.map((r) => [
            `${Number(r.level)}/${Number(r.n)}`,
            { level: Number(r.level), n: Number(r.n), width: Number(r.width), hashes: asBuffer(r.hashes) },
          ]),
        );
        for (const want of wanted) {
          const got = stored.get(`${want.level}/${want.n}`);
          if (!got || got.width !== want.width)
            throw new Error(
              `${p}: tile ${want.level}/${want.n} has ${got?.width ?? 0} hashes, the tree needs ${want.width}`,
            );
          edge.push({ ...got, width: want.width, hashes: got.hashes.subarray(0, want.width * HASH_SIZE) });
        }
        const edgeMap = new Map(edge.map((e) => [`${e.level}/${e.n}`, e]));
        // The stored right edge must give the stored root: never extend a tree that does not add up
        // (checked whenever another writer, or nobody in this process, wrote the tree last).
        const known = lastWritten && lastWritten.size === t.size && lastWritten.root.equals(t.root);
        if (!known && !(await treeRoot(reader(q, edgeMap), t.size)).equals(t.root))
          throw new Error(`${p}: the stored tiles do not hash to the stored root at size ${t.size}`);
        const leaves = pending.map((e) => leafHash(Buffer.from(e.entry, 'utf8')));
        const touched = appendToTiles(t.size, edge, leaves);
        const size = t.size + pending.length;
        for (const x of touched) edgeMap.set(`${x.level}/${x.n}`, x);
        const root = await treeRoot(reader(q, edgeMap), size);
        const numbered = pending.map((e, i) => [t.size + i, e.ref, e.entry] as const);
        for (const c of chunks(numbered))
          await q.run(
            `INSERT INTO ${p}_entries (idx, ref, entry) VALUES ${c.map(() => '(?, ?, ?)').join(', ')}`,
            c.flat(),
          );
        for (const c of chunks(touched))
          await q.run(
            `INSERT INTO ${p}_tiles (level, n, width, hashes) VALUES ${c.map(() => '(?, ?, ?, ?)').join(', ')}
             ON CONFLICT (level, n) DO UPDATE SET width = excluded.width, hashes = excluded.hashes`,
            c.flatMap((x) => [x.level, x.n, x.width, x.hashes]),
          );
        const moved = await q.run(`UPDATE ${p}_tree SET size = ?, root = ? WHERE id = 1 AND size = ?`, [
          size,
          root,
          t.size,
        ]);
        if (moved.changes !== 1) throw new Error(`${p}: the tree moved under the sequencer's lock`);
        return { size, root, added: pending.length, numbered };
      },
      { lock: `${p}_sequencer` },
    );
    // Only once committed: a pass that rolled back gave no index.
    if (r.added > 0) {
      lastWritten = { size: r.size, root: r.root! };
      for (const [idx, ref] of r.numbered!) remember(ref, idx);
    }
    return { size: r.size, added: r.added };
  }

  // One pass at a time per process; a caller arriving during a pass waits for the next one, which
  // sees every entry committed before that caller asked.
  let running: Promise<number> | undefined;
  let queued: Promise<number> | undefined;
  // Passes start at most every `gapMs`: under load one pass numbers the entries of many commits
  // (each pass is a transaction of several statements), at the price of that much latency.
  let lastStart = 0;
  const runPass = async (): Promise<number> => {
    const wait = lastStart + gapMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    lastStart = performance.now();
    for (;;) {
      const r = await integrate();
      if (r.added < batch || closed) return r.size;
    }
  };
  function sequence(): Promise<number> {
    if (!running) {
      running = runPass().finally(() => {
        running = undefined;
      });
      return running;
    }
    if (!queued) {
      queued = running
        .catch(() => 0)
        .then(() => {
          queued = undefined;
          return sequence();
        });
    }
    return queued;
  }
  let kicked = false;

  async function indicesOf(refs: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const c of chunks([...new Set(refs)])) {
      const rows = await db.all<{ ref: string; idx: unknown }>(
        `SELECT ref, MIN(idx) AS idx FROM ${p}_entries WHERE ref IN (${c.map(() => '?').join(', ')}) GROUP BY ref`,
        c,
      );
      for (const r of rows) out.set(r.ref, Number(r.idx));
    }
    return out;
  }

  async function storedCheckpoint(where: string, params: unknown[]) {
    const r = await db.get<{ size: unknown; note: string; cosignatures: string }>(
      `SELECT size, note, cosignatures FROM ${p}_checkpoints ${where}`,
      params,
    );
    return r && { size: Number(r.size), note: r.note + r.cosignatures };
  }

  let publishing: Promise<number | undefined> | undefined;
  async function publishOnce(): Promise<number | undefined> {
    await sequence();
    const t = await tree();
    const last = await db.get<{ size: unknown }>(`SELECT MAX(size) AS size FROM ${p}_checkpoints`);
    if (last?.size != null && Number(last.size) >= t.size) return undefined;
    const note = signCheckpoint({ origin: signer.name, size: t.size, root: t.root, extensions: [] }, signer);
    // Several instances may sign the same tree: the same text, the same (deterministic) signature.
    const inserted = await db.run(
      `INSERT INTO ${p}_checkpoints (size, root, note, at, witnessed) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [t.size, t.root, note, now(), options.witnesses ? 0 : 1],
    );
    if (inserted.changes === 0 || !options.witnesses) return t.size;
    let lines = '';
    try {
      lines = await options.witnesses(note, t.size, (old) => consistencyProof(reader(db), old, t.size));
    } finally {
      await db.run(`UPDATE ${p}_checkpoints SET cosignatures = ?, witnessed = 1 WHERE size = ?`, [lines, t.size]);
    }
    return t.size;
  }

  return {
    origin: signer.name,
    vkey: signer.vkey,
    prefix: p,
    row(entry, ref) {
      const text = encodeEntry(entry);
      if (text.length > 0xffff) throw new RangeError(`a log entry of ${text.length} bytes (65535 at most)`);
      return { table: `${p}_pending`, values: { ref: ref ?? null, entry: text.toString('utf8') } };
    },
    async append(q, entry, ref) {
      const r = this.row(entry, ref);
      await q.run(`INSERT INTO ${p}_pending (ref, entry) VALUES (?, ?)`, [r.values.ref, r.values.entry]);
    },
    sequence,
    kick() {
      if (kicked || closed) return;
      kicked = true;
      setImmediate(() => {
        kicked = false;
        sequence().catch(() => {});
      });
    },
    async indexOf(ref) {
      const mine = recent.get(ref);
      if (mine !== undefined) return mine;
      await sequence();
      return recent.get(ref) ?? (await indicesOf([ref])).get(ref);
    },
    indicesOf,
    publish() {
      publishing ??= publishOnce().finally(() => {
        publishing = undefined;
      });
      return publishing;
    },
    checkpoint: () => storedCheckpoint(`WHERE witnessed = 1 ORDER BY size DESC LIMIT 1`, []),
    checkpointAt: async (size) => (await storedCheckpoint(`WHERE size = ?`, [size]))?.note,
    tree: (q) => tree(q),
    async tile(level, n, width) {
      const t = await readTile(db, level, n);
      if (!t || t.width < width) return undefined;
      return t.hashes.subarray(0, width * HASH_SIZE);
    },
    async entryBundle(n, width) {
      const cached = width === TILE_WIDTH ? fullBundles.get(String(n)) : undefined;
      if (cached) return cached;
      const rows = await db.all<{ entry: string }>(
        `SELECT entry FROM ${p}_entries WHERE idx >= ? AND idx < ? ORDER BY idx`,
        [n * TILE_WIDTH, n * TILE_WIDTH + width],
      );
      if (rows.length < width) return undefined;
      const bundle = encodeEntryBundle(rows.map((r) => Buffer.from(r.entry, 'utf8')));
      if (width === TILE_WIDTH) fullBundles.set(String(n), bundle);
      return bundle;
    },
    async inclusion(index, size) {
      const entry = await db.get<{ entry: string }>(`SELECT entry FROM ${p}_entries WHERE idx = ?`, [index]);
      if (!entry) throw new RangeError(`no entry ${index}`);
      const hashes = await inclusionProof(reader(db), index, size);
      return { index, size, leafHash: leafHash(Buffer.from(entry.entry, 'utf8')), hashes, entry: entry.entry };
    },
    consistency: (from, to) => consistencyProof(reader(db), from, to),
    async close() {
      closed = true;
      await running?.catch(() => {});
      await publishing?.catch(() => {});
    },
  };
}

/** The checkpoint of a note this log signed (its text only; signatures are the reader's to check). */
export function checkpointOfNote(note: string) {
  return parseCheckpointText(note.slice(0, note.indexOf('\n\n') + 1));
}
