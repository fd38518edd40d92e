/**
 * `npm install` in a fresh clone leaves package-lock.json as committed: scripts/lock-platforms.mjs
 * writes the lock exactly as npm does (its key order: localeCompare, not code units), so the
 * committed lock is already in npm's form and npm has nothing to rewrite. The second test asks
 * the registry (metadata only: `--package-lock-only --ignore-scripts`, from npm's cache where it can).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const work = mkdtempSync(join(tmpdir(), 'ctl-lock-'));
const committed = readFileSync(join(repoRoot, 'package-lock.json'), 'utf8');

/** The manifests and the lock of the repository, as a fresh clone has them. */
function cloneManifests(dir: string): void {
  const manifests = [
    'package.json',
    'package-lock.json',
    ...(JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).workspaces as string[]).map(
      (w) => `${w}/package.json`,
    ),
  ];
  for (const f of manifests) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(repoRoot, f), join(dir, f));
  }
}

test("lock-platforms leaves the committed lock as it is (it is in npm's own form)", () => {
  const lock = join(work, 'package-lock.json');
  copyFileSync(join(repoRoot, 'package-lock.json'), lock);
  const r = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'lock-platforms.mjs'), lock], { encoding: 'utf8' });
  assert.is(r.status, 0, r.stderr);
  assert.match(r.stdout, /0 optional platform entries added/);
  assert.ok(readFileSync(lock, 'utf8') === committed, 'lock-platforms rewrote the committed lock');
});

test('npm install after lock-platforms rewrites nothing', () => {
  const clone = join(work, 'clone');
  cloneManifests(clone);
  const platforms = spawnSync(
    process.execPath,
    [join(repoRoot, 'scripts', 'lock-platforms.mjs'), join(clone, 'package-lock.json')],
    { encoding: 'utf8' },
  );
  assert.is(platforms.status, 0, platforms.stderr);
  const r = spawnSync(
    'npm',
    ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'],
    {
      cwd: clone,
      encoding: 'utf8',
      timeout: 400_000,
      env: { ...process.env, npm_config_loglevel: 'error' },
    },
  );
  assert.is(r.status, 0, `npm install (it needs the registry, or npm's cache):\n${r.stdout}${r.stderr}`);
  const after = readFileSync(join(clone, 'package-lock.json'), 'utf8');
  if (after !== committed) {
    const a = committed.split('\n');
    const b = after.split('\n');
    const at = a.findIndex((l, i) => l !== b[i]);
    assert.unreachable(
      `npm rewrote package-lock.json from line ${at + 1}:\n- ${a.slice(at, at + 6).join('\n- ')}\n+ ` +
        `${b.slice(at, at + 6).join('\n+ ')}`,
    );
  }
});

test.after(() => rmSync(work, { recursive: true, force: true }));
test.run();
