/**
 * C2SP signed-note: a text ending in a newline, a blank line, then one or more lines
 * `— <name> base64(keyId ‖ signature)`. A key is named by (name, key ID), the key ID being the
 * first four bytes of SHA-256(name ‖ "\n" ‖ type ‖ public key); its text form (a "vkey") is
 * `<name>+<hex key ID>+base64(type ‖ public key)`. Type 0x01 is an Ed25519 note signature over
 * the text; type 0x04 is a tlog-cosignature/v1 Ed25519 cosignature (cosignature.ts).
 *
 * Parsing follows golang.org/x/mod/sumdb/note (Open): valid UTF-8, no control character but the
 * newline, the text split from the signatures at the last blank line, at most 100 signature
 * lines; and the spec's rules for keys: a signature by an unknown key is ignored, a signature by a
 * known key must verify, a repeated signature by one key counts once.
 */
import { malformed } from '../errors.js';
import { sha256Sync } from '../crypto/index.js';
import { base64Decode, base64Encode, base64urlDecode, hexEncode } from '../encoding/base64url.js';
import { utf8Decode, utf8Encode } from '../encoding/utf8.js';
import type { SigningKey } from '../crypto/types.js';

/** Signature types of C2SP signed-note: Ed25519 note signatures, Ed25519 tlog cosignatures. */
export const NOTE_ED25519 = 0x01;
export const COSIGNATURE_ED25519 = 0x04;

/** The longest note read, and the most signature lines (the spec asks verifiers to accept 16). */
export const MAX_NOTE_BYTES = 1 << 20;
export const MAX_NOTE_SIGNATURES = 100;

/** A verifier key (vkey), parsed: an Ed25519 public key under a name, for notes (0x01) or cosignatures (0x04). */
export interface VerifierKey {
  name: string;
  /** The 32-bit key ID, an unsigned integer. */
  keyId: number;
  type: typeof NOTE_ED25519 | typeof COSIGNATURE_ED25519;
  publicKey: Uint8Array;
}

/** One signature line of a note, not yet verified. */
export interface NoteSignature {
  name: string;
  keyId: number;
  /** The signature bytes after the key ID. */
  signature: Uint8Array;
}

/** A parsed note: its text (ending in a newline, without the blank line) and its signature lines. */
export interface Note {
  text: string;
  signatures: NoteSignature[];
}

// Go's unicode.IsSpace: a key name holds none of them (C2SP signed-note "Key names").
const SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const CONTROL = /[\x00-\x09\x0b-\x1f]/;
const SIG_PREFIX = '\u2014 ';

/** A valid key name: non-empty, no Unicode space, no `+`. @example isNoteName('example.com/log') // true */
export function isNoteName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= 1024 && !SPACE.test(name) && !name.includes('+');
}

/**
 * The key ID of a key: SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4] as a big-endian uint32.
 * @example noteKeyId('example.com/foo', NOTE_ED25519, publicKey) // 0x530d903a for the spec's example
 */
export function noteKeyId(name: string, type: number, publicKey: Uint8Array): number {
  const n = utf8Encode(name);
  const msg = new Uint8Array(n.length + 2 + publicKey.length);
  msg.set(n);
  msg[n.length] = 0x0a;
  msg[n.length + 1] = type;
  msg.set(publicKey, n.length + 2);
  const h = sha256Sync(msg);
  return ((h[0]! << 24) | (h[1]! << 16) | (h[2]! << 8) | h[3]!) >>> 0;
}

const hex8 = (id: number): string => id.toString(16).padStart(8, '0');

/**
 * Reads a verifier key `<name>+<hex key ID>+base64(type ‖ key)` (Ed25519: types 0x01 and 0x04),
 * checking the key ID against the key. Throws `malformed`.
 * @example parseVerifierKey('example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k')
 */
export function parseVerifierKey(vkey: string): VerifierKey {
  if (typeof vkey !== 'string' || vkey.length > 2048) malformed('verifier key: not a string');
  const m = /^([^+]*)\+([0-9a-fA-F]{8})\+([A-Za-z0-9+/=]+)$/.exec(vkey);
  if (!m || !isNoteName(m[1])) malformed('verifier key: not <name>+<hash>+<key>');
  const name = m[1]!;
  const raw = base64Decode(m[3]!);
  const type = raw[0];
  if (type !== NOTE_ED25519 && type !== COSIGNATURE_ED25519)
    malformed(`verifier key ${name}: type ${type} is not Ed25519 (0x01) or an Ed25519 cosignature (0x04)`);
  if (raw.length !== 33) malformed(`verifier key ${name}: an Ed25519 key is 32 bytes`);
  const publicKey = raw.slice(1);
  const keyId = noteKeyId(name, type, publicKey);
  if (keyId !== parseInt(m[2]!, 16)) malformed(`verifier key ${name}: the key ID does not match the key`);
  return { name, keyId, type, publicKey };
}

/**
 * The text form of a key. @example formatVerifierKey({ name: 'log.example', type: 1, publicKey }) // 'log.example+…+A…'
 */
export function formatVerifierKey(key: { name: string; type: number; publicKey: Uint8Array }): string {
  if (!isNoteName(key.name)) throw new RangeError('formatVerifierKey: the name has a space or a +');
  if (!Number.isInteger(key.type) || key.type < 0 || key.type > 255)
    throw new RangeError('formatVerifierKey: type, a byte');
  const raw = new Uint8Array(33);
  raw[0] = key.type;
  raw.set(key.publicKey, 1);
  return `${key.name}+${hex8(noteKeyId(key.name, key.type, key.publicKey))}+${base64Encode(raw)}`;
}

