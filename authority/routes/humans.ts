/**
 * The Human-Agent profile at the authority (spec §1 profiles, PROTOCOL.md §10):
 * - an admin enrols the DIDs of people who may delegate (POST/GET /humans, DELETE /humans/{did});
 * - a grant in two steps: POST /grants/human/prepare fixes every member (grantId, revocationUrl,
 *   issuedAt, policyHash) and returns the unsigned grant; the person signs exactly that object
 *   with their did:key and POSTs it to /grants, where it is checked byte for byte against what
 *   was prepared, stored, audited and revocable like any other grant. The prepare step needs no
 *   API key and writes nothing: the grantId carries an HMAC (a key kept in the database) over
 *   every other member, so the authority recognises its own draft without storing it;
 * - Trust Bundles list enrolled humans as issuers where their scope matches;
 * - POST /revoke also takes a `ctl-revocation/1` signed by the grant's DID, without an API key.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import {
  DEFAULT_STATUS_BY_CODE,
  HttpError,
  badRequest,
  notFound,
  optionalText,
  requireScope,
} from '../../service-kit/index.js';
import {
  CtlError,
  canonicalize,
  didKeyToJwk,
  didKeyUrl,
  formatTimestamp,
  isDidKey,
  newId,
  parseGrant,
  policyHash,
  toPublicJwk,
  verifyPolicyGrant,
  verifySignedRevocation,
  type BundleScope,
  type PolicyGrant,
  type PublishedJwk,
  type TrustedIssuer,
} from '../../src/index.js';
import { closedObject, futureTimestamp, optional, required } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';
import { readScope } from './trust-bundles.js';
import { MAX_PEOPLE_PER_BUNDLE, type EnrolledHuman } from '../store/humans.js';

/** How long a prepared grant waits for the person's signature (from its `issuedAt`). */
export const DRAFT_TTL_MS = 15 * 60_000;
/** `grant_` + 16 random bytes + the 32-byte draft tag, base64url. */
const PREPARED_ID = /^grant_([A-Za-z0-9_-]{22})([A-Za-z0-9_-]{43})$/;
const draftKeys = new WeakMap<RouteDeps, Promise<Buffer>>();

/**
 * HMAC-SHA-256 over a prepared grant's members other than `grantId`, `revocationUrl` (which
 * embed the tag) and `signature`: what the authority prepared, recognisable without storing it.
 */
async function draftTag(d: RouteDeps, nonce: string, members: Record<string, unknown>): Promise<Buffer> {
  let key = draftKeys.get(d);
  if (!key) {
    key = d.store.draftKey(() => randomBytes(32).toString('base64url')).then((k) => Buffer.from(k, 'base64url'));
    draftKeys.set(d, key);
  }
  return createHmac('sha256', await key)
    .update(`ctl-human-draft/1\n${nonce}\n${canonicalize(members)}`)
    .digest();
}

/** The policy a person's grant implements: the delegation itself, defaults filled in (PROTOCOL.md §2). */
function policyOf(g: Record<string, unknown>): Record<string, unknown> {
  const policy: Record<string, unknown> = {};
  for (const f of [
    'profile',
    'issuer',
    'actorKey',
    'maxAmountMinor',
    'currency',
    'expiresAt',
    'allowedRails',
    'allowedAssets',
    'allowedPurposes',
    'destinationAllowlist',
    'velocity',
    'offline',
  ]) {
    if (g[f] !== undefined) policy[f] = g[f];
  }
  return policy;
}
/** A signed revocation older than this is refused: replaying a captured one later gains nothing. */
export const REVOCATION_MAX_AGE_MS = 5 * 60_000;
/** People's clocks drift: the freshness window allows this much either way. */
export const REVOCATION_TOLERANCE_MS = 60_000;

const PREPARE_REQUEST = [
  'issuer',
  'actorKey',
  'maxAmountMinor',
  'currency',
  'expiresAt',
  'allowedPurposes',
  'allowedRails',
  'allowedAssets',
  'destinationAllowlist',
  'velocity',
  'offline',
] as const;

/** A refusal with the SDK's code, at the status the services use for it. */
function refuse(code: string, message: string): HttpError {
  return new HttpError(DEFAULT_STATUS_BY_CODE[code] ?? (code === 'unauthorized' ? 401 : 400), code, message);
}

