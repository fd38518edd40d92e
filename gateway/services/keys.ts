/**
 * The gateway's own key set (issue 4 §5): one active Ed25519 key per purpose (`grant` signs the
 * internal PolicyGrants, `receipt` signs receipts, `bundle` is the root of its Trust Bundle),
 * kept in the store so every instance on one database signs with the same keys. Rotation
 * retires the active key (it keeps verifying, never signs again) and makes a new one.
 * Instances re-read the set every few seconds, so a rotation reaches them all shortly.
 */
import { generateKeyPair, importSigningKey, jwkThumbprint, type SigningKey } from '../../src/index.js';
import type { SqlDatabase } from '../../service-kit/index.js';

export type GatewayKeyPurpose = 'grant' | 'receipt' | 'bundle';
export const KEY_PURPOSES: GatewayKeyPurpose[] = ['grant', 'receipt', 'bundle'];

export interface GatewayKey {
  kid: string;
  purpose: GatewayKeyPurpose;
  status: 'active' | 'retired';
  publicJwk: { kty: string; crv: string; x: string; y?: string };
  privatePem: string;
  createdAt: number;
}

export interface KeyRing {
  /** The active key of a purpose, imported and ready to sign. */
  active(purpose: GatewayKeyPurpose): Promise<{ kid: string; signingKey: SigningKey; publicJwk: GatewayKey['publicJwk'] }>;
  /** Every key, active and retired, for the JWKS. */
  all(): Promise<GatewayKey[]>;
  /** Retires the active key of `purpose` and makes a new one; returns the new kid. */
  rotate(purpose: GatewayKeyPurpose): Promise<string>;
}

async function newKey(purpose: GatewayKeyPurpose) {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  const kid = await jwkThumbprint(pair.publicJwk);
  return { kid, purpose, privatePem: pair.privateKeyPem, publicJwk: pair.publicJwk };
}

export function createKeyRing(db: SqlDatabase, now: () => number = Date.now, refreshMs = 5000): KeyRing {
  let cache: { at: number; keys: GatewayKey[] } | undefined;
  const imported = new Map<string, Promise<SigningKey>>();

  async function load(force = false): Promise<GatewayKey[]> {
    if (!force && cache && now() - cache.at < refreshMs) return cache.keys;
    let rows = await db.all(`SELECT * FROM gw_keys ORDER BY created_at`);
    const missing = KEY_PURPOSES.filter((p) => !rows.some((r) => r.purpose === p && r.status === 'active'));
    if (missing.length) {
      // Two instances may race here: the partial unique index keeps one active key per purpose.
      for (const p of missing) {
        const k = await newKey(p);
        await db.run(
          `INSERT INTO gw_keys (kid, purpose, alg, private_pem, public_jwk, status, created_at) VALUES (?, ?, 'EdDSA', ?, ?, 'active', ?) ON CONFLICT DO NOTHING`,
          [k.kid, p, k.privatePem, JSON.stringify(k.publicJwk), now()],
        );
      }
      rows = await db.all(`SELECT * FROM gw_keys ORDER BY created_at`);
    }
    const keys = rows.map((r) => ({
      kid: r.kid as string,
      purpose: r.purpose as GatewayKeyPurpose,
      status: r.status as 'active' | 'retired',
      publicJwk: JSON.parse(r.public_jwk as string),
      privatePem: r.private_pem as string,
      createdAt: Number(r.created_at),
    }));
    cache = { at: now(), keys };
    return keys;
  }

  return {
    async active(purpose) {
      const key = (await load()).find((k) => k.purpose === purpose && k.status === 'active');
      if (!key) throw new Error(`no active ${purpose} key`);
      let sk = imported.get(key.kid);
      if (!sk) {
        sk = importSigningKey(key.privatePem);
        imported.set(key.kid, sk);
      }
      return { kid: key.kid, signingKey: await sk, publicJwk: key.publicJwk };
    },
    all: () => load(),
    async rotate(purpose) {
      const k = await newKey(purpose);
      await db.tx(async (t) => {
        await t.run(`UPDATE gw_keys SET status = 'retired' WHERE purpose = ? AND status = 'active'`, [purpose]);
        await t.run(`INSERT INTO gw_keys (kid, purpose, alg, private_pem, public_jwk, status, created_at) VALUES (?, ?, 'EdDSA', ?, ?, 'active', ?)`, [
          k.kid,
          purpose,
          k.privatePem,
          JSON.stringify(k.publicJwk),
          now(),
        ]);
      });
      await load(true);
      return k.kid;
    },
  };
}

/** A shared secret (continuation HMAC), made once per database whoever starts first. */
export async function sharedSecret(db: SqlDatabase, name: string, make: () => string): Promise<string> {
  await db.run(`INSERT INTO gw_secrets (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, [name, make()]);
  const r = await db.get<{ value: string }>(`SELECT value FROM gw_secrets WHERE name = ?`, [name]);
  return r!.value;
}
