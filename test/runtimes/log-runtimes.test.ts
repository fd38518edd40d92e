/**
 * The log's portable suite (log-suite.mjs) on every target, for each build that carries the log's
 * verifying half: `ctl/log`, `ctl/verify` (a terminal checking a receipt is logged) and `ctl`.
 * The sources on Node, the ESM and CJS builds on Node, the ESM build on Bun and Deno, and the
 * IIFE in QuickJS (only the firmware ABI) and in a bare `vm` (no host object). Every target must
 * pass every check and give exactly the outcomes of `ctl/log`'s source on Node. A runtime missing
 * here is skipped LOUDLY; a missing dist/ is a failure (`npm run build`).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createContext, runInContext } from 'node:vm';
import { root } from '../../firmware-bridge/node/device-script.js';
import { createQuickJsEngine } from '../../firmware-bridge/node/quickjs.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { findRuntime, suiteScript } from './targets.js';
import { generateKeyPair, importSigningKey } from '../../src/index.js';
import * as L from '../../src/entries/log.js';

type Outcomes = Array<[string, string]>;
interface SuiteResult {
  passed: number;
  failed: number;
  outcomes: Outcomes;
}

// ---------------------------------------------------------------------------------------------
// Fixtures: Merkle probes over the entries below, and notes the driver signs with fresh keys.

const arr = (b: Uint8Array) => Array.from(b);
const key = async () => importSigningKey((await generateKeyPair()).privateKeyPem);
const ORIGIN = 'ctl.example/gateway-log';
const log = L.createNoteSigner(ORIGIN, await key());
const stranger = L.createNoteSigner(ORIGIN, await key());
const witnesses = [L.createCosigner('w1.example', await key()), L.createCosigner('w2.example', await key())];
const wkeys = witnesses.map((w) => w.verifierKey);
const receipt = {
  version: 1,
  receiptId: 'rcpt_runtime',
  amount: { amountMinor: '1250', currency: 'EUR' },
  signature: 'c2ln',
};
const entries = Array.from({ length: 300 }, (_, i) =>
  i === 201 ? L.logEntry('receipt', receipt) : L.utf8Encode(`entry ${i}`),
);
const leaves = entries.map(L.leafHash);
const read: L.ReadHashes = (nodes) =>
  nodes.map((n) => L.rootFromLeafHashes(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level)));
async function checkpointOf(size: number, cosigners = witnesses, rootHash?: Uint8Array) {
  const note = await L.signCheckpoint({ origin: ORIGIN, size, rootHash: rootHash ?? (await L.treeRoot(size, read)) }, [
    log,
  ]);
  const text = L.parseNote(note).text;
  return note + (await Promise.all(cosigners.map((w) => w.cosign(text, 1_800_000_000)))).join('');
}

/**
 * Inclusion and consistency probes over these 300 entries: each reference proof (valid by RFC 9162
 * §2.1.3) and its mutants (a flipped bit in each hash, one hash more or fewer, another index or
 * root), invalid by construction. The verdict each target must give is the source's on Node.
 */
const flip = (h: Uint8Array) => Uint8Array.from(h, (x, i) => (i === 0 ? x ^ 1 : x));
const mutants = (proof: Uint8Array[]) => [
  ...proof.map((_, k) => ({ name: `bit ${k}`, proof: proof.map((h, j) => (j === k ? flip(h) : h)) })),
  { name: 'one more', proof: [...proof, leaves[0]!] },
  ...(proof.length ? [{ name: 'one fewer', proof: proof.slice(0, -1) }] : []),
];
const verdict = (r: L.LogCheck) => (r.valid ? 'valid' : r.error.code);
const inclusion: any[] = [];
const consistency: any[] = [];
for (const size of [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100, 255, 256, 257, 300]) {
  const root = await L.treeRoot(size, read);
  for (const index of new Set([0, size >> 1, size - 1])) {
    const proof = await L.proveInclusion(index, size, read);
    const probe = (
      name: string,
      over: Partial<{ index: number; size: number; proof: Uint8Array[]; root: Uint8Array }>,
    ) => {
      const p = { index, size, proof, root, ...over };
      const r = L.verifyInclusion(leaves[index]!, p.index, p.size, p.proof, p.root);
      inclusion.push({
        ...p,
        name: `${size}/${index} ${name}`,
        leafHash: arr(leaves[index]!),
        proof: p.proof.map(arr),
        root: arr(p.root),
        expected: verdict(r),
        reference: name === 'reference',
      });
    };
    probe('reference', {});
    for (const m of mutants(proof)) probe(m.name, { proof: m.proof });
    if (index + 1 < size) probe('next index', { index: index + 1 });
    probe('another root', { root: flip(root) });
  }
  for (const size1 of new Set([1, size >> 1 || 1, size - 1 || 1, size])) {
    const root1 = await L.treeRoot(size1, read);
    const proof = await L.proveConsistency(size1, size, read);
    const probe = (name: string, over: Partial<{ size1: number; proof: Uint8Array[]; root1: Uint8Array }>) => {
      const p = { size1, size2: size, proof, root1, root2: root, ...over };
      const r = L.verifyConsistency(p.size1, p.size2, p.proof, p.root1, p.root2);
      consistency.push({
        ...p,
        name: `${size1}→${size} ${name}`,
        proof: p.proof.map(arr),
        root1: arr(p.root1),
        root2: arr(p.root2),
        expected: verdict(r),
        reference: name === 'reference',
      });
    };
    probe('reference', {});
    for (const m of mutants(proof)) probe(m.name, { proof: m.proof });
    if (size1 > 1) probe('size1 - 1', { size1: size1 - 1 });
    probe('another old root', { root1: flip(root1) });
  }
}

