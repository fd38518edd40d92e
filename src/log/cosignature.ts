/**
 * C2SP tlog-cosignature, Ed25519 (cosignature/v1): a witness's note signature on a checkpoint,
 * key type 0x04, whose bytes are an 8-byte big-endian POSIX timestamp then an Ed25519 signature
 * over "cosignature/v1\n" ‖ "time <timestamp>\n" ‖ the checkpoint's note text. It states that, at
 * that time, this was the largest tree consistent with what the witness had seen of the log.
 */
import { utf8Encode } from '../encoding/utf8.js';
import { base64Decode, base64Encode } from '../encoding/base64url.js';
import { createTypedSigner, noteText, COSIGNATURE_ED25519 } from './note.js';
import type { SigningKey } from '../crypto/types.js';

/** Timestamps are read as safe integers (seconds: far past any clock), the spec's bound being 2^63 − 1. */
const isTimestamp = (t: unknown): t is number => typeof t === 'number' && Number.isSafeInteger(t) && t >= 0;

/**
 * The message a v1 cosignature signs.
 * @example cosignatureMessage(cp.text, 1679315147) // "cosignature/v1\ntime 1679315147\n…"
 */
export function cosignatureMessage(checkpointText: string, timestamp: number): Uint8Array {
  if (!isTimestamp(timestamp)) throw new RangeError('cosignature timestamp: a safe integer ≥ 0 (seconds)');
  return utf8Encode(`cosignature/v1\ntime ${timestamp}\n${checkpointText}`);
}

/** The timestamp and Ed25519 signature of a cosignature's bytes (after the key ID), or undefined. */
export function splitCosignature(sig: Uint8Array): { timestamp: number; signature: Uint8Array } | undefined {
  if (sig.length !== 8 + 64) return undefined;
  const hi = ((sig[0]! << 24) | (sig[1]! << 16) | (sig[2]! << 8) | sig[3]!) >>> 0;
  const lo = ((sig[4]! << 24) | (sig[5]! << 16) | (sig[6]! << 8) | sig[7]!) >>> 0;
  if (hi >= 2 ** 21) return undefined; // past 2^53 seconds: not a time
  return { timestamp: hi * 2 ** 32 + lo, signature: sig.slice(8) };
}

/** A witness that cosigns checkpoints. */
export interface Cosigner {
  readonly name: string;
  readonly keyId: number;
  /** The verifier key (type 0x04) clients configure as a witness key. */
  readonly verifierKey: string;
  /** The signature line `— <name> <base64>\n` for the checkpoint's note text at `timestamp` (seconds). */
  cosign(checkpointText: string, timestamp: number): Promise<string>;
}

/**
 * A witness's cosigner over an Ed25519 SigningKey. The caller has verified the checkpoint and its
 * consistency with the largest one it cosigned before (C2SP tlog-witness) before calling `cosign`.
 * @example const w = createCosigner('ctl.example/authority-witness', key); note + (await w.cosign(cp.text, now))
 */
export function createCosigner(name: string, key: SigningKey): Cosigner {
  const s = createTypedSigner(name, key, COSIGNATURE_ED25519);
  return Object.freeze({
    name: s.name,
    keyId: s.keyId,
    verifierKey: s.verifierKey,
    async cosign(checkpointText: string, timestamp: number) {
      const text = noteText(checkpointText);
      const line = base64Decode(await s.signLine(cosignatureMessage(text, timestamp)));
      // key ID ‖ timestamp ‖ signature
      const raw = new Uint8Array(4 + 8 + 64);
      raw.set(line.subarray(0, 4));
      new DataView(raw.buffer).setUint32(4, Math.floor(timestamp / 2 ** 32));
      new DataView(raw.buffer).setUint32(8, timestamp >>> 0);
      raw.set(line.subarray(4), 12);
      return `\u2014 ${s.name} ${base64Encode(raw)}\n`;
    },
  });
}
