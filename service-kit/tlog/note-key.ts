/**
 * The services' note keys: the log's signing key (C2SP signed-note, Ed25519, type 0x01) and a
 * witness's cosigning key (C2SP tlog-cosignature, type 0x04), read from and written as the signer
 * key text Go's sumdb/note reads, `PRIVATE+KEY+<name>+<hex key ID>+base64(type ‖ seed)`. The SDK
 * (`ctl/log`) does the signing, the key IDs and the vkeys; it has no private-key reader by design,
 * so that text form is read here, where the keys are kept.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { importSigningKey } from '../../src/index.js';
import {
  COSIGNATURE_ED25519,
  NOTE_ED25519,
  createCosigner,
  createNoteSigner,
  formatVerifierKey,
  isNoteName,
  noteKeyId,
  parseVerifierKey,
  type Cosigner,
  type NoteSigner as SdkNoteSigner,
  type VerifierKey,
} from '../../src/entries/log.js';

export const ED25519_NOTE = NOTE_ED25519;
export const COSIGNATURE_V1 = COSIGNATURE_ED25519;
export type NoteKeyType = typeof ED25519_NOTE | typeof COSIGNATURE_V1;

// RFC 8410: the DER around a raw 32-byte Ed25519 seed and public key.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A service's note key: its name (the log's origin, or the witness's name), its vkey, and the SDK's signer for it. */
export interface NoteSigner {
  readonly name: string;
  readonly type: NoteKeyType;
  /** The verifier key text (`/log/vkey`, or the vkey a log configures for its witness). */
  readonly vkey: string;
  /** The signer key text; keep it secret. */
  readonly skey: string;
  /** Signs notes and checkpoints (type 0x01 keys). */
  readonly note?: SdkNoteSigner;
  /** Cosigns checkpoints (type 0x04 keys). */
  readonly cosigner?: Cosigner;
}

interface KeyText {
  name: string;
  type: NoteKeyType;
  seed: Uint8Array;
  publicKey: Uint8Array;
}

function publicKeyOf(seed: Uint8Array): Uint8Array {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return new Uint8Array(createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length));
}

/**
 * Reads a `PRIVATE+KEY+…` text and checks its key ID against its key; RangeError naming what is
 * wrong (synchronous, for configuration checks).
 */
export function readNoteKeyText(skey: string): KeyText {
  const m = /^PRIVATE\+KEY\+([^+]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+={0,2})$/.exec(skey.trim());
  if (!m) throw new RangeError('note signer key: expected PRIVATE+KEY+<name>+<id>+<key>');
  const name = m[1]!;
  if (!isNoteName(name)) throw new RangeError(`note key name '${name}': no spaces or '+'`);
  const raw = Buffer.from(m[3]!, 'base64');
  if (raw.toString('base64') !== m[3]) throw new RangeError('note signer key: the key is not base64');
  const type = raw[0];
  if (type !== ED25519_NOTE && type !== COSIGNATURE_V1) throw new RangeError(`note key type ${type}: unsupported`);
  if (raw.length !== 33) throw new RangeError('note key: an Ed25519 seed is 32 bytes');
  const seed = new Uint8Array(raw.subarray(1));
  const publicKey = publicKeyOf(seed);
  if (noteKeyId(name, type, publicKey).toString(16).padStart(8, '0') !== m[2])
    throw new RangeError('note signer key: the key id does not match the key');
  return { name, type, seed, publicKey };
}

async function signerOf(k: KeyText): Promise<NoteSigner> {
  const key = await importSigningKey(k.seed, { alg: 'EdDSA' });
  const id = noteKeyId(k.name, k.type, k.publicKey).toString(16).padStart(8, '0');
  const raw = Buffer.concat([Buffer.of(k.type), k.seed]).toString('base64');
  return Object.freeze({
    name: k.name,
    type: k.type,
    vkey: formatVerifierKey(k),
    skey: `PRIVATE+KEY+${k.name}+${id}+${raw}`,
    ...(k.type === ED25519_NOTE ? { note: createNoteSigner(k.name, key) } : { cosigner: createCosigner(k.name, key) }),
  });
}

/** The signer of a `PRIVATE+KEY+…` text; RangeError naming what is wrong. */
export function parseNoteSigner(skey: string): Promise<NoteSigner> {
  return signerOf(readNoteKeyText(skey));
}

/** A new key named `name` (a log: type 0x01, its origin; a witness: type 0x04). */
export function generateNoteSigner(name: string, type: NoteKeyType = ED25519_NOTE): Promise<NoteSigner> {
  if (!isNoteName(name)) throw new RangeError(`note key name '${name}': no spaces or '+'`);
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = new Uint8Array(privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length));
  return signerOf({ name, type, seed, publicKey: publicKeyOf(seed) });
}

/** A vkey read by the SDK, with a RangeError (for configuration) when it is not one or not of `type`. */
export function readVerifierKey(vkey: string, type: NoteKeyType): VerifierKey {
  let k: VerifierKey;
  try {
    k = parseVerifierKey(vkey.trim());
  } catch (e) {
    throw new RangeError((e as Error).message);
  }
  if (k.type !== type) throw new RangeError(`verifier key ${k.name}: type 0x0${k.type}, expected 0x0${type}`);
  return k;
}
