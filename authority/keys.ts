/**
 * The authority's keys (PROTOCOL.md §3–4): the grant signing key (published in the JWKS,
 * rotated, retired keys published until what they signed expires) and the Trust Bundle root key
 * (never published in the JWKS: devices get it out of band, spec §5).
 *
 * Several instances share one database, and a start never changes the key another one signs
 * with (README "Keys across instances"):
 * - a grant key from the environment is this instance's own: it signs with it and holds a lease
 *   on it in the database, so every instance publishes it while any instance holds it, and
 *   afterwards while a grant it signed lives (a rolling restart onto a new key needs nothing else);
 * - without one, the instance signs with the database's stored (generated) key, re-read at every
 *   grant, which only `rotateGrantKey` changes;
 * - the root key is the database's: a start with another one is refused (it changes only through
 *   a signed root rotation, PROTOCOL.md §11).
 * Keys from the environment are never stored; generated ones are, sealed under the KEK
 * (service-kit/secrets: AES-256-GCM, bound to the key's kid), and one found in the clear (a
 * database from before sealing) is sealed at start. Opening, caching and generating keys, and
 * their JWKS entries, are service-kit/key-ring.ts's; leases and the root's rules are this file's.
 */
import { createPublicKey } from 'node:crypto';
import { canonicalize, jwkThumbprint, type PublicJwk, type PublishedJwk, type SigningKey } from '../src/index.js';
import { HttpError, type Logger, type TxEffect } from '../service-kit/index.js';
import { pemSigner, type Signer } from '../service-kit/signers/index.js';
import type { SecretSealer } from '../service-kit/secrets/index.js';
import { createKeyRingCore, jwksEntry, type KeyRingCore, type KeyStore } from '../service-kit/key-ring.js';
import type { AuthorityStore, KeyPurposeName, PublishedKeyRow, SigningKeyRow } from './store/types.js';

/** How long a grant key from the environment stays held after an instance last renewed it. */
export const GRANT_KEY_LEASE_MS = 5 * 60_000;
/** How often an instance renews it (server.ts): well inside the lease. */
export const GRANT_KEY_RENEW_MS = 60_000;

const GRANT_VAR = 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM';
const GRANT_KID_VAR = 'CTL_POLICY_GRANT_SIGNING_KEY_ID';
const ROOT_VAR = 'CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM';

export interface ActiveSigner {
  kid: string;
  signer: SigningKey;
}

export interface KeyRing {
  /**
   * Ensures both keys (environment, stored, or generated now and stored) and logs which; refuses
   * a start that would change the database's root, or that could not sign (see the module comment).
   */
  init(): Promise<void>;
  /**
   * The grant key this instance signs with: its own from the environment, else the database's stored key (re-read each
   * call).
   */
  grantSigner(): Promise<ActiveSigner>;
  /** The root key that signs Trust Bundles. */
  rootSigner(): Promise<ActiveSigner & { publicKeyPem: string }>;
  /**
   * New stored grant key; the previous stored one is retired (published while its grants live). Keys from the
   * environment are untouched.
   */
  /** Activates a new stored grant key; `effect` (the audit entry) commits with the activation. */
  rotateGrantKey(effect?: TxEffect<{ kid: string; retired: string[] }>): Promise<{ kid: string; retired: string[] }>;
  /** JWKS entries: see grantKeysFrom. */
  publishedGrantKeys(nowMs: number): Promise<PublishedJwk[]>;
  /** Renews the lease on this instance's grant key from the environment (a no-op without one). */
  renewLease(): Promise<void>;
}

export interface KeyRingOptions {
  store: AuthorityStore;
  logger: Logger;
  now: () => number;
  /**
   * This instance's grant key from its environment (authority/signers.ts: a PEM, a file or a
   * PKCS#11 key), with the variable it came from for messages. `grantSigningKeyPem` is the same
   * as a PEM signer.
   */
  grantSigner?: { signer: Signer; variable: string };
  grantSigningKeyPem?: string;
  grantSigningKeyId?: string;
  /** The Trust Bundle root key from the environment, likewise; `rootSigningKeyPem` as a PEM signer. */
  rootSigner?: { signer: Signer; variable: string };
  rootSigningKeyPem?: string;
  /** The root has been rotated (PROTOCOL.md §11): its version-1 private key is no longer needed to sign bundles. */
  rootPrivateKeyOptional?: boolean;
  /** Seals the private keys this ring stores (authority/signers.ts openAuthorityKek). */
  sealer: SecretSealer;
}

