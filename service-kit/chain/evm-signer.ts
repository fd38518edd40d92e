/**
 * secp256k1 signers for EVM transactions (anchors, revocation tokens): a key file (hex private
 * key, owner-only, as the PEM key files) or a key inside a PKCS#11 token. SoftHSM2 (and the HSMs
 * that implement the curve) make and use secp256k1 keys with CKM_EC_KEY_PAIR_GEN and CKM_ECDSA:
 * the token signs the transaction's 32-byte keccak digest and returns r‖s; the signature is made
 * low-S (EIP-2) and its recovery bit found by recovering the address, since PKCS#11 does not give
 * it. The private half of a token key never leaves the token.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { Hex, LocalAccount } from 'viem';
import {
  DEFAULT_PKCS11_MODULE,
  explain,
  findObjects,
  findSlot,
  keyTemplate,
  loadModule,
  openSession,
  type Handle,
} from '../signers/pkcs11.js';
import { parsePkcs11Uri, readPin } from '../signers/pkcs11-uri.js';

export interface EvmSignature {
  r: Hex;
  s: Hex;
  yParity: 0 | 1;
}

export interface EvmSigner {
  readonly address: Hex;
  /** Where the key lives (never the key): `file /etc/ctl/anchor.key`, `pkcs11:token=ctl;object=anchor`. */
  readonly description: string;
  readonly custody: 'file' | 'pkcs11';
  /** Signs a 32-byte digest: low-S, with its recovery bit. */
  signDigest(digest: Hex): Promise<EvmSignature>;
  close(): Promise<void>;
}

/** DER of OID 1.3.132.0.10 (secp256k1). */
const SECP256K1_OID = Buffer.from('06052b8104000a', 'hex');
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const CKK_EC = 0x3;
const CKM_EC_KEY_PAIR_GEN = 0x1040;
const CKM_ECDSA = 0x1041;

const viem = () => import('viem');
const viemAccounts = () => import('viem/accounts');

/** A viem account over an EvmSigner (what a wallet client signs transactions with). */
export async function evmAccount(signer: EvmSigner): Promise<LocalAccount> {
  const { keccak256, serializeTransaction, hashMessage, hashTypedData, serializeSignature } = await viem();
  const { toAccount } = await viemAccounts();
  return toAccount({
    address: signer.address,
    async signMessage({ message }) {
      return serializeSignature(await signer.signDigest(hashMessage(message)));
    },
    async signTransaction(tx, options) {
      const serialize = options?.serializer ?? serializeTransaction;
      const digest = keccak256(await serialize(tx));
      return serialize(tx, await signer.signDigest(digest));
    },
    async signTypedData(data) {
      return serializeSignature(await signer.signDigest(hashTypedData(data as never)));
    },
  });
}

/**
 * A key file: the private key as 64 hex digits (an optional 0x, surrounding whitespace ignored),
 * refused when others can read or write it.
 * @example const s = await evmKeyFileSigner('/etc/ctl/anchor.key'); s.address
 */
