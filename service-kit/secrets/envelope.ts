/**
 * Envelope encryption of secrets a service must keep in its database (generated signing keys,
 * shared secrets): each value gets a fresh 256-bit data key (DEK); the value is sealed with
 * AES-256-GCM under the DEK, and the DEK under the key-encryption key (KEK), which never sits in
 * the database: an environment variable, a 0600 file, or an AES key inside a PKCS#11 token.
 *
 *     ctl-sealed/1.<kekId>.<wrapped DEK>.<iv ‖ ciphertext ‖ tag>      (base64url parts)
 *
 * Both layers bind a context (`gw_keys:<kid>`, `signing_keys:<kid>`) as additional data, so a
 * sealed value copied into another row does not open there. `kekId` names the KEK (a hash of it,
 * or the token key's label), so a service started with another KEK says so instead of failing
 * obscurely.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const PREFIX = 'ctl-sealed/1.';

/** Wraps and unwraps data keys under a KEK (local AES-256-GCM or a PKCS#11 token). */
export interface KeyWrapper {
  /** A short public name of the KEK: never the key. */
  readonly id: string;
  /** Where the KEK lives, for logs: `CTL_GATEWAY_KEK`, `file ./data/gateway.kek`, `pkcs11:…`. */
  readonly description: string;
  wrap(dek: Uint8Array, aad: Uint8Array): Promise<Uint8Array>;
  unwrap(wrapped: Uint8Array, aad: Uint8Array): Promise<Uint8Array>;
}

export interface SecretSealer {
  readonly kekId: string;
  readonly description: string;
  /** Seals `plaintext` for the row named by `context`. */
  seal(plaintext: string, context: string): Promise<string>;
  /** Opens a value sealed for `context`; throws one line (wrong KEK, tampered, moved to another row). */
  open(sealed: string, context: string): Promise<string>;
}

/** Whether a stored value is sealed (anything else is a value from before sealing: migrate it). */
export const isSealed = (value: string): boolean => value.startsWith(PREFIX);

function gcmSeal(key: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): Uint8Array {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(aad);
  const ct = Buffer.concat([c.update(plaintext), c.final()]);
  return Buffer.concat([iv, ct, c.getAuthTag()]);
}

function gcmOpen(key: Uint8Array, blob: Uint8Array, aad: Uint8Array): Uint8Array {
  if (blob.length < 28) throw new Error('sealed value too short');
  const b = Buffer.from(blob);
  const d = createDecipheriv('aes-256-gcm', key, b.subarray(0, 12));
  d.setAAD(aad);
  d.setAuthTag(b.subarray(b.length - 16));
  return Buffer.concat([d.update(b.subarray(12, b.length - 16)), d.final()]);
}

/** The public name of a local KEK: 16 hex digits of SHA-256 over a label and the key. */
export function kekIdOf(kek: Uint8Array): string {
  return createHash('sha256').update('ctl-kek-id/1\n').update(kek).digest('hex').slice(0, 16);
}

/**
 * A KeyWrapper over a 32-byte KEK held in memory.
 * @example const w = aesKeyWrapper(randomBytes(32), 'CTL_GATEWAY_KEK')
 */
export function aesKeyWrapper(kek: Uint8Array, description: string): KeyWrapper {
  if (kek.length !== 32) throw new RangeError('a KEK is 32 bytes (AES-256)');
  const key = Buffer.from(kek);
  return {
    id: kekIdOf(key),
    description,
    wrap: async (dek, aad) => gcmSeal(key, dek, aad),
    unwrap: async (wrapped, aad) => gcmOpen(key, wrapped, aad),
  };
}

/**
 * Seals and opens values under `wrapper`; `variable` is named when a value was sealed under another KEK.
 * @example const s = createSealer(aesKeyWrapper(kek, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK'); await s.open(await
 * s.seal(pem, 'gw_keys:k1'), 'gw_keys:k1')
 */
export function createSealer(wrapper: KeyWrapper, variable: string): SecretSealer {
  const enc = new TextEncoder();
  const dekAad = (context: string) => enc.encode(`ctl-dek/1\n${wrapper.id}\n${context}`);
  return {
    kekId: wrapper.id,
    description: wrapper.description,
    async seal(plaintext, context) {
      const dek = randomBytes(32);
      try {
        const wrapped = await wrapper.wrap(dek, dekAad(context));
        const body = gcmSeal(dek, enc.encode(plaintext), enc.encode(context));
        const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');
        return `${PREFIX}${wrapper.id}.${b64(wrapped)}.${b64(body)}`;
      } finally {
        dek.fill(0);
      }
    },
    async open(sealed, context) {
      const parts = sealed.slice(PREFIX.length).split('.');
      if (!isSealed(sealed) || parts.length !== 3)
        throw new Error(`the stored secret '${context}' is not a sealed value`);
      const [kekId, wrapped, body] = parts;
      if (kekId !== wrapper.id) {
        throw new Error(
          `the stored secret '${context}' is sealed under KEK ${kekId}, but ${variable} here ` +
            `is KEK ${wrapper.id} (${wrapper.description}): give every instance the same ${variable}`,
        );
      }
      let dek: Uint8Array | undefined;
      try {
        dek = await wrapper.unwrap(Buffer.from(wrapped, 'base64url'), dekAad(context));
        return new TextDecoder().decode(gcmOpen(dek, Buffer.from(body, 'base64url'), enc.encode(context)));
      } catch (e) {
        throw new Error(
          `the stored secret '${context}' does not open under ${variable} (tampered, or moved ` +
            `from another row): ${(e as Error).message}`,
        );
      } finally {
        dek?.fill(0);
      }
    },
  };
}
