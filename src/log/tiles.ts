/**
 * C2SP tlog-tiles: the log served as static, cacheable files. A tile at level L holds up to 256
 * consecutive hashes of Merkle level 8·L (level 0: leaf hashes); the n-th tile at level L covers
 * the entries [n·256^(L+1), (n+1)·256^(L+1)). Paths are `tile/<L>/<N>[.p/<W>]` and
 * `tile/entries/<N>[.p/<W>]`, N written in 3-digit groups, all but the last prefixed `x`
 * (1234067 → `x001/x234/067`), `.p/<W>` for a partial tile of W < 256 hashes. An entry bundle is
 * its entries, each after a big-endian uint16 length.
 *
 * `createTileHashReader` turns a tile fetcher into the `readHashes` of prove.ts, so a client with
 * only the tiles (`ctl log audit`, a device) builds any proof a log could have served.
 */
import { malformed } from '../errors.js';
import { nodeHash, isCount, type Hash } from './merkle.js';
import type { NodeRef, ReadHashes } from './prove.js';

/** Hashes in a full tile, and the Merkle levels a tile spans. */
export const TILE_WIDTH = 256;
export const TILE_HEIGHT = 8;
/** The largest entry an entry bundle can hold (uint16 length). */
export const MAX_ENTRY_BYTES = 65535;

/** A tile of hashes (`level` 0–63) or an entry bundle (`level: 'entries'`); `width` 256 is a full tile. */
export interface TileRef {
  level: number | 'entries';
  index: number;
  width: number;
}

function indexPath(n: number): string {
  const group = (x: number) => String(x % 1000).padStart(3, '0');
  let out = group(n);
  for (n = Math.floor(n / 1000); n > 0; n = Math.floor(n / 1000)) out = `x${group(n)}/${out}`;
  return out;
}

/**
 * The path of a tile (C2SP tlog-tiles), relative to the log's prefix.
 * @example tilePath({ level: 0, index: 1234067, width: 256 }) // 'tile/0/x001/x234/067'
 * @example tilePath({ level: 'entries', index: 5, width: 12 }) // 'tile/entries/005.p/12'
 */
export function tilePath(tile: TileRef): string {
  const { level, index, width } = tile ?? ({} as TileRef);
  if (level !== 'entries' && !(Number.isInteger(level) && level >= 0 && level <= 63))
    throw new RangeError('tilePath: level 0–63 or "entries"');
  if (!isCount(index)) throw new RangeError('tilePath: index, a safe integer ≥ 0');
  if (!(Number.isInteger(width) && width >= 1 && width <= TILE_WIDTH)) throw new RangeError('tilePath: width 1–256');
  return `tile/${level}/${indexPath(index)}${width < TILE_WIDTH ? `.p/${width}` : ''}`;
}

/**
 * Reads a tile path back, strictly: only the one canonical spelling of each tile is accepted
 * (no leading zeros, no empty `x000/` group, width 1–255 after `.p/`). Throws `malformed`.
 * @example parseTilePath('tile/1/x001/002.p/17') // { level: 1, index: 1002, width: 17 }
 */
