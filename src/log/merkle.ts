/**
 * The Merkle tree of a transparency log, as RFC 6962 §2.1 and RFC 9162 §2.1 define it: SHA-256,
 * leaf hash SHA-256(0x00 ‖ entry), node hash SHA-256(0x01 ‖ left ‖ right), and the verification
 * of inclusion and consistency proofs written step by step as RFC 9162 §2.1.3.2 and §2.1.4.2
 * give them. Synchronous (a proof is at most ~2·log2(size) hashes) and never throws on what it
 * is given: a refusal is `{ valid: false, error }` (`malformed` for the shape, `log_proof_invalid`
 * for a proof that does not lead to the root).
 *
 * Sizes and indexes are JavaScript numbers, safe integers (up to 2^53 − 1 entries); the
 * arithmetic below is division and remainder, never 32-bit shifts.
 */
import { sha256Sync } from '../crypto/index.js';
import { toErrorInfo, type CtlErrorInfo } from '../errors.js';

/** A hash of the tree: 32 bytes of SHA-256. */
export type Hash = Uint8Array;

/** What every log check answers: `{ valid: true }` or a refusal with a stable code (PROTOCOL.md §9). */
export type LogCheck = { valid: true } | { valid: false; error: CtlErrorInfo };

/** The longest proof read: a tree of 2^53 entries needs 53 inclusion hashes and ~106 consistency hashes. */
export const MAX_PROOF_HASHES = 128;

const refuse = (code: CtlErrorInfo['code'], message: string): LogCheck => ({ valid: false, error: { code, message } });

function concat(prefix: number, a: Uint8Array, b?: Uint8Array): Uint8Array {
  const out = new Uint8Array(1 + a.length + (b ? b.length : 0));
  out[0] = prefix;
  out.set(a, 1);
  if (b) out.set(b, 1 + a.length);
  return out;
}

/** RFC 6962 §2.1: the hash of a leaf. @example leafHash(entryBytes) // 32 bytes */
export function leafHash(entry: Uint8Array): Hash {
  if (!(entry instanceof Uint8Array)) throw new TypeError('leafHash(entry): a Uint8Array');
  return sha256Sync(concat(0x00, entry));
}

/** RFC 6962 §2.1: the hash of an inner node. @example nodeHash(left, right) // 32 bytes */
export function nodeHash(left: Hash, right: Hash): Hash {
  return sha256Sync(concat(0x01, left, right));
}

/** MTH({}) = SHA-256() (RFC 6962 §2.1): the root of the empty tree. @example emptyRoot() // e3b0c442… */
export function emptyRoot(): Hash {
  return sha256Sync(new Uint8Array(0));
}

/** The largest power of two strictly below `n` (n ≥ 2). */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * MTH(D[n]) of RFC 6962 §2.1 from the leaf hashes, in O(n) hashes: the perfect subtrees of the
 * binary decomposition of n are hashed level by level, then folded from the right.
 * @example hexEncode(rootFromLeafHashes(entries.map(leafHash)))
 */
