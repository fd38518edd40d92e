/**
 * The portable suite on every target (issue 5 item 1): the source on Node, dist/index.js on
 * Node, Bun and Deno, dist/index.cjs on Node, and dist/ctl.iife.js inside QuickJS with no host
 * object but the firmware ABI. Each target must pass every check and give exactly the outcomes
 * of the source on Node. A runtime missing here is skipped LOUDLY (a line starting `SKIPPED`,
 * and uvu's skipped count), never passed; a missing dist/ is a failure: run `npm run build`.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readVectorJson } from '../helpers/vectors.js';
import { root } from '../../firmware-bridge/node/device-script.js';
import { findRuntime, runInQuickJs } from './targets.js';

type Outcomes = Array<[string, string]>;
interface SuiteResult { passed: number; failed: number; outcomes: Outcomes }

const fixtures = readVectorJson('ctl/vectors.json');
const suitePath = join(root, 'test', 'runtimes', 'portable-suite.mjs');
const dist = (f: string) => join(root, 'dist', f);
const tmp = mkdtempSync(join(tmpdir(), 'ctl-runtimes-'));
let reference: Outcomes | undefined;

function requireDist(f: string): string {
  const p = dist(f);
  if (!existsSync(p)) throw new Error(`${p} is missing: run \`npm run build\` before the runtime tests (CI builds first)`);
  return p;
}

function judge(target: string, r: SuiteResult) {
  assert.ok(r.passed > 50, `${target}: only ${r.passed} checks ran`);
  assert.is(r.failed, 0, `${target}: ${r.failed} checks failed:\n${r.outcomes.filter(([, o]) => o === 'threw').map(([n]) => n).join('\n')}`);
  if (reference) assert.equal(r.outcomes, reference, `${target} disagrees with the source on Node`);
  console.log(`${target}: ${r.passed} checks passed`);
}

async function runHere(lib: unknown): Promise<SuiteResult> {
  const { run } = await import(pathToFileURL(suitePath).href);
  const failures: string[] = [];
  const r = await run(lib, (name: string, ok: boolean, detail: string) => { if (!ok) failures.push(`${name}: ${detail}`); }, fixtures);
  if (failures.length) console.log(failures.join('\n'));
  return r;
}

/** An entry file for a separate runtime: imports the library and the suite, prints one RESULT line. */
function entryFor(libPath: string): string {
  const file = join(tmp, `entry-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, [
    `import * as CTL from ${JSON.stringify(pathToFileURL(libPath).href)};`,
    `import { run } from ${JSON.stringify(pathToFileURL(suitePath).href)};`,
    `const fixtures = ${JSON.stringify(fixtures)};`,
    `const failures = [];`,
    `const r = await run(CTL, (n, ok, d) => { if (!ok) failures.push(n + ': ' + d); }, fixtures);`,
    `for (const f of failures) console.log('FAILED ' + f);`,
    `console.log('RESULT ' + JSON.stringify(r));`,
  ].join('\n'));
  return file;
}

function parseResult(target: string, out: { status: number | null; stdout: string; stderr: string; error?: Error }): SuiteResult {
  const line = out.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`${target}: no result (exit ${out.status}${out.error ? ', ' + out.error.message : ''})\n${out.stdout}\n${out.stderr}`);
  return JSON.parse(line.slice(7));
}

test('node: the source (build/src)', async () => {
  const CTL = await import('../../src/index.js');
  const r = await runHere(CTL);
  reference = undefined;
  judge('node source', r);
  reference = r.outcomes;
});

test('node: dist/index.js', async () => {
  const CTL = await import(pathToFileURL(requireDist('index.js')).href);
  judge('node dist/index.js', await runHere(CTL));
});

test('node: dist/index.cjs', async () => {
  const CTL = createRequire(import.meta.url)(requireDist('index.cjs'));
  judge('node dist/index.cjs', await runHere(CTL));
});

for (const name of ['bun', 'deno'] as const) {
  const exe = findRuntime(name);
  if (!exe) {
    console.log(`SKIPPED ${name}: no ${name} binary (node_modules/.bin/${name} or PATH); install the devDependency to run this target`);
    test.skip(`${name}: dist/index.js`, () => {});
    continue;
  }
  test(`${name}: dist/index.js`, () => {
    const entry = entryFor(requireDist('index.js'));
    // Deno without --allow-env/--allow-net: the library must not need either offline.
    const args = name === 'deno' ? ['run', '--quiet', '--no-prompt', '--no-config', '--allow-read=' + root + ',' + tmp, entry] : [entry];
    const out = spawnSync(exe, args, { cwd: tmp, encoding: 'utf8', timeout: 120_000, env: { ...process.env, NO_COLOR: '1' } });
    judge(`${name} (${exe.split('/').slice(-3).join('/')}) dist/index.js`, parseResult(name, out));
  });
}

test('quickjs: dist/ctl.iife.js with only the firmware ABI', async () => {
  const iife = readFileSync(requireDist('ctl.iife.js'), 'utf8');
  const r = await runInQuickJs(iife, readFileSync(suitePath, 'utf8'), fixtures);
  assert.equal(r.hostObjects, { crypto: 'undefined', TextEncoder: 'undefined', fetch: 'undefined', setTimeout: 'undefined', process: 'undefined', ctlHost: 'object' });
  assert.is(r.backend, 'noble');
  judge('quickjs dist/ctl.iife.js', r.result);
});

test.after(() => rmSync(tmp, { recursive: true, force: true }));
test.run();
