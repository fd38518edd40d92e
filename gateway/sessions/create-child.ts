/**
 * A child session for a sub-agent (PROTOCOL.md §14), made by the holder of the parent's token:
 * its configuration narrows the parent's (child-config.ts), its grant is minted like any session's.
 */
import { randomBytes } from 'node:crypto';
import { policyHash, CtlError } from '../../src/index.js';
import { changeWith, type SqlDatabase } from '../../service-kit/index.js';
import { insertSession, effectiveState, type SessionRecord } from './store.js';
import { parseChildConfig } from './child-config.js';
import { DERIVED_MARKER, type SessionKeys } from './actor-keys.js';
import type { GatewayEvents } from './events.js';
import { mintSessionGrant, type GrantMinting } from './grant.js';
import { hashToken } from './tokens.js';

/** What making a child session needs of the gateway. */
export interface ChildSessionDeps extends GrantMinting {
  db: SqlDatabase;
  /** Derives each session's actor key (nothing stored). */
  sessionKeys: SessionKeys;
  events: GatewayEvents;
  onCreated?: (expiresAt: number) => void;
  /** How many levels of child sessions below a root session (PROTOCOL.md §14; default 4). */
  maxSessionDepth?: number;
}

/**
 * A child session of `parent`, with its token (shown once). Inserted while the parent row is
 * share-locked and still live, so a revocation of the parent either comes after and stops it
 * too, or makes this refuse; payments check every ancestor anyway (payments/store/counters.ts).
 * @example await createChildSession(deps, parent, { budget: { amount: '500' } }, baseUrl) // { sessionToken, … }
 */
export async function createChildSession(
  deps: ChildSessionDeps,
  parent: SessionRecord,
  body: unknown,
  baseUrl: string,
) {
  const { db, now } = deps;
  const at = now();
  const state = effectiveState(parent, at);
  if (state === 'revoked') throw new CtlError('session_revoked', 'the session has been revoked');
  if (state === 'expired') throw new CtlError('session_expired', 'the session has expired');
  if (parent.grant.profile === 'human-agent')
    throw new CtlError(
      'unsupported_feature',
      "a session under a person's grant has no child sessions on this gateway: " +
        'the person delegates with a signed delegation',
    );
  const maxDepth = deps.maxSessionDepth ?? 4;
  if (parent.depth + 1 > maxDepth)
    throw new CtlError(
      'delegation_invalid',
      `depth: at most ${maxDepth} levels of child sessions below a root session`,
    );
  const c = parseChildConfig(parent, body, at);
  const id = `sess_${randomBytes(16).toString('base64url')}`;
  const grantId = `grant_${randomBytes(16).toString('base64url')}`;
  const token = `gw_sess_${randomBytes(32).toString('base64url')}`;
  const hash = policyHash(c.config);
  const actor = await deps.sessionKeys.derive(id);
  const grant = await mintSessionGrant(
    deps,
    {
      grantId,
      policyHash: hash,
      config: c.config,
      ceiling: c.ceiling,
      actorJwk: actor.publicJwk,
      windowsStart: c.windowsStart,
    },
    baseUrl,
  );
  const inserted = await changeWith(
    db,
    async (t) => {
      const share = t.dialect === 'postgres' ? ' FOR SHARE' : '';
      const live = await t.get(
        `SELECT id FROM gw_sessions WHERE id = ? AND state IN ('active', 'paused') AND expires_at > ?${share}`,
        [parent.id, at],
      );
      if (!live) return false;
      await insertSession(t, {
        id,
        ownerId: parent.ownerId,
        tokenHash: hashToken(token),
        label: c.config.label,
        currency: parent.currency,
        ceiling: c.ceiling,
        expiresAt: c.expiresAt,
        createdAt: at,
        config: c.config,
        policyHash: hash,
        grantId,
        grant,
        actorKeyPem: DERIVED_MARKER,
        softLimit: null,
        maxPerHour: c.config.velocity?.maxPaymentsPerHour ?? null,
        maxPerMerchantDay: c.config.velocity?.maxAmountPerMerchantPerDay
          ? BigInt(c.config.velocity.maxAmountPerMerchantPerDay)
          : null,
        // The owner's webhook hears the child's events, each naming the session that paid.
        webhookUrl: parent.webhookUrl,
        webhookSecret: parent.webhookSecret,
        thresholds: [],
        parentId: parent.id,
        path: `${parent.path}${id}/`,
        depth: parent.depth + 1,
        windowsStart: c.windowsStart,
      });
      return true;
    },
    deps.events.effect((ok: boolean) =>
      ok
        ? [
            {
              session: { id, webhookUrl: null },
              type: 'session.created',
              data: {
                ownerId: parent.ownerId,
                parentId: parent.id,
                policyHash: hash,
                grantId,
                budget: c.config.budget,
              },
              actor: 'agent',
            },
          ]
        : [],
    ),
  );
  if (!inserted) throw new CtlError('session_revoked', 'the session has been revoked or has ended');
  deps.onCreated?.(c.expiresAt);
  return {
    sessionToken: token,
    sessionId: id,
    revocationUrl: `${baseUrl}/sessions/${id}`,
    policyHash: hash,
    grantId,
    expiresAt: c.config.expiresAt,
    parentId: parent.id,
    depth: parent.depth + 1,
  };
}
