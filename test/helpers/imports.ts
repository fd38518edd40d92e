/**
 * A static scan of the repository's import statements, for the layout tests (test/layout/): the
 * source files of a folder and every module specifier a file names, type-only imports included.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const SOURCE = /\.(ts|mts|cts|js|mjs|cjs)$/;

/** Every source file under `dir` (no node_modules, no dotted folders, no dist/ output, no .d.ts). */
export function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/**
 * Every module specifier of a file: static and type imports, re-exports, `import()` and `require()`.
 * @example specifiers("import type { A } from './a.js';") // ['./a.js']
 */
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
