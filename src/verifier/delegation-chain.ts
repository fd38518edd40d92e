/**
 * The walk of a delegation chain after the root grant's signature (PROTOCOL.md §14): each link's
 * signature by its parent's `actorKey`, its narrowing, depth, expiry and `issuedAt`. Each link's
 * signed text is the one step 0 wrote (artifacts/chain-text.ts), never written again here.
 */
import type { CtlCrypto } from '../crypto/types.js';
import type { Delegation, PolicyGrant } from '../artifacts/types.js';
import { checkNarrowing, type DelegationChain } from '../artifacts/delegation.js';
import type { LinkText } from '../artifacts/chain-text.js';
import { verifySignedText } from '../artifacts/signing.js';
import { fail } from '../errors.js';
import { checkWindow } from '../values.js';
import { utf8Encode } from '../encoding/utf8.js';
import { remember } from '../crypto/cache.js';

/** Signature verdicts by the link's signed text and its parent's key: never by object (PROTOCOL.md §12). */
export type LinkSignatureCache = Map<string, { text: string; ok: boolean }>;

/**
 * Walks `chain` root to leaf; throws `CtlError` (`delegation_invalid` naming the link and member,
 * `grant_expired`, `not_yet_valid`). The root grant's own signature and times are checked before.
 * `texts`: the chain's `linkTexts`.
 * @example await walkDelegationChain(c, chain, linkTexts(chain, rootText), now, tol, cache)
 */
export async function walkDelegationChain(
  c: CtlCrypto,
  chain: DelegationChain,
  texts: readonly LinkText[],
  now: number,
  tol: number,
  cache?: LinkSignatureCache,
): Promise<void> {
  const { root, links } = chain;
  const maxDepth = root.delegation?.maxDepth ?? 0;
  if (links.length > maxDepth)
    fail(
      'delegation_invalid',
      maxDepth === 0
        ? 'the root grant allows no delegation'
        : `${links.length} delegations below a root grant that allows ${maxDepth}`,
    );
  const ancestors: (PolicyGrant | Delegation)[] = [root];
  for (let i = 0; i < links.length; i++) {
    const link = links[i]!;
    const parent = ancestors[ancestors.length - 1]!;
    const field = `delegation[${i + 1}]`;
    if (link.keyId !== (await c.jwkThumbprint(parent.actorKey)))
      fail('delegation_invalid', `${field}.keyId is not the thumbprint of its parent's actorKey`);
    if (!(await linkSignatureOk(c, link, texts[i]!, parent, cache)))
      fail('delegation_invalid', `${field}.signature does not verify with its parent's actorKey`);
    checkNarrowing(parent, ancestors, link, field);
    checkWindow(link, `delegation ${link.delegationId}`, field, 'grant_expired', now, tol);
    ancestors.push(link);
  }
}

async function linkSignatureOk(
  c: CtlCrypto,
  link: Delegation,
  linkText: LinkText,
  parent: PolicyGrant | Delegation,
  cache: LinkSignatureCache | undefined,
): Promise<boolean> {
  const k = parent.actorKey;
  const text = `${k.kty}:${k.crv}:${k.x}:${k.y ?? ''}\n${linkText.whole}`;
  const hit = cache?.get(link.signature);
  if (hit && hit.text === text) return hit.ok;
  // The signed bytes of PROTOCOL.md §3 and §14: UTF-8("ctl-delegation/1\n") || JCS(link without signature).
  const ok = await verifySignedText(c, utf8Encode(`ctl-delegation/1\n${linkText.signed}`), link.signature, k);
  if (cache) remember(cache, link.signature, { text, ok }, 256);
  return ok;
}
