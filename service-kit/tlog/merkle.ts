/**
 * RFC 6962 / RFC 9162 Merkle tree hashing over SHA-256 (RFC 9162 §2.1.1): a leaf hashes as
 * SHA-256(0x00 ‖ entry), an interior node as SHA-256(0x01 ‖ left ‖ right), the empty tree as
 * SHA-256(""). A tree of `n` leaves splits at the largest power of two below `n`, so every
 * subtree the log reads is either a perfect, aligned one (a node stored in a tile, tlog-tiles) or
 * is made of them. Proofs follow RFC 9162 §2.1.3.1 (PATH) and §2.1.4.1 (SUBPROOF).
 */
import { createHash } from 'node:crypto';

export const HASH_SIZE = 32;
/** Hashes per full tile (C2SP tlog-tiles: a tile is a subtree of height 8). */
export const TILE_WIDTH = 256;
export const TILE_HEIGHT = 8;

export function leafHash(entry: Uint8Array): Buffer {
  return createHash('sha256').update(Buffer.of(0)).update(entry).digest();
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return createHash('sha256').update(Buffer.of(1)).update(left).update(right).digest();
}

export const EMPTY_ROOT: Buffer = createHash('sha256').digest();

/** The largest power of two strictly below `n` (n ≥ 2). */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * Reads tile hashes: the first `width` node hashes of tile `n` at `level` (a level-L hash is the
 * root of a perfect subtree of 256^L leaves). Resolves to at least `width * 32` bytes.
 */
export type TileRead = (level: number, n: number, width: number) => Promise<Uint8Array>;

/** The root of the perfect subtree of 2^height leaves starting at leaf `index * 2^height`. */
export async function perfectNode(read: TileRead, height: number, index: number): Promise<Buffer> {
  const level = Math.floor(height / TILE_HEIGHT);
  const span = 2 ** (height % TILE_HEIGHT);
  const first = index * span;
  const n = Math.floor(first / TILE_WIDTH);
  const offset = first % TILE_WIDTH;
  const tile = await read(level, n, offset + span);
  let layer: Uint8Array[] = [];
  for (let i = 0; i < span; i++) layer.push(tile.subarray((offset + i) * HASH_SIZE, (offset + i + 1) * HASH_SIZE));
  while (layer.length > 1) {
    const up: Uint8Array[] = [];
    for (let i = 0; i < layer.length; i += 2) up.push(nodeHash(layer[i]!, layer[i + 1]!));
    layer = up;
  }
  return Buffer.from(layer[0]!);
}

/** MTH(D[a:b]) for a range the RFC's recursion reaches (a is a multiple of the largest power of two ≤ b − a). */
export async function rangeHash(read: TileRead, a: number, b: number): Promise<Buffer> {
  const n = b - a;
  if (n <= 0) throw new RangeError(`empty range [${a}, ${b})`);
  if ((n & (n - 1)) === 0 && a % n === 0) return perfectNode(read, Math.log2(n), a / n);
  const k = splitPoint(n);
  return nodeHash(await rangeHash(read, a, a + k), await rangeHash(read, a + k, b));
}

/** The root hash of the tree of `size` leaves. */
export async function treeRoot(read: TileRead, size: number): Promise<Buffer> {
  return size === 0 ? Buffer.from(EMPTY_ROOT) : rangeHash(read, 0, size);
}

/** RFC 9162 §2.1.3.1: the inclusion proof of leaf `index` in the tree of `size` leaves, leaf side first. */
export async function inclusionProof(read: TileRead, index: number, size: number): Promise<Buffer[]> {
  if (!(index >= 0 && index < size)) throw new RangeError(`index ${index} is not below size ${size}`);
  const path: Buffer[] = [];
  const walk = async (a: number, b: number): Promise<void> => {
    if (b - a === 1) return;
    const k = splitPoint(b - a);
    if (index < a + k) {
      await walk(a, a + k);
      path.push(await rangeHash(read, a + k, b));
    } else {
      await walk(a + k, b);
      path.push(await rangeHash(read, a, a + k));
    }
  };
  await walk(0, size);
  return path;
}

/** RFC 9162 §2.1.4.1: the consistency proof from the tree of `from` leaves to the tree of `to` leaves. */
export async function consistencyProof(read: TileRead, from: number, to: number): Promise<Buffer[]> {
  if (!(from >= 0 && from <= to)) throw new RangeError(`size ${from} is not at most ${to}`);
  if (from === 0 || from === to) return [];
  const proof: Buffer[] = [];
  // SUBPROOF(m, D[a:b], whole): m leaves of the old tree inside D[a:b].
  const sub = async (m: number, a: number, b: number, whole: boolean): Promise<void> => {
    if (m === b - a) {
      if (!whole) proof.push(await rangeHash(read, a, b));
      return;
    }
    const k = splitPoint(b - a);
    if (m <= k) {
      await sub(m, a, a + k, whole);
      proof.push(await rangeHash(read, a + k, b));
    } else {
      await sub(m - k, a + k, b, false);
      proof.push(await rangeHash(read, a, a + k));
    }
  };
  await sub(from, 0, to, true);
  return proof;
}
