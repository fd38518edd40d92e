/**
 * The environment section of a service's `--help`: one line per variable, `NAME (default)` then
 * what it does, so an operator (and test/cli/help-readme.test.ts, against the README tables)
 * finds each variable and its default on its own line.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export { anchorVariables, webhookVariables, type VariableHelp } from '../../service-kit/config.js';
import type { VariableHelp } from '../../service-kit/config.js';

/** @example variableLines([['PORT', '8402', 'where it listens']]) // '  PORT (8402)  where it listens' */
export function variableLines(rows: readonly VariableHelp[]): string {
  const heads = rows.map(([name, def]) => (def === undefined ? name : `${name} (${def})`));
  const width = Math.min(40, Math.max(...heads.map((h) => h.length)));
  return rows.map(([, , meaning], i) => `  ${heads[i]!.padEnd(width)}  ${meaning}`).join('\n');
}

/**
 * The version of the package this code runs from: the nearest package.json above the module
 * (the repository's in a clone, ctl-gateway's or ctl-authority's inside their bundles).
 */
export function packageVersion(moduleUrl: string): string {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
    const up = dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}
