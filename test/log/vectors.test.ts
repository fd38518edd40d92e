/**
 * Published vectors for the log's formats, read as data from the shared vectors (`tlog/`,
 * SOURCES.md there): transparency-dev/merkle's inclusion and consistency probes (RFC 6962
 * reference proofs and their mutations), and the examples of the C2SP signed-note,
 * tlog-checkpoint, tlog-cosignature, tlog-tiles and tlog-proof specifications, taken from their
 * code blocks and sentences. Every case must pass, and at least the counts below be read.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { readVector, vectorsDir } from '../helpers/vectors.js';
import * as L from '../../src/entries/log.js';

const dir = join(vectorsDir, 'tlog');
if (!existsSync(dir))
  throw new Error(`${dir} is missing: the transparency-log vectors belong in the shared vectors (tlog/SOURCES.md)`);

function jsonFiles(sub: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(join(dir, d)).sort()) {
      const rel = `${d}/${name}`;
      if (statSync(join(dir, rel)).isDirectory()) walk(rel);
      else if (name.endsWith('.json')) out.push(rel);
    }
  };
  walk(sub);
  return out;
}

const bytes = (s: string) => L.base64Decode(s);
const hashes = (list: string[] | null) => (list ?? []).map(bytes);

// The one probe where CTL is stricter than transparency-dev/merkle: two 12-byte "roots" compared as
// equal. A root is 32 bytes here, so the shape is refused before anything is compared.
const STRICTER = { 'merkle/consistency/additional/sizes-are-equal-one-and-proof-is-empty.json': 'malformed' };

test('transparency-dev/merkle inclusion probes: every verdict as expected (≥ 98 read)', () => {
  const files = jsonFiles('merkle/inclusion');
  assert.ok(files.length >= 98, `only ${files.length} inclusion probes`);
  const wrong: string[] = [];
  for (const f of files) {
    const p = JSON.parse(readVector(`tlog/${f}`));
    const r = L.verifyInclusion(bytes(p.leafHash), p.leafIdx, p.treeSize, hashes(p.proof), bytes(p.root));
    if (r.valid === p.wantErr) wrong.push(`${f} (${p.desc}): ${JSON.stringify(r)}`);
  }
  assert.equal(wrong, []);
  assert.ok(files.filter((f) => f.endsWith('happy-path.json')).length >= 5);
});

test('transparency-dev/merkle consistency probes: every verdict as expected (≥ 98 read)', () => {
  const files = jsonFiles('merkle/consistency');
  assert.ok(files.length >= 98, `only ${files.length} consistency probes`);
  const wrong: string[] = [];
  for (const f of files) {
    const p = JSON.parse(readVector(`tlog/${f}`));
    const r = L.verifyConsistency(p.size1, p.size2, hashes(p.proof), bytes(p.root1), bytes(p.root2));
    const stricter = (STRICTER as Record<string, string>)[f];
    if (stricter) {
      if (r.valid || r.error.code !== stricter) wrong.push(`${f}: expected ${stricter}, got ${JSON.stringify(r)}`);
    } else if (r.valid === p.wantErr) wrong.push(`${f} (${p.desc}): ${JSON.stringify(r)}`);
  }
  assert.equal(wrong, []);
});

/** The fenced and the indented code blocks of a markdown document, in order. */
function codeBlocks(md: string): string[] {
  const out: string[] = [];
  const lines = md.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.startsWith('```')) {
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
      out.push(body.join('\n') + '\n');
    } else if (/^( {4}|\t)\S/.test(lines[i]!) && (i === 0 || lines[i - 1] === '')) {
      const body: string[] = [];
      for (; i < lines.length && /^( {4}|\t)/.test(lines[i]!); i++) body.push(lines[i]!.replace(/^( {4}|\t)/, ''));
      out.push(body.join('\n') + '\n');
    }
  }
  return out;
}

/** A sentence of a specification, its spaces matching any run of white space (the text is wrapped). */
function sentence(md: string, pattern: string): RegExpExecArray {
  const m = new RegExp(pattern.replace(/ /g, '\\s+')).exec(md);
  if (!m) throw new Error(`the specification has no sentence /${pattern}/`);
  return m;
}

const spec = (name: string) => readVector(`tlog/c2sp/${name}`);
let c2spChecks = 0;

