/**
 * `ctl/log` (`dist/log.js`, `dist/ctl-log.iife.js` with global `CTLLog`): the transparency log, pure
 * and portable (docs/sdk-api.md "Transparency log"). RFC 9162 Merkle trees (hashing, inclusion and
 * consistency proofs, verified and built), C2SP signed notes, checkpoints, Ed25519 cosignatures,
 * tlog-tiles paths and entry bundles, and tlog-proof, for the services that keep the logs, the
 * CLI that audits them, and any client that checks them. It signs only with a SigningKey it is
 * handed (`importSigningKey` of `ctl`, or a service's signer): no private-key reader here.
 * `ctl` and `ctl/verify` carry the verifying half.
 */
export { CtlError, ERROR_CODES, isCtlErrorCode, type CtlErrorCode, type CtlErrorInfo } from '../errors.js';
export {
  leafHash,
  nodeHash,
  emptyRoot,
  rootFromLeafHashes,
  verifyInclusion,
  verifyConsistency,
  MAX_PROOF_HASHES,
  type Hash,
  type LogCheck,
} from '../log/merkle.js';
export {
  proveInclusion,
  proveConsistency,
  treeRoot,
  appendLeafHashes,
  rangeNodes,
  type NodeRef,
  type StoredHash,
  type ReadHashes,
} from '../log/prove.js';
export {
  tilePath,
  parseTilePath,
  tileFor,
  tilesOfTree,
  parseEntryBundle,
  formatEntryBundle,
  createTileHashReader,
  TILE_WIDTH,
  TILE_HEIGHT,
  MAX_ENTRY_BYTES,
  type TileRef,
  type ReadTile,
} from '../log/tiles.js';
export {
  parseNote,
  parseVerifierKey,
  formatVerifierKey,
  noteKeyId,
  isNoteName,
  createNoteSigner,
  signNote,
  NOTE_ED25519,
  COSIGNATURE_ED25519,
  MAX_NOTE_SIGNATURES,
  type Note,
  type NoteSignature,
  type NoteSigner,
  type VerifierKey,
} from '../log/note.js';
export {
  parseCheckpoint,
  formatCheckpoint,
  signCheckpoint,
  verifyCheckpointConsistency,
  type Checkpoint,
  type Cosignature,
  type VerifyCheckpointOptions,
  type CheckpointResult,
  type NoteResult,
} from '../log/checkpoint.js';
export { createCosigner, cosignatureMessage, type Cosigner } from '../log/cosignature.js';
export {
  formatTlogProof,
  parseTlogProof,
  logEntry,
  parseLogEntry,
  type TlogProof,
  type TlogProofResult,
} from '../log/tlog-proof.js';
export { verifyCheckpoint, verifyTlogProof, verifyNote } from '../log/api.js';
export { base64Encode, base64Decode, hexEncode, hexDecode } from '../encoding/base64url.js';
export { utf8Encode, utf8Decode } from '../encoding/utf8.js';