export function rootFromLeafHashes(leafHashes: readonly Hash[]): Hash {
  if (!Array.isArray(leafHashes)) throw new TypeError('rootFromLeafHashes(leafHashes): an array');
  if (leafHashes.length === 0) return emptyRoot();
  // One pass per level; an odd last node waits (unhashed) for the fold: the RFC tree's right
  // spine is built from the perfect subtrees of each level's leftover.
  const leftovers: Hash[] = [];
  let level: Hash[] = leafHashes.slice();
  while (level.length > 1) {
    const next: Hash[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(nodeHash(level[i]!, level[i + 1]!));
    if (level.length % 2 === 1) leftovers.push(level[level.length - 1]!);
    level = next;
  }
  const root = level[0]!;
  // The leftovers came from low to high levels: right to left in the tree.
  let acc: Hash | undefined;
  for (const h of leftovers) acc = acc ? nodeHash(h, acc) : h;
  return acc ? nodeHash(root, acc) : root;
}

function isHash(h: unknown): h is Hash {
  return h instanceof Uint8Array && h.length === 32;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/** The proof's hashes, copied, each 32 bytes; a defect is `malformed` (thrown, caught by the caller). */
function proofHashes(proof: unknown, what: string): Hash[] {
  if (!Array.isArray(proof)) throw new TypeError(`${what}: an array of 32-byte hashes`);
  if (proof.length > MAX_PROOF_HASHES) throw new TypeError(`${what}: more than ${MAX_PROOF_HASHES} hashes`);
  const out: Hash[] = [];
  for (let i = 0; i < proof.length; i++) {
    const h: unknown = proof[i];
    if (!isHash(h)) throw new TypeError(`${what}[${i}]: not a 32-byte hash`);
    out.push(h);
  }
  return out;
}

/** Runs a check; any shape defect thrown inside becomes `malformed`, never an exception. */
function guarded(f: () => LogCheck): LogCheck {
  try {
    return f();
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

const half = (x: number): number => Math.floor(x / 2);
const odd = (x: number): boolean => x % 2 === 1;

/**
 * Verifies that `leafHash` is the entry at `index` of the tree of `size` entries whose root is
 * `root`, by RFC 9162 §2.1.3.2. Never throws.
 * @example verifyInclusion(leafHash(entry), 7, checkpoint.size, proof, checkpoint.rootHash) // { valid: true }
 */
export function verifyInclusion(
  leafHash: Hash,
  index: number,
  size: number,
  proof: readonly Hash[],
  root: Hash,
): LogCheck {
  return guarded(() => {
    if (!isHash(leafHash)) return refuse('malformed', 'leafHash: not a 32-byte hash');
    if (!isHash(root)) return refuse('malformed', 'root: not a 32-byte hash');
    if (!isCount(index) || !isCount(size)) return refuse('malformed', 'index and size: safe integers ≥ 0');
    const path = proofHashes(proof, 'proof');
    // 1. leaf_index ≥ tree_size fails.
    if (index >= size) return refuse('log_proof_invalid', `index ${index} is not below the tree size ${size}`);
    // 2., 3.
    let fn = index;
    let sn = size - 1;
    let r = leafHash;
    // 4.
    for (const p of path) {
      if (sn === 0) return refuse('log_proof_invalid', 'inclusion proof: too many hashes');
      if (odd(fn) || fn === sn) {
        r = nodeHash(p, r);
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      } else {
        r = nodeHash(r, p);
      }
      fn = half(fn);
      sn = half(sn);
    }
    // 5.
    if (sn !== 0) return refuse('log_proof_invalid', 'inclusion proof: too few hashes');
    if (!equalBytes(r, root)) return refuse('log_proof_invalid', 'inclusion proof: does not lead to the root');
    return { valid: true };
  });
}

const isPowerOfTwo = (x: number): boolean => {
  if (x < 1) return false;
  while (x % 2 === 0) x /= 2;
  return x === 1;
};

/**
 * Verifies that the tree of `size2` entries with root `root2` extends the tree of `size1` entries
 * with root `root1`, by RFC 9162 §2.1.4.2. Equal sizes need an empty proof and equal roots; a
 * tree of size 0 proves nothing (`log_proof_invalid`: a client starts from the first checkpoint it
 * verifies). Never throws.
 * @example verifyConsistency(old.size, cp.size, proof, old.rootHash, cp.rootHash) // { valid: true }
 */
export function verifyConsistency(
  size1: number,
  size2: number,
  proof: readonly Hash[],
  root1: Hash,
  root2: Hash,
): LogCheck {
  return guarded(() => {
    if (!isCount(size1) || !isCount(size2)) return refuse('malformed', 'sizes: safe integers ≥ 0');
    if (!isHash(root1) || !isHash(root2)) return refuse('malformed', 'roots: 32-byte hashes');
    const path = proofHashes(proof, 'proof');
    if (size2 < size1) return refuse('log_proof_invalid', `size2 ${size2} is below size1 ${size1}`);
    if (size1 === 0) return refuse('log_proof_invalid', 'no consistency proof starts from the empty tree');
    if (size1 === size2) {
      if (path.length) return refuse('log_proof_invalid', 'equal sizes take an empty proof');
      return equalBytes(root1, root2)
        ? { valid: true }
        : refuse('log_proof_invalid', 'two different roots for one size');
    }
    // 1.
    if (path.length === 0) return refuse('log_proof_invalid', 'consistency proof: empty');
    // 2.
    if (isPowerOfTwo(size1)) path.unshift(root1);
    // 3.
    let fn = size1 - 1;
    let sn = size2 - 1;
    // 4.
    while (odd(fn)) {
      fn = half(fn);
      sn = half(sn);
    }
    // 5.
    let fr = path[0]!;
    let sr = path[0]!;
    // 6.
    for (let i = 1; i < path.length; i++) {
      const c = path[i]!;
      if (sn === 0) return refuse('log_proof_invalid', 'consistency proof: too many hashes');
      if (odd(fn) || fn === sn) {
        fr = nodeHash(c, fr);
        sr = nodeHash(c, sr);
        while (!odd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      } else {
        sr = nodeHash(sr, c);
      }
      fn = half(fn);
      sn = half(sn);
    }
    // 7.
    if (sn !== 0) return refuse('log_proof_invalid', 'consistency proof: too few hashes');
    if (!equalBytes(fr, root1))
      return refuse('log_proof_invalid', 'consistency proof: does not lead to the first root');
    if (!equalBytes(sr, root2))
      return refuse('log_proof_invalid', 'consistency proof: does not lead to the second root');
    return { valid: true };
  });
}

export { equalBytes, isHash, isCount };
