/**
 * The portable suite on every target, for the whole SDK and for each role bundle (docs/sdk-api.md):
 * the source entry on Node, the ESM dist on Node, Bun and Deno, the CJS dist on Node, and the
 * IIFE inside QuickJS (no host object but the firmware ABI) and inside a bare `vm` context (none
 * at all), the last two with the opt-in pure-JS P-256 registered. Each target must pass every
 * check of its role and give exactly the outcomes of its role's source entry on Node. A runtime
 * missing here is skipped LOUDLY (a line starting `SKIPPED`, and uvu's skipped count), never
 * passed; a missing dist/ is a failure: run `npm run build`.
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
import { findRuntime, runInBareVm, runInQuickJs, type SuiteRole } from './targets.js';

type Outcomes = Array<[string, string]>;
interface SuiteResult {
  passed: number;
  failed: number;
  outcomes: Outcomes;
}

const shared = readVectorJson('ctl/vectors.json');
// Our Human-Agent vectors (PROTOCOL.md §10) run on every target too: the offline ones without
// earlier presentations (the suite verifies each case once, offline, with a fresh spend storage).
const human = JSON.parse(readFileSync(join(root, 'test', 'vectors', 'own', 'human-agent.json'), 'utf8'));
// And our delegation vectors (PROTOCOL.md §14), their keys renamed `own-<name>` beside the shared ones.
const deleg = JSON.parse(readFileSync(join(root, 'test', 'vectors', 'own', 'delegation.json'), 'utf8'));
const delegKeys = Object.fromEntries(Object.entries(deleg.keys).map(([n, v]) => [`own-${n}`, v]));
const delegCases = deleg.cases
  .filter((k: any) => k.options.offline !== false && !k.input.prior)
  .map((k: any) => ({ ...k, options: { ...k.options, trust: k.options.trust.replace(':', ':own-') } }));
const fixtures = {
  ...shared,
  keys: { ...shared.keys, ...human.keys, ...delegKeys },
  cases: [
    ...shared.cases,
    ...human.cases.filter((k: any) => k.options.offline !== false && !k.input.prior),
    ...delegCases,
  ],
};
const suitePath = join(root, 'test', 'runtimes', 'portable-suite.mjs');
const dist = (f: string) => join(root, 'dist', f);
const tmp = mkdtempSync(join(tmpdir(), 'ctl-runtimes-'));

/** Each role: its source entry, its dist files, and how many checks it must at least run. */
const ROLES: Record<SuiteRole, { src: string; esm: string; cjs: string; iife: string; minChecks: number }> = {
  full: { src: '../../src/index.js', esm: 'index.js', cjs: 'index.cjs', iife: 'ctl.iife.js', minChecks: 50 },
  verify: {
    src: '../../src/entries/verify.js',
    esm: 'verify.js',
    cjs: 'verify.cjs',
    iife: 'ctl-verify.iife.js',
    minChecks: 45,
  },
  wallet: {
    src: '../../src/entries/wallet.js',
    esm: 'wallet.js',
    cjs: 'wallet.cjs',
    iife: 'ctl-wallet.iife.js',
    minChecks: 12,
  },
};
const reference: Partial<Record<SuiteRole, Outcomes>> = {};

function requireDist(f: string): string {
  const p = dist(f);
  if (!existsSync(p))
    throw new Error(`${p} is missing: run \`npm run build\` before the runtime tests (CI builds first)`);
  return p;
}

function judge(role: SuiteRole, target: string, r: SuiteResult) {
  assert.ok(r.passed > ROLES[role].minChecks, `${target}: only ${r.passed} checks ran`);
  assert.is(
    r.failed,
    0,
    `${target}: ${r.failed} checks failed:\n${r.outcomes
      .filter(([, o]) => o === 'threw')
      .map(([n]) => n)
      .join('\n')}`,
  );
  const ref = reference[role];
  if (ref) assert.equal(r.outcomes, ref, `${target} disagrees with the ${role} source on Node`);
  console.log(`${target}: ${r.passed} checks passed`);
}

async function runHere(lib: unknown, role: SuiteRole, humanAgent?: unknown): Promise<SuiteResult> {
  const { run } = await import(pathToFileURL(suitePath).href);
  const failures: string[] = [];
  const r = await run(
    lib,
    (name: string, ok: boolean, detail: string) => {
      if (!ok) failures.push(`${name}: ${detail}`);
    },
    fixtures,
    role,
    humanAgent,
  );
  if (failures.length) console.log(failures.join('\n'));
  return r;
}