export function parseTilePath(path: string): TileRef {
  if (typeof path !== 'string' || path.length > 128) malformed('tile path: not a tile path');
  const m = /^tile\/(entries|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*)([0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/.exec(path);
  if (!m) malformed('tile path: not a tile path');
  const level = m[1] === 'entries' ? 'entries' : Number(m[1]);
  const digits = m[2]!.replace(/[x/]/g, '') + m[3]!;
  const index = Number(digits);
  const width = m[4] === undefined ? TILE_WIDTH : Number(m[4]);
  if (
    (level !== 'entries' && level > 63) ||
    (m[4] !== undefined && width >= TILE_WIDTH) ||
    !Number.isSafeInteger(index)
  )
    malformed('tile path: out of range');
  const tile: TileRef = { level, index, width };
  if (tilePath(tile) !== path) malformed('tile path: not canonical');
  return tile;
}

/**
 * An entry bundle: its entries, each after a big-endian uint16 length; at most 256. Throws `malformed`.
 * @example parseEntryBundle(formatEntryBundle([a, b])) // [a, b]
 */
export function parseEntryBundle(bundle: Uint8Array): Uint8Array[] {
  if (!(bundle instanceof Uint8Array)) malformed('entry bundle: not bytes');
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bundle.length) {
    if (out.length === TILE_WIDTH) malformed('entry bundle: more than 256 entries');
    if (at + 2 > bundle.length) malformed('entry bundle: truncated length');
    const len = bundle[at]! * 256 + bundle[at + 1]!;
    at += 2;
    if (at + len > bundle.length) malformed('entry bundle: truncated entry');
    out.push(bundle.slice(at, at + len));
    at += len;
  }
  return out;
}

/** The bytes of an entry bundle. @example formatEntryBundle([utf8Encode('a')]) // [0, 1, 97] */
export function formatEntryBundle(entries: readonly Uint8Array[]): Uint8Array {
  if (!Array.isArray(entries) || entries.length > TILE_WIDTH) throw new RangeError('formatEntryBundle: 0–256 entries');
  let total = 0;
  for (const e of entries) {
    if (!(e instanceof Uint8Array) || e.length > MAX_ENTRY_BYTES)
      throw new RangeError(`formatEntryBundle: each entry a Uint8Array of at most ${MAX_ENTRY_BYTES} bytes`);
    total += 2 + e.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const e of entries) {
    out[at] = e.length >> 8;
    out[at + 1] = e.length & 0xff;
    out.set(e, at + 2);
    at += 2 + e.length;
  }
  return out;
}

/**
 * The tile (with the width a tree of `size` entries gives it) that holds the hashes of Merkle
 * level 8·`tileLevel` from `first` on. Throws `RangeError` when the tree has no such tile.
 * @example tileFor(0, 70_000, 69_990) // { level: 0, index: 273, width: 112 }
 */
export function tileFor(tileLevel: number, size: number, first: number): TileRef {
  const span = 256 ** tileLevel; // entries under one hash of this tile level
  const index = Math.floor(first / TILE_WIDTH);
  const full = (index + 1) * TILE_WIDTH * span <= size;
  const width = full ? TILE_WIDTH : Math.floor(size / span) % TILE_WIDTH;
  if (!full && (Math.floor(size / span / TILE_WIDTH) !== index || width === 0))
    throw new RangeError(`tileFor: a tree of ${size} entries has no tile ${tileLevel}/${index}`);
  return { level: tileLevel, index, width };
}

/**
 * Every tile (and entry bundle) of a tree of `size` entries, as a client that mirrors or audits
 * the whole log fetches them: per level, the full tiles then the partial one, up to the level
 * whose tiles are all partial.
 * @example tilesOfTree(256).map(tilePath) // ['tile/0/000', 'tile/1/000.p/1', 'tile/entries/000']
 */
export function tilesOfTree(size: number): TileRef[] {
  if (!isCount(size)) throw new RangeError('tilesOfTree(size): a safe integer ≥ 0');
  const out: TileRef[] = [];
  const add = (level: number | 'entries', hashes: number) => {
    for (let n = 0; n < Math.floor(hashes / TILE_WIDTH); n++) out.push({ level, index: n, width: TILE_WIDTH });
    if (hashes % TILE_WIDTH) out.push({ level, index: Math.floor(hashes / TILE_WIDTH), width: hashes % TILE_WIDTH });
  };
  for (let level = 0, hashes = size; hashes > 0; level++, hashes = Math.floor(hashes / TILE_WIDTH)) add(level, hashes);
  add('entries', size);
  return out;
}

/** The hash of a perfect subtree from its 2^j hashes at its bottom level (pairwise, level by level). */
function perfectRoot(hashes: Hash[]): Hash {
  let level = hashes;
  while (level.length > 1) {
    const next: Hash[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(nodeHash(level[i]!, level[i + 1]!));
    level = next;
  }
  return level[0]!;
}

/** Fetches a tile's bytes (width × 32 of them): `tile/<level>/<index>[.p/<width>]`. */
export type ReadTile = (tile: TileRef) => Uint8Array | Promise<Uint8Array>;

/**
 * The `readHashes` of prove.ts over the tiles of a tree of `size` entries: a full subtree at level
 * l is read from the tile of level ⌊l/8⌋ (full, or partial as `size` makes it) and hashed up
 * from there. Each tile is fetched once per call, all in parallel. A tile of the wrong length
 * throws `malformed`; a wrong hash in a tile shows as a proof that does not verify.
 * @example const proof = await proveInclusion(i, cp.size, createTileHashReader(cp.size, (t) => get(tilePath(t))))
 */
export function createTileHashReader(size: number, readTile: ReadTile): ReadHashes {
  if (!isCount(size)) throw new RangeError('createTileHashReader(size): a safe integer ≥ 0');
  if (typeof readTile !== 'function') throw new TypeError('createTileHashReader(readTile): a function');
  return async (nodes: readonly NodeRef[]) => {
    const tiles = new Map<string, { tile: TileRef; bytes?: Promise<Uint8Array> }>();
    const plans = nodes.map(({ level, index }) => {
      if (!isCount(level) || !isCount(index) || (index + 1) * 2 ** level > size)
        throw new RangeError(`readHashes: ${level}/${index} is not a full subtree of a tree of ${size}`);
      const tileLevel = Math.floor(level / TILE_HEIGHT);
      const count = 2 ** (level - tileLevel * TILE_HEIGHT);
      const first = index * count;
      const tile = tileFor(tileLevel, size, first);
      const key = tilePath(tile);
      if (!tiles.has(key)) tiles.set(key, { tile });
      return { key, offset: first % TILE_WIDTH, count };
    });
    for (const t of tiles.values()) t.bytes = Promise.resolve(readTile(t.tile));
    const fetched = new Map<string, Uint8Array>();
    await Promise.all(
      [...tiles].map(async ([key, t]) => {
        const bytes = await t.bytes!;
        if (!(bytes instanceof Uint8Array) || bytes.length !== t.tile.width * 32)
          malformed(`${key}: expected ${t.tile.width * 32} bytes`);
        fetched.set(key, bytes);
      }),
    );
    return plans.map(({ key, offset, count }) => {
      const bytes = fetched.get(key)!;
      const hashes: Hash[] = [];
      for (let i = offset; i < offset + count; i++) hashes.push(bytes.slice(i * 32, i * 32 + 32));
      return perfectRoot(hashes);
    });
  };
}
