/**
 * C2SP tlog-tiles layout: tile paths (`tile/<L>/<N>[.p/<W>]`, `tile/entries/<N>[.p/<W>]`, N in
 * zero-padded 3-digit groups, all but the last prefixed `x`), entry bundles (big-endian uint16
 * length-prefixed entries) and the tiles that change when leaves are appended.
 */
import { HASH_SIZE, TILE_HEIGHT, TILE_WIDTH, nodeHash } from './merkle.js';

/** A tile as stored: `width` hashes (256 when full). */
export interface Tile {
  level: number;
  n: number;
  width: number;
  hashes: Buffer;
}

/** What a tile path names; `level` is 'entries' for an entry bundle. */
export interface TilePath {
  level: number | 'entries';
  n: number;
  /** The partial width (1…255), or 256 for a full tile. */
  width: number;
}

/** `1234067` → `x001/x234/067`. */
export function encodeTileIndex(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`tile index ${n}`);
  const groups: string[] = [];
  let rest = n;
  do {
    groups.unshift(String(rest % 1000).padStart(3, '0'));
    rest = Math.floor(rest / 1000);
  } while (rest > 0);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

export function tilePath(t: TilePath): string {
  return `tile/${t.level}/${encodeTileIndex(t.n)}${t.width < TILE_WIDTH ? `.p/${t.width}` : ''}`;
}

const TILE_PATH = /^tile\/(entries|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*)([0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/;

/** The tile a path (after the log's prefix) names, or undefined when it is not a tile path the spec allows. */
export function parseTilePath(path: string): TilePath | undefined {
  const m = TILE_PATH.exec(path);
  if (!m) return undefined;
  const level = m[1] === 'entries' ? 'entries' : Number(m[1]);
  if (level !== 'entries' && level > 63) return undefined;
  const groups = m[2]!
    .split('/')
    .filter(Boolean)
    .map((g) => g.slice(1));
  // No leading zero group: each index has exactly one path (`x000/001` is not 1).
  if (groups.length > 0 && groups[0] === '000') return undefined;
  // At most 2^53: five groups of three digits.
  if (groups.length > 4) return undefined;
  const n = Number([...groups, m[3]!].join(''));
  const width = m[4] === undefined ? TILE_WIDTH : Number(m[4]);
  if (width > 255 && m[4] !== undefined) return undefined;
  return { level, n, width };
}

/** Nodes complete at `level` in a tree of `size` leaves (each the root of 256^level leaves). */
export function nodesAt(size: number, level: number): number {
  return Math.floor(size / TILE_WIDTH ** level);
}

/** The right-edge (partial) tile at each level of a tree of `size` leaves: `{ level, n, width }`, width ≥ 1. */
export function partialTiles(size: number): Array<{ level: number; n: number; width: number }> {
  const out: Array<{ level: number; n: number; width: number }> = [];
  for (let level = 0; nodesAt(size, level) > 0; level++) {
    const count = nodesAt(size, level);
    if (count % TILE_WIDTH) out.push({ level, n: Math.floor(count / TILE_WIDTH), width: count % TILE_WIDTH });
  }
  return out;
}

/** The root of a full tile's 256 hashes (the hash one level up). */
export function tileRoot(hashes: Uint8Array): Buffer {
  let layer: Uint8Array[] = [];
  for (let i = 0; i < TILE_WIDTH; i++) layer.push(hashes.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE));
  for (let h = 0; h < TILE_HEIGHT; h++) {
    const up: Uint8Array[] = [];
    for (let i = 0; i < layer.length; i += 2) up.push(nodeHash(layer[i]!, layer[i + 1]!));
    layer = up;
  }
  return Buffer.from(layer[0]!);
}

/**
 * The tiles that change when `leaves` (leaf hashes) are appended to a tree of `size` leaves whose
 * right-edge tiles are `edge` (partialTiles(size), with their hashes): every tile touched, full
 * ones (width 256, never written again) and the new partial ones.
 */
export function appendToTiles(size: number, edge: readonly Tile[], leaves: readonly Buffer[]): Tile[] {
  const touched: Tile[] = [];
  let nodes: Buffer[] = [...leaves];
  for (let level = 0; nodes.length > 0; level++) {
    const count = nodesAt(size, level);
    let n = Math.floor(count / TILE_WIDTH);
    const have = count % TILE_WIDTH;
    const start = edge.find((t) => t.level === level && t.n === n);
    if (have > 0 && (!start || start.width !== have))
      throw new Error(`tile ${level}/${n}: expected ${have} stored hashes, found ${start?.width ?? 0}`);
    let current: Buffer[] = [];
    for (let i = 0; i < have; i++) current.push(start!.hashes.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE));
    const up: Buffer[] = [];
    for (const h of nodes) {
      current.push(h);
      if (current.length === TILE_WIDTH) {
        const hashes = Buffer.concat(current);
        touched.push({ level, n, width: TILE_WIDTH, hashes });
        up.push(tileRoot(hashes));
        current = [];
        n++;
      }
    }
    if (current.length > 0) touched.push({ level, n, width: current.length, hashes: Buffer.concat(current) });
    nodes = up;
  }
  return touched;
}

/** An entry bundle: each entry as a big-endian uint16 length, then its bytes. */
export function encodeEntryBundle(entries: readonly Uint8Array[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    if (e.length > 0xffff) throw new RangeError(`an entry of ${e.length} bytes does not fit a bundle (65535 at most)`);
    const len = Buffer.alloc(2);
    len.writeUInt16BE(e.length);
    parts.push(len, Buffer.from(e));
  }
  return Buffer.concat(parts);
}

/** The entries of a bundle; throws on a truncated one. */
export function decodeEntryBundle(bundle: Uint8Array): Buffer[] {
  const b = Buffer.from(bundle.buffer, bundle.byteOffset, bundle.byteLength);
  const out: Buffer[] = [];
  for (let at = 0; at < b.length;) {
    if (at + 2 > b.length) throw new RangeError('entry bundle: truncated length');
    const len = b.readUInt16BE(at);
    if (at + 2 + len > b.length) throw new RangeError('entry bundle: truncated entry');
    out.push(b.subarray(at + 2, at + 2 + len));
    at += 2 + len;
  }
  return out;
}
