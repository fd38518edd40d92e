/**
 * Reading a log's stored data: its tree row, its tiles (full tiles, immutable, cached in memory)
 * and its entry bundles; `chunks` splits multi-row statements into power-of-two sizes, so each
 * size is one prepared statement.
 */
import type { SqlDatabase, SqlExecutor } from '../database.js';
import {
  TILE_WIDTH,
  createTileHashReader,
  formatEntryBundle,
  type ReadHashes,
  type ReadTile,
} from '../../src/entries/log.js';
import { HASH_SIZE, type Tile } from './tiles.js';

const MAX_CHUNK = 256;
export function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let at = 0; at < items.length;) {
    let k = MAX_CHUNK;
    while (k > items.length - at) k /= 2;
    out.push(items.slice(at, at + k));
    at += k;
  }
  return out;
}

export const asBuffer = (v: unknown): Buffer => (Buffer.isBuffer(v) ? v : Buffer.from(v as Uint8Array));

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

export interface TileStore {
  /** The integrated tree: size and root. */
  tree(q?: SqlExecutor): Promise<{ size: number; root: Buffer }>;
  readTile(q: SqlExecutor, level: number, n: number): Promise<Tile | undefined>;
  /** Stored tiles as the SDK reads them (`ReadTile`), `overlay` first; a tile narrower than asked is an error. */
  reader(q: SqlExecutor, overlay?: Map<string, Tile>): ReadTile;
  /** The SDK's `readHashes` (prove.ts) for the tree of `size` entries, over `reader(q, overlay)`. */
  hashes(size: number, q: SqlExecutor, overlay?: Map<string, Tile>): ReadHashes;
  /** The first `width` hashes of tile `n` at `level`, or undefined. */
  tile(level: number, n: number, width: number): Promise<Buffer | undefined>;
  /** Entry bundle `n` of `width` entries, or undefined. */
  entryBundle(n: number, width: number): Promise<Buffer | undefined>;
}

export function createTileStore(db: SqlDatabase, p: string): TileStore {
  const fullTiles = lru<Buffer>(2048);
  const fullBundles = lru<Buffer>(64);
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
  const reader =
    (q: SqlExecutor, overlay?: Map<string, Tile>): ReadTile =>
    async ({ level, index: n, width }) => {
      if (level === 'entries') throw new Error('entry bundles are not hashes');
      const t = overlay?.get(`${level}/${n}`) ?? (await readTile(q, level, n));
      if (!t || t.width < width) throw new Error(`tile ${level}/${n}: ${t?.width ?? 0} hashes stored, ${width} needed`);
      return t.hashes.subarray(0, width * HASH_SIZE);
    };
  return {
    async tree(q = db) {
      const r = await q.get<{ size: unknown; root: unknown }>(`SELECT size, root FROM ${p}_tree WHERE id = 1`);
      if (!r) throw new Error(`${p}_tree: no row (migrations not run)`);
      return { size: Number(r.size), root: asBuffer(r.root) };
    },
    readTile,
    reader,
    hashes: (size, q, overlay) => createTileHashReader(size, reader(q, overlay)),
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
      const bundle = Buffer.from(formatEntryBundle(rows.map((r) => Buffer.from(r.entry, 'utf8'))));
      if (width === TILE_WIDTH) fullBundles.set(String(n), bundle);
      return bundle;
    },
  };
}