/**
 * Whether an instance may sign with `k` at `nowMs`: the active stored key, or a key from an
 * environment whose lease an instance renewed within GRANT_KEY_LEASE_MS.
 */
function held(k: PublishedKeyRow, nowMs: number): boolean {
  if (k.status !== 'active') return false;
  return k.source === 'generated' || (k.lastSeenMs !== null && k.lastSeenMs > nowMs - GRANT_KEY_LEASE_MS);
}

/**
 * The published grant keys among `rows` (store.listSigningKeys()) at `nowMs`: what every instance
 * on the database publishes, in JWKS and bundles alike. A key is published while it is held
 * (`status: 'active'`) and, after, while a grant it signed has not expired (`'retired'`).
 */
export function grantKeysFrom(rows: PublishedKeyRow[], nowMs: number): PublishedJwk[] {
  return rows
    .filter(
      (k) => k.purpose === 'grant' && (held(k, nowMs) || (k.lastGrantExpiryMs !== null && k.lastGrantExpiryMs > nowMs)),
    )
    .map((k) =>
      jwksEntry({
        publicJwk: JSON.parse(k.publicJwk) as PublicJwk,
        kid: k.kid,
        alg: k.alg,
        purpose: 'grant',
        status: held(k, nowMs) ? 'active' : 'retired',
      }),
    );
}

/** Two public JWKs (JSON text) are the same key: same members, whatever their order. */
function samePublicKey(a: string, b: string): boolean {
  return canonicalize(JSON.parse(a)) === canonicalize(JSON.parse(b));
}

/** The row of a key: its public half always; its private PEM only for a generated key. */
async function rowFor(
  purpose: KeyPurposeName,
  signer: SigningKey,
  source: 'generated' | 'env',
  at: string,
  kid?: string,
  privateKeyPem?: string,
): Promise<SigningKeyRow> {
  const publicJwk = signer.publicJwk;
  const publicKeyPem = createPublicKey({ key: { ...publicJwk }, format: 'jwk' })
    .export({ type: 'spki', format: 'pem' })
    .toString();
  return {
    kid: kid ?? (await jwkThumbprint(publicJwk)),
    purpose,
    alg: signer.alg,
    status: 'retired',
    publicJwk: JSON.stringify(publicJwk),
    publicPem: publicKeyPem,
    privatePem: source === 'generated' ? privateKeyPem! : null,
    source,
    createdAt: at,
    retiredAt: null,
  };
}

/** A new stored key; its private key is sealed for its row, so a sealed value moved to another row does not open. */
async function generatedRow(purpose: KeyPurposeName, at: string, ring: KeyRingCore): Promise<SigningKeyRow> {
  const k = await ring.generate();
  return rowFor(purpose, k.signingKey, 'generated', at, k.kid, k.sealedPem);
}

