/**
 * Receipt (`ctl-receipt/1`, PROTOCOL.md §4): one per completed gateway payment, signed by the
 * gateway's `receipt` key (spec §2.4, §5), optionally carrying the SBA it was paid under.
 */
import type { CtlCrypto, PrivateKeyInput, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Jwks, Receipt, SignedBudgetAuthorization, Verified } from './types.js';
import {
  amount,
  bad,
  checkShape,
  checkVersion,
  currency,
  identifier,
  object,
  printable,
  purpose,
  rail,
  signature,
  str,
  timestamp,
  version,
  type Shape,
} from './schema.js';
import { checkSba, sbaSignedText } from './sba.js';
import { signArtifact, signedBytes, verifyArtifactSignature } from './signing.js';
import { toErrorInfo, malformed, fail } from '../errors.js';
import { canonicalize, quoteJson } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { artifactData, isDeepFrozen } from '../encoding/frozen-copy.js';
import { findKey } from './keys.js';
import { passUnsupported } from '../crypto/algorithm-support.js';
import { isKey } from '../crypto/public-keys.js';

const receiptShape: Shape = {
  version: [true, version],
  receiptId: [true, str(/^rcpt_[A-Za-z0-9._:-]{1,123}$/, 'an identifier starting with "rcpt_"')],
  sessionId: [true, identifier],
  grantId: [true, identifier],
  purpose: [true, purpose],
  amount: [true, object({ amountMinor: [true, amount], currency: [true, currency] })],
  authorizedAmountMinor: [false, amount],
  merchant: [true, printable(256)],
  paidAt: [true, timestamp],
  txRef: [true, str(/^txid:[\x21-\x7e]{1,256}$/, '"txid:<reference>"')],
  rail: [true, rail],
  sba: [false, (v) => checkSba(v)],
  keyId: [true, identifier],
  signature: [true, signature],
};

/**
 * A receipt's shape and value rules (PROTOCOL.md §4); `shape` for one not signed yet. @example
 * checkReceipt(parseStrictJson(text))
 */
export function checkReceipt(value: unknown, shape = receiptShape): asserts value is Receipt {
  checkVersion(value, 'receipt');
  checkShape(value, 'receipt', shape);
  // PROTOCOL.md §15: what a hold captured is never more than the hold.
  const r = value as unknown as Receipt;
  if (r.authorizedAmountMinor !== undefined && BigInt(r.amount.amountMinor) > BigInt(r.authorizedAmountMinor))
    bad('receipt.amount.amountMinor', 'is above receipt.authorizedAmountMinor');
}

// What a signer checks before the signature exists (PROTOCOL.md §4); and the same when the
// embedded SBA's grant passed `checkSba` here before and can change no more: only the SBA's
// authorization and its consistency with that grant are checked again.
const unsignedShape: Shape = { ...receiptShape, signature: [false, signature] };
const unsignedOfKnownGrantShape: Shape = { ...unsignedShape, sba: [false, (v) => checkSba(v, true)] };

export type ReceiptFields = Omit<Receipt, 'version' | 'keyId' | 'signature'>;

/**
 * @example await signReceiptWith(c, { receiptId, sessionId, grantId, purpose, amount, merchant, paidAt, txRef, rail },
 * { signingKey, keyId })
 */
export async function signReceiptWith(
  c: CtlCrypto,
  fields: ReceiptFields,
  options: { signingKey: PrivateKeyInput | SigningKey; keyId?: string },
): Promise<Receipt> {
  if (!options || !options.signingKey) throw new TypeError('signReceipt: options.signingKey is required');
  const signer = await c.importSigningKey(options.signingKey);
  const unsigned = unsignedReceipt(fields, options.keyId ?? (await c.jwkThumbprint(signer.publicJwk)));
  checkReceipt(unsigned, unsignedShape);
  return (await signArtifact(c, 'receipt', unsigned, signer)) as unknown as Receipt;
}

/** The receipt to sign, its undefined members dropped (not yet checked). */
function unsignedReceipt(fields: ReceiptFields, keyId: string): Record<string, unknown> {
  const unsigned: Record<string, unknown> = { version: 1, ...fields, keyId };
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  return unsigned;
}

