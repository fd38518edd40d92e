/**
 * The gateway's own key set: one active Ed25519 key per purpose (`grant` signs the
 * internal PolicyGrants, `receipt` signs receipts, `bundle` is the root of its Trust Bundle),
 * kept in the store so every instance on one database signs with the same keys. Rotation
 * retires the active key (it keeps verifying, never signs again) and makes a new one.
 * Instances re-read the set every few seconds, so a rotation reaches them all shortly.
 *
 * Custody: a stored private key is sealed under the gateway's KEK (service-kit/secrets, bound to
 * its kid; keys found in the clear are sealed at start). A key held outside the database (the
 * receipt key from CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI, a file or a PEM) is recorded by its public
 * half only (`custody` 'pkcs11' or 'file', `private_pem` empty) and made the active key of its
 * purpose at start; every instance on the database must then hold it (one HSM key, one URI).
 * Opening, caching and generating keys, and their JWKS entries, are service-kit/key-ring.ts's;
 * the rows (gw_keys, gw_secrets) and the bundle sequence a key change raises are store.ts's.
 */
import { jwkThumbprint, type Alg, type PublicJwk, type PublishedJwk, type SigningKey } from '../../src/index.js';
import { HttpError, type SqlDatabase } from '../../service-kit/index.js';
import { isSealed, type SecretSealer } from '../../service-kit/secrets/index.js';
import { signingOffThread, ed25519KeyObject, type Signer } from '../../service-kit/signers/index.js';
import { activeKey, createKeyRingCore, jwksEntry, type KeyStore } from '../../service-kit/key-ring.js';
import {
  activateExternalKey,
  allKeys,
  insertActiveKey,
  insertFirstKey,
  insertSecretOnce,
  listStoredKeys,
  replacePrivatePem,
  replaceSecret,
  secretValue,
  type GatewayKey,
  type GatewayKeyPurpose,
} from './store.js';

export type { GatewayKey, GatewayKeyPurpose } from './store.js';
export const KEY_PURPOSES: GatewayKeyPurpose[] = ['grant', 'receipt', 'bundle'];

/** A key this instance holds outside the database, with the variable it came from. */
export interface ExternalKey {
  signer: Signer;
  variable: string;
}

export interface KeyRingOptions {
  /** Seals stored private keys; required for keys the gateway generates. */
  sealer: SecretSealer;
  /** Keys held outside the database, by purpose (today: `receipt`). */
  external?: Partial<Record<GatewayKeyPurpose, ExternalKey>>;
}

export interface KeyRing {
  /** The active key of a purpose, imported and ready to sign. */
  active(
    purpose: GatewayKeyPurpose,
  ): Promise<{ kid: string; alg: Alg; signingKey: SigningKey; publicJwk: GatewayKey['publicJwk'] }>;
  /** Every key, active and retired. */
  all(): Promise<GatewayKey[]>;
  /** The JWKS (spec §4.1): the grant and receipt keys, active and retired; the bundle root is published apart. */
  published(): Promise<PublishedJwk[]>;
  /** Retires the active key of `purpose` and makes a new one; returns the new kid. */
  rotate(purpose: GatewayKeyPurpose): Promise<string>;
  /** The signer of a stored key row (its sealed private key, or this instance's external key of that kid). */
  signerOf(kid: string, privatePem: string): Promise<SigningKey>;
  /**
   * Seals stored keys still in the clear, records and activates external keys, checks every active key can sign here.
   */
  init(): Promise<void>;
}

