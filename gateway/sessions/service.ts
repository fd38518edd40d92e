/**
 * Session lifecycle (spec §3, §4.1): creation mints the internal PolicyGrant (spec §2.3) and a
 * per-session actor key (the "wallet session per gateway session" of spec §1), revocation and
 * continuation are single conditional UPDATEs in the store, and the view hides secrets.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createSignedPolicyGrant, policyHash, formatTimestamp, CtlError, type PublicJwk } from '../../src/index.js';
import {
  bearerToken,
  changeWith,
  idleCache,
  closedBody,
  generateWebhookSecret,
  notFound,
  unauthorized,
  type SqlDatabase,
  type SqlExecutor,
} from '../../service-kit/index.js';
import {
  insertOwnedSession,
  insertSession,
  descendantsOf,
  chainOf,
  sessionById,
  sessionByTokenHash,
  revokeSession,
  continueSession,
  effectiveState,
  continueWindow,
  type SessionRecord,
  type SessionWindow,
  type RevokedBy,
} from './store.js';
import { parseChildConfig } from './child-config.js';
import { heldBy, type Held } from './states.js';
import { parseSessionConfig, type SessionConfig } from './config.js';
import { MAX_AMOUNT } from '../../service-kit/amount.js';
import { continuationToken, continuationNonce } from './continuation.js';
import { checkTargetUrl, type TargetPolicy } from '../net/address-guard.js';
import type { KeyRing } from '../keys/ring.js';
import { DERIVED_MARKER, type SessionKeys } from './actor-keys.js';
import type { GatewayEvents } from './events.js';
import { createHumanSession, isHumanSessionRequest, prepareHumanSessionKey, type HumanTrust } from './human.js';

export const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/**
 * The session token of an Authorization header, or undefined: `Bearer gw_sess_…`, the scheme in
 * any case (RFC 9110 §11.1), the token exactly as issued.
 * @example sessionTokenOf('bearer gw_sess_abc') // 'gw_sess_abc'
 */
export function sessionTokenOf(header: string | undefined): string | undefined {
  const token = bearerToken(header);
  return token && /^gw_sess_[A-Za-z0-9_-]{1,128}$/.test(token) ? token : undefined;
}

/** One window of a session as it stands now (PROTOCOL.md §13), as the money store reads it. */
export interface WindowStanding {
  every: SessionWindow['every'];
  startsAt: number;
  endsAt: number;
  maxAmount: bigint;
  maxPayments: bigint | null;
  spent: bigint;
  reserved: bigint;
  payments: bigint;
}

