/**
 * The authority's signers from its configuration: the grant key, the Trust Bundle root key and
 * the bundle key that signs bundles once the root is rotated (PROTOCOL.md §11; trust-root.ts),
 * each from a PKCS#11 token, a PEM file or a PEM in the environment (service-kit/signers), or
 * none (the database's generated development key, keys.ts). A key that is configured but cannot
 * be opened stops the start with one line naming its variable: never a fall-back.
 */
import { dirname, join } from 'node:path';
import { signerFromEnv, type EnvSigner } from '../service-kit/signers/index.js';
import { kekFromEnv, type KekSource } from '../service-kit/secrets/index.js';
import type { AuthorityConfig } from './config.js';

export interface AuthoritySigners {
  grant?: EnvSigner;
  root?: EnvSigner;
  /** The bundle key from CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI (its PEM forms stay in config.bundleSigningKeyPem). */
  bundle?: EnvSigner;
  /** Closes the signers' token sessions. */
  close(): Promise<void>;
}

/**
 * The KEK that seals the private keys the authority stores (service-kit/secrets): CTL_AUTHORITY_KEK,
 * CTL_AUTHORITY_KEK_PKCS11_URI, or the development file `authority.kek` beside the SQLite database
 * (./data/authority.kek for PostgreSQL: there, set the variable, the same on every instance).
 * @example const { sealer } = await openAuthorityKek(readAuthorityConfig())
 */
export async function openAuthorityKek(config: AuthorityConfig): Promise<KekSource & { devFile: string }> {
  const sqlite = /^sqlite:(.+)$/.exec(config.databaseUrl);
  const devFile =
    sqlite && sqlite[1] !== ':memory:' ? join(dirname(sqlite[1]), 'authority.kek') : join('data', 'authority.kek');
  const env = {
    CTL_AUTHORITY_KEK: config.kek,
    CTL_AUTHORITY_KEK_PKCS11_URI: config.kekPkcs11Uri,
    CTL_PKCS11_MODULE: config.pkcs11Module,
  };
  return { ...(await kekFromEnv(env, 'CTL_AUTHORITY_KEK', devFile)), devFile };
}

/**
 * @example const s = await openAuthoritySigners(readAuthorityConfig()); createKeyRing({ ..., grantSigner: s.grant,
 * rootSigner: s.root })
 */
export async function openAuthoritySigners(config: AuthorityConfig): Promise<AuthoritySigners> {
  const env = {
    CTL_PKCS11_MODULE: config.pkcs11Module,
    CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM: config.grantSigningKeyPem,
    CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI: config.grantSigningKeyPkcs11Uri,
    CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_FILE: config.grantSigningKeyFile,
    CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: config.rootSigningKeyPem,
    CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI: config.rootSigningKeyPkcs11Uri,
    CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_FILE: config.rootSigningKeyFile,
  };
  const grant = await signerFromEnv(env, 'CTL_POLICY_GRANT_SIGNING');
  let root: EnvSigner | undefined;
  let bundle: EnvSigner | undefined;
  try {
    root = await signerFromEnv(env, 'CTL_TRUST_BUNDLE_ROOT');
    // Only the URI goes through signerFromEnv: the PEM and file forms keep their names
    // (CTL_TRUST_BUNDLE_SIGNING_KEY_PEM / _FILE, read by config.ts, which refuses two sources).
    bundle = await signerFromEnv(
      {
        CTL_PKCS11_MODULE: config.pkcs11Module,
        CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI: config.bundleSigningKeyPkcs11Uri,
      },
      'CTL_TRUST_BUNDLE_SIGNING',
    );
  } catch (e) {
    await grant?.signer.close();
    await root?.signer.close();
    throw e;
  }
  return {
    grant,
    root,
    bundle,
    async close() {
      await grant?.signer.close();
      await root?.signer.close();
      await bundle?.signer.close();
    },
  };
}
