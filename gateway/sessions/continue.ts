/**
 * The owner's continuation of a paused session (spec §3 paused row): a valid unused continuation
 * token (continuation.ts) raises the ceiling by at most softLimit.amount, or, for a pause by a
 * window's soft limit, that window alone (PROTOCOL.md §13). Each is one conditional UPDATE in the
 * store, so a token is used once.
 */
import { formatTimestamp, CtlError } from '../../src/index.js';
import { changeWith, closedBody, type SqlDatabase } from '../../service-kit/index.js';
import { sessionById, continueSession, continueWindow, type SessionRecord } from './store.js';
import { MAX_AMOUNT } from '../../service-kit/amount.js';
import { continuationNonce } from './continuation.js';
import type { GatewayEvents } from './events.js';
import { mintSessionGrant, type GrantMinting } from './grant.js';
import type { SessionViews } from './views.js';

/** What a continuation needs of the gateway. */
export interface ContinuationDeps extends GrantMinting {
  db: SqlDatabase;
  events: GatewayEvents;
  continuationSecret: Buffer;
}

/**
 * A session paused by a window's soft limit: the owner's continuation raises that window alone,
 * by at most softLimit.amount, until it ends (the next window has the configured limit again).
 */
async function continueWindowPause(
  deps: ContinuationDeps,
  views: SessionViews['views'],
  s: SessionRecord,
  nonce: string,
  raise: bigint,
) {
  const { db, now } = deps;
  const w = s.pausedWindow!;
  const ok = await changeWith(
    db,
    (q) => continueWindow(q, { id: s.id, nonce, window: w, raise, now: now() }),
    deps.events.effect((done: boolean) =>
      done
        ? [
            {
              session: s,
              type: 'session.continued',
              data: { window: w.every, raisedMinor: raise.toString(), resetsAt: formatTimestamp(w.endsAt) },
              actor: 'agent',
            },
          ]
        : [],
    ),
  );
  if (!ok)
    throw new CtlError('continuation_invalid', 'the continuation token has been used, or the session is not paused');
  return (await views([(await sessionById(db, s.id))!]))[0]!;
}

/**
 * `s` active again after the body's `{ continuationToken, amount? }`, as its owner's view.
 * @example await continuePausedSession(deps, views, s, { continuationToken }, baseUrl) // { state: 'active', … }
 */
export async function continuePausedSession(
  deps: ContinuationDeps,
  views: SessionViews['views'],
  s: SessionRecord,
  body: unknown,
  baseUrl: string,
) {
  const { db, now } = deps;
  const b = closedBody(body, ['continuationToken', 'amount']);
  for (const k of Object.keys(b))
    if (b[k] === null) throw new CtlError('malformed', `${k}: must not be null (omit it instead)`);
  const nonce = continuationNonce(deps.continuationSecret, s.id, b.continuationToken);
  if (!nonce || s.softLimit === null)
    throw new CtlError('continuation_invalid', 'the continuation token is not valid for this session');
  let raise = s.softLimit;
  if (b.amount !== undefined) {
    if (typeof b.amount !== 'string' || !/^[1-9][0-9]{0,17}$/.test(b.amount))
      throw new CtlError('malformed', 'amount: must be a positive decimal string');
    if (BigInt(b.amount) > s.softLimit)
      throw new CtlError('malformed', `amount: at most softLimit.amount (${s.softLimit} minor units of ${s.currency})`);
    raise = BigInt(b.amount);
  }
  const newCeiling = s.ceiling + raise;
  if (newCeiling > MAX_AMOUNT) throw new CtlError('malformed', 'the raised ceiling would be too large');
  const config = s.config;
  const actorJwk = s.grant.actorKey;
  if (s.pausedWindow) return continueWindowPause(deps, views, s, nonce, raise);
  const grant = await mintSessionGrant(
    deps,
    {
      grantId: s.grantId,
      policyHash: s.policyHash,
      config,
      ceiling: newCeiling,
      actorJwk,
      windowsStart: s.windowsStart,
    },
    baseUrl,
  );
  const ok = await changeWith(
    db,
    (q) => continueSession(q, { id: s.id, nonce, oldCeiling: s.ceiling, newCeiling, grant, now: now() }),
    deps.events.effect((done: boolean) =>
      done
        ? [
            {
              session: s,
              type: 'session.continued',
              data: { ceilingMinor: newCeiling.toString(), raisedMinor: raise.toString() },
              actor: 'agent',
            },
          ]
        : [],
    ),
  );
  if (!ok)
    throw new CtlError('continuation_invalid', 'the continuation token has been used, or the session is not paused');
  return (await views([(await sessionById(db, s.id))!]))[0]!;
}
