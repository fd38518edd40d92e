/** Picking a key out of a JWKS or bundle entry list by kid and purpose (PROTOCOL.md §3, §5 step 1). */
import type { KeyPurpose, PublicJwk, PublishedJwk } from '../crypto/types.js';
import { malformed, fail } from '../errors.js';
import { publishedJwk } from './schema.js';

/** The thumbprint members of a published key: what the crypto layer imports. */
export function coreJwk(k: PublishedJwk): PublicJwk {
  return k.kty === 'EC' ? { kty: k.kty, crv: k.crv, x: k.x, y: k.y } : { kty: k.kty, crv: k.crv, x: k.x };
}

/** Throws `unknown_key` or `key_purpose_mismatch`; a malformed entry is `malformed`. */
export function findKey(keys: readonly unknown[], kid: string, purpose: KeyPurpose): PublicJwk {
  if (!Array.isArray(keys)) malformed('jwks.keys must be an array');
  const k = keys.find((x) => typeof x === 'object' && x !== null && (x as PublishedJwk).kid === kid) as
    PublishedJwk | undefined;
  if (!k) fail('unknown_key', `no key with kid "${kid.slice(0, 128)}"`);
  publishedJwk(k, `key ${kid}`);
  if (!k.purposes.includes(purpose)) fail('key_purpose_mismatch', `key "${kid}" may not sign a ${purpose}`);
  return coreJwk(k);
}
