import { canonicalize } from './jcs.js';
import { utf8Encode } from './utf8.js';
import { hexEncode } from './base64url.js';
import { sha256Sync } from '../crypto/index.js';

/**
 * SHA-256 of the canonical form, lowercase hex: the `policyHash` of a policy document (PROTOCOL.md §2).
 * @example policyHash({ budget: { amount: '5000', currency: 'USD' } }) // '…64 hex…'
 */
export function policyHash(doc: unknown): string {
  return hexEncode(sha256Sync(utf8Encode(canonicalize(doc))));
}
