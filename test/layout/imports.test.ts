// The services, the MCP server and the CLI take the SDK as any user does: through its public entries
// (`ctl` = src/index.ts, `ctl/wallet`, `ctl/server`… = src/entries/*), never a module behind them, so
// what a service needs is part of the published API (docs/sdk-api.md).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const FOLDERS = ['gateway', 'authority', 'service-kit', 'mcp', 'cli'];
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** Every module specifier of a file: static and type imports, re-exports, `import()` and `require()`. */
export function specifiers(text: string): string[] {
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\b(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) found.push(m[1]!);
  return found;
}

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

test('gateway/, authority/, service-kit/, mcp/ and cli/ import src/ only through its public entries', () => {
  const bad: string[] = [];
  let files = 0;
  for (const folder of FOLDERS) {
    for (const file of sources(join(repoRoot, folder))) {
      files++;
      for (const spec of specifiers(readFileSync(file, 'utf8'))) {
        const path = target(file, spec);
        if (path?.startsWith('src/') && !allowed(path)) bad.push(`${relative(repoRoot, file)}: ${spec}`);
      }
    }
  }
  assert.ok(files > 100, `only ${files} files scanned`);
  assert.equal(bad, [], `imports past src/index.ts and src/entries/*:\n  ${bad.join('\n  ')}`);
});

test.run();
