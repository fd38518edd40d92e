// A generated file kept in the repository: written, or with --check compared byte for byte with
// what is committed (a difference is reported and counted, nothing written).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export const checkOnly = process.argv.includes('--check');

/** Writes `text` to `path` (or checks it under --check); true when the committed file differs. */
export function writeGenerated(path, text) {
  const old = existsSync(path) ? readFileSync(path, 'utf8') : '';
  if (old === text) return false;
  if (checkOnly) {
    console.error(`${path}: would change`);
  } else {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
  return true;
}
