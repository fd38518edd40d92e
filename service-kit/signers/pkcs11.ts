/**
 * Ed25519 keys in a PKCS#11 token (an HSM, a cloud HSM's PKCS#11 library, SoftHSM2 in tests),
 * through pkcs11js, and P-256 keys (ES256) for tokens without EdDSA. The private half never
 * leaves the token: signing is C_Sign with CKM_EDDSA (or CKM_ECDSA over the SHA-256 digest, the
 * signature made low-S as PROTOCOL.md §3 asks of signers); keys are made inside it
 * (CKM_EC_EDWARDS_KEY_PAIR_GEN / CKM_EC_KEY_PAIR_GEN), non-extractable and sensitive.
 *
 * A module is loaded and initialised once per process (C_Initialize is per application); each
 * signer keeps a small pool of sessions, so concurrent signatures never share one (a session
 * holds one operation at a time) and a slow HSM does not block the event loop (C_Sign runs on
 * libuv's thread pool).
 */
import { createHash, createPublicKey, randomBytes, verify as nodeVerify } from 'node:crypto';
import { createRequire } from 'node:module';
import type { PublicJwk } from '../../src/index.js';
import { HttpError } from '../http-error.js';
import { parsePkcs11Uri, readPin, type Pkcs11Uri } from './pkcs11-uri.js';
import type { Signer } from './types.js';

/** Debian's SoftHSM2; CTL_PKCS11_MODULE overrides it. */
export const DEFAULT_PKCS11_MODULE = '/usr/lib/softhsm/libsofthsm2.so';

// pkcs11js does not export these (PKCS#11 v3.0 §6.3 / §6.5).
const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;
const CKM_EDDSA = 0x1057;
const CKK_EC_EDWARDS = 0x40;
/** DER of OID 1.3.101.112 (id-Ed25519), and the PrintableString "edwards25519" older tokens use. */
const ED25519_OID = Buffer.from('06032b6570', 'hex');
const ED25519_NAME = Buffer.concat([Buffer.from([0x13, 12]), Buffer.from('edwards25519')]);
/** DER of OID 1.2.840.10045.3.1.7 (prime256v1, P-256). */
const P256_OID = Buffer.from('06082a8648ce3d030107', 'hex');
const CKK_EC = 0x3;
const CKM_EC_KEY_PAIR_GEN = 0x1040;
const CKM_ECDSA = 0x1041;
/** The order of P-256, for low-S signatures. */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** An ECDSA r‖s with s ≤ n/2 (PROTOCOL.md §3: signers emit low-S). */
function lowS(sig: Buffer): Buffer {
  const s = BigInt(`0x${sig.subarray(32).toString('hex')}`);
  if (s <= P256_N / 2n) return sig;
  return Buffer.concat([sig.subarray(0, 32), Buffer.from((P256_N - s).toString(16).padStart(64, '0'), 'hex')]);
}
const MAX_SESSIONS = 4;

// The helpers below are exported for the other PKCS#11 user in service-kit (secrets/pkcs11-wrapper.ts).
type Pkcs11Lib = typeof import('pkcs11js');
type PKCS11 = InstanceType<Pkcs11Lib['PKCS11']>;
export type Handle = Buffer;

export interface LoadedModule {
  lib: Pkcs11Lib;
  p: PKCS11;
  path: string;
}

const modules = new Map<string, LoadedModule>();

/** A PKCS#11 failure as one line: the return value's name (CKR_PIN_INCORRECT) and what we were doing. */
export function explain(e: unknown, doing: string): Error {
  const msg = (e as Error)?.message ?? String(e);
  const ckr = /CKR_[A-Z_]+/.exec(msg)?.[0];
  const hint =
    ckr === 'CKR_PIN_INCORRECT'
      ? 'the token refused the PIN'
      : ckr === 'CKR_PIN_LOCKED'
        ? 'the PIN is locked (too many wrong tries)'
        : ckr === 'CKR_TOKEN_NOT_PRESENT' || ckr === 'CKR_DEVICE_REMOVED' || ckr === 'CKR_DEVICE_ERROR'
          ? 'the token is not reachable'
          : undefined;
  return new Error(`${doing}: ${hint ? `${hint} (${ckr})` : (ckr ?? msg.split('\n')[0])}`);
}

