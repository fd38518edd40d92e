// Shared by the crypto tests: where the vectors are (never copied into the repo), the counts
// SOURCES.md promises, and the facades every vector runs against.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { edgeCrypto } from '../../src/crypto/edge.js';
import type { CtlCrypto } from '../../src/crypto/types.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';
import { createNobleBackend as createNobleVerifyBackend } from '../../src/crypto/noble-verify-backend.js';
import { createKeyImporter } from '../../src/crypto/keys.js';

// The noble facade as a QuickJS host builds it: Ed25519 built in, P-256 registered from ctl/p256.
registerP256(nobleP256);

// build/test/crypto/helpers.js -> repo root
const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
export const vectorsDir = resolve(root, process.env['CTL_VECTORS_DIR'] ?? '../shared/vectors');

export function readVector(path: string): string {
  return readFileSync(resolve(vectorsDir, path), 'utf8');
}

export function readJson<T = any>(path: string): T {
  return JSON.parse(readVector(path)) as T;
}

/** The case count SOURCES.md gives for a vector file: tests assert they read at least that many. */
export function sourcesCount(path: string): number {
  const row = readVector('SOURCES.md')
    .split('\n')
    .find((l) => l.startsWith(`| ${path} |`));
  const n = Number(row?.split('|').at(-2)?.trim());
  if (!Number.isInteger(n) || n <= 0) throw new Error(`SOURCES.md has no count for ${path}`);
  return n;
}

export function hex(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, 'hex'));
}

export function toHex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

/** native (node:crypto here), noble, and the WebCrypto-only edge facade. */
export const facades: [string, CtlCrypto][] = [
  ['native', createCtlCrypto('native')],
  ['noble', createCtlCrypto('noble')],
  ['edge', edgeCrypto],
];

/**
 * ctl/verify's noble backend (our BigInt Ed25519 verify, no noble: what the verifier bundles run on an engine without
 * native crypto); it verifies only.
 */
const verifyOnly = createNobleVerifyBackend();
export const nobleVerifyOnly = {
  ...createKeyImporter(() => verifyOnly),
  sha256: (d: Uint8Array) => verifyOnly.sha256(d),
} as unknown as CtlCrypto;
/** Every facade that verifies: the three above and ctl/verify's noble backend. */
export const verifiers: [string, CtlCrypto][] = [...facades, ['noble-verify (ctl/verify)', nobleVerifyOnly]];
