/**
 * Bootstrap and administration (issue 4 §1, §5): `CTL_GATEWAY_ADMIN_KEY` creates budget-owner
 * keys (shown once, stored hashed by service-kit's API-key helpers) and rotates signing keys.
 */
import Router from '@koa/router';
import { parseStrictJson } from '../../src/index.js';
import { jsonBody, requireScope, generateApiKey, badRequest, notFound, ADMIN_SCOPE, type Authenticate, type SqlDatabase } from '../../service-kit/index.js';
import { KEY_PURPOSES, type GatewayKeyPurpose, type KeyRing } from '../services/keys.js';
import { OWNER_SCOPE } from './sessions.js';

export function adminRoutes(o: { db: SqlDatabase; auth: Authenticate; keys: KeyRing; now: () => number }) {
  const r = new Router();
  const admin = requireScope(o.auth, ADMIN_SCOPE);
  const body = jsonBody({ limit: '16kb', parse: parseStrictJson });

  r.post('/admin/owners', admin, body, async (ctx) => {
    const b = (ctx.request.body ?? {}) as Record<string, unknown>;
    const label = b.label ?? '';
    if (typeof label !== 'string' || label.length > 200) throw badRequest('label: a string of at most 200 characters');
    const { keyId, apiKey, record } = generateApiKey([OWNER_SCOPE]);
    await o.db.run(`INSERT INTO gw_owners (id, label, key_hash, scopes, created_at) VALUES (?, ?, ?, ?, ?)`, [
      keyId, label, record.hash, JSON.stringify(record.scopes), o.now(),
    ]);
    ctx.status = 201;
    ctx.body = { ownerId: keyId, label, apiKey };
  });

  r.delete('/admin/owners/:id', admin, async (ctx) => {
    const r = await o.db.run(`UPDATE gw_owners SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, [o.now(), ctx.params.id!]);
    const exists = r.changes === 1 || (await o.db.get(`SELECT id FROM gw_owners WHERE id = ?`, [ctx.params.id!]));
    if (!exists) throw notFound(`no owner '${ctx.params.id}'`);
    ctx.body = { ownerId: ctx.params.id, revoked: true };
  });

  r.post('/admin/keys/rotate', admin, body, async (ctx) => {
    const purpose = (ctx.request.body as { purpose?: unknown } | undefined)?.purpose;
    if (!KEY_PURPOSES.includes(purpose as GatewayKeyPurpose)) throw badRequest(`purpose: one of ${KEY_PURPOSES.join(', ')}`);
    ctx.body = { purpose, kid: await o.keys.rotate(purpose as GatewayKeyPurpose) };
  });
  return r;
}

/** service-kit's key lookup over gw_owners. */
export function findOwnerKey(db: SqlDatabase) {
  return async (keyId: string) => {
    const row = await db.get(`SELECT id, key_hash, scopes, revoked_at FROM gw_owners WHERE id = ?`, [keyId]);
    return row ? { keyId: row.id as string, hash: row.key_hash as string, scopes: JSON.parse(row.scopes as string), revokedAt: row.revoked_at == null ? null : String(row.revoked_at) } : undefined;
  };
}
