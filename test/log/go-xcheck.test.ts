/**
 * The SDK's log against a stock implementation: Go's golang.org/x/mod/sumdb/note and sumdb/tlog
 * (Debian's golang-golang-x-mod-dev, built offline by Debian's golang-go; test/log/xcheck/main.go).
 * Both ways: what x/mod makes (keys, signed notes, tree hashes, inclusion and consistency proofs,
 * tiles of a 70,000-entry tree) the SDK verifies and rebuilds byte for byte; what the SDK makes
 * (notes, checkpoint texts, proofs and their one-bit mutants, tile paths) x/mod judges, and its
 * verdict must be the SDK's. Skipped, loudly, where Go or x/mod's source is not installed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { importSigningKey } from '../../src/index.js';
import * as L from '../../src/entries/log.js';

const XMOD = '/usr/share/gocode';
const go = spawnSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' }).stdout.trim();
const available = go !== '' && existsSync(join(XMOD, 'src/golang.org/x/mod/sumdb/tlog/tlog.go'));
const out = join(repoRoot, 'build', 'xcheck');
const env = { ...process.env, GO111MODULE: 'off', GOPATH: XMOD, GOCACHE: join(out, 'go-cache'), GOFLAGS: '' };

function run(mode: 'gen' | 'verify', input?: unknown): any {
  const r = spawnSync(join(out, 'xcheck'), [mode], {
    input: input === undefined ? undefined : JSON.stringify(input),
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status !== 0) throw new Error(`xcheck ${mode}: exit ${r.status}\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

const b64 = L.base64Decode;
const enc = L.base64Encode;
const entry = (i: number) => L.utf8Encode(`ctl xcheck entry ${i}\n`);
/** The Ed25519 seed of an x/mod signer key `PRIVATE+KEY+<name>+<hash>+base64(0x01 ‖ seed)`. */
const seedOf = (k: { Name: string; Skey: string }) =>
  b64(k.Skey.slice(`PRIVATE+KEY+${k.Name}+12345678+`.length)).slice(1);
const flip = (h: Uint8Array, bit = 0) => {
  const c = h.slice();
  c[bit >> 3] ^= 1 << (bit & 7);
  return c;
};