export function loadModule(path: string): LoadedModule {
  const cached = modules.get(path);
  if (cached) return cached;
  let lib: Pkcs11Lib;
  try {
    lib = createRequire(import.meta.url)('pkcs11js') as Pkcs11Lib;
  } catch (e) {
    throw new Error(`the pkcs11js package is not installed (${(e as Error).message.split('\n')[0]})`);
  }
  const p = new lib.PKCS11();
  try {
    p.load(path);
  } catch (e) {
    throw new Error(
      `PKCS#11 module '${path}' cannot be loaded (${(e as Error).message.split('\n')[0]}); set CTL_PKCS11_MODULE`,
    );
  }
  try {
    // Signatures run on libuv's thread pool (async C_Sign): the library must lock for itself.
    p.C_Initialize({ flags: lib.CKF_OS_LOCKING_OK });
  } catch (e) {
    if (!/CKR_CRYPTOKI_ALREADY_INITIALIZED/.test((e as Error).message))
      throw explain(e, `PKCS#11 module '${path}' did not initialise`);
  }
  const m = { lib, p, path };
  modules.set(path, m);
  return m;
}

/** Finalises every module this process loaded (tests; a service just exits). */
export function closePkcs11Modules(): void {
  for (const [path, m] of modules) {
    try {
      m.p.C_Finalize();
      m.p.close();
    } catch {
      /* already gone */
    }
    modules.delete(path);
    for (const k of loggedInWith.keys()) if (k.startsWith(`${path}\0`)) loggedInWith.delete(k);
  }
}

const trimmed = (s: string) => s.replace(/[\s\0]+$/, '');
/** A CK_ULONG as the module hands it back (4 or 8 bytes, host order: little-endian here). */
const ulong = (b: Buffer) => Number(b.length === 8 ? b.readBigUInt64LE(0) : b.readUIntLE(0, b.length));

export function findSlot(m: LoadedModule, uri: Pkcs11Uri): Handle {
  let slots: Handle[];
  try {
    slots = m.p.C_GetSlotList(true);
  } catch (e) {
    throw explain(e, 'listing the PKCS#11 slots');
  }
  const seen: string[] = [];
  const matches = slots.filter((slot) => {
    const t = m.p.C_GetTokenInfo(slot);
    seen.push(`'${trimmed(t.label)}'`);
    return (
      (uri.token === undefined || trimmed(t.label) === uri.token) &&
      (uri.manufacturer === undefined || trimmed(t.manufacturerID) === uri.manufacturer) &&
      (uri.serial === undefined || trimmed(t.serialNumber) === uri.serial) &&
      (uri.model === undefined || trimmed(t.model) === uri.model) &&
      (uri.slotId === undefined || ulong(slot) === uri.slotId)
    );
  });
  if (matches.length === 0)
    throw new Error(`no PKCS#11 token matches ${uri.redacted} (tokens present: ${seen.join(', ') || 'none'})`);
  if (matches.length > 1)
    throw new Error(`${matches.length} PKCS#11 tokens match ${uri.redacted}: name one (token=, serial=)`);
  return matches[0];
}

/**
 * The PIN each token of this process was logged in with. A token's login is shared by all of a
 * process's sessions, so a second login answers CKR_USER_ALREADY_LOGGED_IN whatever the PIN: a
 * different PIN than the one that logged in is refused here instead of passing unnoticed.
 */
const loggedInWith = new Map<string, string>();

/** Opens a session and logs the user in (once per token and process: login is shared by sessions). */
export function openSession(
  m: LoadedModule,
  slot: Handle,
  uri: Pkcs11Uri,
  pin: string | undefined,
  rw = false,
): Handle {
  let session: Handle;
  try {
    session = m.p.C_OpenSession(slot, m.lib.CKF_SERIAL_SESSION | (rw ? m.lib.CKF_RW_SESSION : 0));
  } catch (e) {
    throw explain(e, `opening a session with ${uri.redacted}`);
  }
  if (pin !== undefined) {
    const token = `${m.path}\0${slot.toString('hex')}`;
    try {
      m.p.C_Login(session, m.lib.CKU_USER, pin);
      loggedInWith.set(token, pin);
    } catch (e) {
      const already = /CKR_USER_ALREADY_LOGGED_IN/.test((e as Error).message);
      if (!already || (loggedInWith.has(token) && loggedInWith.get(token) !== pin)) {
        try {
          m.p.C_CloseSession(session);
        } catch {
          /* best effort */
        }
        if (already)
          throw new Error(
            `logging in to ${uri.redacted}: this process is logged in to that token with another ` +
              'PIN (one of them is wrong)',
          );
        throw explain(e, `logging in to ${uri.redacted}`);
      }
    }
  }
  return session;
}

