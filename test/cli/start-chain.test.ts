/**
 * `npm start -- --chain`: anvil beside the services with USDC, Permit2 and the upto proxy, and
 * stock x402 merchants settling on it; the how-to's chain snippet, run as printed, pays both
 * (exact and upto) and each receipt names a transaction mined on the node. Without the flag
 * nothing of it runs (start-demo-merchant.test.ts checks `npm start` itself).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

async function npmStart(args: string[], env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-start-chain-'));
  const child = spawn('npm', ['start', '--silent', '--', '--data', dir, ...args], {
    cwd: root,
    env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stdout.resume();
  child.stderr.on('data', (d) => (err += d));
  for (let i = 0; i < 900 && !/stops (both|all three)\./.test(err) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 100));
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { howTo: err, child, stop };
}

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

async function rpc(url: string, method: string, params: unknown[]): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

test('npm start -- --chain: the printed example pays on the node, exact and upto', async () => {
  const start = await npmStart(['--chain', '--no-demo-merchant']);
  try {
    const node = /EVM node\s+(http:\/\/127\.0\.0\.1:\d+)\s+\(anvil, eip155:84532/.exec(start.howTo)?.[1];
    assert.ok(node, start.howTo);
    const snippet = block(start.howTo, 'Pay on the EVM node');
    const r = spawnSync('sh', ['-c', snippet], { encoding: 'utf8', timeout: 60_000 });
    assert.is(r.status, 0, `${snippet}\n${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /^HTTP\/1\.1 200 /m, r.stdout);
    const receipts = JSON.parse(r.stdout.trim().split('\n').at(-1)!).receipts as any[];
    assert.equal(
      receipts.map((x) => [x.amount.amountMinor, x.amount.currency, x.authorizedAmountMinor]),
      [
        ['10000', 'USDC', undefined],
        ['12000', 'USDC', '50000'],
      ],
    );
    for (const x of receipts) {
      const mined = await rpc(node!, 'eth_getTransactionReceipt', [x.txRef.replace(/^txid:/, '')]);
      assert.is(mined?.status, '0x1', `${x.txRef} is a transaction mined on the node`);
    }
  } finally {
    await start.stop();
  }
  assert.is(start.child.exitCode, 0, 'stops cleanly, the node with it');
});

test('npm start -- --chain under NODE_ENV=production: refused', async () => {
  const start = await npmStart(['--chain'], { NODE_ENV: 'production' });
  try {
    await new Promise((r) => (start.child.exitCode === null ? start.child.once('exit', r) : r(null)));
    assert.is(start.child.exitCode, 2, start.howTo);
    assert.match(start.howTo, /--chain runs a local development node/);
  } finally {
    await start.stop();
  }
});

test.run();
