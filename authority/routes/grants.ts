/**
 * POST /grants (spec §4.3, §2.3; PROTOCOL.md §4): a PolicyGrant signed with the active grant key,
 * linked to a stored policy, kept in custody; GET /grants/{id}; DELETE /grants/{id} (revoke and
 * soft-delete).
 */
import type Router from '@koa/router';
import { HttpError, badRequest, notFound, requireScope } from '../../service-kit/index.js';
import { CtlError, createSignedPolicyGrant, type GrantFields } from '../../src/index.js';
import { closedObject, futureTimestamp, identifier, optional, required } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import type { StoredGrant } from '../store/types.js';
import { humanGrantGate } from './humans.js';

const GRANT_REQUEST = [
  'policyHash',
  'actorKey',
  'allowedRails',
  'allowedAssets',
  'maxAmountMinor',
  'currency',
  'expiresAt',
  'destinationAllowlist',
  'allowedPurposes',
  'velocity',
  'offline',
  'windows',
  'windowsStart',
  'delegation',
] as const;

/** A grant's custody view: the signed grant plus its state. */
export function grantView(g: StoredGrant) {
  return {
    grant: JSON.parse(g.grant),
    revoked: g.revokedAt !== null,
    ...(g.revokedAt ? { revokedAt: g.revokedAt } : {}),
    ...(g.deletedAt ? { deletedAt: g.deletedAt } : {}),
  };
}

export function grantRoutes(router: Router, d: RouteDeps): void {
  // A grant signed by an enrolled human is taken by humanGrantGate (PROTOCOL.md §10); the rest needs an API key.
  router.post('/grants', d.body, humanGrantGate(d), requireScope(d.authenticate, 'grants:write'), async (ctx) => {
    const now = d.now();
    const body = closedObject(ctx.request.body, 'body', GRANT_REQUEST);
    const hash = required(body, 'policyHash');
    if (typeof hash !== 'string' || !/^[0-9a-f]{64}$/.test(hash))
      throw badRequest('policyHash: must be 64 lowercase hex characters');
    for (const f of ['actorKey', 'allowedRails', 'allowedAssets', 'maxAmountMinor', 'currency'] as const)
      required(body, f);
    const expiresAtMs = futureTimestamp(required(body, 'expiresAt'), 'expiresAt', now);
    for (const f of [
      'destinationAllowlist',
      'allowedPurposes',
      'velocity',
      'offline',
      'windows',
      'windowsStart',
      'delegation',
    ] as const)
      optional(body, f);
    if (!(await d.store.getPolicy(hash))) throw notFound(`no policy '${hash}': store it with POST /policies first`);

    const { kid, signer } = await d.keys.grantSigner();
    let grant;
    try {
      grant = await createSignedPolicyGrant(body as unknown as GrantFields, {
        issuer: d.issuer,
        keyId: kid,
        signingKey: signer,
        revocationBaseUrl: d.revocationBaseUrl,
        now: d.now,
      });
    } catch (e) {
      // The SDK refuses to sign what a verifier would refuse to read, naming `grant.<field>`.
      if (e instanceof CtlError) throw new HttpError(400, e.code, e.message.replace(/^grant\./, ''));
      throw e;
    }
    await d.store.putGrant(
      {
        grantId: grant.grantId,
        policyHash: grant.policyHash,
        keyId: kid,
        grant: JSON.stringify(grant),
        issuedAt: grant.issuedAt,
        expiresAtMs,
        createdBy: actorOf(ctx.state),
      },
      d.audit.entry(actorOf(ctx.state), 'grant.issue', grant.grantId, {
        policyHash: grant.policyHash,
        keyId: kid,
        expiresAt: grant.expiresAt,
      }),
    );
    d.counters.grantIssued('authority');
    ctx.status = 201;
    ctx.body = grant;
  });

  router.get('/grants/:grantId', requireScope(d.authenticate, 'grants:write'), async (ctx) => {
    const id = identifier(ctx.params['grantId'], 'grantId');
    const g = await d.store.getGrant(id, { includeDeleted: ctx.query['includeDeleted'] === 'true' });
    if (!g) throw notFound(`no grant '${id}'`);
    ctx.body = grantView(g);
  });

  // Custody with soft delete (spec §4.3): the record stays (audit, revocation answers), the grant
  // is revoked first so that deleting never leaves a usable grant behind.
  router.delete('/grants/:grantId', requireScope(d.authenticate, 'admin'), async (ctx) => {
    const id = identifier(ctx.params['grantId'], 'grantId');
    const at = new Date(d.now()).toISOString();
    const actor = actorOf(ctx.state);
    const revoked = await d.store.revokeGrant(
      id,
      { at, actor, reason: 'deleted' },
      d.audit.entry(actor, 'grant.revoke', id, { reason: 'deleted' }, (r) => r.changed),
    );
    if (!revoked) throw notFound(`no grant '${id}'`);
    await d.store.softDeleteGrant(
      id,
      at,
      d.audit.entry(actor, 'grant.delete', id, {}, (deleted) => deleted),
    );
    const g = await d.store.getGrant(id, { includeDeleted: true });
    ctx.body = grantView(g!);
  });
}