test('signed-note: the example vkey verifies the example note; a changed byte does not', async () => {
  const blocks = codeBlocks(spec('signed-note.md'));
  const vkey = blocks.find((b) => /^example\.com\/foo\+[0-9a-f]{8}\+/.test(b))!.trim();
  const note = blocks.find((b) => b.startsWith('This is an example message.'))!;
  const key = L.parseVerifierKey(vkey);
  assert.is(key.keyId, L.noteKeyId(key.name, L.NOTE_ED25519, key.publicKey));
  const r = await L.verifyNote(note, [vkey]);
  assert.ok(r.valid, JSON.stringify(r));
  if (r.valid) assert.is(r.text, 'This is an example message.\n');
  const bad = await L.verifyNote(note.replace('example message', 'example messagE'), [vkey]);
  assert.is(!bad.valid && bad.error.code, 'checkpoint_signature_invalid');
  // the opening poem: a note whose text holds a blank line, split at the last one
  const poem = L.parseNote(blocks[0]!);
  assert.is(poem.signatures[0]!.name, 'quasimodo.example/salvatore');
  assert.ok(poem.text.includes('\n\ned è subito sera.\n'));
  c2spChecks += 3;
});

test('tlog-checkpoint and tlog-cosignature: the examples parse; the cosignature holds its timestamp', () => {
  const cp = L.parseNote(codeBlocks(spec('tlog-checkpoint.md'))[0]!);
  const checkpoint = L.parseCheckpoint(cp.text);
  assert.equal(
    [checkpoint.origin, checkpoint.size, checkpoint.extensions],
    ['example.com/behind-the-sofa', 20852163, []],
  );
  assert.is(L.formatCheckpoint(checkpoint), cp.text);
  const blocks = codeBlocks(spec('tlog-cosignature.md'));
  const cosigned = L.parseNote(blocks[0]!);
  assert.is(cosigned.text, cp.text);
  const w = cosigned.signatures.find((s) => s.name === 'witness.example.com/w1')!;
  assert.is(w.signature.length, 8 + 64);
  const seconds = Number(new DataView(w.signature.buffer, w.signature.byteOffset).getBigUint64(0));
  // the spec's signed-message example: the header, the time line, then the checkpoint's text
  const message = blocks.find((b) => b.startsWith('cosignature/v1\n'))!;
  assert.is(message, `cosignature/v1\ntime ${seconds}\n${cp.text}`);
  assert.equal(L.cosignatureMessage(cp.text, seconds), L.utf8Encode(message));
  c2spChecks += 3;
});

test('tlog-tiles: the path and tile-count examples', () => {
  const md = spec('tlog-tiles.md');
  const ex = sentence(md, 'index (\\d+) will be encoded as `([^`]+)`');
  assert.is(L.tilePath({ level: 0, index: Number(ex[1]), width: 256 }), `tile/0/${ex[2]}`);
  assert.equal(L.parseTilePath(`tile/0/${ex[2]}`), { level: 0, index: Number(ex[1]), width: 256 });
  const t = sentence(
    md,
    'a tree of size ([\\d,]+) will be represented by (\\d+) full level 0 tiles, one partial level 0 tile of width ' +
      '(\\d+), one full level 1 tile, one partial level 1 tile of width (\\d+), and one partial level 2 tile ' +
      'of width (\\d+)',
  );
  const tiles = L.tilesOfTree(Number(t[1]!.replace(/,/g, ''))).filter((x) => x.level !== 'entries');
  const at = (level: number, full: boolean) => tiles.filter((x) => x.level === level && (x.width === 256) === full);
  assert.is(at(0, true).length, Number(t[2]));
  assert.equal(
    at(0, false).map((x) => x.width),
    [Number(t[3])],
  );
  assert.is(at(1, true).length, 1);
  assert.equal(
    at(1, false).map((x) => x.width),
    [Number(t[4])],
  );
  assert.equal(
    at(2, false).map((x) => x.width),
    [Number(t[5])],
  );
  assert.is(tiles.length, Number(t[2]) + 4);
  const small = sentence(
    md,
    'a tree of size (\\d+) will be represented by a full level 0 tile and a partial level 1 tile of width (\\d+)',
  );
  assert.equal(
    L.tilesOfTree(Number(small[1])).filter((x) => x.level !== 'entries'),
    [
      { level: 0, index: 0, width: 256 },
      { level: 1, index: 0, width: Number(small[2]) },
    ],
  );
  c2spChecks += 3;
});

test('tlog-proof: the example parses (index, five hashes, checkpoint); its elided signatures refused', async () => {
  const text = codeBlocks(spec('tlog-proof.md'))[0]!;
  const p = L.parseTlogProof(text);
  assert.is(p.index, 73894);
  assert.is(p.proof.length, 5);
  assert.ok(p.extra && p.extra.length > 0);
  assert.ok(p.checkpoint.startsWith('example.com/fancylog\n109482\n'));
  const r = await L.verifyTlogProof(text, { leafHash: new Uint8Array(32) }, []);
  assert.is(!r.valid && r.error.code, 'malformed');
  c2spChecks += 2;
});

test('at least 11 C2SP example checks ran', () => {
  assert.ok(c2spChecks >= 11, `${c2spChecks}`);
});

test.run();
