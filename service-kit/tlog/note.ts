/**
 * C2SP signed-note with Ed25519 signatures (type 0x01), C2SP tlog-checkpoint bodies and C2SP
 * tlog-cosignature (cosignature/v1, type 0x04), over node:crypto.
 *
 * - A key's id is SHA-256(name ‖ "\n" ‖ type ‖ public key)[:4]; its verifier key text (vkey) is
 *   `<name>+<id as 8 hex>+<base64(type ‖ public key)>`, its signer key text
 *   `PRIVATE+KEY+<name>+<id>+<base64(type ‖ seed)>` (the form Go's sumdb/note reads).
 * - A note is its text (lines ending in "\n"), an empty line, then signature lines
 *   `— <name> <base64(key id ‖ signature)>\n`.
 * - A checkpoint's text is the origin, the tree size in decimal and the root hash in base64.
 * - A cosignature signs `cosignature/v1\ntime <seconds>\n` followed by the checkpoint text, and its
 *   line carries base64(key id ‖ uint64 timestamp ‖ signature).
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';

export const ED25519_NOTE = 0x01;
export const COSIGNATURE_V1 = 0x04;
const DASH = '\u2014';
const NAME = /^[^\s+\u2014]+$/;

// RFC 8410 prefixes: the DER around a raw 32-byte Ed25519 key.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

export function keyId(name: string, type: number, publicKey: Uint8Array): Buffer {
  return createHash('sha256')
    .update(name)
    .update('\n')
    .update(Buffer.of(type))
    .update(publicKey)
    .digest()
    .subarray(0, 4);
}

/** A note signer (a log's key, or a witness's cosigning key). */
export interface NoteSigner {
  name: string;
  type: typeof ED25519_NOTE | typeof COSIGNATURE_V1;
  publicKey: Buffer;
  id: Buffer;
  /** The verifier key text (`/log/vkey`). */
  vkey: string;
  /** The signer key text; keep it secret. */
  skey: string;
  sign(message: Uint8Array): Buffer;
}

/** A note verifier from its vkey text. */
export interface NoteVerifier {
  name: string;
  type: number;
  publicKey: Buffer;
  id: Buffer;
  key: KeyObject;
}

/** `text` split at its first `n - 1` plus signs: base64 keys contain '+' themselves. */
function splitPlus(text: string, n: number): string[] {
  const parts: string[] = [];
  let rest = text;
  while (parts.length < n - 1) {
    const at = rest.indexOf('+');
    if (at < 0) break;
    parts.push(rest.slice(0, at));
    rest = rest.slice(at + 1);
  }
  parts.push(rest);
  return parts;
}

function checkName(name: string): string {
  if (!NAME.test(name)) throw new RangeError(`note key name '${name}': no spaces, '+' or '—'`);
  return name;
}

function signerOf(name: string, type: number, seed: Buffer): NoteSigner {
  if (type !== ED25519_NOTE && type !== COSIGNATURE_V1) throw new RangeError(`note key type ${type}: unsupported`);
  if (seed.length !== 32) throw new RangeError('note key: an Ed25519 seed is 32 bytes');
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const publicKey = createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
  const id = keyId(name, type, publicKey);
  const b64 = (k: Buffer) => Buffer.concat([Buffer.of(type), k]).toString('base64');
  return {
    name,
    type: type as NoteSigner['type'],
    publicKey,
    id,
    vkey: `${name}+${id.toString('hex')}+${b64(publicKey)}`,
    skey: `PRIVATE+KEY+${name}+${id.toString('hex')}+${b64(seed)}`,
    sign: (message) => sign(null, message, key),
  };
}

/** A new key named `name` (a log: type 0x01, its origin; a witness: type 0x04). */
export function generateNoteSigner(name: string, type: NoteSigner['type'] = ED25519_NOTE): NoteSigner {
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  return signerOf(checkName(name), type, seed);
}

/** The signer of a `PRIVATE+KEY+…` text; RangeError naming what is wrong. */
export function parseNoteSigner(skey: string): NoteSigner {
  const parts = splitPlus(skey.trim(), 5);
  if (parts.length !== 5 || parts[0] !== 'PRIVATE' || parts[1] !== 'KEY')
    throw new RangeError('note signer key: expected PRIVATE+KEY+<name>+<id>+<key>');
  const name = checkName(parts[2]!);
  const raw = Buffer.from(parts[4]!, 'base64');
  if (raw.toString('base64') !== parts[4]) throw new RangeError('note signer key: the key is not base64');
  const s = signerOf(name, raw[0]!, raw.subarray(1));
  if (s.id.toString('hex') !== parts[3]) throw new RangeError('note signer key: the key id does not match the key');
  return s;
}