function didParam(value: unknown, field: string): string {
  if (!isDidKey(value)) throw badRequest(`${field}: must be a did:key (did:key:z…)`);
  try {
    didKeyToJwk(value);
  } catch (e) {
    if (e instanceof CtlError) throw refuse(e.code, e.message);
    throw e;
  }
  return value;
}

const humanView = (h: EnrolledHuman) => ({
  did: h.did,
  label: h.label,
  scope: h.scope,
  enrolledAt: h.enrolledAt,
  ...(h.removedAt ? { removedAt: h.removedAt } : {}),
});

/**
 * The enrolled humans a bundle of `scope` lists: every scope field a person has set must equal the
 * bundle's. At most MAX_PEOPLE_PER_BUNDLE, which enrolment enforces; a database that holds more
 * (enrolled before it did) lists the earliest enrolled and leaves the rest out, so their grants are
 * refused offline (never trusted by mistake) while the bundle still carries every revocation.
 */
export function listedHumans(
  humans: readonly EnrolledHuman[],
  scope: BundleScope,
): { listed: EnrolledHuman[]; left: number } {
  const matching = humans.filter((h) =>
    (['category', 'merchant', 'region'] as const).every((f) => h.scope[f] === undefined || h.scope[f] === scope[f]),
  );
  if (matching.length <= MAX_PEOPLE_PER_BUNDLE) return { listed: matching, left: 0 };
  const earliest = new Set(
    [...matching]
      .sort((a, b) => (a.enrolledAt < b.enrolledAt ? -1 : a.enrolledAt > b.enrolledAt ? 1 : a.did < b.did ? -1 : 1))
      .slice(0, MAX_PEOPLE_PER_BUNDLE),
  );
  return { listed: matching.filter((h) => earliest.has(h)), left: matching.length - MAX_PEOPLE_PER_BUNDLE };
}

/** The issuers of a bundle of `scope` for the people it lists (listedHumans). */
export function humanIssuers(humans: readonly EnrolledHuman[], scope: BundleScope): TrustedIssuer[] {
  return listedHumans(humans, scope).listed.map((h) => {
    const jwk = JSON.parse(h.publicJwk) as PublishedJwk;
    const key = {
      ...jwk,
      kid: didKeyUrl(h.did),
      alg: jwk.kty === 'OKP' ? 'EdDSA' : 'ES256',
      purposes: ['grant'],
    } as PublishedJwk;
    return { issuer: h.did, keys: [key] };
  });
}

