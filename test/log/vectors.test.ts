/**
 * Published examples for the log's formats, read as data from where Debian installs them: the
 * fixed vectors in golang.org/x/mod's own tests (Debian's golang-golang-x-mod-dev, which .ci/run
 * installs), the implementation the C2SP signed-note and tlog-tiles specifications grew out of.
 * They are read from the Go test sources at run time, never copied here: the signer and verifier
 * keys and the note `TestSign` expects, the keys `TestNewVerifier` refuses, the tree note
 * `TestFormatTree` expects, and the tile paths of `TestTilePath` (the index groups C2SP kept).
 * Skipped, loudly, where the package is not installed.
 */
import { test as uvuTest } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { XMOD_SOURCE, testsNeeding } from '../helpers/system-packages.js';
import { importSigningKey } from '../../src/index.js';
import * as L from '../../src/entries/log.js';

const test = testsNeeding('golang-golang-x-mod-dev', 'the x/mod published examples', uvuTest);
const source = (rel: string) => readFileSync(`${XMOD_SOURCE}/sumdb/${rel}`, 'utf8');

/** The body of a Go test function, from its `func` line to the next top-level `func`. */
function goFunc(src: string, name: string): string {
  const start = src.indexOf(`func ${name}(`);
  if (start < 0) throw new Error(`x/mod has no ${name}`);
  const end = src.indexOf('\nfunc ', start + 1);
  return src.slice(start, end < 0 ? undefined : end);
}
/** Every match of `re`'s first group, at least one. */
function all(src: string, re: RegExp, what: string): string[] {
  const out = [...src.matchAll(re)].map((m) => m[1]!);
  if (out.length === 0) throw new Error(`x/mod's test has no ${what}`);
  return out;
}
/** A Go interpreted string literal's value (the escapes x/mod's tests use). */
const goString = (lit: string) => lit.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');

let checks = 0;

test('signed-note (TestSign): the seed signs the text to the expected note, byte for byte', async () => {
  const body = goFunc(source('note/note_test.go'), 'TestSign');
  const skey = all(body, /skey := "(PRIVATE\+KEY\+[^"]+)"/g, 'signer key')[0]!;
  const text = all(body, /text := ((?:"[^"]*"(?: \+\s*)?)+)/g, 'text')[0]!;
  const want = all(body, /want := `([^`]+)`/g, 'expected note')[0]!;
  const plain = [...text.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => goString(m[1]!)).join('');
  // PRIVATE+KEY+<name>+<hash>+base64(0x01 ‖ seed)
  const [, name, hash, key] = /^PRIVATE\+KEY\+([^+]+)\+([0-9a-f]{8})\+(.+)$/.exec(skey)!;
  const raw = L.base64Decode(key!);
  assert.is(raw[0], L.NOTE_ED25519);
  const signer = L.createNoteSigner(name!, await importSigningKey(raw.slice(1), { alg: 'EdDSA' }));
  assert.is(signer.verifierKey.split('+')[1], hash);
  assert.is(await L.signNote(plain, [signer]), want);
  checks++;
});

test('signed-note (TestNewVerifier, TestSign): the vkey verifies the note; a changed one is refused', async () => {
  const src = source('note/note_test.go');
  const vkey = all(goFunc(src, 'TestNewVerifier'), /vkey := "([^"]+)"/g, 'verifier key')[0]!;
  const want = all(goFunc(src, 'TestSign'), /want := `([^`]+)`/g, 'expected note')[0]!;
  const key = L.parseVerifierKey(vkey);
  assert.is(key.keyId, L.noteKeyId(key.name, L.NOTE_ED25519, key.publicKey));
  const r = await L.verifyNote(want, [vkey]);
  assert.ok(r.valid, JSON.stringify(r));
  if (r.valid) assert.ok(r.text.startsWith('If you think cryptography'));
  const changed = await L.verifyNote(want.replace('problem,', 'problem;'), [vkey]);
  assert.is(!changed.valid && changed.error.code, 'checkpoint_signature_invalid');
  // x/mod refuses these keys (badKey(...)): a wrong length, an unknown algorithm; so must the SDK.
  const bad = all(goFunc(src, 'TestNewVerifier'), /badKey\("([^"]+)"\)/g, 'refused key');
  assert.ok(bad.length >= 2);
  for (const b of bad)
    assert.throws(
      () => L.parseVerifierKey(b),
      (e: any) => e.code === 'malformed',
      b,
    );
  checks += 2;
});

test('tree note (TestFormatTree): RFC 6962 record hash and checkpoint text as x/mod writes them', () => {
  const body = goFunc(source('tlog/note_test.go'), 'TestFormatTree');
  const n = Number(all(body, /n := int64\((\d+)\)/g, 'size')[0]);
  const record = goString(all(body, /RecordHash\(\[\]byte\("([^"]*)"\)\)/g, 'record')[0]!);
  const golden = goString(all(body, /golden := "([^"]+)"/g, 'golden')[0]!);
  const [origin] = golden.split('\n');
  const rootHash = L.leafHash(L.utf8Encode(record));
  assert.is(L.formatCheckpoint({ origin: origin!, size: n, rootHash }), golden);
  const parsed = L.parseCheckpoint(golden);
  assert.equal([parsed.origin, parsed.size, parsed.rootHash, parsed.extensions], [origin, n, rootHash, []]);
  checks++;
});

test('tile paths (TestTilePath): the index groups and partial widths, the refused spellings refused', () => {
  const table = source('tlog/tlog_test.go');
  const rows = [...table.matchAll(/\{"(tile\/[^"]+)", Tile\{([^}]*)\}\}/g)].map(([, path, fields]) => [
    path!,
    ...(fields ? fields.split(',').map((f) => f.trim()) : []),
  ]);
  assert.ok(rows.length >= 6, `${rows.length} rows`);
  let compared = 0;
  for (const [path, h, l, n, w] of rows) {
    // x/mod's path is tile/<H>/<L>/<N>[.p/<W>] with a tile height H; C2SP fixed H = 8 and dropped it.
    const rest = path!.split('/').slice(2).join('/');
    if (h === undefined) {
      assert.throws(() => L.parseTilePath(`tile/${rest}`), /tile path/, path);
      continue;
    }
    const full = Number(w) === 2 ** Number(h);
    const level = l === '-1' ? 'entries' : Number(l);
    const ref = { level, index: Number(n), width: full ? 256 : Number(w) } as L.TileRef;
    const c2sp = `tile/${level}/${rest.split('/').slice(1).join('/')}`;
    assert.is(L.tilePath(ref), c2sp, path);
    assert.equal(L.parseTilePath(c2sp), ref, path);
    compared++;
  }
  assert.ok(compared >= 5, `${compared}`);
  checks++;
});

test('at least 5 x/mod example checks ran', () => {
  assert.ok(checks >= 5, `${checks}`);
});

test.run();
