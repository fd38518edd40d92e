/**
 * Reading artifact files in either form the SDK writes: JSON text, or compact CBOR
 * (`encodeCompact` of ctl/compact, PROTOCOL.md §6).
 */
import { readFileSync } from 'node:fs';
import { decodeCompact } from '../../src/entries/compact.js';
import type { TrustBundle } from '../../src/index.js';
import { UsageError } from './args.js';

/**
 * Compact CBOR (PROTOCOL.md §6) is a CBOR map, so its first byte is 0xa0–0xbf; JSON and the header
 * form are text and start with printable ASCII or whitespace.
 */
export const isCompact = (bytes: Uint8Array) => bytes.length > 0 && bytes[0]! >= 0xa0 && bytes[0]! <= 0xbf;

export function readBytes(path: string, what: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new UsageError(`cannot read ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** A bundle file as the verifier takes it: the JSON text, or the decoded compact form. */
export function readBundle(path: string): string | TrustBundle {
  const bytes = readBytes(path, 'bundle');
  if (!isCompact(bytes)) return new TextDecoder().decode(bytes);
  try {
    return decodeCompact(bytes, 'bundle') as TrustBundle;
  } catch (e) {
    throw new UsageError(`bundle ${path}: not a compact Trust Bundle: ${(e as Error).message}`);
  }
}
