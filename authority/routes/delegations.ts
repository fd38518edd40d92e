/**
 * Revoking a delegation (PROTOCOL.md §14). The authority never saw the delegation (a delegator
 * signs it peer to peer), so the request carries it: `POST /revoke` with `{ delegation, reason? }`
 * and an API key (`grants:revoke`: the root grant's owner), or `{ delegation, revocation }` with no
 * API key, `revocation` a `ctl-revocation/1` over the delegation's id signed by its parent's
 * `actorKey` (the delegator; its `issuer` is that key's did:key, PROTOCOL.md §10). Either way the
 * chain must verify and hang from a grant held here, byte for byte. Revoking is idempotent.
 */
import type { Context, Middleware, Next } from 'koa';
import { DEFAULT_STATUS_BY_CODE, HttpError, notFound, requireScope } from '../../service-kit/index.js';
import {
  canonicalize,
  didKeyToJwk,
  linkRevocationId,
  verifyDelegation,
  verifySignedRevocation,
  type Delegation,
  type PolicyGrant,
} from '../../src/index.js';
import { closedObject, optional, required, text } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import { REVOCATION_MAX_AGE_MS, REVOCATION_TOLERANCE_MS } from './humans.js';

function refuse(code: string, message: string): HttpError {
  return new HttpError(DEFAULT_STATUS_BY_CODE[code] ?? (code === 'unauthorized' ? 401 : 400), code, message);
}

const sameKey = (a: PolicyGrant['actorKey'], b: PolicyGrant['actorKey']) =>
  a.kty === b.kty && a.crv === b.crv && a.x === b.x && a.y === b.y;

/** Sits in front of POST /revoke: a body with a `delegation` member is handled here; anything else goes on. */
export function delegationRevocationGate(d: RouteDeps): Middleware {
  return async (ctx: Context, next: Next) => {
    const body = ctx.request.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object' || Array.isArray(body) || !('delegation' in body)) return next();
    const b = closedObject(body, 'body', ['delegation', 'revocation', 'reason']);
    const reasonIn = optional(b, 'reason');
    const reason = reasonIn === undefined ? undefined : text(reasonIn, 'reason', 500);
    // Checked at the authority's clock with the tolerance it gives signed revocations.
    const v = await verifyDelegation(required(b, 'delegation'), {
      now: d.now,
      clockToleranceMs: REVOCATION_TOLERANCE_MS,
    });
    if (!v.valid) throw refuse(v.error.code, `delegation: ${v.error.message}`);
    const leaf = v.links[v.links.length - 1]!;
    const stored = await d.store.getGrant(v.root.grantId, { includeDeleted: true });
    if (!stored || canonicalize(JSON.parse(stored.grant)) !== canonicalize(v.root))
      throw notFound(`no grant '${v.root.grantId}' here with this content`);
    const record = async (actor: string) => {
      // Keyed by what the link signs, never by its id alone: any delegator may copy an id (PROTOCOL.md §14).
      const revocationId = linkRevocationId(leaf);
      const r = await d.store.revokeDelegation({
        revocationId,
        delegationId: leaf.delegationId,
        rootGrantId: v.root.grantId,
        expiresAtMs: Date.parse(leaf.expiresAt),
        at: new Date(d.now()).toISOString(),
        actor,
        reason,
      });
      if (r.changed) {
        await d.audit.record(actor, 'delegation.revoke', leaf.delegationId, {
          rootGrantId: v.root.grantId,
          revocationId,
          ...(reason ? { reason } : {}),
          ...(b['revocation'] ? { revocation: b['revocation'] } : {}),
        });
        d.counters.grantRevoked(b['revocation'] ? 'signed' : 'api');
      }
      ctx.body = { grantId: leaf.delegationId, revocationId, revoked: true, revokedAt: r.revokedAt };
    };
    if (b['revocation'] === undefined) {
      // The root grant's owner: an API key allowed to revoke grants.
      await requireScope(d.authenticate, 'grants:revoke')(ctx, () => record(actorOf(ctx.state)));
      return;
    }
    const s = await verifySignedRevocation(b['revocation'], {
      now: d.now,
      maxAgeMs: REVOCATION_MAX_AGE_MS,
      clockToleranceMs: REVOCATION_TOLERANCE_MS,
    });
    if (!s.valid) throw refuse(s.error.code, `revocation: ${s.error.message}`);
    if (s.revocation.grantId !== leaf.delegationId)
      throw refuse('malformed', 'revocation.grantId: must be the delegation id');
    const parent = leaf.parent as PolicyGrant | Delegation;
    if (!sameKey(didKeyToJwk(s.revocation.issuer), parent.actorKey))
      throw new HttpError(403, 'forbidden', "only the delegator (the parent's actorKey) may revoke a delegation");
    await record(s.revocation.issuer);
  };
}
