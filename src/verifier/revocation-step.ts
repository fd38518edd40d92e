/**
 * PROTOCOL.md §5 step 3: revocation. The bundles' revocations always (kept for good, §12); then
 * the host's revocation source, or the grant's `revocationUrl` unless the verifier runs offline.
 * Every id of a chain, root first: a revoked link revokes everything below it (§14).
 */
import type { VerifyCtlOptions } from './options.js';
import type { PresentedSba } from './presented-sba.js';
import type { VerifyTimes } from './grant-key.js';
import type { RevocationChecker } from '../revocation.js';
import { createSourceChecker, revocationTokenId } from '../revocation-source.js';
import { chainIds, linkRevocationUrl } from '../artifacts/link-revocation.js';
import { featureOf, viaModule, type VerifierFeatures } from './features.js';
import { fail } from '../errors.js';

/** Throws `grant_revoked`, `revocation_unavailable` or `malformed`; returns the ids asked about, root first. */
export type CheckRevocation = (
  p: PresentedSba,
  o: VerifyCtlOptions,
  t: VerifyTimes,
  keptRevoked: ReadonlySet<string>,
) => Promise<{ id: string; name: string }[]>;

/** @example const checkRevocation = createRevocationStep(builtIn); await checkRevocation(p, o, t, kept) */
export function createRevocationStep(builtIn: VerifierFeatures): CheckRevocation {
  let revocation: RevocationChecker | undefined;
  let askSource: ReturnType<typeof createSourceChecker> | undefined;

  return async function checkRevocation(p, o, t, keptRevoked) {
    const grant = p.chain.root;
    const { now, revocationTtl } = t;
    // Each link's revocation id hashes the text step 0 wrote (PROTOCOL.md §14).
    const ids = chainIds(p.chain, p.links);
    for (const { id, name } of ids)
      if (keptRevoked.has(id) || isKept(o.keptRevocations, id))
        fail('grant_revoked', `${name} is revoked (trust bundle)`);
    if (o.revocationSource !== undefined) {
      // The host's source (a chain's revocation tokens) instead of the URL (src/revocation-source.ts).
      if (typeof o.revocationSource !== 'function') fail('malformed', 'options.revocationSource must be a function');
      askSource ??= createSourceChecker();
      for (const [i, { id, name }] of ids.entries()) {
        const q =
          i === 0
            ? { kind: 'grant' as const, id, tokenId: revocationTokenId(grant), grant }
            : { kind: 'delegation' as const, id, tokenId: id, grant };
        if ((await askSource(o.revocationSource, q, revocationTtl, now)).revoked)
          fail('grant_revoked', `${name} is revoked (revocation source)`);
      }
    } else if (!o.offline) {
      const online = featureOf(builtIn, 'online', 'revocation is checked online unless offline: true');
      revocation ??= online.createRevocationChecker();
      for (const { id, name } of ids) {
        const status = await viaModule(() =>
          revocation!.check(id === grant.grantId ? grant.revocationUrl : linkRevocationUrl(grant, id), id, {
            ttlMs: revocationTtl,
            now,
            fetch: o.fetch ?? online.hostFetch(),
            timeoutMs: t.revocationTimeoutMs,
          }),
        );
        if (status.revoked) fail('grant_revoked', `${name} is revoked`);
      }
    }
    return ids;
  };
}

function isKept(kept: VerifyCtlOptions['keptRevocations'], id: string): boolean {
  if (kept === undefined) return false;
  if (Array.isArray(kept)) return kept.includes(id);
  if (typeof (kept as ReadonlySet<string>).has === 'function') return (kept as ReadonlySet<string>).has(id);
  return fail('malformed', 'options.keptRevocations must be a Set or an array of grant ids');
}
