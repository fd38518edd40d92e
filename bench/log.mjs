#!/usr/bin/env node
// The transparency log's costs on a synthetic log of 10^6 entries (dist/log.js; issue target: an
// inclusion proof ≤ 1.5 KB at 10^6 entries). Run: npm run build && node bench/log.mjs
//
//   sizes: the largest inclusion proof (hashes, bytes, and as a whole C2SP tlog-proof with a
//   checkpoint cosigned by two witnesses), the largest consistency proof between two sizes
//   ratios: verifyInclusion ÷ as many bare node:crypto SHA-256 hashes as the proof makes; building
//   the tree (appendLeafHashes, 2 hashes an entry) ÷ the same count of bare hashes
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { compare, root } from './lib/measure.mjs';

const N = Number(process.env.BENCH_LOG_SIZE ?? 1_000_000);
if (!existsSync(root + 'dist/log.js') || !existsSync(root + 'dist/index.js')) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(1);
}
const L = await import(root + 'dist/log.js');
const CTL = await import(root + 'dist/index.js');

// The tree: every stored hash, one array per level (level l holds the full subtrees of 2^l entries).
const levels = [];
const read = (nodes) => nodes.map(({ level, index }) => levels[level][index]);
const entry = (i) =>
  L.utf8Encode(`{"receiptId":"rcpt_${i.toString(36).padStart(8, '0')}","amountMinor":"${i % 9999}"}`);
let t0 = performance.now();
for (let lo = 0; lo < N; lo += 65_536) {
  const batch = [];
  for (let i = lo; i < Math.min(N, lo + 65_536); i++) batch.push(L.leafHash(entry(i)));
  for (const s of await L.appendLeafHashes(lo, batch, read)) (levels[s.level] ??= [])[s.index] = s.hash;
}
const buildMs = performance.now() - t0;
const rootHash = await L.treeRoot(N, read);

const key = async () =>
  CTL.importSigningKey(generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
const log = L.createNoteSigner('ctl.example/gateway-log', await key());
const witnesses = [
  L.createCosigner('witness.example/a', await key()),
  L.createCosigner('witness.example/b', await key()),
];
const note = await L.signCheckpoint({ origin: log.name, size: N, rootHash }, [log]);
const text = L.parseNote(note).text;
const cosigned = note + (await Promise.all(witnesses.map((w) => w.cosign(text, 1_800_000_000)))).join('');

let largest = { index: 0, proof: [] };
for (const index of [0, 1, 499_999, 524_287, 524_288, 999_998, N - 1, 123_456, 777_777]) {
  if (index >= N) continue;
  const proof = await L.proveInclusion(index, N, read);
  if (!L.verifyInclusion(L.leafHash(entry(index)), index, N, proof, rootHash).valid) throw new Error(`proof ${index}`);
  if (proof.length > largest.proof.length) largest = { index, proof };
}
const tlogProof = L.formatTlogProof({ index: largest.index, proof: largest.proof, checkpoint: cosigned });
const r = await L.verifyTlogProof(tlogProof, entry(largest.index), [log.verifierKey], {
  witnessKeys: witnesses.map((w) => w.verifierKey),
  requireCosignatures: 2,
});
if (!r.valid) throw new Error(JSON.stringify(r));
let cons = [];
for (const m of [1, 3, 65_535, 333_333, 524_289, 999_999]) {
  const p = await L.proveConsistency(Math.min(m, N - 1), N, read);
  if (p.length > cons.length) cons = p;
}

console.log(`log of ${N.toLocaleString('en')} entries (built in ${(buildMs / 1000).toFixed(1)} s)`);
console.log(`  inclusion proof, largest: ${largest.proof.length} hashes = ${largest.proof.length * 32} bytes raw`);
console.log(
  `  as a C2SP tlog-proof with a checkpoint cosigned by 2 witnesses: ${tlogProof.length} bytes ` +
    `(proof lines ${largest.proof.length * 45} + checkpoint note ${cosigned.length}); target ≤ 1536: ` +
    (tlogProof.length <= 1536 ? 'met' : 'MISSED'),
);
console.log(`  consistency proof, largest: ${cons.length} hashes = ${cons.length * 32} bytes raw`);

// Ratios against bare node:crypto SHA-256 of the same inputs.
const bare = (n) => {
  const x = new Uint8Array(65);
  for (let i = 0; i < n; i++) createHash('sha256').update(x).digest();
};
const leaf = L.leafHash(entry(largest.index));
await compare(
  `verifyInclusion (${largest.proof.length} hashes) ÷ ${largest.proof.length} bare SHA-256`,
  () => bare(largest.proof.length),
  () => L.verifyInclusion(leaf, largest.index, N, largest.proof, rootHash),
  60,
);
t0 = performance.now();
bare(2 * N);
console.log(`building the tree ÷ ${2 * N} bare SHA-256: ratio ${((performance.now() - t0) / buildMs).toFixed(2)}`);
