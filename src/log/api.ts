/**
 * The log verifiers bound to the SDK's crypto (native Ed25519 where the host has it, else our own
 * verify over noble's curve), without private keys: what `ctl/log`, `ctl/verify` and `ctl` export.
 */
import { createVerifyOnlyCrypto } from '../crypto/index.js';
import {
  verifyCheckpointWith,
  verifyNoteWith,
  type CheckpointResult,
  type NoteResult,
  type VerifyCheckpointOptions,
} from './checkpoint.js';
import { verifyTlogProofWith, type TlogProofResult } from './tlog-proof.js';
import type { Hash } from './merkle.js';
import type { VerifierKey } from './note.js';

const crypto = /* @__PURE__ */ createVerifyOnlyCrypto();

/**
 * Verifies a C2SP checkpoint note against the log's verifier keys (and k witness cosignatures):
 * `{ valid: true, checkpoint: { origin, size, rootHash, extensions, text }, signedBy, cosignatures }`
 * or a refusal (`malformed`, `checkpoint_signature_invalid`, `checkpoint_origin_mismatch`,
 * `checkpoint_cosignatures_insufficient`). Never throws.
 * @example const r = await verifyCheckpoint(await (await fetch(`${base}/log/checkpoint`)).text(), [vkey])
 */
export function verifyCheckpoint(
  note: string | Uint8Array,
  logKeys: string | ReadonlyArray<string | VerifierKey>,
  options?: VerifyCheckpointOptions,
): Promise<CheckpointResult> {
  return verifyCheckpointWith(crypto, note, logKeys, options);
}

/**
 * Verifies a C2SP tlog-proof for an entry (`logEntry('receipt', receipt)`, or `{ leafHash }`):
 * the checkpoint as `verifyCheckpoint`, then the inclusion (`log_proof_invalid`). Never throws.
 * @example const r = await verifyTlogProof(proofText, logEntry('receipt', receipt), [gatewayLogVkey])
 */
export function verifyTlogProof(
  proofText: string | Uint8Array,
  entry: Uint8Array | { leafHash: Hash },
  logKeys: string | ReadonlyArray<string | VerifierKey>,
  options?: VerifyCheckpointOptions,
): Promise<TlogProofResult> {
  return verifyTlogProofWith(crypto, proofText, entry, logKeys, options);
}

/**
 * Verifies any C2SP signed note against Ed25519 verifier keys: `{ valid: true, text, signedBy }`
 * or a refusal (`malformed`, `checkpoint_signature_invalid`). Never throws.
 * @example const r = await verifyNote(note, ['example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k'])
 */
export function verifyNote(
  note: string | Uint8Array,
  keys: string | ReadonlyArray<string | VerifierKey>,
): Promise<NoteResult> {
  return verifyNoteWith(crypto, note, keys);
}
