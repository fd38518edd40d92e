/**
 * Properties of the log's Merkle tree (RFC 6962 §2.1, RFC 9162 §2.1.3–2.1.4) on random trees of up
 * to 3,000 entries appended in random batches: the root equals MTH computed from the RFC's
 * recursive definition (written here, independently of src/log); every inclusion and consistency
 * proof the SDK builds (from stored hashes and from tiles) verifies; and every one-bit change of a
 * proof hash, a leaf or a root, every dropped, added, repeated or swapped proof element, and
 * every other index or size is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import * as L from '../../src/entries/log.js';
import { params, runs } from '../properties/fixtures.js';

const sha = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};
/** MTH(D[n]) exactly as RFC 6962 §2.1 writes it. */
function mth(leaves: Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return sha();
  if (leaves.length === 1) return sha(new Uint8Array([0]), leaves[0]!);
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return sha(new Uint8Array([1]), mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

interface Tree {
  entries: Uint8Array[];
  leaves: Uint8Array[];
  read: L.ReadHashes;
  tiles: L.ReadTile;
}

/** A tree of the given entries, appended in batches at the given cut points, with its tiles. */
async function grow(entries: Uint8Array[], cuts: number[]): Promise<Tree> {
  const leaves = entries.map(L.leafHash);
  const stored = new Map<string, Uint8Array>();
  const read: L.ReadHashes = (nodes) =>
    nodes.map((n) => {
      const h = stored.get(`${n.level}/${n.index}`);
      if (!h) throw new Error(`no stored hash ${n.level}/${n.index}`);
      return h;
    });
  const bounds = [...new Set([0, ...cuts.filter((c) => c > 0 && c < entries.length), entries.length])].sort(
    (a, b) => a - b,
  );
  for (let i = 0; i + 1 < bounds.length; i++)
    for (const s of await L.appendLeafHashes(bounds[i]!, leaves.slice(bounds[i], bounds[i + 1]), read))
      stored.set(`${s.level}/${s.index}`, s.hash);
  const tiles: L.ReadTile = (t) => {
    const out = new Uint8Array(t.width * 32);
    for (let i = 0; i < t.width; i++) out.set(stored.get(`${(t.level as number) * 8}/${t.index * 256 + i}`)!, i * 32);
    return out;
  };
  return { entries, leaves, read, tiles };
}

const flip = (h: Uint8Array, bit: number) => {
  const c = h.slice();
  c[bit >> 3]! ^= 1 << (bit & 7);
  return c;
};

/** Structural mutations of a proof: each element dropped, repeated, swapped with the next; one added at each end. */
function structuralMutants(proof: Uint8Array[]): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  const extra = sha(L.utf8Encode('extra'));
  for (let i = 0; i < proof.length; i++) {
    out.push([...proof.slice(0, i), ...proof.slice(i + 1)]);
    out.push([...proof.slice(0, i + 1), proof[i]!, ...proof.slice(i + 1)]);
    if (i + 1 < proof.length && L.hexEncode(proof[i]!) !== L.hexEncode(proof[i + 1]!))
      out.push([...proof.slice(0, i), proof[i + 1]!, proof[i]!, ...proof.slice(i + 2)]);
  }
  out.push([extra, ...proof], [...proof, extra]);
  return out;
}

const entriesArb = fc
  .integer({ min: 1, max: 3000 })
  .chain((n) =>
    fc.tuple(
      fc.constant(n),
      fc.uint8Array({ minLength: 0, maxLength: 24 }),
      fc.array(fc.integer({ min: 1, max: n }), { maxLength: 4 }),
    ),
  );
const make = (n: number, salt: Uint8Array) =>
  Array.from({ length: n }, (_, i) => {
    const e = new Uint8Array(salt.length + 4);
    e.set(salt);
    new DataView(e.buffer).setUint32(salt.length, i);
    return e;
  });

test('the root is MTH of RFC 6962 §2.1, for every prefix size built from stored hashes', async () => {
  await fc.assert(
    fc.asyncProperty(entriesArb, fc.integer({ min: 0, max: 3000 }), async ([n, salt, cuts], m) => {
      const t = await grow(make(n, salt), cuts);
      const size = m % (n + 1);
      const want = mth(t.entries.slice(0, size));
      assert.equal(await L.treeRoot(size, t.read), want);
      assert.equal(L.rootFromLeafHashes(t.leaves.slice(0, size)), want);
    }),
    params(runs(60)),
  );
});

test('inclusion: every proof verifies; one-bit and structural mutants, other indexes and sizes refused', async () => {
  await fc.assert(
    fc.asyncProperty(entriesArb, fc.nat(), fc.nat(), fc.nat(), async ([n, salt, cuts], a, b, bit) => {
      const t = await grow(make(n, salt), cuts);
      const size = 1 + (a % n);
      const index = b % size;
      const root = await L.treeRoot(size, t.read);
      const leaf = t.leaves[index]!;
      const proof = await L.proveInclusion(index, size, t.read);
      assert.equal(await L.proveInclusion(index, size, L.createTileHashReader(size, t.tiles)), proof);
      assert.equal(L.verifyInclusion(leaf, index, size, proof, root), { valid: true });
      const refused = (r: L.LogCheck) => !r.valid;
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.slice();
        bad[i] = flip(bad[i]!, (bit + i * 37) % 256);
        assert.ok(refused(L.verifyInclusion(leaf, index, size, bad, root)), `proof[${i}] bit flipped`);
      }
      assert.ok(refused(L.verifyInclusion(flip(leaf, bit % 256), index, size, proof, root)), 'leaf');
      assert.ok(refused(L.verifyInclusion(leaf, index, size, proof, flip(root, bit % 256))), 'root');
      for (const m of structuralMutants(proof)) assert.ok(refused(L.verifyInclusion(leaf, index, size, m, root)));
      for (const other of [index - 1, index + 1, index ^ 1, size, size + 1])
        if (other >= 0 && other !== index)
          assert.ok(refused(L.verifyInclusion(leaf, other, size, proof, root)), `${other}`);
      // Another size, with that size's root: refused unless that size's proof is the same list.
      // (The root alone fixes the size: the same proof and root may check under another size
      // whose path has the same shape, which is why a checkpoint signs the size with the root.)
      for (const s of [size - 1, size + 1, size * 2])
        if (s > index && s !== size && s <= n) {
          const same =
            L.hexEncode(Buffer.concat(await L.proveInclusion(index, s, t.read))) === L.hexEncode(Buffer.concat(proof));
          if (!same)
            assert.ok(refused(L.verifyInclusion(leaf, index, s, proof, await L.treeRoot(s, t.read))), `size ${s}`);
        }
    }),
    params(runs(200)),
  );
});