export function createKeyRing(db: SqlDatabase, now: () => number, options: KeyRingOptions, refreshMs = 5000): KeyRing {
  let cache: { at: number; keys: GatewayKey[] } | undefined;
  /** This instance's keys held outside the database, by kid (their signers are held by the ring too). */
  const external = new Map<string, ExternalKey & { purpose: GatewayKeyPurpose }>();
  /** gw_keys for the shared ring; a key change raises the bundle sequence with it (PROTOCOL.md §12). */
  const keyStore: KeyStore<GatewayKeyPurpose> = {
    list: () => listStoredKeys(db),
    replacePrivatePem: (kid, from, to) => replacePrivatePem(db, kid, from, to),
    async insertActive(purpose, k, effect) {
      let after: (() => void) | undefined;
      await db.tx(async (t) => {
        await insertActiveKey(t, purpose, k, now());
        if (effect) after = (await effect(t)) || undefined;
      });
      if (after) after();
    },
  };
  const ring = createKeyRingCore({
    sealer: options.sealer,
    store: keyStore,
    table: 'gw_keys',
    // Signs on the thread pool (service-kit/signers/off-thread.ts): one receipt per paid request.
    prepare: (key, pem) => {
      if (key.alg !== 'EdDSA') return key;
      try {
        return signingOffThread(key, ed25519KeyObject(pem));
      } catch {
        return key; // a stored form node:crypto does not read: signed on the loop as before
      }
    },
    missing: ({ kid }) => {
      const purpose = cache?.keys.find((k) => k.kid === kid)?.purpose ?? 'receipt';
      return new Error(
        `the ${purpose} key '${kid}' is held outside the database and not by this instance: ` +
          `set CTL_GATEWAY_${purpose.toUpperCase()}_KEY_PKCS11_URI (or _PRIVATE_KEY_FILE) here too`,
      );
    },
  });

  const signerOf = (kid: string, privatePem: string): Promise<SigningKey> =>
    ring.signerOf({ kid, purpose: '', status: 'active', privatePem });

  async function load(force = false): Promise<GatewayKey[]> {
    if (!force && cache && now() - cache.at < refreshMs) return cache.keys;
    let keys = await allKeys(db);
    const missing = KEY_PURPOSES.filter((p) => !keys.some((k) => k.purpose === p && k.status === 'active'));
    if (missing.length) {
      // Two instances may race here: the partial unique index keeps one active key per purpose.
      for (const p of missing) await insertFirstKey(db, p, await ring.generate(), now());
      keys = await allKeys(db);
    }
    cache = { at: now(), keys };
    return keys;
  }

  /** Private keys in the clear (a database from before sealing): sealed, one conditional UPDATE each. */
  async function sealStoredKeys(): Promise<void> {
    await ring.sealStored();
    cache = undefined;
  }

  /**
   * This instance's key of `purpose` from outside the database: recorded by its public half and
   * made the active key of its purpose (the previous one retired: it keeps verifying), with the
   * bundle sequence raised as for any key change (PROTOCOL.md §12).
   */
  async function holdExternal(purpose: GatewayKeyPurpose, ext: ExternalKey): Promise<void> {
    const kid = await jwkThumbprint(ext.signer.publicJwk);
    external.set(kid, { ...ext, purpose });
    ring.hold(kid, ext.signer);
    await activateExternalKey(
      db,
      { kid, purpose, alg: ext.signer.alg, publicJwk: ext.signer.publicJwk, custody: ext.signer.custody },
      now(),
      (other) => new Error(`${ext.variable}: this key is already the gateway's ${other} key; a key has one purpose`),
    );
    cache = undefined;
  }

  return {
    async active(purpose) {
      const key = activeKey(await load(), purpose);
      if (!key) throw new Error(`no active ${purpose} key`);
      return {
        kid: key.kid,
        alg: key.alg,
        signingKey: await signerOf(key.kid, key.privatePem),
        publicJwk: key.publicJwk,
      };
    },
    all: () => load(),
    async published() {
      return (await load())
        .filter((k) => k.purpose !== 'bundle')
        .map((k) =>
          jwksEntry({ publicJwk: k.publicJwk, kid: k.kid, alg: k.alg, purpose: k.purpose, status: k.status }),
        );
    },
    signerOf,
    async init() {
      await sealStoredKeys();
      // External keys first, so a first start does not generate a stored key only to retire it.
      for (const [purpose, ext] of Object.entries(options.external ?? {}) as [GatewayKeyPurpose, ExternalKey][])
        await holdExternal(purpose, ext);
      // Every active key must sign here: a KEK other than the database's, or an external key this
      // instance lacks, stops the start rather than the first payment.
      for (const k of (await load(true)).filter((k) => k.status === 'active')) await signerOf(k.kid, k.privatePem);
    },
    async rotate(purpose) {
      const held = [...external.values()].find((e) => e.purpose === purpose);
      if (held) {
        throw new HttpError(
          409,
          'conflict',
          `the ${purpose} key is held outside the database (${held.variable}): rotate it by ` +
            `giving every instance the new key's ${held.variable}`,
        );
      }
      const k = await ring.rotate(purpose);
      await load(true);
      return k.kid;
    },
  };
}

/**
 * A shared secret (continuation HMAC, the session-key master, the EVM key), made once per database
 * whoever starts first, stored sealed under the KEK; one stored in the clear is sealed here.
 */
export async function sharedSecret(
  db: SqlDatabase,
  name: string,
  make: () => string,
  sealer: SecretSealer,
): Promise<string> {
  const context = `gw_secrets:${name}`;
  await insertSecretOnce(db, name, await sealer.seal(make(), context));
  const value = await secretValue(db, name);
  if (isSealed(value)) return sealer.open(value, context);
  await replaceSecret(db, name, value, await sealer.seal(value, context));
  return value;
}
