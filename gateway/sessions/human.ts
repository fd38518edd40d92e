/**
 * Gateway sessions backed by a person's grant (spec §1 Human-Agent profile, PROTOCOL.md §10).
 * The agent still holds only a session token; the session's key is one the gateway made:
 *   1. POST /sessions/human/keys (owner): the gateway reserves the id of the session to come and
 *      returns the public half of that session's key (JWK and did:key) for the person to delegate to;
 *   2. the person signs a human-agent grant for that key (at their authority: `ctl human grant`);
 *   3. POST /sessions { humanGrant, …stricter controls } (owner): the grant's ceiling, purposes and
 *      expiry become the session's; the key is claimed once, a grant backs one session only.
 * Only a grant recorded at an authority this gateway trusts (HumanTrust.authorities,
 * CTL_GATEWAY_HUMAN_AUTHORITIES) backs a session: such an authority records a person's grant only
 * while that person is enrolled there (PROTOCOL.md §10), so the gateway asks it, at creation, whether
 * it holds the grant. Before each payment is made, the SBA the gateway signed is verified as a
 * merchant would verify it (verifyCtl): the person's signature, intentHash, destination list, and
 * the grant's revocation at that authority, asked for every payment (no cached answer), so a
 * revocation the authority recorded stops the next payment. Every request to an authority goes
 * through the gateway's guarded forwarder (net/forwarder.ts), and a refusal never repeats
 * what the authority answered.
 */
import { randomBytes } from 'node:crypto';
import {
  CtlError,
  canonicalize,
  didKeyFromJwk,
  formatTimestamp,
  generateKeyPair,
  jwkThumbprint,
  sha256Hex,
  utf8Encode,
  verifyPolicyGrant,
  type PolicyGrant,
  type SignedBudgetAuthorization,
  type PublicJwk,
  type VerifyCtlResult,
} from '../../src/index.js';
import { createVerifyCtl, type FetchLike } from '../../src/entries/server.js';
import { HttpError, badRequest, unauthorized, type SqlDatabase } from '../../service-kit/index.js';
import { insertOwnedSession, sessionById, type SessionRecord } from './store.js';
import { configColumns, parseSessionConfig } from './config.js';
import { checkTargetUrl, type TargetPolicy } from '../net/address-guard.js';
import { hashToken } from './tokens.js';
import type { GatewayEvents } from './events.js';

/** How long a prepared session key waits for the person's grant. */
export const HUMAN_KEY_TTL_MS = 24 * 3600_000;

/** Where people's grants may come from, and how the gateway reaches there. */
export interface HumanTrust {
  /**
   * Base URLs of the policy authorities whose recorded grants may back a session
   * (CTL_GATEWAY_HUMAN_AUTHORITIES); a grant's revocationUrl must be `<base>/revoke?grantId=<id>`
   * for one of them. Empty: no person's grant is accepted.
   */
  authorities: readonly string[];
  /** The gateway's guarded outbound fetch (net/forwarder.ts guardedFetch): the address guard at connect time. */
  fetch: FetchLike;
}

const baseOf = (url: string) => url.replace(/\/+$/, '');

/** The trusted authority that recorded this grant (by its revocation URL), or undefined. */
function authorityOf(trust: HumanTrust | undefined, grant: PolicyGrant): string | undefined {
  return trust?.authorities
    .map(baseOf)
    .find((base) => grant.revocationUrl === `${base}/revoke?grantId=${encodeURIComponent(grant.grantId)}`);
}

// One text whatever the authority did (no answer, an error status, a body that is not a status):
// a refusal must not tell the caller what is behind an address.
const AUTHORITY_UNAVAILABLE = "the person's authority could not be asked about this grant";

/**
 * Asks the authority whether it holds this very grant (spec §4.3 GET /revoke, with the grant's
 * hash: an id alone can be copied into a grant anyone signs): 'unknown' on 404 (it never recorded
 * a grant with this id and content), else its revocation state. Anything else is `revocation_unavailable`.
 */
async function askAuthority(trust: HumanTrust, grant: PolicyGrant): Promise<'active' | 'revoked' | 'unknown'> {
  const grantHash = await sha256Hex(utf8Encode(canonicalize(grant)));
  try {
    const res = await trust.fetch(`${grant.revocationUrl}&grantHash=${grantHash}`, {
      method: 'GET',
      headers: { accept: 'application/json' },
      redirect: 'error',
    });
    if (res.status === 404) return 'unknown';
    if (res.ok) {
      const body = JSON.parse(await res.text()) as { grantId?: unknown; revoked?: unknown } | null;
      if (body?.grantId === grant.grantId && typeof body.revoked === 'boolean')
        return body.revoked ? 'revoked' : 'active';
    }
  } catch {
    // fall through: the same refusal as any other failure
  }
  throw new CtlError('revocation_unavailable', `humanGrant: ${AUTHORITY_UNAVAILABLE}`);
}

