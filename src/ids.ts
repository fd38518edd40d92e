import { base64urlEncode } from './encoding/base64url.js';
import { randomBytes } from './crypto/random.js';

/**
 * A fresh identifier: optional prefix + 128 CSPRNG bits in base64url (PROTOCOL.md §1).
 * @example newId('rcpt_') // 'rcpt_Qm1x…'
 */
export function newId(prefix = ''): string {
  return prefix + base64urlEncode(randomBytes(16));
}
