/**
 * The admin's view of a service's durable events, at the same paths in both services: the
 * hash-chained audit log (GET /admin/audit, GET /admin/audit/verify) and the webhook outbox as
 * the dispatch log (GET /admin/webhooks/dispatches?status=pending|delivered|failed; `failed` is
 * the dead letter), with POST /admin/webhooks/dispatches/{id}/redeliver to send a dead letter
 * again (same webhook-id). GET /admin/anchors lists the chain outbox (anchors of the log's signed
 * checkpoint, or of the audit chain's head when the log is off; revocation tokens:
 * service-kit/anchor/) and the heads of the logs anchored, what `ctl anchor verify --service`
 * checks on the chains.
 *
 * `deprecatedAuditPath` also answers the audit routes at an older path for one release, with a
 * `Deprecation` header (RFC 9745) and a `Link` to the successor (RFC 8288).
 */
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { badRequest, notFound } from './http-error.js';
import type { AuditLog } from './audit-log.js';
import type { DispatchLog } from './webhook-outbox.js';
import type { AnchorSource, ChainOutbox } from './anchor/outbox.js';
import type { ChainJobStatus } from './anchor/store.js';

export const AUDIT_PATH = '/admin/audit';

export interface EventAdminDeps {
  /** Admits admins only (requireScope(authenticate, 'admin')). */
  admin: Middleware;
  audit: Pick<AuditLog, 'list' | 'verify'>;
  dispatches: Pick<DispatchLog, 'list'>;
  /** Sends a dead letter again; false when there is none by that id (no outbox: always false). */
  redeliver(id: string): Promise<boolean>;
  /** An older path of the audit routes, still answered (deprecated). */
  deprecatedAuditPath?: string;
  /** The chain outbox and the logs it anchors (none: GET /admin/anchors answers empty lists). */
  anchors?: { outbox: Pick<ChainOutbox, 'list'>; sources: AnchorSource[] };
}

const JOB_STATUSES: readonly ChainJobStatus[] = ['pending', 'sent', 'confirmed', 'superseded'];

function count(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[0-9]{1,15}$/.test(value))
    throw badRequest(`${field}: must be a non-negative integer`);
  return Number(value);
}

/**
 * Mounts the four routes (and the deprecated audit path, if any) on `router`.
 * @example eventAdminRoutes(router, { admin, audit, dispatches: outbox.log, redeliver: (id) => outbox.redeliver(id) })
 */
export function eventAdminRoutes(router: Router, d: EventAdminDeps): void {
  const auditPage: Middleware = async (ctx) => {
    const entries = await d.audit.list({
      afterSeq: count(ctx.query['afterSeq'], 'afterSeq', 0),
      limit: count(ctx.query['limit'], 'limit', 100),
    });
    ctx.body = {
      entries: entries.map((e) => ({ ...e, data: JSON.parse(e.data) })),
      next: entries.length ? entries[entries.length - 1].seq : null,
    };
  };
  const auditVerify: Middleware = async (ctx) => {
    ctx.body = await d.audit.verify();
  };
  router.get(AUDIT_PATH, d.admin, auditPage);
  router.get(`${AUDIT_PATH}/verify`, d.admin, auditVerify);

  const old = d.deprecatedAuditPath;
  if (old) {
    const deprecated =
      (successor: string): Middleware =>
      async (ctx, next) => {
        ctx.set('Deprecation', 'true');
        ctx.set('Link', `<${successor}>; rel="successor-version"`);
        await next();
      };
    router.get(old, deprecated(AUDIT_PATH), d.admin, auditPage);
    router.get(`${old}/verify`, deprecated(`${AUDIT_PATH}/verify`), d.admin, auditVerify);
  }

  router.get('/admin/webhooks/dispatches', d.admin, async (ctx) => {
    const status = ctx.query['status'];
    if (status !== undefined && status !== 'pending' && status !== 'delivered' && status !== 'failed')
      throw badRequest('status: pending, delivered or failed');
    ctx.body = {
      dispatches: await d.dispatches.list({ status, limit: count(ctx.query['limit'], 'limit', 100) }),
    };
  });

  router.get('/admin/anchors', d.admin, async (ctx) => {
    const status = ctx.query['status'];
    if (status !== undefined && !(JOB_STATUSES as readonly unknown[]).includes(status))
      throw badRequest(`status: ${JOB_STATUSES.join(', ')}`);
    const kind = ctx.query['kind'];
    if (kind !== undefined && kind !== 'anchor' && kind !== 'revocation')
      throw badRequest('kind: anchor or revocation');
    const limit = count(ctx.query['limit'], 'limit', 100);
    const a = d.anchors;
    ctx.body = {
      logs: a
        ? await Promise.all(
            a.sources.map(async (s) => {
              const now = await s.read();
              return {
                origin: s.origin,
                source: s.source,
                head: now?.head ?? null,
                ...(now?.checkpoint ? { checkpoint: now.checkpoint } : {}),
              };
            }),
          )
        : [],
      jobs: a ? await a.outbox.list({ status: status as ChainJobStatus | undefined, kind, limit }) : [],
    };
  });

  router.post('/admin/webhooks/dispatches/:id/redeliver', d.admin, async (ctx) => {
    const id = String(ctx.params['id']);
    if (!/^[A-Za-z0-9._:-]{1,200}$/.test(id)) throw badRequest('id: a dispatch id');
    if (!(await d.redeliver(id))) throw notFound(`no dead-lettered delivery '${id}'`);
    ctx.status = 202;
    ctx.body = { id, status: 'pending' };
  });
}
