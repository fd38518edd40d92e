/**
 * The authority's side of root rotation (PROTOCOL.md §11). The chain lives in the database
 * (store/trust-root-store.ts), so every instance serves the same `GET /trust-root` and signs
 * bundles under the same root version:
 * - version 1 (no statement yet): bundles are signed by the root key itself, as before;
 * - from version 2: bundles are signed by this instance's bundle key (CTL_TRUST_BUNDLE_SIGNING_KEY_PEM
 *   or _FILE), which must be one of the newest statement's `bundleKeys`. The root keys that sign
 *   statements never need to be on the authority: `ctl root rotate` signs offline (or in an HSM)
 *   and an admin publishes the result.
 * A start whose bundle key is not in the newest statement is refused; a statement published by
 * another instance that retires this instance's key stops its bundle signing (503) rather than
 * letting it sign bundles every device that followed the rotation refuses.
 */
import {
  canonicalize,
  importSigningKey,
  jwkThumbprint,
  verifyRootChain,
  type PrivateKeyInput,
  type RootKey,
  type RootStatement,
  type SigningKey,
} from '../src/index.js';
import { HttpError, type Logger, type SqlExecutor, type TxEffect } from '../service-kit/index.js';
import type { KeyRing } from './keys.js';
import type { AuthorityStore } from './store/types.js';

export const BUNDLE_KEY_VAR = 'CTL_TRUST_BUNDLE_SIGNING_KEY_PEM';
export const BUNDLE_KEY_FILE_VAR = 'CTL_TRUST_BUNDLE_SIGNING_KEY_FILE';

export interface BundleSigner {
  kid: string;
  signer: SigningKey;
  rootVersion: number;
}

export interface TrustRoot {
  /** Refuses a start that could not sign bundles under the newest published root version. */
  init(): Promise<void>;
  /** The published chain, version 2 upwards (what devices walk from their pinned root). */
  statements(): Promise<RootStatement[]>;
  /**
   * Publishes the next statement after checking that the stored chain plus it verifies from the
   * pinned root and that it is exactly the next version. The same statement again is `changed: false`.
   */
  publish(
    statement: unknown,
    actor: string,
    effect?: TxEffect<{ rootVersion: number }>,
  ): Promise<{ rootVersion: number; changed: boolean; signsBundles: boolean }>;
  /**
   * The key that signs the next bundle: the root at version 1, else this instance's bundle key if the newest version
   * lists it.
   */
  bundleSigner(): Promise<BundleSigner>;
}

export interface TrustRootOptions {
  store: AuthorityStore;
  keys: KeyRing;
  logger: Logger;
  now: () => number;
  /** This instance's bundle key (a PEM, or a `SigningKey` such as an HSM-held one). */
  bundleSigningKey?: PrivateKeyInput | SigningKey;
  /**
   * The variable the bundle key came from, for errors and logs (default CTL_TRUST_BUNDLE_SIGNING_KEY_PEM; the PKCS#11
   * URI's name for a token key).
   */
  bundleKeyVariable?: string;
}

/** Same key: same thumbprint members. */
const sameKey = (a: { kty: string; crv: string; x: string; y?: string }, b: RootKey) =>
  canonicalize({ kty: a.kty, crv: a.crv, x: a.x, y: a.y ?? null }) ===
  canonicalize({ kty: b.kty, crv: b.crv, x: b.x, y: b.y ?? null });

/**
 * @example const trustRoot = createTrustRoot({ store, keys, logger, now: Date.now, bundleSigningKey: pem }); await
 * trustRoot.init()
 */