test('consistency: every proof verifies; one-bit and structural mutants, other sizes, swapped roots fail', async () => {
  await fc.assert(
    fc.asyncProperty(entriesArb, fc.nat(), fc.nat(), fc.nat(), async ([n, salt, cuts], a, b, bit) => {
      const t = await grow(make(n, salt), cuts);
      const size2 = 1 + (a % n);
      const size1 = 1 + (b % size2);
      const [root1, root2] = [await L.treeRoot(size1, t.read), await L.treeRoot(size2, t.read)];
      const proof = await L.proveConsistency(size1, size2, t.read);
      assert.equal(await L.proveConsistency(size1, size2, L.createTileHashReader(size2, t.tiles)), proof);
      assert.equal(L.verifyConsistency(size1, size2, proof, root1, root2), { valid: true });
      const refused = (r: L.LogCheck) => !r.valid;
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.slice();
        bad[i] = flip(bad[i]!, (bit + i * 53) % 256);
        assert.ok(refused(L.verifyConsistency(size1, size2, bad, root1, root2)), `proof[${i}] bit flipped`);
      }
      assert.ok(refused(L.verifyConsistency(size1, size2, proof, flip(root1, bit % 256), root2)), 'root1');
      assert.ok(refused(L.verifyConsistency(size1, size2, proof, root1, flip(root2, bit % 256))), 'root2');
      for (const m of structuralMutants(proof)) assert.ok(refused(L.verifyConsistency(size1, size2, m, root1, root2)));
      if (size1 !== size2) assert.ok(refused(L.verifyConsistency(size1, size2, proof, root2, root1)), 'swapped');
      for (const [s1, s2] of [
        [size1 - 1, size2],
        [size1 + 1, size2],
        [size1, size2 + 1],
        [size1, size2 - 1],
      ] as const)
        if (s1 > 0 && s1 <= s2 && s2 <= n && (s1 !== size1 || s2 !== size2)) {
          const other = await L.proveConsistency(s1, s2, t.read);
          if (L.hexEncode(Buffer.concat(other)) !== L.hexEncode(Buffer.concat(proof))) {
            const [r1, r2] = [await L.treeRoot(s1, t.read), await L.treeRoot(s2, t.read)];
            assert.ok(refused(L.verifyConsistency(s1, s2, proof, r1, r2)), `${s1} → ${s2}`);
          }
        }
    }),
    params(runs(200)),
  );
});

