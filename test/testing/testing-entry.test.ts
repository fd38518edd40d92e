// `ctl/testing` ships in the package: resolved through the package's own name, as an integrator's
// test would import it, it runs the whole suite against a built SpendStorage. Runs against dist/.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const requireFromPackage = createRequire(join(repoRoot, 'package.json'));

test(
  "require('ctl/testing') runs the conformance suite against the wallet's memory storage, " +
    'and import gives the same',
  async () => {
    const testing = requireFromPackage('ctl/testing');
    const wallet = requireFromPackage('ctl/wallet');
    const cases = testing.spendStorageConformance(() => wallet.createMemorySpendStorage());
    assert.ok(cases.length >= 10, `${cases.length} cases`);
    assert.ok(cases.some((c: { name: string }) => /concurrent reserves of one id/.test(c.name)));
    for (const c of cases) await c.run();
    const esm = await import('ctl/testing');
    assert.equal(Object.keys(esm).sort(), ['spendStorageConformance']);
  },
);

test.run();