export function findObjects(m: LoadedModule, session: Handle, template: { type: number; value: unknown }[]): Handle[] {
  m.p.C_FindObjectsInit(session, template as never);
  try {
    return m.p.C_FindObjects(session, 16);
  } finally {
    m.p.C_FindObjectsFinal(session);
  }
}

export function keyTemplate(m: LoadedModule, uri: Pkcs11Uri, cls: number) {
  const t: { type: number; value: unknown }[] = [{ type: m.lib.CKA_CLASS, value: cls }];
  if (uri.object !== undefined) t.push({ type: m.lib.CKA_LABEL, value: uri.object });
  if (uri.id !== undefined) t.push({ type: m.lib.CKA_ID, value: Buffer.from(uri.id) });
  return t;
}

/** The Ed25519 public key of CKA_EC_POINT: a DER OCTET STRING of 32 bytes, or (some tokens) the bare 32 bytes. */
function ed25519Point(point: Buffer): Buffer {
  if (point.length === 34 && point[0] === 0x04 && point[1] === 32) return point.subarray(2);
  if (point.length === 32) return point;
  throw new Error(`CKA_EC_POINT is not an Ed25519 point (${point.length} bytes)`);
}

/** The P-256 public key of CKA_EC_POINT: a DER OCTET STRING of 04‖X‖Y, or the bare 65 bytes. */
function p256Point(point: Buffer): { x: string; y: string } {
  const raw = point.length === 67 && point[0] === 0x04 && point[1] === 65 ? point.subarray(2) : point;
  if (raw.length !== 65 || raw[0] !== 0x04)
    throw new Error(`CKA_EC_POINT is not an uncompressed P-256 point (${point.length} bytes)`);
  return { x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33).toString('base64url') };
}

function publicJwkOf(m: LoadedModule, session: Handle, uri: Pkcs11Uri): PublicJwk {
  const pubs = findObjects(m, session, keyTemplate(m, uri, m.lib.CKO_PUBLIC_KEY));
  if (pubs.length !== 1) {
    throw new Error(
      `${pubs.length === 0 ? 'no' : pubs.length} public key object${pubs.length === 1 ? '' : 's'} ` +
        `match ${uri.redacted}: the signer needs exactly one beside the private key, to publish it`,
    );
  }
  const [params, point] = m.p.C_GetAttributeValue(session, pubs[0], [
    { type: m.lib.CKA_EC_PARAMS },
    { type: m.lib.CKA_EC_POINT },
  ]);
  if (params.value.equals(P256_OID)) return { kty: 'EC', crv: 'P-256', ...p256Point(point.value) };
  if (!params.value.equals(ED25519_OID) && !params.value.equals(ED25519_NAME)) {
    throw new Error(
      `the key at ${uri.redacted} is neither Ed25519 nor P-256 (CKA_EC_PARAMS ${params.value.toString('hex')})`,
    );
  }
  return { kty: 'OKP', crv: 'Ed25519', x: ed25519Point(point.value).toString('base64url') };
}

export interface Pkcs11SignerOptions {
  /** Path of the PKCS#11 library; the URI's `module-path` wins; default DEFAULT_PKCS11_MODULE. */
  modulePath?: string;
  /** generatePkcs11Ed25519Key: the algorithm of the new key (default EdDSA; ES256 for tokens without EdDSA). */
  alg?: 'EdDSA' | 'ES256';
}

/**
 * Opens the Ed25519 key a `pkcs11:` URI names, checks it signs for the public key beside it (one
 * signature verified with node:crypto), and returns it as a Signer. Throws one line naming the
 * defect: module not loadable, no such token, PIN refused, no such key, not Ed25519.
 * @example const s = await openPkcs11Signer('pkcs11:token=ctl;object=grant?pin-source=/run/secrets/pin'); await
 * s.sign(bytes)
 */
