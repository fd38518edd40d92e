/**
 * What verifiers fetch (spec §4.1): the JWKS (grant and receipt keys, active and
 * retired), the Trust Bundle signed by the gateway's bundle root, and the revocation check
 * every internal grant names (PROTOCOL.md §5 step 3: `{ grantId, revoked, revokedAt? }`).
 */
import type Router from '@koa/router';
import { formatTimestamp } from '../../src/index.js';
import { notFound, badRequest, type SqlDatabase } from '../../service-kit/index.js';
import { sessionByGrantId } from '../sessions/store.js';
import { jwksEntry } from '../../service-kit/key-ring.js';
import type { KeyRing } from '../keys/ring.js';
import { createTrustBundlePublisher } from '../keys/trust-bundle.js';

export function keyRoutes(
  router: Router,
  o: { db: SqlDatabase; keys: KeyRing; issuer: string; now: () => number },
): void {
  const bundles = createTrustBundlePublisher({ db: o.db, issuer: o.issuer, now: o.now, signerOf: o.keys.signerOf });

  router.get('/.well-known/ctl-keys.json', async (ctx) => {
    ctx.set('Cache-Control', 'max-age=60');
    ctx.body = { keys: await o.keys.published() };
  });

  // Served at the database's current sequence (keys/trust-bundle.ts): a revocation shows
  // here at once on every instance, so a client should not cache it long.
  router.get('/.well-known/ctl-trust-bundle.json', async (ctx) => {
    ctx.set('Cache-Control', 'max-age=1');
    ctx.body = await bundles.current();
  });

  router.get('/.well-known/ctl-bundle-root.json', async (ctx) => {
    const root = await o.keys.active('bundle');
    ctx.body = { keys: [jwksEntry({ publicJwk: root.publicJwk, kid: root.kid, alg: root.alg, purpose: 'bundle' })] };
  });

  router.get('/revoke', async (ctx) => {
    const grantId = ctx.query.grantId;
    if (typeof grantId !== 'string' || !grantId) throw badRequest('grantId: required');
    const s = await sessionByGrantId(o.db, grantId);
    if (!s) throw notFound(`no grant '${grantId}'`);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      grantId,
      revoked: s.state === 'revoked',
      ...(s.state === 'revoked' && s.endedAt ? { revokedAt: formatTimestamp(s.endedAt) } : {}),
    };
  });
}
