/**
 * Adding a 402 scheme is one folder under gateway/payments/schemes/ and one line in
 * payments/registry.ts: every folder is listed once, in the order schemes are tried, and its
 * rail and tables reach reconcile and the migrations without any other file naming it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { PAYMENT_SCHEMES, SCHEME_MIGRATIONS, createPaymentSchemes } from '../../gateway/payments/registry.js';
import { GATEWAY_ALL_MIGRATIONS } from '../../gateway/server.js';
import type { SchemeModule } from '../../gateway/payments/schemes/scheme.js';
import type { SqlDatabase } from '../../service-kit/index.js';

const schemesDir = join(repoRoot, 'gateway', 'payments', 'schemes');
const folders = readdirSync(schemesDir).filter((n) => statSync(join(schemesDir, n)).isDirectory());

test('each scheme folder exports one SchemeModule, and the registry lists each once', async () => {
  assert.ok(folders.length >= 3, folders.join(', '));
  const modules: SchemeModule[] = [];
  for (const f of folders) {
    const exported = Object.values(await import(`../../gateway/payments/schemes/${f}/protocol.js`)).filter(
      (v): v is SchemeModule => typeof v === 'object' && v !== null && typeof (v as SchemeModule).create === 'function',
    );
    assert.is(exported.length, 1, `schemes/${f}/protocol.ts exports one SchemeModule`);
    modules.push(exported[0]!);
  }
  assert.is(PAYMENT_SCHEMES.length, folders.length);
  for (const m of modules) assert.is(PAYMENT_SCHEMES.filter((s) => s === m).length, 1, m.name);
});

test("the schemes' tables run with the gateway's, and their rails are named once", () => {
  for (const m of SCHEME_MIGRATIONS) assert.ok(GATEWAY_ALL_MIGRATIONS.includes(m), m.id);
  const made = createPaymentSchemes({
    db: {} as SqlDatabase, // nothing is read while the schemes are made
    now: Date.now,
    railName: 'ledger',
    evm: { privateKey: `0x${'11'.repeat(32)}`, assets: new Map(), maxTimeoutSeconds: 60 },
  });
  assert.is(made.schemes.length, PAYMENT_SCHEMES.length);
  const names = made.rails.map((r) => r.name);
  assert.equal(names, [...new Set(names)]);
  assert.ok(!names.includes('ledger'), "the gateway's own rail is not a scheme's");
  assert.match(made.evmAddress, /^0x[0-9a-fA-F]{40}$/);
});

test.run();
