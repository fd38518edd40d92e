/**
 * Ed25519 signatures on libuv's thread pool instead of the event loop when the loop is busy: a
 * paid request signs twice (its SBA and its receipt), about 55 µs each in OpenSSL, during which a
 * synchronous signer holds the one JavaScript thread. `crypto.sign` with a callback computes the
 * same signature on a pool thread (Ed25519 is deterministic: same bytes either way), so the loop
 * serves other requests meanwhile. On an idle loop the signature is made inline (loop-busy.ts):
 * the hop to the pool and back would only add latency. The key object never leaves this process.
 */
import { createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto';
import type { SigningKey } from '../../src/index.js';
import { loopIsBusy } from '../loop-busy.js';

/** PKCS#8 DER of an Ed25519 seed (RFC 8410 §7). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** An Ed25519 private key object from its 32-byte seed, a PKCS#8 PEM, or a key object. */
export function ed25519KeyObject(key: Uint8Array | string | KeyObject): KeyObject {
  if (typeof key === 'string') return createPrivateKey(key);
  if (key instanceof Uint8Array) {
    if (key.length !== 32) throw new RangeError('an Ed25519 seed is 32 bytes');
    return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, key]), format: 'der', type: 'pkcs8' });
  }
  return key;
}

/**
 * `imported` (an SDK SigningKey) signing on the thread pool with `privateKey`, the same key's
 * private half; `imported` itself when it is not Ed25519. Refuses a private key whose public half
 * is not `imported`'s. `loopBusy` is asked at each signature (tests pass their own).
 * @example const key = signingOffThread(await importSigningKey(pem), ed25519KeyObject(pem))
 */
export function signingOffThread(
  imported: SigningKey,
  privateKey: KeyObject,
  loopBusy: () => boolean = loopIsBusy,
): SigningKey {
  if (imported.alg !== 'EdDSA') return imported;
  const x = (createPublicKey(privateKey).export({ format: 'jwk' }) as { x?: string }).x;
  if (x !== (imported.publicJwk as { x?: string }).x)
    throw new Error("signingOffThread: the private key is not the signing key's");
  return Object.freeze({
    kind: 'signing' as const,
    alg: imported.alg,
    publicJwk: imported.publicJwk,
    sign(message: Uint8Array): Promise<Uint8Array> {
      if (!(message instanceof Uint8Array))
        return Promise.reject(new TypeError('sign(message): message must be a Uint8Array'));
      if (!loopBusy()) {
        try {
          return Promise.resolve(new Uint8Array(sign(null, message, privateKey)));
        } catch (e) {
          return Promise.reject(e);
        }
      }
      return new Promise((resolve, reject) =>
        // A plain Uint8Array copy, never a Node Buffer (the SDK's own backends hand back the same).
        sign(null, message, privateKey, (e, sig) => (e ? reject(e) : resolve(new Uint8Array(sig)))),
      );
    },
  });
}