if (!available) {
  console.log(
    'SKIPPED the x/mod cross-check: no `go` or no /usr/share/gocode/src/golang.org/x/mod; install the Debian ' +
      'packages golang-go and golang-golang-x-mod-dev',
  );
  test.skip('x/mod cross-check', () => {});
} else {
  mkdirSync(out, { recursive: true });
  const built = spawnSync(go, ['build', '-o', join(out, 'xcheck'), '.'], {
    cwd: join(repoRoot, 'test', 'log', 'xcheck'),
    env,
    encoding: 'utf8',
  });
  if (built.status !== 0) throw new Error(`go build: ${built.stderr}`);
  const gen = run('gen');
  // The SDK's own tree of the same entries, for its proofs and tiles.
  const size: number = gen.size;
  const leaves = Array.from({ length: size }, (_, i) => L.leafHash(entry(i)));
  const stored = new Map<string, Uint8Array>();
  const read: L.ReadHashes = (nodes) => nodes.map((n) => stored.get(`${n.level}/${n.index}`)!);

  test('our tree of 70,000 entries, built by appendLeafHashes in three batches', async () => {
    for (const [lo, hi] of [
      [0, 1],
      [1, 40_000],
      [40_000, size],
    ] as const)
      for (const s of await L.appendLeafHashes(lo, leaves.slice(lo, hi), read))
        stored.set(`${s.level}/${s.index}`, s.hash);
    assert.equal(await L.treeRoot(size, read), L.rootFromLeafHashes(leaves));
  });

  test('x/mod keys: our vkey parser agrees, and our signer over the same seed gives the same vkey', async () => {
    assert.is(gen.keys.length, 3);
    for (const k of gen.keys) {
      const v = L.parseVerifierKey(k.Vkey);
      assert.is(v.name, k.Name);
      const seed = seedOf(k);
      const signer = L.createNoteSigner(k.Name, await importSigningKey(seed, { alg: 'EdDSA' }));
      assert.is(signer.verifierKey, k.Vkey);
    }
  });

  test('x/mod notes: each verifies, and our signers write them byte for byte', async () => {
    assert.ok(gen.notes.length >= 6);
    const signers = await Promise.all(
      gen.keys.map(async (k: any) => L.createNoteSigner(k.Name, await importSigningKey(seedOf(k), { alg: 'EdDSA' }))),
    );
    for (const n of gen.notes) {
      const r = await L.verifyNote(n.Note, n.Vkeys);
      assert.ok(r.valid, JSON.stringify(r));
      if (r.valid) assert.is(r.signedBy.length, n.Vkeys.length);
      const mine = signers.filter((s: L.NoteSigner) => n.Vkeys.includes(s.verifierKey));
      assert.is(await L.signNote(n.Text, mine), n.Note);
      // a known key's bad signature refuses the note, as x/mod's Open does
      const bad = n.Note.replace(n.Text, n.Text.replace(/e/, 'E'));
      const rb = await L.verifyNote(bad, n.Vkeys);
      assert.is(!rb.valid && rb.error.code, 'checkpoint_signature_invalid');
    }
  });

  test('x/mod inclusion proofs verify, equal ours, and refuse a flipped bit', async () => {
    assert.ok(gen.inclusion.length >= 50, `${gen.inclusion.length}`);
    for (const p of gen.inclusion) {
      const proof = (p.Proof ?? []).map(b64);
      const root = b64(p.Root);
      assert.equal(L.verifyInclusion(leaves[p.Index]!, p.Index, p.Size, proof, root), { valid: true });
      assert.equal(await L.proveInclusion(p.Index, p.Size, read), proof);
      if (proof.length)
        assert.not.ok(
          L.verifyInclusion(leaves[p.Index]!, p.Index, p.Size, [flip(proof[0]), ...proof.slice(1)], root).valid,
        );
      assert.not.ok(L.verifyInclusion(flip(leaves[p.Index]!), p.Index, p.Size, proof, root).valid);
    }
  });

  test('x/mod consistency proofs verify, equal ours, and refuse a flipped bit', async () => {
    assert.ok(gen.consistency.length >= 100, `${gen.consistency.length}`);
    for (const p of gen.consistency) {
      const proof = (p.Proof ?? []).map(b64);
      const [r1, r2] = [b64(p.Root1), b64(p.Root2)];
      assert.equal(L.verifyConsistency(p.Size1, p.Size2, proof, r1, r2), { valid: true }, `${p.Size1}→${p.Size2}`);
      assert.equal(await L.proveConsistency(p.Size1, p.Size2, read), proof);
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.slice();
        bad[i] = flip(bad[i]!, 255);
        assert.not.ok(L.verifyConsistency(p.Size1, p.Size2, bad, r1, r2).valid, `${p.Size1}→${p.Size2} [${i}]`);
      }
    }
  });

  test('x/mod tiles: our paths and bytes are the same, and proofs read from them are x/mod proofs', async () => {
    assert.ok(gen.tiles.length > 270);
    const tiles = new Map<string, Uint8Array>();
    for (const t of gen.tiles) {
      const ref = L.parseTilePath(t.Path);
      assert.is(L.tilePath(ref), t.Path);
      const data = b64(t.Data);
      tiles.set(t.Path, data);
      const level = ref.level as number;
      const ours = new Uint8Array(ref.width * 32);
      for (let i = 0; i < ref.width; i++) ours.set(stored.get(`${level * 8}/${ref.index * 256 + i}`)!, i * 32);
      assert.ok(
        data.every((b: number, i: number) => b === ours[i]),
        t.Path,
      );
    }
    const reader = L.createTileHashReader(size, (t) => tiles.get(L.tilePath(t))!);
    for (const p of gen.inclusion.filter((p: any) => p.Size === size))
      assert.equal(await L.proveInclusion(p.Index, size, reader), (p.Proof ?? []).map(b64));
    for (const p of gen.consistency.filter((p: any) => p.Size2 === size && p.Size1 < size))
      assert.equal(await L.proveConsistency(p.Size1, size, reader), (p.Proof ?? []).map(b64));
  });

  test('x/mod tree notes (go.sum database tree) are checkpoints to us, and ours are to x/mod', () => {
    const cp = L.parseCheckpoint(gen.goSumTree);
    assert.is(cp.origin, 'go.sum database tree');
    assert.is(cp.size, size);
    assert.is(L.formatCheckpoint(cp), gen.goSumTree);
  });

  test('what the SDK makes, x/mod judges the same way', async () => {
    const { generateKeyPair } = await import('../../src/index.js');
    const keys = await Promise.all([0, 1].map(async () => importSigningKey((await generateKeyPair()).privateKeyPem)));
    const signers = keys.map((k, i) => L.createNoteSigner(`ctl.example/log${i}`, k));
    const vkeys = signers.map((s) => s.verifierKey);
    const notes: Array<{ Note: string; Vkeys: string[] }> = [];
    const ours: string[] = [];
    for (const text of ['a\n', 'ctl.example/log0\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n', 'é ✓\n\nb\n']) {
      const both = await L.signNote(text, signers);
      for (const [note, keysGiven] of [
        [both, vkeys],
        [both, [vkeys[1]!]],
        [both.replace('\n\n\u2014', '\n\n\u2014 x.example AAAAAAA=\n\u2014'), vkeys], // an unknown key's line
        // a bad signature: one base64 character of the signature changed
        [both.replace(/ (\S{30})(\S)(\S*)\n$/, (_m, a, c, r) => ` ${a}${c === 'A' ? 'B' : 'A'}${r}\n`), vkeys],
      ] as const) {
        notes.push({ Note: note, Vkeys: [...keysGiven] });
        const r = await L.verifyNote(note, keysGiven);
        ours.push(r.valid ? `ok ${r.signedBy.length}` : 'refused');
      }
    }
    const records: any[] = [];
    const recordVerdicts: string[] = [];
    const prefixes: any[] = [];
    const prefixVerdicts: string[] = [];
    for (const n of [1, 5, 256, 257, 9999, size]) {
      const root = await L.treeRoot(n, read);
      for (const i of [0, Math.floor(n / 3), n - 1]) {
        const proof = await L.proveInclusion(i, n, read);
        for (const [pr, idx, leaf] of [
          [proof, i, leaves[i]!],
          [proof.length ? [flip(proof[0]!, 7), ...proof.slice(1)] : proof, i, leaves[i]!],
          [proof, i, flip(leaves[i]!)],
          [proof.slice(0, -1), i, leaves[i]!],
        ] as const) {
          records.push({ Size: n, Index: idx, Proof: pr.map(enc), Root: enc(root), Leaf: enc(leaf) });
          recordVerdicts.push(L.verifyInclusion(leaf, idx, n, pr, root).valid ? 'ok' : 'refused');
        }
      }
      for (const m of [1, 2, Math.ceil(n / 2), n]) {
        if (m > n) continue;
        const r1 = await L.treeRoot(m, read);
        const proof = await L.proveConsistency(m, n, read);
        for (const pr of [proof, proof.length ? [...proof.slice(0, -1), flip(proof[proof.length - 1]!, 3)] : proof]) {
          prefixes.push({ Size1: m, Size2: n, Proof: pr.map(enc), Root1: enc(r1), Root2: enc(root) });
          prefixVerdicts.push(L.verifyConsistency(m, n, pr, r1, root).valid ? 'ok' : 'refused');
        }
      }
    }
    const tilePaths = [0, 5, 999, 1000, 1234067, 70_000_000].flatMap((index) => [
      L.tilePath({ level: 0, index, width: 256 }),
      L.tilePath({ level: 2, index, width: 17 }),
    ]);
    const trees = [
      L.formatCheckpoint({ origin: 'go.sum database tree', size, rootHash: await L.treeRoot(size, read) }),
    ];
    const go = run('verify', {
      Notes: notes,
      Trees: trees.map((Text) => ({ Text })),
      Records: records,
      Prefixes: prefixes,
      TilePaths: tilePaths,
    });
    assert.equal(
      go.notes.map((v: string) => (v.startsWith('ok') ? v : 'refused')),
      ours,
    );
    assert.ok(ours.includes('refused') && ours.includes('ok 2') && ours.includes('ok 1'));
    assert.equal(go.records, recordVerdicts);
    assert.ok(recordVerdicts.filter((v) => v === 'ok').length >= 18);
    assert.equal(go.prefixes, prefixVerdicts);
    assert.equal(go.trees, [`${size} ${enc(await L.treeRoot(size, read))}`]);
    assert.equal(
      go.tilePaths,
      tilePaths.map((p) => {
        const t = L.parseTilePath(p);
        return `${t.level} ${t.index} ${t.width}`;
      }),
    );
  });
}

test.run();
