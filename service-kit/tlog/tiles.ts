/**
 * The tiles a log stores (C2SP tlog-tiles: each holds up to 256 hashes of Merkle level 8·L) and
 * the ones that change when leaves are appended. Paths, entry bundles and hashing are the SDK's
 * (`ctl/log`).
 */
import { TILE_WIDTH, rootFromLeafHashes } from '../../src/entries/log.js';

/** Bytes per hash (SHA-256). */
export const HASH_SIZE = 32;

/** A tile as stored: `width` hashes (256 when full). */
export interface Tile {
  level: number;
  n: number;
  width: number;
  hashes: Buffer;
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

/** The root of a full tile's 256 hashes (the hash one level up): a perfect tree's RFC 6962 root. */
export function tileRoot(hashes: Uint8Array): Buffer {
  const layer: Uint8Array[] = [];
  for (let i = 0; i < TILE_WIDTH; i++) layer.push(hashes.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE));
  return Buffer.from(rootFromLeafHashes(layer));
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
