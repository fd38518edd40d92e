/**
 * Bootstrap and administration: `CTL_GATEWAY_ADMIN_KEY` creates budget owners
 * and their API keys (shown once, stored hashed by service-kit's API-key helpers), disables an
 * owner (its keys and live sessions stop in one transaction), stops any session, and rotates
 * signing keys.
 */
import type Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import { parseStrictJson, formatTimestamp } from '../../src/index.js';
import {
  jsonBody,
  requireScope,
  generateApiKey,
  badRequest,
  notFound,
  closedBody,
  optionalText,
  HttpError,
  ADMIN_SCOPE,
  allEffects,
  type Authenticate,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { KEY_PURPOSES, type GatewayKeyPurpose, type KeyRing } from '../keys/ring.js';
import type { SessionService } from '../sessions/service.js';
import type { GatewayEvents } from '../sessions/events.js';
import { insertOwner, addOwnerKey, revokeOwnerKey, disableOwner, ownerWithKeys } from '../owners/store.js';
import { sessionsPage } from './sessions.js';
import { OWNER_SCOPE } from '../owners/auth.js';

/** Owner and key ids this gateway gives (legacy owner ids are key ids): anything else is unknown. */
const ID = /^[A-Za-z0-9_-]{1,80}$/;

export function adminRoutes(
  router: Router,
  o: {
    db: SqlDatabase;
    auth: Authenticate;
    keys: KeyRing;
    sessions: SessionService;
    events: GatewayEvents;
    now: () => number;
  },
): void {
  const admin = requireScope(o.auth, ADMIN_SCOPE);
  const body = jsonBody({ limit: '16kb', parse: parseStrictJson });
  const param = (ctx: any, name: string, what: string) => {
    const v = ctx.params[name] as string;
    if (!ID.test(v)) throw notFound(`no ${what} '${v.slice(0, 80)}'`);
    return v;
  };
  const newKey = () => {
    const { keyId, apiKey, record } = generateApiKey([OWNER_SCOPE]);
    return { keyId, apiKey, key: { keyId, record } };
  };

  router.post('/admin/owners', admin, body, async (ctx) => {
    // Owner keys carry the one scope OWNER_SCOPE: a `scopes` member (or any other) is refused.
    const label = optionalText(closedBody(ctx.request.body, ['label']), 'label', 200);
    const ownerId = `own_${randomBytes(12).toString('base64url')}`;
    const { keyId, apiKey, key } = newKey();
    await insertOwner(
      o.db,
      { ownerId, label, key, now: o.now() },
      o.events.entry('admin', 'owner.create', ownerId, { label, keyId }),
    );
    ctx.status = 201;
    ctx.body = { ownerId, keyId, apiKey, label };
  });

  // Which keys an owner has (ids and dates only), to see what a rotation still has to revoke.
  router.get('/admin/owners/:ownerId', admin, async (ctx) => {
    const ownerId = param(ctx, 'ownerId', 'owner');
    const owner = await ownerWithKeys(o.db, ownerId);
    if (!owner) throw notFound(`no owner '${ownerId}'`);
    ctx.body = {
      ownerId,
      label: owner.label,
      createdAt: formatTimestamp(owner.createdAt),
      disabled: owner.disabledAt != null,
      ...(owner.disabledAt != null ? { disabledAt: formatTimestamp(owner.disabledAt) } : {}),
      keys: owner.keys.map((k) => ({
        keyId: k.keyId,
        createdAt: formatTimestamp(k.createdAt),
        revoked: k.revokedAt != null,
        ...(k.revokedAt != null ? { revokedAt: formatTimestamp(k.revokedAt) } : {}),
      })),
    };
  });

  // What an owner's agents hold, for the admin's stop button (DELETE /admin/sessions/{id}).
  router.get('/admin/owners/:ownerId/sessions', admin, async (ctx) => {
    const ownerId = param(ctx, 'ownerId', 'owner');
    if (!(await ownerWithKeys(o.db, ownerId))) throw notFound(`no owner '${ownerId}'`);
    ctx.body = { ownerId, ...(await sessionsPage(o.db, o.sessions, ownerId, ctx.query)) };
  });

  // Key rotation: add a key, move the agents over, revoke the old one; the sessions stay the owner's.
  router.post('/admin/owners/:ownerId/keys', admin, async (ctx) => {
    const ownerId = param(ctx, 'ownerId', 'owner');
    const { keyId, apiKey, key } = newKey();
    const added = await addOwnerKey(
      o.db,
      ownerId,
      key,
      o.now(),
      o.events.entry('admin', 'owner.key_add', ownerId, { keyId }, (r) => r === 'ok'),
    );
    if (added === 'not_found') throw notFound(`no owner '${ownerId}'`);
    if (added === 'disabled') throw new HttpError(409, 'conflict', `the owner '${ownerId}' is disabled`);
    ctx.status = 201;
    ctx.body = { ownerId, keyId, apiKey };
  });

  router.delete('/admin/owners/:ownerId/keys/:keyId', admin, async (ctx) => {
    const ownerId = param(ctx, 'ownerId', 'owner');
    const keyId = param(ctx, 'keyId', 'key');
    if (
      !(await revokeOwnerKey(
        o.db,
        ownerId,
        keyId,
        o.now(),
        o.events.entry('admin', 'owner.key_revoke', ownerId, { keyId }, (r) => r.changed),
      ))
    )
      throw notFound(`no key '${keyId}' of owner '${ownerId}'`);
    ctx.body = { ownerId, keyId, revoked: true };
  });

  // Disabling an owner stops every key and every live session it owns, in one transaction.
  router.delete('/admin/owners/:ownerId', admin, async (ctx) => {
    const ownerId = param(ctx, 'ownerId', 'owner');
    const at = o.now();
    const revoked = await disableOwner(
      o.db,
      ownerId,
      at,
      allEffects(
        o.events.entry('admin', 'owner.disable', ownerId, {}, (r) => r !== undefined),
        o.sessions.revokedEvents(at, 'admin', 'owner_disabled'),
      ),
    );
    if (!revoked) throw notFound(`no owner '${ownerId}'`);
    ctx.body = { ownerId, disabled: true, revoked: true, revokedSessions: revoked.length };
  });

  // The admin's stop button: any session, recorded as the admin's (revokedBy, session.revoked).
  router.delete('/admin/sessions/:id', admin, async (ctx) => {
    const id = param(ctx, 'id', 'session');
    ctx.body = await o.sessions.revoke(await o.sessions.byId(id), 'admin');
  });

  router.post('/admin/keys/rotate', admin, body, async (ctx) => {
    const purpose = (ctx.request.body as { purpose?: unknown } | undefined)?.purpose;
    if (!KEY_PURPOSES.includes(purpose as GatewayKeyPurpose))
      throw badRequest(`purpose: one of ${KEY_PURPOSES.join(', ')}`);
    ctx.body = { purpose, kid: await o.keys.rotate(purpose as GatewayKeyPurpose) };
  });
}
