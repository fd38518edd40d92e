/**
 * Receipt (`ctl-receipt/1`, PROTOCOL.md §4): one per completed gateway payment, signed by the
 * gateway's `receipt` key (spec §2.4, §5), optionally carrying the SBA it was paid under.
 */
import type { CtlCrypto, PrivateKeyInput, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Jwks, Receipt, SignedBudgetAuthorization, Verified } from './types.js';
import {
  amount, checkShape, checkVersion, currency, identifier, object, printable, purpose, rail, signature, str,
  timestamp, version, type Shape,
} from './schema.js';
import { checkSba, grantMemberBytes, sbaTextAroundGrant } from './sba.js';
import { signedBytes, verifyArtifactSignature } from './signing.js';
import { toErrorInfo, malformed, fail } from '../errors.js';
import { canonicalize, parseStrictJson } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { concat } from '../crypto/der.js';
import { isDeepFrozen } from '../encoding/frozen-copy.js';
import { findKey } from './keys.js';
import { passUnsupported } from '../crypto/algorithm-support.js';

const receiptShape: Shape = {
  version: [true, version],
  receiptId: [true, str(/^rcpt_[A-Za-z0-9._:-]{1,123}$/, 'an identifier starting with "rcpt_"')],
  sessionId: [true, identifier],
  grantId: [true, identifier],
  purpose: [true, purpose],
  amount: [true, object({ amountMinor: [true, amount], currency: [true, currency] })],
  merchant: [true, printable(256)],
  paidAt: [true, timestamp],
  txRef: [true, str(/^txid:[\x21-\x7e]{1,256}$/, '"txid:<reference>"')],
  rail: [true, rail],
  sba: [false, (v) => checkSba(v)],
  keyId: [true, identifier],
  signature: [true, signature],
};

export function checkReceipt(value: unknown): asserts value is Receipt {
  checkVersion(value, 'receipt');
  checkShape(value, 'receipt', receiptShape);
}

// What a signer checks before the signature exists; and the same when the embedded SBA's grant
// is one that passed `checkSba` here before and can change no more (only its authorization and
// its consistency with that grant are checked again).
const unsignedShape: Shape = { ...receiptShape, signature: [false, signature] };
const unsignedOfKnownGrantShape: Shape = { ...unsignedShape, sba: [false, (v) => checkSba(v, true)] };

// `grantMemberBytes` of the deep-frozen grants embedded in receipts signed here (an SBA signer's
// own copy, `createSbaSigner`, embedded in every receipt of a gateway session): each checked and
// canonicalized once. Kept by object, which PROTOCOL.md §12 allows only because a deep-frozen
// object cannot be edited in place; any other grant is checked and canonicalized every time.
const frozenGrants = new WeakMap<object, Uint8Array>();

export type ReceiptFields = Omit<Receipt, 'version' | 'keyId' | 'signature'>;

/**
 * Signs a receipt (PROTOCOL.md §4): its members checked every time, then signed over
 * `signedBytes('receipt', receipt)`. An embedded SBA whose grant is deep-frozen (an `SbaSigner`'s
 * `grant`) has that grant checked and canonicalized once, by object; the bytes are the same.
 * @example await signReceiptWith(c, { receiptId, sessionId, grantId, purpose, amount, merchant, paidAt, txRef, rail, sba }, { signingKey, keyId })
 */
export async function signReceiptWith(
  c: CtlCrypto,
  fields: ReceiptFields,
  options: { signingKey: PrivateKeyInput | SigningKey; keyId?: string },
): Promise<Receipt> {
  if (!options || !options.signingKey) throw new TypeError('signReceipt: options.signingKey is required');
  const signer = await c.importSigningKey(options.signingKey);
  const unsigned: Record<string, unknown> = {
    version: 1,
    ...fields,
    keyId: options.keyId ?? (await c.jwkThumbprint(signer.publicJwk)),
  };
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  const grant = (unsigned['sba'] as { grant?: object } | null | undefined)?.grant;
  let grantBytes = grant && frozenGrants.get(grant);
  checkVersion(unsigned, 'receipt');
  checkShape(unsigned, 'receipt', grantBytes ? unsignedOfKnownGrantShape : unsignedShape);
  // Checked whole just now: a grant that can change no more is canonicalized this once.
  if (!grantBytes && grant && isDeepFrozen(grant)) frozenGrants.set(grant, (grantBytes = grantMemberBytes(canonicalize(grant))));
  const bytes = grantBytes ? receiptSignedBytes(unsigned, grantBytes) : signedBytes('receipt', unsigned);
  return { ...unsigned, signature: base64urlEncode(await signer.sign(bytes)) } as unknown as Receipt;
}

/**
 * `signedBytes('receipt', receipt)` for a checked receipt whose SBA's grant member bytes are at
 * hand: JCS orders members by name (PROTOCOL.md §2), so the SBA's text goes between the receipt's
 * members named below "sba" and those above it (both sides hold required members: amount, version).
 */
function receiptSignedBytes(receipt: Record<string, unknown>, grantBytes: Uint8Array): Uint8Array {
  const { sba, signature: _omit, ...rest } = receipt;
  const below: Record<string, unknown> = {};
  const above: Record<string, unknown> = {};
  for (const k of Object.keys(rest)) (k < 'sba' ? below : above)[k] = rest[k];
  const [head, tail] = sbaTextAroundGrant(sba as SignedBudgetAuthorization, true);
  return concat(
    utf8Encode('ctl-receipt/1\n' + canonicalize(below).slice(0, -1) + ',"sba":' + head),
    grantBytes,
    utf8Encode(tail + ',' + canonicalize(above).slice(1)),
  );
}

export interface VerifyReceiptOptions {
  /** The gateway's receipt key (PEM or JWK)… */
  publicKey?: PublicKeyInput;
  /** …or its JWKS (`/.well-known/ctl-keys.json`), the key picked by `receipt.keyId`. */
  jwks?: Jwks;
}

/** Checks a receipt's shape and signature. Never throws. */
export async function verifyReceiptWith(c: CtlCrypto, input: unknown, options: VerifyReceiptOptions): Promise<Verified<{ receipt: Receipt }>> {
  try {
    const receipt = typeof input === 'string' ? parseStrictJson(input) : input;
    checkReceipt(receipt);
    let key;
    if (options?.jwks) {
      key = findKey(options.jwks.keys, receipt.keyId, 'receipt');
    } else if (options?.publicKey) {
      try {
        key = await c.importVerifyingKey(options.publicKey);
      } catch (e) {
        passUnsupported(e);
        malformed('publicKey is not a usable public key');
      }
    } else {
      fail('unknown_key', 'no receipt key: pass publicKey or jwks');
    }
    if (!(await verifyArtifactSignature(c, 'receipt', receipt as unknown as Record<string, unknown>, key))) {
      fail('receipt_signature_invalid', 'the receipt signature does not verify');
    }
    return { valid: true, receipt };
  } catch (e) {
    return { valid: false, error: toErrorInfo(e) };
  }
}
