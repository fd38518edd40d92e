/**
 * Building the proofs that merkle.ts verifies (RFC 6962 §2.1.1 PATH, §2.1.2 PROOF, RFC 9162
 * §2.1.3.1 and §2.1.4.1), and the hashes a log stores as it grows, over a function that reads the
 * hashes of full subtrees. In the SDK rather than in a service because it is pure and the same
 * everywhere: the services serve proofs from their stored hashes, `ctl log audit` and a device
 * recompute them from fetched tiles (tiles.ts), and a test builds both sides from one definition.
 *
 * A full subtree is named by `{ level, index }`: the 2^level entries from index·2^level, whose
 * hash is MTH of those entries. A log that stores those hashes (or tiles of them, tiles.ts) can
 * answer every proof with one batched read: each function asks `readHashes` once.
 */
import { nodeHash, isHash, isCount, splitPoint, emptyRoot, type Hash } from './merkle.js';

/** A full subtree: the 2^level entries starting at index · 2^level. */
export interface NodeRef {
  level: number;
  index: number;
}

/** A stored hash: a full subtree and its hash. */
export interface StoredHash extends NodeRef {
  hash: Hash;
}

/**
 * Reads the hashes of full subtrees, in the order asked (the log's storage, or tiles: tiles.ts).
 * May be asynchronous (a database, a fetch).
 */
export type ReadHashes = (nodes: readonly NodeRef[]) => readonly Hash[] | Promise<readonly Hash[]>;

/**
 * The full subtrees that make up the entries [lo, hi), left to right, each as large as its
 * alignment allows: for a range of an RFC 6962 tree, the binary decomposition of its length.
 * @example rangeNodes(0, 6) // [{ level: 2, index: 0 }, { level: 1, index: 2 }]
 */
export function rangeNodes(lo: number, hi: number): NodeRef[] {
  const out: NodeRef[] = [];
  while (lo < hi) {
    let level = 0;
    let width = 1;
    while (lo % (width * 2) === 0 && lo + width * 2 <= hi) {
      width *= 2;
      level++;
    }
    out.push({ level, index: lo / width });
    lo += width;
  }
  return out;
}

/** RFC 6962 §2.1.1 PATH(m, D[n]) as the ranges of its hashes, leaf side first. */
function inclusionRanges(m: number, n: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let lo = 0;
  let hi = n;
  while (hi - lo > 1) {
    const k = splitPoint(hi - lo);
    if (m < lo + k) {
      out.push([lo + k, hi]);
      hi = lo + k;
    } else {
      out.push([lo, lo + k]);
      lo += k;
    }
  }
  return out.reverse();
}

/** RFC 6962 §2.1.2 PROOF(m, D[n]) = SUBPROOF(m, D[n], true) as the ranges of its hashes, in proof order. */
function consistencyRanges(m: number, n: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let lo = 0;
  let hi = n;
  let whole = true; // b of SUBPROOF: the old tree is the whole of [lo, hi) seen so far
  for (;;) {
    if (m === hi) {
      // SUBPROOF(m, D[m], b): {} when b, else {MTH(D[m])}
      if (!whole) out.push([lo, hi]);
      break;
    }
    const k = splitPoint(hi - lo);
    if (m <= lo + k) {
      out.push([lo + k, hi]);
      hi = lo + k;
    } else {
      out.push([lo, lo + k]);
      lo += k;
      whole = false;
    }
  }
  return out.reverse();
}

/** The hash of each range, from one call to `readHashes`. */
async function hashRanges(ranges: Array<[number, number]>, readHashes: ReadHashes): Promise<Hash[]> {
  const lists = ranges.map(([lo, hi]) => rangeNodes(lo, hi));
  const hashes = await readAll(lists.flat(), readHashes);
  let at = 0;
  return lists.map((nodes) => {
    const hs = hashes.slice(at, (at += nodes.length));
    // MTH of a range: its full subtrees folded from the right (RFC 6962 §2.1 split rule).
    let acc = hs[hs.length - 1]!;
    for (let i = hs.length - 2; i >= 0; i--) acc = nodeHash(hs[i]!, acc);
    return acc;
  });
}