export function humanRoutes(router: Router, d: RouteDeps): void {
  const admin = requireScope(d.authenticate, 'admin');

  router.post('/humans', admin, d.body, async (ctx) => {
    const body = closedObject(ctx.request.body, 'body', ['did', 'label', 'scope']);
    const did = didParam(required(body, 'did'), 'did');
    const label = optionalText(body, 'label', 200);
    const scopeValue = optional(body, 'scope');
    const scope = scopeValue === undefined ? {} : readScope(scopeValue, 'scope');
    const at = new Date(d.now()).toISOString();
    const publicJwk = JSON.stringify(didKeyToJwk(did));
    const enrolment = await d.store.enrolHuman({
      did,
      label,
      scope,
      publicJwk,
      enrolledAt: at,
      enrolledBy: actorOf(ctx.state),
    });
    if (!enrolment.created && enrolment.reason === 'enrolled')
      throw new HttpError(409, 'conflict', `${did} is already enrolled: DELETE /humans/{did} first to change it`);
    if (!enrolment.created) {
      throw new HttpError(
        409,
        'conflict',
        `a Trust Bundle lists at most ${MAX_PEOPLE_PER_BUNDLE} people (${MAX_PEOPLE_PER_BUNDLE + 1} ` +
          `issuers with the authority) and one listing this person would list ${enrolment.listed}: ` +
          'give people narrower scopes (category, merchant, region) or remove some',
      );
    }
    await d.audit.record(actorOf(ctx.state), 'human.enrol', did, { label, scope });
    ctx.status = 201;
    ctx.body = humanView((await d.store.getHuman(did))!);
  });

  router.get('/humans', admin, async (ctx) => {
    const humans = await d.store.listHumans({ includeRemoved: ctx.query['includeRemoved'] === 'true' });
    ctx.body = { humans: humans.map(humanView) };
  });

  // Removing a person also revokes every grant they issued that still stands: a removed delegator
  // must not keep agents spending (online verifiers refuse at once, offline ones at their next bundle).
  router.delete('/humans/:did', admin, async (ctx) => {
    const did = didParam(ctx.params['did'], 'did');
    const at = new Date(d.now()).toISOString();
    const actor = actorOf(ctx.state);
    const removed = await d.store.removeHuman(did, at);
    if (!removed) throw notFound(`${did} is not enrolled`);
    const revokedGrants: string[] = [];
    for (const id of await d.store.unrevokedGrantIdsOf(didKeyUrl(did))) {
      const r = await d.store.revokeGrant(
        id,
        { at, actor, reason: 'issuer removed' },
        d.audit.entry(actor, 'grant.revoke', id, { reason: 'issuer removed' }, (x) => x.changed),
      );
      if (r?.changed) revokedGrants.push(id);
    }
    if (removed.changed) await d.audit.record(actor, 'human.remove', did, { revokedGrants: revokedGrants.length });
    ctx.body = { did, removedAt: removed.removedAt, revokedGrants };
  });

  // No API key: the person (or their app) asks for the exact grant to sign. Only for an enrolled
  // DID; nothing is written (see draftTag), so anyone may call it as often as the rate limits allow.
  router.post('/grants/human/prepare', d.body, async (ctx) => {
    const now = d.now();
    const body = closedObject(ctx.request.body, 'body', PREPARE_REQUEST);
    const did = didParam(required(body, 'issuer'), 'issuer');
    const human = await d.store.getHuman(did);
    if (!human || human.removedAt) throw refuse('issuer_not_trusted', `${did} is not enrolled at this authority`);
    for (const f of ['actorKey', 'maxAmountMinor', 'currency'] as const) required(body, f);
    futureTimestamp(required(body, 'expiresAt'), 'expiresAt', now);
    let actorKey;
    try {
      actorKey = await toPublicJwk(body['actorKey'] as any);
    } catch {
      throw badRequest('actorKey: must be a public key (JWK or PEM) for Ed25519 or P-256');
    }
    const currency = body['currency'];
    const policy = policyOf({
      ...body,
      profile: 'human-agent',
      issuer: did,
      actorKey,
      allowedRails: optional(body, 'allowedRails') ?? ['x402'],
      allowedAssets: optional(body, 'allowedAssets') ?? [{ standard: 'iso4217', code: currency }],
    });
    for (const f of Object.keys(policy))
      if (policy[f] === null) throw badRequest(`${f}: must not be null (omit it instead)`);
    const nonce = randomBytes(16).toString('base64url');
    let unsigned: Record<string, unknown>;
    try {
      const members = {
        version: 1,
        keyId: didKeyUrl(did),
        issuedAt: formatTimestamp(now),
        ...policy,
        policyHash: policyHash(policy),
      };
      const grantId = `grant_${nonce}${(await draftTag(d, nonce, members)).toString('base64url')}`;
      unsigned = {
        ...members,
        grantId,
        revocationUrl: `${d.revocationBaseUrl}/revoke?grantId=${encodeURIComponent(grantId)}`,
      };
      // What a verifier would refuse to read is refused here, before anyone signs it.
      parseGrant({ ...unsigned, signature: 'A'.repeat(86) });
    } catch (e) {
      if (e instanceof CtlError) throw refuse(e.code, e.message.replace(/^grant\./, ''));
      throw e;
    }
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { grant: JSON.parse(canonicalize(unsigned)), signBefore: formatTimestamp(now + DRAFT_TTL_MS) };
  });
}

/**
 * Sits in front of POST /grants: a body that is a signed human-agent grant is taken here (no API
 * key: the person's signature over the prepared draft is the authority); anything else goes on
 * to the API-key route.
 */
