/**
 * Receipt (`ctl-receipt/1`, PROTOCOL.md §4): one per completed gateway payment, signed by the
 * gateway's `receipt` key (spec §2.4, §5), optionally carrying the SBA it was paid under.
 */
import type { CtlCrypto, PrivateKeyInput, PublicKeyInput, SigningKey } from '../crypto/types.js';
import type { Jwks, Receipt, Verified } from './types.js';
import {
  amount, checkShape, checkVersion, currency, identifier, object, printable, purpose, rail, signature, str,
  timestamp, version, type Shape,
} from './schema.js';
import { checkSba } from './sba.js';
import { signArtifact, verifyArtifactSignature } from './signing.js';
import { toErrorInfo, malformed, fail } from '../errors.js';
import { parseStrictJson } from '../encoding/jcs.js';
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

export type ReceiptFields = Omit<Receipt, 'version' | 'keyId' | 'signature'>;

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
  checkReceipt({ ...unsigned, signature: 'A'.repeat(86) });
  return (await signArtifact(c, 'receipt', unsigned, signer)) as unknown as Receipt;
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
