/**
 * `ctl start` (what `npm start` runs) prints the owner console's address, and the console is
 * served there from the build, with its CSP.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../..', import.meta.url));

test('ctl start prints the console address, and /console answers there', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-start-'));
  const child = spawn(process.execPath, [join(repo, 'bin', 'ctl.mjs'), 'start', '--data', join(dir, 'data')], {
    cwd: dir,
    env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', LOG_LEVEL: 'error' },
  });
  try {
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no console line in: ${out}`)), 30_000);
      // The how-to is on stderr (stdout carries only JSON logs): look after output on either.
      const look = () => {
        const m = /owner console\s+(http:\/\/\S+\/console)\s/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]!);
        }
      };
      child.stdout.on('data', look);
      child.stderr.on('data', look);
    });
    const res = await fetch(url);
    assert.is(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(await res.text(), /<script type="module" src="\/console\/console.js"><\/script>/);
    assert.is((await fetch(url.replace(/\/console$/, '/console/console.js'))).status, 200);
  } finally {
    await new Promise<void>((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    });
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