async function readAll(nodes: NodeRef[], readHashes: ReadHashes): Promise<Hash[]> {
  if (typeof readHashes !== 'function') throw new TypeError('readHashes: a function');
  if (nodes.length === 0) return [];
  const hashes = await readHashes(nodes);
  if (!Array.isArray(hashes) || hashes.length !== nodes.length)
    throw new Error(`readHashes answered ${Array.isArray(hashes) ? hashes.length : 'no'} hashes for ${nodes.length}`);
  hashes.forEach((h, i) => {
    if (!isHash(h)) throw new Error(`readHashes: hash ${nodes[i]!.level}/${nodes[i]!.index} is not 32 bytes`);
  });
  return hashes.slice();
}

function checkCounts(what: string, ...n: number[]): void {
  if (!n.every(isCount)) throw new RangeError(`${what}: safe integers ≥ 0`);
}

/**
 * The inclusion proof of entry `index` in the tree of `size` entries (RFC 9162 §2.1.3.1).
 * @example const proof = await proveInclusion(7, 100, readHashes) // verifyInclusion(h7, 7, 100, proof, root)
 */
export async function proveInclusion(index: number, size: number, readHashes: ReadHashes): Promise<Hash[]> {
  checkCounts('proveInclusion(index, size)', index, size);
  if (index >= size) throw new RangeError(`proveInclusion: index ${index} is not below size ${size}`);
  return hashRanges(inclusionRanges(index, size), readHashes);
}

/**
 * The consistency proof from the tree of `size1` entries to the tree of `size2` (RFC 9162 §2.1.4.1):
 * empty when the sizes are equal; none from the empty tree.
 * @example const proof = await proveConsistency(old.size, cp.size, readHashes)
 */
export async function proveConsistency(size1: number, size2: number, readHashes: ReadHashes): Promise<Hash[]> {
  checkCounts('proveConsistency(size1, size2)', size1, size2);
  if (size1 === 0 || size1 > size2)
    throw new RangeError(`proveConsistency: need 0 < size1 ≤ size2 (${size1}, ${size2})`);
  if (size1 === size2) return [];
  return hashRanges(consistencyRanges(size1, size2), readHashes);
}

/** MTH of the first `size` entries (the root a checkpoint signs). @example await treeRoot(cp.size, readHashes) */
export async function treeRoot(size: number, readHashes: ReadHashes): Promise<Hash> {
  checkCounts('treeRoot(size)', size);
  if (size === 0) return emptyRoot();
  return (await hashRanges([[0, size]], readHashes))[0]!;
}

/**
 * What a log stores when it appends `leafHashes` to a tree of `size` entries: each new leaf
 * (level 0) and every full subtree the new leaves complete, with its hash (x/mod's
 * tlog.StoredHashes, generalised). The left siblings it needs from before are read in one call:
 * the full subtrees of [0, size). A log that keeps only tiles stores the levels that are
 * multiples of 8 (tiles.ts).
 * @example const stored = await appendLeafHashes(size, entries.map(leafHash), readHashes) // then write them
 */
export async function appendLeafHashes(
  size: number,
  leafHashes: readonly Hash[],
  readHashes: ReadHashes,
): Promise<StoredHash[]> {
  checkCounts('appendLeafHashes(size)', size);
  if (!Array.isArray(leafHashes) || !leafHashes.every(isHash))
    throw new TypeError('appendLeafHashes(leafHashes): an array of 32-byte hashes');
  if (!Number.isSafeInteger(size + leafHashes.length)) throw new RangeError('appendLeafHashes: the tree outgrows 2^53');
  // The full subtrees of [0, size), largest first: the left siblings every new leaf can meet.
  // A new node merges with the top of this stack while both are of one level (a right child
  // completes its parent), so each append costs its own hashes and nothing else.
  const before = rangeNodes(0, size);
  const hashes = await readAll(before, readHashes);
  const stack = before.map((n, i) => ({ level: n.level, hash: hashes[i]! }));
  const out: StoredHash[] = [];
  leafHashes.forEach((leaf, j) => {
    let node = { level: 0, index: size + j, hash: leaf };
    out.push(node);
    while (stack.length && stack[stack.length - 1]!.level === node.level) {
      const left = stack.pop()!;
      node = { level: node.level + 1, index: (node.index - 1) / 2, hash: nodeHash(left.hash, node.hash) };
      out.push(node);
    }
    stack.push(node);
  });
  return out;
}
