/**
 * The egress CA for the people who install it: `GET /ca.pem` (any budget owner: their agents must
 * trust it) and `POST /admin/egress/ca/rotate` (the admin: a new CA for every agent of every owner).
 */
import Router from '@koa/router';
import { ADMIN_SCOPE, requireScope, type Authenticate } from '../../service-kit/index.js';
import { OWNER_SCOPE } from '../owners/auth.js';
import type { EgressCa } from './ca.js';

export function caRoutes(r: Router, o: { auth: Authenticate; ca: EgressCa }): void {
  r.get('/ca.pem', requireScope(o.auth, OWNER_SCOPE), async (ctx) => {
    ctx.type = 'application/x-pem-file';
    ctx.set('X-Ctl-Ca-Fingerprint', await o.ca.fingerprint());
    ctx.body = await o.ca.certPem();
  });
  r.post('/admin/egress/ca/rotate', requireScope(o.auth, ADMIN_SCOPE), async (ctx) => {
    ctx.body = { fingerprint: await o.ca.rotate() };
  });
}