const cp300 = await checkpointOf(300);
const cp250 = await checkpointOf(250, []);
const withW = { witnessKeys: wkeys, requireCosignatures: 2 };
const checkpoints = [
  { name: 'signed and cosigned', note: cp300, logKeys: [log.verifierKey], options: withW, expected: 'valid 300 2' },
  { name: 'no witness asked', note: cp250, logKeys: [log.verifierKey], expected: 'valid 250 0' },
  {
    name: 'two witnesses asked, none',
    note: cp250,
    logKeys: [log.verifierKey],
    options: withW,
    expected: 'checkpoint_cosignatures_insufficient',
  },
  { name: 'another key', note: cp300, logKeys: [stranger.verifierKey], expected: 'checkpoint_signature_invalid' },
  {
    name: 'a changed size',
    note: cp300.replace('\n300\n', '\n301\n'),
    logKeys: [log.verifierKey],
    expected: 'checkpoint_signature_invalid',
  },
  {
    name: 'another origin',
    note: cp300,
    logKeys: [log.verifierKey],
    options: { origin: 'x.example' },
    expected: 'checkpoint_origin_mismatch',
  },
  { name: 'not a note', note: 'hello', logKeys: [log.verifierKey], expected: 'malformed' },
];
const proofOf = async (index: number, note = cp300) =>
  L.formatTlogProof({
    index,
    proof: await L.proveInclusion(index, L.parseCheckpoint(L.parseNote(note).text).size, read),
    checkpoint: note,
  });
const tlogProofs = [
  {
    name: 'entry 0',
    proof: await proofOf(0),
    entry: arr(entries[0]!),
    logKeys: [log.verifierKey],
    options: withW,
    expected: 'valid',
  },
  {
    name: 'entry 299',
    proof: await proofOf(299),
    entry: arr(entries[299]!),
    logKeys: [log.verifierKey],
    expected: 'valid',
  },
  {
    name: 'another entry',
    proof: await proofOf(5),
    entry: arr(entries[6]!),
    logKeys: [log.verifierKey],
    expected: 'log_proof_invalid',
  },
  {
    name: 'under 250',
    proof: await proofOf(249, cp250),
    entry: arr(entries[249]!),
    logKeys: [log.verifierKey],
    expected: 'valid',
  },
];
const older = cp250;
const fork = await checkpointOf(
  300,
  [],
  L.rootFromLeafHashes([...leaves.slice(0, 299), L.leafHash(L.utf8Encode('forged'))]),
);
const fixtures = {
  inclusion,
  consistency,
  checkpoints,
  tlogProofs,
  receipt: { receipt, proof: await proofOf(201), logKeys: [log.verifierKey], options: withW },
  consistencyPair: {
    older,
    newer: cp300,
    fork,
    logKeys: [log.verifierKey],
    proof: (await L.proveConsistency(250, 300, read)).map(arr),
  },
};

test('fixtures: every reference proof valid, every mutant refused (on Node, from the source)', () => {
  assert.ok(inclusion.length >= 300 && consistency.length >= 300, `${inclusion.length} ${consistency.length}`);
  const wrong = [...inclusion, ...consistency].filter((p) => (p.expected === 'valid') !== p.reference);
  assert.equal(
    wrong.map((p) => `${p.name}: ${p.expected}`),
    [],
  );
});
// ---------------------------------------------------------------------------------------------
// Targets

const suitePath = join(root, 'test', 'runtimes', 'log-suite.mjs');
const suiteSource = readFileSync(suitePath, 'utf8');
const tmp = mkdtempSync(join(tmpdir(), 'ctl-log-runtimes-'));
const dist = (f: string) => {
  const p = join(root, 'dist', f);
  if (!existsSync(p)) throw new Error(`${p} is missing: run \`npm run build\` before the runtime tests`);
  return p;
};
const ROLES = {
  log: { src: '../../src/entries/log.js', esm: 'log.js', cjs: 'log.cjs', iife: 'ctl-log.iife.js', global: 'CTLLog' },
  verify: {
    src: '../../src/entries/verify.js',
    esm: 'verify.js',
    cjs: 'verify.cjs',
    iife: 'ctl-verify.iife.js',
    global: 'CTL',
  },
  full: { src: '../../src/index.js', esm: 'index.js', cjs: 'index.cjs', iife: 'ctl.iife.js', global: 'CTL' },
} as const;
let reference: Outcomes | undefined;

