/**
 * The authority's keys (PROTOCOL.md §3–4): the grant signing key (published in the JWKS,
 * rotated, retired keys published until what they signed expires) and the Trust Bundle root key
 * (never published in the JWKS: devices get it out of band, spec §5). Keys from the environment
 * are used as given and never stored; otherwise a key is generated on first start and stored
 * in the database, so every process on that database signs with the same key.
 */
import { createPublicKey } from 'node:crypto';
import { canonicalize, generateKeyPair, importSigningKey, jwkThumbprint, type PublishedJwk, type SigningKey } from '../src/index.js';
import { HttpError, type Logger } from '../service-kit/index.js';
import type { AuthorityStore, KeyPurposeName, PublishedKeyRow, SigningKeyRow } from './store/types.js';

export interface ActiveSigner {
  kid: string;
  signer: SigningKey;
}

export interface KeyRing {
  /** Ensures both keys exist (environment, stored, or generated now and stored) and logs which. */
  init(): Promise<void>;
  /** The active grant key, re-read from the store each call (another process may have rotated). */
  grantSigner(): Promise<ActiveSigner>;
  /** The root key that signs Trust Bundles. */
  rootSigner(): Promise<ActiveSigner & { publicKeyPem: string }>;
  /** New grant key; the previous one is retired (published while its grants live). */
  rotateGrantKey(): Promise<{ kid: string; retired: string[] }>;
  /** JWKS entries: the active grant key and retired ones whose grants have not all expired. */
  publishedGrantKeys(nowMs: number): Promise<PublishedJwk[]>;
}

export interface KeyRingOptions {
  store: AuthorityStore;
  logger: Logger;
  now: () => number;
  grantSigningKeyPem?: string;
  grantSigningKeyId?: string;
  rootSigningKeyPem?: string;
}

/** The published grant keys among `rows` (store.listSigningKeys()) at `nowMs`: what publishedGrantKeys answers. */
export function grantKeysFrom(rows: PublishedKeyRow[], nowMs: number): PublishedJwk[] {
  return rows
    .filter((k) => k.purpose === 'grant' && (k.status === 'active' || (k.lastGrantExpiryMs !== null && k.lastGrantExpiryMs > nowMs)))
    .map((k) => ({ ...(JSON.parse(k.publicJwk) as object), kid: k.kid, alg: k.alg, purposes: ['grant'], status: k.status }) as PublishedJwk);
}

/** Two public JWKs (JSON text) are the same key: same members, whatever their order. */
function samePublicKey(a: string, b: string): boolean {
  return canonicalize(JSON.parse(a)) === canonicalize(JSON.parse(b));
}

async function rowFor(purpose: KeyPurposeName, privateKeyPem: string, source: 'generated' | 'env', at: string, kid?: string): Promise<SigningKeyRow> {
  const signer = await importSigningKey(privateKeyPem);
  const publicJwk = signer.publicJwk;
  const publicKeyPem = createPublicKey(privateKeyPem).export({ type: 'spki', format: 'pem' }).toString();
  return {
    kid: kid ?? (await jwkThumbprint(publicJwk)),
    purpose,
    alg: signer.alg,
    status: 'retired',
    publicJwk: JSON.stringify(publicJwk),
    publicPem: publicKeyPem,
    privatePem: source === 'generated' ? privateKeyPem : null,
    source,
    createdAt: at,
    retiredAt: null,
  };
}

async function generatedRow(purpose: KeyPurposeName, at: string): Promise<SigningKeyRow> {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  return rowFor(purpose, pair.privateKeyPem, 'generated', at);
}

/** @example const keys = createKeyRing({ store, logger, now: Date.now }); await keys.init() */
export function createKeyRing(options: KeyRingOptions): KeyRing {
  const { store, logger } = options;
  const iso = () => new Date(options.now()).toISOString();
  const imported = new Map<string, Promise<SigningKey>>();
  const envPem: Partial<Record<KeyPurposeName, { kid: string; pem: string }>> = {};

  const signerFor = (row: SigningKeyRow): Promise<SigningKey> => {
    let s = imported.get(row.kid);
    if (!s) {
      const pem = row.privatePem ?? (envPem[row.purpose]?.kid === row.kid ? envPem[row.purpose]!.pem : undefined);
      if (!pem) throw new Error(`the active ${row.purpose} key '${row.kid}' comes from another process's environment; configure the same key here`);
      s = importSigningKey(pem);
      imported.set(row.kid, s);
    }
    return s;
  };

  async function setUp(purpose: KeyPurposeName, pem: string | undefined, kid: string | undefined, what: string, variable: string, kidVariable?: string) {
    if (pem) {
      const row = await rowFor(purpose, pem, 'env', iso(), kid);
      if (!(await store.putSigningKey(row))) {
        // The kid is already stored: it must name this very key, or grants signed now would be
        // checked against the old public key (a kid never changes its key).
        const stored = await store.getSigningKey(row.kid);
        if (stored && (stored.purpose !== purpose || !samePublicKey(stored.publicJwk, row.publicJwk))) {
          const named = kidVariable && kid !== undefined ? `${kidVariable}='${row.kid}'` : `kid '${row.kid}'`;
          throw new Error(
            `${variable} does not match the ${stored.purpose} key already stored as ${named}: a kid must never change its key. ` +
              (kidVariable
                ? `Either restore the previous ${variable}, or give the new key a new ${kidVariable} (the old key stays published while grants it signed live).`
                : `Restore the previous ${variable}.`),
          );
        }
      }
      envPem[purpose] = { kid: row.kid, pem };
      await store.activateSigningKey(row.kid, purpose, iso());
      logger.info({ kid: row.kid, purpose }, `${what} from ${variable}`);
      return;
    }
    const { row, created } = await store.ensureActiveSigningKey(purpose, () => generatedRow(purpose, iso()));
    if (created) {
      logger.warn({ kid: row.kid, purpose, database: store.description },
        `no ${variable}: generated a development ${what} and stored it in the database (set ${variable} in production)`);
    } else {
      logger.info({ kid: row.kid, purpose, source: row.source }, `${what} loaded from the database`);
    }
  }

  const active = async (purpose: KeyPurposeName) => {
    const row = await store.activeSigningKey(purpose);
    if (!row) throw new Error(`no active ${purpose} key: call keys.init() first`);
    return row;
  };

  return {
    async init() {
      await setUp('grant', options.grantSigningKeyPem, options.grantSigningKeyId, 'grant signing key', 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM', 'CTL_POLICY_GRANT_SIGNING_KEY_ID');
      await setUp('bundle', options.rootSigningKeyPem, undefined, 'Trust Bundle root key', 'CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM');
    },
    async grantSigner() {
      const row = await active('grant');
      return { kid: row.kid, signer: await signerFor(row) };
    },
    async rootSigner() {
      const row = await active('bundle');
      return { kid: row.kid, signer: await signerFor(row), publicKeyPem: row.publicPem };
    },
    async rotateGrantKey() {
      if (options.grantSigningKeyPem) {
        throw new HttpError(409, 'conflict', 'the grant key comes from CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM: rotate it there');
      }
      const before = (await store.listSigningKeys()).filter((k) => k.purpose === 'grant' && k.status === 'active').map((k) => k.kid);
      const row = await generatedRow('grant', iso());
      await store.putSigningKey(row);
      await store.activateSigningKey(row.kid, 'grant', iso());
      logger.info({ kid: row.kid, retired: before }, 'grant signing key rotated');
      return { kid: row.kid, retired: before };
    },
    async publishedGrantKeys(nowMs) {
      return grantKeysFrom(await store.listSigningKeys(), nowMs);
    },
  };
}