/**
 * The key of a session to be created with `sessionId`, and what its `actor_key_pem` will hold.
 * The session id is reserved first, so a gateway that derives session keys from their id stores
 * no private key here (`derive(id)` and its marker); the default makes a key pair and keeps its
 * PEM, as every session of this gateway does.
 */
export type SessionKeySource = (sessionId: string) => Promise<{ publicJwk: PublicJwk; stored: string }>;

const generatedKey: SessionKeySource = async () => {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  return { publicJwk: pair.publicJwk, stored: pair.privateKeyPem };
};

/** The controls an owner may add on top of the person's grant: only ones that restrict. */
const EXTRA_FIELDS = [
  'humanGrant',
  'label',
  'merchantAllowlist',
  'merchantBlocklist',
  'velocity',
  'webhookUrl',
  'thresholds',
  'trustLevel',
  'defaultPurpose',
];

export const isHumanSessionRequest = (body: unknown): body is Record<string, unknown> =>
  typeof body === 'object' && body !== null && !Array.isArray(body) && 'humanGrant' in body;

export interface HumanSessionDeps {
  db: SqlDatabase;
  targets: TargetPolicy;
  now: () => number;
  onCreated?: (expiresAt: number) => void;
  keySource?: SessionKeySource;
  /** The gateway's longest session (CTL_GATEWAY_MAX_SESSION_SECONDS) applies to a person's grant too. */
  maxSessionSeconds?: number;
  /** Records `session.created` in the session's insert transaction, as for every session. */
  events?: Pick<GatewayEvents, 'effect'>;
  /** Which authorities' grants are accepted; absent: none. */
  humans?: HumanTrust;
}

/** Step 1: the id of this owner's next session reserved, and the public half of its key. */
export async function prepareHumanSessionKey(d: HumanSessionDeps, ownerId: string) {
  const sessionId = `sess_${randomBytes(16).toString('base64url')}`;
  const { publicJwk, stored } = await (d.keySource ?? generatedKey)(sessionId);
  const kid = await jwkThumbprint(publicJwk);
  const now = d.now();
  await d.db.run(
    'INSERT INTO gw_human_session_reservations (session_id, owner_id, kid, actor_key, ' +
      'created_at, expires_at, used_at) VALUES (?, ?, ?, ?, ?, ?, NULL)',
    [sessionId, ownerId, kid, stored, now, now + HUMAN_KEY_TTL_MS],
  );
  return {
    actorKey: publicJwk,
    actorDid: didKeyFromJwk(publicJwk),
    keyId: kid,
    expiresAt: formatTimestamp(now + HUMAN_KEY_TTL_MS),
  };
}

