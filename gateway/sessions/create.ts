/**
 * An owner's new session (spec §3 first row, POST /sessions): its configuration checked, the
 * internal PolicyGrant minted (spec §2.3) for the session's derived actor key (the "wallet
 * session per gateway session" of spec §1), and the session inserted while its owner is enabled.
 */
import { randomBytes } from 'node:crypto';
import { policyHash, formatTimestamp, CtlError } from '../../src/index.js';
import { unauthorized, type SqlDatabase } from '../../service-kit/index.js';
import { insertOwnedSession, sessionById } from './store.js';
import { configColumns, parseSessionConfig } from './config.js';
import { checkTargetUrl, type TargetPolicy } from '../net/address-guard.js';
import { DERIVED_MARKER, type SessionKeys } from './actor-keys.js';
import type { GatewayEvents } from './events.js';
import { createHumanSession, isHumanSessionRequest, type HumanSessionDeps } from './human.js';
import { mintSessionGrant, type GrantMinting } from './grant.js';
import { hashToken } from './tokens.js';

/** What making an owner's session needs of the gateway. */
export interface RootSessionDeps extends GrantMinting {
  db: SqlDatabase;
  /** Derives each session's actor key (nothing stored). */
  sessionKeys: SessionKeys;
  events: GatewayEvents;
  targets: TargetPolicy;
  onCreated?: (expiresAt: number) => void;
  /** How far ahead `expiresAt` may be, in seconds (config.ts; default none). */
  maxSessionSeconds?: number;
}

/**
 * The owner's new session, with its token (shown once) and webhook secret; a body with a
 * person's grant goes to human.ts with `humanDeps`.
 * @example await createRootSession(deps, humanDeps, ownerId, { budget, purposes, expiresAt }, baseUrl)
 */
export async function createRootSession(
  deps: RootSessionDeps,
  humanDeps: HumanSessionDeps,
  ownerId: string,
  body: unknown,
  baseUrl: string,
) {
  const { db, now } = deps;
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
  const grant = await mintSessionGrant(
    deps,
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
      ...configColumns(config),
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
}