/** An entry file for a separate runtime: imports the library and the suite, prints one RESULT line. */
function entryFor(libPath: string, role: SuiteRole): string {
  const file = join(tmp, `entry-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(
    file,
    [
      `import * as CTL from ${JSON.stringify(pathToFileURL(libPath).href)};`,
      `import * as humanAgent from ${JSON.stringify(pathToFileURL(dist('human-agent.js')).href)};`,
      `import { run } from ${JSON.stringify(pathToFileURL(suitePath).href)};`,
      `const fixtures = ${JSON.stringify(fixtures)};`,
      `const failures = [];`,
      `const r = await run(CTL, (n, ok, d) => { if (!ok) failures.push(n + ': ' + d); }, ` +
        `fixtures, ${JSON.stringify(role)}, humanAgent);`,
      `for (const f of failures) console.log('FAILED ' + f);`,
      `console.log('RESULT ' + JSON.stringify(r));`,
    ].join('\n'),
  );
  return file;
}

function parseResult(
  target: string,
  out: { status: number | null; stdout: string; stderr: string; error?: Error },
): SuiteResult {
  const line = out.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line)
    throw new Error(
      `${target}: no result (exit ${out.status}${out.error ? ', ' + out.error.message : ''})\n` +
        `${out.stdout}\n${out.stderr}`,
    );
  return JSON.parse(line.slice(7));
}

const runtimes = (['bun', 'deno'] as const).map((name) => {
  const exe = findRuntime(name);
  if (!exe)
    console.log(
      `SKIPPED ${name}: no ${name} binary (node_modules/.bin/${name} or PATH); install the ` +
        'devDependency to run this target',
    );
  return { name, exe };
});

for (const role of ['full', 'verify', 'wallet'] as const) {
  const { src, esm, cjs, iife } = ROLES[role];
  test(`${role}: node, the source (build/src)`, async () => {
    const r = await runHere(await import(src), role, await import('../../src/entries/human-agent.js'));
    reference[role] = undefined;
    judge(role, `${role}: node source`, r);
    reference[role] = r.outcomes;
  });

  test(`${role}: node, dist/${esm}`, async () => {
    judge(
      role,
      `${role}: node dist/${esm}`,
      await runHere(
        await import(pathToFileURL(requireDist(esm)).href),
        role,
        await import(pathToFileURL(requireDist('human-agent.js')).href),
      ),
    );
  });

  test(`${role}: node, dist/${cjs}`, async () => {
    const req = createRequire(import.meta.url);
    judge(
      role,
      `${role}: node dist/${cjs}`,
      await runHere(req(requireDist(cjs)), role, req(requireDist('human-agent.cjs'))),
    );
  });

  for (const { name, exe } of runtimes) {
    if (!exe) {
      test.skip(`${role}: ${name}, dist/${esm}`, () => {});
      continue;
    }
    test(`${role}: ${name}, dist/${esm}`, () => {
      const entry = entryFor(requireDist(esm), role);
      // Deno without --allow-env/--allow-net: the library must not need either offline.
      const args =
        name === 'deno'
          ? ['run', '--quiet', '--no-prompt', '--no-config', '--allow-read=' + root + ',' + tmp, entry]
          : [entry];
      const out = spawnSync(exe, args, {
        cwd: tmp,
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, NO_COLOR: '1' },
      });
      judge(role, `${role}: ${name} (${exe.split('/').slice(-3).join('/')}) dist/${esm}`, parseResult(name, out));
    });
  }

  test(`${role}: quickjs, dist/${iife} (+ ctl-p256, ctl-human-agent) with only the firmware ABI`, async () => {
    const r = await runInQuickJs(readFileSync(requireDist(iife), 'utf8'), readFileSync(suitePath, 'utf8'), fixtures, {
      role,
      p256Iife: readFileSync(requireDist('ctl-p256.iife.js'), 'utf8'),
      humanAgentIife: readFileSync(requireDist('ctl-human-agent.iife.js'), 'utf8'),
    });
    assert.equal(r.hostObjects, {
      crypto: 'undefined',
      TextEncoder: 'undefined',
      fetch: 'undefined',
      setTimeout: 'undefined',
      process: 'undefined',
      ctlHost: 'object',
    });
    assert.is(r.backend, 'noble');
    judge(role, `${role}: quickjs dist/${iife}`, r.result);
  });

  test(`${role}: bare vm, dist/${iife} (+ ctl-p256, ctl-human-agent) with no host object at all`, async () => {
    const r = await runInBareVm(readFileSync(requireDist(iife), 'utf8'), readFileSync(suitePath, 'utf8'), fixtures, {
      role,
      p256Iife: readFileSync(requireDist('ctl-p256.iife.js'), 'utf8'),
      humanAgentIife: readFileSync(requireDist('ctl-human-agent.iife.js'), 'utf8'),
    });
    assert.equal(r.hostObjects, {
      crypto: 'undefined',
      TextEncoder: 'undefined',
      fetch: 'undefined',
      setTimeout: 'undefined',
      process: 'undefined',
    });
    assert.is(r.backend, 'noble');
    judge(role, `${role}: bare vm dist/${iife}`, r.result);
  });
}

test.after(() => rmSync(tmp, { recursive: true, force: true }));
test.run();