// The canonical text of deep-frozen grants embedded in receipts signed by `signReceiptPrepared`,
// each checked and canonicalized once. Kept by object, which PROTOCOL.md §12 allows only because
// a deep-frozen object cannot be edited in place; any other grant is checked and canonicalized
// every time. Weak: an entry lives as long as its grant (an SBA signer's).
const frozenGrants = new WeakMap<object, string>();

/**
 * As `signReceiptWith`, for a party that signs a receipt per payment (a gateway): the key already
 * imported and its keyId known, and an embedded SBA whose grant is deep-frozen (every SBA an
 * `SbaSigner` signs embeds its own frozen copy, `SbaSigner.grant`) has that grant checked and
 * canonicalized once, by object. The receipt's own members and the SBA's authorization are
 * checked every time, and the bytes signed are `signedBytes('receipt', receipt)`. No grant text
 * is taken from the caller, so none can disagree with the receipt. Exported by `ctl/server`.
 * @example await signReceiptPrepared({ receiptId, sessionId, grantId, purpose, amount, merchant, paidAt, txRef, rail,
 * sba: await sbaSigner.sign(…) }, { signingKey, keyId })
 */
export async function signReceiptPrepared(
  fields: ReceiptFields,
  options: { signingKey: SigningKey; keyId: string },
): Promise<Receipt> {
  if (!isKey(options?.signingKey, 'signing'))
    throw new TypeError('signReceiptPrepared: options.signingKey must be an imported SigningKey');
  const unsigned = unsignedReceipt(fields, options.keyId);
  // The SBA's members read once, into our own copy: the grant looked up, checked and signed over
  // is then one object, whatever getter the caller's SBA had.
  if (typeof unsigned['sba'] === 'object' && unsigned['sba'] !== null) unsigned['sba'] = { ...unsigned['sba'] };
  const grant = (unsigned['sba'] as { grant?: object } | null | undefined)?.grant;
  let grantJcs = grant && frozenGrants.get(grant);
  checkReceipt(unsigned, grantJcs ? unsignedOfKnownGrantShape : unsignedShape);
  // Checked whole just now: a grant that can change no more is canonicalized this once.
  if (!grantJcs && grant && isDeepFrozen(grant)) frozenGrants.set(grant, (grantJcs = canonicalize(grant)));
  const bytes = grantJcs ? receiptSignedBytes(unsigned, grantJcs) : signedBytes('receipt', unsigned);
  return { ...unsigned, signature: base64urlEncode(await options.signingKey.sign(bytes)) } as unknown as Receipt;
}

/**
 * `signedBytes('receipt', receipt)` for a checked receipt whose SBA's grant text is at hand: JCS orders members by name
 * (PROTOCOL.md §2), so the SBA's text goes between the receipt's members named below "sba" and those above it (both
 * sides hold required members: amount, version).
 */
function receiptSignedBytes(receipt: Record<string, unknown>, grantJcs: string): Uint8Array {
  const { sba, signature: _omit, ...rest } = receipt;
  const below: Record<string, unknown> = {};
  const above: Record<string, unknown> = {};
  for (const k of Object.keys(rest)) (k < 'sba' ? below : above)[k] = rest[k];
  const s = sba as SignedBudgetAuthorization;
  return utf8Encode(
    sbaSignedText(
      s,
      grantJcs,
      'ctl-receipt/1\n' + canonicalize(below).slice(0, -1) + ',"sba":',
      ',"signature":' + quoteJson(s.signature),
    ) +
      ',' +
      canonicalize(above).slice(1),
  );
}

export interface VerifyReceiptOptions {
  /** The gateway's receipt key (PEM or JWK)… */
  publicKey?: PublicKeyInput;
  /** …or its JWKS (`/.well-known/ctl-keys.json`), the key picked by `receipt.keyId`. */
  jwks?: Jwks;
}

/** Checks a receipt's shape and signature. Never throws. */
export async function verifyReceiptWith(
  c: CtlCrypto,
  input: unknown,
  options: VerifyReceiptOptions,
): Promise<Verified<{ receipt: Receipt }>> {
  try {
    const receipt = artifactData(input);
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