export async function evmKeyFileSigner(path: string): Promise<EvmSigner> {
  let mode: number;
  let text: string;
  try {
    mode = statSync(path).mode;
    text = readFileSync(path, 'utf8').trim();
  } catch (e) {
    throw new Error(`key file '${path}' cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (process.platform !== 'win32' && (mode & 0o077) !== 0)
    throw new Error(`key file '${path}' is accessible by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`);
  const hex = text.replace(/^0x/, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error(`key file '${path}': expected a secp256k1 private key as 64 hex`);
  const privateKey = `0x${hex.toLowerCase()}` as Hex;
  const n = BigInt(privateKey);
  if (n === 0n || n >= SECP256K1_N) throw new Error(`key file '${path}': not a valid secp256k1 private key`);
  const { privateKeyToAddress, sign } = await viemAccounts();
  return {
    address: privateKeyToAddress(privateKey),
    description: `file ${path}`,
    custody: 'file',
    async signDigest(digest) {
      const s = await sign({ hash: digest, privateKey });
      return { r: s.r, s: s.s, yParity: s.yParity === 1 ? 1 : 0 };
    },
    close: async () => {},
  };
}

/** The uncompressed point of CKA_EC_POINT (a DER OCTET STRING of 04‖X‖Y, or the bare 65 bytes). */
function uncompressedPoint(point: Buffer): Buffer {
  const raw = point.length === 67 && point[0] === 0x04 && point[1] === 65 ? point.subarray(2) : point;
  if (raw.length !== 65 || raw[0] !== 0x04)
    throw new Error(`CKA_EC_POINT is not an uncompressed secp256k1 point (${point.length} bytes)`);
  return raw;
}

const hex32 = (n: bigint) => `0x${n.toString(16).padStart(64, '0')}` as Hex;

/**
 * The secp256k1 key a `pkcs11:` URI names (its private key and the public key beside it). Throws
 * one line naming the defect: no such token or key, the PIN refused, not a secp256k1 key, or a
 * token that cannot sign with it (a test signature is made and recovered before it is used).
 * @example const s = await openPkcs11EvmSigner('pkcs11:token=ctl;object=anchor?pin-source=/run/secrets/pin')
 */
export async function openPkcs11EvmSigner(uriText: string, options: { modulePath?: string } = {}): Promise<EvmSigner> {
  const uri = parsePkcs11Uri(uriText);
  if (uri.object === undefined && uri.id === undefined)
    throw new Error(`${uri.redacted} names no key: add object=<label> (or id=)`);
  const pin = readPin(uri);
  const m = loadModule(uri.modulePath ?? options.modulePath ?? DEFAULT_PKCS11_MODULE);
  const slot = findSlot(m, uri);
  const session = openSession(m, slot, uri, pin);
  let key: Handle;
  let address: Hex;
  const { keccak256, recoverAddress } = await viem();
  try {
    const keys = findObjects(m, session, keyTemplate(m, uri, m.lib.CKO_PRIVATE_KEY));
    if (keys.length !== 1)
      throw new Error(`${keys.length === 0 ? 'no private key' : `${keys.length} private keys`} match ${uri.redacted}`);
    key = keys[0]!;
    const pubs = findObjects(m, session, keyTemplate(m, uri, m.lib.CKO_PUBLIC_KEY));
    if (pubs.length !== 1) throw new Error(`exactly one public key must match ${uri.redacted} (found ${pubs.length})`);
    const [params, point] = m.p.C_GetAttributeValue(session, pubs[0]!, [
      { type: m.lib.CKA_EC_PARAMS },
      { type: m.lib.CKA_EC_POINT },
    ]);
    if (!params.value.equals(SECP256K1_OID))
      throw new Error(
        `the key at ${uri.redacted} is not a secp256k1 key (CKA_EC_PARAMS ${params.value.toString('hex')})`,
      );
    const xy = uncompressedPoint(point.value).subarray(1);
    address = `0x${keccak256(xy).slice(-40)}` as Hex;
    const { getAddress } = await viem();
    address = getAddress(address);
  } catch (e) {
    try {
      m.p.C_CloseSession(session);
    } catch {
      /* best effort */
    }
    throw e instanceof Error && !/CKR_/.test(e.message) ? e : explain(e, `reading the key at ${uri.redacted}`);
  }
  // One session, one signature at a time: anchors and mints are a few a minute, and nonces are sequential anyway.
  let queue: Promise<unknown> = Promise.resolve();
  let closed = false;
  const rawSign = (digest: Buffer): Promise<Buffer> => {
    const run = queue.then(async () => {
      if (closed) throw new Error(`the PKCS#11 signer ${uri.redacted} is closed`);
      m.p.C_SignInit(session, { mechanism: CKM_ECDSA }, key);
      const output = Buffer.alloc(64);
      return new Promise<Buffer>((resolve, reject) =>
        m.p.C_Sign(session, Buffer.from(digest), output, (err, data) =>
          err ? reject(explain(err, `signing with ${uri.redacted}`)) : resolve(Buffer.from(data ?? output)),
        ),
      );
    });
    queue = run.catch(() => {});
    return run;
  };
  const signer: EvmSigner = {
    address,
    description: uri.redacted,
    custody: 'pkcs11',
    async signDigest(digest) {
      const sig = await rawSign(Buffer.from(digest.slice(2), 'hex'));
      if (sig.length !== 64) throw new Error(`${uri.redacted} returned a ${sig.length}-byte ECDSA signature`);
      const r = BigInt(`0x${sig.subarray(0, 32).toString('hex')}`);
      let s = BigInt(`0x${sig.subarray(32).toString('hex')}`);
      if (s > SECP256K1_N / 2n) s = SECP256K1_N - s; // EIP-2: low-S only
      for (const yParity of [0, 1] as const) {
        const candidate = { r: hex32(r), s: hex32(s), yParity };
        const who = await recoverAddress({ hash: digest, signature: candidate });
        if (who.toLowerCase() === address.toLowerCase()) return candidate;
      }
      throw new Error(`${uri.redacted}: the token's signature does not recover to ${address}`);
    },
    async close() {
      closed = true;
      await queue;
      try {
        m.p.C_CloseSession(session);
      } catch {
        /* best effort */
      }
    },
  };
  // The private and public objects must be one pair: a test signature must recover to the address.
  try {
    await signer.signDigest(keccak256(randomBytes(32)));
  } catch (e) {
    await signer.close();
    throw e;
  }
  return signer;
}

/**
 * Makes a secp256k1 key pair inside the token (sensitive, never extractable) under the URI's
 * label; refuses a label that is taken. Resolves to its signer.
 * @example const s = await generatePkcs11EvmKey('pkcs11:token=ctl;object=anchor?pin-value=1234'); s.address
 */
export async function generatePkcs11EvmKey(uriText: string, options: { modulePath?: string } = {}): Promise<EvmSigner> {
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
    if (taken) throw new Error(`the token already holds a key labelled '${uri.object}' (keys are never overwritten)`);
    const id = uri.id ? Buffer.from(uri.id) : randomBytes(16);
    try {
      m.p.C_GenerateKeyPair(
        session,
        { mechanism: CKM_EC_KEY_PAIR_GEN },
        [
          { type: m.lib.CKA_TOKEN, value: true },
          { type: m.lib.CKA_VERIFY, value: true },
          { type: m.lib.CKA_EC_PARAMS, value: SECP256K1_OID },
          { type: m.lib.CKA_LABEL, value: uri.object },
          { type: m.lib.CKA_ID, value: id },
        ],
        [
          { type: m.lib.CKA_TOKEN, value: true },
          { type: m.lib.CKA_SIGN, value: true },
          { type: m.lib.CKA_PRIVATE, value: true },
          { type: m.lib.CKA_SENSITIVE, value: true },
          { type: m.lib.CKA_EXTRACTABLE, value: false },
          { type: m.lib.CKA_KEY_TYPE, value: CKK_EC },
          { type: m.lib.CKA_LABEL, value: uri.object },
          { type: m.lib.CKA_ID, value: id },
        ],
      );
    } catch (e) {
      throw explain(e, `making a secp256k1 key in ${uri.redacted} (does the token support the curve?)`);
    }
  } finally {
    try {
      m.p.C_CloseSession(session);
    } catch {
      /* best effort */
    }
  }
  return openPkcs11EvmSigner(uriText, options);
}
