/** POST /policies (spec §4.3): `{ policy }` → `{ policyHash, storedAt }`; the same document twice is one policy. */
import type Router from '@koa/router';
import { badRequest, requireScope } from '../../service-kit/index.js';
import { canonicalize, policyHash } from '../../src/index.js';
import { closedObject, required } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';

export function policyRoutes(router: Router, d: RouteDeps): void {
  router.post('/policies', requireScope(d.authenticate, 'policies:write'), d.body, async (ctx) => {
    const body = closedObject(ctx.request.body, 'body', ['policy']);
    const policy = required(body, 'policy');
    if (typeof policy !== 'object' || Array.isArray(policy)) throw badRequest('policy: must be a JSON object');
    // PROTOCOL.md §2: policyHash = hex(SHA-256(JCS(policy document))); the stored text is that JCS.
    const hash = policyHash(policy);
    const stored = await d.store.putPolicy(
      hash,
      canonicalize(policy),
      new Date(d.now()).toISOString(),
      d.audit.entry(actorOf(ctx.state), 'policy.store', hash, {}, (r) => r.created),
    );
    ctx.status = stored.created ? 201 : 200;
    ctx.body = { policyHash: stored.policyHash, storedAt: stored.storedAt };
  });

  router.get('/policies/:policyHash', requireScope(d.authenticate, 'policies:write'), async (ctx) => {
    const found = await d.store.getPolicy(String(ctx.params['policyHash']));
    if (!found) ctx.throw(404, 'no such policy');
    ctx.body = { policyHash: found!.policyHash, storedAt: found!.storedAt, policy: JSON.parse(found!.document) };
  });
}
