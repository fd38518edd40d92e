/**
 * Where the gateway's secrets are kept (service-kit/secrets, service-kit/signers): the KEK that
 * seals what it stores (CTL_GATEWAY_KEK, CTL_GATEWAY_KEK_PKCS11_URI, or a development KEK in a
 * 0600 file `gateway.kek` beside the SQLite database, ./data/gateway.kek on PostgreSQL), and the
 * keys held outside the database: the receipt key (CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI,
 * _PRIVATE_KEY_FILE or _PRIVATE_KEY_PEM, with CTL_PKCS11_MODULE), and likewise the internal
 * grant key (CTL_GATEWAY_GRANT_…) and the Trust Bundle root (CTL_GATEWAY_BUNDLE_…).
 */
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { aesKeyWrapper, createSealer, kekFromEnv, type KekSource } from '../../service-kit/secrets/index.js';
import { signerFromEnv, type EnvSigner } from '../../service-kit/signers/index.js';
import { KEY_PURPOSES, type GatewayKeyPurpose } from './ring.js';

type Env = Record<string, string | undefined>;

/** The development KEK file for a database URL (a `sqlite:` file: beside it; otherwise ./data). */
export function devKekFile(databaseDescription: string): string | undefined {
  const m = /^sqlite:(.+)$/.exec(databaseDescription);
  if (m) return m[1] === ':memory:' ? undefined : join(dirname(m[1]), 'gateway.kek');
  return join('data', 'gateway.kek');
}

/**
 * The gateway's KEK from `env`, else the development file for the database (an in-memory
 * database gets a KEK that lives as long as it does).
 * @example const kek = await gatewayKek(process.env, db.description)
 */
export async function gatewayKek(env: Env, databaseDescription: string): Promise<KekSource> {
  const file = devKekFile(databaseDescription);
  if (!file && !env['CTL_GATEWAY_KEK'] && !env['CTL_GATEWAY_KEK_PKCS11_URI']) {
    return {
      sealer: createSealer(aesKeyWrapper(randomBytes(32), 'in-memory KEK'), 'CTL_GATEWAY_KEK'),
      source: 'dev-file',
      close: async () => {},
    };
  }
  return kekFromEnv(env, 'CTL_GATEWAY_KEK', file ?? join('data', 'gateway.kek'));
}

/** The receipt key held outside the database, or undefined (then it is generated and stored sealed). */
export function receiptSignerFromEnv(env: Env): Promise<EnvSigner | undefined> {
  return signerFromEnv(env, 'CTL_GATEWAY_RECEIPT');
}

/**
 * Every gateway key held outside the database, by purpose (`CTL_GATEWAY_<PURPOSE>_KEY_PKCS11_URI`
 * …); a purpose without a variable is generated and stored sealed. One failing closes the others.
 * @example const keys = await externalKeysFromEnv(process.env) // { receipt?: { signer, variable }, … }
 */
export async function externalKeysFromEnv(env: Env): Promise<Partial<Record<GatewayKeyPurpose, EnvSigner>>> {
  const out: Partial<Record<GatewayKeyPurpose, EnvSigner>> = {};
  try {
    for (const purpose of KEY_PURPOSES) {
      const s = await signerFromEnv(env, `CTL_GATEWAY_${purpose.toUpperCase()}`);
      if (s) out[purpose] = s;
    }
  } catch (e) {
    for (const s of Object.values(out)) await s.signer.close();
    throw e;
  }
  return out;
}
