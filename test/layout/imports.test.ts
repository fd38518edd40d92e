// The services, the MCP server, the CLI, the agent tools, the examples and the firmware bridge take
// the SDK as any user does: through its public entries (`ctl` = src/index.ts, `ctl/wallet`,
// `ctl/server`… = src/entries/*), never a module behind them, so what they need is part of the
// published API (docs/sdk-api.md).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { sources, specifiers } from '../helpers/imports.js';

const FOLDERS = ['gateway', 'authority', 'service-kit', 'mcp', 'cli', 'agent-tools', 'examples', 'firmware-bridge'];

/** The repository path a relative specifier names, or undefined when it is a package. */
function target(file: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  return relative(repoRoot, resolve(dirname(file), spec))
    .split(sep)
    .join('/');
}

const allowed = (path: string) => /^src\/(index|entries\/[\w-]+)(\.[cm]?[jt]s)?$/.test(path);

test('the scanner sees every kind of import', () => {
  const text = [
    "import { a } from '../src/a.js';",
    "import type {\n  B,\n} from '../src/b.js';",
    "export { c } from '../src/c.js';",
    "import '../src/d.js';",
    "const e = await import('../src/e.js');",
    "const f = require('../src/f.js');",
  ].join('\n');
  assert.equal(specifiers(text), [
    '../src/a.js',
    '../src/b.js',
    '../src/c.js',
    '../src/d.js',
    '../src/e.js',
    '../src/f.js',
  ]);
  const file = join(repoRoot, 'gateway', 'x.ts');
  assert.is(allowed(target(file, '../src/index.js')!), true);
  assert.is(allowed(target(file, '../src/entries/server.js')!), true);
  assert.is(allowed(target(file, '../src/artifacts/receipt.js')!), false);
  assert.is(allowed(target(file, '../src/entries/../compact.js')!), false);
});

test(`${FOLDERS.join('/, ')}/ import src/ only through its public entries`, () => {
  const bad: string[] = [];
  const files = new Map(FOLDERS.map((f) => [f, 0]));
  for (const folder of FOLDERS) {
    for (const file of sources(join(repoRoot, folder))) {
      files.set(folder, files.get(folder)! + 1);
      for (const spec of specifiers(readFileSync(file, 'utf8'))) {
        const path = target(file, spec);
        if (path?.startsWith('src/') && !allowed(path)) bad.push(`${relative(repoRoot, file)}: ${spec}`);
      }
    }
  }
  const total = [...files.values()].reduce((a, b) => a + b, 0);
  assert.ok(total > 150, `only ${total} files scanned`);
  for (const [folder, n] of files) assert.ok(n > 0, `no file scanned in ${folder}/`);
  assert.equal(bad, [], `imports past src/index.ts and src/entries/*:\n  ${bad.join('\n  ')}`);
});

test.run();
