/**
 * What verifiers fetch (issue 4 §5, spec §4.1): the JWKS (grant and receipt keys, active and
 * retired), the Trust Bundle signed by the gateway's bundle root, and the revocation check
 * every internal grant names (PROTOCOL.md §5 step 3: `{ grantId, revoked, revokedAt? }`).
 */
import Router from '@koa/router';
import { createTrustBundle, formatTimestamp } from '../../src/index.js';
import { notFound, badRequest, type SqlDatabase } from '../../service-kit/index.js';
import { sessionByGrantId } from '../store/sessions.js';
import type { KeyRing } from '../services/keys.js';

const BUNDLE_LIFETIME_MS = 24 * 3600_000;
const BUNDLE_REFRESH_MS = 60_000;

export function keyRoutes(o: { db: SqlDatabase; keys: KeyRing; issuer: string; now: () => number }) {
  const r = new Router();
  let bundle: { at: number; kids: string; value: unknown } | undefined;

  const published = async () =>
    (await o.keys.all())
      .filter((k) => k.purpose !== 'bundle')
      .map((k) => ({ ...k.publicJwk, kid: k.kid, alg: 'EdDSA', purposes: [k.purpose], status: k.status }));

  r.get('/.well-known/ctl-keys.json', async (ctx) => {
    ctx.set('Cache-Control', 'max-age=60');
    ctx.body = { keys: await published() };
  });

  r.get('/.well-known/ctl-trust-bundle.json', async (ctx) => {
    const keys = await published();
    const kids = keys.map((k) => `${k.kid}:${k.status}`).join(',');
    if (!bundle || bundle.kids !== kids || o.now() - bundle.at > BUNDLE_REFRESH_MS) {
      const root = await o.keys.active('bundle');
      const revoked = await o.db.all<{ grant_id: string }>(
        `SELECT grant_id FROM gw_sessions WHERE state = 'revoked' AND expires_at > ? ORDER BY ended_at DESC LIMIT 1000`,
        [o.now()],
      );
      const at = o.now();
      bundle = {
        at,
        kids,
        value: await createTrustBundle(
          {
            sequence: Math.floor(at / 1000), // only grows, as PROTOCOL.md §4 asks
            scope: {},
            issuers: [{ issuer: o.issuer, keys: keys.map(({ status: _s, ...k }) => k) as any }],
            revokedGrants: revoked.map((x) => x.grant_id),
            expiresAt: formatTimestamp(at + BUNDLE_LIFETIME_MS),
          },
          { signingKey: root.signingKey, keyId: root.kid, issuer: o.issuer, now: o.now },
        ),
      };
    }
    ctx.set('Cache-Control', 'max-age=60');
    ctx.body = bundle.value;
  });

  r.get('/.well-known/ctl-bundle-root.json', async (ctx) => {
    const root = await o.keys.active('bundle');
    ctx.body = { keys: [{ ...root.publicJwk, kid: root.kid, alg: 'EdDSA', purposes: ['bundle'] }] };
  });

  r.get('/revoke', async (ctx) => {
    const grantId = ctx.query.grantId;
    if (typeof grantId !== 'string' || !grantId) throw badRequest('grantId: required');
    const s = await sessionByGrantId(o.db, grantId);
    if (!s) throw notFound(`no grant '${grantId}'`);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { grantId, revoked: s.state === 'revoked', ...(s.state === 'revoked' && s.endedAt ? { revokedAt: formatTimestamp(s.endedAt) } : {}) };
  });
  return r;
}
