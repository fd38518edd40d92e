/**
 * The part of a key ring both services share (authority/keys.ts, gateway/keys/ring.ts):
 * opening stored private keys sealed under the KEK (service-kit/secrets, bound to the key's row),
 * one imported signer per kid, keys held outside the database (a PEM, a file or PKCS#11 key from
 * the environment) beside stored ones, the active key of a purpose, and the JWKS entry a key
 * publishes (spec §4.1), sealing at start and rotation over a `KeyStore` each service implements
 * on its own rows. What else a key change means stays with each service: the authority's leases
 * and root (PROTOCOL.md §11), the gateway's bundle sequence (§12).
 */
import {
  generateKeyPair,
  importSigningKey,
  jwkThumbprint,
  type Alg,
  type KeyPurpose,
  type PublicJwk,
  type PublishedJwk,
  type SigningKey,
} from '../src/index.js';
import { isSealed, type SecretSealer } from './secrets/index.js';
import type { TxEffect } from './tx-effect.js';

/** A stored key as the ring reads it: '' or null `privatePem` for a key held outside the database. */
export interface StoredKey {
  kid: string;
  purpose: string;
  status: 'active' | 'retired';
  privatePem: string | null;
}

/** A new stored key: its private PEM sealed for its row, and the key imported from the clear PEM. */
export interface GeneratedKey {
  kid: string;
  alg: 'EdDSA';
  publicJwk: PublicJwk;
  sealedPem: string;
  signingKey: SigningKey;
}

/** Where a service keeps its keys: the rows the ring reads and the two writes it makes. */
export interface KeyStore<P extends string = string> {
  /** Every stored key, active and retired. */
  list(): Promise<StoredKey[]>;
  /** Replaces a row's private key only while it still holds `from`; whether it did. */
  replacePrivatePem(kid: string, from: string, to: string): Promise<boolean>;
  /**
   * Stores `key` as the active key of `purpose` and retires the active one (it keeps verifying,
   * never signs again), with `effect` in the same transaction.
   */
  insertActive(purpose: P, key: GeneratedKey, effect?: TxEffect<void>): Promise<void>;
}

export interface KeyRingCoreOptions<P extends string = string> {
  sealer: SecretSealer;
  store: KeyStore<P>;
  /** The table keys are stored in: a sealed key opens only in the row it was sealed for (`table:kid`). */
  table: string;
  /** Turns a key imported from a stored PEM into the signer to cache (the gateway signs off the loop). */
  prepare?: (key: SigningKey, pem: string) => SigningKey;
  /** The error for a stored key without a private key that this instance does not hold either. */
  missing: (key: StoredKey) => Error;
}

export interface KeyRingCore<P extends string = string> {
  /** Where the private key of `kid` is sealed (the AEAD context, service-kit/secrets). */
  sealContext(kid: string): string;
  /** Records a key this instance holds outside the database; signerOf answers it for that kid. */
  hold(kid: string, signer: SigningKey): void;
  /** The key held outside the database under `kid`, if this instance holds one. */
  held(kid: string): SigningKey | undefined;
  /** The signer of a stored key: a held key of that kid, else its private key opened (once per kid). */
  signerOf(key: StoredKey): Promise<SigningKey>;
  /**
   * Seals every private key among `rows` still in the clear (a database from before sealing);
   * `replace` is one conditional update (it changes the row only if it still holds `clear`).
   * Returns how many were sealed.
   */
  sealClearKeys(
    rows: StoredKey[],
    replace: (kid: string, clear: string, sealed: string) => Promise<boolean>,
  ): Promise<number>;
  /** A new Ed25519 key, its kid the JWK thumbprint (RFC 7638), its private PEM sealed for its row. */
  generate(): Promise<GeneratedKey>;
  /** sealClearKeys over every stored key, through the store. */
  sealStored(): Promise<number>;
  /** A new stored key made the active one of `purpose` (KeyStore.insertActive); `effect` learns its kid. */
  rotate(purpose: P, effect?: TxEffect<GeneratedKey>): Promise<GeneratedKey>;
}

/** @example const ring = createKeyRingCore({ sealer, table: 'gw_keys', missing: (k) => new Error(k.kid) }) */
export function createKeyRingCore<P extends string>(options: KeyRingCoreOptions<P>): KeyRingCore<P> {
  const { sealer, store } = options;
  const imported = new Map<string, Promise<SigningKey>>();
  const external = new Map<string, SigningKey>();
  const sealContext = (kid: string) => `${options.table}:${kid}`;

  const signerOf = (key: StoredKey): Promise<SigningKey> => {
    const ext = external.get(key.kid);
    if (ext) return Promise.resolve(ext);
    let s = imported.get(key.kid);
    if (!s) {
      const cell = key.privatePem;
      if (!cell) return Promise.reject(options.missing(key));
      s = (async () => {
        const pem = isSealed(cell) ? await sealer.open(cell, sealContext(key.kid)) : cell;
        const k = await importSigningKey(pem);
        return options.prepare ? options.prepare(k, pem) : k;
      })();
      // A failed open is not cached: a later call (after the KEK is fixed) tries again.
      s.catch(() => imported.delete(key.kid));
      imported.set(key.kid, s);
    }
    return s;
  };

  const sealClearKeys: KeyRingCore['sealClearKeys'] = async (rows, replace) => {
    let sealed = 0;
    for (const k of rows) {
      if (!k.privatePem || isSealed(k.privatePem)) continue;
      if (await replace(k.kid, k.privatePem, await sealer.seal(k.privatePem, sealContext(k.kid)))) sealed++;
    }
    return sealed;
  };

  const ring: KeyRingCore<P> = {
    sealContext,
    hold: (kid, signer) => void external.set(kid, signer),
    held: (kid) => external.get(kid),
    signerOf,
    sealClearKeys,
    async sealStored() {
      return sealClearKeys(await store.list(), (kid, from, to) => store.replacePrivatePem(kid, from, to));
    },
    async rotate(purpose, effect) {
      const key = await ring.generate();
      await store.insertActive(purpose, key, effect && ((q) => effect(q, key)));
      return key;
    },
    async generate() {
      const pair = await generateKeyPair({ alg: 'EdDSA' });
      const kid = await jwkThumbprint(pair.publicJwk);
      return {
        kid,
        alg: 'EdDSA',
        publicJwk: pair.publicJwk,
        sealedPem: await sealer.seal(pair.privateKeyPem, sealContext(kid)),
        signingKey: await importSigningKey(pair.privateKeyPem),
      };
    },
  };
  return ring;
}

/** The active key of `purpose` among `rows` (each store keeps one per purpose), optionally narrowed by `where`. */
export function activeKey<R extends { purpose: string; status: string }>(
  rows: readonly R[],
  purpose: R['purpose'],
  where: (row: R) => boolean = () => true,
): R | undefined {
  return rows.find((k) => k.purpose === purpose && k.status === 'active' && where(k));
}

/** The JWKS entry of a key (spec §4.1): its public JWK members, then kid, alg, its one purpose and status. */
export function jwksEntry(key: {
  publicJwk: PublicJwk;
  kid: string;
  alg: Alg;
  purpose: KeyPurpose;
  status?: 'active' | 'retired';
}): PublishedJwk {
  return {
    ...key.publicJwk,
    kid: key.kid,
    alg: key.alg,
    purposes: [key.purpose],
    ...(key.status !== undefined ? { status: key.status } : {}),
  };
}
