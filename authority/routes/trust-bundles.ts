/**
 * Trust Bundles (spec §2.7, §4.3; PROTOCOL.md §4): signed by the root key, carrying the
 * authority's grant keys and the revoked grant ids, with a sequence that only grows per scope.
 */
import type Router from '@koa/router';
import { badRequest, requireScope } from '../../service-kit/index.js';
import { canonicalize, createTrustBundle } from '../../src/index.js';
import { closedObject, futureTimestamp, optional, required, scopeValue } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import type { BundleScopeFields } from '../store/types.js';

const SCOPE_LIMITS = { category: 128, merchant: 256, region: 128 } as const;

function readScope(value: unknown, field: string): BundleScopeFields {
  const o = closedObject(value, field, Object.keys(SCOPE_LIMITS));
  const scope: BundleScopeFields = {};
  for (const [k, max] of Object.entries(SCOPE_LIMITS) as Array<[keyof BundleScopeFields, number]>) {
    const v = optional(o, k);
    if (v !== undefined) scope[k] = scopeValue(v, `${field}.${k}`, max);
  }
  return scope;
}

export function trustBundleRoutes(router: Router, d: RouteDeps): void {
  router.post('/trust-bundles', requireScope(d.authenticate, 'bundles:write'), d.body, async (ctx) => {
    const now = d.now();
    const body = closedObject(ctx.request.body, 'body', ['scope', 'expiresAt']);
    const scope = readScope(required(body, 'scope'), 'scope');
    const expiresAtMs = futureTimestamp(required(body, 'expiresAt'), 'expiresAt', now);
    if (expiresAtMs - now > d.maxBundleTtlMs) throw badRequest(`expiresAt: at most ${Math.round(d.maxBundleTtlMs / 86_400_000)} days ahead`);
    const issuerKeys = await d.keys.publishedGrantKeys(now);
    const revokedGrants = await d.store.listRevokedGrantIds(now);
    const root = await d.keys.rootSigner();
    const scopeKey = canonicalize(scope);
    // Taken last, right before signing: a failure after this leaves a gap, never a repeat.
    const sequence = await d.store.nextBundleSequence(scopeKey);
    const bundle = await createTrustBundle(
      { sequence, scope, issuers: [{ issuer: d.issuer, keys: issuerKeys }], revokedGrants, expiresAt: body['expiresAt'] as string },
      { signingKey: root.signer, keyId: root.kid, issuer: d.issuer, now: d.now },
    );
    await d.store.putBundle({
      bundleId: bundle.bundleId, scopeKey, scope, sequence, issuedAt: bundle.issuedAt, expiresAtMs, bundle: JSON.stringify(bundle),
    });
    await d.audit.record(actorOf(ctx.state), 'bundle.issue', bundle.bundleId, { scope, sequence, revoked: revokedGrants.length });
    ctx.status = 201;
    ctx.body = bundle;
  });

  router.get('/trust-bundles', async (ctx) => {
    const filter: BundleScopeFields = {};
    for (const [k, max] of Object.entries(SCOPE_LIMITS) as Array<[keyof BundleScopeFields, number]>) {
      const v = ctx.query[k];
      if (v !== undefined) filter[k] = scopeValue(v, k, max);
    }
    const rows = await d.store.latestBundles(filter, d.now());
    ctx.set('Cache-Control', 'public, max-age=30');
    ctx.body = { bundles: rows.map((r) => JSON.parse(r.bundle)) };
  });
}
