/**
 * Trust Bundles (spec §2.7, §4.3; PROTOCOL.md §4): signed by the root key, carrying the
 * authority's grant keys and the revoked grant ids, with a sequence that only grows per scope.
 */
import type Router from '@koa/router';
import { badRequest, requireScope } from '../../service-kit/index.js';
import { canonicalize, createTrustBundle, type PublishedJwk } from '../../src/index.js';
import { closedObject, futureTimestamp, optional, required, scopeValue } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import { grantKeysFrom } from '../keys.js';
import type { BundleScopeFields, PublishedKeyRow } from '../store/types.js';
import { humanIssuers, listedHumans } from './humans.js';

const SCOPE_LIMITS = { category: 128, merchant: 256, region: 128 } as const;

/** A bundle's issuer carries at most 64 keys (the bundle's shape, src/artifacts/bundle.ts). */
export const MAX_ISSUER_KEYS = 64;

/**
 * The authority's grant keys a bundle carries: every published one (keys.ts grantKeysFrom), or,
 * past MAX_ISSUER_KEYS (many rotations while their grants live), the held keys and then the
 * retired ones whose grants run longest. Grants of a key left out are refused offline (never
 * trusted by mistake) and still verify online through the JWKS; the bundle is issued either way.
 */
export function bundleGrantKeys(rows: PublishedKeyRow[], nowMs: number): { keys: PublishedJwk[]; left: number } {
  const keys = grantKeysFrom(rows, nowMs);
  if (keys.length <= MAX_ISSUER_KEYS) return { keys, left: 0 };
  const runsUntil = new Map(rows.map((r) => [r.kid, r.lastGrantExpiryMs ?? 0]));
  const rank = (k: PublishedJwk) => (k.status === 'active' ? Infinity : (runsUntil.get(k.kid) ?? 0));
  const kept = new Set([...keys].sort((a, b) => rank(b) - rank(a)).slice(0, MAX_ISSUER_KEYS));
  return { keys: keys.filter((k) => kept.has(k)), left: keys.length - MAX_ISSUER_KEYS };
}

export function readScope(value: unknown, field: string): BundleScopeFields {
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
    if (expiresAtMs - now > d.maxBundleTtlMs)
      throw badRequest(`expiresAt: at most ${Math.round(d.maxBundleTtlMs / 86_400_000)} days ahead`);
    // The root at version 1, else a bundle key of the newest published root version (PROTOCOL.md §11).
    const root = await d.trustRoot.bundleSigner();
    const scopeKey = canonicalize(scope);
    // One unit per scope (store.issueBundle): sequence, then keys and revocations, signed and
    // stored before the next bundle of this scope may take its sequence. A higher sequence
    // therefore never carries fewer revocations or older keys. A failure leaves a gap, never a repeat.
    let revokedCount = 0;
    let peopleLeftOut = 0;
    let keysLeftOut = 0;
    const record = await d.store.issueBundle(
      scopeKey,
      now,
      async ({ sequence, revokedGrantIds, signingKeys, humans }) => {
        revokedCount = revokedGrantIds.length;
        peopleLeftOut = listedHumans(humans, scope).left;
        const { keys: issuerKeys, left } = bundleGrantKeys(signingKeys, now);
        keysLeftOut = left;
        const signed = await createTrustBundle(
          {
            sequence,
            scope,
            issuers: [{ issuer: d.issuer, keys: issuerKeys }, ...humanIssuers(humans, scope)],
            revokedGrants: revokedGrantIds,
            expiresAt: body['expiresAt'] as string,
          },
          { signingKey: root.signer, keyId: root.kid, issuer: d.issuer, now: d.now },
        );
        return {
          bundleId: signed.bundleId,
          scope,
          issuedAt: signed.issuedAt,
          expiresAtMs,
          bundle: JSON.stringify(signed),
        };
      },
      (q, r) =>
        d.audit.entry(actorOf(ctx.state), 'bundle.issue', r.bundleId, {
          scope,
          sequence: r.sequence,
          revoked: revokedCount,
          ...(peopleLeftOut ? { peopleLeftOut } : {}),
          ...(keysLeftOut ? { keysLeftOut } : {}),
        })(q, r),
    );
    const bundle = JSON.parse(record.bundle) as { bundleId: string };
    d.counters.bundleIssued();
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
