/** Where the settled design documents live: `CTL_DESIGN_DIR`, default `../shared/design` from the repo root. */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { repoRoot } from './vectors.js';

export const designDir = resolve(repoRoot, process.env.CTL_DESIGN_DIR ?? '../shared/design');

export function readDesign(name: string): string {
  return readFileSync(join(designDir, name), 'utf8');
}

/** The body of the `## <n>.` section of a markdown document, up to the next `## ` heading. */
export function markdownSection(text: string, n: number): string {
  const start = text.search(new RegExp(`^## ${n}\\. `, 'm'));
  if (start < 0) throw new Error(`no section ${n}`);
  const rest = text.slice(start + 1);
  const end = rest.search(/^## /m);
  return end < 0 ? rest : rest.slice(0, end);
}
