/**
 * Signed notes, checkpoints, cosignatures, tlog-proofs, tiles and log entries (C2SP signed-note,
 * tlog-checkpoint, tlog-cosignature, tlog-proof, tlog-tiles): what each accepts and what it
 * refuses, with which code; and hostile text never makes a verifier throw.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { generateKeyPair, importSigningKey, CtlError } from '../../src/index.js';
import * as L from '../../src/entries/log.js';
import { params, runs } from '../properties/fixtures.js';

const key = async () => importSigningKey((await generateKeyPair()).privateKeyPem);
const ORIGIN = 'ctl.example/gateway-log';
const [log, log2, w1, w2, w3] = await Promise.all([key(), key(), key(), key(), key()]);
const signer = L.createNoteSigner(ORIGIN, log);
const other = L.createNoteSigner('ctl.example/other-log', log2);
const witnesses = [
  L.createCosigner('w1.example', w1),
  L.createCosigner('w2.example', w2),
  L.createCosigner('w3.example', w3),
];
const wkeys = witnesses.map((w) => w.verifierKey);
const entries = Array.from({ length: 10 }, (_, i) => L.utf8Encode(`entry ${i}`));
const root = L.rootFromLeafHashes(entries.map(L.leafHash));
const checkpoint = await L.signCheckpoint({ origin: ORIGIN, size: 10, rootHash: root }, [signer]);
const text = L.parseNote(checkpoint).text;
const cosigned = async (n: number, at = 1_800_000_000) =>
  checkpoint + (await Promise.all(witnesses.slice(0, n).map((w) => w.cosign(text, at)))).join('');
const code = (r: { valid: boolean; error?: { code: string } }) => (r.valid ? 'valid' : r.error!.code);
const throwsCode = (f: () => unknown) => {
  try {
    f();
    return 'returned';
  } catch (e) {
    return e instanceof CtlError ? e.code : `threw ${String(e)}`;
  }
};

test('a checkpoint signed by the log verifies; its fields are read back', async () => {
  const r = await L.verifyCheckpoint(checkpoint, [signer.verifierKey]);
  assert.ok(r.valid, JSON.stringify(r));
  if (!r.valid) return;
  assert.equal([r.checkpoint.origin, r.checkpoint.size, r.checkpoint.extensions], [ORIGIN, 10, []]);
  assert.equal(r.checkpoint.rootHash, root);
  assert.equal(r.signedBy, [`${ORIGIN}+${signer.keyId.toString(16).padStart(8, '0')}`]);
  assert.is(L.parseVerifierKey(signer.verifierKey).type, L.NOTE_ED25519);
  assert.is(L.parseVerifierKey(witnesses[0]!.verifierKey).type, L.COSIGNATURE_ED25519);
});

test('signatures: unknown keys ignored, a known key that fails refuses the note, a repeat counts once', async () => {
  const withOther = (await L.signNote(text, [other, signer])).toString();
  assert.is(code(await L.verifyCheckpoint(withOther, [signer.verifierKey])), 'valid');
  assert.is(code(await L.verifyCheckpoint(withOther, [other.verifierKey])), 'checkpoint_origin_mismatch');
  assert.is(code(await L.verifyCheckpoint(checkpoint, [other.verifierKey])), 'checkpoint_signature_invalid');
  const lines = checkpoint.split('\n');
  const sigLine = lines[lines.length - 2]!;
  assert.is(code(await L.verifyCheckpoint(`${checkpoint}${sigLine}\n`, [signer.verifierKey])), 'valid');
  // a known key's line over another text: the whole note is refused
  const forged = checkpoint.replace('\n10\n', '\n11\n');
  assert.is(code(await L.verifyCheckpoint(forged, [signer.verifierKey])), 'checkpoint_signature_invalid');
  const otherTextSig = (await L.signNote('ctl.example/gateway-log\n11\nAAAA\n', [signer])).split('\n\n')[1]!;
  assert.is(
    code(await L.verifyCheckpoint(`${checkpoint}${otherTextSig}`, [signer.verifierKey])),
    'checkpoint_signature_invalid',
  );
  // the same name and key ID as a trusted key, another key: refused, never confused
  const impostor = L.createNoteSigner(ORIGIN, log2);
  assert.is(
    code(await L.verifyCheckpoint(await L.signNote(text, [impostor]), [signer.verifierKey])),
    'checkpoint_signature_invalid',
  );
});

test('origin: the log key names it by default; options.origin overrides', async () => {
  const elsewhere = await L.signCheckpoint({ origin: 'another.example/log', size: 10, rootHash: root }, [signer]);
  assert.is(code(await L.verifyCheckpoint(elsewhere, [signer.verifierKey])), 'checkpoint_origin_mismatch');
  assert.is(
    code(await L.verifyCheckpoint(elsewhere, [signer.verifierKey], { origin: 'another.example/log' })),
    'valid',
  );
  assert.is(
    code(await L.verifyCheckpoint(checkpoint, [signer.verifierKey], { origin: 'x' })),
    'checkpoint_origin_mismatch',
  );
});

test('cosignatures: k of n distinct witnesses; a bad cosignature of a known witness refuses', async () => {
  const opts = (k: number) => ({ witnessKeys: wkeys, requireCosignatures: k });
  assert.is(code(await L.verifyCheckpoint(await cosigned(2), [signer.verifierKey], opts(2))), 'valid');
  assert.is(
    code(await L.verifyCheckpoint(await cosigned(1), [signer.verifierKey], opts(2))),
    'checkpoint_cosignatures_insufficient',
  );
  assert.is(
    code(await L.verifyCheckpoint(checkpoint, [signer.verifierKey], opts(1))),
    'checkpoint_cosignatures_insufficient',
  );
  const r = await L.verifyCheckpoint(await cosigned(3, 1_700_000_123), [signer.verifierKey], opts(3));
  assert.ok(r.valid && r.cosignatures.map((c) => c.timestamp).every((t) => t === 1_700_000_123));
  // one witness cosigning twice (two lines, or two timestamps) is one witness
  const twice = (await cosigned(1)) + (await witnesses[0]!.cosign(text, 1_800_000_001));
  assert.is(
    code(await L.verifyCheckpoint(twice, [signer.verifierKey], opts(2))),
    'checkpoint_cosignatures_insufficient',
  );
  // a cosignature whose timestamp was changed no longer verifies: the note is refused
  const line = await witnesses[1]!.cosign(text, 1_800_000_000);
  const raw = L.base64Decode(line.trim().split(' ')[2]!);
  raw[11]! ^= 1;
  const tampered = `${checkpoint}\u2014 w2.example ${L.base64Encode(raw)}\n`;
  assert.is(code(await L.verifyCheckpoint(tampered, [signer.verifierKey], opts(0))), 'checkpoint_signature_invalid');
  // a cosignature is not a note signature: a witness key given as a log key, and the reverse, are malformed
  assert.is(code(await L.verifyCheckpoint(await cosigned(1), [wkeys[0]!])), 'malformed');
  assert.is(
    code(await L.verifyCheckpoint(checkpoint, [signer.verifierKey], { witnessKeys: [signer.verifierKey] })),
    'malformed',
  );
  assert.is(code(await L.verifyCheckpoint(checkpoint, [signer.verifierKey], opts(4))), 'malformed');
  // unknown witnesses' lines are ignored
  assert.is(code(await L.verifyCheckpoint(await cosigned(3), [signer.verifierKey])), 'valid');
});

test('note syntax: what x/mod and the spec refuse, refused as malformed', async () => {
  const sig = checkpoint.split('\n\n')[1]!;
  const cases: Record<string, string> = {
    'no blank line': `${text}${sig}`,
    'no signature': `${text}\n`,
    'no final newline': checkpoint.slice(0, -1),
    'a tab': checkpoint.replace('\n10\n', '\n10\t\n'),
    'a carriage return': checkpoint.replace('\n10\n', '\r\n10\n'),
    'a hyphen for the em dash': checkpoint.replace('\u2014 ', '- '),
    'no space after the name': checkpoint.replace(`${ORIGIN} `, `${ORIGIN}`),
    'base64 without padding': checkpoint.replace(/=\n$/, '\n'),
    'a lone surrogate': checkpoint.replace('\n10\n', '\n10\ud800\n'),
    'a 4-byte signature': `${text}\n\u2014 ${ORIGIN} AAAAAA==\n`,
    'a name with +': `${text}\n\u2014 a+b AAAAAAA=\n`,
    'too many signatures': text + '\n' + `\u2014 x AAAAAAA=\n`.repeat(101),
  };
  for (const [name, note] of Object.entries(cases))
    assert.is(code(await L.verifyCheckpoint(note, [signer.verifierKey])), 'malformed', name);
  assert.is(code(await L.verifyCheckpoint(L.utf8Encode(checkpoint), [signer.verifierKey])), 'valid');
  assert.is(code(await L.verifyCheckpoint(new Uint8Array([0xff, 0x0a]), [signer.verifierKey])), 'malformed');
  assert.is(code(await L.verifyCheckpoint(checkpoint, 'nonsense')), 'malformed');
  assert.is(code(await L.verifyCheckpoint(checkpoint, [signer.verifierKey, signer.verifierKey])), 'malformed');
  assert.is(code(await L.verifyCheckpoint(null as any, null as any, null as any)), 'malformed');
});

test('checkpoint text: three lines, extensions, sizes without leading zeros, the empty root', async () => {
  const b = L.base64Encode(root);
  assert.equal(L.parseCheckpoint(`o\n5\n${b}\next one\n`).extensions, ['ext one']);
  for (const bad of [
    `o\n05\n${b}\n`,
    `o\n-1\n${b}\n`,
    `o\n5\n${b}`,
    `o\n5\n\n${b}\n`,
    `\n5\n${b}\n`,
    `o\n5\n${b}\n\n`,
    `o\n5\nAAAA\n`,
    `o\n99999999999999999\n${b}\n`,
    `o\n0\n${b}\n`,
  ])
    assert.is(
      throwsCode(() => L.parseCheckpoint(bad)),
      'malformed',
      JSON.stringify(bad),
    );
  assert.is(L.parseCheckpoint(`o\n0\n${L.base64Encode(L.emptyRoot())}\n`).size, 0);
  assert.is(L.formatCheckpoint({ origin: 'o', size: 5, rootHash: root, extensions: ['e'] }), `o\n5\n${b}\ne\n`);
});

test('vkeys: the key ID must match; Ed25519 only; a name without spaces or +', () => {
  const vk = signer.verifierKey;
  const [name, id, k] = [
    vk.slice(0, vk.indexOf('+')),
    vk.split('+')[1]!,
    vk.slice(vk.indexOf('+', vk.indexOf('+') + 1) + 1),
  ];
  assert.is(L.parseVerifierKey(`${name}+${id.toUpperCase()}+${k}`).keyId, signer.keyId);
  const wrongId = ((signer.keyId ^ 1) >>> 0).toString(16).padStart(8, '0');
  const raw = L.base64Decode(k);
  for (const bad of [
    `${name}+${wrongId}+${k}`,
    `other+${id}+${k}`,
    `${name}+${id.slice(1)}+${k}`,
    `na me+${id}+${k}`,
    `${name}+${id}+${L.base64Encode(Uint8Array.of(2, ...raw.slice(1)))}`,
    `${name}+${id}+${L.base64Encode(raw.slice(0, 20))}`,
    `${name}+${id}`,
    '',
  ])
    assert.is(
      throwsCode(() => L.parseVerifierKey(bad)),
      'malformed',
      bad,
    );
});

test('consistency between two checkpoints: rollback and split view are log_inconsistent', async () => {
  const first = L.parseCheckpoint(text);
  const six = L.rootFromLeafHashes(entries.slice(0, 6).map(L.leafHash));
  const older = { origin: ORIGIN, size: 6, rootHash: six };
  const leaves = entries.map(L.leafHash);
  const proof = await L.proveConsistency(6, 10, (nodes) =>
    nodes.map((n) => L.rootFromLeafHashes(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level))),
  );
  assert.equal(L.verifyCheckpointConsistency(older, first, proof), { valid: true });
  assert.is(code(L.verifyCheckpointConsistency(first, older, proof)), 'log_inconsistent');
  assert.is(code(L.verifyCheckpointConsistency(first, { ...first, rootHash: six }, [])), 'log_inconsistent');
  assert.is(code(L.verifyCheckpointConsistency(first, { ...first, origin: 'x' }, [])), 'checkpoint_origin_mismatch');
  assert.is(code(L.verifyCheckpointConsistency(older, first, proof.slice(1))), 'log_proof_invalid');
  assert.equal(L.verifyCheckpointConsistency(first, first, []), { valid: true });
  const empty = { origin: ORIGIN, size: 0, rootHash: L.emptyRoot() };
  assert.equal(L.verifyCheckpointConsistency(empty, first, []), { valid: true });
  assert.is(code(L.verifyCheckpointConsistency(empty, first, proof)), 'log_proof_invalid');
});

test('tlog-proof: a receipt proven under a cosigned checkpoint; another entry, index or note refused', async () => {
  const receipt = { receiptId: 'rcpt_1', amount: { amountMinor: '1250', currency: 'EUR' }, signature: 'sig' };
  const logged = [...entries.slice(0, 7), L.logEntry('receipt', receipt), ...entries.slice(8)];
  const leaves = logged.map(L.leafHash);
  const cpNote = await L.signCheckpoint({ origin: ORIGIN, size: 10, rootHash: L.rootFromLeafHashes(leaves) }, [signer]);
  const note = cpNote + (await witnesses[0]!.cosign(L.parseNote(cpNote).text, 1_800_000_000));
  const read: L.ReadHashes = (nodes) =>
    nodes.map((n) => L.rootFromLeafHashes(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level)));
  const proof = L.formatTlogProof({ index: 7, proof: await L.proveInclusion(7, 10, read), checkpoint: note });
  const opts = { witnessKeys: wkeys, requireCosignatures: 1 };
  const r = await L.verifyTlogProof(proof, L.logEntry('receipt', { ...receipt }), [signer.verifierKey], opts);
  assert.ok(r.valid && r.index === 7 && r.cosignatures.length === 1, JSON.stringify(r));
  assert.is(code(await L.verifyTlogProof(proof, { leafHash: leaves[7]! }, [signer.verifierKey])), 'valid');
  const changed = L.logEntry('receipt', { ...receipt, amount: { amountMinor: '1251', currency: 'EUR' } });
  assert.is(code(await L.verifyTlogProof(proof, changed, [signer.verifierKey])), 'log_proof_invalid');
  assert.is(
    code(await L.verifyTlogProof(proof.replace('index 7', 'index 6'), logged[7]!, [signer.verifierKey])),
    'log_proof_invalid',
  );
  assert.is(
    code(await L.verifyTlogProof(proof, logged[7]!, [signer.verifierKey], { ...opts, requireCosignatures: 2 })),
    'checkpoint_cosignatures_insufficient',
  );
  assert.is(
    code(await L.verifyTlogProof(proof.replace('\n10\n', '\n11\n'), logged[7]!, [signer.verifierKey])),
    'checkpoint_signature_invalid',
  );
  assert.is(
    code(await L.verifyTlogProof(proof.replace('index 7', 'index 07'), logged[7]!, [signer.verifierKey])),
    'malformed',
  );
  assert.is(code(await L.verifyTlogProof(proof, 'x' as any, [signer.verifierKey])), 'malformed');
  const withExtra = L.formatTlogProof({ ...L.parseTlogProof(proof), extra: L.utf8Encode('rcpt_1') });
  assert.equal(L.parseTlogProof(withExtra).extra, L.utf8Encode('rcpt_1'));
  assert.is(code(await L.verifyTlogProof(withExtra, logged[7]!, [signer.verifierKey])), 'valid');
});

test('log entries: "ctl-<type>/1\\n" + JCS of the artifact, read back strictly', () => {
  const e = L.logEntry('grant', { b: 1, a: 'x' });
  assert.is(L.utf8Decode(e), 'ctl-grant/1\n{"a":"x","b":1}');
  assert.equal(L.parseLogEntry(e), { type: 'grant', artifact: { a: 'x', b: 1 } });
  for (const bad of [
    'ctl-grant/1\n{"b":1,"a":"x"}',
    'ctl-grant/2\n{}',
    'grant\n{}',
    'ctl-grant/1\n[1]',
    'ctl-grant/1\n{"a":1,"a":1}',
  ])
    assert.is(
      throwsCode(() => L.parseLogEntry(L.utf8Encode(bad))),
      'malformed',
      bad,
    );
  assert.is(
    throwsCode(() => L.logEntry('receipt', [1])),
    'malformed',
  );
});

test('tiles: paths as C2SP writes them, read back only in that spelling; entry bundles', () => {
  const cases: Array<[L.TileRef, string]> = [
    [{ level: 0, index: 0, width: 256 }, 'tile/0/000'],
    [{ level: 0, index: 1000, width: 256 }, 'tile/0/x001/000'],
    [{ level: 3, index: 1234067, width: 7 }, 'tile/3/x001/x234/067.p/7'],
    [{ level: 'entries', index: 999, width: 255 }, 'tile/entries/999.p/255'],
    [{ level: 63, index: 2 ** 53 - 1, width: 1 }, 'tile/63/x009/x007/x199/x254/x740/991.p/1'],
  ];
  for (const [ref, path] of cases) {
    assert.is(L.tilePath(ref), path);
    assert.equal(L.parseTilePath(path), ref);
  }
  for (const bad of [
    'tile/0/x000/005',
    'tile/00/005',
    'tile/0/005.p/256',
    'tile/0/005.p/0',
    'tile/0/005.p/012',
    'tile/64/000',
    'tile/0/5',
    'tile/0/0005',
    'tile/data/000',
    '/tile/0/000',
    'tile/0/000/',
    'tile/0/x001',
  ])
    assert.is(
      throwsCode(() => L.parseTilePath(bad)),
      'malformed',
      bad,
    );
  const bundle = L.formatEntryBundle([L.utf8Encode('a'), new Uint8Array(0), new Uint8Array(300).fill(7)]);
  assert.equal(
    L.parseEntryBundle(bundle).map((e) => e.length),
    [1, 0, 300],
  );
  assert.is(
    throwsCode(() => L.parseEntryBundle(bundle.subarray(0, bundle.length - 1))),
    'malformed',
  );
  assert.is(
    throwsCode(() => L.parseEntryBundle(new Uint8Array([0]))),
    'malformed',
  );
  assert.is(
    throwsCode(() => L.parseEntryBundle(new Uint8Array(2 * 257))),
    'malformed',
  );
  assert.equal(L.tilesOfTree(0), []);
  assert.equal(L.tilesOfTree(1).map(L.tilePath), ['tile/0/000.p/1', 'tile/entries/000.p/1']);
});

test('base64 in notes and checkpoints is standard, padded and canonical (RFC 4648 §4)', () => {
  assert.equal(L.base64Decode('AQ=='), new Uint8Array([1]));
  assert.equal(L.base64Decode('AQI='), new Uint8Array([1, 2]));
  assert.equal(L.base64Decode(''), new Uint8Array(0));
  for (const bad of ['AQ', 'AQ=', 'AR==', 'AQJ=', 'A===', ' AQ==', 'AQ==\n', '-_8=', 'AQ==AQ=='])
    assert.is(
      throwsCode(() => L.base64Decode(bad)),
      'malformed',
      JSON.stringify(bad),
    );
});

test('hostile text: the verifiers answer, never throw; the parsers throw only CtlError', async () => {
  const noteish = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc
      .constantFrom(checkpoint, text)
      .chain((base) =>
        fc
          .tuple(fc.nat(base.length), fc.string({ maxLength: 8 }))
          .map(([at, s]) => base.slice(0, at) + s + base.slice(at)),
      ),
  );
  await fc.assert(
    fc.asyncProperty(noteish, async (s) => {
      const r = await L.verifyCheckpoint(s, [signer.verifierKey], { witnessKeys: wkeys });
      assert.ok(typeof r.valid === 'boolean');
      const p = await L.verifyTlogProof(s, new Uint8Array(1), [signer.verifierKey]);
      assert.ok(!p.valid);
      for (const f of [
        () => L.parseNote(s),
        () => L.parseTilePath(s),
        () => L.parseTlogProof(s),
        () => L.parseVerifierKey(s),
      ]) {
        const c = throwsCode(f);
        assert.ok(c === 'returned' || c === 'malformed', c);
      }
    }),
    params(runs(2000)),
  );
});

test.run();
