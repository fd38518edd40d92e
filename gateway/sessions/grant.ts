/**
 * The internal PolicyGrant behind each gateway session (spec §2.3), signed with the gateway's
 * grant key: minted at creation (a root or a child session) and again at continuation, with the
 * raised ceiling (spec §3 paused row).
 */
import { createSignedPolicyGrant, formatTimestamp, type PublicJwk } from '../../src/index.js';
import type { KeyRing } from '../keys/ring.js';
import type { SessionConfig } from './config.js';

/** What a grant says of its session. */
export interface GrantTerms {
  grantId: string;
  policyHash: string;
  config: SessionConfig;
  ceiling: bigint;
  actorJwk: PublicJwk;
  windowsStart: number | null;
}

/** What minting a grant needs of the gateway. */
export interface GrantMinting {
  keys: KeyRing;
  issuer: string;
  railName: string;
  /** Further rails payments of a session may use (x402), named in its grant's allowedRails. */
  extraRails?: string[];
  now: () => number;
}

function assetOf(currency: string) {
  // ISO 4217 codes are three letters; anything else (USDC, …) is a token asset code.
  return { standard: /^[A-Z]{3}$/.test(currency) ? 'iso4217' : 'token', code: currency };
}

/**
 * The session's grant, signed with the active grant key, its revocation URL under `baseUrl`.
 * @example await mintSessionGrant(deps, { grantId, policyHash, config, ceiling, actorJwk, windowsStart }, baseUrl)
 */
export async function mintSessionGrant(deps: GrantMinting, s: GrantTerms, baseUrl: string) {
  const { keys, now } = deps;
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
