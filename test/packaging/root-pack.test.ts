/**
 * `npm pack` at the repository root makes no tarball of the clone's own manifest (scripts,
 * workspaces, devDependencies, no declarations): its `prepack` stops it, naming the command that
 * packs the SDK (`npm run pack:sdk`, scripts/sdk-package.mjs) and the one for the workspaces. A
 * workspace's manifest is published as it is: it builds in `prepack`, never in a script npm runs
 * at a consumer's install (npm 11 flags those, and `../scripts` is not there).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const dest = mkdtempSync(join(tmpdir(), 'ctl-root-pack-'));
test.after(() => rmSync(dest, { recursive: true, force: true }));

for (const args of [['pack'], ['pack', '--dry-run']]) {
  test(`npm ${args.join(' ')} at the root refuses, naming npm run pack:sdk, and writes nothing`, () => {
    const r = spawnSync('npm', [...args, '--pack-destination', dest], {
      cwd: repoRoot,
      encoding: 'utf8',
      env: { ...process.env, npm_config_loglevel: 'error' },
      timeout: 60_000,
    });
    assert.is.not(r.status, 0, `npm ${args.join(' ')} packed the root:\n${r.stdout}`);
    assert.match(r.stderr, /npm run pack:sdk/);
    assert.match(r.stderr, /npm pack --workspaces/);
    assert.equal(readdirSync(dest), []);
  });
}

test('no workspace manifest has a script that runs at install (preinstall, install, postinstall, prepare)', () => {
  const root = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { workspaces: string[] };
  for (const w of root.workspaces) {
    const scripts = JSON.parse(readFileSync(join(repoRoot, w, 'package.json'), 'utf8')).scripts ?? {};
    const atInstall = ['preinstall', 'install', 'postinstall', 'prepare'].filter((k) => k in scripts);
    assert.equal(atInstall, [], `${w}/package.json: ${atInstall.join(', ')}`);
  }
});

test.run();
