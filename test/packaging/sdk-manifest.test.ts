/**
 * The SDK package as published (scripts/sdk-package.mjs): its manifest holds only what a
 * consumer needs — no scripts (so nothing runs at install), no devDependencies, no workspaces, no
 * dependencies — with the same entry points as the repository's; every minified build ships its
 * source map, without the sources embedded; error classes keep readable names in the minified
 * builds. Fast: no install (the tarball test, tarballs.slow.test.ts, installs the packed directory).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../helpers/vectors.js';

const work = mkdtempSync(join(tmpdir(), 'ctl-sdk-package-'));
const out = join(work, 'ctl');
const repoPkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));

// Made here, not in test.before: uvu does not print what a hook throws, and a failure here must
// say why (e.g. a file of dist/ missing: `npm run build`).
const made = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'sdk-package.mjs'), '--out', out], {
  encoding: 'utf8',
});
test.after(() => rmSync(work, { recursive: true, force: true }));

test('scripts/sdk-package.mjs writes the package directory', () => {
  assert.is(made.status, 0, `sdk-package.mjs exited ${made.status ?? made.signal}: ${made.stderr}${made.error ?? ''}`);
});

test('the published manifest: no scripts, devDependencies, workspaces or dependencies; the same entry points', () => {
  const pkg = JSON.parse(readFileSync(join(out, 'package.json'), 'utf8'));
  for (const k of ['scripts', 'devDependencies', 'workspaces', 'dependencies', 'allowScripts', 'private'])
    assert.is(pkg[k], undefined, `the manifest carries ${k}`);
  for (const k of [
    'name',
    'version',
    'license',
    'type',
    'main',
    'module',
    'types',
    'exports',
    'bin',
    'sideEffects',
    'engines',
  ])
    assert.equal(pkg[k], repoPkg[k], k);
  assert.equal(pkg.files, ['dist', 'bin']);
});

test('the repository root cannot be published by mistake in its place', () => {
  assert.is(repoPkg.private, true);
});

test('every minified build ships its source map, naming the sources without carrying them', () => {
  const builds = readdirSync(join(out, 'dist')).filter((f) => /\.(c?js)$/.test(f));
  assert.ok(builds.length >= 20, builds.join(', '));
  for (const f of builds) {
    const map = join(out, 'dist', `${f}.map`);
    assert.ok(existsSync(map), `${f} has no source map`);
    assert.match(
      readFileSync(join(out, 'dist', f), 'utf8'),
      new RegExp(`//# sourceMappingURL=${f.replace(/\./g, '\\.')}\\.map\\s*$`),
    );
    const m = JSON.parse(readFileSync(map, 'utf8')) as { sources: string[]; sourcesContent?: string[] };
    // A stack still maps to src/ paths and lines; the sources themselves (7.6 of 9.1 MB) stay in the clone.
    assert.ok(m.sources.length > 0 && m.sources.some((x) => /src\/.*\.ts$/.test(x)), `${f}.map names no source`);
    assert.is(m.sourcesContent, undefined, `${f}.map embeds its sources`);
  }
});

test('error classes keep their names in the minified builds (ESM, CJS and IIFE)', async () => {
  for (const f of ['index.js', 'verify.js', 'wallet.js']) {
    const m = await import(pathToFileURL(join(out, 'dist', f)).href);
    const e = new m.CtlError('malformed', 'x');
    assert.is(e.constructor.name, 'CtlError', f);
    assert.match(inspect(e), /^CtlError: x/, f);
  }
  const cjs = spawnSync(
    process.execPath,
    [
      '-e',
      `const m = require(${JSON.stringify(join(out, 'dist', 'index.cjs'))}); for (const ` +
        'C of [m.CtlError, m.CtlBudgetExceededError, m.CtlGrantRevokedError]) console.log(C.name)',
    ],
    { encoding: 'utf8' },
  );
  assert.equal(
    cjs.stdout.trim().split('\n'),
    ['CtlError', 'CtlBudgetExceededError', 'CtlGrantRevokedError'],
    cjs.stderr,
  );
  const iife = readFileSync(join(out, 'dist', 'ctl-verify.iife.js'), 'utf8');
  assert.match(iife, /class CtlError extends Error/);
});

test.run();
