/**
 * After `npm start` there is something to pay: the how-to's example, run as printed in a shell,
 * pays the demo merchant `npm start` runs beside the services and shows the receipt; its three
 * curl lines for the egress proxy pay the demo merchant over HTTPS as an unmodified agent would.
 * The demo merchant is marked as such, and is not started with --no-demo-merchant or
 * NODE_ENV=production (nor, by default, the egress proxy under NODE_ENV=production).
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

/** The indented lines under the first line starting with `heading`, up to the next blank line, unindented. */
function block(howTo: string, heading: string): string {
  const lines = howTo.split('\n');
  const from = lines.findIndex((l) => l.startsWith(heading));
  assert.ok(from >= 0, `no "${heading}" in:\n${howTo}`);
  const to = lines.findIndex((l, i) => i > from && l.trim() === '');
  return lines
    .slice(from + 1, to)
    .map((l) => l.replace(/^ {2}/, ''))
    .join('\n');
}

test("npm start: the egress proxy's three curl lines pay the demo merchant over HTTPS", async () => {
  const start = await npmStart([]);
  try {
    assert.match(start.howTo, /egress proxy\s+http:\/\/127\.0\.0\.1:\d+\s/, start.howTo);
    const proxyLines = block(start.howTo, 'Or as an agent that only knows HTTPS_PROXY');
    const curls = proxyLines.split('\n');
    assert.is(curls.length, 3, proxyLines);
    assert.ok(
      curls.every((l) => l.startsWith('curl ')),
      proxyLines,
    );
    assert.match(
      curls[1]!,
      /-w .* --proxy http:\/\/127\.0\.0\.1:\d+ --proxy-user "agent:\$TOKEN" --cacert \S+ 'https:\/\//,
    );
    // The session comes from the first snippet (TOKEN=…); its own curl lines run too.
    const snippet = `${block(start.howTo, 'Pay the demo merchant')}\n${proxyLines}`;
    const r = spawnSync('sh', ['-c', snippet], { encoding: 'utf8', timeout: 30_000 });
    assert.is(r.status, 0, `${snippet}\n${r.stdout}${r.stderr}`);
    const answers = r.stdout.split(/^(?=HTTP\/1\.1 )/m).filter((a) => /^HTTP\/1\.1 /.test(a));
    const viaProxy = answers.at(-1)!;
    assert.match(viaProxy, /^HTTP\/1\.1 200 /, r.stdout);
    assert.match(viaProxy, /"demo":true/);
    const receiptId = /^X-Ctl-Receipt-Id: (\S+)/im.exec(viaProxy)?.[1];
    assert.ok(receiptId, `the answer through the proxy carries its receipt id:\n${viaProxy}`);
    const receipts = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { receipts: { receiptId: string }[] };
    assert.is(receipts.receipts.length, 2, 'one payment by /proxy, one through the egress proxy');
    assert.is(receipts.receipts[1]!.receiptId, receiptId);
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
      if (env.NODE_ENV === 'production') assert.not.match(start.howTo, /egress proxy/i, 'opt-in in production');
    } finally {
      await start.stop();
    }
  });
}

test.run();