/** Step 3: POST /sessions with `humanGrant`. The response has the shape of any session's (spec §2.2). */
export async function createHumanSession(
  d: HumanSessionDeps,
  ownerId: string,
  body: Record<string, unknown>,
  baseUrl: string,
) {
  for (const k of Object.keys(body)) {
    if (!EXTRA_FIELDS.includes(k))
      throw badRequest(`${k}: not allowed with humanGrant (the budget, purposes and expiry are the person's grant's)`);
  }
  const now = d.now();
  const checked = await verifyPolicyGrant(body['humanGrant'], { now: () => now });
  if (!checked.valid) throw new CtlError(checked.error.code, `humanGrant: ${checked.error.message}`);
  const grant = checked.grant;
  if (grant.profile !== 'human-agent')
    throw badRequest('humanGrant: must be a grant with profile "human-agent", signed by the person\'s did:key');
  if (!grant.allowedPurposes)
    throw badRequest('humanGrant: must name allowedPurposes (a session always restricts purposes)');
  // A bound the session cannot enforce is refused, never half-enforced (PROTOCOL.md §13).
  if (grant.windows)
    throw new CtlError(
      'unsupported_feature',
      'humanGrant: a person-backed session does not carry budget windows (PROTOCOL.md §13): ' +
        'issue the grant without windows',
    );
  // PROTOCOL.md §10: trust is not self-certifying. The person must be enrolled where this gateway
  // trusts, which the authority vouches for by holding the grant.
  if (!authorityOf(d.humans, grant)) {
    throw new CtlError(
      'issuer_not_trusted',
      'humanGrant: not issued at an authority this gateway trusts (CTL_GATEWAY_HUMAN_AUTHORITIES): ' +
        'its revocationUrl must be <authority>/revoke?grantId=<grantId>',
    );
  }
  const held = await askAuthority(d.humans!, grant);
  if (held === 'unknown')
    throw new CtlError(
      'issuer_not_trusted',
      `humanGrant: the authority has no record of grant '${grant.grantId}' (the person is ` +
        'not enrolled there, or the grant was not submitted to it)',
    );
  if (held === 'revoked') throw new CtlError('grant_revoked', `humanGrant: grant '${grant.grantId}' has been revoked`);
  const { humanGrant: _g, ...extra } = body;
  // The person's bounds are the session's; the owner's extra controls are parsed as any session's.
  const config = parseSessionConfig(
    {
      ...extra,
      budget: { amount: grant.maxAmountMinor, currency: grant.currency },
      purposes: grant.allowedPurposes,
      expiresAt: grant.expiresAt,
    },
    now,
    { maxSessionSeconds: d.maxSessionSeconds },
  );
  if (config.webhookUrl) {
    try {
      checkTargetUrl(config.webhookUrl, d.targets);
    } catch (e) {
      throw new CtlError('target_not_allowed', `webhookUrl: ${(e as Error).message}`);
    }
  }
  const kid = await jwkThumbprint(grant.actorKey as PublicJwk);
  // Claimed once, by its owner, while fresh: one statement, so two requests cannot both claim it.
  const { changes } = await d.db.run(
    'UPDATE gw_human_session_reservations SET used_at = ? WHERE kid = ? AND owner_id = ' +
      '? AND used_at IS NULL AND expires_at > ?',
    [now, kid, ownerId, now],
  );
  if (changes !== 1) {
    throw new HttpError(
      409,
      'conflict',
      'humanGrant.actorKey: not a session key this owner prepared (POST /sessions/human/keys), ' +
        'or already used or lapsed',
    );
  }
  const reserved = (await d.db.get<{ session_id: string; actor_key: string }>(
    'SELECT session_id, actor_key FROM gw_human_session_reservations WHERE kid = ?',
    [kid],
  ))!;
  const id = reserved.session_id;
  const token = `gw_sess_${randomBytes(32).toString('base64url')}`;
  const expiresAt = Date.parse(grant.expiresAt);
  let inserted: boolean;
  try {
    inserted = await insertOwnedSession(
      d.db,
      {
        id,
        ownerId,
        tokenHash: hashToken(token),
        label: config.label,
        currency: grant.currency,
        ceiling: BigInt(grant.maxAmountMinor),
        expiresAt,
        createdAt: now,
        config,
        policyHash: grant.policyHash,
        grantId: grant.grantId,
        grant,
        actorKeyPem: reserved.actor_key,
        softLimit: null,
        ...configColumns(config),
      },
      d.events?.effect((ok: boolean) =>
        ok
          ? [
              {
                session: { id, webhookUrl: null },
                type: 'session.created',
                actor: 'owner',
                data: {
                  ownerId,
                  policyHash: grant.policyHash,
                  grantId: grant.grantId,
                  expiresAt: grant.expiresAt,
                  budget: config.budget,
                  issuer: grant.issuer,
                },
              },
            ]
          : [],
      ),
    );
  } catch (e) {
    // gw_sessions.grant_id is unique: one grant, one ceiling, one session.
    if (await d.db.get('SELECT 1 AS x FROM gw_sessions WHERE grant_id = ?', [grant.grantId])) {
      throw new HttpError(409, 'conflict', `grant '${grant.grantId}' already backs a session`);
    }
    throw e;
  }
  if (!inserted) throw unauthorized('the owner of this API key has been disabled');
  d.onCreated?.(expiresAt);
  const created = (await sessionById(d.db, id))!;
  return {
    sessionToken: token,
    sessionId: id,
    revocationUrl: `${baseUrl}/sessions/${id}`,
    policyHash: created.policyHash,
    grantId: grant.grantId,
    expiresAt: grant.expiresAt,
    issuer: grant.issuer,
    ...(created.webhookSecret ? { webhookSecret: created.webhookSecret } : {}),
  };
}

/**
 * For a session under a person's grant: the SBA about to be paid, verified as a merchant would
 * (the person's DID, intentHash, destination list, revocation online). undefined when it passes
 * or when the session is not a human one. The authority is asked for every payment: a verifier of
 * its own per call, so no cached or shared in-flight answer can predate a revocation.
 */
export async function humanChainRefusal(
  session: SessionRecord,
  sba: SignedBudgetAuthorization,
  payment: { amount: string; currency: string; merchantId: string; rail: string; purpose: string },
  now: () => number,
  trust: HumanTrust | undefined,
): Promise<{ code: CtlError['code']; message: string } | undefined> {
  const grant = session.grant;
  if (grant.profile !== 'human-agent') return undefined;
  if (!authorityOf(trust, grant))
    return {
      code: 'issuer_not_trusted',
      message: "the person's grant is not from an authority this gateway trusts (CTL_GATEWAY_HUMAN_AUTHORITIES)",
    };
  const verify = createVerifyCtl();
  const r: VerifyCtlResult = await verify(sba, {
    ...payment,
    trustedHumans: [grant.issuer],
    revocationTtl: 0,
    fetch: trust!.fetch,
    now,
  });
  if (r.valid) return undefined;
  // The SDK's text names the status or error the authority gave: not for the agent.
  return r.error.code === 'revocation_unavailable' ? { code: r.error.code, message: AUTHORITY_UNAVAILABLE } : r.error;
}
