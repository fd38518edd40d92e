/**
 * C2SP tlog-checkpoint: a signed note whose text is the log's origin, its size in decimal, the
 * base64 root hash, then optional extension lines. `verifyCheckpointWith` checks the note against
 * the log's verifier keys (Ed25519, type 0x01) and, when asked, k cosignatures of distinct
 * witnesses (C2SP tlog-cosignature, type 0x04), then reads the checkpoint. Never throws: a
 * refusal is `{ valid: false, error }` with a stable code.
 */
import { malformed, toErrorInfo, type CtlErrorInfo } from '../errors.js';
import { base64Decode, base64Encode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import { cosignatureMessage, splitCosignature } from './cosignature.js';
import { emptyRoot, equalBytes, isCount, isHash, verifyConsistency, type Hash, type LogCheck } from './merkle.js';
import {
  hex8,
  parseNote,
  parseVerifierKey,
  signNote,
  COSIGNATURE_ED25519,
  NOTE_ED25519,
  type Note,
  type NoteSigner,
  type VerifierKey,
} from './note.js';
import type { CtlCrypto } from '../crypto/types.js';

/** A checkpoint's text, read. */
export interface Checkpoint {
  /** The log's identity, e.g. `ctl.example/gateway-log`. */
  origin: string;
  /** The number of entries. */
  size: number;
  /** The RFC 6962 root of those entries. */
  rootHash: Hash;
  /** Opaque extension lines (none from CTL's logs). */
  extensions: string[];
  /** The note text the signatures cover, ending in a newline. */
  text: string;
}

/** A witness's verified cosignature: who, and when (POSIX seconds) it vouched for this tree. */
export interface Cosignature {
  name: string;
  keyId: number;
  timestamp: number;
}

export interface VerifyCheckpointOptions {
  /** The origin the checkpoint must carry; by default the name of the log key that signed it. */
  origin?: string;
  /** Witnesses' verifier keys (type 0x04, text or parsed): their cosignatures are checked and counted. */
  witnessKeys?: ReadonlyArray<string | VerifierKey>;
  /** How many distinct witnesses of `witnessKeys` must have cosigned (default 0). */
  requireCosignatures?: number;
}

export type CheckpointResult =
  | { valid: true; checkpoint: Checkpoint; signedBy: string[]; cosignatures: Cosignature[] }
  | { valid: false; error: CtlErrorInfo };

/** What verifying a note needs of the crypto facade. */
export type LogCrypto = Pick<CtlCrypto, 'importVerifyingKey'>;

const SIZE = /^(0|[1-9][0-9]{0,15})$/;

/**
 * Reads a checkpoint's text (the note text, without signatures). Throws `malformed`.
 * @example parseCheckpoint('example.com/log\n5\n' + rootBase64 + '\n').size // 5
 */
export function parseCheckpoint(text: string): Checkpoint {
  if (typeof text !== 'string' || !text.endsWith('\n')) malformed('checkpoint: text ending in a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) malformed('checkpoint: fewer than three lines');
  if (lines.some((l) => l === '')) malformed('checkpoint: an empty line');
  const [origin, sizeText, rootText, ...extensions] = lines as [string, string, string, ...string[]];
  if (!SIZE.test(sizeText) || !Number.isSafeInteger(Number(sizeText)))
    malformed('checkpoint: the size is not a decimal below 2^53 without leading zeros');
  const rootHash = base64Decode(rootText);
  if (rootHash.length !== 32) malformed('checkpoint: the root hash is not 32 bytes');
  if (sizeText === '0' && !equalBytes(rootHash, emptyRoot()))
    malformed('checkpoint: an empty tree has the root SHA-256()');
  return { origin, size: Number(sizeText), rootHash, extensions, text };
}

/**
 * The text of a checkpoint. @example formatCheckpoint({ origin, size: 5, rootHash }) // 'origin\n5\n<base64>\n'
 */
export function formatCheckpoint(c: { origin: string; size: number; rootHash: Hash; extensions?: string[] }): string {
  if (typeof c.origin !== 'string' || c.origin === '' || /\n/.test(c.origin))
    throw new RangeError('formatCheckpoint: origin, one non-empty line');
  if (!isCount(c.size)) throw new RangeError('formatCheckpoint: size, a safe integer ≥ 0');
  if (!isHash(c.rootHash)) throw new RangeError('formatCheckpoint: rootHash, 32 bytes');
  const ext = c.extensions ?? [];
  if (ext.some((l) => typeof l !== 'string' || l === '' || /\n/.test(l)))
    throw new RangeError('formatCheckpoint: extensions, non-empty lines');
  const text = [c.origin, String(c.size), base64Encode(c.rootHash), ...ext].join('\n') + '\n';
  parseCheckpoint(text);
  return text;
}

/**
 * Signs a checkpoint as a note with the log's signer(s) (note.ts `createNoteSigner`).
 * @example const note = await signCheckpoint({ origin: signer.name, size, rootHash }, [signer])
 */
export function signCheckpoint(
  c: { origin: string; size: number; rootHash: Hash; extensions?: string[] },
  signers: readonly NoteSigner[],
): Promise<string> {
  return signNote(formatCheckpoint(c), signers);
}

const refusal = (code: CtlErrorInfo['code'], message: string) => ({ valid: false as const, error: { code, message } });

/** Verifier keys given as text or parsed, each of `type`. Throws `malformed`. */
function readKeys(keys: unknown, type: number, what: string): VerifierKey[] {
  const list = typeof keys === 'string' ? [keys] : keys;
  if (!Array.isArray(list) || list.length > 64) malformed(`${what}: verifier keys (at most 64)`);
  return list.map((k) => {
    const key = typeof k === 'string' ? parseVerifierKey(k) : k;
    if (!key || typeof key !== 'object' || key.type !== type || !(key.publicKey instanceof Uint8Array))
      malformed(`${what}: each a verifier key of type 0x0${type}`);
    return key as VerifierKey;
  });
}

const keyName = (key: { name: string; keyId: number }) => `${key.name}+${hex8(key.keyId)}`;

/**
 * Checks each signature line by a known key (note signatures 0x01 over the text, cosignatures
 * 0x04 over cosignature/v1): an unknown key's line is ignored, every known key's line is
 * verified and one that fails refuses the whole note (C2SP signed-note "Signatures"), and a key
 * counts once however many lines it has.
 */
async function checkSignatures(
  crypto: LogCrypto,
  note: Note,
  known: readonly VerifierKey[],
): Promise<
  { ok: true; text: string; signedBy: Set<string>; cosigned: Map<string, Cosignature> } | { ok: false; message: string }
> {
  const bytes = utf8Encode(note.text);
  const signedBy = new Set<string>();
  const cosigned = new Map<string, Cosignature>();
  for (const sig of note.signatures) {
    const key = known.find((x) => x.name === sig.name && x.keyId === sig.keyId);
    // Every line of a known key is verified, repeats too (the spec's MUST; x/mod skips repeats).
    if (!key) continue;
    const vk = await crypto.importVerifyingKey(key.publicKey, { alg: 'EdDSA' });
    if (key.type === NOTE_ED25519) {
      if (!(await vk.verify(bytes, sig.signature)))
        return { ok: false, message: `the signature of ${keyName(key)} does not verify` };
      signedBy.add(keyName(key));
    } else {
      const c = splitCosignature(sig.signature);
      if (!c || !(await vk.verify(cosignatureMessage(note.text, c.timestamp), c.signature)))
        return { ok: false, message: `the cosignature of ${keyName(key)} does not verify` };
      if (!cosigned.has(keyName(key)))
        cosigned.set(keyName(key), { name: key.name, keyId: key.keyId, timestamp: c.timestamp });
    }
  }
  if (signedBy.size === 0 && cosigned.size === 0) return { ok: false, message: 'no valid signature of a known key' };
  return { ok: true, text: note.text, signedBy, cosigned };
}

export type NoteResult = { valid: true; text: string; signedBy: string[] } | { valid: false; error: CtlErrorInfo };

/**
 * Verifies any signed note (C2SP signed-note) against Ed25519 verifier keys (type 0x01): its text
 * once a known key's signature verifies (`checkpoint_signature_invalid` otherwise). Never throws.
 * @example const r = await verifyNoteWith(crypto, note, [vkey]) // { valid: true, text, signedBy: ['name+keyid'] }
 */
export async function verifyNoteWith(
  crypto: LogCrypto,
  note: string | Uint8Array,
  keys: string | ReadonlyArray<string | VerifierKey>,
): Promise<NoteResult> {
  try {
    const known = readKeys(keys, NOTE_ED25519, 'keys');
    if (new Set(known.map(keyName)).size !== known.length) malformed('two keys share a name and key ID');
    const sigs = await checkSignatures(crypto, parseNote(note), known);
    if (!sigs.ok) return refusal('checkpoint_signature_invalid', sigs.message);
    return { valid: true, text: sigs.text, signedBy: [...sigs.signedBy] };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

/**
 * Verifies a checkpoint note: at least one valid signature of a log key (a known key's bad
 * signature refuses the whole note), its origin, and `requireCosignatures` valid cosignatures of
 * distinct witnesses. Signatures of unknown keys are ignored (C2SP signed-note).
 * @example const r = await verifyCheckpointWith(crypto, note, [vkey], { witnessKeys, requireCosignatures: 1 })
 */
export async function verifyCheckpointWith(
  crypto: LogCrypto,
  note: string | Uint8Array,
  logKeys: string | ReadonlyArray<string | VerifierKey>,
  options: VerifyCheckpointOptions = {},
): Promise<CheckpointResult> {
  try {
    const keys = readKeys(logKeys, NOTE_ED25519, 'logKeys');
    const o = options ?? {};
    const witnesses = o.witnessKeys === undefined ? [] : readKeys(o.witnessKeys, COSIGNATURE_ED25519, 'witnessKeys');
    const k = o.requireCosignatures ?? 0;
    if (!Number.isInteger(k) || k < 0 || k > new Set(witnesses.map((w) => w.name)).size)
      malformed('requireCosignatures: an integer from 0 to the number of witnesses');
    if (o.origin !== undefined && (typeof o.origin !== 'string' || o.origin === '')) malformed('origin: a string');
    const known = [...keys, ...witnesses];
    const id = keyName;
    if (new Set(known.map(id)).size !== known.length) malformed('two keys share a name and key ID');

    const sigs = await checkSignatures(crypto, parseNote(note), known);
    if (!sigs.ok) return refusal('checkpoint_signature_invalid', sigs.message);
    const { text, signedBy, cosigned } = sigs;
    if (signedBy.size === 0) return refusal('checkpoint_signature_invalid', 'no valid signature of a log key');
    const checkpoint = parseCheckpoint(text);
    const signerNames = keys.filter((x) => signedBy.has(id(x))).map((x) => x.name);
    if (o.origin !== undefined ? checkpoint.origin !== o.origin : !signerNames.includes(checkpoint.origin))
      return refusal('checkpoint_origin_mismatch', `the checkpoint is of ${JSON.stringify(checkpoint.origin)}`);
    const cosignatures = [...cosigned.values()];
    const distinct = new Set(cosignatures.map((c) => c.name)).size;
    if (distinct < k)
      return refusal('checkpoint_cosignatures_insufficient', `${distinct} of the ${k} witness cosignatures required`);
    return { valid: true, checkpoint, signedBy: [...signedBy], cosignatures };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}

/**
 * Checks that `newer` extends `older`, two checkpoints of one log already verified: same origin,
 * not smaller, the same root at the same size (else the log showed two trees: `log_inconsistent`),
 * and a valid consistency proof between them. Never throws.
 * @example const r = verifyCheckpointConsistency(lastSeen, fresh.checkpoint, proof) // keep `fresh` when valid
 */
export function verifyCheckpointConsistency(
  older: Pick<Checkpoint, 'origin' | 'size' | 'rootHash'>,
  newer: Pick<Checkpoint, 'origin' | 'size' | 'rootHash'>,
  proof: readonly Hash[],
): LogCheck {
  try {
    if (
      !older ||
      !newer ||
      !isHash(older.rootHash) ||
      !isHash(newer.rootHash) ||
      !isCount(older.size) ||
      !isCount(newer.size)
    )
      return refusal('malformed', 'checkpoints: { origin, size, rootHash }');
    if (older.origin !== newer.origin) return refusal('checkpoint_origin_mismatch', 'checkpoints of two logs');
    if (newer.size < older.size)
      return refusal('log_inconsistent', `the log shows ${newer.size} entries after showing ${older.size}`);
    if (newer.size === older.size && !equalBytes(newer.rootHash, older.rootHash))
      return refusal('log_inconsistent', `two different trees of ${newer.size} entries, both signed`);
    if (older.size === 0)
      return proof.length === 0
        ? { valid: true }
        : refusal('log_proof_invalid', 'every tree extends the empty one, without a proof');
    return verifyConsistency(older.size, newer.size, proof, older.rootHash, newer.rootHash);
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
