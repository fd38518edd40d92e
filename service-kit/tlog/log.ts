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
import { canonicalize } from '../../src/index.js';
import type { SqlDatabase, SqlExecutor } from '../database.js';
import type { RowInsert } from '../row-insert.js';
import { checkTableName } from '../audit-log.js';
import {
  leafHash,
  parseCheckpoint,
  parseNote,
  proveConsistency,
  proveInclusion,
  signCheckpoint,
  treeRoot,
  type Checkpoint,
} from '../../src/entries/log.js';
import { chunks, createTileStore } from './store.js';
import { createSequencer } from './sequencer.js';
import type { NoteSigner } from './note-key.js';

/** One log entry: a typed envelope, logged as the UTF-8 bytes of its JCS (RFC 8785) text. */
export interface LogEntry {
  type: string;
  body: unknown;
}

/** An entry with the bytes encodeEntry gave for it, so that it is canonicalised once. */
export interface EncodedEntry extends LogEntry {
  readonly bytes: Buffer;
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
  row(entry: LogEntry | EncodedEntry, ref?: string): RowInsert;
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
  /**
   * Integrates what is pending, then signs and stores a checkpoint when the tree grew since the last
   * one (a run that started after the call); resolves to its size, or undefined.
   */
  publish(): Promise<number | undefined>;
  /**
   * The newest checkpoint whose witness round is over, with its cosignatures and when it was signed
   * (epoch ms); undefined before the first.
   */
  checkpoint(): Promise<{ size: number; note: string; at: number } | undefined>;
  /** The stored checkpoint of exactly `size` (with cosignatures), or undefined. */
  checkpointAt(size: number): Promise<string | undefined>;
  /** The integrated tree: size and root. */
  tree(q?: SqlExecutor): Promise<{ size: number; root: Buffer }>;
  /** The root of the first `size` entries, recomputed from the stored tiles (`size` at most the tree's). */
  rootAt(size: number): Promise<Buffer>;
  /** The first `width` hashes of tile `n` at `level`, or undefined when the tree does not have them yet. */
  tile(level: number, n: number, width: number): Promise<Buffer | undefined>;
  /** Entry bundle `n` of `width` entries, or undefined. */
  entryBundle(n: number, width: number): Promise<Buffer | undefined>;
  inclusion(index: number, size: number): Promise<InclusionAnswer>;
  consistency(from: number, to: number): Promise<Buffer[]>;
  close(): Promise<void>;
}

