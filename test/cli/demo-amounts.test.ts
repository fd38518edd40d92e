/**
 * `ctl demo` prints every amount in one unit: decimals with the currency (3.00 USD,
 * 0.010000 USDC), never minor units, and no line mixes the two.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { formatMinor } from '../../cli/demo/money.js';

const DECIMALS: Record<string, number> = { USD: 2, USDC: 6 };

test('formatMinor: minor units to decimals of the currency', () => {
  assert.is(formatMinor('300', 'USD'), '3.00 USD');
  assert.is(formatMinor('5', 'USD'), '0.05 USD');
  assert.is(formatMinor(10000n, 'USDC'), '0.010000 USDC');
  assert.is(formatMinor('-150', 'EUR'), '-1.50 EUR');
  assert.is(formatMinor('1200', 'JPY'), '1200 JPY');
});

test('ctl demo: amounts in decimals with their currency, never minor units', () => {
  const r = spawnSync(process.execPath, [join(root, 'bin', 'ctl.mjs'), 'demo'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.is(r.status, 0, r.stdout + r.stderr);
  const out = r.stdout;
  let amounts = 0;
  for (const m of out.matchAll(/(\S+)\s+(USDC|USD)\b/g)) {
    const before = m[1]!.replace(/^[(+]+/, '');
    if (!/\d/.test(before)) continue; // "pays it in USDC": a currency named, not an amount
    amounts++;
    assert.match(before, new RegExp(`^\\d+\\.\\d{${DECIMALS[m[2]!]}}$`), `amount in one unit: '${m[0]}'`);
  }
  assert.ok(amounts >= 8, `${amounts} amounts found:\n${out}`);
  assert.not.match(out, /minor units|atomic|\$\d/, 'no amount in minor units or dollars-sign shorthand');
  assert.match(out, /ceiling now 4\.00 USD, spent 4\.00 USD/);
  assert.match(out, /4 receipts, total 4\.00 USD/);
  assert.match(out, /✓ the wallet gets back all but 12\.34 USD: 187\.66 USD left, 37\.66 USD today/);
  assert.match(out, /✓ a second hold of 40\.00 USD today: window_exceeded, resets \d{4}-/);
});

test.run();
