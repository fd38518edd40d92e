/**
 * Session lifecycle (spec §3, §4.1): creation mints the internal PolicyGrant (spec §2.3) and a
 * per-session actor key (the "wallet session per gateway session" of spec §1), revocation and
 * continuation are single conditional UPDATEs in the store, and the view hides secrets. Its
 * parts, each its own module: an owner's session (create.ts) and a child session
 * (create-child.ts), both with their grant (grant.ts); the views (views.ts) and a session's
 * family (family.ts); revocation (revoke.ts), continuation (continue.ts), look-ups (lookup.ts).
 */
import { bearerToken, type SqlDatabase } from '../../service-kit/index.js';
import type { CurrentWindows, SessionRecord } from './store.js';
import type { TargetPolicy } from '../net/address-guard.js';
import type { KeyRing } from '../keys/ring.js';
import { DERIVED_MARKER, type SessionKeys } from './actor-keys.js';
import type { GatewayEvents } from './events.js';
import { prepareHumanSessionKey, type HumanTrust } from './human.js';
import { createSessionViews } from './views.js';
import { createSessionFamily } from './family.js';
import { createRootSession } from './create.js';
import { createChildSession } from './create-child.js';
import { createRevocation } from './revoke.js';
import { continuePausedSession } from './continue.js';
import { createSessionLookup } from './lookup.js';

export { hashToken } from './tokens.js';

/**
 * The session token of an Authorization header, or undefined: `Bearer gw_sess_…`, the scheme in
 * any case (RFC 9110 §11.1), the token exactly as issued.
 * @example sessionTokenOf('bearer gw_sess_abc') // 'gw_sess_abc'
 */
export function sessionTokenOf(header: string | undefined): string | undefined {
  const token = bearerToken(header);
  return token && /^gw_sess_[A-Za-z0-9_-]{1,128}$/.test(token) ? token : undefined;
}

export interface SessionServiceDeps {
  db: SqlDatabase;
  currentWindows: CurrentWindows;
  keys: KeyRing;
  /** Derives each session's actor key (nothing stored). */
  sessionKeys: SessionKeys;
  events: GatewayEvents;
  issuer: string;
  railName: string;
  /** Further rails payments of a session may use (x402), named in its grant's allowedRails. */
  extraRails?: string[];
  continuationSecret: Buffer;
  targets: TargetPolicy;
  /** Where people's grants may come from (sessions/human.ts); absent: none accepted. */
  humans?: HumanTrust;
  now: () => number;
  onCreated?: (expiresAt: number) => void;
  /** How far ahead `expiresAt` may be, in seconds (config.ts; default none). */
  maxSessionSeconds?: number;
  /** How many levels of child sessions below a root session (PROTOCOL.md §14; default 4). */
  maxSessionDepth?: number;
}

export function createSessionService(deps: SessionServiceDeps) {
  const { db, now } = deps;
  const { owned, byId, byToken } = createSessionLookup(db);
  const { view, views, detail, agentView, windowsOf } = createSessionViews(deps);
  const { tree, ancestorStop } = createSessionFamily(deps, views);
  const { revoke, revokedEvents } = createRevocation(deps, views);

  // A person's grant names a key this gateway derives from the reserved session id, as it does for
  // every session: nothing private is stored for it (README "Secrets at rest").
  const humanDeps = {
    db,
    targets: deps.targets,
    humans: deps.humans,
    now,
    onCreated: deps.onCreated,
    maxSessionSeconds: deps.maxSessionSeconds,
    events: deps.events,
    keySource: async (id: string) => ({
      publicJwk: (await deps.sessionKeys.derive(id)).publicJwk,
      stored: DERIVED_MARKER,
    }),
  };

  return {
    view,
    views,
    detail,
    /**
     * A child session for a sub-agent (PROTOCOL.md §14), made by the holder of `parent`'s token:
     * its configuration narrows the parent's (child-config.ts).
     */
    createChild: (parent: SessionRecord, body: unknown, baseUrl: string) =>
      createChildSession(deps, parent, body, baseUrl),
    tree,
    ancestorStop,
    agentView,
    windowsOf,

    /** An owner's new session (POST /sessions); a person's grant backs it instead of a budget. */
    create: (ownerId: string, body: unknown, baseUrl: string) =>
      createRootSession(deps, humanDeps, ownerId, body, baseUrl),

    /** A session key for a person to delegate to (POST /sessions/human/keys). */
    prepareHumanKey: (ownerId: string) => prepareHumanSessionKey(humanDeps, ownerId),

    owned,
    byId,
    byToken,
    revoke,

    /** The effect recording sessions revoked by another change (an owner disabled), in its transaction. */
    revokedEvents,

    /** spec §3 paused row: a valid unused token raises the ceiling by at most softLimit.amount. */
    continue: (s: SessionRecord, body: unknown, baseUrl: string) =>
      continuePausedSession(deps, views, s, body, baseUrl),
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
