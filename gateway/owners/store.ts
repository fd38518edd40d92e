/**
 * Budget owners and their API keys. An owner has any number of keys (rotation: add one, revoke
 * the old, the sessions stay the owner's); disabling the owner stops every key at once and
 * revokes every live session it owns in the same transaction. Keys are stored hashed
 * (service-kit's API-key helpers); the owner id of a pre-keys database is its first key's id.
 */
import {
  changeWith,
  type ApiKeyRecord,
  type SqlDatabase,
  type SqlExecutor,
  type TxEffect,
} from '../../service-kit/index.js';
import { revokeLive, type SessionRecord } from '../sessions/store.js';

export interface NewKey {
  keyId: string;
  record: ApiKeyRecord;
}

async function insertKey(q: SqlExecutor, ownerId: string, key: NewKey, now: number) {
  await q.run(`INSERT INTO gw_owner_keys (key_id, owner_id, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?)`, [
    key.keyId,
    ownerId,
    key.record.hash,
    JSON.stringify(key.record.scopes),
    now,
  ]);
}

export async function insertOwner(
  db: SqlDatabase,
  o: { ownerId: string; label: string; key: NewKey; now: number },
  effect?: TxEffect<void>,
): Promise<void> {
  await changeWith(
    db,
    async (t) => {
      await t.run(`INSERT INTO gw_owners (id, label, created_at) VALUES (?, ?, ?)`, [o.ownerId, o.label, o.now]);
      await insertKey(t, o.ownerId, o.key, o.now);
    },
    effect,
  );
}

/** Adds a key to an owner; 'not_found' for an unknown owner, 'disabled' for a disabled one. */
export async function addOwnerKey(
  db: SqlDatabase,
  ownerId: string,
  key: NewKey,
  now: number,
  effect?: TxEffect<'ok' | 'not_found' | 'disabled'>,
): Promise<'ok' | 'not_found' | 'disabled'> {
  return changeWith(
    db,
    async (t): Promise<'ok' | 'not_found' | 'disabled'> => {
      const owner = await t.get<{ disabled_at: unknown }>(
        `SELECT disabled_at FROM gw_owners WHERE id = ?${t.dialect === 'postgres' ? ' FOR SHARE' : ''}`,
        [ownerId],
      );
      if (!owner) return 'not_found';
      if (owner.disabled_at != null) return 'disabled';
      await insertKey(t, ownerId, key, now);
      return 'ok';
    },
    effect,
  );
}

/** Revokes one key of an owner (idempotent); false when the owner has no such key. */
export async function revokeOwnerKey(
  db: SqlDatabase,
  ownerId: string,
  keyId: string,
  now: number,
  effect?: TxEffect<{ known: boolean; changed: boolean }>,
): Promise<boolean> {
  const r = await changeWith(
    db,
    async (t) => {
      const u = await t.run(
        `UPDATE gw_owner_keys SET revoked_at = ? WHERE key_id = ? AND owner_id = ? AND revoked_at IS NULL`,
        [now, keyId, ownerId],
      );
      return {
        known: !!(await t.get(`SELECT key_id FROM gw_owner_keys WHERE key_id = ? AND owner_id = ?`, [keyId, ownerId])),
        changed: u.changes === 1,
      };
    },
    effect,
  );
  return r.known;
}

/**
 * Disables an owner: its row (locked first, see insertOwnedSession), every key, and every live
 * session, in one transaction. Returns undefined for an unknown owner, else the sessions this
 * call revoked (none when it was already disabled).
 */
export async function disableOwner(
  db: SqlDatabase,
  ownerId: string,
  now: number,
  effect?: TxEffect<SessionRecord[] | undefined>,
): Promise<SessionRecord[] | undefined> {
  return changeWith(
    db,
    async (t) => {
      const r = await t.run(`UPDATE gw_owners SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?`, [now, ownerId]);
      if (r.changes !== 1) return undefined;
      await t.run(`UPDATE gw_owner_keys SET revoked_at = ? WHERE owner_id = ? AND revoked_at IS NULL`, [now, ownerId]);
      return revokeLive(t, { ownerId }, now, 'admin');
    },
    effect,
  );
}

/** An owner and its keys (never their hashes), for the admin; undefined when unknown. */
export async function ownerWithKeys(q: SqlExecutor, ownerId: string) {
  const o = await q.get<{ label: string; created_at: unknown; disabled_at: unknown }>(
    `SELECT label, created_at, disabled_at FROM gw_owners WHERE id = ?`,
    [ownerId],
  );
  if (!o) return undefined;
  const keys = await q.all<{ key_id: string; created_at: unknown; revoked_at: unknown }>(
    `SELECT key_id, created_at, revoked_at FROM gw_owner_keys WHERE owner_id = ? ORDER BY created_at, key_id`,
    [ownerId],
  );
  return {
    label: o.label,
    createdAt: Number(o.created_at),
    disabledAt: o.disabled_at == null ? null : Number(o.disabled_at),
    keys: keys.map((k) => ({
      keyId: k.key_id,
      createdAt: Number(k.created_at),
      revokedAt: k.revoked_at == null ? null : Number(k.revoked_at),
    })),
  };
}

/** A key as service-kit's createApiKeyAuth wants it: revoked when the key or its owner is. */
export async function ownerKeyRecord(
  q: SqlExecutor,
  keyId: string,
): Promise<(ApiKeyRecord & { ownerId: string }) | undefined> {
  const row = await q.get<{
    key_id: string;
    owner_id: string;
    key_hash: string;
    scopes: string;
    revoked_at: unknown;
    disabled_at: unknown;
  }>(
    `SELECT k.key_id, k.owner_id, k.key_hash, k.scopes, k.revoked_at, o.disabled_at
     FROM gw_owner_keys k JOIN gw_owners o ON o.id = k.owner_id WHERE k.key_id = ?`,
    [keyId],
  );
  if (!row) return undefined;
  const revokedAt = row.revoked_at ?? row.disabled_at;
  return {
    keyId: row.key_id,
    ownerId: row.owner_id,
    hash: row.key_hash,
    scopes: JSON.parse(row.scopes),
    revokedAt: revokedAt == null ? null : String(revokedAt),
  };
}