export function humanGrantGate(d: RouteDeps): Middleware {
  return async (ctx, next) => {
    const body = ctx.request.body as Record<string, unknown> | undefined;
    if (
      !body ||
      typeof body !== 'object' ||
      Array.isArray(body) ||
      body['profile'] !== 'human-agent' ||
      !('signature' in body)
    )
      return next();
    const now = d.now();
    let grant: PolicyGrant;
    try {
      grant = parseGrant(body);
    } catch (e) {
      if (e instanceof CtlError) throw refuse(e.code, e.message);
      throw e;
    }
    const human = await d.store.getHuman(grant.issuer);
    if (!human || human.removedAt)
      throw refuse('issuer_not_trusted', `${grant.issuer} is not enrolled at this authority`);
    // Prepared here, and signed unchanged: the tag in the grantId covers every other member.
    const m = PREPARED_ID.exec(grant.grantId);
    if (!m)
      throw notFound(`grant '${grant.grantId}' was not prepared by this authority: POST /grants/human/prepare first`);
    const { signature: _sig, grantId, revocationUrl, ...members } = grant;
    const tag = Buffer.from(m[2]!, 'base64url');
    const expected = await draftTag(d, m[1]!, members);
    if (
      tag.length !== expected.length ||
      !timingSafeEqual(tag, expected) ||
      revocationUrl !== `${d.revocationBaseUrl}/revoke?grantId=${encodeURIComponent(grantId)}`
    ) {
      throw new HttpError(
        409,
        'conflict',
        'the signed grant differs from the one prepared: sign the prepared object unchanged',
      );
    }
    if (now - Date.parse(grant.issuedAt) > DRAFT_TTL_MS) {
      throw new HttpError(
        409,
        'conflict',
        `the grant was prepared at ${grant.issuedAt} and not signed within ${DRAFT_TTL_MS / 60_000} ` +
          'minutes: prepare it again',
      );
    }
    const v = await verifyPolicyGrant(grant, { now: d.now });
    if (!v.valid) throw refuse(v.error.code, v.error.message);
    const policy = policyOf(grant as unknown as Record<string, unknown>);
    if (policyHash(policy) !== grant.policyHash)
      throw new HttpError(409, 'conflict', 'the grant does not implement the policy it names');
    await d.store.putPolicy(grant.policyHash, canonicalize(policy), new Date(now).toISOString());
    try {
      // Its audit entry (and transparency-log entry) in the grant's own transaction.
      await d.store.putGrant(
        {
          grantId: grant.grantId,
          policyHash: grant.policyHash,
          keyId: grant.keyId,
          grant: JSON.stringify(grant),
          issuedAt: grant.issuedAt,
          expiresAtMs: Date.parse(grant.expiresAt),
          createdBy: grant.issuer,
        },
        d.audit.entry(grant.issuer, 'grant.issue', grant.grantId, {
          profile: 'human-agent',
          policyHash: grant.policyHash,
          keyId: grant.keyId,
          expiresAt: grant.expiresAt,
        }),
      );
    } catch (e) {
      // Two submissions at once: the grant's primary key lets one in.
      if (await d.store.getGrant(grant.grantId, { includeDeleted: true }))
        throw new HttpError(409, 'conflict', `grant '${grant.grantId}' was already submitted`);
      throw e;
    }
    d.counters.grantIssued('person');
    ctx.status = 201;
    ctx.body = grant;
  };
}

/**
 * Sits in front of POST /revoke: a body that is a `ctl-revocation/1` (it has a `signature`) is
 * checked here: signed by the DID that issued the grant, fresh (REVOCATION_MAX_AGE_MS). Revoking
 * is idempotent, so a replay inside the window only repeats what happened. Anything else goes on
 * to the API-key route.
 */
export function humanRevocationGate(d: RouteDeps): Middleware {
  return async (ctx, next) => {
    const body = ctx.request.body as Record<string, unknown> | undefined;
    if (!body || typeof body !== 'object' || Array.isArray(body) || !('signature' in body)) return next();
    const v = await verifySignedRevocation(body, {
      now: d.now,
      maxAgeMs: REVOCATION_MAX_AGE_MS,
      clockToleranceMs: REVOCATION_TOLERANCE_MS,
    });
    if (!v.valid) throw refuse(v.error.code, v.error.message);
    const r = v.revocation;
    const stored = await d.store.getGrant(r.grantId, { includeDeleted: true });
    if (!stored) throw notFound(`no grant '${r.grantId}'`);
    const grant = JSON.parse(stored.grant) as PolicyGrant;
    if (grant.issuer !== r.issuer)
      throw new HttpError(403, 'forbidden', 'only the DID that issued a grant may revoke it with a signed revocation');
    // The signed revocation itself is the evidence kept in the audit log, in the revocation's transaction.
    const res = await d.store.revokeGrant(
      r.grantId,
      { at: new Date(d.now()).toISOString(), actor: r.issuer, reason: 'revoked by its issuer' },
      d.audit.entry(
        r.issuer,
        'grant.revoke',
        r.grantId,
        { reason: 'revoked by its issuer', revocation: r },
        (x) => x.changed,
      ),
    );
    if (!res) throw notFound(`no grant '${r.grantId}'`);
    if (res.changed) d.counters.grantRevoked('signed');
    ctx.body = { grantId: r.grantId, revoked: true, revokedAt: res.revokedAt };
  };
}