/** The verifier of a vkey text; RangeError naming what is wrong. */
export function parseNoteVerifier(vkey: string): NoteVerifier {
  const parts = splitPlus(vkey.trim(), 3);
  if (parts.length !== 3) throw new RangeError('note verifier key: expected <name>+<id>+<key>');
  const name = checkName(parts[0]!);
  const raw = Buffer.from(parts[2]!, 'base64');
  if (raw.toString('base64') !== parts[2]) throw new RangeError('note verifier key: the key is not base64');
  const type = raw[0];
  const publicKey = raw.subarray(1);
  if ((type !== ED25519_NOTE && type !== COSIGNATURE_V1) || publicKey.length !== 32)
    throw new RangeError('note verifier key: only Ed25519 (0x01) and cosignature/v1 (0x04) keys are supported');
  const id = keyId(name, type, publicKey);
  if (id.toString('hex') !== parts[1]) throw new RangeError('note verifier key: the key id does not match the key');
  const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' });
  return { name, type, publicKey, id, key };
}

export interface Checkpoint {
  origin: string;
  size: number;
  root: Buffer;
  /** Extension lines, without their newlines. */
  extensions: string[];
}

export function checkpointText(c: Checkpoint): string {
  return [c.origin, String(c.size), c.root.toString('base64'), ...c.extensions].map((l) => `${l}\n`).join('');
}

/** A note split into its text and signature lines; undefined when it is not a well-formed note. */
export function splitNote(
  note: string,
): { text: string; signatures: Array<{ name: string; sig: Buffer }> } | undefined {
  const at = note.indexOf('\n\n');
  if (at < 0 || !note.endsWith('\n')) return undefined;
  const text = note.slice(0, at + 1);
  const signatures: Array<{ name: string; sig: Buffer }> = [];
  for (const line of note.slice(at + 2, -1).split('\n')) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/.exec(line);
    if (!m) return undefined;
    signatures.push({ name: m[1]!, sig: Buffer.from(m[2]!, 'base64') });
  }
  if (signatures.length === 0) return undefined;
  return { text, signatures };
}

/** The checkpoint a note's text holds; undefined when it is not one. */
export function parseCheckpointText(text: string): Checkpoint | undefined {
  if (!text.endsWith('\n')) return undefined;
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3 || lines.some((l) => l === '')) return undefined;
  const [origin, size, root] = lines as [string, string, string];
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size))) return undefined;
  const hash = Buffer.from(root, 'base64');
  if (hash.length !== 32 || hash.toString('base64') !== root) return undefined;
  return { origin, size: Number(size), root: hash, extensions: lines.slice(3) };
}

export function signatureLine(name: string, id: Buffer, sig: Buffer): string {
  return `${DASH} ${name} ${Buffer.concat([id, sig]).toString('base64')}\n`;
}

/** The checkpoint signed by `signer` (the log's key) as a note. */
export function signCheckpoint(c: Checkpoint, signer: NoteSigner): string {
  const text = checkpointText(c);
  return `${text}\n${signatureLine(signer.name, signer.id, signer.sign(Buffer.from(text)))}`;
}

/**
 * The checkpoint of `note` when `verifier` (the log's key, type 0x01) signed it; signatures of
 * other keys are ignored (C2SP signed-note).
 */
export function openCheckpoint(note: string, verifier: NoteVerifier): Checkpoint | undefined {
  const split = splitNote(note);
  if (!split) return undefined;
  const checkpoint = parseCheckpointText(split.text);
  if (!checkpoint) return undefined;
  const signed = split.signatures.some(
    (s) =>
      s.name === verifier.name &&
      s.sig.length === 68 &&
      s.sig.subarray(0, 4).equals(verifier.id) &&
      verify(null, Buffer.from(split.text), verifier.key, s.sig.subarray(4)),
  );
  return signed ? checkpoint : undefined;
}

function cosignedMessage(text: string, time: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${time}\n${text}`);
}

/** A cosignature/v1 line by `witness` over a checkpoint's text at `time` (seconds). */
export function cosign(text: string, witness: NoteSigner, time: number): string {
  if (witness.type !== COSIGNATURE_V1) throw new RangeError('cosign: the witness key is not a cosignature/v1 key');
  const ts = Buffer.alloc(8);
  ts.writeBigUInt64BE(BigInt(time));
  return signatureLine(witness.name, witness.id, Buffer.concat([ts, witness.sign(cosignedMessage(text, time))]));
}

/** The time (seconds) of a valid cosignature by `witness` on the note's checkpoint, or undefined. */
export function verifyCosignature(note: string, witness: NoteVerifier): number | undefined {
  const split = splitNote(note);
  if (!split || witness.type !== COSIGNATURE_V1) return undefined;
  for (const s of split.signatures) {
    if (s.name !== witness.name || s.sig.length !== 4 + 8 + 64 || !s.sig.subarray(0, 4).equals(witness.id)) continue;
    const time = s.sig.readBigUInt64BE(4);
    if (time > BigInt(Number.MAX_SAFE_INTEGER)) continue;
    if (verify(null, cosignedMessage(split.text, Number(time)), witness.key, s.sig.subarray(12))) return Number(time);
  }
  return undefined;
}