export function createTransparencyLog(options: TransparencyLogOptions): TransparencyLog {
  const { db, prefix: p, signer } = options;
  checkTableName(`${p}_split_views`);
  if (!signer.note) throw new RangeError('transparency log: the key must be an Ed25519 note key (type 0x01)');
  const noteSigner = signer.note;
  const now = options.now ?? Date.now;
  const tiles = createTileStore(db, p);
  const tree = tiles.tree;
  const proof = async (make: Promise<Uint8Array[]>) => (await make).map((h) => Buffer.from(h));
  /** RFC 9162 §2.1.4.1 from the stored tiles; none needed from the empty tree or to the same size. */
  const consistency = async (from: number, to: number) =>
    from === 0 || from === to ? [] : proof(proveConsistency(from, to, tiles.hashes(to, db)));
  const sequencer = createSequencer({
    db,
    prefix: p,
    tiles,
    batch: options.batch ?? 2048,
    gapMs: options.passGapMs ?? 5,
  });
  const sequence = sequencer.sequence;

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
    const r = await db.get<{ size: unknown; note: string; cosignatures: string; at: unknown }>(
      `SELECT size, note, cosignatures, at FROM ${p}_checkpoints ${where}`,
      params,
    );
    return r && { size: Number(r.size), note: r.note + r.cosignatures, at: Number(r.at) };
  }

  let publishing: Promise<number | undefined> | undefined;
  let publishQueued: Promise<number | undefined> | undefined;
  async function publishOnce(): Promise<number | undefined> {
    await sequence();
    const t = await tree();
    const last = await db.get<{ size: unknown }>(`SELECT MAX(size) AS size FROM ${p}_checkpoints`);
    if (last?.size != null && Number(last.size) >= t.size) return undefined;
    const note = await signCheckpoint({ origin: signer.name, size: t.size, rootHash: t.root }, [noteSigner]);
    // Several instances may sign the same tree: the same text, the same (deterministic) signature.
    const inserted = await db.run(
      `INSERT INTO ${p}_checkpoints (size, root, note, at, witnessed) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [t.size, t.root, note, now(), options.witnesses ? 0 : 1],
    );
    if (inserted.changes === 0 || !options.witnesses) return t.size;
    let lines = '';
    try {
      lines = await options.witnesses(note, t.size, (old) => consistency(old, t.size));
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
      const text = 'bytes' in entry && Buffer.isBuffer(entry.bytes) ? entry.bytes : encodeEntry(entry);
      if (text.length > 0xffff) throw new RangeError(`a log entry of ${text.length} bytes (65535 at most)`);
      return { table: `${p}_pending`, values: { ref: ref ?? null, entry: text.toString('utf8') } };
    },
    async append(q, entry, ref) {
      const r = this.row(entry, ref);
      await q.run(`INSERT INTO ${p}_pending (ref, entry) VALUES (?, ?)`, [r.values.ref, r.values.entry]);
    },
    sequence,
    kick: sequencer.kick,
    async indexOf(ref) {
      // The pass a commit kicked is usually running already and numbers this entry: wait for it
      // before asking for another.
      const mine = sequencer.remembered(ref);
      if (mine !== undefined) return mine;
      await sequencer.settled();
      const after = sequencer.remembered(ref);
      if (after !== undefined) return after;
      await sequence();
      return sequencer.remembered(ref) ?? (await indicesOf([ref])).get(ref);
    },
    indicesOf,
    publish() {
      // One at a time per process; a caller arriving during one waits for the next, which
      // covers every entry committed before it asked.
      if (!publishing) {
        publishing = publishOnce().finally(() => {
          publishing = undefined;
        });
        return publishing;
      }
      publishQueued ??= publishing
        .catch(() => undefined)
        .then(() => {
          publishQueued = undefined;
          return this.publish();
        });
      return publishQueued;
    },
    checkpoint: () => storedCheckpoint(`WHERE witnessed = 1 ORDER BY size DESC LIMIT 1`, []),
    checkpointAt: async (size) => (await storedCheckpoint(`WHERE size = ?`, [size]))?.note,
    tree: (q) => tree(q),
    rootAt: async (size) => Buffer.from(await treeRoot(size, tiles.hashes(size, db))),
    tile: tiles.tile,
    entryBundle: tiles.entryBundle,
    async inclusion(index, size) {
      const entry = await db.get<{ entry: string }>(`SELECT entry FROM ${p}_entries WHERE idx = ?`, [index]);
      if (!entry) throw new RangeError(`no entry ${index}`);
      const hashes = await proof(proveInclusion(index, size, tiles.hashes(size, db)));
      const hash = Buffer.from(leafHash(Buffer.from(entry.entry, 'utf8')));
      return { index, size, leafHash: hash, hashes, entry: entry.entry };
    },
    consistency: async (from, to) => {
      if (!(Number.isSafeInteger(from) && from >= 0 && from <= to))
        throw new RangeError(`size ${from} is not at most ${to}`);
      return consistency(from, to);
    },
    async close() {
      await sequencer.close();
      await publishQueued?.catch(() => {});
      await publishing?.catch(() => {});
    },
  };
}

/** The checkpoint of a note this log signed (its text only; signatures are the reader's to check). */
export function checkpointOfNote(note: string): Checkpoint | undefined {
  try {
    return parseCheckpoint(parseNote(note).text);
  } catch {
    return undefined;
  }
}
