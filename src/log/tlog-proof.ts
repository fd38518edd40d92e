/**
 * C2SP tlog-proof (`c2sp.org/tlog-proof@v1`): one self-contained text that a receipt's holder can
 * check offline against pinned log and witness keys: the entry's index, its inclusion proof (one
 * base64 hash a line, leaf side first), a blank line, and the checkpoint note verbatim (with its
 * cosignatures). And the leaf CTL logs for a signed artifact (`logEntry`).
 *
 *   c2sp.org/tlog-proof@v1
 *   index 73894
 *   gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=
 *   …
 *
 *   <checkpoint note>
 */
import { malformed, toErrorInfo, type CtlErrorInfo } from '../errors.js';
import { base64Decode, base64Encode } from '../encoding/base64url.js';
import { canonicalize, parseStrictJson } from '../encoding/jcs.js';
import { utf8Decode, utf8Encode } from '../encoding/utf8.js';
import { leafHash, isCount, isHash, verifyInclusion, MAX_PROOF_HASHES, type Hash } from './merkle.js';
import { noteText } from './note.js';
import {
  verifyCheckpointWith,
  type Checkpoint,
  type Cosignature,
  type LogCrypto,
  type VerifyCheckpointOptions,
} from './checkpoint.js';
import type { VerifierKey } from './note.js';

const HEADER = 'c2sp.org/tlog-proof@v1';

/** A tlog-proof, read: the entry's index, its inclusion proof, the checkpoint note, and the opaque extra data. */
export interface TlogProof {
  index: number;
  proof: Hash[];
  checkpoint: string;
  extra?: Uint8Array;
}

/**
 * Writes a tlog-proof.
 * @example formatTlogProof({ index: 7, proof, checkpoint: note }) // 'c2sp.org/tlog-proof@v1\nindex 7\n…'
 */
export function formatTlogProof(p: TlogProof): string {
  if (!isCount(p.index)) throw new RangeError('formatTlogProof: index, a safe integer ≥ 0');
  if (!Array.isArray(p.proof) || !p.proof.every(isHash)) throw new RangeError('formatTlogProof: proof, 32-byte hashes');
  if (p.extra !== undefined && !(p.extra instanceof Uint8Array)) throw new RangeError('formatTlogProof: extra, bytes');
  const lines = [HEADER];
  if (p.extra !== undefined) lines.push(`extra ${base64Encode(p.extra)}`);
  lines.push(`index ${p.index}`, ...p.proof.map(base64Encode));
  return `${lines.join('\n')}\n\n${noteText(p.checkpoint)}`;
}

/**
 * Reads a tlog-proof (the checkpoint note is returned as text, verified by `verifyTlogProof`). Throws `malformed`.
 * @example parseTlogProof(text).index // 73894
 */
export function parseTlogProof(input: string | Uint8Array): TlogProof {
  const text = noteText(input);
  const split = text.indexOf('\n\n');
  if (split < 0) malformed('tlog-proof: no blank line before the checkpoint');
  const lines = text.slice(0, split).split('\n');
  const checkpoint = text.slice(split + 2);
  if (lines.shift() !== HEADER) malformed(`tlog-proof: the first line is not ${HEADER}`);
  let extra: Uint8Array | undefined;
  if (lines[0]?.startsWith('extra ')) extra = base64Decode(lines.shift()!.slice(6));
  const index = /^index (0|[1-9][0-9]{0,15})$/.exec(lines.shift() ?? '');
  if (!index || !Number.isSafeInteger(Number(index[1]))) malformed('tlog-proof: no "index <n>" line');
  if (lines.length > MAX_PROOF_HASHES) malformed('tlog-proof: too many proof hashes');
  const proof = lines.map((l) => {
    const h = base64Decode(l);
    if (h.length !== 32) malformed('tlog-proof: a proof hash is not 32 bytes');
    return h;
  });
  return { index: Number(index[1]), proof, checkpoint, ...(extra ? { extra } : {}) };
}

export type TlogProofResult =
  | { valid: true; index: number; checkpoint: Checkpoint; signedBy: string[]; cosignatures: Cosignature[] }
  | { valid: false; error: CtlErrorInfo };

/**
 * Verifies a tlog-proof for an entry (C2SP tlog-proof "Verifying"): the checkpoint against the
 * log keys (and k witnesses, as `verifyCheckpointWith`), then the entry's inclusion at the index.
 * `entry` is the logged bytes (`logEntry`), or `{ leafHash }`. Never throws.
 * @example const r = await verifyTlogProofWith(crypto, proofText, logEntry('receipt', receipt), [gatewayVkey])
 */
export async function verifyTlogProofWith(
  crypto: LogCrypto,
  proofText: string | Uint8Array,
  entry: Uint8Array | { leafHash: Hash },
  logKeys: string | ReadonlyArray<string | VerifierKey>,
  options?: VerifyCheckpointOptions,
): Promise<TlogProofResult> {
  try {
    const p = parseTlogProof(proofText);
    const leaf = entry instanceof Uint8Array ? leafHash(entry) : entry?.leafHash;
    if (!isHash(leaf)) malformed('entry: the logged bytes, or { leafHash } of 32 bytes');
    const cp = await verifyCheckpointWith(crypto, p.checkpoint, logKeys, options);
    if (!cp.valid) return cp;
    const r = verifyInclusion(leaf, p.index, cp.checkpoint.size, p.proof, cp.checkpoint.rootHash);
    if (!r.valid) return r;
    return {
      valid: true,
      index: p.index,
      checkpoint: cp.checkpoint,
      signedBy: cp.signedBy,
      cosignatures: cp.cosignatures,
    };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

const TYPE = /^[a-z][a-z0-9-]{0,31}$/;

/**
 * The bytes CTL logs for a signed artifact: UTF-8("ctl-<type>/1\n") ‖ JCS(artifact), the
 * artifact whole (its `signature` included). The tag is the artifact's signing prefix (PROTOCOL.md
 * §3), so an entry names its kind, and a holder of the artifact rebuilds the entry byte for byte.
 * Throws `malformed` for an artifact that is not I-JSON.
 * @example leafHash(logEntry('receipt', receipt)) // what the gateway's log holds for it
 */
export function logEntry(type: string, artifact: unknown): Uint8Array {
  if (typeof type !== 'string' || !TYPE.test(type)) throw new RangeError('logEntry: type like "receipt" or "grant"');
  if (typeof artifact !== 'object' || artifact === null || Array.isArray(artifact))
    malformed('logEntry: the artifact is a JSON object');
  return utf8Encode(`ctl-${type}/1\n${canonicalize(artifact)}`);
}

/**
 * Reads a logged entry back: its type and the artifact (strict I-JSON, canonical bytes only). Throws `malformed`.
 * @example parseLogEntry(entry) // { type: 'receipt', artifact: { receiptId: 'rcpt_…', … } }
 */
export function parseLogEntry(entry: Uint8Array): { type: string; artifact: Record<string, unknown> } {
  if (!(entry instanceof Uint8Array)) malformed('log entry: not bytes');
  const text = utf8Decode(entry);
  const m = /^ctl-([a-z][a-z0-9-]{0,31})\/1\n/.exec(text);
  if (!m) malformed('log entry: no "ctl-<type>/1" line');
  const artifact = parseStrictJson(text.slice(m[0].length));
  if (typeof artifact !== 'object' || artifact === null || Array.isArray(artifact))
    malformed('log entry: not a JSON object');
  if (canonicalize(artifact) !== text.slice(m[0].length)) malformed('log entry: not in canonical form (JCS)');
  return { type: m[1]!, artifact: artifact as Record<string, unknown> };
}
