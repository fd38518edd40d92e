/** Where the shared test vectors live: `CTL_VECTORS_DIR`, default `../shared/vectors` from the repo root. */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../../..', import.meta.url)); // build/test/helpers → repo
export const vectorsDir = resolve(repoRoot, process.env.CTL_VECTORS_DIR ?? '../shared/vectors');

export function readVector(path: string): string {
  return readFileSync(join(vectorsDir, path), 'utf8');
}

export function readVectorJson<T = any>(path: string): T {
  return JSON.parse(readVector(path)) as T;
}
