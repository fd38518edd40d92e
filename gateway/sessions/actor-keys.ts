/**
 * Each session's actor key (the wallet key its grant names as `actorKey`, PROTOCOL.md §4) is
 * derived, never stored: the Ed25519 seed is HKDF-SHA256 (RFC 5869) of the gateway's session-key
 * master secret over the session id. The master is a shared secret of the database, sealed under
 * the KEK (keys/ring.ts sharedSecret), so every instance derives the same key and a dump of
 * the database holds no session key. `gw_sessions.actor_key_pem` keeps only the marker
 * DERIVED_MARKER; sessions from before derivation keep their own key, sealed at start.
 */
import { hkdfSync, randomBytes } from 'node:crypto';
import { importSigningKey, jwkThumbprint, type SigningKey } from '../../src/index.js';
import { idleCache, type SqlDatabase } from '../../service-kit/index.js';
import { isSealed, type SecretSealer } from '../../service-kit/secrets/index.js';
import { signingOffThread, ed25519KeyObject } from '../../service-kit/signers/index.js';
import { sharedSecret } from '../keys/ring.js';
import { clearActorKeys, replaceActorKey } from './store.js';

/** What `actor_key_pem` holds for a derived key (versioned: a change of derivation is a new marker). */
export const DERIVED_MARKER = 'derived:hkdf-sha256/1';
const SALT = 'ctl-gateway-session-key/1';
const sealContext = (sessionId: string) => `gw_sessions:${sessionId}`;

export interface SessionKeys {
  /** The key a new session's grant names (stored as DERIVED_MARKER). */
  derive(sessionId: string): Promise<SigningKey>;
  /** The actor key of a stored session, with its kid (RFC 7638 thumbprint); cached. */
  signingKey(session: { id: string; actorKeyPem: string }): Promise<{ key: SigningKey; kid: string }>;
}

/** The seed of `sessionId`'s key: 32 bytes of HKDF-SHA256(master, salt, info = session id). */
export function deriveSessionSeed(master: Uint8Array, sessionId: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', master, SALT, sessionId, 32));
}

/**
 * The session keys of a database: reads (or makes, once per database) the sealed master, and seals
 * any stored session key still in the clear.
 * @example const sk = await createSessionKeys(db, sealer); const key = await sk.derive('sess_abc')
 */
export async function createSessionKeys(db: SqlDatabase, sealer: SecretSealer): Promise<SessionKeys> {
  const master = Buffer.from(
    await sharedSecret(db, 'session-key-master', () => randomBytes(32).toString('base64url'), sealer),
    'base64url',
  );
  if (master.length !== 32) throw new Error('the stored session-key master is not 32 bytes');
  await sealStoredSessionKeys(db, sealer);
  // Bounded by the sessions in use (service-kit/idle-cache.ts): derived again on demand.
  const cache = idleCache<string, Promise<{ key: SigningKey; kid: string }>>();
  // Signs on the thread pool (service-kit/signers/off-thread.ts): one SBA per paid request.
  const derive = async (sessionId: string) => {
    const seed = deriveSessionSeed(master, sessionId);
    return signingOffThread(await importSigningKey(seed, { alg: 'EdDSA' }), ed25519KeyObject(seed));
  };
  return {
    derive,
    signingKey(session) {
      let k = cache.get(session.id);
      if (!k) {
        const stored = session.actorKeyPem;
        k = (async () => {
          const key =
            stored === DERIVED_MARKER
              ? await derive(session.id)
              : await importSigningKey(isSealed(stored) ? await sealer.open(stored, sealContext(session.id)) : stored);
          return { key, kid: await jwkThumbprint(key.publicJwk) };
        })();
        k.catch(() => cache.delete(session.id));
        cache.set(session.id, k);
      }
      return k;
    },
  };
}

/** Sessions from before derivation: their PEM in the clear is sealed (conditional UPDATE, 500 a page). */
async function sealStoredSessionKeys(db: SqlDatabase, sealer: SecretSealer): Promise<void> {
  for (;;) {
    const rows = await clearActorKeys(db);
    if (rows.length === 0) return;
    for (const r of rows)
      await replaceActorKey(db, r.id, r.actor_key_pem, await sealer.seal(r.actor_key_pem, sealContext(r.id)));
  }
}
