/**
 * The SQL of the gateway's keys and stored secrets (`gw_keys`, `gw_secrets`), as the authority's
 * store holds its own: the key ring (ring.ts) decides, this file reads and writes. Every change to
 * the key set raises the bundle sequence in its transaction (PROTOCOL.md §12: a key the bundle
 * publishes is a change it reflects).
 */
import type { Alg, PublicJwk } from '../../src/index.js';
import type { SqlDatabase, SqlExecutor } from '../../service-kit/index.js';
import type { StoredKey } from '../../service-kit/key-ring.js';
import { raiseBundleSequence } from './bundle-sequence.js';

export type GatewayKeyPurpose = 'grant' | 'receipt' | 'bundle';

export interface GatewayKey {
  kid: string;
  purpose: GatewayKeyPurpose;
  status: 'active' | 'retired';
  publicJwk: PublicJwk;
  /** What signs with it: EdDSA for stored keys; an HSM or file key may be ES256. */
  alg: Alg;
  /** Sealed (or, before start-up sealing, in the clear); '' for a key held outside the database. */
  privatePem: string;
  custody: 'database' | 'pkcs11' | 'file';
  createdAt: number;
}

/** A key as the shared ring core reads it (service-kit/key-ring.ts KeyStore). */
export async function listStoredKeys(db: SqlDatabase): Promise<StoredKey[]> {
  const rows = await db.all<{ kid: string; purpose: string; status: StoredKey['status']; private_pem: string }>(
    `SELECT kid, purpose, status, private_pem FROM gw_keys`,
  );
  return rows.map((r) => ({ kid: r.kid, purpose: r.purpose, status: r.status, privatePem: r.private_pem }));
}

/** Every key, oldest first. */
export async function allKeys(db: SqlDatabase): Promise<GatewayKey[]> {
  const rows = await db.all(`SELECT * FROM gw_keys ORDER BY created_at`);
  return rows.map((r) => ({
    kid: r.kid as string,
    purpose: r.purpose as GatewayKeyPurpose,
    status: r.status as 'active' | 'retired',
    publicJwk: JSON.parse(r.public_jwk as string),
    alg: ((r.alg as string | null) ?? 'EdDSA') as Alg,
    privatePem: r.private_pem as string,
    custody: ((r.custody as string | undefined) ?? 'database') as GatewayKey['custody'],
    createdAt: Number(r.created_at),
  }));
}

/** Replaces a key's stored private key if it is still `from` (sealing one found in the clear). */
export async function replacePrivatePem(db: SqlDatabase, kid: string, from: string, to: string): Promise<boolean> {
  return (
    (await db.run(`UPDATE gw_keys SET private_pem = ? WHERE kid = ? AND private_pem = ?`, [to, kid, from])).changes ===
    1
  );
}

/** A generated (EdDSA, sealed) key as it is inserted. */
export interface NewStoredKey {
  kid: string;
  sealedPem: string;
  publicJwk: PublicJwk;
}

/** In `t`: retires the active key of `purpose` and inserts `k` as the active one (a rotation). */
export async function insertActiveKey(t: SqlExecutor, purpose: string, k: NewStoredKey, at: number): Promise<void> {
  await retireActive(t, purpose);
  await t.run(
    'INSERT INTO gw_keys (kid, purpose, alg, private_pem, public_jwk, status, created_at) ' +
      `VALUES (?, ?, 'EdDSA', ?, ?, 'active', ?)`,
    [k.kid, purpose, k.sealedPem, JSON.stringify(k.publicJwk), at],
  );
  await raiseBundleSequence(t);
}

/**
 * The first key of `purpose`, unless another instance made one first (the partial unique index
 * keeps one active key per purpose): true when this one was inserted.
 */
export async function insertFirstKey(db: SqlDatabase, purpose: string, k: NewStoredKey, at: number): Promise<boolean> {
  return await db.tx(async (t) => {
    const r = await t.run(
      'INSERT INTO gw_keys (kid, purpose, alg, private_pem, public_jwk, status, created_at) ' +
        `VALUES (?, ?, 'EdDSA', ?, ?, 'active', ?) ON CONFLICT DO NOTHING`,
      [k.kid, purpose, k.sealedPem, JSON.stringify(k.publicJwk), at],
    );
    if (r.changes === 1) await raiseBundleSequence(t);
    return r.changes === 1;
  });
}

/** The key held outside the database (`private_pem` empty), by its public half. */
export interface ExternalKeyRow {
  kid: string;
  purpose: GatewayKeyPurpose;
  alg: Alg;
  publicJwk: PublicJwk;
  custody: string;
}

/**
 * Makes `k` the active key of its purpose, recorded by its public half when new, under the
 * table's lock; `refuse(purpose)` is thrown when the kid is already another purpose's key.
 */
export async function activateExternalKey(
  db: SqlDatabase,
  k: ExternalKeyRow,
  at: number,
  refuse: (otherPurpose: string) => Error,
): Promise<void> {
  await db.tx(
    async (t) => {
      const row = await t.get<{ purpose: string; status: string }>(
        `SELECT purpose, status FROM gw_keys WHERE kid = ?`,
        [k.kid],
      );
      if (row && row.purpose !== k.purpose) throw refuse(row.purpose);
      if (row?.status === 'active') return;
      await retireActive(t, k.purpose);
      if (row) await t.run(`UPDATE gw_keys SET status = 'active' WHERE kid = ?`, [k.kid]);
      else {
        await t.run(
          'INSERT INTO gw_keys (kid, purpose, alg, private_pem, public_jwk, status, created_at, ' +
            `custody) VALUES (?, ?, ?, '', ?, 'active', ?, ?)`,
          [k.kid, k.purpose, k.alg, JSON.stringify(k.publicJwk), at, k.custody],
        );
      }
      await raiseBundleSequence(t);
    },
    { lock: 'gw_keys' },
  );
}

const retireActive = (t: SqlExecutor, purpose: string) =>
  t.run(`UPDATE gw_keys SET status = 'retired' WHERE purpose = ? AND status = 'active'`, [purpose]);

/** Stores `value` as the secret `name` unless one is stored already (the first instance wins). */
export async function insertSecretOnce(db: SqlDatabase, name: string, value: string): Promise<void> {
  await db.run(`INSERT INTO gw_secrets (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, [name, value]);
}

/** The stored value of the secret `name` (sealed, or in the clear from before sealing). */
export async function secretValue(db: SqlDatabase, name: string): Promise<string> {
  const r = await db.get<{ value: string }>(`SELECT value FROM gw_secrets WHERE name = ?`, [name]);
  return r!.value;
}

/** Replaces the secret `name` if it is still `from` (sealing one found in the clear). */
export async function replaceSecret(db: SqlDatabase, name: string, from: string, to: string): Promise<void> {
  await db.run(`UPDATE gw_secrets SET value = ? WHERE name = ? AND value = ?`, [to, name, from]);
}
