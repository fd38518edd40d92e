/**
 * Receipt check marks, verified in this browser against the gateway's published keys
 * (`/.well-known/ctl-keys.json`, PROTOCOL.md §4 JWKS): WebCrypto Ed25519 where the browser has
 * it, the SDK's verifier (bundled, pure JavaScript) where it does not. The signed bytes are
 * `ctl-receipt/1\n` || JCS(receipt without `signature`) (PROTOCOL.md §3); the key must be listed
 * with the `receipt` purpose.
 */
import { canonicalize, utf8Encode, base64urlDecode, verifyReceipt } from '../../src/index.js';

export interface ReceiptCheck {
  valid: boolean;
  /** How it was checked: `WebCrypto Ed25519` or `CTL SDK`. */
  method: string;
  keyId: string;
  message: string;
}

interface Jwk {
  kid: string;
  kty: string;
  crv: string;
  x: string;
  purposes?: string[];
  status?: string;
}

let jwks: Promise<{ keys: Jwk[] }> | undefined;
let webCryptoEd25519: boolean | undefined;

async function keys(refresh = false): Promise<{ keys: Jwk[] }> {
  if (!jwks || refresh) {
    jwks = fetch('/.well-known/ctl-keys.json', { cache: 'no-store' }).then((r) => {
      if (!r.ok) throw new Error(`the key set answered HTTP ${r.status}`);
      return r.json();
    });
    jwks.catch(() => (jwks = undefined));
  }
  return jwks;
}

async function webCryptoVerify(jwk: Jwk, receipt: Record<string, unknown>): Promise<boolean | undefined> {
  if (webCryptoEd25519 === false) return undefined;
  let key: CryptoKey;
  try {
    key = await crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, { name: 'Ed25519' }, false, [
      'verify',
    ]);
    webCryptoEd25519 = true;
  } catch {
    webCryptoEd25519 = false; // no Ed25519 in this browser's WebCrypto: the SDK does it
    return undefined;
  }
  const { signature, ...unsigned } = receipt;
  let sig: Uint8Array;
  try {
    sig = base64urlDecode(String(signature));
  } catch {
    return false;
  }
  return crypto.subtle.verify(
    { name: 'Ed25519' },
    key,
    sig as BufferSource,
    utf8Encode(`ctl-receipt/1\n${canonicalize(unsigned)}`) as BufferSource,
  );
}

/** @example const c = await checkReceipt(receipt); c.valid */
export async function checkReceipt(receipt: Record<string, unknown>): Promise<ReceiptCheck> {
  const keyId = String(receipt.keyId ?? '');
  let set = await keys();
  let jwk = set.keys.find((k) => k.kid === keyId);
  if (!jwk) {
    set = await keys(true); // a key rotated in since the set was read
    jwk = set.keys.find((k) => k.kid === keyId);
  }
  if (!jwk) return { valid: false, method: 'key lookup', keyId, message: `The gateway publishes no key '${keyId}'.` };
  if (!jwk.purposes?.includes('receipt'))
    return { valid: false, method: 'key lookup', keyId, message: `Key '${keyId}' is not a receipt key.` };
  const viaWebCrypto = jwk.kty === 'OKP' && jwk.crv === 'Ed25519' ? await webCryptoVerify(jwk, receipt) : undefined;
  if (viaWebCrypto !== undefined) {
    return viaWebCrypto
      ? {
          valid: true,
          method: 'WebCrypto Ed25519',
          keyId,
          message: `Signature verified in this browser (WebCrypto Ed25519) with key ${keyId}.`,
        }
      : {
          valid: false,
          method: 'WebCrypto Ed25519',
          keyId,
          message: 'The signature does not verify: this receipt was altered or not signed by this gateway.',
        };
  }
  const r = await verifyReceipt(receipt, { jwks: set as any });
  return r.valid
    ? {
        valid: true,
        method: 'CTL SDK',
        keyId,
        message: `Signature verified in this browser (CTL SDK) with key ${keyId}.`,
      }
    : { valid: false, method: 'CTL SDK', keyId, message: `Not valid: ${r.error.message} (${r.error.code}).` };
}
