/**
 * Revocation (spec §4.3, §3): GET /revoke?grantId= is on every wallet's and merchant's path, so
 * the store answers it from an in-process cache that every process's revocation invalidates
 * (store/revocation-cache.ts), and clients may cache it briefly; POST /revoke and
 * POST /grants/{id}/revoke revoke at once (answered once every authority process has been told)
 * and are idempotent (the first revokedAt stays).
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { badRequest, notFound, requireScope } from '../../service-kit/index.js';
import { canonicalize, sha256Hex, utf8Encode } from '../../src/index.js';
import { closedObject, identifier, optional, required, text } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import { humanRevocationGate } from './humans.js';
import { delegationRevocationGate } from './delegations.js';

/** Seconds a "not revoked" answer may be cached: the staleness an online verifier accepts. */
export const REVOCATION_MAX_AGE_S = 5;

export function revocationRoutes(router: Router, d: RouteDeps): void {
  /** SHA-256 (hex) of the canonical JSON of the grant held under `id`, with or without its soft delete. */
  const storedGrantHash = async (id: string) => {
    const g = await d.store.getGrant(id, { includeDeleted: true });
    return g ? sha256Hex(utf8Encode(canonicalize(JSON.parse(g.grant)))) : undefined;
  };

  /**
   * An id that is no grant here may be a delegation's revocation id (PROTOCOL.md §14, the hash of
   * what the link signs): revoked when a revocation was recorded; otherwise, asked beside the root grant it hangs from
   * (`rootGrantId`, a grant held here), not revoked: the authority never sees a delegation until it is revoked.
   */
  const delegationStatus = async (root: unknown, id: string) => {
    const r = await d.store.delegationRevocation(id);
    if (r) return { revoked: true, revokedAt: r.revokedAt };
    if (root === undefined) return undefined;
    const rootId = identifier(root, 'rootGrantId');
    return (await d.store.revocationStatus(rootId)) ? { revoked: false } : undefined;
  };

  router.get('/revoke', async (ctx) => {
    const id = identifier(ctx.query['grantId'], 'grantId');
    const grantHash = ctx.query['grantHash'];
    if (grantHash !== undefined && (typeof grantHash !== 'string' || !/^[0-9a-f]{64}$/.test(grantHash)))
      throw badRequest('grantHash: must be 64 lowercase hex characters');
    const status = (await d.store.revocationStatus(id)) ?? (await delegationStatus(ctx.query['rootGrantId'], id));
    d.counters.revocationCheck(!status ? 'unknown' : status.revoked ? 'revoked' : 'not_revoked');
    if (!status) throw notFound(`no grant '${id}'`);
    // Whoever asks with the grant in hand (a gateway taking a person's grant, PROTOCOL.md §10) learns
    // whether this authority holds *that* grant, not merely one under its id: any signer can copy an id.
    if (grantHash !== undefined && (await storedGrantHash(id)) !== grantHash)
      throw notFound(`no grant '${id}' with this content`);
    // Revocation is final, so a "revoked" answer can be cached much longer, and by anyone. A "not
    // revoked" one only by the asker, briefly: a shared cache in front of the authority would keep
    // serving it after a revocation to callers that asked for no cache at all.
    ctx.set('Cache-Control', status.revoked ? 'public, max-age=3600' : `private, max-age=${REVOCATION_MAX_AGE_S}`);
    ctx.body = status.revoked
      ? { grantId: id, revoked: true, revokedAt: status.revokedAt }
      : { grantId: id, revoked: false };
  });

  const revoke = async (ctx: Context, id: string, reason: string | undefined) => {
    const actor = actorOf(ctx.state);
    const r = await d.store.revokeGrant(
      id,
      { at: new Date(d.now()).toISOString(), actor, reason },
      d.audit.entry(actor, 'grant.revoke', id, reason ? { reason } : {}, (x) => x.changed),
    );
    if (!r) throw notFound(`no grant '${id}'`);
    if (r.changed) d.counters.grantRevoked('api');
    ctx.body = { grantId: id, revoked: true, revokedAt: r.revokedAt };
  };

  // A ctl-revocation/1 signed by the grant's DID needs no API key (PROTOCOL.md §10): humanRevocationGate.
  router.post(
    '/revoke',
    d.body,
    delegationRevocationGate(d),
    humanRevocationGate(d),
    requireScope(d.authenticate, 'grants:revoke'),
    async (ctx) => {
      const body = closedObject(ctx.request.body, 'body', ['grantId', 'reason']);
      const id = identifier(required(body, 'grantId'), 'grantId');
      const reason = optional(body, 'reason');
      await revoke(ctx, id, reason === undefined ? undefined : text(reason, 'reason', 500));
    },
  );

  router.post('/grants/:grantId/revoke', requireScope(d.authenticate, 'grants:revoke'), d.body, async (ctx) => {
    const id = identifier(ctx.params['grantId'], 'grantId');
    const body = ctx.request.body === undefined ? {} : closedObject(ctx.request.body, 'body', ['reason']);
    const reason = optional(body, 'reason');
    await revoke(ctx, id, reason === undefined ? undefined : text(reason, 'reason', 500));
  });
}
