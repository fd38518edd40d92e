/**
 * Who is calling: service-kit's API-key check (hashes, constant time, the bootstrap admin key)
 * over `gw_owner_keys`, plus the owner a key belongs to, which is what sessions are bound to.
 */
import { createApiKeyAuth, type Authenticate, type Principal, type SqlDatabase } from '../../service-kit/index.js';
import { ownerKeyRecord } from './store.js';

/** The one scope of an owner key: its sessions, their keys and the console. */
export const OWNER_SCOPE = 'sessions';

/** A principal of an owner key carries its owner; the bootstrap admin key has none. */
export interface OwnerPrincipal extends Principal {
  ownerId?: string;
}

export function createOwnerAuth(
  db: SqlDatabase,
  bootstrapKey?: string,
): (apiKey: string) => Promise<OwnerPrincipal | undefined> {
  const check: Authenticate = createApiKeyAuth({ findKey: (keyId) => ownerKeyRecord(db, keyId), bootstrapKey });
  return async (apiKey) => {
    const p = await check(apiKey);
    if (!p) return undefined;
    const key = await ownerKeyRecord(db, p.keyId);
    // The bootstrap key is not in the table; a key revoked since the check above is refused.
    if (!key) return p.keyId === 'bootstrap' ? p : undefined;
    return key.revokedAt ? undefined : { ...p, ownerId: key.ownerId };
  };
}
