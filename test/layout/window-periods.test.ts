/**
 * The periods a budget window may have (PROTOCOL.md §13) come from one list, the SDK's
 * `WINDOW_PERIODS`: both services' OpenAPI documents and the gateway's validator take it from
 * there, and no service or tool types the list out again (a period added to the SDK then reaches
 * every schema and check at once).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { WINDOW_PERIODS } from '../../src/index.js';
import { AUTHORITY_OPENAPI } from '../../authority/openapi.js';
import { GATEWAY_OPENAPI } from '../../gateway/openapi.js';
import { parseWindows } from '../../gateway/sessions/config.js';

const root = new URL('../../../', import.meta.url).pathname;

/** Every `enum` in a document that holds a window period. */
function periodEnums(doc: unknown, out: unknown[][] = []): unknown[][] {
  if (Array.isArray(doc)) for (const x of doc) periodEnums(x, out);
  else if (typeof doc === 'object' && doc !== null) {
    for (const [k, v] of Object.entries(doc)) {
      if (k === 'enum' && Array.isArray(v) && v.includes('P1D')) out.push(v);
      else periodEnums(v, out);
    }
  }
  return out;
}

test('every window period enum of both OpenAPI documents is WINDOW_PERIODS', () => {
  for (const [name, doc] of [
    ['authority', AUTHORITY_OPENAPI],
    ['gateway', GATEWAY_OPENAPI],
  ] as const) {
    const enums = periodEnums(doc);
    assert.ok(enums.length > 0, `${name}: no window period enum found`);
    for (const e of enums) assert.equal(e, [...WINDOW_PERIODS], name);
  }
});

test("the gateway's session validator takes every period of WINDOW_PERIODS and nothing else", () => {
  for (const every of WINDOW_PERIODS) {
    const r = parseWindows({ windows: [{ every, maxAmountMinor: '10' }] }, 100n);
    assert.is(r.windows?.[0]?.every, every);
  }
  assert.throws(() => parseWindows({ windows: [{ every: 'P2D', maxAmountMinor: '10' }] }, 100n), /one of PT1H, P1D/);
});

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (/\.(ts|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

test('no service, tool or CLI types the list of periods out again', () => {
  // Two periods side by side in a list or a union: a copy of the list (a map naming each period is not).
  const copy = /(['"])PT1H\1\s*[,|]\s*(['"])P1D\2/;
  const found = ['gateway', 'authority', 'service-kit', 'mcp', 'agent-tools', 'cli', 'src']
    .flatMap((d) => sources(join(root, d)))
    .filter((f) => !f.endsWith('src/artifacts/windows.ts') && copy.test(readFileSync(f, 'utf8')));
  assert.equal(found, []);
});

test.run();