function judge(target: string, r: SuiteResult) {
  const threw = r.outcomes.filter(([, o]) => o.startsWith('threw')).map(([n]) => n);
  assert.is(r.failed, 0, `${target}: ${r.failed} checks failed (${threw.length} threw: ${threw.join(', ')})`);
  assert.ok(r.passed >= 200, `${target}: only ${r.passed} checks ran`);
  if (reference) assert.equal(r.outcomes, reference, `${target} disagrees with ctl/log's source on Node`);
  console.log(`${target}: ${r.passed} checks passed`);
}

async function runHere(lib: unknown): Promise<SuiteResult> {
  const { run } = await import(pathToFileURL(suitePath).href);
  const failures: string[] = [];
  const r = await run(lib, (n: string, ok: boolean, d: string) => ok || failures.push(`${n}: ${d}`), fixtures);
  if (failures.length) console.log(failures.join('\n'));
  return r;
}

const runtimes = (['bun', 'deno'] as const).map((name) => {
  const exe = findRuntime(name);
  if (!exe) console.log(`SKIPPED ${name}: no ${name} binary (node_modules/.bin/${name} or PATH)`);
  return { name, exe };
});

for (const [role, t] of Object.entries(ROLES)) {
  test(`${role}: node, the source`, async () => {
    const r = await runHere(await import(t.src));
    judge(`${role}: node source`, r);
    reference ??= r.outcomes;
  });
  test(`${role}: node, dist/${t.esm} and dist/${t.cjs}`, async () => {
    judge(`${role}: node dist/${t.esm}`, await runHere(await import(pathToFileURL(dist(t.esm)).href)));
    judge(`${role}: node dist/${t.cjs}`, await runHere(createRequire(import.meta.url)(dist(t.cjs))));
  });
  for (const { name, exe } of runtimes) {
    if (!exe) {
      test.skip(`${role}: ${name}, dist/${t.esm}`, () => {});
      continue;
    }
    test(`${role}: ${name}, dist/${t.esm}`, () => {
      const entry = join(tmp, `${role}-${name}.mjs`);
      writeFileSync(
        entry,
        [
          `import * as LIB from ${JSON.stringify(pathToFileURL(dist(t.esm)).href)};`,
          `import { run } from ${JSON.stringify(pathToFileURL(suitePath).href)};`,
          `const report = (n, ok, d) => { if (!ok) console.log('FAILED ' + n + ': ' + d); };`,
          `const r = await run(LIB, report, ${JSON.stringify(fixtures)});`,
          `console.log('RESULT ' + JSON.stringify(r));`,
        ].join('\n'),
      );
      const args =
        name === 'deno'
          ? ['run', '--quiet', '--no-prompt', '--no-config', `--allow-read=${root},${tmp}`, entry]
          : [entry];
      const out = spawnSync(exe, args, {
        cwd: tmp,
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, NO_COLOR: '1' },
      });
      const line = out.stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`${name}: no result (exit ${out.status})\n${out.stdout}\n${out.stderr}`);
      judge(`${role}: ${name} dist/${t.esm}`, JSON.parse(line.slice(7)));
    });
  }
  test(`${role}: quickjs, dist/${t.iife} with only the firmware ABI`, async () => {
    const engine = await createQuickJsEngine({ abi: createNodeAbi() });
    try {
      engine.evalScript(readFileSync(dist(t.iife), 'utf8'), t.iife);
      const hostObjects = engine.evalSync(
        '[typeof crypto, typeof TextEncoder, typeof fetch, typeof process, typeof ' + t.global + '].join()',
      );
      assert.is(hostObjects, 'undefined,undefined,undefined,undefined,object');
      engine.evalScript(suiteScript(suiteSource), 'log-suite.js');
      engine.evalScript(`var __fixtures = ${JSON.stringify(fixtures)}; var __failures = [];`, 'fixtures.js');
      const r = engine.evalSync(
        `run(${t.global}, function (n, ok, d) { if (!ok) __failures.push(n + ': ' + d); }, __fixtures)`,
      ) as SuiteResult;
      const failures = engine.evalSync('__failures') as string[];
      if (failures.length) console.log(failures.join('\n'));
      judge(`${role}: quickjs dist/${t.iife}`, r);
    } finally {
      engine.dispose();
    }
  });
  test(`${role}: bare vm, dist/${t.iife} with no host object at all`, async () => {
    const context = createContext({});
    const run = (code: string, filename: string) => runInContext(code, context, { filename });
    run(readFileSync(dist(t.iife), 'utf8'), t.iife);
    assert.is(
      run('[typeof crypto, typeof TextEncoder, typeof process].join()', 'probe.js'),
      'undefined,undefined,undefined',
    );
    run(suiteScript(suiteSource), 'log-suite.js');
    const out = await run(
      `run(${t.global}, function () {}, JSON.parse(${JSON.stringify(JSON.stringify(fixtures))})).then(JSON.stringify)`,
      'run.js',
    );
    judge(`${role}: bare vm dist/${t.iife}`, JSON.parse(out as string));
  });
}

test.after(() => rmSync(tmp, { recursive: true, force: true }));
test.run();