export interface SessionServiceDeps {
  db: SqlDatabase;
  /**
   * Reads each window's standing (payments/store/counters.ts currentWindows): the window rows are
   * the money store's, which sits above this room, so the app hands the reader in.
   */
  currentWindows: (
    q: SqlExecutor,
    s: { id: string; windows: SessionWindow[]; windowsStart: number },
    now: number,
  ) => Promise<WindowStanding[]>;
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

function assetOf(currency: string) {
  // ISO 4217 codes are three letters; anything else (USDC, …) is a token asset code.
  return { standard: /^[A-Z]{3}$/.test(currency) ? 'iso4217' : 'token', code: currency };
}

export function createSessionService(deps: SessionServiceDeps) {
  const { db, keys, now } = deps;
  // The immutable part of each session in use, by token hash (service-kit/idle-cache.ts).
  const byTokenCache = idleCache<string, { version: string; record: SessionRecord }>();

  async function mintGrant(
    s: {
      grantId: string;
      policyHash: string;
      config: SessionConfig;
      ceiling: bigint;
      actorJwk: PublicJwk;
      windowsStart: number | null;
    },
    baseUrl: string,
  ) {
    const gk = await keys.active('grant');
    return await createSignedPolicyGrant(
      {
        grantId: s.grantId,
        policyHash: s.policyHash,
        expiresAt: s.config.expiresAt,
        allowedRails: [deps.railName, ...(deps.extraRails ?? [])],
        allowedAssets: [assetOf(s.config.budget.currency)],
        allowedPurposes: s.config.purposes,
        maxAmountMinor: s.ceiling.toString(),
        currency: s.config.budget.currency,
        actorKey: s.actorJwk,
        ...(s.config.velocity && Object.keys(s.config.velocity).length ? { velocity: s.config.velocity } : {}),
        ...(s.config.windows && s.windowsStart !== null
          ? { windows: s.config.windows, windowsStart: formatTimestamp(s.windowsStart) }
          : {}),
      },
      { issuer: deps.issuer, keyId: gk.kid, signingKey: gk.signingKey, revocationBaseUrl: baseUrl, now },
    );
  }

  /**
   * The owner's view; the continuation token only while paused. `held`: the paused or stopped
   * ancestor whose state this session's payments meet (heldBy), which is then its `state`.
   */
  function view(s: SessionRecord, held?: Held) {
    const state = held?.state ?? effectiveState(s, now());
    const c = s.config;
    const remaining = s.ceiling - s.spent - s.reserved;
    return {
      sessionId: s.id,
      label: s.label,
      state,
      budget: { amount: s.ceiling.toString(), currency: s.currency },
      purposes: c.purposes,
      ...(c.defaultPurpose ? { defaultPurpose: c.defaultPurpose } : {}),
      expiresAt: c.expiresAt,
      createdAt: formatTimestamp(s.createdAt),
      spentMinor: s.spent.toString(),
      reservedMinor: s.reserved.toString(),
      remainingMinor: (remaining > 0n ? remaining : 0n).toString(),
      merchantAllowlist: c.merchantAllowlist,
      merchantBlocklist: c.merchantBlocklist,
      ...(c.velocity ? { velocity: c.velocity } : {}),
      ...(c.softLimit ? { softLimit: c.softLimit } : {}),
      ...(c.webhookUrl ? { webhookUrl: c.webhookUrl } : {}),
      thresholds: c.thresholds,
      trustLevel: c.trustLevel,
      policyHash: s.policyHash,
      grantId: s.grantId,
      ...(s.parentId ? { parentId: s.parentId, depth: s.depth } : {}),
      ...(held ? { stateFrom: held.from } : {}),
      ...(state === 'paused' && s.pausedWindow
        ? { pausedWindow: { every: s.pausedWindow.every, resetsAt: formatTimestamp(s.pausedWindow.endsAt) } }
        : {}),
      ...(state === 'revoked' && s.revokedBy ? { revokedBy: s.revokedBy } : {}),
      ...(state === 'paused' && s.continuationNonce
        ? { continuationToken: continuationToken(deps.continuationSecret, s.id, s.continuationNonce) }
        : {}),
    };
  }

  /**
   * Each window as it stands now (PROTOCOL.md §13): its limits, what is spent and reserved in the
   * current window, and when it resets.
   */
  async function windowsOf(s: SessionRecord) {
    if (!s.config.windows?.length || s.windowsStart === null) return undefined;
    const rows = await deps.currentWindows(
      db,
      { id: s.id, windows: s.config.windows, windowsStart: s.windowsStart },
      now(),
    );
    return rows.map((w) => {
      const left = w.maxAmount - w.spent - w.reserved;
      return {
        every: w.every,
        maxAmountMinor: w.maxAmount.toString(),
        ...(w.maxPayments !== null ? { maxPayments: Number(w.maxPayments) } : {}),
        spentMinor: w.spent.toString(),
        reservedMinor: w.reserved.toString(),
        remainingMinor: (left > 0n ? left : 0n).toString(),
        payments: Number(w.payments),
        startedAt: formatTimestamp(w.startsAt),
        resetsAt: formatTimestamp(w.endsAt),
      };
    });
  }

  /** The views of `list`, each with the state its payments meet (heldBy). */
  async function views(list: SessionRecord[]) {
    const held = await heldBy(db, list, now());
    return list.map((x) => view(x, held.get(x.id)));
  }

  /** The owner's view with each window's standing (GET /sessions/{id}). */
  async function detail(s: SessionRecord) {
    const windows = await windowsOf(s);
    return { ...(await views([s]))[0]!, ...(windows ? { windows } : {}) };
  }

  /**
   * The agent's view of its own session (GET /session): the owner's view without what is the
   * owner's to hold: the continuation token (the owner's approval, spec §3 paused row) and the
   * webhook address.
   */
  async function agentView(s: SessionRecord) {
    const {
      continuationToken: _approval,
      webhookUrl: _hook,
      ...rest
    } = (await views([s]))[0]! as ReturnType<typeof view> & { continuationToken?: string; webhookUrl?: string };
    return rest;
  }

  /** Records the revocation of the sessions a change revoked, in its transaction. */
  const revokedEvents = (at: number, by: RevokedBy, reason?: string) =>
    deps.events.effect((revoked: SessionRecord[] | undefined) =>
      (revoked ?? []).map((s) => ({
        session: s,
        type: 'session.revoked' as const,
        data: { revokedAt: formatTimestamp(at), revokedBy: by, ...(reason ? { reason } : {}) },
        actor: by,
      })),
    );

  /**
   * A session paused by a window's soft limit: the owner's continuation raises that window alone,
   * by at most softLimit.amount, until it ends (the next window has the configured limit again).
   */
  async function continueWindowPause(s: SessionRecord, nonce: string, raise: bigint) {
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

  /**
   * A child session for a sub-agent (PROTOCOL.md §14), made by the holder of `parent`'s token:
   * its configuration narrows the parent's (child-config.ts). Inserted while the parent row is
   * share-locked and still live, so a revocation of the parent either comes after and stops it
   * too, or makes this refuse; payments check every ancestor anyway (payments/store/counters.ts).
   */
  async function createChild(parent: SessionRecord, body: unknown, baseUrl: string) {
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
    const grant = await mintGrant(
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

  /** A session and everything below it, each node with its spend (GET /sessions/{id}/tree). */
  async function tree(s: SessionRecord) {
    type Node = { session: ReturnType<typeof view>; children: Node[] };
    const all = [s, ...(await descendantsOf(db, s))];
    const shown = await views(all);
    const nodes = new Map<string, Node>();
    all.forEach((d, i) => {
      const node = { session: shown[i]!, children: [] };
      nodes.set(d.id, node);
      if (d !== s) nodes.get(d.parentId!)?.children.push(node);
    });
    return nodes.get(s.id)!;
  }

  /**
   * Why a child session cannot pay because of an ancestor (revoked, expired), read now: checked
   * before anything is forwarded, so no merchant is contacted for it (PROTOCOL.md §14).
   */
  async function ancestorStop(s: SessionRecord): Promise<CtlError | undefined> {
    if (s.parentId === null) return undefined;
    const ids = chainOf(s).slice(1);
    const rows = await db.all<{ id: string; state: string; expires_at: unknown }>(
      `SELECT id, state, expires_at FROM gw_sessions WHERE id IN (${ids.map(() => '?').join(', ')})`,
      ids,
    );
    const at = now();
    for (const id of ids) {
      const r = rows.find((x) => x.id === id);
      if (!r || r.state === 'revoked')
        return new CtlError('session_revoked', `its parent session ${id} has been revoked`);
      if (r.state === 'expired' || Number(r.expires_at) <= at)
        return new CtlError('session_expired', `its parent session ${id} has expired`);
    }
    return undefined;
  }

  return {
    view,
    views,
    detail,
    createChild,
    tree,
    ancestorStop,
    agentView,
    windowsOf,

    async create(ownerId: string, body: unknown, baseUrl: string) {
      // A person's signed grant backs the session instead of a budget (PROTOCOL.md §10).
      if (isHumanSessionRequest(body)) return createHumanSession(humanDeps, ownerId, body, baseUrl);
      const config = parseSessionConfig(body, now(), { maxSessionSeconds: deps.maxSessionSeconds });
      if (config.webhookUrl) {
        try {
          checkTargetUrl(config.webhookUrl, deps.targets);
        } catch (e) {
          throw new CtlError('target_not_allowed', `webhookUrl: ${(e as Error).message}`);
        }
      }
      const id = `sess_${randomBytes(16).toString('base64url')}`;
      const grantId = `grant_${randomBytes(16).toString('base64url')}`;
      const token = `gw_sess_${randomBytes(32).toString('base64url')}`;
      const hash = policyHash(config);
      const actor = await deps.sessionKeys.derive(id);
      const ceiling = BigInt(config.budget.amount);
      const createdAt = now();
      const windowsStart = config.windows ? (config.windowsStart ? Date.parse(config.windowsStart) : createdAt) : null;
      const grant = await mintGrant(
        { grantId, policyHash: hash, config, ceiling, actorJwk: actor.publicJwk, windowsStart },
        baseUrl,
      );
      const expiresAt = Date.parse(config.expiresAt);
      const inserted = await insertOwnedSession(
        db,
        {
          id,
          ownerId,
          tokenHash: hashToken(token),
          label: config.label,
          currency: config.budget.currency,
          ceiling,
          expiresAt,
          createdAt,
          windowsStart,
          config,
          policyHash: hash,
          grantId,
          grant,
          actorKeyPem: DERIVED_MARKER,
          softLimit: config.softLimit ? BigInt(config.softLimit.amount) : null,
          maxPerHour: config.velocity?.maxPaymentsPerHour ?? null,
          maxPerMerchantDay: config.velocity?.maxAmountPerMerchantPerDay
            ? BigInt(config.velocity.maxAmountPerMerchantPerDay)
            : null,
          webhookUrl: config.webhookUrl ?? null,
          webhookSecret: config.webhookUrl ? generateWebhookSecret() : null,
          thresholds: config.thresholds,
        },
        deps.events.effect((ok: boolean) =>
          ok
            ? [
                {
                  session: { id, webhookUrl: null },
                  type: 'session.created',
                  // The windows ride along so an outside audit (ctl log audit) can sum them.
                  data: {
                    ownerId,
                    policyHash: hash,
                    grantId,
                    expiresAt: config.expiresAt,
                    budget: config.budget,
                    ...(config.windows && windowsStart !== null
                      ? { windows: config.windows, windowsStart: formatTimestamp(windowsStart) }
                      : {}),
                  },
                  actor: 'owner',
                },
              ]
            : [],
        ),
      );
      if (!inserted) throw unauthorized('the owner of this API key has been disabled');
      deps.onCreated?.(expiresAt);
      const created = (await sessionById(db, id))!;
      return {
        sessionToken: token,
        sessionId: id,
        revocationUrl: `${baseUrl}/sessions/${id}`,
        policyHash: hash,
        grantId,
        expiresAt: config.expiresAt,
        ...(created.webhookSecret ? { webhookSecret: created.webhookSecret } : {}),
      };
    },

    /** A session key for a person to delegate to (POST /sessions/human/keys). */
    prepareHumanKey: (ownerId: string) => prepareHumanSessionKey(humanDeps, ownerId),

    /** The session of an owner, or 404 as if it did not exist. */
    async owned(ownerId: string, id: string): Promise<SessionRecord> {
      const s = await sessionById(db, id);
      if (!s || s.ownerId !== ownerId) throw notFound(`no session '${id}'`);
      return s;
    },

    /** Any session, for the admin; 404 when unknown. */
    async byId(id: string): Promise<SessionRecord> {
      const s = await sessionById(db, id);
      if (!s) throw notFound(`no session '${id}'`);
      return s;
    },

    /**
     * The session of an agent's token. Every call reads the live state, expiry and ceiling; the
     * large immutable parts (config, grant, keys) come from a cache keyed by id and ceiling, the
     * only mutable input of the grant (re-minted at continuation). `spent`/`reserved` of the
     * result may be stale: money decisions are made in the store (payments/store/payments.ts).
     */
    async byToken(token: string): Promise<SessionRecord | undefined> {
      const hash = hashToken(token);
      const live = await db.get<{ id: string; state: string; expires_at: unknown; ceiling: unknown }>(
        `SELECT id, state, expires_at, ceiling FROM gw_sessions WHERE token_hash = ?`,
        [hash],
      );
      if (!live) return undefined;
      const version = `${live.id}:${live.ceiling}`;
      let hit = byTokenCache.get(hash);
      if (!hit || hit.version !== version) {
        const full = await sessionByTokenHash(db, hash);
        if (!full) return undefined;
        hit = { version, record: full };
        byTokenCache.set(hash, hit);
      }
      return {
        ...hit.record,
        state: live.state as SessionRecord['state'],
        expiresAt: Number(live.expires_at),
        ceiling: BigInt(live.ceiling as string),
      };
    },

    /**
     * spec §3 DELETE row: revoked at once; repeated calls answer the same. The owner's and the
     * admin's stop are recorded alike: `revoked_by` on the session and the session.revoked event.
     */
    async revoke(s: SessionRecord, by: RevokedBy) {
      const at = now();
      await revokeSession(db, s.id, at, by, revokedEvents(at, by));
      return (await views([(await sessionById(db, s.id))!]))[0]!;
    },

    /** The effect recording sessions revoked by another change (an owner disabled), in its transaction. */
    revokedEvents,

    /** spec §3 paused row: a valid unused token raises the ceiling by at most softLimit.amount. */
    async continue(s: SessionRecord, body: unknown, baseUrl: string) {
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
          throw new CtlError(
            'malformed',
            `amount: at most softLimit.amount (${s.softLimit} minor units of ${s.currency})`,
          );
        raise = BigInt(b.amount);
      }
      const newCeiling = s.ceiling + raise;
      if (newCeiling > MAX_AMOUNT) throw new CtlError('malformed', 'the raised ceiling would be too large');
      const config = s.config;
      const actorJwk = s.grant.actorKey;
      if (s.pausedWindow) return continueWindowPause(s, nonce, raise);
      const grant = await mintGrant(
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
        throw new CtlError(
          'continuation_invalid',
          'the continuation token has been used, or the session is not paused',
        );
      return (await views([(await sessionById(db, s.id))!]))[0]!;
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