/** A note given as text or as its UTF-8 bytes, checked: valid UTF-8, no control character but "\n", bounded. */
export function noteText(input: string | Uint8Array): string {
  let text: string;
  if (input instanceof Uint8Array) {
    if (input.length > MAX_NOTE_BYTES) malformed('note: too long');
    text = utf8Decode(input);
  } else if (typeof input === 'string') {
    if (input.length > MAX_NOTE_BYTES) malformed('note: too long');
    utf8Encode(input); // refuses a lone surrogate: not UTF-8 text
    text = input;
  } else {
    return malformed('note: not text');
  }
  if (CONTROL.test(text)) malformed('note: a control character other than newline');
  return text;
}

/**
 * Splits a signed note into its text and signature lines (nothing verified yet). Throws `malformed`.
 * @example parseNote(checkpointText).signatures[0].name // 'example.com/log'
 */
export function parseNote(input: string | Uint8Array): Note {
  const msg = noteText(input);
  const split = msg.lastIndexOf('\n\n');
  if (split < 0) malformed('note: no blank line before the signatures');
  const text = msg.slice(0, split + 1);
  const block = msg.slice(split + 2);
  if (block.length === 0 || !block.endsWith('\n')) malformed('note: no signature lines');
  const lines = block.slice(0, -1).split('\n');
  if (lines.length > MAX_NOTE_SIGNATURES) malformed(`note: more than ${MAX_NOTE_SIGNATURES} signatures`);
  const signatures = lines.map((line): NoteSignature => {
    if (!line.startsWith(SIG_PREFIX)) malformed('note: a signature line must start with "— "');
    const rest = line.slice(SIG_PREFIX.length);
    const space = rest.indexOf(' ');
    const name = space < 0 ? rest : rest.slice(0, space);
    const b64 = space < 0 ? '' : rest.slice(space + 1);
    if (!isNoteName(name) || b64 === '') malformed('note: a signature line is not "— <name> <base64>"');
    const raw = base64Decode(b64);
    if (raw.length < 5) malformed('note: a signature is shorter than its key ID and one byte');
    const keyId = ((raw[0]! << 24) | (raw[1]! << 16) | (raw[2]! << 8) | raw[3]!) >>> 0;
    return { name, keyId, signature: raw.slice(4) };
  });
  return { text, signatures };
}

/** A note signer: a name, its key ID, the vkey to publish, and the signature line for a text. */
export interface NoteSigner {
  readonly name: string;
  readonly keyId: number;
  readonly type: number;
  /** The verifier key (vkey) to publish, e.g. at `/log/vkey`. */
  readonly verifierKey: string;
  /** The signature (key ID ‖ signature) over `message`, as the base64 of a signature line. */
  signLine(message: Uint8Array): Promise<string>;
}

/** The raw public key of an Ed25519 SigningKey; anything else is refused (signed notes here are Ed25519). */
function ed25519PublicKey(key: SigningKey): Uint8Array {
  if (!key || key.kind !== 'signing' || typeof key.sign !== 'function')
    throw new TypeError('a SigningKey (importSigningKey of ctl, or a service signer)');
  if (key.alg !== 'EdDSA' || key.publicJwk.crv !== 'Ed25519') throw new RangeError('note keys are Ed25519');
  return base64urlDecode(key.publicJwk.x);
}

/** A signer of one signature type (0x01 notes, 0x04 cosignatures) over a SigningKey. */
export function createTypedSigner(name: string, key: SigningKey, type: number): NoteSigner {
  if (!isNoteName(name)) throw new RangeError('note signer: the name must be non-empty, without spaces or +');
  const publicKey = ed25519PublicKey(key);
  const keyId = noteKeyId(name, type, publicKey);
  const idBytes = new Uint8Array([keyId >>> 24, (keyId >>> 16) & 0xff, (keyId >>> 8) & 0xff, keyId & 0xff]);
  return Object.freeze({
    name,
    keyId,
    type,
    verifierKey: formatVerifierKey({ name, type, publicKey }),
    async signLine(message: Uint8Array) {
      const sig = await key.sign(message);
      const raw = new Uint8Array(4 + sig.length);
      raw.set(idBytes);
      raw.set(sig, 4);
      return base64Encode(raw);
    },
  });
}

/**
 * An Ed25519 note signer (type 0x01) named `name` over a SigningKey (`importSigningKey` of `ctl`,
 * or a service's file or PKCS#11 signer).
 * @example const signer = createNoteSigner('ctl.example/gateway-log', await importSigningKey(pem)); signer.verifierKey
 */
export function createNoteSigner(name: string, key: SigningKey): NoteSigner {
  return createTypedSigner(name, key, NOTE_ED25519);
}

/**
 * Signs a note text (ending in a newline) with each signer: the text, a blank line, one line each.
 * @example await signNote('hello\n', [signer]) // 'hello\n\n— name base64…\n'
 */
export async function signNote(text: string, signers: readonly NoteSigner[]): Promise<string> {
  const checked = noteText(text);
  if (!checked.endsWith('\n')) throw new RangeError('signNote: the text ends in a newline');
  if (!Array.isArray(signers) || signers.length === 0) throw new RangeError('signNote: at least one signer');
  const bytes = utf8Encode(checked);
  const lines = await Promise.all(signers.map(async (s) => `${SIG_PREFIX}${s.name} ${await s.signLine(bytes)}\n`));
  return `${checked}\n${lines.join('')}`;
}

export { hex8 };
