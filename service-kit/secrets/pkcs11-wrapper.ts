/**
 * A KEK that never leaves a PKCS#11 token: an AES-256 secret key (CKO_SECRET_KEY, CKK_AES) that
 * wraps and unwraps data keys inside the token with CKM_AES_GCM. Only the wrapped data keys
 * (and the data they seal) are in the database.
 */
import { randomBytes } from 'node:crypto';
import { parsePkcs11Uri, readPin } from '../signers/pkcs11-uri.js';
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
import type { KeyWrapper } from './envelope.js';

export interface Pkcs11Wrapper extends KeyWrapper {
  close(): Promise<void>;
}

/**
 * Opens the AES key a `pkcs11:` URI names as a KeyWrapper; its id is `p11:<label>` (the label
 * names the key across instances, never its value).
 * @example const w = await openPkcs11Wrapper('pkcs11:token=ctl;object=gateway-kek?pin-source=/run/pin')
 */
export async function openPkcs11Wrapper(
  uriText: string,
  options: { modulePath?: string } = {},
): Promise<Pkcs11Wrapper> {
  const uri = parsePkcs11Uri(uriText);
  if (uri.object === undefined) throw new Error(`${uri.redacted} names no key: add object=<label>`);
  const pin = readPin(uri);
  const m = loadModule(uri.modulePath ?? options.modulePath ?? DEFAULT_PKCS11_MODULE);
  const slot = findSlot(m, uri);
  const session = openSession(m, slot, uri, pin);
  let key: Handle;
  try {
    const keys = findObjects(m, session, keyTemplate(m, uri, m.lib.CKO_SECRET_KEY));
    if (keys.length !== 1)
      throw new Error(`${keys.length === 0 ? 'no' : keys.length} secret keys match ${uri.redacted}`);
    key = keys[0];
  } catch (e) {
    m.p.C_CloseSession(session);
    throw e;
  }
  // One session, one operation at a time: calls are synchronous (an AES-GCM of 32 bytes).
  const gcm = (iv: Buffer, aad: Uint8Array) => ({
    mechanism: m.lib.CKM_AES_GCM,
    parameter: { type: m.lib.CK_PARAMS_AES_GCM, iv, aad: Buffer.from(aad), ivBits: 96, tagBits: 128 },
  });
  return {
    id: `p11:${uri.object}`,
    description: uri.redacted,
    async wrap(dek, aad) {
      const iv = randomBytes(12);
      try {
        m.p.C_EncryptInit(session, gcm(iv, aad) as never, key);
        const out = m.p.C_Encrypt(session, Buffer.from(dek), Buffer.alloc(dek.length + 16));
        return Buffer.concat([iv, out]);
      } catch (e) {
        throw explain(e, `wrapping a data key with ${uri.redacted}`);
      }
    },
    async unwrap(wrapped, aad) {
      const b = Buffer.from(wrapped);
      try {
        m.p.C_DecryptInit(session, gcm(b.subarray(0, 12), aad) as never, key);
        return m.p.C_Decrypt(session, b.subarray(12), Buffer.alloc(b.length));
      } catch (e) {
        throw explain(e, `unwrapping a data key with ${uri.redacted}`);
      }
    },
    async close() {
      try {
        m.p.C_CloseSession(session);
      } catch {
        /* best effort */
      }
    },
  };
}

/**
 * Generates an AES-256 KEK inside the token (sensitive, non-extractable), labelled by the URI's object.
 * @example await generatePkcs11AesKey('pkcs11:token=ctl;object=gateway-kek?pin-value=1234')
 */
export async function generatePkcs11AesKey(uriText: string, options: { modulePath?: string } = {}): Promise<void> {
  const uri = parsePkcs11Uri(uriText);
  if (uri.object === undefined) throw new Error(`${uri.redacted}: give the new key a label (object=<label>)`);
  const m = loadModule(uri.modulePath ?? options.modulePath ?? DEFAULT_PKCS11_MODULE);
  const session = openSession(m, findSlot(m, uri), uri, readPin(uri), true);
  try {
    if (findObjects(m, session, keyTemplate(m, uri, m.lib.CKO_SECRET_KEY)).length > 0)
      throw new Error(`the token already holds a secret key labelled '${uri.object}'`);
    m.p.C_GenerateKey(session, { mechanism: m.lib.CKM_AES_KEY_GEN }, [
      { type: m.lib.CKA_CLASS, value: m.lib.CKO_SECRET_KEY },
      { type: m.lib.CKA_KEY_TYPE, value: m.lib.CKK_AES },
      { type: m.lib.CKA_VALUE_LEN, value: 32 },
      { type: m.lib.CKA_TOKEN, value: true },
      { type: m.lib.CKA_PRIVATE, value: true },
      { type: m.lib.CKA_SENSITIVE, value: true },
      { type: m.lib.CKA_EXTRACTABLE, value: false },
      { type: m.lib.CKA_ENCRYPT, value: true },
      { type: m.lib.CKA_DECRYPT, value: true },
      { type: m.lib.CKA_LABEL, value: uri.object },
    ]);
  } finally {
    m.p.C_CloseSession(session);
  }
}