/** @example const keys = createKeyRing({ store, logger, now: Date.now }); await keys.init() */
export function createKeyRing(options: KeyRingOptions): KeyRing {
  const { store, logger } = options;
  const iso = () => new Date(options.now()).toISOString();
  const keyStore: KeyStore<KeyPurposeName> = {
    list: () => store.listSigningKeys(),
    replacePrivatePem: (kid, from, to) => store.replacePrivatePem(kid, from, to),
    async insertActive(purpose, key, effect) {
      const row = await rowFor(purpose, key.signingKey, 'generated', iso(), key.kid, key.sealedPem);
      // Stored inactive first (harmless if the activation never comes), then activated and audited together.
      await store.putSigningKey(row);
      await store.activateSigningKey(row.kid, purpose, iso(), effect);
    },
  };
  const ring = createKeyRingCore({
    sealer: options.sealer,
    store: keyStore,
    table: 'signing_keys',
    missing: (k) => new Error(`the ${k.purpose} key '${k.kid}' has no private key here`),
  });
  /** This instance's keys from the environment, once init() checked them against the database. */
  let envGrant: ActiveSigner | undefined;
  const grantEnv =
    options.grantSigner ??
    (options.grantSigningKeyPem ? { pem: options.grantSigningKeyPem, variable: GRANT_VAR } : undefined);
  const rootEnv =
    options.rootSigner ??
    (options.rootSigningKeyPem ? { pem: options.rootSigningKeyPem, variable: ROOT_VAR } : undefined);
  const signerOf = async (e: { signer: Signer } | { pem: string; variable: string }): Promise<Signer> =>
    'signer' in e ? e.signer : pemSigner(e.pem, e.variable);

  const storedSigner = (row: SigningKeyRow): Promise<SigningKey> => ring.signerOf(row);
  const generated = (purpose: KeyPurposeName) => generatedRow(purpose, iso(), ring);

  /**
   * Seals every stored private key still in the clear (a database from before sealing); one conditional UPDATE each.
   */
  async function sealStoredKeys(): Promise<void> {
    const sealed = await ring.sealStored();
    if (sealed)
      logger.warn(
        { sealed, kek: options.sealer.kekId },
        'stored private keys found in the clear were sealed under the KEK',
      );
    // Every sealed key must open here: a KEK other than the one they were sealed under stops the start.
    for (const k of await store.listSigningKeys()) {
      if (k.privatePem && k.status === 'active') await storedSigner(k);
    }
  }

  /** The grant key from the environment: stored (public half) under its kid, and held by this instance. */
  async function holdEnvGrantKey(signer: Signer, variable: string, kid: string | undefined): Promise<void> {
    const row: SigningKeyRow = { ...(await rowFor('grant', signer, 'env', iso(), kid)), status: 'active' };
    if (!(await store.putSigningKey(row))) {
      // The kid is already stored: it must name this very key, or grants signed now would be
      // checked against the old public key (a kid never changes its key).
      const stored = await store.getSigningKey(row.kid);
      if (stored && (stored.purpose !== 'grant' || !samePublicKey(stored.publicJwk, row.publicJwk))) {
        const named = kid !== undefined ? `${GRANT_KID_VAR}='${row.kid}'` : `kid '${row.kid}'`;
        throw new Error(
          `${variable} does not match the ${stored.purpose} key already stored as ${named}: ` +
            'a kid must never change its key. ' +
            (`Either restore the previous ${variable}, or give the new key a new ${GRANT_KID_VAR} ` +
              '(the old key stays published while grants it signed live).'),
        );
      }
    }
    await store.holdSigningKey(row.kid, options.now());
    envGrant = { kid: row.kid, signer };
    ring.hold(row.kid, signer);
    logger.info(
      { kid: row.kid, purpose: 'grant', custody: signer.custody, key: signer.description },
      `grant signing key from ${variable}`,
    );
  }

  /** No grant key from the environment: the database's stored key, generated on a first start. */
  async function useStoredGrantKey(): Promise<void> {
    if (!(await store.activeSigningKey('grant', 'generated'))) {
      // A database whose grant keys come from instances' environments is a production one: a
      // generated key here would be a development key signing production grants.
      const fromEnv = (await store.listSigningKeys()).filter((k) => k.purpose === 'grant' && k.source === 'env');
      if (fromEnv.length > 0) {
        const uriVar = GRANT_VAR.replace('_PRIVATE_KEY_PEM', '_KEY_PKCS11_URI');
        const kids = fromEnv
          .slice(-3)
          .map((k) => `'${k.kid}'`)
          .join(', ');
        const more = fromEnv.length > 3 ? ', …' : '';
        throw new Error(
          `${GRANT_VAR} (or ${uriVar}) is not set, but the grant keys on this database come from it ` +
            `(kid ${kids}${more}): set it here too.`,
        );
      }
    }
    const { row, created } = await store.ensureActiveSigningKey('grant', () => generated('grant'), 'generated');
    if (created) {
      logger.warn(
        { kid: row.kid, purpose: 'grant', database: store.description },
        `no ${GRANT_VAR}: generated a development grant signing key and stored it in the database ` +
          `(set ${GRANT_VAR} in production)`,
      );
    } else {
      logger.info({ kid: row.kid, purpose: 'grant', source: row.source }, 'grant signing key loaded from the database');
    }
  }

  /** The database's root, or this one on a first start; never another one (PROTOCOL.md §11). */
  async function setUpRoot(env: { signer: Signer; variable: string } | undefined): Promise<void> {
    const mine = env ? { ...(await rowFor('bundle', env.signer, 'env', iso())), status: 'active' as const } : undefined;
    const variable = env?.variable ?? ROOT_VAR;
    const { row, created } = await store.ensureActiveSigningKey('bundle', async () => mine ?? generated('bundle'));
    if (mine && !samePublicKey(row.publicJwk, mine.publicJwk)) {
      throw new Error(
        `${variable} is not the Trust Bundle root key stored in the database (kid '${row.kid}'), ` +
          `which devices pin: restore the previous ${variable}; the root changes only by a signed ` +
          'root rotation (PROTOCOL.md §11).',
      );
    }
    if (!mine && !row.privatePem && !options.rootPrivateKeyOptional) {
      throw new Error(
        `${ROOT_VAR} (or ${ROOT_VAR.replace('_PRIVATE_KEY_PEM', '_KEY_PKCS11_URI')}) is not ` +
          `set, but the Trust Bundle root key on this database (kid '${row.kid}') comes from ` +
          'it: set it here too.',
      );
    }
    // Held beside the stored keys: rootSigner() signs with it while it is the database's root.
    if (mine) ring.hold(row.kid, env!.signer);
    if (created && !mine) {
      logger.warn(
        { kid: row.kid, purpose: 'bundle', database: store.description },
        `no ${ROOT_VAR}: generated a development Trust Bundle root key and stored it in the ` +
          `database (set ${ROOT_VAR} in production)`,
      );
    } else {
      logger.info(
        {
          kid: row.kid,
          purpose: 'bundle',
          source: row.source,
          ...(env ? { custody: env.signer.custody, key: env.signer.description } : {}),
        },
        mine ? `Trust Bundle root key from ${variable}` : 'Trust Bundle root key loaded from the database',
      );
    }
  }

  return {
    async init() {
      await sealStoredKeys();
      if (grantEnv) await holdEnvGrantKey(await signerOf(grantEnv), grantEnv.variable, options.grantSigningKeyId);
      else await useStoredGrantKey();
      await setUpRoot(rootEnv && { signer: await signerOf(rootEnv), variable: rootEnv.variable });
    },
    async grantSigner() {
      if (envGrant) return envGrant;
      const row = await store.activeSigningKey('grant', 'generated');
      if (!row) throw new Error('no stored grant key: call keys.init() first');
      return { kid: row.kid, signer: await storedSigner(row) };
    },
    async rootSigner() {
      const row = await store.activeSigningKey('bundle');
      if (!row) throw new Error('no root key: call keys.init() first');
      return { kid: row.kid, signer: await storedSigner(row), publicKeyPem: row.publicPem };
    },
    async rotateGrantKey(effect) {
      // Decided by the database, so every instance answers alike: only the stored key rotates.
      const before = await store.activeSigningKey('grant', 'generated');
      if (!before) {
        throw new HttpError(
          409,
          'conflict',
          `the grant keys come from ${GRANT_VAR}: rotate by restarting the instances one by ` +
            `one with a new key and a new ${GRANT_KID_VAR}`,
        );
      }
      const retired = [before.kid];
      const key = await ring.rotate('grant', effect && ((q, k) => effect(q, { kid: k.kid, retired })));
      const result = { kid: key.kid, retired };
      logger.info(result, 'grant signing key rotated');
      return result;
    },
    async publishedGrantKeys(nowMs) {
      return grantKeysFrom(await store.listSigningKeys(), nowMs);
    },
    async renewLease() {
      if (envGrant) await store.holdSigningKey(envGrant.kid, options.now());
    },
  };
}