export function createTrustRoot(o: TrustRootOptions): TrustRoot {
  const bundleKey =
    o.bundleSigningKey === undefined ? undefined : importSigningKey(o.bundleSigningKey as PrivateKeyInput);
  bundleKey?.catch(() => undefined); // reported by init()
  const keyVar = o.bundleKeyVariable ?? BUNDLE_KEY_VAR;
  /** The last verified chain, by its stored bytes: one walk per change, not per bundle. */
  let walked: { text: string; rootVersion: number; bundleKeys: RootKey[] } | undefined;

  async function pinnedRootPem(): Promise<string> {
    const row = await o.store.activeSigningKey('bundle');
    if (!row) throw new Error('no Trust Bundle root key: call keys.init() first');
    return row.publicPem;
  }

  async function current(): Promise<{ statements: RootStatement[]; rootVersion: number; bundleKeys: RootKey[] }> {
    const rows = await o.store.listRootStatements();
    const text = `[${rows.map((r) => r.statement).join(',')}]`;
    const statements = JSON.parse(text) as RootStatement[];
    if (walked?.text !== text) {
      // What the database holds is verified like anything else a device would be given.
      const r = await verifyRootChain(await pinnedRootPem(), statements);
      if (!r.valid)
        throw new HttpError(
          500,
          'internal',
          `the stored root chain does not verify from the pinned root: ${r.error.code}: ${r.error.message}`,
        );
      walked = { text, rootVersion: r.rootVersion, bundleKeys: r.bundleKeys };
    }
    return { statements, rootVersion: walked.rootVersion, bundleKeys: walked.bundleKeys };
  }

  /** The entry of `bundleKeys` that is this instance's bundle key. */
  async function mine(bundleKeys: RootKey[]): Promise<RootKey | undefined> {
    if (!bundleKey) return undefined;
    const k = await bundleKey;
    return bundleKeys.find((b) => sameKey(k.publicJwk, b));
  }

  return {
    async init() {
      if (bundleKey) {
        try {
          await bundleKey;
        } catch (e) {
          throw new Error(`${keyVar}: not a usable private key (${(e as Error).message})`);
        }
      }
      const c = await current();
      if (c.rootVersion === 1) {
        if (bundleKey)
          o.logger.info(
            { kid: await jwkThumbprint((await bundleKey).publicJwk) },
            `${keyVar} is set; the root signs bundles until a root statement lists this key`,
          );
        return;
      }
      if (!bundleKey) {
        throw new Error(
          `root version ${c.rootVersion} is published on this database: set ${BUNDLE_KEY_VAR} ` +
            `(or ${BUNDLE_KEY_FILE_VAR}, or CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI) to one of ` +
            `its bundleKeys (${c.bundleKeys.map((k) => k.kid).join(', ')})`,
        );
      }
      const entry = await mine(c.bundleKeys);
      if (!entry) {
        const kids = c.bundleKeys.map((k) => k.kid).join(', ');
        throw new Error(
          `${keyVar} is not one of the bundleKeys of root version ${c.rootVersion} (${kids}): ` +
            'devices that follow the chain would refuse its bundles (PROTOCOL.md §11)',
        );
      }
      o.logger.info(
        { kid: entry.kid, rootVersion: c.rootVersion },
        `Trust Bundles signed by the bundle key from ${keyVar}`,
      );
    },

    async statements() {
      return (await current()).statements;
    },

    async publish(input, actor, effect) {
      const c = await current();
      const v = (input as { rootVersion?: unknown } | null)?.rootVersion;
      if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 2 && v <= c.rootVersion) {
        // Publishing again what is already published is a no-op; anything else at that version is not the next link.
        let same = false;
        try {
          same = canonicalize(input) === canonicalize(c.statements[v - 2]);
        } catch {
          /* not JSON: refused below */
        }
        if (same) return { rootVersion: v, changed: false, signsBundles: !!(await mine(c.bundleKeys)) };
        throw new HttpError(
          409,
          'conflict',
          `root version ${v} is already published (the chain is at version ${c.rootVersion}); ` +
            `the next statement is version ${c.rootVersion + 1}`,
        );
      }
      const r = await verifyRootChain(await pinnedRootPem(), [...c.statements, input]);
      if (!r.valid) throw new HttpError(400, r.error.code, r.error.message);
      const stored = canonicalize(input);
      const recorded = effect && ((q: SqlExecutor) => effect(q, { rootVersion: r.rootVersion }));
      if (
        !(await o.store.appendRootStatement(r.rootVersion, stored, new Date(o.now()).toISOString(), actor, recorded))
      ) {
        throw new HttpError(
          409,
          'conflict',
          `root version ${r.rootVersion} was published meanwhile by another request`,
        );
      }
      const signsBundles = !!(await mine(r.bundleKeys));
      o.logger.warn(
        { rootVersion: r.rootVersion, bundleKeys: r.bundleKeys.map((k) => k.kid), signsBundles },
        'root rotated: bundles are signed by the new bundle keys from now on',
      );
      return { rootVersion: r.rootVersion, changed: true, signsBundles };
    },

    async bundleSigner() {
      const c = await current();
      if (c.rootVersion === 1) {
        const root = await o.keys.rootSigner();
        return { kid: root.kid, signer: root.signer, rootVersion: 1 };
      }
      const entry = await mine(c.bundleKeys);
      if (!entry) {
        o.logger.error(
          { rootVersion: c.rootVersion },
          `${keyVar} is not a bundle key of the newest root version: not signing bundles`,
        );
        throw new HttpError(
          503,
          'unavailable',
          `this instance's bundle key is not one of root version ${c.rootVersion}'s bundleKeys: ` +
            `restart it with one of ${c.bundleKeys.map((k) => k.kid).join(', ')} in ${keyVar}`,
        );
      }
      return { kid: entry.kid, signer: await bundleKey!, rootVersion: c.rootVersion };
    },
  };
}
