/**
 * After `npm start` there is something to pay: the how-to's example, run as printed in a shell,
 * pays the demo merchant `npm start` runs beside the services and shows the receipt. The demo
 * merchant is marked as such, and is not started with --no-demo-merchant or NODE_ENV=production.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

/** `npm start -- <args>` until its how-to is printed; returns the how-to and a stop. */
async function npmStart(args: string[], env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-start-demo-'));
  const child = spawn('npm', ['start', '--silent', '--', '--data', dir, ...args], {
    cwd: root,
    env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  for (let i = 0; i < 600 && !/stops (both|all three)\./.test(err) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 100));
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { howTo: err, out, stop };
}

test('npm start: the printed example pays the demo merchant and shows the receipt', async () => {
  const start = await npmStart([]);
  try {
    assert.match(start.howTo, /demo merchant\s+http:\/\/127\.0\.0\.1:\d+\s+\(DEMO, development only/, start.howTo);
    // The lines under "Pay the demo merchant", without their indent, are the shell snippet.
    const lines = start.howTo.split('\n');
    const from = lines.findIndex((l) => l.startsWith('Pay the demo merchant'));
    assert.ok(from >= 0, start.howTo);
    const to = lines.findIndex((l, i) => i > from && l.trim() === '');
    const snippet = lines
      .slice(from + 1, to)
      .map((l) => l.replace(/^ {2}/, ''))
      .join('\n');
    const r = spawnSync('sh', ['-c', snippet], { encoding: 'utf8', timeout: 30_000 });
    assert.is(r.status, 0, `${snippet}\n${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /^HTTP\/1\.1 200 /m, r.stdout);
    const receiptId = /^X-Ctl-Receipt-Id: (\S+)/im.exec(r.stdout)?.[1];
    assert.ok(receiptId, `a paid answer carries its receipt id:\n${r.stdout}`);
    assert.match(r.stdout, /"demo":true/);
    const receipts = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      receipts: { receiptId: string; amount: { amountMinor: string; currency: string } }[];
    };
    assert.is(receipts.receipts.length, 1);
    assert.is(receipts.receipts[0]!.receiptId, receiptId);
    assert.equal(receipts.receipts[0]!.amount, { amountMinor: '100', currency: 'USD' });
  } finally {
    await start.stop();
  }
});

for (const [what, args, env] of [
  ['--no-demo-merchant', ['--no-demo-merchant'], {}],
  ['NODE_ENV=production', [], { NODE_ENV: 'production' }],
] as const) {
  test(`npm start with ${what}: no demo merchant`, async () => {
    const start = await npmStart([...args], env);
    try {
      assert.match(start.howTo, /CTL is running/, start.howTo);
      assert.not.match(start.howTo, /demo merchant/i);
      assert.match(start.howTo, /stops both\./);
    } finally {
      await start.stop();
    }
  });
}

test.run();
