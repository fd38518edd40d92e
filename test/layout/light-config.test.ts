// Reading a service's configuration loads no server: `ctl gateway` with a bad variable, `--help`
// and `ctl start`'s refusals answer in a few hundred milliseconds instead of loading the chain
// client, the web framework and the database drivers first (docs/operations.md: a mistake refuses
// the start before anything listens). Checked on the sources' runtime imports: a type-only import
// and a dynamic `import()` load nothing when the module loads.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

const ENTRIES = ['gateway/config.ts', 'gateway/variables.ts', 'authority/config.ts', 'authority/variables.ts'];
const HEAVY = /^(viem|koa|@koa\/|pg$|better-sqlite3|pino|prom-client|@x402\/|mppx)/;

/** The specifiers a module loads when it loads: no `import type`, no `export type`, no `import()`. */
export function runtimeSpecifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm))
    if (!m[2]) found.push(m[3]!);
  for (const m of text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm)) found.push(m[1]!);
  return found;
}

/** The first chain of runtime imports from `entry` to a package `heavy` matches, or undefined. */
function heavyChain(entry: string): string[] | undefined {
  const from = new Map<string, string | undefined>([[entry, undefined]]);
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    for (const spec of runtimeSpecifiers(readFileSync(join(repoRoot, file), 'utf8'))) {
      if (!spec.startsWith('.')) {
        if (!HEAVY.test(spec)) continue;
        const chain = [spec];
        for (let f: string | undefined = file; f; f = from.get(f)) chain.unshift(f);
        return chain;
      }
      const target = relative(repoRoot, join(repoRoot, dirname(file), spec.replace(/\.js$/, '.ts')));
      if (!from.has(target) && existsSync(join(repoRoot, target))) {
        from.set(target, file);
        queue.push(target);
      }
    }
  }
  return undefined;
}

test('runtimeSpecifiers skips type-only and dynamic imports', () => {
  const text = [
    "import type { A } from 'viem';",
    "export type { B } from './b.js';",
    "const c = await import('koa');",
    "import { type D, e } from './e.js';",
    "export { f } from './f.js';",
    "import './g.js';",
  ].join('\n');
  assert.equal(runtimeSpecifiers(text), ['./e.js', './f.js', './g.js']);
});

test('the scan finds a heavy package behind a chain of imports', () => {
  const chain = heavyChain('gateway/server.ts');
  assert.ok(chain && HEAVY.test(chain.at(-1)!), `gateway/server.ts reaches a server package: ${chain}`);
});

for (const entry of ENTRIES)
  test(`${entry} loads no server module (chain client, web framework, database driver)`, () => {
    const chain = heavyChain(entry);
    assert.is(chain, undefined, `${chain?.join(' → ')}`);
  });

test.run();