test('every single bit of a proof, flipped one at a time, is refused (two fixed trees, exhaustive)', async () => {
  const t = await grow(make(1337, L.utf8Encode('exhaustive')), [700]);
  const [root, root1] = [await L.treeRoot(1337, t.read), await L.treeRoot(601, t.read)];
  const incl = await L.proveInclusion(600, 1337, t.read);
  const cons = await L.proveConsistency(601, 1337, t.read);
  let checked = 0;
  for (let i = 0; i < incl.length; i++)
    for (let bit = 0; bit < 256; bit++, checked++) {
      const bad = incl.slice();
      bad[i] = flip(bad[i]!, bit);
      assert.not.ok(L.verifyInclusion(t.leaves[600]!, 600, 1337, bad, root).valid);
    }
  for (let i = 0; i < cons.length; i++)
    for (let bit = 0; bit < 256; bit++, checked++) {
      const bad = cons.slice();
      bad[i] = flip(bad[i]!, bit);
      assert.not.ok(L.verifyConsistency(601, 1337, bad, root1, root).valid);
    }
  assert.ok(checked >= 256 * 20, `${checked}`);
});

test('hostile inputs to the verifiers never throw: a refusal with a stable code', () => {
  const h = new Uint8Array(32);
  const bad: unknown[] = [undefined, null, 7, 'x', {}, [1], new Uint8Array(31), -1, 1.5, 2 ** 53, NaN, [h, 'x']];
  const codes = new Set<string>();
  for (const x of bad) {
    for (const r of [
      L.verifyInclusion(x as any, 0, 1, [], h),
      L.verifyInclusion(h, x as any, 1, [], h),
      L.verifyInclusion(h, 0, x as any, [], h),
      L.verifyInclusion(h, 0, 2, x as any, h),
      L.verifyConsistency(x as any, 2, [h], h, h),
      L.verifyConsistency(1, 2, x as any, h, h),
      L.verifyConsistency(1, 2, [h], x as any, h),
      L.verifyCheckpointConsistency(x as any, { origin: 'a', size: 1, rootHash: h }, []),
    ]) {
      assert.not.ok(r.valid);
      if (!r.valid) codes.add(r.error.code);
    }
  }
  assert.equal([...codes].sort(), ['log_proof_invalid', 'malformed']);
  assert.is((L.verifyInclusion(h, 0, 1, Array(200).fill(h), h) as { error: { code: string } }).error.code, 'malformed');
});

test.run();