export async function openPkcs11Signer(uriText: string, options: Pkcs11SignerOptions = {}): Promise<Signer> {
  const uri = parsePkcs11Uri(uriText);
  if (uri.object === undefined && uri.id === undefined)
    throw new Error(`${uri.redacted} names no key: add object=<label> (or id=)`);
  if (uri.type !== undefined && uri.type !== 'private')
    throw new Error(`${uri.redacted}: type must be private (the signing key)`);
  const pin = readPin(uri);
  const m = loadModule(uri.modulePath ?? options.modulePath ?? DEFAULT_PKCS11_MODULE);
  const slot = findSlot(m, uri);
  const first = openSession(m, slot, uri, pin);
  const idle: Handle[] = [first];
  let open = 1;
  let closed = false;
  const waiting: ((s: Handle) => void)[] = [];
  let key: Handle;
  let publicJwk: PublicJwk;
  try {
    const keys = findObjects(m, first, keyTemplate(m, uri, m.lib.CKO_PRIVATE_KEY));
    if (keys.length !== 1) {
      const found = keys.length === 0 ? 'no private key' : `${keys.length} private keys`;
      const hint = keys.length === 0 && pin === undefined ? ' (no PIN given: add pin-source= or pin-value=)' : '';
      throw new Error(`${found} match ${uri.redacted}${hint}`);
    }
    key = keys[0];
    const [type] = m.p.C_GetAttributeValue(first, key, [{ type: m.lib.CKA_KEY_TYPE }]);
    const keyType = ulong(type.value);
    if (keyType !== CKK_EC_EDWARDS && keyType !== CKK_EC)
      throw new Error(`the key at ${uri.redacted} is not an Ed25519 (CKK_EC_EDWARDS) or P-256 (CKK_EC) key`);
    publicJwk = publicJwkOf(m, first, uri);
    if ((keyType === CKK_EC) !== (publicJwk.kty === 'EC'))
      throw new Error(`the private and public keys at ${uri.redacted} are of different types`);
  } catch (e) {
    try {
      m.p.C_CloseSession(first);
    } catch {
      /* best effort */
    }
    throw e instanceof Error && !/CKR_/.test(e.message) ? e : explain(e, `reading the key at ${uri.redacted}`);
  }

  const acquire = (): Promise<Handle> => {
    if (closed) return Promise.reject(new Error(`the PKCS#11 signer ${uri.redacted} is closed`));
    const s = idle.pop();
    if (s) return Promise.resolve(s);
    if (open < MAX_SESSIONS) {
      open++;
      try {
        return Promise.resolve(openSession(m, slot, uri, pin));
      } catch (e) {
        open--;
        return Promise.reject(e);
      }
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const release = (s: Handle) => {
    const next = waiting.shift();
    if (next) next(s);
    else idle.push(s);
  };
  const discard = (s: Handle) => {
    open--;
    try {
      m.p.C_CloseSession(s);
    } catch {
      /* the session is gone with the error */
    }
    const next = waiting.shift();
    if (next) acquire().then(next, () => waiting.unshift(next));
  };

  const signer: Signer = {
    kind: 'signing',
    alg: publicJwk.kty === 'EC' ? 'ES256' : 'EdDSA',
    publicJwk,
    custody: 'pkcs11',
    description: uri.redacted,
    async sign(message: Uint8Array): Promise<Uint8Array> {
      const session = await acquire();
      try {
        const ec = publicJwk.kty === 'EC';
        m.p.C_SignInit(session, { mechanism: ec ? CKM_ECDSA : CKM_EDDSA }, key);
        // Our own copies, referenced until the callback: the native call reads and writes them from another thread.
        const input = ec ? createHash('sha256').update(message).digest() : Buffer.from(message);
        const output = Buffer.alloc(64);
        let sig = await new Promise<Buffer>((resolve, reject) => {
          m.p.C_Sign(session, input, output, (err, data) => (err ? reject(err) : resolve(Buffer.from(data ?? output))));
        });
        release(session);
        if (ec) sig = lowS(sig);
        return new Uint8Array(sig.buffer, sig.byteOffset, sig.byteLength);
      } catch (e) {
        // The session may be dead (token gone, network HSM restarted): the next signature opens
        // and logs in a new one. This request answers 503, never a signature from elsewhere.
        discard(session);
        const text = String((e as Error)?.message ?? e);
        const ckr = /CKR_[A-Z_]+/.exec(text)?.[0] ?? text.split('\n')[0].slice(0, 80);
        throw new HttpError(503, 'unavailable', `the signing key's token did not sign (${ckr})`);
      }
    },
    async close() {
      closed = true;
      for (const s of idle.splice(0)) {
        try {
          m.p.C_CloseSession(s);
        } catch {
          /* best effort */
        }
      }
    },
  };
  // The private and public objects must be one pair: prove it once, before anything is signed.
  const probe = randomBytes(32);
  const sig = await signer.sign(probe);
  const pub = createPublicKey({ key: { ...publicJwk }, format: 'jwk' });
  const ok =
    publicJwk.kty === 'EC'
      ? nodeVerify('sha256', probe, { key: pub, dsaEncoding: 'ieee-p1363' }, sig)
      : nodeVerify(null, probe, pub, sig);
  if (!ok) {
    await signer.close();
    throw new Error(
      `the private and public keys at ${uri.redacted} are not one pair (a test signature did not verify)`,
    );
  }
  return signer;
}

/**
 * Generates an Ed25519 (or, with `alg: 'ES256'`, P-256) key pair inside the token (manufacturing: `ctl root init
 * --pkcs11`): the private half is sensitive and non-extractable, so it never leaves the token; the public half is
 * stored beside it under the same label and id. Refuses when the label is taken.
 * @example const s = await generatePkcs11Ed25519Key('pkcs11:token=ctl;object=root-1?pin-source=/run/pin'); s.publicJwk
 */
export async function generatePkcs11Key(uriText: string, options: Pkcs11SignerOptions = {}): Promise<Signer> {
  const uri = parsePkcs11Uri(uriText);
  if (uri.object === undefined) throw new Error(`${uri.redacted}: give the new key a label (object=<label>)`);
  const pin = readPin(uri);
  const m = loadModule(uri.modulePath ?? options.modulePath ?? DEFAULT_PKCS11_MODULE);
  const slot = findSlot(m, uri);
  const session = openSession(m, slot, uri, pin, true);
  try {
    const taken = [m.lib.CKO_PRIVATE_KEY, m.lib.CKO_PUBLIC_KEY].some(
      (cls) => findObjects(m, session, keyTemplate(m, { ...uri, id: undefined }, cls)).length > 0,
    );
    if (taken)
      throw new Error(
        `the token already holds a key labelled '${uri.object}': pick another object= (keys are never overwritten)`,
      );
    const id = uri.id ? Buffer.from(uri.id) : randomBytes(16);
    try {
      m.p.C_GenerateKeyPair(
        session,
        { mechanism: options.alg === 'ES256' ? CKM_EC_KEY_PAIR_GEN : CKM_EC_EDWARDS_KEY_PAIR_GEN },
        [
          { type: m.lib.CKA_TOKEN, value: true },
          { type: m.lib.CKA_VERIFY, value: true },
          { type: m.lib.CKA_EC_PARAMS, value: options.alg === 'ES256' ? P256_OID : ED25519_OID },
          { type: m.lib.CKA_LABEL, value: uri.object },
          { type: m.lib.CKA_ID, value: id },
        ],
        [
          { type: m.lib.CKA_TOKEN, value: true },
          { type: m.lib.CKA_SIGN, value: true },
          { type: m.lib.CKA_PRIVATE, value: true },
          { type: m.lib.CKA_SENSITIVE, value: true },
          { type: m.lib.CKA_EXTRACTABLE, value: false },
          { type: m.lib.CKA_LABEL, value: uri.object },
          { type: m.lib.CKA_ID, value: id },
        ],
      );
    } catch (e) {
      throw explain(e, `generating an ${options.alg === 'ES256' ? 'ES256' : 'Ed25519'} key in ${uri.redacted}`);
    }
  } finally {
    try {
      m.p.C_CloseSession(session);
    } catch {
      /* best effort */
    }
  }
  return openPkcs11Signer(uriText, options);
}

/** generatePkcs11Key, Ed25519 unless `alg` says otherwise. */
export const generatePkcs11Ed25519Key = generatePkcs11Key;
